package dev.granary.tools.cluster;

import dev.granary.client.fuse.FuseMount;
import dev.granary.client.vfs.ClientConfig;
import dev.granary.client.vfs.GranaryVfs;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.client.RaftMdsTransport;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.OstInfo;
import dev.granary.mds.server.MdsStateMachine;
import dev.granary.objbacker.EmbeddedS3;
import dev.granary.objbacker.ObjectStore;
import dev.granary.objbacker.ObjectStoreException;
import dev.granary.objbacker.S3Config;
import dev.granary.objbacker.S3ObjectStore;
import dev.granary.oss.BlockIo;
import dev.granary.oss.client.DirectReadBlockIo;
import dev.granary.oss.client.DirectWriteBlockIo;
import dev.granary.oss.OssConfig;
import dev.granary.oss.client.OssClient;
import dev.granary.oss.server.OssServer;
import dev.granary.raft.PeerSpec;
import dev.granary.raft.RaftKvClient;
import dev.granary.raft.RaftKvServer;
import dev.granary.raft.RaftServerConfig;
import dev.granary.tools.UserError;
import dev.granary.tools.config.GranaryConfig;
import dev.granary.tools.config.Sizes;
import dev.granary.tools.gc.BlockGc;
import java.net.URI;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Starts each Granary part from a {@link GranaryConfig}: the same code runs the parts of
 * {@code granary quickstart} (all in one JVM) and of {@code granary mds|oss|mount} (one per process).
 */
public final class Nodes {
    /** The identity used for cluster bootstrap operations (registering OSTs and OSSes). */
    public static final Caller ROOT = Caller.newBuilder().setUid(0).setGid(0).build();

    private Nodes() {}

    /** The MDS Raft peers of the config. */
    public static List<PeerSpec> peers(GranaryConfig cfg) {
        return cfg.mds.stream().map(n -> new PeerSpec(n.id, n.address)).toList();
    }

    /** Starts the embedded S3 server of the config (endpoint "embedded") on its data folder, with the OST buckets. */
    public static EmbeddedS3 startEmbeddedS3(GranaryConfig cfg) {
        EmbeddedS3 s3;
        try {
            s3 = EmbeddedS3.start(Path.of(cfg.dataDir, "s3"), cfg.s3.embeddedPort, cfg.s3.accessKey, cfg.s3.secretKey);
        } catch (RuntimeException e) {
            throw new UserError("cannot start the embedded S3 server on 127.0.0.1:" + cfg.s3.embeddedPort + ": " + rootMessage(e), e);
        }
        for (GranaryConfig.Ost o : cfg.osts) {
            s3.createBucket(o.bucket);
        }
        return s3;
    }

    /** The S3 endpoint the OSSes use. */
    public static URI s3Endpoint(GranaryConfig cfg) {
        return "embedded".equals(cfg.s3.endpoint) ? URI.create("http://127.0.0.1:" + cfg.s3.embeddedPort) : URI.create(cfg.s3.endpoint);
    }

    /**
     * Starts MDS peer {@code id}: a Ratis server with the namespace state machine, storage in
     * data_dir/mds/ID, snapshot threshold and log segment size from the config's {@code raft} keys.
     */
    public static RaftKvServer startMds(GranaryConfig cfg, String id) {
        GranaryConfig.node(cfg.mds, id, "mds");
        RaftServerConfig rc = RaftServerConfig.of(id, peers(cfg), cfg.cluster, Path.of(cfg.dataDir, "mds", id))
                .withSnapshotAutoTriggerThreshold(cfg.raft.snapshotThreshold)
                .withLogSegmentSizeMaxBytes(Sizes.parseBytes(cfg.raft.logSegmentSize));
        RaftKvServer server = new RaftKvServer(rc, new MdsStateMachine());
        try {
            server.start();
        } catch (RuntimeException e) {
            server.close();
            throw new UserError("cannot start MDS peer " + id + ": " + rootMessage(e), e);
        }
        return server;
    }

    /**
     * Opens the OST object stores of the config and checks each one is reachable with the
     * configured credentials and its bucket exists (the embedded server's buckets are created
     * by {@link #startEmbeddedS3}).
     *
     * @throws UserError naming the endpoint and the problem (unreachable, access denied, no such bucket)
     */
    public static Map<Integer, ObjectStore> openOsts(GranaryConfig cfg) {
        URI endpoint = s3Endpoint(cfg);
        Map<Integer, ObjectStore> osts = new LinkedHashMap<>();
        try {
            for (GranaryConfig.Ost o : cfg.osts) {
                java.time.Duration attempt = Sizes.parseDuration(cfg.s3.requestTimeout);
                S3Config sc = S3Config.of(endpoint, o.bucket, o.prefix, cfg.s3.accessKey, cfg.s3.secretKey)
                        .withMultipart(Sizes.parseBytes(cfg.s3.multipartThreshold), S3Config.DEFAULT_PART_SIZE)
                        .withMaxAttempts(cfg.s3.maxAttempts)
                        .withTimeouts(attempt.compareTo(S3Config.DEFAULT_CONNECT_TIMEOUT) < 0 ? attempt : S3Config.DEFAULT_CONNECT_TIMEOUT, attempt);
                S3ObjectStore store = S3ObjectStore.open(sc);
                osts.put(o.index, store);
                store.checkAccess();
            }
        } catch (ObjectStoreException e) {
            osts.values().forEach(ObjectStore::close);
            throw new UserError(s3Problem(cfg, endpoint, e), e);
        }
        return osts;
    }

    /** One line saying what is wrong with the S3 endpoint and which config key to check. */
    static String s3Problem(GranaryConfig cfg, URI endpoint, ObjectStoreException e) {
        String detail = e.getMessage() == null ? e.kind().name() : e.getMessage();
        int colon = detail.lastIndexOf(": ");
        String cause = colon >= 0 ? detail.substring(colon + 2) : detail;
        return switch (e.kind()) {
            case UNREACHABLE -> "S3 endpoint " + endpoint + " is unreachable (" + cause + "): check s3.endpoint and that the server runs";
            case ACCESS_DENIED -> "S3 endpoint " + endpoint + " denied access with access key '" + cfg.s3.accessKey + "' ("
                    + cause + "): check s3.access_key and s3.secret_key";
            case NO_SUCH_BUCKET -> "S3 endpoint " + endpoint + ": bucket missing (" + cause + "): create it or fix osts[].bucket";
            default -> "S3 endpoint " + endpoint + ": " + detail;
        };
    }

    /**
     * Refuses to start an OSS whose read cache ({@code oss_cache}) would take more than 60% of
     * this JVM's maximum heap ({@link #cacheThatFits}): it would end in OutOfMemoryError under load.
     *
     * @throws UserError naming both sizes and how to raise the heap
     */
    public static void checkCacheFitsHeap(GranaryConfig cfg) {
        long cache = Sizes.parseBytes(cfg.ossCache);
        if (cacheThatFits(cfg, 1) < cache) {
            long heap = Runtime.getRuntime().maxMemory();
            throw new UserError("oss_cache " + cfg.ossCache + " does not fit the Java heap (" + Sizes.format(heap)
                    + " max): lower oss_cache, or raise the heap, e.g. GRANARY_JAVA_OPTS='-Xms" + (2 * cache >> 30)
                    + "g -Xmx" + (2 * cache >> 30) + "g'");
        }
    }

    /**
     * Refuses to mount a client whose write buffers ({@code client.max_dirty}) and read windows
     * ({@code client.max_readahead}) could together take more than 70% of this JVM's maximum
     * heap: both fill under load (a checkpoint write, many sequential readers), and the rest of
     * the heap holds the dentry and attribute caches, FUSE requests and RPC buffers. Past it the
     * client ends in OutOfMemoryError and a wedged mount instead of slowing down.
     *
     * @throws UserError naming both sizes, the heap, and a heap that fits them
     */
    public static void checkClientBuffersFitHeap(GranaryConfig cfg) {
        long buffers = Sizes.parseBytes(cfg.client.maxDirty) + Sizes.parseBytes(cfg.client.maxReadahead);
        long heap = Runtime.getRuntime().maxMemory();
        if (buffers > heap / 10 * 7) {
            long needMiB = ((buffers / 7 * 10 >> 20) / 256 + 1) * 256; // the next 256 MiB step that fits
            throw new UserError("client.max_dirty " + cfg.client.maxDirty + " + client.max_readahead " + cfg.client.maxReadahead
                    + " do not fit the Java heap (" + Sizes.format(heap) + " max; they may take 70% of it): lower them, "
                    + "or raise the heap, e.g. GRANARY_JAVA_OPTS='-Xms" + needMiB + "m -Xmx" + needMiB + "m'");
        }
    }

    /**
     * The read cache of each of {@code ossInThisJvm} OSSes: {@code oss_cache}, or less when those
     * caches together would take more than 60% of this JVM's maximum heap (bytes).
     */
    public static long cacheThatFits(GranaryConfig cfg, int ossInThisJvm) {
        long heap = Runtime.getRuntime().maxMemory();
        return Math.min(Sizes.parseBytes(cfg.ossCache), heap * 6 / 10 / Math.max(1, ossInThisJvm));
    }

    /** Starts OSS {@code id} serving every OST of the config. */
    public static OssServer startOss(GranaryConfig cfg, String id) {
        return startOss(cfg, id, Sizes.parseBytes(cfg.ossCache));
    }

    /** Starts OSS {@code id} serving every OST of the config, with a read cache of {@code cacheBytes}. */
    public static OssServer startOss(GranaryConfig cfg, String id, long cacheBytes) {
        GranaryConfig.Node n = GranaryConfig.node(cfg.oss, id, "oss");
        var addr = GranaryConfig.hostPort("oss[" + id + "].address", n.address);
        Map<Integer, ObjectStore> osts = openOsts(cfg);
        OssConfig oc = OssConfig.defaults(addr.getHostString(), addr.getPort())
                .withCache(cacheBytes, OssConfig.DEFAULT_MAX_CACHED_BLOCK_BYTES);
        long disk = Sizes.parseBytes(cfg.ossDiskCache);
        if (disk > 0) {
            oc = oc.withDiskCache(diskCacheDir(cfg, id), disk);
        }
        try {
            return OssServer.start(oc, osts);
        } catch (RuntimeException e) {
            osts.values().forEach(ObjectStore::close);
            throw new UserError("cannot start OSS " + id + " on " + n.address + ": " + rootMessage(e), e);
        }
    }

    /** The folder of OSS {@code id}'s disk tier: {@code oss_disk_cache_dir} (or {@code <data_dir>/oss-cache}) / id. */
    public static java.nio.file.Path diskCacheDir(GranaryConfig cfg, String id) {
        String base = cfg.ossDiskCacheDir == null || cfg.ossDiskCacheDir.isBlank()
                ? java.nio.file.Path.of(cfg.dataDir, "oss-cache").toString() : cfg.ossDiskCacheDir;
        return java.nio.file.Path.of(base, id);
    }

    /**
     * Fails at once, with one line, when no MDS peer of the config answers (the cluster is not
     * running): a command's first MDS request would otherwise wait out the Raft client's retries
     * (60 s) and end with Ratis' exception text.
     *
     * @throws UserError "{@code what}: no MDS peer is reachable ..."
     */
    public static void requireReachableMds(GranaryConfig cfg, String what) {
        try (RaftKvClient raft = new RaftKvClient(cfg.cluster, peers(cfg))) {
            List<dev.granary.raft.PeerStatus> peers = raft.peerStatus();
            if (peers.stream().noneMatch(dev.granary.raft.PeerStatus::reachable)) {
                throw noMdsReachable(cfg, what, peers);
            }
        }
    }

    /**
     * The one-line error of {@code what} finding none of the config's MDS peers reachable
     * ({@code peers}: their answers): when some answered that they serve no Raft group of the
     * config's cluster name (Ratis' GroupMismatchException), the error says so, since the
     * cluster is running under another name.
     */
    public static UserError noMdsReachable(GranaryConfig cfg, String what, List<dev.granary.raft.PeerStatus> peers) {
        String addresses = String.join(", ", cfg.mds.stream().map(n -> n.address).toList());
        boolean otherCluster = peers.stream().anyMatch(p -> p.error().map(e -> e.contains("GroupMismatchException")
                || e.matches("(?s).*group-[0-9A-Fa-f]+ not found.*")).orElse(false));
        if (otherCluster) {
            return new UserError(what + ": the MDS peers at " + addresses + " answer, but serve no cluster named '" + cfg.cluster
                    + "' (check 'cluster' in the config: it must be the name the cluster was started with)");
        }
        return new UserError(what + ": no MDS peer is reachable at " + addresses + " (is the cluster running?)");
    }

    /** A namespace client over Raft to the config's MDS peers. */
    public static MdsClient mdsClient(GranaryConfig cfg) {
        return new MdsClient(new RaftMdsTransport(new RaftKvClient(cfg.cluster, peers(cfg)), true));
    }

    /** Registers the config's OSTs and OSSes in the MDS (idempotent; the cluster bootstrap). */
    public static void register(GranaryConfig cfg, MdsClient mds) {
        for (GranaryConfig.Ost o : cfg.osts) {
            mds.registerOst(ROOT, OstInfo.newBuilder().setIndex(o.index).setEndpoint(s3Endpoint(cfg).toString())
                    .setBucket(o.bucket).setPrefix(o.prefix).build());
        }
        for (GranaryConfig.Node n : cfg.oss) {
            mds.registerOss(ROOT, n.address);
        }
    }

    /** A block GC worker with the MDS and OSS clients it owns; closing it stops the worker and closes them. */
    public record Gc(BlockGc gc, MdsClient mds, OssClient oss) implements AutoCloseable {
        @Override
        public void close() {
            try {
                gc.close();
            } finally {
                oss.close();
                mds.close();
            }
        }
    }

    /**
     * A block GC of the config's cluster (MDS over Raft, the config's OSSes) with the grace
     * {@code gc.grace}; started ({@link BlockGc#start}, a pass every {@code gc.interval} while
     * {@code active} holds) unless {@code active} is null or the interval is 0.
     */
    public static Gc gc(GranaryConfig cfg, java.util.function.BooleanSupplier active) {
        return gc(cfg, Sizes.parseDuration(cfg.gc.grace), active);
    }

    /** As {@link #gc(GranaryConfig, java.util.function.BooleanSupplier)}, with {@code grace} instead of {@code gc.grace}. */
    public static Gc gc(GranaryConfig cfg, java.time.Duration grace, java.util.function.BooleanSupplier active) {
        MdsClient mds = mdsClient(cfg);
        OssClient oss = new OssClient(cfg.oss.stream().map(n -> n.address).toList());
        BlockGc gc = new BlockGc(mds, oss, grace);
        java.time.Duration interval = Sizes.parseDuration(cfg.gc.interval);
        if (active != null && !interval.isZero()) {
            gc.start(interval, active);
        }
        return new Gc(gc, mds, oss);
    }

    /** Direct GETs to S3 in flight per client at most ({@code client.direct_reads}). */
    static final int DIRECT_READ_THREADS = 16;
    /**
     * Direct PUTs to S3 in flight per client at most ({@code client.direct_writes}): as many as
     * the uploads a client keeps in flight (its dirty stripes, {@code client.max_dirty}, go up
     * together).
     */
    static final int DIRECT_WRITE_THREADS = 16;

    /** The FUSE client settings of the config. */
    public static ClientConfig clientConfig(GranaryConfig cfg) {
        return ClientConfig.defaults()
                .withCacheTimeout(Sizes.parseDuration(cfg.client.attrTimeout))
                .withReadaheadStripes(cfg.client.readaheadStripes)
                .withMaxDirtyBytes(Sizes.parseBytes(cfg.client.maxDirty))
                .withMaxReadaheadBytes(Sizes.parseBytes(cfg.client.maxReadahead))
                .withAllowOther(cfg.client.allowOther)
                .withInlineMax((int) Math.min(Integer.MAX_VALUE, Sizes.parseBytes(cfg.client.inlineMax)))
                .withPackMax((int) Math.min(Integer.MAX_VALUE, Sizes.parseBytes(cfg.client.packMax)))
                .withStripeFillReads(cfg.client.stripeFillReads)
                .withDataAhead(cfg.client.dataAhead)
                .withKeepCache(cfg.client.keepCache)
                .withOpenAfterLookup(Sizes.parseDuration(cfg.client.openAfterLookup))
                .withLockLease(Sizes.parseDuration(cfg.client.lockLease))
                .withStataheadMax(cfg.client.stataheadMax)
                .withDeferredUnlink(cfg.client.deferredUnlink)
                .withDeferredCreate(cfg.client.deferredCreate)
                .withDirLease(cfg.client.dirLease)
                .withFuseBinding(ClientConfig.FuseBinding.parse(cfg.client.fuseBinding));
    }

    /**
     * A mounted client: its MDS client, OSS client, the block I/O its vfs reads and writes through
     * (the OSS client; {@link DirectReadBlockIo} over it with {@code client.direct_reads};
     * {@link DirectWriteBlockIo} over that with {@code client.direct_writes}), vfs and FUSE mount,
     * closed together.
     */
    public record Client(MdsClient mds, OssClient oss, BlockIo blocks, GranaryVfs vfs, FuseMount mount) implements AutoCloseable {
        /** The direct-read layer of {@link #blocks} ({@code client.direct_reads}), or null. */
        public DirectReadBlockIo directReads() {
            BlockIo b = blocks instanceof DirectWriteBlockIo w ? w.inner() : blocks;
            return b instanceof DirectReadBlockIo r ? r : null;
        }

        /** The direct-write layer of {@link #blocks} ({@code client.direct_writes}), or null. */
        public DirectWriteBlockIo directWrites() {
            return blocks instanceof DirectWriteBlockIo w ? w : null;
        }

        @Override
        public void close() {
            try {
                mount.close();
            } finally {
                vfs.close();
                closeBlocks(blocks, oss);
                oss.close();
                mds.close();
            }
        }
    }

    /** The block I/O of a client over {@code oss}: direct reads and writes as the config says. */
    static BlockIo clientBlocks(GranaryConfig cfg, OssClient oss) {
        java.time.Duration io = Sizes.parseDuration(cfg.client.ioTimeout);
        BlockIo blocks = cfg.client.directReads ? new DirectReadBlockIo(oss, io, DIRECT_READ_THREADS) : oss;
        return cfg.client.directWrites ? new DirectWriteBlockIo(blocks, oss, io, DIRECT_WRITE_THREADS) : blocks;
    }

    /** Closes the layers of {@code blocks} over {@code oss} (not {@code oss} itself). */
    static void closeBlocks(BlockIo blocks, OssClient oss) {
        if (blocks instanceof DirectWriteBlockIo w) {
            w.close();
            blocks = w.inner();
        }
        if (blocks != oss) {
            blocks.close();
        }
    }

    /**
     * Mounts the filesystem at {@code mountPoint}.
     *
     * @throws UserError when the mount point is unusable, the client's buffers do not fit the heap
     *     ({@link #checkClientBuffersFitHeap}), the MDS does not answer a getattr of the root (no
     *     leader: after the Raft client's retries), or the mount fails
     */
    public static Client mount(GranaryConfig cfg, Path mountPoint) {
        checkClientBuffersFitHeap(cfg);
        MdsClient mds = mdsClient(cfg);
        OssClient oss = new OssClient(cfg.oss.stream().map(n -> n.address).toList(), dev.granary.oss.OssConfig.DEFAULT_MAX_MESSAGE_BYTES,
                OssClient.DEFAULT_MAX_ATTEMPTS, Sizes.parseDuration(cfg.client.ioTimeout));
        ClientConfig cc = clientConfig(cfg);
        BlockIo blocks = clientBlocks(cfg, oss);
        GranaryVfs vfs = new GranaryVfs(mds, blocks, cc);
        try {
            vfs.getattr(ROOT, "/"); // the MDS answers (a leader is elected) before the kernel can ask anything
            return new Client(mds, oss, blocks, vfs, FuseMount.mount(vfs, mountPoint, cc));
        } catch (RuntimeException e) {
            vfs.close();
            closeBlocks(blocks, oss);
            oss.close();
            mds.close();
            throw new UserError("cannot mount " + mountPoint + ": " + rootMessage(e), e);
        }
    }

    /** The innermost non-empty message of a throwable chain, on one line. */
    public static String rootMessage(Throwable t) {
        String msg = t.getMessage();
        for (Throwable c = t.getCause(); c != null; c = c.getCause()) {
            if (c.getMessage() != null && !c.getMessage().isBlank()) msg = c.getMessage();
        }
        return msg == null ? t.getClass().getSimpleName() : msg.lines().findFirst().orElse(msg);
    }
}
