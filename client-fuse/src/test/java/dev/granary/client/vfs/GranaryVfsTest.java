package dev.granary.client.vfs;

import static dev.granary.client.vfs.GranaryVfs.O_APPEND;
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
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.mds.FsException;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.Extent;
import dev.granary.mds.proto.Status;
import dev.granary.oss.BlockIo;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/** GranaryVfs over the real MDS namespace (local RocksDB) and real S3 (embedded S3Proxy, two OSTs). */
class GranaryVfsTest extends LocalClusterTestBase {
    static final int S = 64 * 1024; // stripe size of the test directories
    GranaryVfs vfs;
    String dir; // a fresh striped directory per test

    @BeforeEach
    void setUp(TestInfo info) {
        vfs = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults());
        dir = "/" + info.getTestMethod().orElseThrow().getName();
        cluster.stripedDir(vfs, dir, S);
    }

    @AfterEach
    void tearDown() {
        vfs.close();
    }

    static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    /** Writes {@code data} to a new file in chunks of {@code chunk} bytes and closes it. */
    void writeFile(GranaryVfs v, String path, byte[] data, int chunk) {
        long fh = v.create(ROOT, path, 0644, O_CREAT | O_WRONLY | O_TRUNC);
        for (int off = 0; off < data.length; off += chunk) {
            int n = Math.min(chunk, data.length - off);
            assertEquals(n, v.write(ROOT, fh, off, Arrays.copyOfRange(data, off, off + n), n));
        }
        v.release(ROOT, fh);
    }

    byte[] readAll(GranaryVfs v, String path, int chunk) {
        long fh = v.open(ROOT, path, O_RDONLY);
        try {
            var out = new java.io.ByteArrayOutputStream();
            long off = 0;
            while (true) {
                byte[] b = v.read(ROOT, fh, off, chunk);
                if (b.length == 0) {
                    return out.toByteArray();
                }
                out.write(b, 0, b.length);
                off += b.length;
            }
        } finally {
            v.release(ROOT, fh);
        }
    }

    static int errno(Runnable r) {
        FsException e = assertThrows(FsException.class, r::run);
        return e.errno();
    }

    /** open(2) of an existing file: one MDS read for fresh attributes and extents (close-to-open). */
    @Test
    void openIsOneMdsReadForAttributesAndExtents() {
        String p = dir + "/one";
        byte[] data = random(2 * S + 5, 9);
        writeFile(vfs, p, data, 4096);
        vfs.getattr(ROOT, p); // dentry cached
        long attrs0 = calls(dev.granary.mds.proto.MdsRequest.OpCase.GETATTR);
        long ext0 = calls(dev.granary.mds.proto.MdsRequest.OpCase.GET_EXTENTS);
        long lookups0 = calls(dev.granary.mds.proto.MdsRequest.OpCase.LOOKUP);
        long fh = vfs.open(ROOT, p, O_RDONLY);
        // one LOOKUP of the last name (revalidated at open) that carries the attributes and the whole map
        assertEquals(1, calls(dev.granary.mds.proto.MdsRequest.OpCase.LOOKUP) - lookups0);
        assertEquals(0, calls(dev.granary.mds.proto.MdsRequest.OpCase.GET_EXTENTS) - ext0);
        assertEquals(0, calls(dev.granary.mds.proto.MdsRequest.OpCase.GETATTR) - attrs0);
        assertArrayEquals(Arrays.copyOfRange(data, S - 3, S + 3), vfs.read(ROOT, fh, S - 3, 6));
        vfs.release(ROOT, fh);
    }

    /**
     * A small file (data on MDS) read through a handle that holds unsaved writes returns the
     * range asked for, at every offset, and a page written back after such a read (what the
     * kernel does for a store into a shared mapping) keeps the file's bytes. Regression
     * (helper-found): the inline bytes were copied from the start of the extent instead of the
     * offset read, so pread(50000, 16) returned the bytes at 848, and an mmap store made 2,484
     * wrong bytes permanent.
     */
    @Test
    void aSmallFileReadThroughAHandleWithUnsavedWritesReturnsTheRangeAsked() {
        String p = dir + "/inline";
        byte[] data = random(60_000, 77); // within the 64 KiB stripe 0: inline
        writeFile(vfs, p, data, 60_000);
        long fh = vfs.open(ROOT, p, O_RDWR);
        byte[] want = data.clone();
        want[59_990] = 1;
        want[59_991] = 2;
        vfs.write(ROOT, fh, 59_990, new byte[] {1, 2}, 2);
        for (int off = 0; off < 60_000; off += 4096 - 7) {
            int n = Math.min(4096, 60_000 - off);
            assertArrayEquals(Arrays.copyOfRange(want, off, off + n), vfs.read(ROOT, fh, off, 4096), "read at " + off);
        }
        // writeback of a page read through this handle, one byte changed (a store into a shared mapping)
        byte[] page = vfs.read(ROOT, fh, 32_768, 4096);
        page[100] ^= (byte) 0xFF;
        want[32_868] ^= (byte) 0xFF;
        vfs.write(ROOT, fh, 32_768, page, 4096);
        vfs.release(ROOT, fh);
        assertArrayEquals(want, readAll(vfs, p, 7_000), "the file after close");
        var other = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults());
        try {
            assertArrayEquals(want, readAll(other, p, 7_000), "the file on another client");
        } finally {
            other.close();
        }
    }

    /**
     * A small file whose data ends before its size (600 bytes written, then truncated up to 1000)
     * is cut by another client to 800 while a handle opened before holds a 10-byte write: the
     * close keeps that size and every other byte. Regression: the inline extent of the commit was
     * as long as the size the handle saw at open (1000), past the file's 800 bytes, and the MDS
     * refused the commit (EINVAL at close: the write was lost).
     */
    @Test
    void aSmallFileCutByAnotherClientKeepsItsSizeWhenAnOlderHandleCloses() {
        String p = dir + "/cut";
        byte[] old = new byte[600];
        Arrays.fill(old, (byte) 'o');
        writeFile(vfs, p, old, 600);
        vfs.truncate(ROOT, p, 1000);
        long fh = vfs.open(ROOT, p, O_RDWR);
        try (GranaryVfs other = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults())) {
            assertEquals(800, other.truncate(ROOT, p, 800).getSize());
        }
        byte[] w = "0123456789".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        vfs.write(ROOT, fh, 0, w, w.length);
        vfs.flush(ROOT, fh);
        vfs.release(ROOT, fh);
        vfs.invalidateCaches();
        byte[] want = new byte[800];
        System.arraycopy(old, 0, want, 0, 600);
        System.arraycopy(w, 0, want, 0, 10);
        assertArrayEquals(want, readAll(vfs, p, 4096));
    }

    /**
     * A writer rewriting whole stripes while another thread fsyncs the same handle over and over:
     * every commit is taken while newer blocks of the same stripes are still uploading. Each
     * commit must keep the written ranges of those newer blocks for the next one. Regression: a
     * commit dropped them, and the next commit failed (IllegalStateException, EIO through FUSE;
     * seen once in a three-mount stress).
     */
    @Test
    void fsyncsRacingAWriterOfWholeStripesCommitEveryBlock() throws Exception {
        String p = dir + "/racing";
        writeFile(vfs, p, new byte[0], 1);
        long fh = vfs.open(ROOT, p, O_RDWR);
        int rounds = 600;
        var done = new java.util.concurrent.atomic.AtomicBoolean();
        var failure = new java.util.concurrent.atomic.AtomicReference<Throwable>();
        var syncs = new java.util.concurrent.atomic.AtomicInteger();
        Thread syncer = new Thread(() -> {
            try {
                while (!done.get()) {
                    vfs.fsync(ROOT, fh, false);
                    syncs.incrementAndGet();
                }
            } catch (Throwable t) {
                failure.compareAndSet(null, t);
            }
        });
        syncer.start();
        try {
            for (int i = 0; i < rounds && failure.get() == null; i++) {
                long k = i % 3;
                byte[] half = new byte[S / 2];
                Arrays.fill(half, (byte) (i % 250 + 1));
                vfs.write(ROOT, fh, k * S, half, half.length); // a partial stripe on the uncommitted block
                vfs.write(ROOT, fh, k * S + S / 2, half, half.length); // now whole: uploaded at once
            }
        } finally {
            done.set(true);
            syncer.join();
        }
        if (failure.get() != null) {
            throw new AssertionError("fsync failed after " + syncs.get() + " syncs", failure.get());
        }
        vfs.flush(ROOT, fh);
        vfs.release(ROOT, fh);
        byte[] got = readAll(vfs, p, S);
        assertEquals(3L * S, got.length);
        for (int k = 0; k < 3; k++) {
            int last = rounds - 3 + k; // the last round that wrote stripe k
            byte[] want = new byte[S];
            Arrays.fill(want, (byte) (last % 250 + 1));
            assertArrayEquals(want, Arrays.copyOfRange(got, k * S, (k + 1) * S), "stripe " + k);
        }
        assertTrue(syncs.get() > 10, "the syncs raced the writes: " + syncs.get());
    }

    /**
     * A handle never takes a map older than a commit of this client it already holds. Regression:
     * an open that read the file before another handle's commit shared its map with the inode's
     * handles after that commit had reached them ({@code GranaryVfs.shareNewerMap}); a reader's
     * size fell back to the older one, and its read of bytes whose write had returned hit the end
     * of file (1 run in 150 of {@link #aReadSeesEveryWriteThatReturnedThroughOtherThreadsHandles}
     * under load). Here the moments are fixed: the reader opens, a chmod moves the ctime, an open
     * at that moment would read the map below (size 1,000 at the chmod's ctime), a commit then
     * grows the file to 1,500 bytes, and only then is that map shared.
     */
    @Test
    void aHandleNeverTakesAMapReadBeforeACommitItAlreadyHolds() {
        String p = dir + "/older-map";
        writeFile(vfs, p, random(1000, 31), 1000);
        long reader = vfs.open(ROOT, p, O_RDONLY);
        long writer = vfs.open(ROOT, p, O_RDWR);
        Attr chmodded = vfs.chmod(ROOT, p, 0600); // a newer ctime, same size and map
        OpenFile.CommittedMap readBeforeCommit = new OpenFile.CommittedMap(
                1000, vfs.handle(reader).committedMap().byStripe(), chmodded.getCtimeNs());
        assertTrue(chmodded.getCtimeNs() > vfs.handle(reader).mapCtimeNs());
        byte[] tail = random(500, 32);
        vfs.write(ROOT, writer, 1000, tail, tail.length);
        vfs.flush(ROOT, writer);
        assertEquals(1500, vfs.handle(reader).size(), "the writer's commit reached the reader");

        boolean taken = vfs.handle(reader).adoptNewerMap(readBeforeCommit, () -> true);

        assertFalse(taken, "a map read before the commit the handle holds must not replace it");
        assertEquals(1500, vfs.handle(reader).size());
        assertArrayEquals(tail, vfs.read(ROOT, reader, 1000, 500));
        vfs.release(ROOT, reader);
        vfs.release(ROOT, writer);
    }

    /**
     * A read through one handle returns the bytes of every write that returned before it
     * through the file's other handles, while threads write interleaved chunks through their own
     * handles, fsync them, and close and reopen them (POSIX read(2) after write(2)). Regression
     * (helper-found): a read in the moment a write moved a stripe buffer between two writers'
     * handles, or a commit had reached the MDS but not yet the reader's handle, returned zeros
     * or hit the end of file (2-14 of 1,200 reads in most runs).
     */
    @Test
    void aReadSeesEveryWriteThatReturnedThroughOtherThreadsHandles() throws Exception {
        String p = dir + "/raw";
        writeFile(vfs, p, new byte[0], 1);
        int threads = 4;
        int chunks = 300;
        int chunk = 300;
        var queue = new java.util.concurrent.LinkedBlockingQueue<long[]>();
        var bad = new java.util.concurrent.atomic.AtomicInteger();
        var reads = new java.util.concurrent.atomic.AtomicInteger();
        Thread reader = new Thread(() -> {
            long fh = vfs.open(ROOT, p, O_RDONLY);
            try {
                while (true) {
                    long[] w = queue.take();
                    if (w[0] < 0) {
                        return;
                    }
                    byte[] got = vfs.read(ROOT, fh, w[0], chunk);
                    reads.incrementAndGet();
                    byte[] want = new byte[chunk];
                    Arrays.fill(want, (byte) w[1]);
                    if (!Arrays.equals(want, got)) {
                        bad.incrementAndGet();
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                vfs.release(ROOT, fh);
            }
        });
        reader.start();
        List<Thread> writers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int id = t;
            writers.add(new Thread(() -> {
                Random rnd = new Random(100 + id);
                long fh = vfs.open(ROOT, p, O_RDWR);
                for (int c = 0; c < chunks; c++) {
                    long off = (long) (c * threads + id) * chunk;
                    byte v = (byte) ((id * 31 + c) % 251 + 1);
                    byte[] b = new byte[chunk];
                    Arrays.fill(b, v);
                    vfs.write(ROOT, fh, off, b, chunk);
                    queue.add(new long[] {off, v});
                    double x = rnd.nextDouble();
                    if (x < 0.05) {
                        vfs.fsync(ROOT, fh, false);
                    } else if (x < 0.10) {
                        vfs.flush(ROOT, fh);
                        vfs.release(ROOT, fh);
                        fh = vfs.open(ROOT, p, O_RDWR);
                    }
                }
                vfs.flush(ROOT, fh);
                vfs.release(ROOT, fh);
            }));
        }
        writers.forEach(Thread::start);
        for (Thread w : writers) {
            w.join();
        }
        queue.add(new long[] {-1, 0});
        reader.join();
        byte[] file = readAll(vfs, p, 65536);
        int wrong = 0;
        for (int i = 0; i < threads * chunks; i++) {
            byte v = (byte) (((i % threads) * 31 + i / threads) % 251 + 1);
            for (int j = 0; j < chunk; j++) {
                if (file.length < (i + 1) * chunk || file[i * chunk + j] != v) {
                    wrong++;
                    break;
                }
            }
        }
        assertEquals(threads * chunks, reads.get());
        assertEquals(0, bad.get() * 10_000 + wrong, "reads that missed a write that had returned (x10,000) and chunks wrong at the end");
    }

    private long calls(dev.granary.mds.proto.MdsRequest.OpCase op) {
        var n = cluster.mdsCalls.get(op);
        return n == null ? 0 : n.get();
    }

    /**
     * An exclusive create (O_EXCL, as Python's "x" mode and lock files) is one MDS call: the
     * create. The new file's map is known (empty), so its handle reads nothing more. Regression:
     * the create's own change of the client's namespace made the new handle read its map again
     * from the MDS, one linearizable read per create (CREATE 1.8 ms against UNLINK 1.3 ms in a
     * quickstart); the file it then wrote and read back shows the handle works.
     */
    @Test
    void anExclusiveCreateOfANewFileIsOneMdsCallAndATruncatingOpenReadsNoMap() {
        vfs.close(); // without directory leases, under which creates after a lookup cost no call (DirLeaseVfsTest)
        vfs = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults().withDirLease(false));
        vfs.release(ROOT, vfs.create(ROOT, dir + "/warm", 0644, O_CREAT | O_EXCL | O_WRONLY)); // the directory's lookup cached
        java.util.Map<dev.granary.mds.proto.MdsRequest.OpCase, Long> before = new java.util.EnumMap<>(dev.granary.mds.proto.MdsRequest.OpCase.class);
        cluster.mdsCalls.forEach((op, n) -> before.put(op, n.get()));
        long[] fhs = new long[5];
        for (int i = 0; i < fhs.length; i++) {
            fhs[i] = vfs.create(ROOT, dir + "/x" + i, 0640, O_CREAT | O_EXCL | O_WRONLY);
        }
        java.util.Map<dev.granary.mds.proto.MdsRequest.OpCase, Long> sent = new java.util.TreeMap<>();
        cluster.mdsCalls.forEach((op, n) -> {
            long d = n.get() - before.getOrDefault(op, 0L);
            if (d != 0) {
                sent.put(op, d);
            }
        });
        assertEquals(java.util.Map.of(dev.granary.mds.proto.MdsRequest.OpCase.CREATE, 5L), sent, "MDS calls of 5 exclusive creates");
        byte[] data = "exclusive".getBytes(java.nio.charset.StandardCharsets.UTF_8);
        vfs.write(ROOT, fhs[2], 0, data, data.length);
        vfs.write(ROOT, fhs[3], 0, data, data.length);
        for (long fh : fhs) {
            vfs.flush(ROOT, fh);
            vfs.release(ROOT, fh);
        }
        vfs.invalidateCaches();
        assertEquals(data.length, vfs.getattr(ROOT, dir + "/x2").getSize());
        assertEquals(0640, vfs.getattr(ROOT, dir + "/x4").getMode() & 07777);
        FsException e = assertThrows(FsException.class, () -> vfs.create(ROOT, dir + "/x1", 0644, O_CREAT | O_EXCL | O_WRONLY));
        assertEquals(dev.granary.mds.proto.Status.EEXIST, e.status());

        // The same for an open that truncates an existing file (open(2) with O_TRUNC, and Python's
        // "wb" of an existing name, which comes as a create): one setattr, then the map is known
        // empty. Before: a get_extents after each.
        vfs.getattr(ROOT, dir + "/x2"); // cached, as after the kernel's LOOKUP
        vfs.getattr(ROOT, dir + "/x3");
        before.clear();
        cluster.mdsCalls.forEach((op, n) -> before.put(op, n.get()));
        long t1 = vfs.open(ROOT, dir + "/x2", O_WRONLY | O_TRUNC);
        long t2 = vfs.create(ROOT, dir + "/x3", 0644, O_CREAT | O_WRONLY | O_TRUNC);
        sent.clear();
        cluster.mdsCalls.forEach((op, n) -> {
            long d = n.get() - before.getOrDefault(op, 0L);
            if (d != 0 && op != dev.granary.mds.proto.MdsRequest.OpCase.LOOKUP) { // open revalidates its name (close-to-open)
                sent.put(op, d);
            }
        });
        assertEquals(java.util.Map.of(dev.granary.mds.proto.MdsRequest.OpCase.SETATTR, 2L, dev.granary.mds.proto.MdsRequest.OpCase.CREATE, 1L), sent,
                "MDS calls of an O_TRUNC open of x2 (a setattr) and an O_TRUNC create of the existing x3 (a create that finds it, a setattr)");
        vfs.write(ROOT, t1, 0, new byte[] {7}, 1);
        vfs.flush(ROOT, t1);
        vfs.release(ROOT, t1);
        vfs.release(ROOT, t2);
        vfs.invalidateCaches();
        assertEquals(1, vfs.getattr(ROOT, dir + "/x2").getSize(), "x2 truncated, then one byte written");
        assertEquals(0, vfs.getattr(ROOT, dir + "/x3").getSize(), "x3 truncated");
    }

    long mdsGetxattrs() {
        return cluster.mdsCalls.computeIfAbsent(dev.granary.mds.proto.MdsRequest.OpCase.GETXATTR,
                k -> new java.util.concurrent.atomic.AtomicLong()).get();
    }

    /**
     * The kernel asks getxattr("security.capability") before every write(2) to a FUSE file.
     * Regression: each one was an MDS round trip (sequential writes ran at ~23 MiB/s). An absent
     * name is now remembered for the cache timeout, a file this client just created is known to
     * have no xattrs at all, and local setxattr/removexattr update both at once.
     */
    @Test
    void absentXattrIsCachedAndOwnSetxattrIsSeenAtOnce() {
        String p = dir + "/x";
        long before = mdsGetxattrs();
        writeFile(vfs, p, random(10, 1), 10);
        assertEquals(Status.ENODATA.getNumber(), errno(() -> vfs.getxattr(ROOT, p, "security.capability")));
        assertEquals(List.of(), vfs.listxattr(ROOT, p));
        assertEquals(0, mdsGetxattrs() - before, "a file this client created has no xattrs: no MDS getxattr");

        vfs.invalidateCaches(); // as if another client had created it
        before = mdsGetxattrs();
        for (int i = 0; i < 50; i++) {
            assertEquals(Status.ENODATA.getNumber(), errno(() -> vfs.getxattr(ROOT, p, "security.capability")));
        }
        assertEquals(0, mdsGetxattrs() - before, "the fetched attributes count no xattrs: no MDS getxattr");
        vfs.setxattr(ROOT, p, "security.capability", new byte[] {1, 2}, 0);
        assertArrayEquals(new byte[] {1, 2}, vfs.getxattr(ROOT, p, "security.capability"));
        vfs.removexattr(ROOT, p, "security.capability");
        assertEquals(Status.ENODATA.getNumber(), errno(() -> vfs.getxattr(ROOT, p, "security.capability")));

        String q = dir + "/y"; // own setxattr on a freshly created file is seen at once
        writeFile(vfs, q, random(10, 2), 10);
        vfs.setxattr(ROOT, q, "user.k", new byte[] {7}, 0);
        assertArrayEquals(new byte[] {7}, vfs.getxattr(ROOT, q, "user.k"));
        assertEquals(List.of("user.k"), vfs.listxattr(ROOT, q));
    }

    /**
     * cp -a / tar / rsync: write, set times with futimens while the file is still open, close.
     * The explicit mtime must survive the commit at close (regression: close stamped the write time).
     */
    @Test
    void mtimeSetWhileOpenSurvivesTheCommitAtClose() {
        String p = dir + "/timed";
        long fh = vfs.create(ROOT, p, 0644, O_CREAT | O_WRONLY | O_TRUNC);
        byte[] data = random(3 * S + 100, 21);
        assertEquals(data.length, vfs.write(ROOT, fh, 0, data, data.length));
        long explicit = 1_577_934_245_000_000_000L; // 2020-01-02T03:04:05Z
        vfs.utimens(ROOT, p, GranaryVfs.TIME_OMIT, explicit);
        vfs.release(ROOT, fh);
        vfs.invalidateCaches();
        assertEquals(explicit, vfs.getattr(ROOT, p).getMtimeNs());
        assertEquals(data.length, vfs.getattr(ROOT, p).getSize());
        // A write after the utimens moves the mtime again, as on a local filesystem.
        long fh2 = vfs.open(ROOT, p, O_WRONLY);
        vfs.utimens(ROOT, p, GranaryVfs.TIME_OMIT, explicit);
        vfs.write(ROOT, fh2, 0, new byte[] {1}, 1);
        vfs.release(ROOT, fh2);
        vfs.invalidateCaches();
        assertTrue(vfs.getattr(ROOT, p).getMtimeNs() > explicit, "write after utimens sets mtime");
    }

    @Test
    void twoHandlesWritingDisjointBytesOfOneStripeKeepBoth() {
        String p = dir + "/two-writers";
        byte[] data = random(100, 4);
        writeFile(vfs, p, data, 100);
        long h1 = vfs.open(ROOT, p, O_WRONLY);
        long h2 = vfs.open(ROOT, p, O_WRONLY);
        vfs.write(ROOT, h1, 0, new byte[] {1}, 1);
        vfs.write(ROOT, h2, 1, new byte[] {2}, 1);
        vfs.release(ROOT, h1);
        vfs.release(ROOT, h2); // its read-modify-write must start from h1's committed block
        data[0] = 1;
        data[1] = 2;
        assertArrayEquals(data, readAll(vfs, p, 4096));
    }

    @Test
    void smallFileRoundTrip() {
        byte[] data = "hello, granary\n".getBytes(StandardCharsets.UTF_8);
        writeFile(vfs, dir + "/hello.txt", data, 1024);
        Attr a = vfs.getattr(ROOT, dir + "/hello.txt");
        assertEquals(data.length, a.getSize());
        assertEquals(GranaryVfs.S_IFREG | 0644, a.getMode());
        assertArrayEquals(data, readAll(vfs, dir + "/hello.txt", 4096));
    }

    @Test
    void fileOverThreeStripesOnTwoOstsReadsBackAcrossBoundaries() {
        byte[] data = random(3 * S + S / 2 + 17, 1);
        writeFile(vfs, dir + "/big", data, 10_000); // unaligned chunks
        Attr a = vfs.getattr(ROOT, dir + "/big");
        assertEquals(data.length, a.getSize());
        List<Extent> extents = cluster.mds.getExtents(ROOT, a.getIno(), 0, 0);
        assertEquals(4, extents.size());
        Set<Integer> osts = new HashSet<>();
        for (Extent e : extents) {
            osts.add(e.getOst());
            assertTrue(e.getBlockKey().startsWith(String.format("%016x/%d-", a.getIno(), e.getStripeIndex())), e.getBlockKey());
        }
        assertEquals(Set.of(0, 1), osts, "stripes alternate over both OSTs");
        assertNotEquals(extents.get(0).getOst(), extents.get(1).getOst());

        long fh = vfs.open(ROOT, dir + "/big", O_RDONLY);
        long[][] ranges = {{S - 6, 20}, {S - 1, 2 * S + 2}, {0, data.length}, {2 * S + 100, 200_000}, {3 * S, S / 2 + 17},
                {data.length - 1, 10}, {data.length, 10}, {12345, 1}};
        for (long[] r : ranges) {
            byte[] got = vfs.read(ROOT, fh, r[0], (int) r[1]);
            int from = (int) Math.min(r[0], data.length);
            int to = (int) Math.min(r[0] + r[1], data.length);
            assertArrayEquals(Arrays.copyOfRange(data, from, to), got, "range " + r[0] + "+" + r[1]);
        }
        Random rnd = new Random(7);
        for (int i = 0; i < 40; i++) {
            int off = rnd.nextInt(data.length);
            int len = rnd.nextInt(3 * S);
            byte[] got = vfs.read(ROOT, fh, off, len);
            assertArrayEquals(Arrays.copyOfRange(data, off, Math.min(off + len, data.length)), got);
        }
        vfs.release(ROOT, fh);
        assertArrayEquals(data, readAll(vfs, dir + "/big", 4096), "sequential 4 KiB reads (readahead)");
        assertArrayEquals(data, readAll(vfs, dir + "/big", 128 * 1024));
    }

    long gets() {
        return cluster.ost0.counters().gets.get() + cluster.ost1.counters().gets.get();
    }

    @Test
    void sequentialReadsFetchWholeStripesAheadRandomReadsDoNot() {
        int stripes = 8;
        byte[] data = random(stripes * S, 14);
        writeFile(vfs, dir + "/seq", data, S);
        long before = gets();
        assertArrayEquals(data, readAll(vfs, dir + "/seq", 4096)); // 128 reads of 4 KiB
        long sequentialGets = gets() - before;
        assertTrue(sequentialGets <= stripes + 2, "sequential 4 KiB reads: one GET per stripe, got " + sequentialGets);

        int many = 32;
        byte[] big = random(many * S, 15);
        writeFile(vfs, dir + "/rnd", big, S);
        long fh = vfs.open(ROOT, dir + "/rnd", O_RDONLY);
        before = gets();
        Random rnd = new Random(3);
        int k = many / 2;
        for (int i = 0; i < 20; i++) {
            k = (k + 6 + rnd.nextInt(many - 12)) % many; // >= 6 stripes (384 KiB) from the last read
            int off = k * S + 10_000 + rnd.nextInt(1000);
            assertArrayEquals(Arrays.copyOfRange(big, off, off + 100), vfs.read(ROOT, fh, off, 100));
        }
        assertEquals(20, gets() - before, "random reads: one ranged GET each, no readahead");
        vfs.release(ROOT, fh);
    }

    /**
     * Read windows of all open files share client.max_readahead: many sequential readers at once
     * get shorter windows instead of holding 1 + readahead_stripes stripes each without bound
     * (regression: 32 readers in a client with a 384 MiB heap ran it out of memory and wedged the
     * mount). Reads stay correct, and closing the handles gives every byte back.
     */
    @Test
    void readWindowsOfManyReadersShareTheReadaheadBudget() {
        GranaryVfs small = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults().withMaxReadaheadBytes(6L * S));
        try {
            int files = 8, stripes = 8;
            byte[][] data = new byte[files][];
            for (int i = 0; i < files; i++) {
                data[i] = random(stripes * S, 100 + i);
                writeFile(small, dir + "/f" + i, data[i], S);
            }
            long[] fh = new long[files];
            for (int i = 0; i < files; i++) {
                fh[i] = small.open(ROOT, dir + "/f" + i, O_RDONLY);
                assertArrayEquals(Arrays.copyOf(data[i], 4096), small.read(ROOT, fh[i], 0, 4096)); // starts a stream
            }
            ReadaheadBudget.Stats st = small.readaheadStats();
            // unbounded: 8 x (1 + 4) stripes = 40 S; bounded: the 6 S budget plus the stripe each reader reads now
            assertTrue(st.peakBytes() <= 6L * S + files * (long) S, "read windows peaked at " + st.peakBytes() / S + " stripes");
            assertTrue(st.refused() > 0, "readahead past the budget was refused: " + st);
            for (int i = 0; i < files; i++) { // the rest of every file, interleaved, still byte for byte
                for (int off = 4096; off < data[i].length; off += S) {
                    int n = Math.min(S, data[i].length - off);
                    assertArrayEquals(Arrays.copyOfRange(data[i], off, off + n), small.read(ROOT, fh[i], off, n));
                }
            }
            for (long h : fh) {
                small.release(ROOT, h);
            }
            assertEquals(0, small.readaheadStats().heldBytes(), "closed handles hold no read window");
            long one = small.open(ROOT, dir + "/f0", O_RDONLY);
            small.read(ROOT, one, 0, 4096);
            assertEquals(5L * S, small.readaheadStats().heldBytes(), "a lone reader gets its whole window again (1 + 4 stripes)");
            small.release(ROOT, one);
            assertEquals(0, small.readaheadStats().heldBytes());
        } finally {
            small.close();
        }
    }

    /**
     * The kernel's readahead sends two 128 KiB reads at once; they may arrive out of order. That
     * must not turn a sequential reader into a random one (regression: cold sequential reads ran
     * at ~24 MiB/s, each read a small ranged GET instead of whole stripes ahead).
     */
    @Test
    void outOfOrderReadsOfASequentialReaderStillReadWholeStripesAhead() {
        int stripes = 16;
        int chunk = 16 * 1024;
        byte[] data = random(stripes * S, 16);
        writeFile(vfs, dir + "/ooo", data, S);
        long before = gets();
        long fh = vfs.open(ROOT, dir + "/ooo", O_RDONLY);
        for (int off = 0; off < data.length; off += 2 * chunk) { // pairs swapped: B A, D C, ...
            int second = Math.min(chunk, data.length - off - chunk);
            if (second > 0) {
                assertArrayEquals(Arrays.copyOfRange(data, off + chunk, off + chunk + second), vfs.read(ROOT, fh, off + chunk, chunk));
            }
            assertArrayEquals(Arrays.copyOfRange(data, off, off + chunk), vfs.read(ROOT, fh, off, chunk));
        }
        vfs.release(ROOT, fh);
        long got = gets() - before;
        assertTrue(got <= stripes + 2, "one GET per stripe, got " + got);
    }

    @Test
    void sparseFileHolesReadAsZeros() {
        long fh = vfs.create(ROOT, dir + "/sparse", 0644, O_CREAT | O_RDWR);
        vfs.write(ROOT, fh, 0, new byte[] {'a'}, 1);
        long far = 4L * S + 1000;
        vfs.write(ROOT, fh, far, new byte[] {'b'}, 1);
        vfs.release(ROOT, fh);
        Attr a = vfs.getattr(ROOT, dir + "/sparse");
        assertEquals(far + 1, a.getSize());
        assertEquals(2, cluster.mds.getExtents(ROOT, a.getIno(), 0, 0).size(), "only written stripes have blocks");
        byte[] all = readAll(vfs, dir + "/sparse", 50_000);
        assertEquals(far + 1, all.length);
        byte[] expect = new byte[(int) far + 1];
        expect[0] = 'a';
        expect[(int) far] = 'b';
        assertArrayEquals(expect, all);
    }

    /**
     * readBuffers (what FUSE reads use) over a clean file hands out the blocks' own bytes, in
     * order, with zeros for a hole and for the short last block; with own unflushed writes in
     * the range it assembles one array. Both equal what the bytes are.
     */
    @Test
    void readBuffersAreTheBlocksInOrderWithZerosBetween() {
        byte[] first = new byte[S];
        new Random(5).nextBytes(first);
        long fh = vfs.create(ROOT, dir + "/parts", 0644, O_CREAT | O_RDWR);
        vfs.write(ROOT, fh, 0, first, S);                      // stripe 0 full
        vfs.write(ROOT, fh, 2L * S, new byte[] {7, 8, 9}, 3);  // stripe 1 a hole, stripe 2 three bytes
        vfs.release(ROOT, fh);
        byte[] expect = new byte[2 * S + 3];
        System.arraycopy(first, 0, expect, 0, S);
        expect[2 * S] = 7;
        expect[2 * S + 1] = 8;
        expect[2 * S + 2] = 9;
        long r = vfs.open(ROOT, dir + "/parts", O_RDWR);
        List<java.nio.ByteBuffer> parts = vfs.readBuffers(ROOT, r, S - 100, S + 1000); // past EOF: short
        assertArrayEquals(Arrays.copyOfRange(expect, S - 100, expect.length), concat(parts));
        assertTrue(parts.size() >= 3, "block, zeros, block: " + parts.size());
        assertEquals(100, parts.get(0).remaining(), "the tail of stripe 0, sliced from its block");
        // own unflushed bytes over the hole: one array with them in place
        vfs.write(ROOT, r, S + 10, new byte[] {1, 2}, 2);
        expect[S + 10] = 1;
        expect[S + 11] = 2;
        parts = vfs.readBuffers(ROOT, r, S - 100, S + 1000);
        assertEquals(1, parts.size());
        assertArrayEquals(Arrays.copyOfRange(expect, S - 100, expect.length), concat(parts));
        vfs.release(ROOT, r);
    }

    private static byte[] concat(List<java.nio.ByteBuffer> parts) {
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        for (java.nio.ByteBuffer b : parts) {
            byte[] a = new byte[b.remaining()];
            b.get(b.position(), a);
            out.writeBytes(a);
        }
        return out.toByteArray();
    }

    @Test
    void truncateDownThenUpReadsZerosInTheGap() {
        byte[] data = random(3 * S + 5, 2);
        writeFile(vfs, dir + "/t", data, 65_536);
        int down = S + 1234;
        assertEquals(down, vfs.truncate(ROOT, dir + "/t", down).getSize());
        assertArrayEquals(Arrays.copyOf(data, down), readAll(vfs, dir + "/t", 8192));
        int up = 2 * S + 999;
        vfs.truncate(ROOT, dir + "/t", up);
        byte[] expect = new byte[up];
        System.arraycopy(data, 0, expect, 0, down);
        assertArrayEquals(expect, readAll(vfs, dir + "/t", 8192));
        vfs.truncate(ROOT, dir + "/t", 0);
        assertEquals(0, readAll(vfs, dir + "/t", 8192).length);
    }

    @Test
    void ftruncateWithDirtyDataFlushesFirst() {
        long fh = vfs.create(ROOT, dir + "/ft", 0644, O_CREAT | O_RDWR);
        byte[] data = random(S + 100, 3);
        vfs.write(ROOT, fh, 0, data, data.length);
        vfs.ftruncate(ROOT, fh, 50);
        assertEquals(50, vfs.fgetattr(ROOT, fh).getSize());
        assertArrayEquals(Arrays.copyOf(data, 50), vfs.read(ROOT, fh, 0, 1000));
        vfs.write(ROOT, fh, 60, new byte[] {9}, 1); // extends with a hole [50, 60)
        byte[] got = vfs.read(ROOT, fh, 0, 1000);
        assertEquals(61, got.length);
        assertEquals(0, got[55]);
        assertEquals(9, got[60]);
        vfs.release(ROOT, fh);
        assertArrayEquals(got, readAll(vfs, dir + "/ft", 4096));
    }

    @Test
    void overwriteInTheMiddleOfAStripeKeepsTheOtherBytes() {
        byte[] data = random(3 * S, 4);
        writeFile(vfs, dir + "/rmw", data, S);
        long fh = vfs.open(ROOT, dir + "/rmw", O_RDWR);
        byte[] patch = random(100, 5);
        vfs.write(ROOT, fh, S + 1000, patch, patch.length);
        byte[] patch2 = random(10, 6);
        vfs.write(ROOT, fh, S + 50_000, patch2, patch2.length); // disjoint in the same stripe
        byte[] patch3 = random(300, 7);
        vfs.write(ROOT, fh, 3 * S - 150, patch3, patch3.length); // crosses the end: extends the file
        System.arraycopy(patch, 0, data, S + 1000, patch.length);
        System.arraycopy(patch2, 0, data, S + 50_000, patch2.length);
        data = Arrays.copyOf(data, 3 * S + 150);
        System.arraycopy(patch3, 0, data, 3 * S - 150, patch3.length);
        assertArrayEquals(data, vfs.read(ROOT, fh, 0, data.length + 10), "read your writes before flush");
        vfs.release(ROOT, fh);
        assertArrayEquals(data, readAll(vfs, dir + "/rmw", 100_000));
    }

    @Test
    void appendWritesGoToTheEnd() {
        writeFile(vfs, dir + "/log", "abc".getBytes(StandardCharsets.UTF_8), 10);
        long fh = vfs.open(ROOT, dir + "/log", O_WRONLY | O_APPEND);
        vfs.write(ROOT, fh, 0, "def".getBytes(StandardCharsets.UTF_8), 3);
        vfs.write(ROOT, fh, 1, "gh".getBytes(StandardCharsets.UTF_8), 2);
        vfs.release(ROOT, fh);
        assertEquals("abcdefgh", new String(readAll(vfs, dir + "/log", 100), StandardCharsets.UTF_8));
    }

    /**
     * ls -l and ls --color ask for security.selinux and security.capability on every file. For
     * files another client made, the attributes' xattr count answers them: no MDS getxattr for
     * files without xattrs, one for a file with one. This client's own setxattr on a file whose
     * cached attributes count none is seen at once; another client's after the cache timeout.
     * Regression: each name of each file was an MDS round trip (a Raft read).
     */
    @Test
    void lsOfAnotherClientsFilesAsksTheMdsOnlyForFilesWithXattrs() {
        int n = 20;
        try (GranaryVfs other = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults())) {
            for (int i = 0; i < n; i++) {
                writeFile(other, dir + "/ls" + i, new byte[] {(byte) i}, 1);
            }
            other.setxattr(ROOT, dir + "/ls7", "user.tag", new byte[] {7}, 0);
            vfs.invalidateCaches();
            long before = mdsGetxattrs();
            for (int i = 0; i < n; i++) {
                String p = dir + "/ls" + i;
                vfs.getattr(ROOT, p);
                for (String name : List.of("security.selinux", "security.capability")) {
                    assertEquals(Status.ENODATA.getNumber(), errno(() -> vfs.getxattr(ROOT, p, name)), p + " " + name);
                }
                assertEquals(i == 7 ? List.of("user.tag") : List.of(), vfs.listxattr(ROOT, p), p);
            }
            assertEquals(2, mdsGetxattrs() - before, "only the file with an xattr asks the MDS, once per name");
            assertArrayEquals(new byte[] {7}, vfs.getxattr(ROOT, dir + "/ls7", "user.tag"));

            vfs.setxattr(ROOT, dir + "/ls3", "user.mine", new byte[] {3}, 0);
            assertArrayEquals(new byte[] {3}, vfs.getxattr(ROOT, dir + "/ls3", "user.mine"), "own setxattr seen at once");
            assertEquals(List.of("user.mine"), vfs.listxattr(ROOT, dir + "/ls3"));

            other.setxattr(ROOT, dir + "/ls4", "user.theirs", new byte[] {4}, 0);
            vfs.invalidateCaches(); // the cache timeout passed
            assertArrayEquals(new byte[] {4}, vfs.getxattr(ROOT, dir + "/ls4", "user.theirs"));
            assertEquals(List.of("user.theirs"), vfs.listxattr(ROOT, dir + "/ls4"));
        }
    }

    /**
     * A client stopping (SIGTERM of the mount) commits what its open handles wrote; a write, read
     * or close racing with it gets EIO, as any I/O the daemon can no longer do. Regression: EBADF,
     * which tells a program it passed a bad descriptor.
     */
    @Test
    void handlesOfAStoppingClientAnswerEioAndTheirDataIsCommitted() {
        GranaryVfs stopping = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults());
        long fh = stopping.create(ROOT, dir + "/stop", 0644, O_CREAT | O_WRONLY);
        byte[] data = random(S + 5, 3);
        stopping.write(ROOT, fh, 0, data, data.length);
        stopping.close();
        assertEquals(Status.EIO.getNumber(), errno(() -> stopping.write(ROOT, fh, data.length, data, 10)));
        assertEquals(Status.EIO.getNumber(), errno(() -> stopping.read(ROOT, fh, 0, 10)));
        assertEquals(Status.EIO.getNumber(), errno(() -> stopping.release(ROOT, fh)));
        assertEquals(Status.EIO.getNumber(), errno(() -> stopping.open(ROOT, dir + "/stop", O_RDONLY)));
        assertEquals(Status.EBADF.getNumber(), errno(() -> vfs.read(ROOT, 424242, 0, 10)), "a running client's unknown handle");
        assertArrayEquals(data, readAll(vfs, dir + "/stop", 30_000), "what was written before the stop is committed");
    }

    @Test
    void readYourWritesAndCloseToOpen() {
        long w = vfs.create(ROOT, dir + "/cto", 0644, O_CREAT | O_RDWR);
        byte[] data = random(2 * S + 10, 8);
        vfs.write(ROOT, w, 0, data, data.length);
        assertArrayEquals(data, vfs.read(ROOT, w, 0, data.length), "own unflushed writes are visible");
        assertEquals(data.length, vfs.getattr(ROOT, dir + "/cto").getSize(), "stat sees the local size");
        // another client (its own caches) does not see uncommitted data
        try (GranaryVfs other = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults())) {
            long r = other.open(ROOT, dir + "/cto", O_RDONLY);
            assertTrue(other.read(ROOT, r, 0, 10).length < 10);
            other.release(ROOT, r);
            vfs.release(ROOT, w); // close: committed
            assertArrayEquals(data, readAll(other, dir + "/cto", 30_000), "a fresh open after close sees the data");
        }
    }

    /**
     * Removing files one by one (rm -r) costs one MDS write each and no reads: the unlink's reply
     * carries the directory's new attributes, which the client keeps. Regression: it dropped them,
     * and the next path resolution looked the directory up again at the MDS (a Raft read per file).
     */
    @Test
    void anUnlinkLoopCostsOneMdsWritePerFileAndNoReads() {
        vfs.close();
        vfs = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults().withDeferredUnlink(false)
                .withDirLease(false)); // each unlink waits for its commit (under a directory lease they are deferred: DirLeaseVfsTest)
        int n = 20;
        for (int i = 0; i < n; i++) {
            writeFile(vfs, dir + "/rm" + i, new byte[10], 10);
        }
        for (int i = 0; i < n; i++) {
            vfs.getattr(ROOT, dir + "/rm" + i); // all entries cached, as after the kernel's LOOKUPs
        }
        long lookups = mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.LOOKUP);
        long getattrs = mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.GETATTR);
        long unlinks = mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.UNLINK);
        long before = System.currentTimeMillis() * 1_000_000L;
        for (int i = 0; i < n; i++) {
            vfs.unlink(ROOT, dir + "/rm" + i);
        }
        Attr d = vfs.getattr(ROOT, dir);
        assertEquals(n, mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.UNLINK) - unlinks);
        assertEquals(0, mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.LOOKUP) - lookups, "lookups during the loop");
        assertEquals(0, mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.GETATTR) - getattrs, "getattrs during the loop");
        assertTrue(d.getMtimeNs() >= before - 1_000_000_000L, "the directory's mtime is the last unlink's: " + d.getMtimeNs());
        vfs.invalidateCaches();
        assertEquals(d.getMtimeNs(), vfs.getattr(ROOT, dir).getMtimeNs(), "the cached attributes are the MDS's");
        assertThrows(FsException.class, () -> vfs.getattr(ROOT, dir + "/rm3"));
    }

    /** An mv loop between two directories costs one MDS write per file and no reads (as unlink, above). */
    @Test
    void anMvLoopCostsOneMdsWritePerFileAndNoReads() {
        vfs.mkdir(ROOT, dir + "/from", 0755);
        vfs.mkdir(ROOT, dir + "/to", 0755);
        int n = 20;
        for (int i = 0; i < n; i++) {
            writeFile(vfs, dir + "/from/mv" + i, new byte[] {(byte) i}, 1);
        }
        for (int i = 0; i < n; i++) {
            vfs.getattr(ROOT, dir + "/from/mv" + i);
        }
        long lookups = mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.LOOKUP);
        long getattrs = mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.GETATTR);
        for (int i = 0; i < n; i++) {
            vfs.getattr(ROOT, dir + "/to"); // the kernel's permission check on the directories, as for each mv
            vfs.rename(ROOT, dir + "/from/mv" + i, dir + "/to/mv" + i, 0);
        }
        assertEquals(0, mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.LOOKUP) - lookups, "lookups during the loop");
        assertEquals(0, mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.GETATTR) - getattrs, "getattrs during the loop");
        Attr to = vfs.getattr(ROOT, dir + "/to");
        vfs.invalidateCaches();
        assertEquals(to.getMtimeNs(), vfs.getattr(ROOT, dir + "/to").getMtimeNs(), "the cached attributes are the MDS's");
        assertEquals(1, vfs.getattr(ROOT, dir + "/to/mv7").getSize());
        assertEquals(Status.ENOENT, assertThrows(FsException.class, () -> vfs.getattr(ROOT, dir + "/from/mv7")).status());
    }

    /**
     * An rm loop over a directory whose entries are not cached (rm -r after the kernel dropped its
     * dentries): statahead answers the lookups although the loop removes entries meanwhile, and no
     * removed entry comes back from a page fetched before its removal. Regression: each removal
     * made statahead throw away the page it was fetching, so every lookup asked the MDS.
     */
    @Test
    void stataheadKeepsAnsweringAnRmLoopAndNeverBringsARemovedEntryBack() {
        int n = 80;
        for (int i = 0; i < n; i++) {
            writeFile(vfs, dir + "/rmsa" + i, new byte[] {1}, 1);
        }
        ClientConfig cfg = ClientConfig.defaults().withCacheTimeout(Duration.ofSeconds(30)).withReaddirPageSize(16);
        for (boolean deferredUnlink : new boolean[] {false, true}) {
            String sub = dir + "/rmsa-" + deferredUnlink;
            vfs.mkdir(ROOT, sub, 0755);
            for (int i = 0; i < n; i++) {
                vfs.rename(ROOT, dir + "/rmsa" + i, sub + "/f" + i, 0);
            }
            try (GranaryVfs other = new GranaryVfs(cluster.mds, cluster.blockIo, cfg.withDeferredUnlink(deferredUnlink))) {
                long lookups = mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.LOOKUP);
                for (int i = 0; i < n; i++) {
                    assertEquals(1, other.getattr(ROOT, sub + "/f" + i).getSize()); // the kernel's LOOKUP before unlink
                    other.unlink(ROOT, sub + "/f" + i);
                }
                long asked = mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.LOOKUP) - lookups;
                assertTrue(asked <= 8, "lookups asked of the MDS during the loop (deferred " + deferredUnlink + "): " + asked);
                for (int i = 0; i < n; i++) {
                    int k = i;
                    assertEquals(Status.ENOENT, assertThrows(FsException.class, () -> other.getattr(ROOT, sub + "/f" + k)).status());
                }
                other.rmdir(ROOT, sub);
            }
            if (!deferredUnlink) {
                for (int i = 0; i < n; i++) {
                    writeFile(vfs, dir + "/rmsa" + i, new byte[] {1}, 1);
                }
            }
        }
    }

    /**
     * An mv loop in a directory whose entries are not cached (renaming a dataset's files after the
     * kernel dropped its dentries): statahead answers the lookups although each rename changes the
     * directory, no old name comes back, the new names lead to the renamed inodes, and a replaced
     * file's other name shows its new link count at once. Regression: each rename made statahead
     * throw away the page it was fetching, so every lookup asked the MDS.
     */
    @Test
    void stataheadKeepsAnsweringAnMvLoopAndRenamedEntriesAreRightAtOnce() {
        int n = 80;
        String sub = dir + "/mvsa";
        vfs.mkdir(ROOT, sub, 0755);
        for (int i = 0; i < n; i++) {
            writeFile(vfs, sub + "/f" + i, new byte[i + 1], i + 1);
        }
        writeFile(vfs, sub + "/h", new byte[] {9}, 1);
        vfs.link(ROOT, sub + "/h", sub + "/h2");
        ClientConfig cfg = ClientConfig.defaults().withCacheTimeout(Duration.ofSeconds(30)).withReaddirPageSize(16);
        try (GranaryVfs other = new GranaryVfs(cluster.mds, cluster.blockIo, cfg)) {
            long lookups = mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.LOOKUP);
            java.util.Map<Integer, Long> inos = new java.util.HashMap<>();
            for (int i = 0; i < n; i++) {
                inos.put(i, other.getattr(ROOT, sub + "/f" + i).getIno()); // the kernel's LOOKUP before rename
                other.rename(ROOT, sub + "/f" + i, sub + "/g" + i, 0);
            }
            long asked = mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.LOOKUP) - lookups;
            assertTrue(asked <= 8, "lookups asked of the MDS during the loop: " + asked);
            for (int i = 0; i < n; i++) {
                int k = i;
                assertEquals(Status.ENOENT, assertThrows(FsException.class, () -> other.getattr(ROOT, sub + "/f" + k)).status());
                Attr g = other.getattr(ROOT, sub + "/g" + i);
                assertEquals(inos.get(i), g.getIno());
                assertEquals(i + 1, g.getSize());
            }
            assertEquals(2, other.getattr(ROOT, sub + "/h2").getNlink());
            other.rename(ROOT, sub + "/g0", sub + "/h", 0); // replaces h, whose other name is h2
            assertEquals(1, other.getattr(ROOT, sub + "/h2").getNlink(), "the replaced inode's other name");
            assertEquals(inos.get(0), other.getattr(ROOT, sub + "/h").getIno());
            vfs.invalidateCaches(); // the other client, once its cache timeout passed
            assertEquals(1, vfs.getattr(ROOT, sub + "/h2").getNlink());
        }
    }

    /** ls -l asks every file for system.posix_acl_access: answered ENODATA without the MDS (ACLs are not supported). */
    @Test
    void systemXattrsAreAnsweredWithoutTheMds() {
        writeFile(vfs, dir + "/acl", new byte[] {1}, 1);
        vfs.invalidateCaches();
        vfs.getattr(ROOT, dir + "/acl");
        long asked = mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.GETXATTR);
        for (String name : List.of("system.posix_acl_access", "system.posix_acl_default")) {
            assertEquals(Status.ENODATA, assertThrows(FsException.class, () -> vfs.getxattr(ROOT, dir + "/acl", name)).status());
        }
        assertEquals(0, mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.GETXATTR) - asked);
        vfs.setxattr(ROOT, dir + "/acl", "user.some", new byte[] {1}, 0);
        assertEquals(Status.ENODATA, assertThrows(FsException.class, () -> vfs.getxattr(ROOT, dir + "/acl", "user.none")).status());
        assertEquals(1, mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.GETXATTR) - asked, "other names of a file with xattrs still ask the MDS");
        assertEquals(Status.ENODATA, assertThrows(FsException.class, () -> vfs.getxattr(ROOT, dir + "/acl", "system.posix_acl_access")).status());
        assertEquals(1, mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.GETXATTR) - asked, "system.* never asks");
        assertEquals(Status.ENOENT, assertThrows(FsException.class, () -> vfs.getxattr(ROOT, dir + "/nope", "system.posix_acl_access")).status());
    }

    /** Counted down when the batch_write held by {@link #holdFirstBatchWrite} reached the MDS. */
    private static volatile java.util.concurrent.CountDownLatch heldBatchArrived;

    /**
     * Deferred unlinks ({@link DeferredUnlinks}): refused removals wait for an fsync of their
     * directory, each reported once, for a bounded number of directories: a client that never
     * fsyncs its directories keeps the newest ones, not an error per directory for ever.
     * Regression: nothing bounded the map.
     */
    @Test
    void refusalsAreKeptForABoundedNumberOfDirectoriesAndReportedOnce() {
        int dirs = 5;
        int max = 3;
        Caller user = GranaryVfs.caller(1000, 1000); // may not write the root-owned 0755 directories
        List<long[]> targets = new ArrayList<>();
        for (int i = 0; i < dirs; i++) {
            String d = dir + "/refused" + i;
            vfs.mkdir(ROOT, d, 0755);
            vfs.release(ROOT, vfs.create(ROOT, d + "/f", 0644, O_CREAT | O_WRONLY));
            targets.add(new long[] {vfs.lookup(ROOT, d).getIno(), vfs.lookup(ROOT, d + "/f").getIno()});
        }
        List<Long> failedIn = new java.util.concurrent.CopyOnWriteArrayList<>();
        DeferredUnlinks.Outcome outcome = new DeferredUnlinks.Outcome() {
            @Override
            public void removed(DeferredUnlinks.Unlink u, Attr parentAttr) {
                throw new AssertionError("the MDS must refuse " + u);
            }

            @Override
            public void failed(DeferredUnlinks.Unlink u, FsException e) {
                failedIn.add(u.parent());
            }
        };
        try (DeferredUnlinks d = new DeferredUnlinks(cluster.mds, outcome, max)) {
            for (long[] t : targets) {
                d.offer(new DeferredUnlinks.Unlink(user, t[0], "f", t[1]));
                d.awaitDir(t[0]);
            }
            assertEquals(dirs, failedIn.size());
            for (int i = 0; i < dirs; i++) {
                long dirIno = targets.get(i)[0];
                FsException e = d.takeError(dirIno);
                if (i < dirs - max) {
                    assertEquals(null, e, "the oldest refusals are dropped: directory " + i);
                } else {
                    assertEquals(Status.EACCES, e.status(), "directory " + i);
                    assertEquals(null, d.takeError(dirIno), "reported once: directory " + i);
                }
            }
        }
    }

    /** Holds the first batch_write at the MDS until the returned latch opens. */
    private static java.util.concurrent.CountDownLatch holdFirstBatchWrite() {
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch arrived = new java.util.concurrent.CountDownLatch(1);
        heldBatchArrived = arrived;
        java.util.concurrent.atomic.AtomicBoolean first = new java.util.concurrent.atomic.AtomicBoolean(true);
        cluster.beforeWrite = r -> {
            if (r.hasBatchWrite() && first.getAndSet(false)) {
                arrived.countDown();
                try {
                    release.await(30, java.util.concurrent.TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        };
        return release;
    }

    /**
     * Deferred unlinks (client.deferred_unlink): unlink returns before the MDS has the removal;
     * removals go in batches; this client's listing, recreation and fsync of the directory see
     * them done; another client sees them once committed.
     */
    @Test
    void deferredUnlinksReturnAtOnceGoInBatchesAndThisClientSeesThemDone() throws Exception {
        int n = 30;
        try (GranaryVfs d = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults().withDeferredUnlink(true))) {
            for (int i = 0; i < n; i++) {
                writeFile(d, dir + "/du" + i, new byte[] {(byte) i}, 1);
            }
            long dirIno = d.getattr(ROOT, dir).getIno();
            java.util.concurrent.CountDownLatch release = holdFirstBatchWrite();
            long batches = mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.BATCH_WRITE);
            long unlinks = mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.UNLINK);
            try {
                d.unlink(ROOT, dir + "/du0");
                // The rest queue behind the first batch, held at the MDS (waiting for it to get there
                // keeps the count of batches the same on a loaded machine: all 30 once went in one).
                assertTrue(heldBatchArrived.await(30, java.util.concurrent.TimeUnit.SECONDS), "the first batch reached the MDS");
                for (int i = 1; i < n; i++) {
                    d.unlink(ROOT, dir + "/du" + i); // returns while the first batch is held at the MDS
                }
                assertEquals(1, cluster.mds.lookup(ROOT, dirIno, "du7".getBytes(StandardCharsets.UTF_8)).getSize(),
                        "the MDS still has the file while its removal is held");
            } finally {
                release.countDown();
            }
            List<String> names = d.readdir(ROOT, dir).stream().map(GranaryVfs.Entry::name).filter(x -> x.startsWith("du")).toList();
            assertEquals(List.of(), names, "a listing waits for the pending removals");
            long sent = mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.BATCH_WRITE) - batches;
            assertEquals(2, sent, "30 removals: the held first one, then the 29 queued behind it");
            assertEquals(0, mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.UNLINK) - unlinks, "no unlink sent on its own");
            FsException gone = assertThrows(FsException.class, () -> vfs.getattr(ROOT, dir + "/du7"));
            assertEquals(Status.ENOENT, gone.status(), "another client sees it removed");
            assertThrows(FsException.class, () -> cluster.mds.lookup(ROOT, dirIno, "du7".getBytes(StandardCharsets.UTF_8)));
            // recreate a removed name at once, and fsync the directory
            writeFile(d, dir + "/du3", new byte[] {42, 43}, 2);
            assertEquals(2, d.getattr(ROOT, dir + "/du3").getSize());
            d.fsyncdir(ROOT, dir);
            // an unlink right after the create: deferred, then gone here and at the MDS after fsync
            d.unlink(ROOT, dir + "/du3");
            assertEquals(Status.ENOENT, assertThrows(FsException.class, () -> d.getattr(ROOT, dir + "/du3")).status());
            d.fsyncdir(ROOT, dir);
            assertThrows(FsException.class, () -> cluster.mds.lookup(ROOT, dirIno, "du3".getBytes(StandardCharsets.UTF_8)));
        } finally {
            cluster.beforeWrite = r -> { };
        }
    }

    /**
     * A deferred unlink never removes a file that replaced the one it meant (another client renamed
     * one over it meanwhile), and one the MDS refuses (another client took the write permission
     * away meanwhile) is reported by fsync of the directory while the file stays.
     */
    @Test
    void aDeferredUnlinkNeverRemovesAReplacementAndReportsARefusal() throws Exception {
        vfs.chmod(ROOT, dir, 0777);
        Caller user = GranaryVfs.caller(1000, 1000);
        try (GranaryVfs d = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults().withDeferredUnlink(true))) {
            writeFile(d, dir + "/x", "old".getBytes(StandardCharsets.UTF_8), 3);
            writeFile(d, dir + "/y", "new!".getBytes(StandardCharsets.UTF_8), 4);
            long yIno = d.getattr(ROOT, dir + "/y").getIno();
            d.getattr(ROOT, dir + "/x");
            java.util.concurrent.CountDownLatch release = holdFirstBatchWrite();
            try {
                d.unlink(ROOT, dir + "/x");
                vfs.rename(ROOT, dir + "/y", dir + "/x", 0); // another client, while the removal is held
            } finally {
                release.countDown();
            }
            d.fsyncdir(ROOT, dir); // ENOENT (x names another inode now) is not an error
            assertEquals(yIno, vfs.getattr(ROOT, dir + "/x").getIno());
            assertArrayEquals("new!".getBytes(StandardCharsets.UTF_8), readAll(vfs, dir + "/x", 100));

            long fh = d.create(user, dir + "/mine", 0644, O_CREAT | O_WRONLY);
            d.release(user, fh);
            d.getattr(user, dir + "/mine");
            release = holdFirstBatchWrite();
            try {
                d.unlink(user, dir + "/mine"); // allowed by the cached 0777
                vfs.chmod(ROOT, dir, 0755);    // another client takes write permission away first
            } finally {
                release.countDown();
            }
            FsException e = assertThrows(FsException.class, () -> d.fsyncdir(ROOT, dir));
            assertEquals(Status.EIO, e.status());
            assertTrue(e.getMessage().contains("EACCES"), e.getMessage());
            d.fsyncdir(ROOT, dir); // reported once
            assertTrue(d.getattr(user, dir + "/mine").getIno() > 0, "the refused removal left the file, visible again here");
        } finally {
            cluster.beforeWrite = r -> { };
            vfs.chmod(ROOT, dir, 0777);
        }
    }

    @Test
    void aLookupWaitsForTheStataheadPageHoldingItsNameNotForTheWholeDirectory() throws Exception {
        int n = 60;
        for (int i = 0; i < n; i++) {
            writeFile(vfs, dir + "/sa" + i, random(i + 1, i), i + 1);
        }
        // Pages of 16 in byte order: sa0 sa1 sa10..sa19 sa2 sa20 sa21 sa22 | sa23 ... | ... sa9
        java.util.concurrent.CountDownLatch later = new java.util.concurrent.CountDownLatch(1);
        cluster.beforeRead = r -> {
            if (r.hasReaddir() && r.getReaddir().getPlus() && !r.getReaddir().getAfter().isEmpty()) {
                try {
                    later.await(30, java.util.concurrent.TimeUnit.SECONDS); // pages after the first are held
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        };
        ClientConfig cfg = ClientConfig.defaults().withCacheTimeout(Duration.ofSeconds(30)).withReaddirPageSize(16);
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try (GranaryVfs other = new GranaryVfs(cluster.mds, cluster.blockIo, cfg)) {
            assertEquals(1, other.getattr(ROOT, dir + "/sa0").getSize());
            assertEquals(2, other.getattr(ROOT, dir + "/sa1").getSize()); // the second miss starts the fetch
            long lookups = mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.LOOKUP);
            // In the first page, asked while the fetch has just started: answered as soon as that
            // page is in, while the rest of the directory is held (it waited 2 s, the longest wait
            // for a fetch, before).
            long t0 = System.nanoTime();
            assertEquals(21, other.getattr(ROOT, dir + "/sa20").getSize());
            assertEquals(23, other.getattr(ROOT, dir + "/sa22").getSize());
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms < 1_000, "names in the first page waited " + ms + " ms for the rest of the directory");
            assertEquals(lookups, mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.LOOKUP),
                    "names in the first page cost no lookup of their own");
            // In the last page: waits for it (no lookup of its own either), answered once it comes.
            Future<Long> last = pool.submit(() -> other.getattr(ROOT, dir + "/sa9").getSize());
            Thread.sleep(300);
            assertFalse(last.isDone(), "a name past the pages fetched so far waits for its page");
            later.countDown();
            assertEquals(10L, last.get(20, java.util.concurrent.TimeUnit.SECONDS));
            assertEquals(lookups, mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase.LOOKUP));
            assertEquals(1, other.stataheadCounters()[0]);
        } finally {
            later.countDown();
            cluster.beforeRead = r -> { };
            pool.shutdownNow();
        }
    }

    /**
     * Regression: forgetName (called when a call through a cached name met ENOENT, before the
     * kernel walks the path again) walked only cached entries, so when the directory's entry had
     * expired while the file's had not, the file's entry stayed and the retry found the removed
     * inode again: chmod, truncate and link on a mount failed with ESTALE about once in 100 calls
     * right after another client replaced the file. Here the directory's entry is made to expire
     * first: the file's entry is cached 0.6 s after it, with a 1 s cache timeout.
     */
    @Test
    void forgettingANameWhoseDirectoryEntryExpiredStillDropsIt() throws Exception {
        writeFile(vfs, dir + "/rep", random(100, 1), 100);
        ClientConfig cfg = ClientConfig.defaults().withCacheTimeout(java.time.Duration.ofSeconds(1));
        try (GranaryVfs b = new GranaryVfs(cluster.mds, cluster.blockIo, cfg)) {
            long old = b.getattr(ROOT, dir + "/rep").getIno(); // the directory's entry and the file's
            Thread.sleep(600);
            b.forgetName(ROOT, dir + "/rep");
            assertEquals(old, b.getattr(ROOT, dir + "/rep").getIno()); // the file's entry again, 0.6 s younger
            Thread.sleep(500); // the directory's entry has expired, the file's has not
            writeFile(vfs, dir + "/rep.new", random(200, 2), 200);
            vfs.rename(ROOT, dir + "/rep.new", dir + "/rep", 0); // another client replaces the file
            long now = vfs.getattr(ROOT, dir + "/rep").getIno();
            assertNotEquals(old, now);
            b.forgetName(ROOT, dir + "/rep"); // what GranaryFuse does on ENOENT from the old inode
            assertEquals(now, b.getattr(ROOT, dir + "/rep").getIno(), "the name after forgetName");
            assertEquals(200, b.getattr(ROOT, dir + "/rep").getSize());
        }
    }

    /**
     * Regression (CI, LargeDirectoryFuseTest#linkPastTheLinkLimitFailsWithEmlink): an unlink of a
     * name whose dentry this client did not hold (made elsewhere, or expired between the kernel's
     * LOOKUP and UNLINK) left the inode's cached attributes as they were, so the file's other
     * names showed the old nlink after this client's own unlink. The MDS now answers with the
     * inode's new attributes.
     */
    @Test
    void unlinkOfANameNotInTheCacheShowsTheNewLinkCountOnTheOtherNames() {
        writeFile(vfs, dir + "/hl", random(3000, 7), 3000);
        ClientConfig cfg = ClientConfig.defaults().withCacheTimeout(java.time.Duration.ofSeconds(30));
        try (GranaryVfs c = new GranaryVfs(cluster.mds, cluster.blockIo, cfg)) {
            assertEquals(1, c.getattr(ROOT, dir + "/hl").getNlink());
            vfs.link(ROOT, dir + "/hl", dir + "/hl2"); // names c has never looked up
            vfs.link(ROOT, dir + "/hl", dir + "/hl3");
            vfs.link(ROOT, dir + "/hl", dir + "/hl4");
            c.unlink(ROOT, dir + "/hl2");
            assertEquals(3, c.getattr(ROOT, dir + "/hl").getNlink(), "nlink after c removed one of four names");
            c.unlink(ROOT, dir + "/hl3");
            assertEquals(2, c.getattr(ROOT, dir + "/hl").getNlink());
            assertEquals(2, c.getattr(ROOT, dir + "/hl4").getNlink());
            c.unlink(ROOT, dir + "/hl");
            assertEquals(1, c.getattr(ROOT, dir + "/hl4").getNlink());
            assertEquals(Status.ENOENT, assertThrows(FsException.class, () -> c.getattr(ROOT, dir + "/hl")).status());
            c.unlink(ROOT, dir + "/hl4");
            assertEquals(Status.ENOENT, assertThrows(FsException.class, () -> c.getattr(ROOT, dir + "/hl4")).status());
            // rmdir of a directory c never looked up: the parent's nlink drops at once too.
            long before = c.getattr(ROOT, dir).getNlink();
            vfs.mkdir(ROOT, dir + "/sub", 0755);
            c.rmdir(ROOT, dir + "/sub");
            assertEquals(before, c.getattr(ROOT, dir).getNlink());
        }
    }

    /**
     * A path walk whose MDS lookup of a name was answered before this client removed the name
     * (a getattr beside an unlink: the kernel locks neither against the other) does not leave the
     * name cached: the next getattr answers ENOENT. Regression (found while fixing statahead's
     * kind of fault, 2026-12-06): the walk cached the entry from its answer after the unlink had
     * dropped it, and a stat showed the removed file for a cache timeout.
     */
    @Test
    void aLookupAnsweredBeforeThisClientsUnlinkOfTheNameDoesNotCacheIt() throws Exception {
        writeFile(vfs, dir + "/gone", random(100, 3), 100);
        ClientConfig cfg = ClientConfig.defaults().withCacheTimeout(java.time.Duration.ofSeconds(30)).withDirLease(false);
        java.util.concurrent.ExecutorService other = Executors.newSingleThreadExecutor();
        try (GranaryVfs c = new GranaryVfs(cluster.mds, cluster.blockIo, cfg)) {
            c.getattr(ROOT, dir); // the directory cached: the next walk asks the MDS only for "gone"
            java.util.concurrent.atomic.AtomicBoolean armed = new java.util.concurrent.atomic.AtomicBoolean(true);
            cluster.afterRead = r -> {
                if (r.hasLookup() && r.getLookup().getName().toStringUtf8().equals("gone") && armed.getAndSet(false)) {
                    // the lookup has its answer (the file exists); this client's unlink lands now
                    try {
                        other.submit(() -> c.unlink(ROOT, dir + "/gone")).get();
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                }
            };
            try {
                assertEquals(100, c.getattr(ROOT, dir + "/gone").getSize(), "the walk's answer, from before the unlink");
            } finally {
                cluster.afterRead = r -> { };
            }
            assertFalse(armed.get(), "the unlink ran inside the lookup");
            assertEquals(Status.ENOENT, assertThrows(FsException.class, () -> c.getattr(ROOT, dir + "/gone")).status(),
                    "the removed name after the unlink returned");
        } finally {
            other.shutdownNow();
        }
    }

    @Test
    void stataheadAnswersALookupLoopFromOneDirectoryFetchAndKeepsOwnChangesVisible() {
        int n = 60;
        for (int i = 0; i < n; i++) {
            writeFile(vfs, dir + "/sa" + i, random(i + 1, i), i + 1);
        }
        ClientConfig cfg = ClientConfig.defaults().withCacheTimeout(java.time.Duration.ofSeconds(30)).withReaddirPageSize(16);
        try (GranaryVfs other = new GranaryVfs(cluster.mds, cluster.blockIo, cfg)) {
            for (int i = 0; i < n; i++) {
                assertEquals(i + 1, other.getattr(ROOT, dir + "/sa" + i).getSize());
            }
            long[] c = other.stataheadCounters();
            assertEquals(1, c[0], "one directory fetch for the whole loop");
            assertTrue(c[1] >= n - 2, "entries cached by it: " + c[1]);
            // This client's own changes are visible at once, whatever statahead cached.
            other.unlink(ROOT, dir + "/sa10");
            FsException gone = assertThrows(FsException.class, () -> other.getattr(ROOT, dir + "/sa10"));
            assertEquals(Status.ENOENT, gone.status());
            long fh = other.open(ROOT, dir + "/sa11", O_WRONLY | O_TRUNC);
            other.write(ROOT, fh, 0, new byte[500], 500);
            other.release(ROOT, fh);
            assertEquals(500, other.getattr(ROOT, dir + "/sa11").getSize());
            // Lookups of absent names (what creates make) never start a fetch.
            for (int i = 0; i < 20; i++) {
                other.release(ROOT, other.create(ROOT, dir + "/new" + i, 0644, O_CREAT | O_WRONLY));
            }
            assertEquals(1, other.stataheadCounters()[0]);
        }
        try (GranaryVfs off = new GranaryVfs(cluster.mds, cluster.blockIo, cfg.withStataheadMax(0))) {
            for (int i = 0; i < 20; i++) {
                if (i != 10) {
                    assertEquals(i == 11 ? 500 : i + 1, off.getattr(ROOT, dir + "/sa" + i).getSize());
                }
            }
            assertEquals(0, off.stataheadCounters()[0], "statahead_max 0 turns it off");
        }
    }

    /**
     * Data-ahead: a stat loop alone fetches no data; once files of the directory are being opened,
     * the maps of its small files come in bulk and the opens take them, revalidated with the MDS:
     * a file another client rewrote (same size) after the fetch opens with its new bytes, and a
     * name another client gave to another file opens that file. data_ahead false fetches nothing.
     */
    @Test
    void dataAheadFetchesSmallFilesForOpensAndEveryOpenSeesTheFileAsItIsNow() throws Exception {
        int n = 80;
        for (int i = 0; i < n; i++) {
            writeFile(vfs, dir + "/da" + i, random(1000 + i, i), 4096);
        }
        writeFile(vfs, dir + "/empty", new byte[0], 1); // not fetched: nothing inline
        ClientConfig cfg = ClientConfig.defaults().withCacheTimeout(java.time.Duration.ofSeconds(30)).withReaddirPageSize(16);
        try (GranaryVfs stat = new GranaryVfs(cluster.mds, cluster.blockIo, cfg)) {
            for (int i = 0; i < n; i++) {
                assertEquals(1000 + i, stat.getattr(ROOT, dir + "/da" + i).getSize());
            }
            Thread.sleep(300);
            assertEquals(0, stat.dataAheadCounters()[0], "a stat loop fetches no data");
        }
        try (GranaryVfs other = new GranaryVfs(cluster.mds, cluster.blockIo, cfg)) {
            for (int i = 0; i < n; i++) {
                other.getattr(ROOT, dir + "/da" + i); // statahead reads the directory
            }
            assertArrayEquals(random(1000, 0), readAll(other, dir + "/da0", 4096));
            assertArrayEquals(random(1001, 1), readAll(other, dir + "/da1", 4096)); // the second open starts it
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (other.dataAheadCounters()[0] < n - 2 && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertEquals(n - 2, other.dataAheadCounters()[0], "the other small files fetched ahead");

            writeFile(vfs, dir + "/da5", random(1005, 99), 4096); // rewritten after the fetch, same size
            writeFile(vfs, dir + "/moved", random(777, 7), 4096);
            vfs.rename(ROOT, dir + "/moved", dir + "/da6", 0); // another file under the name
            for (int i = 2; i < n; i++) {
                byte[] want = i == 5 ? random(1005, 99) : i == 6 ? random(777, 7) : random(1000 + i, i);
                assertArrayEquals(want, readAll(other, dir + "/da" + i, 4096), "da" + i);
            }
            long[] c = other.dataAheadCounters();
            assertEquals(n - 2, c[1], "every fetched map taken by its open");
            assertEquals(0, c[2]);
        }
        try (GranaryVfs off = new GranaryVfs(cluster.mds, cluster.blockIo, cfg.withDataAhead(false))) {
            for (int i = 0; i < n; i++) {
                off.getattr(ROOT, dir + "/da" + i);
            }
            for (int i = 0; i < 10; i++) {
                readAll(off, dir + "/da" + i, 4096);
            }
            Thread.sleep(300);
            assertArrayEquals(new long[3], off.dataAheadCounters(), "data_ahead false");
        }
    }

    /**
     * An open whose mount's page cache holds the file at the version the MDS has takes no map
     * (the MDS sends the attributes only), and its first read that reaches the client reads the
     * map then: the right bytes; the pages were gone, so opens in that directory take their maps
     * again for a while. A version the pages do not hold, a writable, truncating or O_DIRECT
     * open, or no page-cache answer take the map at open as before. A deferred handle whose file
     * another client rewrote or removed before its first read gets ESTALE (the held pages are the
     * open's version: the newer bytes would tear it); a chmod by another client changes nothing.
     */
    @Test
    void anOpenOfTheVersionThePageCacheHoldsTakesNoMapUntilARead() throws Exception {
        for (String d : new String[] {"/pa", "/pb", "/pc", "/pd", "/pe"}) {
            vfs.mkdir(ROOT, dir + d, 0755);
        }
        writeFile(vfs, dir + "/pa/f", random(3000, 1), 4096);
        writeFile(vfs, dir + "/pb/f", random(2000, 4), 4096);
        writeFile(vfs, dir + "/pc/f", random(3000, 5), 4096);
        writeFile(vfs, dir + "/pd/f", random(500, 3), 4096);
        writeFile(vfs, dir + "/pe/f", random(700, 6), 4096);
        // no lookup's map for the opens (open_after_lookup), no data-ahead: the opens ask the MDS themselves
        ClientConfig cfg = ClientConfig.defaults().withDataAhead(false).withOpenAfterLookup(Duration.ZERO);
        try (GranaryVfs other = new GranaryVfs(cluster.mds, cluster.blockIo, cfg)) {
            Map<Long, Long> versions = new HashMap<>();
            for (String d : new String[] {"/pa", "/pb", "/pc", "/pd", "/pe"}) {
                Attr a = other.getattr(ROOT, dir + d + "/f");
                versions.put(a.getIno(), a.getCtimeNs());
            }
            java.util.function.LongUnaryOperator held = i -> versions.getOrDefault(i, GranaryVfs.NO_PAGES);

            long fh = other.open(ROOT, dir + "/pa/f", O_RDONLY, held);
            assertArrayEquals(new long[] {1, 0}, other.deferredMapCounters(), "opened without a map");
            assertEquals(3000, other.attrAtOpen(fh).getSize());
            assertArrayEquals(Arrays.copyOfRange(random(3000, 1), 1000, 2000), other.read(ROOT, fh, 1000, 1000));
            assertArrayEquals(new long[] {1, 1}, other.deferredMapCounters(), "the map read at the first read");
            assertArrayEquals(Arrays.copyOfRange(random(3000, 1), 2000, 3000), other.read(ROOT, fh, 2000, 4096));
            assertEquals(1, other.deferredMapCounters()[1], "once");
            other.release(ROOT, fh);
            other.release(ROOT, other.open(ROOT, dir + "/pa/f", O_RDONLY, held));
            assertArrayEquals(new long[] {1, 1}, other.deferredMapCounters(), "the pages were gone in /pa: its opens take their maps");

            for (int flags : new int[] {O_RDWR, O_WRONLY, O_RDONLY | GranaryVfs.O_DIRECT, O_RDONLY | O_APPEND}) {
                other.release(ROOT, other.open(ROOT, dir + "/pb/f", flags, held));
            }
            other.release(ROOT, other.open(ROOT, dir + "/pb/f", O_RDONLY, i -> versions.get(i) - 1)); // older pages
            other.release(ROOT, other.open(ROOT, dir + "/pb/f", O_RDONLY, null));
            assertArrayEquals(new long[] {1, 1}, other.deferredMapCounters(), "every other open took its map");
            other.release(ROOT, other.open(ROOT, dir + "/pb/f", O_RDONLY, held));
            assertArrayEquals(new long[] {2, 1}, other.deferredMapCounters(), "released unread: no map read");

            long changed = other.open(ROOT, dir + "/pc/f", O_RDONLY, held);
            writeFile(vfs, dir + "/pc/f", random(3000, 2), 4096); // another client, before the first read
            FsException torn = assertThrows(FsException.class, () -> other.read(ROOT, changed, 0, 4096),
                    "the pages held are the open's version: the newer bytes would tear the file");
            assertEquals(Status.ESTALE, torn.status());
            other.release(ROOT, changed);
            assertArrayEquals(random(3000, 2), readAll(other, dir + "/pc/f", 4096), "a new open reads the newer file");

            long chmodded = other.open(ROOT, dir + "/pe/f", O_RDONLY, held);
            vfs.chmod(ROOT, dir + "/pe/f", 0600); // attributes only: the bytes are the open's
            assertArrayEquals(random(700, 6), other.read(ROOT, chmodded, 0, 4096));
            other.release(ROOT, chmodded);

            long removed = other.open(ROOT, dir + "/pd/f", O_RDONLY, held);
            vfs.unlink(ROOT, dir + "/pd/f");
            FsException e = assertThrows(FsException.class, () -> other.read(ROOT, removed, 0, 100));
            assertEquals(Status.ESTALE, e.status());
            other.release(ROOT, removed);
            assertArrayEquals(new long[] {5, 3}, other.deferredMapCounters());
        }
    }

    /**
     * Data-ahead skips files the page cache holds by inode; when the node an open goes through
     * holds no pages of them (the kernel forgot the node and made another), their opens take
     * maps, and data-ahead fetches what it skipped (before, nothing was fetched ahead for the
     * directory until the files changed).
     */
    @Test
    void dataAheadFetchesWhatItSkippedAsHeldWhenTheOpenedNodeHoldsNoPages() throws Exception {
        int n = 40;
        vfs.mkdir(ROOT, dir + "/st", 0755);
        for (int i = 0; i < n; i++) {
            writeFile(vfs, dir + "/st/f" + i, random(2000 + i, i), 4096);
        }
        ClientConfig cfg = ClientConfig.defaults().withCacheTimeout(Duration.ofSeconds(30)).withOpenAfterLookup(Duration.ZERO);
        try (GranaryVfs other = new GranaryVfs(cluster.mds, cluster.blockIo, cfg)) {
            Map<Long, Long> versions = new HashMap<>();
            for (int i = 0; i < n; i++) { // statahead lists the directory
                Attr a = other.getattr(ROOT, dir + "/st/f" + i);
                versions.put(a.getIno(), a.getCtimeNs());
            }
            other.pagesHeld(ino -> versions.getOrDefault(ino, GranaryVfs.NO_PAGES)); // held, by inode
            java.util.function.LongUnaryOperator thisNode = ino -> GranaryVfs.NO_PAGES; // but not through the node opened
            for (int i = 0; i < 2; i++) { // the second open starts data-ahead
                long fh = other.open(ROOT, dir + "/st/f" + i, O_RDONLY, thisNode);
                assertArrayEquals(random(2000 + i, i), other.read(ROOT, fh, 0, 4096));
                other.release(ROOT, fh);
            }
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (other.dataAheadCounters()[0] < n - 2 && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertEquals(n - 2, other.dataAheadCounters()[0], "the files not opened yet, fetched though listed as held");
            for (int i = 2; i < n; i++) {
                long fh = other.open(ROOT, dir + "/st/f" + i, O_RDONLY, thisNode);
                assertArrayEquals(random(2000 + i, i), other.read(ROOT, fh, 0, 4096));
                other.release(ROOT, fh);
            }
            assertArrayEquals(new long[] {0, 0}, other.deferredMapCounters(), "no open went without its map");
            assertEquals(n - 2, other.dataAheadCounters()[1], "their opens took them");
        }
    }

    @Test
    void openWithTruncEmptiesTheFile() {
        writeFile(vfs, dir + "/tr", random(1000, 9), 1000);
        long fh = vfs.open(ROOT, dir + "/tr", O_WRONLY | O_TRUNC);
        assertEquals(0, vfs.fgetattr(ROOT, fh).getSize());
        vfs.write(ROOT, fh, 0, new byte[] {1, 2}, 2);
        vfs.release(ROOT, fh);
        assertArrayEquals(new byte[] {1, 2}, readAll(vfs, dir + "/tr", 100));
        assertEquals(Status.EEXIST.getNumber(), errno(() -> vfs.create(ROOT, dir + "/tr", 0644, O_CREAT | O_EXCL | O_WRONLY)));
    }

    @Test
    void eightConcurrentReadersGetCorrectBytes() throws Exception {
        byte[] data = random(5 * S + 333, 10);
        writeFile(vfs, dir + "/shared", data, S);
        long shared = vfs.open(ROOT, dir + "/shared", O_RDONLY);
        ExecutorService pool = Executors.newFixedThreadPool(8);
        try {
            List<Future<Integer>> results = new ArrayList<>();
            for (int t = 0; t < 8; t++) {
                int seed = t;
                results.add(pool.submit(() -> {
                    Random rnd = new Random(seed);
                    long own = vfs.open(ROOT, dir + "/shared", O_RDONLY);
                    int checked = 0;
                    for (int i = 0; i < 25; i++) {
                        long fh = i % 2 == 0 ? own : shared;
                        int off = rnd.nextInt(data.length);
                        int len = 1 + rnd.nextInt(2 * S);
                        byte[] got = vfs.read(ROOT, fh, off, len);
                        assertArrayEquals(Arrays.copyOfRange(data, off, Math.min(off + len, data.length)), got);
                        checked++;
                    }
                    assertArrayEquals(data, vfs.read(ROOT, own, 0, data.length));
                    vfs.release(ROOT, own);
                    return checked;
                }));
            }
            for (Future<Integer> f : results) {
                assertEquals(25, f.get());
            }
        } finally {
            pool.shutdownNow();
            vfs.release(ROOT, shared);
        }
    }

    @Test
    void tinyDirtyLimitAppliesBackpressureWithoutDeadlock() {
        GranaryVfs small = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults().withMaxDirtyBytes(S + S / 2));
        try {
            assertTimeoutPreemptively(Duration.ofSeconds(60), () -> {
                byte[][] datas = {random(4 * S, 11), random(4 * S, 12)};
                List<CompletableFuture<Void>> writers = new ArrayList<>();
                for (int w = 0; w < 2; w++) {
                    int id = w;
                    writers.add(CompletableFuture.runAsync(() -> {
                        long fh = small.create(ROOT, dir + "/bp" + id, 0644, O_CREAT | O_RDWR);
                        byte[] data = datas[id];
                        // partial-stripe writes in a scattered order: every buffer stays partial for a while
                        Random rnd = new Random(id);
                        List<Integer> chunks = new ArrayList<>();
                        for (int off = 0; off < data.length; off += 5000) {
                            chunks.add(off);
                        }
                        java.util.Collections.shuffle(chunks, rnd);
                        for (int off : chunks) {
                            int n = Math.min(5000, data.length - off);
                            small.write(ROOT, fh, off, Arrays.copyOfRange(data, off, off + n), n);
                        }
                        small.release(ROOT, fh);
                    }));
                }
                CompletableFuture.allOf(writers.toArray(new CompletableFuture[0])).join();
                assertArrayEquals(datas[0], readAll(small, dir + "/bp0", S));
                assertArrayEquals(datas[1], readAll(small, dir + "/bp1", S));
            });
            assertEquals(S + S / 2, small.dirtyBudget().available(), "all dirty memory returned");
            DirtyBudget.Stats st = small.dirtyStats();
            assertEquals(0, st.heldBytes(), "nothing held after the closes");
            assertTrue(st.peakBytes() <= S + S / 2, "peak " + st.peakBytes() + " bytes above the budget " + (S + S / 2));
            assertTrue(st.waits() > 0, "no writer ever waited: the budget was not exercised");
        } finally {
            small.close();
        }
    }

    /** The names a listing of {@code path} through {@code v} shows, without "." and "..". */
    static List<String> names(GranaryVfs v, String path) {
        return v.readdir(ROOT, path).stream().map(GranaryVfs.Entry::name).filter(n -> !n.equals(".") && !n.equals("..")).toList();
    }

    long readdirCalls() {
        return cluster.mdsCalls.computeIfAbsent(dev.granary.mds.proto.MdsRequest.OpCase.READDIR, k -> new java.util.concurrent.atomic.AtomicLong()).get();
    }

    /**
     * A listing of a directory of several pages that no one changed since this client last
     * listed it costs one MDS read of one entry (which brings the directory's ctime) instead of
     * every page, and is the same; every change of the directory's entries by another client
     * (create, unlink, rename in and out, mkdir, hard link) shows at the next listing, as does
     * this client's own; a complete listing statahead fetched (with attributes) serves a listing
     * too. Before: 8 pages of 7 entries at every listing.
     */
    @Test
    void listingAnUnchangedLargeDirectoryAgainCostsOneSmallRead() throws Exception {
        ClientConfig paged = ClientConfig.defaults().withReaddirPageSize(7);
        GranaryVfs a = new GranaryVfs(cluster.mds, cluster.blockIo, paged);
        GranaryVfs b = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults());
        GranaryVfs c = new GranaryVfs(cluster.mds, cluster.blockIo, paged);
        try {
            List<String> want = new ArrayList<>();
            for (int i = 0; i < 50; i++) {
                b.mknod(ROOT, dir + "/f" + (char) ('A' + i / 10) + (i % 10), GranaryVfs.S_IFREG | 0644, 0);
                want.add("f" + (char) ('A' + i / 10) + (i % 10));
            }
            assertEquals(want, names(a, dir));
            long calls = readdirCalls();
            assertEquals(want, names(a, dir), "the same listing");
            assertEquals(1, readdirCalls() - calls, "one MDS read, not 8 pages");
            assertEquals(1, a.listingHits());

            // every kind of change by another client shows at the next listing
            b.mknod(ROOT, dir + "/fB5x", GranaryVfs.S_IFREG | 0644, 0);
            want.add(16, "fB5x");
            assertEquals(want, names(a, dir), "a create elsewhere");
            b.unlink(ROOT, dir + "/fA3");
            want.remove("fA3");
            assertEquals(want, names(a, dir), "an unlink elsewhere");
            b.rename(ROOT, dir + "/fC0", dir + "/zz", 0);
            want.remove("fC0");
            want.add("zz");
            assertEquals(want, names(a, dir), "a rename within the directory elsewhere");
            b.mkdir(ROOT, dir + "-other", 0755);
            b.mknod(ROOT, dir + "-other/in", GranaryVfs.S_IFREG | 0644, 0);
            b.rename(ROOT, dir + "-other/in", dir + "/fA0a", 0);
            want.add(1, "fA0a");
            assertEquals(want, names(a, dir), "a rename into the directory elsewhere");
            b.rename(ROOT, dir + "/fA0a", dir + "-other/back", 0);
            want.remove("fA0a");
            assertEquals(want, names(a, dir), "a rename out of the directory elsewhere");
            b.mkdir(ROOT, dir + "/fD9d", 0755);
            b.link(ROOT, dir + "/fD8", dir + "/fD8l");
            want.addAll(want.indexOf("fD8") + 1, List.of("fD8l"));
            want.addAll(want.indexOf("fD9") + 1, List.of("fD9d"));
            assertEquals(want, names(a, dir), "a mkdir and a hard link elsewhere");
            long hits = a.listingHits();
            assertEquals(want, names(a, dir));
            assertEquals(hits + 1, a.listingHits(), "unchanged again: from the kept listing");
            // this client's own change
            a.mknod(ROOT, dir + "/fE9z", GranaryVfs.S_IFREG | 0644, 0);
            want.add(want.indexOf("fE9") + 1, "fE9z");
            assertEquals(want, names(a, dir), "this client's create");
            a.unlink(ROOT, dir + "/fE9z");
            want.remove("fE9z");
            assertEquals(want, names(a, dir), "this client's unlink");

            // statahead's complete fetch serves the first listing of another client
            for (String n : want.subList(0, 12)) {
                c.getattr(ROOT, dir + "/" + n);
            }
            long deadline = System.nanoTime() + 5_000_000_000L;
            while (c.statAheadFetchedEntries() < want.size() && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            Thread.sleep(100);
            long before = readdirCalls();
            assertEquals(want, names(c, dir));
            assertEquals(1, c.listingHits(), "the statahead fetch's listing");
            assertEquals(1, readdirCalls() - before);
        } finally {
            a.close();
            b.close();
            c.close();
        }
    }

    /** A listing's pages grow four times per page up to 8,192 entries: 5,000 names in 2 round trips, not 5. */
    @Test
    void listingPagesGrowForLargeDirectories() {
        assertEquals(4096, GranaryVfs.grownPage(1024, 1));
        assertEquals(8192, GranaryVfs.grownPage(1024, 2));
        assertEquals(8192, GranaryVfs.grownPage(1024, 40));
        assertEquals(28, GranaryVfs.grownPage(7, 1));
        assertEquals(20_000, GranaryVfs.grownPage(20_000, 3), "a configured page larger than the cap stays");
    }

    @Test
    void readdirPagesThroughMoreEntriesThanAPage() {
        GranaryVfs paged = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults().withReaddirPageSize(7));
        try {
            Set<String> want = new HashSet<>();
            for (int i = 0; i < 50; i++) {
                String name = "f" + i;
                paged.mknod(ROOT, dir + "/" + name, GranaryVfs.S_IFREG | 0644, 0);
                want.add(name);
            }
            paged.mkdir(ROOT, dir + "/sub", 0755);
            want.add("sub");
            List<GranaryVfs.Entry> entries = paged.readdir(ROOT, dir);
            assertEquals(".", entries.get(0).name());
            assertEquals("..", entries.get(1).name());
            assertEquals(MdsClient.ROOT_INO, entries.get(1).ino());
            Set<String> got = new HashSet<>();
            List<String> order = new ArrayList<>();
            for (GranaryVfs.Entry e : entries.subList(2, entries.size())) {
                got.add(e.name());
                order.add(e.name());
                assertEquals(e.name().equals("sub") ? GranaryVfs.S_IFDIR : GranaryVfs.S_IFREG, e.mode());
            }
            assertEquals(want, got);
            assertEquals(want.size(), order.size(), "no duplicates across pages");
            List<String> sorted = new ArrayList<>(order);
            java.util.Collections.sort(sorted);
            assertEquals(sorted, order, "name order");
        } finally {
            paged.close();
        }
    }

    @Test
    void errorsCarryTheRightErrno() {
        writeFile(vfs, dir + "/file", new byte[] {1}, 1);
        vfs.mkdir(ROOT, dir + "/d", 0755);
        vfs.mknod(ROOT, dir + "/d/x", 0644, 0);
        assertEquals(Status.ENOENT.getNumber(), errno(() -> vfs.getattr(ROOT, dir + "/missing")));
        assertEquals(Status.ENOENT.getNumber(), errno(() -> vfs.open(ROOT, dir + "/missing", O_RDONLY)));
        assertEquals(Status.EEXIST.getNumber(), errno(() -> vfs.mkdir(ROOT, dir + "/d", 0755)));
        assertEquals(Status.ENOTDIR.getNumber(), errno(() -> vfs.getattr(ROOT, dir + "/file/x")));
        assertEquals(Status.ENOTDIR.getNumber(), errno(() -> vfs.mkdir(ROOT, dir + "/file/x", 0755)));
        assertEquals(Status.ENOTDIR.getNumber(), errno(() -> vfs.opendir(ROOT, dir + "/file")));
        assertEquals(Status.EISDIR.getNumber(), errno(() -> vfs.open(ROOT, dir + "/d", O_RDONLY)));
        assertEquals(Status.EISDIR.getNumber(), errno(() -> vfs.unlink(ROOT, dir + "/d")));
        assertEquals(Status.EISDIR.getNumber(), errno(() -> vfs.truncate(ROOT, dir + "/d", 0)));
        assertEquals(Status.ENOTEMPTY.getNumber(), errno(() -> vfs.rmdir(ROOT, dir + "/d")));
        assertEquals(Status.ENAMETOOLONG.getNumber(), errno(() -> vfs.mkdir(ROOT, dir + "/" + "n".repeat(256), 0755)));
        assertEquals(Status.EPERM.getNumber(), errno(() -> vfs.mknod(ROOT, dir + "/fifo", 0010644, 0)));
        assertEquals(Status.EINVAL.getNumber(), errno(() -> vfs.readlink(ROOT, dir + "/file")));
        long ro = vfs.open(ROOT, dir + "/file", O_RDONLY);
        assertEquals(Status.EBADF.getNumber(), errno(() -> vfs.write(ROOT, ro, 0, new byte[1], 1)));
        assertEquals(Status.EBADF.getNumber(), errno(() -> vfs.ftruncate(ROOT, ro, 0)));
        vfs.release(ROOT, ro);
        assertEquals(Status.EBADF.getNumber(), errno(() -> vfs.read(ROOT, ro, 0, 1)));
        assertEquals(Status.EBADF.getNumber(), errno(() -> vfs.release(ROOT, ro)));
        // permissions: an ordinary user cannot open a root-owned 0600 file, nor create in a 0755 dir
        Caller user = GranaryVfs.caller(1000, 1000);
        vfs.chmod(ROOT, dir + "/file", 0600);
        assertEquals(Status.EACCES.getNumber(), errno(() -> vfs.open(user, dir + "/file", O_RDONLY)));
        assertEquals(Status.EACCES.getNumber(), errno(() -> vfs.access(user, dir + "/file", GranaryVfs.R_OK)));
        vfs.access(user, dir + "/file", GranaryVfs.F_OK);
        assertEquals(Status.EACCES.getNumber(), errno(() -> vfs.mkdir(user, dir + "/d/u", 0755)));
        vfs.unlink(ROOT, dir + "/d/x");
        vfs.rmdir(ROOT, dir + "/d");
        assertEquals(Status.ENOENT.getNumber(), errno(() -> vfs.opendir(ROOT, dir + "/d")));
    }

    /** The open of execve(2) (FMODE_EXEC in the flags) needs x for the caller's class, not r. */
    @Test
    void execOpenNeedsExecutePermissionOfTheCallersClassNotRead() {
        Caller user = GranaryVfs.caller(1000, 1000);
        int exec = O_RDONLY | GranaryVfs.FMODE_EXEC;
        writeFile(vfs, dir + "/x744", new byte[] {1}, 1);
        vfs.chmod(ROOT, dir + "/x744", 0744);
        assertEquals(Status.EACCES.getNumber(), errno(() -> vfs.open(user, dir + "/x744", exec)));
        vfs.release(user, vfs.open(user, dir + "/x744", O_RDONLY));
        writeFile(vfs, dir + "/x711", new byte[] {1}, 1);
        vfs.chmod(ROOT, dir + "/x711", 0711);
        assertEquals(Status.EACCES.getNumber(), errno(() -> vfs.open(user, dir + "/x711", O_RDONLY)));
        long fh = vfs.open(user, dir + "/x711", exec);
        assertArrayEquals(new byte[] {1}, vfs.read(user, fh, 0, 1), "the kernel reads an exec-opened file");
        vfs.release(user, fh);
        vfs.chmod(ROOT, dir + "/x711", 0644);
        assertEquals(Status.EACCES.getNumber(), errno(() -> vfs.open(ROOT, dir + "/x711", exec)), "root needs some x bit");
        vfs.chmod(ROOT, dir + "/x711", 0100);
        vfs.release(ROOT, vfs.open(ROOT, dir + "/x711", exec));
    }

    @Test
    void namespaceOperations() {
        writeFile(vfs, dir + "/a", "data".getBytes(StandardCharsets.UTF_8), 10);
        // rename (and the dentry cache follows it)
        vfs.getattr(ROOT, dir + "/a");
        vfs.rename(ROOT, dir + "/a", dir + "/b", 0);
        assertEquals(Status.ENOENT.getNumber(), errno(() -> vfs.getattr(ROOT, dir + "/a")));
        assertEquals("data", new String(readAll(vfs, dir + "/b", 10), StandardCharsets.UTF_8));
        writeFile(vfs, dir + "/c", new byte[] {1}, 1);
        assertEquals(Status.EEXIST.getNumber(), errno(() -> vfs.rename(ROOT, dir + "/c", dir + "/b", MdsClient.RENAME_NOREPLACE)));
        // symlink / readlink
        Attr l = vfs.symlink(ROOT, "b", dir + "/link");
        assertEquals(GranaryVfs.S_IFLNK, l.getMode() & GranaryVfs.S_IFMT);
        assertEquals("b", vfs.readlink(ROOT, dir + "/link"));
        // hard link
        Attr h = vfs.link(ROOT, dir + "/b", dir + "/hard");
        assertEquals(2, h.getNlink());
        assertEquals(2, vfs.getattr(ROOT, dir + "/b").getNlink());
        vfs.unlink(ROOT, dir + "/hard");
        assertEquals(1, vfs.getattr(ROOT, dir + "/b").getNlink());
        // chmod / chown / utimens
        assertEquals(GranaryVfs.S_IFREG | 0640, vfs.chmod(ROOT, dir + "/b", 0640).getMode());
        Attr o = vfs.chown(ROOT, dir + "/b", 1234, -1);
        assertEquals(1234, o.getUid());
        assertEquals(0, o.getGid());
        Attr t = vfs.utimens(ROOT, dir + "/b", 1_000_000_123L, GranaryVfs.TIME_OMIT);
        assertEquals(1_000_000_123L, t.getAtimeNs());
        assertEquals(o.getMtimeNs(), t.getMtimeNs());
        Attr now = vfs.utimens(ROOT, dir + "/b", GranaryVfs.TIME_OMIT, GranaryVfs.TIME_NOW);
        assertTrue(now.getMtimeNs() > 1_600_000_000_000_000_000L);
        // xattrs
        vfs.setxattr(ROOT, dir + "/b", "user.k", new byte[] {7, 8}, 0);
        assertArrayEquals(new byte[] {7, 8}, vfs.getxattr(ROOT, dir + "/b", "user.k"));
        assertEquals(List.of("user.k"), vfs.listxattr(ROOT, dir + "/b"));
        vfs.removexattr(ROOT, dir + "/b", "user.k");
        assertEquals(Status.ENODATA.getNumber(), errno(() -> vfs.getxattr(ROOT, dir + "/b", "user.k")));
        // rmdir, unlink, statfs
        vfs.mkdir(ROOT, dir + "/e", 0700);
        vfs.rmdir(ROOT, dir + "/e");
        assertEquals(Status.ENOENT.getNumber(), errno(() -> vfs.getattr(ROOT, dir + "/e")));
        vfs.unlink(ROOT, dir + "/c");
        assertEquals(Status.ENOENT.getNumber(), errno(() -> vfs.open(ROOT, dir + "/c", O_RDONLY)));
        assertTrue(vfs.statfs(ROOT).getTotalBlocks() > 0);
    }

    @Test
    void blockIoFailureBecomesEio() {
        BlockIo failing = new BlockIo() {
            @Override
            public CompletableFuture<Void> write(int ost, String key, byte[] data) {
                return CompletableFuture.failedFuture(new IOException("injected: S3 unavailable"));
            }

            @Override
            public CompletableFuture<byte[]> read(int ost, String key, long offset, int length) {
                return CompletableFuture.failedFuture(new IOException("injected: S3 unavailable"));
            }

            @Override
            public CompletableFuture<Void> delete(int ost, List<String> keys) {
                return CompletableFuture.completedFuture(null);
            }

            @Override
            public void close() {
            }
        };
        writeFile(vfs, dir + "/ok", random(S + 1000, 13), 1000); // larger than a stripe: in blocks, not inline
        try (GranaryVfs broken = new GranaryVfs(cluster.mds, failing, ClientConfig.defaults().withInlineMax(0))) {
            long fh = broken.create(ROOT, dir + "/x", 0644, O_CREAT | O_WRONLY);
            broken.write(ROOT, fh, 0, new byte[10], 10);
            assertEquals(Status.EIO.getNumber(), errno(() -> broken.flush(ROOT, fh)));
            assertEquals(Status.EIO.getNumber(), errno(() -> broken.fsync(ROOT, fh, false)), "the failure sticks");
            assertEquals(Status.EIO.getNumber(), errno(() -> broken.release(ROOT, fh)));
            assertEquals(0, broken.getattr(ROOT, dir + "/x").getSize(), "nothing was committed");
            long r = broken.open(ROOT, dir + "/ok", O_RDONLY);
            assertEquals(Status.EIO.getNumber(), errno(() -> broken.read(ROOT, r, 0, 100)));
            broken.release(ROOT, r);
        }
    }

    @Test
    void manyConcurrentWritersOnDistinctFiles() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(4);
        AtomicInteger done = new AtomicInteger();
        try {
            List<Future<?>> fs = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                int id = i;
                fs.add(pool.submit(() -> {
                    byte[] data = random(2 * S + id * 1000, 100 + id);
                    writeFile(vfs, dir + "/w" + id, data, 4096);
                    assertArrayEquals(data, readAll(vfs, dir + "/w" + id, 4096));
                    done.incrementAndGet();
                }));
            }
            for (Future<?> f : fs) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
        assertEquals(4, done.get());
        assertEquals(0, vfs.openFileCount());
    }

    long puts() {
        return cluster.ost0.counters().puts.get() + cluster.ost1.counters().puts.get();
    }

    List<Extent> extentsOf(String path) {
        return cluster.mds.getFileMap(ROOT, vfs.lookup(ROOT, path).getIno()).extents();
    }

    /** Data on MDS: small files are written and read back without any S3 request. */
    @Test
    void smallFilesKeepTheirDataInlineAndCostNoS3Request() {
        long puts = puts(), gets = gets();
        List<byte[]> files = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            byte[] data = random(1 + i * 3000, 300 + i); // 1 byte .. 57 KiB, all within one 64 KiB stripe
            files.add(data);
            writeFile(vfs, dir + "/s" + i, data, 4096);
        }
        for (int i = 0; i < files.size(); i++) {
            assertArrayEquals(files.get(i), readAll(vfs, dir + "/s" + i, 4096));
            assertArrayEquals(files.get(i), readAll(vfs, dir + "/s" + i, 128 * 1024));
            List<Extent> ex = extentsOf(dir + "/s" + i);
            assertEquals(1, ex.size());
            assertEquals(files.get(i).length, ex.get(0).getInlineData().size());
            assertEquals("", ex.get(0).getBlockKey());
        }
        assertEquals(0, puts() - puts, "no S3 PUT for inline files");
        assertEquals(0, gets() - gets, "no S3 GET for inline files");
        try (GranaryVfs other = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults())) {
            assertArrayEquals(files.get(7), readAll(other, dir + "/s7", 1000), "another client sees it after close");
        }
    }

    /** Overwrite inside, truncate down and up, then growth past the inline limit into blocks. */
    @Test
    void inlineFileOverwriteTruncateAndGrowthIntoBlocks() {
        byte[] data = random(20_000, 41);
        writeFile(vfs, dir + "/f", data, 20_000);
        byte[] patch = random(100, 42);
        long fh = vfs.open(ROOT, dir + "/f", O_RDWR);
        vfs.write(ROOT, fh, 5000, patch, 100);
        System.arraycopy(patch, 0, data, 5000, 100);
        assertArrayEquals(data, vfs.read(ROOT, fh, 0, 30_000), "read your own write over inline bytes");
        vfs.release(ROOT, fh);
        assertArrayEquals(data, readAll(vfs, dir + "/f", 4096));
        assertEquals(20_000, extentsOf(dir + "/f").get(0).getInlineData().size(), "still inline");

        vfs.truncate(ROOT, dir + "/f", 10_000);
        vfs.truncate(ROOT, dir + "/f", 15_000);
        byte[] want = Arrays.copyOf(Arrays.copyOf(data, 10_000), 15_000); // zeros after the cut
        assertArrayEquals(want, readAll(vfs, dir + "/f", 4096));

        long puts = puts();
        byte[] tail = random(3 * S, 43);
        fh = vfs.open(ROOT, dir + "/f", O_WRONLY | O_APPEND);
        vfs.write(ROOT, fh, 0, tail, tail.length);
        vfs.release(ROOT, fh);
        byte[] grown = Arrays.copyOf(want, want.length + tail.length);
        System.arraycopy(tail, 0, grown, want.length, tail.length);
        assertArrayEquals(grown, readAll(vfs, dir + "/f", 4096));
        List<Extent> ex = extentsOf(dir + "/f");
        assertEquals(4, ex.size());
        assertTrue(ex.stream().allMatch(e -> e.getInlineData().isEmpty() && !e.getBlockKey().isEmpty()), "all stripes in blocks now");
        assertEquals(4, puts() - puts);
    }

    /** inline_max 0: every file goes to S3 blocks, as before data on MDS existed. */
    @Test
    void inlineDisabledWritesBlocks() {
        try (GranaryVfs noInline = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults().withInlineMax(0))) {
            long puts = puts();
            byte[] data = random(5000, 44);
            writeFile(noInline, dir + "/b", data, 5000);
            assertEquals(1, puts() - puts);
            assertFalse(extentsOf(dir + "/b").get(0).getBlockKey().isEmpty());
            assertArrayEquals(data, readAll(vfs, dir + "/b", 4096));
        }
    }

    long mdsCalls(dev.granary.mds.proto.MdsRequest.OpCase op) {
        return cluster.mdsCalls.computeIfAbsent(op, k -> new java.util.concurrent.atomic.AtomicLong()).get();
    }

    /**
     * The kernel sends LOOKUP then OPEN for one open(2): the lookup's map serves the open (one MDS
     * read per small-file open), but only within the window, once, and never after an own change.
     */
    @Test
    void openRightAfterALookupUsesItsMapOnceAndOnlyWhileFresh() throws Exception {
        var getExtents = dev.granary.mds.proto.MdsRequest.OpCase.GET_EXTENTS;
        byte[] data = random(3000, 50);
        writeFile(vfs, dir + "/f", data, 3000);
        try (GranaryVfs reader = new GranaryVfs(cluster.mds, cluster.blockIo,
                ClientConfig.defaults().withOpenAfterLookup(Duration.ofSeconds(1)))) {
            var lookup = dev.granary.mds.proto.MdsRequest.OpCase.LOOKUP;
            reader.getattr(ROOT, dir + "/f"); // the kernel's LOOKUP
            long before = mdsCalls(getExtents) + mdsCalls(lookup);
            assertArrayEquals(data, readAll(reader, dir + "/f", 4096)); // its OPEN
            assertEquals(0, mdsCalls(getExtents) + mdsCalls(lookup) - before, "the open used the lookup's map");
            assertArrayEquals(data, readAll(reader, dir + "/f", 4096));
            assertEquals(1, mdsCalls(getExtents) + mdsCalls(lookup) - before, "a map serves one open only");

            // own change after the lookup: the map fetched before it must not be used
            reader.invalidateCaches();
            reader.getattr(ROOT, dir + "/f");
            byte[] patch = random(10, 51);
            long fh = reader.open(ROOT, dir + "/f", O_RDWR); // consumes the map
            reader.invalidateCaches();
            reader.getattr(ROOT, dir + "/f"); // a new lookup's map...
            reader.write(ROOT, fh, 0, patch, 10);
            reader.release(ROOT, fh); // ...made stale by this commit
            System.arraycopy(patch, 0, data, 0, 10);
            assertArrayEquals(data, readAll(reader, dir + "/f", 4096));
        }
        try (GranaryVfs reader = new GranaryVfs(cluster.mds, cluster.blockIo,
                ClientConfig.defaults().withOpenAfterLookup(Duration.ofMillis(2)))) {
            reader.getattr(ROOT, dir + "/f");
            byte[] newer = random(4000, 52);
            writeFile(vfs, dir + "/f", newer, 4000); // another client's close after the lookup
            Thread.sleep(20); // past the window: the open must read the MDS again (close-to-open)
            assertArrayEquals(newer, readAll(reader, dir + "/f", 4096));
        }
    }

    /**
     * libfuse unlocks the owner's POSIX locks at every flush (close). Regression: each close then
     * cost a Raft write (about 7 ms) even when no lock had ever been taken.
     */
    @Test
    void closeWithoutLocksCostsNoLockCall() {
        var lockOp = dev.granary.mds.proto.MdsRequest.OpCase.LOCK;
        writeFile(vfs, dir + "/nl", random(10, 70), 10);
        long before = mdsCalls(lockOp);
        long fh = vfs.open(ROOT, dir + "/nl", O_RDONLY);
        vfs.setlk(ROOT, fh, 42, dev.granary.mds.proto.LockType.UNLOCK, 0, 0, 1, false); // what libfuse sends at flush
        vfs.flock(ROOT, fh, 43, dev.granary.mds.proto.LockType.UNLOCK, false);
        assertEquals(0, mdsCalls(lockOp) - before, "nothing held: no MDS call");
        vfs.setlk(ROOT, fh, 42, dev.granary.mds.proto.LockType.READ, 0, 10, 1, false);
        vfs.setlk(ROOT, fh, 42, dev.granary.mds.proto.LockType.UNLOCK, 0, 0, 1, false);
        vfs.setlk(ROOT, fh, 42, dev.granary.mds.proto.LockType.UNLOCK, 0, 0, 1, false);
        assertEquals(2, mdsCalls(lockOp) - before, "a take and its release; the second release is local");
        vfs.release(ROOT, fh);
    }

    /**
     * A lock taken after the lease ran out while the client held none loses nothing, and is not
     * reported as a loss. Regression: every such first lock logged "locks it held were
     * released", which a helper took for a holder losing its lock.
     */
    @Test
    void aLeaseThatRanOutWhileNothingWasHeldIsNoLoss() throws Exception {
        try (GranaryVfs c = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults().withLockLease(java.time.Duration.ofSeconds(1)))) {
            writeFile(c, dir + "/lease", random(10, 71), 10);
            long fh = c.open(ROOT, dir + "/lease", O_RDWR);
            c.setlk(ROOT, fh, 7, dev.granary.mds.proto.LockType.WRITE, 0, 0, 1, false);
            c.setlk(ROOT, fh, 7, dev.granary.mds.proto.LockType.UNLOCK, 0, 0, 1, false);
            Thread.sleep(1500); // the 1 s lease runs out, nothing held
            c.setlk(ROOT, fh, 7, dev.granary.mds.proto.LockType.WRITE, 0, 0, 1, false);
            assertEquals(0, c.lockLeaseLosses());
            c.setlk(ROOT, fh, 7, dev.granary.mds.proto.LockType.UNLOCK, 0, 0, 1, false);
            c.release(ROOT, fh);
        }
    }

    /**
     * Making an entry keeps the directory's cached attributes, updated as the MDS updated them.
     * Regression: they were dropped, so the next call under the directory (the kernel's
     * security.capability getxattr before the first write of a new file) cost an MDS getattr.
     */
    @Test
    void makingAnEntryUpdatesTheCachedDirectoryInsteadOfDroppingIt() {
        var getattr = dev.granary.mds.proto.MdsRequest.OpCase.GETATTR;
        var lookup = dev.granary.mds.proto.MdsRequest.OpCase.LOOKUP;
        vfs.getattr(ROOT, dir); // cached
        long before = mdsCalls(getattr) + mdsCalls(lookup);
        long fh = vfs.create(ROOT, dir + "/n", 0644, O_CREAT | O_WRONLY | O_TRUNC);
        assertEquals(Status.ENODATA.getNumber(), errno(() -> vfs.getxattr(ROOT, dir + "/n", "security.capability")));
        vfs.write(ROOT, fh, 0, new byte[] {1}, 1);
        vfs.release(ROOT, fh);
        vfs.mkdir(ROOT, dir + "/sub", 0755);
        vfs.symlink(ROOT, "n", dir + "/ln");
        vfs.link(ROOT, dir + "/n", dir + "/hard");
        assertEquals(0, mdsCalls(getattr) + mdsCalls(lookup) - before, "no getattr or lookup of the directory again");
        Attr cached = vfs.getattr(ROOT, dir);
        Attr truth = cluster.mds.getattr(ROOT, cached.getIno());
        assertEquals(truth.getMtimeNs(), cached.getMtimeNs());
        assertEquals(truth.getCtimeNs(), cached.getCtimeNs());
        assertEquals(truth.getNlink(), cached.getNlink());
        assertEquals(3, cached.getNlink(), "2 + one subdirectory");
    }

    /**
     * The cached "no such xattr" answers must not skip the permission check. Regression: another
     * uid's getxattr on a 0600 file this client had just created got ENODATA instead of EACCES.
     */
    @Test
    void cachedXattrAnswersKeepThePermissionCheck() {
        Caller alice = GranaryVfs.caller(1000, 1000);
        vfs.chmod(ROOT, dir, 0777);
        long fh = vfs.create(ROOT, dir + "/secret", 0600, O_CREAT | O_WRONLY);
        vfs.release(ROOT, fh);
        assertEquals(Status.ENODATA.getNumber(), errno(() -> vfs.getxattr(ROOT, dir + "/secret", "user.x")));
        assertEquals(Status.EACCES.getNumber(), errno(() -> vfs.getxattr(alice, dir + "/secret", "user.x")));
        assertEquals(Status.EACCES.getNumber(), errno(() -> vfs.getxattr(alice, dir + "/secret", "user.x")), "twice");
    }
}
