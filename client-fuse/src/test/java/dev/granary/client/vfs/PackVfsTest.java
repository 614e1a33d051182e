package dev.granary.client.vfs;

import static dev.granary.client.vfs.GranaryVfs.O_CREAT;
import static dev.granary.client.vfs.GranaryVfs.O_EXCL;
import static dev.granary.client.vfs.GranaryVfs.O_RDONLY;
import static dev.granary.client.vfs.GranaryVfs.O_RDWR;
import static dev.granary.client.vfs.GranaryVfs.O_TRUNC;
import static dev.granary.client.vfs.GranaryVfs.O_WRONLY;
import static dev.granary.client.vfs.LocalCluster.ROOT;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.mds.FsException;
import dev.granary.mds.proto.Extent;
import dev.granary.mds.proto.GcBlock;
import dev.granary.mds.proto.Status;
import dev.granary.oss.BlockIo;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * Small-file packing ({@link PackWriter}, {@link ClientConfig#packMax()}) over the real MDS
 * namespace and real S3: files closed together by several threads share blocks (fewer PUTs than
 * files), read back whole from another client, and their packs are freed once no file refers to
 * them; a packed file whose stripe another client changed before its commit still keeps both
 * writers' bytes.
 */
class PackVfsTest extends LocalClusterTestBase {
    static final int SIZE = 100 * 1024;
    GranaryVfs a, b;
    String dir;

    @BeforeEach
    void setUp(TestInfo info) {
        ClientConfig c = ClientConfig.defaults().withInlineMax(16 * 1024).withPackMax(1 << 20).withDirLease(false);
        a = new GranaryVfs(cluster.mds, cluster.blockIo, c);
        b = new GranaryVfs(cluster.mds, cluster.blockIo, c);
        dir = "/" + info.getTestMethod().orElseThrow().getName();
        cluster.stripedDir(a, dir, 4 << 20);
    }

    @AfterEach
    void tearDown() {
        a.close();
        b.close();
    }

    static byte[] content(int i, int size) {
        byte[] d = new byte[size];
        new Random(i).nextBytes(d);
        return d;
    }

    static void write(GranaryVfs vfs, String path, byte[] data) {
        long fh = vfs.create(ROOT, path, 0644, O_CREAT | O_WRONLY | O_EXCL);
        vfs.write(ROOT, fh, 0, data, data.length);
        vfs.release(ROOT, fh);
    }

    static byte[] read(GranaryVfs vfs, String path, int max) {
        long fh = vfs.open(ROOT, path, O_RDONLY);
        try {
            return vfs.read(ROOT, fh, 0, max);
        } finally {
            vfs.release(ROOT, fh);
        }
    }

    Set<String> packObjects() {
        Set<String> keys = new HashSet<>();
        for (var o : cluster.ost0.list(BlockIo.PACK_KEY_PREFIX)) {
            keys.add("0:" + o.key());
        }
        for (var o : cluster.ost1.list(BlockIo.PACK_KEY_PREFIX)) {
            keys.add("1:" + o.key());
        }
        return keys;
    }

    Set<String> freedPacks() {
        Set<String> keys = new HashSet<>();
        for (GcBlock g : cluster.mds.gcList(ROOT, 0, 0, Long.MAX_VALUE).blocks()) {
            if (g.getBlockKey().startsWith(BlockIo.PACK_KEY_PREFIX)) {
                keys.add(g.getOst() + ":" + g.getBlockKey());
            }
        }
        return keys;
    }

    Extent extent(String path) {
        long ino = b.getattr(ROOT, path).getIno();
        return cluster.mds.getExtents(ROOT, ino, 0, 0).get(0);
    }

    @Test
    void filesClosedTogetherShareBlocksAndReadBackWholeFromAnotherClient() throws Exception {
        int threads = 8, perThread = 12, n = threads * perThread;
        Set<String> before = packObjects();
        long[] c0 = a.packCounters();
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int first = t * perThread;
                fs.add(pool.submit(() -> {
                    for (int i = first; i < first + perThread; i++) {
                        write(a, dir + "/f" + i, content(i, SIZE + i));
                    }
                }));
            }
            for (Future<?> f : fs) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
        long[] c = a.packCounters();
        long packs = c[0] - c0[0];
        assertEquals(n, c[1] - c0[1], "every file went into a pack");
        assertTrue(packs >= 1 && packs < n, "files closed together share packs: " + packs + " packs for " + n + " files");
        Set<String> made = new HashSet<>(packObjects());
        made.removeAll(before);
        assertEquals(packs, made.size(), "one S3 object per pack");
        Set<String> used = new HashSet<>();
        for (int i = 0; i < n; i++) {
            String p = dir + "/f" + i;
            assertArrayEquals(content(i, SIZE + i), read(b, p, 2 * SIZE), p);
            assertEquals(SIZE + i, b.getattr(ROOT, p).getSize());
            Extent e = extent(p);
            assertTrue(e.getPacked() && e.getBlockKey().startsWith(BlockIo.PACK_KEY_PREFIX), p + " is packed: " + e);
            used.add(e.getOst() + ":" + e.getBlockKey());
        }
        assertEquals(made, used, "the files refer to exactly the packs written");

        // removing them frees every pack once, when its last file goes
        for (int i = 0; i < n; i++) {
            b.unlink(ROOT, dir + "/f" + i);
        }
        Set<String> freed = freedPacks();
        assertTrue(freed.containsAll(made), "every pack freed: " + made.size() + " made, freed " + freed);
    }

    @Test
    void aPackedFilesBytesSurviveAnotherClientChangingItBeforeTheCommit() {
        String p = dir + "/shared";
        write(a, p, content(1, SIZE));
        // a rewrites its first bytes (a partial write: the commit is conditional on stripe 0)...
        long fh = a.open(ROOT, p, O_RDWR);
        byte[] head = "written by a".getBytes(StandardCharsets.UTF_8);
        a.write(ROOT, fh, 0, head, head.length);
        // ... while b replaces the whole file before a's close
        long fb = b.open(ROOT, p, O_WRONLY | O_TRUNC);
        byte[] other = content(2, SIZE + 7);
        b.write(ROOT, fb, 0, other, other.length);
        b.release(ROOT, fb);
        a.release(ROOT, fh); // its pack's commit finds stripe 0 changed: its bytes move to a block of their own
        byte[] want = Arrays.copyOf(other, other.length);
        System.arraycopy(head, 0, want, 0, head.length);
        GranaryVfs c = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults());
        try {
            assertArrayEquals(want, read(c, p, 2 * SIZE), "b's bytes with a's write over them");
        } finally {
            c.close();
        }
        assertFalse(extent(p).getPacked(), "a's commit went through a block of its own");
    }

    @Test
    void filesAtMostInlineMaxStayInlineAndPackingCanBeTurnedOff() {
        write(a, dir + "/tiny", content(3, 1000));
        assertFalse(extent(dir + "/tiny").getInlineData().isEmpty(), "at most inline_max: data on MDS");
        GranaryVfs off = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults().withInlineMax(16 * 1024).withPackMax(0));
        try {
            write(off, dir + "/own", content(4, SIZE));
            Extent e = extent(dir + "/own");
            assertFalse(e.getPacked(), "pack_max 0: a block of its own");
            assertTrue(e.getInlineData().isEmpty());
            assertArrayEquals(content(4, SIZE), read(b, dir + "/own", 2 * SIZE));
        } finally {
            off.close();
        }
        // above pack_max (and inline_max): a block of its own too
        GranaryVfs small = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults().withInlineMax(0).withPackMax(64 * 1024));
        try {
            write(small, dir + "/big", content(5, SIZE));
            assertFalse(extent(dir + "/big").getPacked());
            write(small, dir + "/fits", content(6, 50_000));
            assertTrue(extent(dir + "/fits").getPacked());
            assertArrayEquals(content(6, 50_000), read(b, dir + "/fits", SIZE));
        } finally {
            small.close();
        }
    }

    @Test
    void aFileRemovedBeforeItsPackCommitsLosesNothingElse() {
        // f0 is removed by b while a still has it open; a's close commits into a pack and gets the
        // file's error, and the pack is freed at once (nothing refers to it)
        long fh = a.create(ROOT, dir + "/gone", 0644, O_CREAT | O_WRONLY | O_EXCL);
        byte[] d = content(7, SIZE);
        a.write(ROOT, fh, 0, d, d.length);
        b.unlink(ROOT, dir + "/gone");
        Set<String> before = freedPacks();
        try {
            a.release(ROOT, fh);
        } catch (FsException e) {
            assertTrue(e.status() == Status.ENOENT || e.status() == Status.ESTALE, e.getMessage());
        }
        Set<String> freed = freedPacks();
        freed.removeAll(before);
        assertTrue(freed.size() <= 1, "at most its own pack freed: " + freed);
        write(a, dir + "/kept", content(8, SIZE));
        assertArrayEquals(content(8, SIZE), read(b, dir + "/kept", 2 * SIZE));
    }
}
