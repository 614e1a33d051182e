package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.client.vfs.DirtyBudget;
import dev.granary.tools.cluster.Nodes;
import dev.granary.tools.config.GranaryConfig;
import dev.granary.tools.prereq.Prerequisites;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code client.max_dirty} through a FUSE mount: a client whose dirty budget is 4 stripes
 * (256 KiB) writes 64 times that on several threads and handles at once. Every write completes,
 * the bytes are right (read through a second mount after fsync and close), and the client never
 * held more dirty memory than the budget (its {@link DirtyBudget.Stats}), while writers did block
 * on it.
 */
class MaxDirtyFuseTest {
    static final int STRIPE = 64 << 10;
    /** client.max_dirty of the writing mount: four stripes. */
    static final int MAX_DIRTY = 4 * STRIPE;

    @TempDir
    static Path tmp;
    static MiniCluster cluster;
    static Nodes.Client writer;
    static Path mntA;
    static Path mntB;

    @BeforeAll
    static void start() throws Exception {
        MiniCluster.assumeFuseDevice();
        Prerequisites.ensureFuse();
        GranaryConfig cfg = MiniCluster.configFor(tmp.resolve("cluster"));
        cfg.client.maxDirty = Integer.toString(MAX_DIRTY);
        cluster = MiniCluster.start(cfg);
        mntA = tmp.resolve("a");
        writer = cluster.mount(mntA);
        cfg.client.maxDirty = new GranaryConfig.Client().maxDirty; // the reader: default budget
        mntB = tmp.resolve("b");
        cluster.mount(mntB);
    }

    @AfterAll
    static void stop() {
        if (cluster != null) cluster.close();
    }

    static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    /** pwrite(2) of {@code data} in pieces of {@code chunk} bytes starting at {@code offsets} (in that order), none past {@code end}. */
    static void writeChunks(FileChannel ch, byte[] data, List<Integer> offsets, int chunk, int end) throws Exception {
        for (int off : offsets) {
            ByteBuffer b = ByteBuffer.wrap(data, off, Math.min(chunk, end - off));
            long pos = off;
            while (b.hasRemaining()) {
                pos += ch.write(b, pos);
            }
        }
    }

    @Test
    void writersOnSeveralThreadsStayWithinMaxDirtyAndEveryByteLands() throws Exception {
        Path dir = Files.createDirectory(mntA.resolve("w"));
        MiniCluster.setStripeSize(dir, STRIPE);
        int size = 4 << 20; // 16 x MAX_DIRTY per file
        byte[][] seq = {random(size, 1), random(size, 2), random(size, 3)};
        byte[] halves = random(size, 4);
        Files.createFile(dir.resolve("halves"));
        ExecutorService pool = Executors.newFixedThreadPool(5);
        long t0 = System.nanoTime();
        try {
            List<Future<?>> jobs = new ArrayList<>();
            // three sequential writers, 1 MiB write(2) calls (16 stripes each, 4 times the budget)
            for (int i = 0; i < seq.length; i++) {
                Path f = dir.resolve("seq" + i);
                byte[] data = seq[i];
                jobs.add(pool.submit(() -> {
                    List<Integer> offs = new ArrayList<>();
                    for (int off = 0; off < data.length; off += 1 << 20) offs.add(off);
                    try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                        writeChunks(ch, data, offs, 1 << 20, data.length);
                        ch.force(true);
                    }
                    return null;
                }));
            }
            // two handles of one file, each writing its half in shuffled 100,000-byte pieces:
            // stripes stay partial until the budget runs out and they are spilled
            for (int h = 0; h < 2; h++) {
                int from = h * size / 2;
                int to = from + size / 2;
                long seed = h;
                jobs.add(pool.submit(() -> {
                    List<Integer> offs = new ArrayList<>();
                    for (int off = from; off < to; off += 100_000) offs.add(off);
                    Collections.shuffle(offs, new Random(seed));
                    try (FileChannel ch = FileChannel.open(dir.resolve("halves"), StandardOpenOption.WRITE)) {
                        writeChunks(ch, halves, offs, 100_000, to);
                        ch.force(true);
                    }
                    return null;
                }));
            }
            for (Future<?> j : jobs) {
                j.get(300, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        DirtyBudget.Stats st = writer.vfs().dirtyStats();
        System.out.printf("max_dirty %d bytes: %d MiB written on 5 handles in %d ms; peak dirty %d bytes, %d waits, %d held after close%n",
                MAX_DIRTY, (seq.length + 1) * size >> 20, ms, st.peakBytes(), st.waits(), st.heldBytes());
        Path dirB = mntB.resolve("w");
        for (int i = 0; i < seq.length; i++) {
            assertArrayEquals(seq[i], Files.readAllBytes(dirB.resolve("seq" + i)), "seq" + i + " read through the other mount");
        }
        assertArrayEquals(halves, Files.readAllBytes(dirB.resolve("halves")), "two handles' halves read through the other mount");
        assertTrue(st.peakBytes() <= MAX_DIRTY, "the client held " + st.peakBytes() + " dirty bytes, above max_dirty " + MAX_DIRTY);
        assertTrue(st.peakBytes() >= MAX_DIRTY - STRIPE, "the budget was never nearly used up (peak " + st.peakBytes() + " bytes)");
        assertTrue(st.waits() > 0, "no writer ever waited for dirty memory");
        assertEquals(0, st.heldBytes(), "dirty memory still held after every handle closed");
    }
}
