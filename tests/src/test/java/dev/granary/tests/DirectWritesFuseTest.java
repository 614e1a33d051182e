package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.oss.client.DirectWriteBlockIo;
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
 * {@code client.direct_writes} (on in quickstart's config): through real FUSE mounts, a client
 * PUTs the blocks it writes straight to S3 with URLs its OSS signs, and they read back whole from
 * another mount, cold; with the setting off the OSSes upload them.
 */
class DirectWritesFuseTest {
    static final int MIB = 1 << 20;

    @TempDir
    static Path tmp;
    static MiniCluster cluster;

    @BeforeAll
    static void start() throws Exception {
        MiniCluster.assumeFuseDevice();
        dev.granary.tools.prereq.Prerequisites.ensureFuse();
        GranaryConfig cfg = MiniCluster.configFor(tmp.resolve("cluster"));
        assertTrue(cfg.client.directWrites, "quickstart's config writes straight to S3");
        cluster = MiniCluster.start(cfg);
    }

    @AfterAll
    static void stop() {
        if (cluster != null) cluster.close();
    }

    /**
     * 18 MiB written with fsync (5 stripes of 4 MiB, the last partial) and then rewritten in the
     * middle: every block is PUT by the client (none by the OSSes), and a second mount reads the
     * new bytes back, cold, whole and at offsets across stripes.
     */
    @Test
    void blocksArePutByTheClientAndReadBackFromAnotherMount() throws Exception {
        byte[] data = new byte[18 * MIB + 12345];
        new Random(21).nextBytes(data);
        long ossPuts0 = cluster.ossPuts();
        try (Nodes.Client w = cluster.mount(tmp.resolve("w"))) {
            DirectWriteBlockIo io = w.directWrites();
            Path f = w.mount().mountPoint().resolve("f");
            try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                ch.write(ByteBuffer.wrap(data));
                ch.force(true);
            }
            assertEquals(5, io.directPuts(), "one PUT per stripe");
            byte[] patch = new byte[MIB];
            new Random(22).nextBytes(patch);
            try (FileChannel ch = FileChannel.open(f, StandardOpenOption.WRITE)) {
                ch.write(ByteBuffer.wrap(patch), 7L * MIB); // inside stripe 1: a read-modify-write of it
            }
            System.arraycopy(patch, 0, data, 7 * MIB, patch.length);
            assertEquals(6, io.directPuts(), "the rewritten stripe once more");
            assertEquals(0, io.fallbacks(), "no direct PUT failed");
        }
        assertEquals(ossPuts0, cluster.ossPuts(), "the OSSes sent no PUT");

        cluster.dropOssCaches();
        Shell.ok(tmp, "sync; echo 3 > /proc/sys/vm/drop_caches");
        try (Nodes.Client r = cluster.mount(tmp.resolve("r"))) {
            Path f = r.mount().mountPoint().resolve("f");
            assertArrayEquals(data, Files.readAllBytes(f));
            try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ)) {
                for (long off : new long[] {0, 4L * MIB - 100, 7L * MIB - 5, 8L * MIB - 3, data.length - 1L}) {
                    DirectReadsFuseTest.readAndCheck(ch, data, off);
                }
            }
        }
    }

    /** With {@code client.direct_writes} off the OSSes upload every block; the client PUTs none. */
    @Test
    void offTheOssesUploadTheBlocks() throws Exception {
        byte[] data = new byte[9 * MIB];
        new Random(23).nextBytes(data);
        long ossPuts0 = cluster.ossPuts();
        cluster.cluster().config().client.directWrites = false; // the mounts made in this test
        try (Nodes.Client w = cluster.mount(tmp.resolve("w-off"))) {
            assertNull(w.directWrites());
            Files.write(w.mount().mountPoint().resolve("g"), data);
        } finally {
            cluster.cluster().config().client.directWrites = true;
        }
        assertEquals(3, cluster.ossPuts() - ossPuts0, "3 stripes, each uploaded by an OSS");
        try (Nodes.Client r = cluster.mount(tmp.resolve("r-off"))) {
            assertArrayEquals(data, Files.readAllBytes(r.mount().mountPoint().resolve("g")));
        }
    }
}
