package dev.granary.tools.config;

import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import dev.granary.client.vfs.ClientConfig;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The cluster configuration file (YAML, snake_case keys), shared by {@code granary mds},
 * {@code granary oss}, {@code granary mount} and written by {@code granary quickstart}.
 * The reference of every key is in README.md ("Configuration"). Unknown keys are errors, so a
 * typo never silently falls back to a default.
 */
public final class GranaryConfig {
    /** Cluster name; the Raft group id derives from it. */
    public String cluster = "granary";
    /** Folder for MDS storage (one subfolder per peer) and, for the embedded S3, its bucket folder. */
    public String dataDir = "granary-data";
    /** The MDS Raft peers (3 for HA; 1 allowed for dev). */
    public List<Node> mds = new ArrayList<>();
    /** The OSS gRPC servers. */
    public List<Node> oss = new ArrayList<>();
    /** OSS shared read cache size, e.g. "512MiB". */
    public String ossCache = "512MiB";
    /**
     * Size of each OSS's local-disk tier of the read cache (for datasets larger than memory), e.g.
     * "200GiB"; "0" (the default) for none.
     */
    public String ossDiskCache = "0";
    /** Folder of the disk tiers (each OSS uses a subfolder named by its id); empty: {@code <data_dir>/oss-cache}. */
    public String ossDiskCacheDir = "";
    /** The S3 endpoint the OSSes use; credentials are read by OSSes only. */
    public S3 s3 = new S3();
    /** The OSTs: one bucket (+ prefix) each on the S3 endpoint. */
    public List<Ost> osts = new ArrayList<>();
    /** FUSE client settings. */
    public Client client = new Client();
    /** Raft settings of the MDS peers (give every peer of a cluster the same). */
    public Raft raft = new Raft();
    /** Block garbage collection: when freed blocks are deleted from the OSTs. */
    public Gc gc = new Gc();

    /** One server process: a stable id and its host:port. */
    public static final class Node {
        public String id;
        public String address;

        public Node() {}

        public Node(String id, String address) {
            this.id = id;
            this.address = address;
        }
    }

    /** S3 endpoint settings ("embedded" runs S3Proxy in the process of quickstart). */
    public static final class S3 {
        public String endpoint = "embedded";
        /** For endpoint "embedded": the port it listens on (127.0.0.1). */
        public int embeddedPort = 19000;
        public String region = "us-east-1";
        public String accessKey = "granary";
        public String secretKey = "granary-secret";
        public boolean pathStyle = true;
        /** Objects above this size are written with multipart upload. */
        public String multipartThreshold = "64MiB";
        /** Attempts per S3 request, the first included (retries back off 0.1 s doubling up to 5 s). */
        public int maxAttempts = 6;
        /** Timeout of one S3 attempt (a whole block transfer must fit); connecting waits at most min(5s, this). */
        public String requestTimeout = "60s";
    }

    /** One OST. */
    public static final class Ost {
        public int index;
        public String bucket;
        public String prefix = "";

        public Ost() {}

        public Ost(int index, String bucket, String prefix) {
            this.index = index;
            this.bucket = bucket;
            this.prefix = prefix;
        }
    }

    /** FUSE client settings. */
    public static final class Client {
        public String mount = "/mnt/train";
        /** Attribute and dentry cache timeout: how long another client's change may stay invisible. */
        public String attrTimeout = "1s";
        /** Stripes kept in flight ahead of a sequential reader. */
        public int readaheadStripes = 4;
        /** Dirty data buffered per client before writers block. */
        public String maxDirty = "256MiB";
        /** Read windows (stripes read and read ahead) of all open files together; readahead past it is not started; "0" disables readahead. */
        public String maxReadahead = "256MiB";
        @JsonProperty("allow_other")
        public boolean allowOther = true;
        /** Files up to this size keep their data inline in the MDS (data on MDS); 0 disables; at most 1MiB. */
        public String inlineMax = "256KiB";
        /** Files above inline_max and up to this size are packed: those closed together share one S3 block; 0 (default) disables; at most 4MiB. */
        public String packMax = "0";
        /**
         * Dense random readers: the random read of a stripe that is the client's Nth within 60 s
         * fetches the stripe whole into the kernel's page cache; 0 (default) disables; N in [2, 1024].
         */
        public int stripeFillReads = 0;
        /**
         * Data-ahead: once statahead read a directory and its files are being opened, its small
         * files' maps (inline bytes) are fetched in bulk ahead of the opens (at most half of max_readahead).
         */
        public boolean dataAhead = true;
        /** Keep a file's kernel page cache across opens while its size and mtime are unchanged. */
        public boolean keepCache = true;
        /** An open this soon after a lookup of the same small file uses that lookup's map ("0s": never). */
        public String openAfterLookup = "2ms";
        /** Lease of this client's fcntl/flock locks in the MDS: a dead client's locks go this long after its last renewal. */
        public String lockLease = "15s";
        /** Statahead: entries of a directory fetched with attributes when lookups in it keep missing (0: off). */
        public int stataheadMax = 32768;
        /** true: unlink(2) returns once checked by the client, removals go to the MDS in the background, batched; false: each waits for its Raft commit. */
        public boolean deferredUnlink = false;
        /** true: an O_TRUNC create (not O_EXCL) is answered by the client and sent with the file's first commit (its close); other clients see the name within attr_timeout. false: each create waits for its Raft commit. */
        public boolean deferredCreate = true;
        /** true: a client making or removing files one after another in a directory takes its lease and answers those creates (O_EXCL too) and unlinks itself, sending them in batches; other clients wait for its recall (ms) before they read or change that directory. false: no directory leases. */
        public boolean dirLease = true;
        /** Deadline of one block read or write through the OSSes, retries included: past it the call fails (EIO). */
        public String ioTimeout = "120s";
        /** How the mount talks to the kernel: "auto" (Granary's /dev/fuse binding as root, jnr-fuse over libfuse2 otherwise), "direct" or "jnr". */
        public String fuseBinding = "auto";
        /** true: blocks not in their OSS's read cache are read straight from S3 with URLs the OSS signs (one hop less; credentials stay on the OSS). */
        public boolean directReads = false;
        /** true: new blocks are PUT straight to S3 by the client with URLs the OSS signs (one hop less; credentials stay on the OSS; only over https or to a loopback S3). */
        public boolean directWrites = false;
    }

    /** Raft settings of the MDS peers. */
    public static final class Raft {
        /** Log entries applied between two Raft snapshots (RocksDB checkpoints); the log before a snapshot is purged. */
        public int snapshotThreshold = 10_000;
        /** Size of one Raft log segment file, e.g. "8MiB"; only closed segments are purged after a snapshot. */
        public String logSegmentSize = "8MiB";
    }

    /** Block GC settings (the MDS leader's process runs the worker). */
    public static final class Gc {
        /** A freed block is deleted this long after it was freed at the earliest: a reader whose extent map predates the free reads it meanwhile. */
        public String grace = "5m";
        /** Time between two GC passes ("0s": no worker; {@code granary gc} still runs a pass). */
        public String interval = "30s";
    }

    private static ObjectMapper mapper() {
        // A key given twice is an error, not "the last one wins": a setting added under a key the
        // file already had was silently ignored.
        return new ObjectMapper(new YAMLFactory().enable(com.fasterxml.jackson.core.JsonParser.Feature.STRICT_DUPLICATE_DETECTION))
                .setPropertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
                .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);
    }

    /**
     * Reads and validates a config file.
     *
     * @throws ConfigException with a one-line message naming the file and the problem
     */
    public static GranaryConfig load(Path file) {
        if (file.toString().isBlank()) {
            throw new ConfigException("config file name is empty (give -c a granary.yaml)");
        }
        if (Files.isDirectory(file)) {
            throw new ConfigException("config file " + file + " is a directory (give the granary.yaml inside it)");
        }
        if (Files.exists(file) && !Files.isRegularFile(file)) {
            throw new ConfigException("config file " + file + " is not a regular file (give a granary.yaml)");
        }
        if (!Files.isRegularFile(file)) {
            throw new ConfigException("config file not found: " + file + " (quickstart writes <data folder>/granary.yaml; pass it with -c)");
        }
        GranaryConfig c;
        try {
            c = mapper().readValue(file.toFile(), GranaryConfig.class);
        } catch (UnrecognizedPropertyException e) {
            throw new ConfigException(file + ": unknown key '" + e.getPropertyName() + "' (line "
                    + e.getLocation().getLineNr() + ")");
        } catch (com.fasterxml.jackson.databind.exc.MismatchedInputException e) {
            if (e.getPath().isEmpty()) { // nothing but comments or whitespace, or not a mapping at all
                throw new ConfigException(file + ": empty or not a YAML mapping of settings");
            }
            String key = e.getPath().stream().map(r -> r.getFieldName() != null ? r.getFieldName() : "[" + r.getIndex() + "]")
                    .collect(java.util.stream.Collectors.joining("."));
            throw new ConfigException(file + ": '" + key + "' has a value of the wrong kind (a list or a mapping where a "
                    + "single value belongs, or the reverse)" + (e.getLocation() == null ? "" : " (line " + e.getLocation().getLineNr() + ")"));
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new ConfigException(file + ": " + e.getOriginalMessage().lines().findFirst().orElse("unreadable")
                    + (e.getLocation() == null ? "" : " (line " + e.getLocation().getLineNr() + ")"));
        } catch (IOException e) {
            throw new ConfigException(file + ": cannot read: " + e.getMessage());
        }
        if (c == null) {
            throw new ConfigException(file + ": empty config file");
        }
        c.validate(file.toString());
        return c;
    }

    /** Writes this config as YAML. */
    public void save(Path file) throws IOException {
        Files.createDirectories(file.toAbsolutePath().getParent());
        mapper().writeValue(file.toFile(), this);
    }

    /**
     * Checks every field; throws a ConfigException naming the first bad key.
     *
     * @param where the file name for messages
     */
    public void validate(String where) {
        String p = where + ": ";
        if (cluster == null || cluster.isBlank()) throw new ConfigException(p + "cluster must be set");
        if (mds.isEmpty()) throw new ConfigException(p + "mds: at least one peer is needed (3 for high availability)");
        if (oss.isEmpty()) throw new ConfigException(p + "oss: at least one OSS is needed");
        checkNodes(p + "mds", mds);
        checkNodes(p + "oss", oss);
        if (osts.isEmpty()) throw new ConfigException(p + "osts: at least one OST is needed");
        Set<Integer> idx = new HashSet<>();
        for (Ost o : osts) {
            if (o.index < 0) throw new ConfigException(p + "osts: index must be >= 0");
            if (!idx.add(o.index)) throw new ConfigException(p + "osts: duplicate index " + o.index);
            if (o.bucket == null || !o.bucket.matches("[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")) {
                throw new ConfigException(p + "osts[" + o.index + "]: bucket '" + o.bucket + "' is not a valid S3 bucket name");
            }
            if (o.prefix == null) o.prefix = "";
        }
        java.time.Duration openAfterLookup;
        java.time.Duration lease;
        long inlineMax;
        long packMax;
        try {
            Sizes.parseBytes(ossCache);
            Sizes.parseBytes(ossDiskCache);
            Sizes.parseBytes(s3.multipartThreshold);
            Sizes.parseDuration(client.attrTimeout);
            Sizes.parseBytes(client.maxDirty);
            Sizes.parseBytes(client.maxReadahead);
            inlineMax = Sizes.parseBytes(client.inlineMax);
            packMax = Sizes.parseBytes(client.packMax);
            openAfterLookup = Sizes.parseDuration(client.openAfterLookup);
            lease = Sizes.parseDuration(client.lockLease);
            if (Sizes.parseDuration(s3.requestTimeout).isZero()) throw new IllegalArgumentException("s3.request_timeout must be positive");
            if (Sizes.parseDuration(client.ioTimeout).isZero()) throw new IllegalArgumentException("client.io_timeout must be positive");
            if (gc == null) gc = new Gc();
            Sizes.parseDuration(gc.grace);
            Sizes.parseDuration(gc.interval);
        } catch (IllegalArgumentException e) {
            throw new ConfigException(p + e.getMessage());
        }
        if (openAfterLookup.compareTo(java.time.Duration.ofSeconds(1)) > 0) {
            throw new ConfigException(p + "client.open_after_lookup must be at most 1s, got " + client.openAfterLookup);
        }
        if (lease.compareTo(java.time.Duration.ofSeconds(1)) < 0 || lease.compareTo(java.time.Duration.ofMinutes(10)) > 0) {
            throw new ConfigException(p + "client.lock_lease must be between 1s and 10m, got " + client.lockLease);
        }
        if (inlineMax > (1 << 20)) {
            throw new ConfigException(p + "client.inline_max must be at most 1MiB (the MDS's limit), got " + client.inlineMax);
        }
        if (packMax > (4 << 20)) {
            throw new ConfigException(p + "client.pack_max must be at most 4MiB (a pack's size), got " + client.packMax);
        }
        if (client.stripeFillReads < 0 || client.stripeFillReads == 1 || client.stripeFillReads > 1024) {
            throw new ConfigException(p + "client.stripe_fill_reads must be 0 (off) or in [2, 1024] reads, got " + client.stripeFillReads);
        }
        if (ClientConfig.FuseBinding.parse(client.fuseBinding) == null) {
            throw new ConfigException(p + "client.fuse_binding must be auto, direct or jnr, got '" + client.fuseBinding + "'");
        }
        if (client.readaheadStripes < 0 || client.readaheadStripes > 256) {
            throw new ConfigException(p + "client.readahead_stripes must be in [0, 256] stripes, got " + client.readaheadStripes);
        }
        if (Sizes.parseBytes(client.maxDirty) < 1) {
            throw new ConfigException(p + "client.max_dirty must be at least 1 byte (writers wait while it is used up), got '" + client.maxDirty + "'");
        }
        if (Sizes.parseDuration(client.attrTimeout).isNegative()) {
            throw new ConfigException(p + "client.attr_timeout must be >= 0s, got " + client.attrTimeout);
        }
        if (client.stataheadMax < 0 || client.stataheadMax > 1_000_000) {
            throw new ConfigException(p + "client.statahead_max must be in [0, 1000000] entries, got " + client.stataheadMax);
        }
        if (s3.maxAttempts < 1 || s3.maxAttempts > 100) {
            throw new ConfigException(p + "s3.max_attempts must be between 1 and 100, got " + s3.maxAttempts);
        }
        if (raft == null) raft = new Raft();
        if (raft.snapshotThreshold < 1) {
            throw new ConfigException(p + "raft.snapshot_threshold must be >= 1 log entries, got " + raft.snapshotThreshold);
        }
        long segment;
        try {
            segment = Sizes.parseBytes(raft.logSegmentSize);
        } catch (IllegalArgumentException e) {
            throw new ConfigException(p + "raft.log_segment_size: " + e.getMessage());
        }
        if (segment < 1024) {
            throw new ConfigException(p + "raft.log_segment_size must be at least 1KiB, got '" + raft.logSegmentSize + "'");
        }
        if (!"embedded".equals(s3.endpoint) && !s3.endpoint.matches("https?://.+")) {
            throw new ConfigException(p + "s3.endpoint must be 'embedded' or an http(s):// URL, got '" + s3.endpoint + "'");
        }
        try {
            dev.granary.tools.cluster.Nodes.clientConfig(this); // every client rule, not only those named above
        } catch (IllegalArgumentException e) {
            throw new ConfigException(p + "client: " + e.getMessage());
        }
    }

    private static void checkNodes(String what, List<Node> nodes) {
        Set<String> ids = new HashSet<>();
        for (Node n : nodes) {
            if (n.id == null || !n.id.matches("[A-Za-z0-9_-]+")) {
                throw new ConfigException(what + ": id '" + n.id + "' must be letters, digits, '-' or '_'");
            }
            if (!ids.add(n.id)) throw new ConfigException(what + ": duplicate id " + n.id);
            hostPort(what + "[" + n.id + "].address", n.address);
        }
    }

    /** Splits "host:port", validating the port; throws ConfigException naming {@code what}. */
    public static java.net.InetSocketAddress hostPort(String what, String address) {
        if (address == null) throw new ConfigException(what + " must be host:port");
        int i = address.lastIndexOf(':');
        try {
            int port = Integer.parseInt(address.substring(i + 1));
            if (i <= 0 || port < 1 || port > 65535) throw new NumberFormatException();
            return java.net.InetSocketAddress.createUnresolved(address.substring(0, i), port);
        } catch (RuntimeException e) {
            throw new ConfigException(what + " must be host:port with a port 1..65535, got '" + address + "'");
        }
    }

    /** Finds the node with {@code id}, or throws a ConfigException listing the known ids. */
    public static Node node(List<Node> nodes, String id, String what) {
        return nodes.stream().filter(n -> n.id.equals(id)).findFirst().orElseThrow(() -> new ConfigException(
                what + " id '" + id + "' is not in the config (known: "
                        + String.join(", ", nodes.stream().map(n -> n.id).toList()) + ")"));
    }

    /** A sample config for a single machine: 3 MDS peers, 2 OSS, the embedded S3, 2 OSTs. */
    public static GranaryConfig localDefault(Path dataDir, Path mount, int basePort) {
        GranaryConfig c = new GranaryConfig();
        c.dataDir = dataDir.toAbsolutePath().toString();
        for (int i = 1; i <= 3; i++) c.mds.add(new Node("mds" + i, "127.0.0.1:" + (basePort + 60 + i)));
        for (int i = 1; i <= 2; i++) c.oss.add(new Node("oss" + i, "127.0.0.1:" + (basePort + 70 + i)));
        c.s3.embeddedPort = basePort;
        c.osts.add(new Ost(0, "granary", "ost0/"));
        c.osts.add(new Ost(1, "granary", "ost1/"));
        c.client.mount = mount.toAbsolutePath().toString();
        c.client.directReads = true; // the embedded S3 is on this machine: every client reaches it
        c.client.directWrites = true;
        return c;
    }
}
