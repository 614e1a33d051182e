package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.oss.client.DirectReadBlockIo;
import dev.granary.oss.server.OssServer;
import dev.granary.tools.cluster.Nodes;
import dev.granary.tools.config.GranaryConfig;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code client.direct_reads}: through real FUSE mounts, a client reads blocks its OSS does not
 * hold with ranged GETs straight to the embedded S3 server, on URLs the OSS signed (S3Proxy checks
 * the SigV4 query signature), and blocks the OSS holds through the OSS from memory. Each mount is
 * a fresh client (its own kernel page cache), so every read reaches Granary.
 */
class DirectReadsFuseTest {
    static final int MIB = 1 << 20;

    @TempDir
    static Path tmp;
    static MiniCluster cluster;

    @BeforeAll
    static void start() throws Exception {
        MiniCluster.assumeFuseDevice();
        dev.granary.tools.prereq.Prerequisites.ensureFuse();
        GranaryConfig cfg = MiniCluster.configFor(tmp.resolve("cluster"));
        cfg.client.directReads = true;
        cluster = MiniCluster.start(cfg);
    }

    @AfterAll
    static void stop() {
        if (cluster != null) cluster.close();
    }

    static long ossGets() {
        return cluster.cluster().ossServers().stream().mapToLong(OssServer::s3Gets).sum();
    }

    static void dropOssCaches() {
        cluster.cluster().ossServers().forEach(o -> o.cache().invalidateAll());
    }

    @Test
    void coldBlocksAreReadStraightFromS3AndCachedOnesThroughTheOss() throws Exception {
        byte[] data = new byte[18 * MIB + 12345]; // 5 stripes of 4 MiB on both OSTs, the last partial
        new Random(7).nextBytes(data);
        try (Nodes.Client w = cluster.mount(tmp.resolve("w"))) {
            Files.write(w.mount().mountPoint().resolve("f"), data);
        }

        // The blocks are in the OSS caches (written through them): read from there, no direct GET.
        long gets0 = ossGets();
        try (Nodes.Client r = cluster.mount(tmp.resolve("r1"))) {
            assertArrayEquals(data, Files.readAllBytes(r.mount().mountPoint().resolve("f")));
            assertEquals(0, ((DirectReadBlockIo) r.blocks()).directGets(), "cached blocks come from the OSS");
        }
        assertEquals(gets0, ossGets(), "served from the OSS caches");

        // Cold: straight from S3. A sequential read, then ranged reads inside and across stripes.
        dropOssCaches();
        long gets1 = ossGets();
        try (Nodes.Client r = cluster.mount(tmp.resolve("r2"))) {
            Path f = r.mount().mountPoint().resolve("f");
            assertArrayEquals(data, Files.readAllBytes(f));
            DirectReadBlockIo io = (DirectReadBlockIo) r.blocks();
            assertTrue(io.directGets() >= 5, "one GET per block at least: " + io.directGets());
            assertEquals(0, io.fallbacks(), "no direct GET failed");
            try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ)) {
                for (long off : new long[] {0, 4L * MIB - 100, 9L * MIB + 17, data.length - 5000L, data.length - 1L}) {
                    ByteBuffer b = ByteBuffer.allocate(128 << 10);
                    int n = ch.read(b, off);
                    int want = (int) Math.min(b.capacity(), data.length - off);
                    assertEquals(want, n, "read at " + off);
                    byte[] exp = new byte[want];
                    System.arraycopy(data, (int) off, exp, 0, want);
                    byte[] got = new byte[n];
                    b.flip().get(got);
                    assertArrayEquals(exp, got, "bytes at " + off);
                }
            }
        }
        assertEquals(gets1, ossGets(), "the OSSes sent no GET of their own for the cold reads");
    }
}
