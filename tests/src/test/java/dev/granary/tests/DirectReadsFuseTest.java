package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.oss.client.DirectReadBlockIo;
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
        // written through the OSSes, as with direct writes off: the first case reads blocks from
        // the OSS caches they passed through (DirectWritesFuseTest covers direct writes)
        cfg.client.directWrites = false;
        cluster = MiniCluster.start(cfg);
    }

    @AfterAll
    static void stop() {
        if (cluster != null) cluster.close();
    }

    @Test
    void coldBlocksAreReadStraightFromS3AndCachedOnesThroughTheOss() throws Exception {
        byte[] data = new byte[18 * MIB + 12345]; // 5 stripes of 4 MiB on both OSTs, the last partial
        new Random(7).nextBytes(data);
        try (Nodes.Client w = cluster.mount(tmp.resolve("w"))) {
            Files.write(w.mount().mountPoint().resolve("f"), data);
        }

        // The blocks are in the OSS caches (written through them): read from there, no direct GET.
        long gets0 = cluster.ossGets();
        try (Nodes.Client r = cluster.mount(tmp.resolve("r1"))) {
            assertArrayEquals(data, Files.readAllBytes(r.mount().mountPoint().resolve("f")));
            assertEquals(0, r.directReads().directGets(), "cached blocks come from the OSS");
        }
        assertEquals(gets0, cluster.ossGets(), "served from the OSS caches");

        // Cold: straight from S3. A sequential read, then ranged reads inside and across stripes.
        cluster.dropOssCaches();
        long gets1 = cluster.ossGets();
        try (Nodes.Client r = cluster.mount(tmp.resolve("r2"))) {
            Path f = r.mount().mountPoint().resolve("f");
            assertArrayEquals(data, Files.readAllBytes(f));
            DirectReadBlockIo io = r.directReads();
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
        assertEquals(gets1, cluster.ossGets(), "the OSSes sent no GET of their own for the cold reads");
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
        cluster.dropOssCaches();
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
        cluster.dropOssCaches();
        int slot = 128 << 10;
        byte[] data2 = data.clone();
        new Random(12).nextBytes(data2);
        try (Nodes.Client r = cluster.mount(tmp.resolve("dr"))) {
            Path f = r.mount().mountPoint().resolve("d");
            DirectReadBlockIo io = r.directReads();
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
            cluster.dropOssCaches();
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
        cluster.dropOssCaches();
        try (Nodes.Client r = cluster.mount(tmp.resolve("ds"))) {
            DirectReadBlockIo io = r.directReads();
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

    /**
     * The C library's truncate(2), by path (no descriptor is opened, so no write handle exists),
     * and what {@link #dropPages} needs.
     */
    public interface LibC {
        int truncate(String path, long length);

        int open(String path, int flags);

        int posix_fadvise(int fd, long offset, long len, int advice);

        int close(int fd);
    }

    /** Linux's POSIX_FADV_DONTNEED (bits/fcntl-linux.h). */
    static final int POSIX_FADV_DONTNEED = 4;

    /**
     * Drops the clean pages of {@code p} from this node's page cache ({@code posix_fadvise(2)}
     * DONTNEED on a read-only descriptor): the next read of them reaches Granary as a READ.
     */
    static void dropPages(LibC libc, Path p) {
        int fd = libc.open(p.toString(), 0);
        assertTrue(fd >= 0, "open of " + p);
        try {
            assertEquals(0, libc.posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), "posix_fadvise DONTNEED of " + p);
        } finally {
            libc.close(fd);
        }
    }

    /** Runs {@code body} with client.stripe_fill_reads 2 for the mounts it makes. */
    static void withStripeFills(ThrowingRunnable body) throws Exception {
        cluster.cluster().config().client.stripeFillReads = 2;
        try {
            body.run();
        } finally {
            cluster.cluster().config().client.stripeFillReads = 0;
        }
    }

    interface ThrowingRunnable {
        void run() throws Exception;
    }

    interface TwoClients {
        void run(Nodes.Client reader, Nodes.Client writer) throws Exception;
    }

    /** Runs {@code body} with a reader mount that fills stripes (stripe_fill_reads 2) and a writer mount that does not. */
    static void withReaderAndWriter(String name, TwoClients body) throws Exception {
        Nodes.Client[] reader = new Nodes.Client[1];
        withStripeFills(() -> reader[0] = cluster.mount(tmp.resolve(name + "r")));
        try (Nodes.Client r = reader[0]; Nodes.Client w = cluster.mount(tmp.resolve(name + "w"))) {
            body.run(r, w);
        }
    }

    /** Bytes read at {@code off} through {@code ch} (up to 128 KiB; 0 at or past the end). */
    static int readCount(FileChannel ch, long off) throws Exception {
        return Math.max(0, ch.read(ByteBuffer.allocate(128 << 10), off));
    }

    /**
     * Helper-found (two of them, 10-30% of tries before the fix): a READ served while a request
     * that changes the file's pages was being served stored what it planned with the state from
     * before it. Here a {@code truncate(2)} by path races the second random read of a stripe
     * past the new end (0-4 ms apart): after the truncate returned, that stripe's bytes came back
     * from reads past the new end, through the old descriptor and a new one, until a stat. Each
     * such request now moves the node's generation again just before its reply, so the store
     * is left out.
     */
    @Test
    void aReadRacingATruncateByPathStoresNothingPastTheNewEnd() throws Exception {
        LibC libc = jnr.ffi.LibraryLoader.create(LibC.class).load("c");
        withStripeFills(() -> {
            try (Nodes.Client r = cluster.mount(tmp.resolve("tr"))) {
                Random rnd = new Random(5);
                int bad = 0;
                int iterations = 30;
                byte[] data = new byte[12 * MIB];
                for (int i = 0; i < iterations; i++) {
                    Path p = r.mount().mountPoint().resolve("t" + i);
                    java.util.Arrays.fill(data, (byte) (i + 1));
                    Files.write(p, data);
                    long stripe2 = 8L * MIB;
                    long newEnd = MIB + rnd.nextInt(7 * MIB);
                    long delayNs = rnd.nextInt(4_000_000);
                    try (FileChannel h = FileChannel.open(p, StandardOpenOption.READ)) {
                        readCount(h, stripe2 + 5L * (128 << 10));
                        Thread t = new Thread(() -> {
                            if (libc.truncate(p.toString(), newEnd) != 0) throw new IllegalStateException("truncate failed");
                        });
                        t.start();
                        java.util.concurrent.locks.LockSupport.parkNanos(delayNs);
                        readCount(h, stripe2 + 25L * (128 << 10)); // the stripe's second random read: a fill
                        t.join();
                        Thread.sleep(150); // the store, if any, has landed
                        int oldFd = readCount(h, stripe2 + 10L * (128 << 10));
                        int newFd;
                        try (FileChannel n = FileChannel.open(p, StandardOpenOption.READ)) {
                            newFd = readCount(n, stripe2);
                        }
                        long size = Files.size(p);
                        if (oldFd != 0 || newFd != 0 || size != newEnd) {
                            bad++;
                            System.out.printf("iteration %d: truncate to %d, delay %.1f ms: %d and %d bytes read past the end, size %d%n",
                                    i, newEnd, delayNs / 1e6, oldFd, newFd, size);
                        }
                    }
                    Files.delete(p);
                }
                assertTrue(r.vfs().denseReadStats().fills() > 0, "the second reads fetched stripes whole: " + r.vfs().denseReadStats());
                assertEquals(0, bad, "iterations that read bytes past the end of a file truncated before");
            }
        });
    }

    /**
     * Helper-found, the other half: another client rewrote the file and closed it; an open here
     * (which must see the new bytes: close-to-open) raced the old descriptor's second random read
     * of the stripe, which planned with the old map and stored the old bytes after the open had
     * made the kernel drop the pages. The new descriptor then read old bytes (28 of 100 tries).
     * Each iteration first drops the file's pages here, so that its reads reach Granary and a
     * fill may race the open in every iteration (57 of 60 filled). Without that drop only the
     * first iteration could fill, and it did not when the open won that one race (CI, twice:
     * fills=0). With the reply-time generation bump disabled, 22 of 60 iterations read old bytes.
     */
    @Test
    void anOpenAfterAnotherClientsCloseNeverReadsPagesStoredFromTheOldMap() throws Exception {
        LibC libc = jnr.ffi.LibraryLoader.create(LibC.class).load("c");
        withReaderAndWriter("o", (r, w) -> {
            Path wp = w.mount().mountPoint().resolve("o");
            Path rp = r.mount().mountPoint().resolve("o");
            byte[] data = new byte[4 * MIB];
            java.util.Arrays.fill(data, (byte) 1);
            Files.write(wp, data);
            Thread.sleep(1200); // the reader's cached view of the name expires
            Random rnd = new Random(6);
            int bad = 0;
            int iterations = 60;
            for (int i = 0; i < iterations; i++) {
                byte version = (byte) (i + 2);
                // the last iteration's check read the file into the page cache, where this open
                // would keep it (nothing changed since) and its reads would never reach Granary
                dropPages(libc, rp);
                try (FileChannel h = FileChannel.open(rp, StandardOpenOption.READ)) {
                    int s1 = 3 + rnd.nextInt(12);
                    int s2 = 18 + rnd.nextInt(12);
                    readCount(h, (long) s1 << 17);
                    java.util.Arrays.fill(data, version);
                    try (FileChannel wc = FileChannel.open(wp, StandardOpenOption.WRITE)) {
                        wc.write(ByteBuffer.wrap(data), 0);
                    }
                    FileChannel[] opened = new FileChannel[1];
                    Thread t = new Thread(() -> {
                        try {
                            opened[0] = FileChannel.open(rp, StandardOpenOption.READ);
                        } catch (java.io.IOException e) {
                            throw new java.io.UncheckedIOException(e);
                        }
                    });
                    long delayNs = rnd.nextInt(4_000_000);
                    t.start();
                    java.util.concurrent.locks.LockSupport.parkNanos(delayNs);
                    readCount(h, (long) s2 << 17);
                    t.join();
                    Thread.sleep(150);
                    ByteBuffer all = ByteBuffer.allocate(4 * MIB);
                    try (FileChannel a = opened[0]) {
                        while (all.hasRemaining() && a.read(all, all.position()) > 0) { }
                    }
                    int old = 0;
                    for (int k = 0; k < all.position(); k += 4096) {
                        if (all.get(k) != version) old++;
                    }
                    if (old > 0 || all.position() != data.length) {
                        bad++;
                        System.out.printf("iteration %d: delay %.1f ms: %d of 1024 pages not the version closed before the open%n",
                                i, delayNs / 1e6, old);
                    }
                }
            }
            assertTrue(r.vfs().denseReadStats().fills() > 0, "the second reads fetched stripes whole: " + r.vfs().denseReadStats());
            assertEquals(0, bad, "opens after another client's close that read older bytes");
        });
    }

    /**
     * Helper-found, deterministic: another client truncated the file, a stat here showed the new
     * size, and an older descriptor (whose view is the old, larger file) filled a stripe: Linux
     * raised its size of the file to the store's end, so reads past the real end returned the
     * old bytes until the next stat. A store now ends at the last size this mount gave the kernel.
     */
    @Test
    void aStoreNeverRaisesTheSizeTheKernelKnows() throws Exception {
        withReaderAndWriter("s", (r, w) -> {
            byte[] data = new byte[16 * MIB];
            java.util.Arrays.fill(data, (byte) 7);
            Path wp = w.mount().mountPoint().resolve("s");
            Path rp = r.mount().mountPoint().resolve("s");
            Files.write(wp, data);
            Thread.sleep(1200);
            try (FileChannel h = FileChannel.open(rp, StandardOpenOption.READ)) {
                assertEquals(16L * MIB, Files.size(rp));
                try (FileChannel wc = FileChannel.open(wp, StandardOpenOption.WRITE)) {
                    wc.truncate(MIB);
                }
                Thread.sleep(2500); // the kernel's attributes of the file expire
                assertEquals(MIB, Files.size(rp), "a stat here shows the other client's truncate");
                assertEquals(0, readCount(h, 2L * MIB), "past the end the kernel knows");
                long fills = r.vfs().denseReadStats().fills();
                readCount(h, 7L << 17); // two random reads of stripe 0 through the old descriptor: a fill
                readCount(h, 2L << 17);
                waitFor(() -> r.vfs().denseReadStats().fills() > fills, "the fill");
                Thread.sleep(300);
                assertEquals(0, readCount(h, 2L * MIB), "a read past the end after the fill");
                assertEquals(0, readCount(h, 3L * MIB), "a read past the end after the fill");
                assertEquals(MIB, Files.size(rp));
            }
        });
    }
}
