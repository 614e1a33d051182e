package dev.granary.tools.cluster;

import dev.granary.mds.client.MdsClient;
import dev.granary.objbacker.EmbeddedS3;
import dev.granary.oss.server.OssServer;
import dev.granary.raft.RaftKvServer;
import dev.granary.tools.UserError;
import dev.granary.tools.config.GranaryConfig;
import dev.granary.tools.config.Sizes;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Every part of a Granary cluster in one JVM, each over its real protocol on loopback: the
 * embedded S3 server, all MDS peers of the config, all OSSes, and (after {@link #mount}) the
 * FUSE client. Used by {@code granary quickstart} and by the tests' MiniCluster.
 * Close stops everything in reverse order (unmount first).
 */
public final class LocalCluster implements AutoCloseable {
    private final GranaryConfig cfg;
    private EmbeddedS3 s3;
    private final List<RaftKvServer> mds = new ArrayList<>();
    private final List<OssServer> oss = new ArrayList<>();
    private MdsClient admin;
    private Nodes.Gc gc;
    private final List<Nodes.Client> clients = new ArrayList<>();
    private boolean closed;

    private LocalCluster(GranaryConfig cfg) {
        this.cfg = cfg;
    }

    /**
     * Checks that every port the config's servers listen on is free.
     *
     * @throws UserError naming the first port in use and what wanted it
     */
    public static void checkPortsFree(GranaryConfig cfg) {
        List<String[]> wanted = new ArrayList<>();
        if ("embedded".equals(cfg.s3.endpoint)) wanted.add(new String[] {"embedded S3", "127.0.0.1:" + cfg.s3.embeddedPort});
        cfg.mds.forEach(n -> wanted.add(new String[] {"MDS " + n.id, n.address}));
        cfg.oss.forEach(n -> wanted.add(new String[] {"OSS " + n.id, n.address}));
        for (String[] w : wanted) {
            InetSocketAddress a = GranaryConfig.hostPort(w[0], w[1]);
            try (ServerSocket ss = new ServerSocket()) {
                ss.setReuseAddress(true);
                ss.bind(new InetSocketAddress(InetAddress.getByName(a.getHostString()), a.getPort()));
            } catch (IOException e) {
                throw new UserError("port " + a.getPort() + " (" + w[0] + ") is already in use on " + a.getHostString()
                        + ": is another Granary running? (stop it, or choose other ports)");
            }
        }
    }

    /**
     * Starts S3 (when embedded), every MDS peer and every OSS of {@code cfg}, then registers the
     * OSTs and OSSes in the MDS. On failure, whatever started is stopped again.
     *
     * OSS read caches that would not fit 60% of the heap together are shrunk to fit, with a note.
     * @param out progress lines go here (null: silent)
     */
    public static LocalCluster start(GranaryConfig cfg, PrintStream out) {
        LocalCluster c = new LocalCluster(cfg);
        long cache = Nodes.cacheThatFits(cfg, cfg.oss.size());
        try {
            if ("embedded".equals(cfg.s3.endpoint)) {
                c.s3 = Nodes.startEmbeddedS3(cfg);
                say(out, "  S3    embedded S3Proxy at " + c.s3.endpoint() + ", bucket folder " + c.bucketFolder());
            }
            for (GranaryConfig.Node n : cfg.mds) {
                c.mds.add(Nodes.startMds(cfg, n.id));
            }
            if (cache < Sizes.parseBytes(cfg.ossCache)) {
                say(out, "  note  oss_cache " + cfg.ossCache + " x " + cfg.oss.size() + " OSS does not fit this JVM's heap ("
                        + Sizes.format(Runtime.getRuntime().maxMemory()) + " max): each OSS caches " + Sizes.format(cache)
                        + " (raise the heap with GRANARY_JAVA_OPTS='-Xms4g -Xmx4g')");
            }
            for (GranaryConfig.Node n : cfg.oss) {
                c.oss.add(Nodes.startOss(cfg, n.id, cache));
            }
            c.admin = Nodes.mdsClient(cfg);
            Nodes.register(cfg, c.admin);
            c.gc = Nodes.gc(cfg, () -> true); // one worker for the cluster: its MDS client reaches the leader
            say(out, "  MDS   " + cfg.mds.size() + " Raft peers " + String.join(", ", cfg.mds.stream().map(n -> n.id + "@" + n.address).toList())
                    + "; leader " + c.leaderId().orElse("?"));
            say(out, "  OSS   " + String.join(", ", cfg.oss.stream().map(n -> n.id + "@" + n.address).toList())
                    + "; OSTs " + String.join(", ", cfg.osts.stream().map(o -> o.index + "=" + o.bucket + "/" + o.prefix).toList()));
            return c;
        } catch (RuntimeException e) {
            c.close();
            throw e;
        }
    }

    private static void say(PrintStream out, String s) {
        if (out != null) out.println(s);
    }

    /** Mounts the filesystem at {@code mountPoint} with a FUSE client of this cluster. */
    public Nodes.Client mount(Path mountPoint) {
        Nodes.Client client = Nodes.mount(cfg, mountPoint);
        synchronized (clients) {
            clients.add(client);
        }
        return client;
    }

    /** The config this cluster runs. */
    public GranaryConfig config() {
        return cfg;
    }

    /** The running MDS peers (closed ones included). */
    public List<RaftKvServer> mdsPeers() {
        return mds;
    }

    /** The running OSS servers. */
    public List<OssServer> ossServers() {
        return oss;
    }

    /**
     * S3 PUTs of blocks sent so far by this cluster: by its OSS servers, and by its clients
     * straight to S3 ({@code client.direct_writes}), unmounted clients included.
     */
    public long s3Puts() {
        long n = oss.stream().mapToLong(OssServer::s3Puts).sum();
        synchronized (clients) {
            for (Nodes.Client c : clients) {
                n += c.directWrites() == null ? 0 : c.directWrites().directPuts();
            }
        }
        return n;
    }

    /** A namespace client for administration (root identity). */
    public MdsClient admin() {
        return admin;
    }

    /** The embedded S3 server, or null when the endpoint is external. */
    public EmbeddedS3 s3() {
        return s3;
    }

    /** The id of the current MDS leader, if one is known. */
    public Optional<String> leaderId() {
        for (RaftKvServer s : mds) {
            if (s.isRunning() && s.isLeader()) return Optional.of(s.peerId());
        }
        for (RaftKvServer s : mds) {
            if (s.isRunning() && s.leaderId().isPresent()) return s.leaderId();
        }
        return Optional.empty();
    }

    /** The folder of the first OST's bucket in the embedded S3 server, or null. */
    public Path bucketFolder() {
        return s3 == null ? null : s3.bucketDir(cfg.osts.get(0).bucket);
    }

    /** Unmounts every client, then stops OSSes, MDS peers and S3; safe to call twice. */
    @Override
    public synchronized void close() {
        if (closed) return;
        closed = true;
        List<Runnable> steps = new ArrayList<>();
        for (Nodes.Client c : clients) steps.add(c::close);
        if (gc != null) steps.add(gc::close);
        if (admin != null) steps.add(admin::close);
        for (OssServer o : oss) steps.add(o::close);
        for (RaftKvServer m : mds) steps.add(m::close);
        if (s3 != null) steps.add(s3::close);
        RuntimeException first = null;
        for (Runnable r : steps) {
            try {
                r.run();
            } catch (RuntimeException e) {
                if (first == null) first = e;
            }
        }
        if (first != null) throw first;
    }
}
