package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Extent;
import dev.granary.objbacker.ObjectStore.ObjectInfo;
import dev.granary.objbacker.ObjectStore;
import dev.granary.oss.client.OssClient;
import dev.granary.tools.cluster.Nodes;
import dev.granary.tools.config.GranaryConfig;
import dev.granary.tools.gc.BlockGc;
import dev.granary.tools.prereq.Prerequisites;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The block GC on a real cluster: blocks freed through the mounts (overwrite, truncate, unlink)
 * leave the S3 buckets after the grace, live blocks stay, and a reader that opened a file before
 * another client changed it goes on reading once the old blocks are gone.
 */
class BlockGcTest {
    private static final int MIB = 1 << 20;
    @TempDir
    static Path tmp;
    static MiniCluster cluster;
    static Path mntA, mntB, config;
    static OssClient oss;

    @BeforeAll
    static void start() throws Exception {
        MiniCluster.assumeFuseDevice();
        Prerequisites.ensureFuse();
        GranaryConfig cfg = MiniCluster.configFor(tmp.resolve("cluster"));
        cfg.gc.interval = "0s"; // passes run when the test says, not on a timer
        cluster = MiniCluster.start(cfg);
        config = tmp.resolve("granary.yaml");
        cfg.save(config);
        mntA = tmp.resolve("a");
        mntB = tmp.resolve("b");
        cluster.mount(mntA);
        cluster.mount(mntB);
        oss = new OssClient(cfg.oss.stream().map(n -> n.address).toList());
    }

    @AfterAll
    static void stop() {
        if (oss != null) oss.close();
        if (cluster != null) cluster.close();
    }

    private static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    /** Every object of every OST bucket, as "ost/key". */
    private static Set<String> objects() {
        Set<String> out = new TreeSet<>();
        Map<Integer, ObjectStore> stores = Nodes.openOsts(cluster.cluster().config());
        try {
            stores.forEach((ost, store) -> {
                for (ObjectInfo o : store.list("")) {
                    out.add(ost + "/" + o.key());
                }
            });
        } finally {
            stores.values().forEach(ObjectStore::close);
        }
        return out;
    }

    /** The blocks the live files of directory {@code dir} (under the root) reference, as "ost/key". */
    private static Set<String> liveBlocks(String dir, String... names) {
        MdsClient mds = cluster.admin();
        Attr d = mds.lookup(Nodes.ROOT, MdsClient.ROOT_INO, dir.getBytes(StandardCharsets.UTF_8));
        Set<String> out = new TreeSet<>();
        for (String n : names) {
            Attr f = mds.lookup(Nodes.ROOT, d.getIno(), n.getBytes(StandardCharsets.UTF_8));
            for (Extent e : mds.getFileMap(Nodes.ROOT, f.getIno()).extents()) {
                if (!e.getBlockKey().isEmpty()) out.add(e.getOst() + "/" + e.getBlockKey());
            }
        }
        return out;
    }

    @Test
    void blocksFreedByOverwriteTruncateAndUnlinkLeaveTheBucketsAfterTheGraceAndLiveOnesStay() throws Exception {
        Path d = Files.createDirectory(mntA.resolve("gc1"));
        MiniCluster.setStripeSize(d, MIB);
        byte[] a1 = random(3 * MIB, 1), b1 = random(2 * MIB, 2), c1 = random(2 * MIB, 3);
        Files.write(d.resolve("a"), a1);
        Files.write(d.resolve("b"), b1);
        Files.write(d.resolve("c"), c1);
        Set<String> before = liveBlocks("gc1", "a", "b", "c");
        assertEquals(7, before.size(), "one block per 1 MiB stripe");
        assertTrue(objects().containsAll(before));

        byte[] a2 = random(3 * MIB, 4);
        Files.write(d.resolve("a"), a2); // O_TRUNC: a's three blocks freed, three new ones
        try (FileChannel ch = FileChannel.open(d.resolve("b"), StandardOpenOption.WRITE)) {
            ch.truncate(MIB); // b's second block freed
        }
        Files.delete(d.resolve("c")); // c's two blocks freed
        Set<String> live = liveBlocks("gc1", "a", "b");
        assertEquals(4, live.size());
        Set<String> freed = new TreeSet<>(before);
        freed.removeAll(live);
        assertEquals(6, freed.size());

        BlockGc.Pass young = new BlockGc(cluster.admin(), oss, Duration.ofHours(1)).runPass();
        assertEquals(new BlockGc.Pass(0, 0, 0), young, "nothing was freed an hour ago");
        assertTrue(objects().containsAll(freed), "within the grace the freed blocks stay");

        LayoutAndInlineTest.Cli status = cli("status", "-c", config.toString());
        assertTrue(status.out().contains("  GC  queue 6 freed blocks, 0 freed more than gc.grace (5m) ago; no timed passes (gc.interval 0s)"),
                status.toString());

        LayoutAndInlineTest.Cli gc = cli("gc", "-c", config.toString(), "--grace", "0s");
        assertEquals(0, gc.rc(), gc.toString());
        assertTrue(gc.out().get(0).startsWith("granary gc: 6 blocks deleted"), gc.toString());
        Set<String> left = objects();
        for (String f : freed) {
            assertTrue(!left.contains(f), "freed block " + f + " still in its bucket");
        }
        assertTrue(left.containsAll(live), "a live block was deleted");

        assertArrayEquals(a2, Files.readAllBytes(mntB.resolve("gc1/a")), "a read on the other client");
        assertArrayEquals(Arrays.copyOf(b1, MIB), Files.readAllBytes(mntB.resolve("gc1/b")));
        assertEquals(new BlockGc.Pass(0, 0, 0), new BlockGc(cluster.admin(), oss, Duration.ZERO).runPass(), "the queue is empty");
    }

    @Test
    void aReaderThatOpenedAFileBeforeAnotherClientRewroteItReadsTheNewBytesOnceTheOldBlocksAreDeleted() throws Exception {
        Path d = Files.createDirectory(mntA.resolve("gc2"));
        MiniCluster.setStripeSize(d, MIB);
        byte[] v1 = random(8 * MIB, 5), v2 = random(8 * MIB, 6);
        Files.write(d.resolve("f"), v1);
        try (FileChannel reader = FileChannel.open(mntB.resolve("gc2/f"), StandardOpenOption.READ)) {
            ByteBuffer head = ByteBuffer.allocate(4096);
            reader.read(head, 0);
            assertArrayEquals(Arrays.copyOf(v1, 4096), head.array());
            Files.write(d.resolve("f"), v2); // another client rewrites it: the reader's map names freed blocks
            BlockGc.Pass p = new BlockGc(cluster.admin(), oss, Duration.ZERO).runPass();
            assertEquals(8, p.deleted(), p.toString());
            ByteBuffer tail = ByteBuffer.allocate(64 * 1024);
            int n = reader.read(tail, 8 * MIB - tail.capacity()); // a stripe neither the kernel nor the client read ahead
            assertEquals(tail.capacity(), n);
            assertArrayEquals(Arrays.copyOfRange(v2, 8 * MIB - tail.capacity(), 8 * MIB), tail.array(),
                    "close-to-open lets the reader see the newer file; its old blocks are gone (was: EIO)");
        }
    }

    /**
     * A descriptor opened before another client rewrote the file writes part of a stripe after
     * the GC deleted the blocks its map names: the write is merged with the stripe's live block
     * (the newer file, as close-to-open allows) and close succeeds. Before, the read-modify-write
     * of the deleted block failed and close returned EIO, losing the write. Both paths: a write
     * that must read the old bytes at once (a small write in the middle of a stripe, then a
     * read of that stripe through the same descriptor) and one merged at upload (close).
     */
    @Test
    void aWriterThatOpenedAFileBeforeAnotherClientRewroteItWritesOnTheNewBytesOnceTheOldBlocksAreDeleted() throws Exception {
        Path d = Files.createDirectory(mntA.resolve("gc4"));
        MiniCluster.setStripeSize(d, MIB);
        byte[] v1 = random(4 * MIB, 8), v2 = random(4 * MIB, 9);
        byte[] patch = random(1000, 10);
        Files.write(d.resolve("f"), v1);
        try (FileChannel writer = FileChannel.open(mntB.resolve("gc4/f"), StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            Files.write(d.resolve("f"), v2);
            assertEquals(4, new BlockGc(cluster.admin(), oss, Duration.ZERO).runPass().deleted());
            assertEquals(patch.length, writer.write(ByteBuffer.wrap(patch), MIB + 5000)); // merged at upload
            assertEquals(patch.length, writer.write(ByteBuffer.wrap(patch), 2 * MIB + 7000));
            ByteBuffer back = ByteBuffer.allocate(20_000); // 2 * MIB .. : the stripe's old bytes are read now
            assertEquals(back.capacity(), writer.read(back, 2 * MIB));
            byte[] want = v2.clone();
            System.arraycopy(patch, 0, want, MIB + 5000, patch.length);
            System.arraycopy(patch, 0, want, 2 * MIB + 7000, patch.length);
            assertArrayEquals(Arrays.copyOfRange(want, 2 * MIB, 2 * MIB + back.capacity()), back.array());
        } // close: was EIO
        byte[] want = v2.clone();
        System.arraycopy(patch, 0, want, MIB + 5000, patch.length);
        System.arraycopy(patch, 0, want, 2 * MIB + 7000, patch.length);
        assertArrayEquals(want, Files.readAllBytes(d.resolve("f")), "the writes on the newer file, read through the other mount");
        assertEquals(2, new BlockGc(cluster.admin(), oss, Duration.ZERO).runPass().deleted(),
                "the two blocks of the newer file the writes replaced (and nothing for the other tests)");
    }

    @Test
    void aReaderOfAFileAnotherClientRemovedGetsEstaleOnceItsBlocksAreDeleted() throws Exception {
        Path d = Files.createDirectory(mntA.resolve("gc3"));
        MiniCluster.setStripeSize(d, MIB);
        Files.write(d.resolve("f"), random(8 * MIB, 7));
        try (FileChannel reader = FileChannel.open(mntB.resolve("gc3/f"), StandardOpenOption.READ)) {
            reader.read(ByteBuffer.allocate(4096), 0);
            Files.delete(d.resolve("f"));
            assertEquals(8, new BlockGc(cluster.admin(), oss, Duration.ZERO).runPass().deleted());
            IOException e = assertThrows(IOException.class, () -> reader.read(ByteBuffer.allocate(64 * 1024), 8 * MIB - 64 * 1024));
            assertTrue(String.valueOf(e.getMessage()).contains("Stale file handle"), "ESTALE, as NFS: " + e);
        }
    }

    @Test
    void gcWithABadGraceOrNoClusterSaysSoInOneLine() throws Exception {
        try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), "gc", "-c", config.toString(), "--grace", "soon")) {
            assertEquals(2, g.waitFor(60), g.transcript());
            assertTrue(g.transcript().contains("--grace: not a duration: 'soon'"), g.transcript());
            assertTrue(!g.transcript().contains("\tat "), "no stack trace\n" + g.transcript());
        }
        Path none = tmp.resolve("none.yaml");
        MiniCluster.configFor(tmp.resolve("none")).save(none);
        LayoutAndInlineTest.Cli down = cli("gc", "-c", none.toString());
        assertEquals(1, down.rc(), down.toString());
        assertEquals(1, down.errors().size(), down.toString());
        assertTrue(down.errors().get(0).contains("gc: no MDS peer is reachable"), down.toString());
    }

    private static LayoutAndInlineTest.Cli cli(String... args) throws Exception {
        try (GranaryProcess p = GranaryProcess.start(tmp, Map.of(), args)) {
            int rc = p.waitFor(60);
            java.util.List<String> out;
            synchronized (p.out) {
                out = new java.util.ArrayList<>(p.out);
            }
            return new LayoutAndInlineTest.Cli(rc, out, p.errorLines());
        }
    }
}
