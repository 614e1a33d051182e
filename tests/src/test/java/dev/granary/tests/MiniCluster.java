package dev.granary.tests;

import dev.granary.mds.client.MdsClient;
import dev.granary.tools.cluster.LocalCluster;
import dev.granary.tools.cluster.Nodes;
import dev.granary.tools.config.GranaryConfig;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.ThreadLocalRandom;
import org.junit.jupiter.api.Assumptions;

/**
 * The test fixture: N MDS Raft peers + M OSS + the embedded S3 server in one JVM, each over its
 * real protocol on loopback ports chosen free, with FUSE mounts on demand. It is
 * {@link LocalCluster} (the code quickstart runs) with a generated config.
 */
public final class MiniCluster implements AutoCloseable {
    private final LocalCluster cluster;
    private final Path dir;

    private MiniCluster(LocalCluster cluster, Path dir) {
        this.cluster = cluster;
        this.dir = dir;
    }

    /** Skips the calling test, with the reason printed, on a machine without /dev/fuse. */
    static void assumeFuseDevice() {
        Assumptions.assumeTrue(Files.exists(Path.of("/dev/fuse")), "SKIPPED: /dev/fuse is missing on this machine");
    }

    /** Starts a cluster with data under {@code dir} (3 MDS, 2 OSS, 2 OSTs). */
    public static MiniCluster start(Path dir) throws IOException {
        return start(configFor(dir));
    }

    /** Starts a cluster from a config (see {@link #configFor}). */
    public static MiniCluster start(GranaryConfig cfg) {
        return new MiniCluster(LocalCluster.start(cfg, null), Path.of(cfg.dataDir));
    }

    /** A local config (3 MDS, 2 OSS, 2 OSTs in one embedded bucket) on free loopback ports. */
    public static GranaryConfig configFor(Path dir) throws IOException {
        Files.createDirectories(dir);
        int base = freeBase();
        GranaryConfig cfg = GranaryConfig.localDefault(dir.resolve("data"), dir.resolve("mnt"), base);
        cfg.client.attrTimeout = "1s";
        return cfg;
    }

    /**
     * A base port p such that p, p+61..p+63 and p+71..p+72 are all free, all below Linux's
     * ephemeral range (ip_local_port_range starts at 32768): a port picked there could be taken
     * by some outgoing connection between this check and the bind (seen in CI: "OSS cannot listen
     * on 127.0.0.1:32796: Address already in use").
     */
    static int freeBase() {
        for (int attempt = 0; attempt < 200; attempt++) {
            int base = ThreadLocalRandom.current().nextInt(20000, 32768 - 80);
            if (free(base) && free(base + 61) && free(base + 62) && free(base + 63) && free(base + 71) && free(base + 72)) {
                return base;
            }
        }
        throw new IllegalStateException("no free port range found");
    }

    private static boolean free(int port) {
        try (ServerSocket s = new ServerSocket()) {
            s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    /** Mounts a FUSE client at {@code mnt} (created if missing). */
    public Nodes.Client mount(Path mnt) throws IOException {
        Files.createDirectories(mnt);
        return cluster.mount(mnt);
    }

    /** Administrative namespace client (uid 0). */
    public MdsClient admin() {
        return cluster.admin();
    }

    /** The cluster's parts. */
    public LocalCluster cluster() {
        return cluster;
    }

    /** S3 GETs the cluster's OSS servers have sent so far. */
    public long ossGets() {
        return cluster.ossServers().stream().mapToLong(dev.granary.oss.server.OssServer::s3Gets).sum();
    }

    /** S3 PUTs the cluster's OSS servers have sent so far (not the clients' direct ones). */
    public long ossPuts() {
        return cluster.ossServers().stream().mapToLong(dev.granary.oss.server.OssServer::s3Puts).sum();
    }

    /** Empties every OSS read cache: the next read of a block is cold. */
    public void dropOssCaches() {
        cluster.ossServers().forEach(o -> o.cache().invalidateAll());
    }

    /** The data folder. */
    public Path dir() {
        return dir;
    }

    /**
     * Sets the default stripe size of directory {@code dir} (on a mount) through the
     * {@code granary.layout} xattr, with /usr/bin/python3; returns the layout read back.
     */
    static String setStripeSize(Path dir, long bytes) throws Exception {
        String layout = Shell.ok(dir, "/usr/bin/python3 -c \"import os, sys; os.setxattr(sys.argv[1], 'granary.layout', b'stripe_size=" + bytes
                + "'); print(os.getxattr(sys.argv[1], 'granary.layout').decode())\" '" + dir + "'");
        if (!layout.contains("stripe_size=" + bytes)) {
            throw new AssertionError("layout of " + dir + " not set: " + layout);
        }
        return layout.trim();
    }

    @Override
    public void close() {
        cluster.close();
    }
}
