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
import java.util.List;
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

    /** Reads 128 KiB at {@code off} through {@code ch} and checks the bytes against {@code data}. */
    static void readAndCheck(FileChannel ch, byte[] data, long off) throws Exception {
        ByteBuffer b = ByteBuffer.allocate(128 << 10);
        int n = ch.read(b, off);
        int want = (int) Math.min(b.capacity(), data.length - off);
        assertEquals(want, n, "read at " + off);
        byte[] got = new byte[n];
        b.flip().get(got);
        assertArrayEquals(java.util.Arrays.copyOfRange(data, (int) off, (int) off + want), got, "bytes at " + off);
    }

    static void waitFor(java.util.function.BooleanSupplier done, String what) throws InterruptedException {
        long end = System.nanoTime() + 10_000_000_000L;
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < end, "timed out waiting for " + what);
            Thread.sleep(10);
        }
    }

    /**
     * With {@code client.stripe_fill_reads: 2} (off by default), dense random reads (two 128 KiB
     * reads in a 4 MiB stripe) fetch the stripe whole once and
     * put it in the kernel's page cache, where the other 30 reads of each stripe find it: 256
     * reads of 8 stripes cost 16 GETs (and 8 more at most if the VM evicted pages), where each read
     * was a GET of its own before. The bytes are the file's; sparse reads (one per stripe) still
     * fetch only what they ask; a handle that may write fills nothing; and after another client
     * rewrote the file, a new open reads the new bytes, not the stored ones.
     */
    @Test
    void denseRandomReadsFetchAStripeOnceIntoThePageCache() throws Exception {
        cluster.cluster().config().client.stripeFillReads = 2; // opt-in: the mounts made in this test
        try {
            denseRandomReads();
        } finally {
            cluster.cluster().config().client.stripeFillReads = 0;
        }
        // Off (the default): the same two reads per stripe fetch just their ranges.
        dropOssCaches();
        try (Nodes.Client r = cluster.mount(tmp.resolve("doff"));
                FileChannel ch = FileChannel.open(r.mount().mountPoint().resolve("d"), StandardOpenOption.READ)) {
            for (int k = 0; k < 8; k++) {
                ch.read(ByteBuffer.allocate(128 << 10), (long) k * 4 * MIB + (5L << 17));
                ch.read(ByteBuffer.allocate(128 << 10), (long) k * 4 * MIB + (17L << 17));
            }
            assertEquals(0, r.vfs().denseReadStats().fills(), "stripe_fill_reads 0: no stripe fetched whole");
            assertEquals(0, r.mount().fs().pageStores());
        }
    }

    private void denseRandomReads() throws Exception {
        int stripes = 8;
        byte[] data = new byte[stripes * 4 * MIB + 12345];
        new Random(11).nextBytes(data);
        try (Nodes.Client w = cluster.mount(tmp.resolve("dw"))) {
            Files.write(w.mount().mountPoint().resolve("d"), data);
        }
        dropOssCaches();
        int slot = 128 << 10;
        byte[] data2 = data.clone();
        new Random(12).nextBytes(data2);
        try (Nodes.Client r = cluster.mount(tmp.resolve("dr"))) {
            Path f = r.mount().mountPoint().resolve("d");
            DirectReadBlockIo io = (DirectReadBlockIo) r.blocks();
            try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ)) {
                for (int k = 0; k < stripes; k++) { // two random reads per stripe
                    readAndCheck(ch, data, (long) k * 4 * MIB + 5L * slot);
                    readAndCheck(ch, data, (long) k * 4 * MIB + 17L * slot);
                }
                waitFor(() -> r.mount().fs().pageStores() >= stripes, "the stripes stored in the page cache");
                assertTrue(r.vfs().denseReadStats().fills() >= stripes, "fills: " + r.vfs().denseReadStats());
                long gets = io.directGets();
                assertTrue(gets <= 3L * stripes, "two reads per stripe, then one whole fetch: " + gets + " GETs");
                for (int k = 0; k < stripes; k++) { // the other 30 slots of each stripe, shuffled
                    List<Integer> slots = new java.util.ArrayList<>();
                    for (int i = 0; i < 32; i++) {
                        if (i != 5 && i != 17) slots.add(i);
                    }
                    java.util.Collections.shuffle(slots, new Random(k));
                    for (int i : slots) {
                        readAndCheck(ch, data, (long) k * 4 * MIB + (long) i * slot);
                    }
                }
                long more = io.directGets() - gets;
                assertTrue(more <= stripes, "240 reads from the page cache, not " + more + " GETs");
            }
            long stored = r.mount().fs().pageStoreBytes();
            assertTrue(stored >= stripes * 4L * MIB && stored <= stripes * 4L * MIB + 12345, "whole stripes stored: " + stored);

            // A handle that may write fills nothing, however dense its reads.
            long fills = r.vfs().denseReadStats().fills();
            dropOssCaches();
            try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                for (int i = 0; i < 6; i++) {
                    readAndCheck(ch, data, 4L * MIB * (i % 3) + 3L * slot * (i + 1));
                }
            }
            assertEquals(fills, r.vfs().denseReadStats().fills(), "no whole-stripe fetch for a read-write handle");

            // Another client rewrites the file: a new open here reads the new bytes.
            try (Nodes.Client w = cluster.mount(tmp.resolve("dw2"))) {
                Files.write(w.mount().mountPoint().resolve("d"), data2);
            }
            try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ)) {
                for (int k = 0; k < stripes; k++) {
                    for (int i : new int[] {5, 17, 9, 30}) {
                        readAndCheck(ch, data2, (long) k * 4 * MIB + (long) i * slot);
                    }
                }
            }
        }

        // Sparse random reads, one per stripe, on a fresh client: one ranged GET each, no stripe fetched whole.
        dropOssCaches();
        try (Nodes.Client r = cluster.mount(tmp.resolve("ds"))) {
            DirectReadBlockIo io = (DirectReadBlockIo) r.blocks();
            try (FileChannel ch = FileChannel.open(r.mount().mountPoint().resolve("d"), StandardOpenOption.READ)) {
                long before = io.directGets();
                for (int k = stripes - 1; k >= 0; k--) {
                    readAndCheck(ch, data2, (long) k * 4 * MIB + 9L * slot);
                }
                assertEquals(stripes, io.directGets() - before, "one ranged GET per sparse read");
            }
            assertEquals(0, r.vfs().denseReadStats().fills(), "no stripe fetched whole for sparse reads");
            assertEquals(0, r.mount().fs().pageStores());
        }
    }
}
