package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.mds.proto.Extent;
import dev.granary.oss.server.OssServer;
import dev.granary.tools.cluster.Nodes;
import dev.granary.tools.prereq.Prerequisites;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Layouts through a real mount with the {@code granary setstripe}/{@code getstripe} CLI and the
 * {@code granary.layout} xattr, and data on MDS (small files inline) counted in S3 requests.
 */
class LayoutAndInlineTest {
    @TempDir
    static Path tmp;
    static MiniCluster cluster;
    static Path mnt;

    @BeforeAll
    static void start() throws Exception {
        MiniCluster.assumeFuseDevice();
        Prerequisites.ensureFuse();
        cluster = MiniCluster.start(tmp.resolve("cluster"));
        mnt = tmp.resolve("mnt");
        cluster.mount(mnt);
    }

    @AfterAll
    static void stop() {
        if (cluster != null) cluster.close();
    }

    /** Runs the CLI in a separate JVM; returns (exit status, stdout lines, granary: error lines). */
    record Cli(int rc, List<String> out, List<String> errors) {}

    static Cli granary(String... args) throws Exception {
        try (GranaryProcess p = GranaryProcess.start(tmp, Map.of(), args)) {
            int rc = p.waitFor(60);
            List<String> out;
            synchronized (p.out) {
                out = new ArrayList<>(p.out);
            }
            return new Cli(rc, out, p.errorLines());
        }
    }

    static String xattr(Path p) throws Exception {
        Shell.Result r = Shell.run(tmp, Map.of(),
                "python3 -c \"import os,sys; print(os.getxattr(sys.argv[1], 'granary.layout').decode())\" '" + p + "'");
        return r.out().lines().filter(l -> l.startsWith("stripe_count=")).findFirst().orElse(r.out() + r.err());
    }

    @Test
    void setstripeOnADirectoryIsInheritedAndShownByGetstripeAndTheXattr() throws Exception {
        Path d = Files.createDirectory(mnt.resolve("one-ost"));
        Cli set = granary("setstripe", "-c", "1", "-S", "1M", d.toString());
        assertEquals(0, set.rc(), set.toString());
        assertEquals("stripe_count=1 stripe_size=1048576 stripe_offset=-1", xattr(d));
        Cli dirShow = granary("getstripe", d.toString());
        assertEquals(List.of(d.toString(), "stripe_count:  1 stripe_size:   1048576 stripe_offset: -1"), dirShow.out());

        Path f = d.resolve("f.bin");
        byte[] data = new byte[3 << 20];
        new Random(5).nextBytes(data);
        Files.write(f, data);
        Cli fileShow = granary("getstripe", f.toString());
        assertEquals(0, fileShow.rc());
        assertEquals(f.toString(), fileShow.out().get(0));
        assertEquals("lmm_stripe_count:  1", fileShow.out().get(1));
        assertEquals("lmm_stripe_size:   1048576", fileShow.out().get(2));
        assertEquals("lmm_pattern:       raid0", fileShow.out().get(3));
        assertFalse(xattr(f).contains("dom_size"), xattr(f));

        // A small file's data is on the MDS: getstripe says so (Lustre's DoM pattern "mdt").
        // Regression: it showed only the OST stripes, as if the data were in blocks.
        Path small = d.resolve("small.bin");
        Files.write(small, new byte[1000]);
        assertTrue(xattr(small).endsWith(" dom_size=1000"), xattr(small));
        Cli smallShow = granary("getstripe", small.toString());
        assertEquals("lmm_pattern:       mdt", smallShow.out().get(3), smallShow.toString());
        assertTrue(smallShow.out().get(4).startsWith("lmm_dom_size:      1000 "), smallShow.toString());
        // Its first bytes on the MDS and more data on an OST past them: striped, not "mdt".
        Path mixed = d.resolve("mixed.bin");
        Files.write(mixed, "abc\n".getBytes());
        try (java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(mixed, java.nio.file.StandardOpenOption.WRITE)) {
            ch.write(java.nio.ByteBuffer.wrap(new byte[] {1, 2, 3}), 5 << 20);
        }
        Cli mixedShow = granary("getstripe", mixed.toString());
        assertEquals("lmm_pattern:       raid0", mixedShow.out().get(3), mixedShow.toString());
        assertTrue(mixedShow.out().get(4).startsWith("lmm_dom_size:      4 "), mixedShow.toString());
        List<Extent> ex = cluster.admin().getFileMap(Nodes.ROOT, (Long) Files.getAttribute(f, "unix:ino")).extents();
        assertEquals(3, ex.size(), "3 MiB in 1 MiB stripes");
        assertEquals(1, ex.stream().map(Extent::getOst).distinct().count(), "all on one OST");
        assertArrayEquals(data, Files.readAllBytes(f));

        Shell.Result list = Shell.run(tmp, Map.of(), "python3 -c \"import os,sys; print(os.listxattr(sys.argv[1]))\" '" + d + "'");
        assertFalse(list.out().contains("granary.layout"), "the layout xattr is not listed (cp -a must not copy it)");
    }

    @Test
    void stripeIndexFixesTheFirstOstAndAMissingPathIsCreated() throws Exception {
        Path d = Files.createDirectory(mnt.resolve("from-ost1"));
        assertEquals(0, granary("setstripe", "-c", "-1", "-i", "1", d.toString()).rc());
        Path g = d.resolve("g");
        Files.write(g, new byte[10]);
        assertTrue(xattr(g).endsWith("stripe_offset=1 osts=1,0 dom_size=10"), xattr(g));
        // A later setstripe of one field keeps the others, the first OST included (regression:
        // -S alone reset stripe_offset to -1, and -c alone too).
        assertEquals(0, granary("setstripe", "-c", "2", "-i", "1", d.toString()).rc());
        assertEquals(0, granary("setstripe", "-S", "2M", d.toString()).rc());
        assertEquals("stripe_count=2 stripe_size=2097152 stripe_offset=1 osts=1,0", xattr(d));
        assertEquals(0, granary("setstripe", "-c", "1", d.toString()).rc());
        assertEquals("stripe_count=1 stripe_size=2097152 stripe_offset=1 osts=1", xattr(d));
        assertEquals(0, granary("setstripe", "-i", "-1", d.toString()).rc());
        assertEquals("stripe_count=1 stripe_size=2097152 stripe_offset=-1", xattr(d));

        Path fresh = mnt.resolve("made-by-setstripe");
        Cli made = granary("setstripe", "-c", "2", "-S", "64k", fresh.toString());
        assertEquals(0, made.rc(), made.toString());
        assertEquals(0, Files.size(fresh));
        assertTrue(xattr(fresh).startsWith("stripe_count=2 stripe_size=65536 "), xattr(fresh));
        byte[] data = new byte[5 * 65536 + 17];
        new Random(6).nextBytes(data);
        Files.write(fresh, data);
        assertArrayEquals(data, Files.readAllBytes(fresh));
        List<Extent> ex = cluster.admin().getFileMap(Nodes.ROOT, (Long) Files.getAttribute(fresh, "unix:ino")).extents();
        assertEquals(6, ex.size());
        assertEquals(2, ex.stream().map(Extent::getOst).distinct().count(), "striped over both OSTs");
    }

    @Test
    void badLayoutsGetOneLineErrorsAndChangeNothing() throws Exception {
        Path d = Files.createDirectory(mnt.resolve("bad"));
        String before = xattr(d);
        Path full = d.resolve("has-data");
        Files.write(full, new byte[100]);
        String fileBefore = xattr(full);
        record Case(String[] args, String message) {}
        List<Case> cases = List.of(
                new Case(new String[] {"setstripe", "-S", "1000", d.toString()}, "multiple of 64k"),
                // larger stripes were accepted, and then their files could not be written (128m) or opened (4g)
                new Case(new String[] {"setstripe", "-S", "128m", d.toString()}, "up to 64m"),
                new Case(new String[] {"setstripe", "-S", "4g", d.toString()}, "up to 64m"),
                new Case(new String[] {"setstripe", "-S", "99999999999999999999", d.toString()}, "size too large"),
                new Case(new String[] {"setstripe", "-c", "0", d.toString()}, "stripe count must be -1"),
                new Case(new String[] {"setstripe", "-c", "5", d.toString()}, "invalid layout"),
                new Case(new String[] {"setstripe", "-i", "7", d.toString()}, "invalid layout"),
                new Case(new String[] {"setstripe", d.toString()}, "nothing to set"),
                new Case(new String[] {"setstripe", "-c", "1", full.toString()}, "already has data"),
                new Case(new String[] {"getstripe", tmp.toString()}, "not in a Granary mount"),
                new Case(new String[] {"getstripe", mnt.resolve("nope").toString()}, "no such file"));
        for (Case c : cases) {
            Cli r = granary(c.args());
            assertEquals(1, r.rc(), String.join(" ", c.args()) + " -> " + r);
            assertEquals(1, r.errors().size(), r.toString());
            assertTrue(r.errors().get(0).contains(c.message()), r.errors().get(0));
        }
        // Values written to the xattr itself: -2 (the parser's old "not given") was accepted with
        // no change and no error.
        Path empty = d.resolve("empty");
        Files.write(empty, new byte[0]);
        String emptyBefore = xattr(empty);
        for (String v : List.of("stripe_count=-2", "stripe_offset=-2", "stripe_size=-2", "stripe_size=0", "stripe_count=0")) {
            for (Path p : List.of(d, empty)) {
                Shell.Result r = Shell.run(tmp, Map.of(), "python3 -c \"import os,sys; os.setxattr(sys.argv[1], 'granary.layout', sys.argv[2].encode())\" '"
                        + p + "' '" + v + "'");
                assertNotEquals(0, r.rc(), v + " on " + p + " was accepted");
                assertTrue(r.err().contains("Invalid argument"), v + ": " + r.err());
            }
        }
        assertEquals(before, xattr(d));
        assertEquals(fileBefore, xattr(full));
        assertEquals(emptyBefore, xattr(empty));
    }

    static long s3Puts() {
        return cluster.cluster().s3Puts(); // the OSSes' and the clients' own (client.direct_writes)
    }

    static long s3Gets() {
        return cluster.cluster().ossServers().stream().mapToLong(OssServer::s3Gets).sum();
    }

    /** Data on MDS: 200 files of 100 KiB written and read back through FUSE with no S3 request. */
    @Test
    void smallFilesCostNoS3RequestsLargeOnesStillGoToS3() throws Exception {
        Path d = Files.createDirectory(mnt.resolve("samples"));
        long puts = s3Puts();
        long gets = s3Gets();
        Random rnd = new Random(8);
        List<byte[]> files = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            byte[] b = new byte[100 * 1024 + i];
            rnd.nextBytes(b);
            files.add(b);
            Files.write(d.resolve("s" + i), b);
        }
        Shell.ok(tmp, "sync; echo 3 > /proc/sys/vm/drop_caches");
        for (int i = 0; i < 200; i++) {
            assertArrayEquals(files.get(i), Files.readAllBytes(d.resolve("s" + i)));
        }
        long putsPerFile = s3Puts() - puts;
        long getsPerFile = s3Gets() - gets;
        System.out.printf("data on MDS: 200 files of 100 KiB: %d S3 PUTs, %d S3 GETs%n", putsPerFile, getsPerFile);
        assertEquals(0, putsPerFile);
        assertEquals(0, getsPerFile);

        byte[] big = new byte[(256 << 10) + 1]; // above inline_max: a block
        rnd.nextBytes(big);
        Files.write(d.resolve("big"), big);
        assertEquals(1, s3Puts() - puts);
        assertArrayEquals(big, Files.readAllBytes(d.resolve("big")));
    }

    /**
     * Data-ahead through real mounts and Raft: a second mount reads 300 small files another mount
     * wrote, with 8 threads as a DataLoader's workers do, after the page cache is dropped; the
     * maps its opens use came in bulk (counted), every file reads back whole, and a file the
     * writer rewrote (same size) after the reader had fetched it ahead reads with its new bytes.
     */
    @Test
    void smallFilesReadByAnotherMountComeAheadAndStayCurrent() throws Exception {
        Path d = Files.createDirectory(mnt.resolve("ahead"));
        int n = 300;
        Random rnd = new Random(12);
        List<byte[]> files = writeSmallFiles(d, n, rnd);
        Nodes.Client reader = cluster.mount(tmp.resolve("mnt-reader"));
        Path rd = tmp.resolve("mnt-reader").resolve("ahead");
        Shell.ok(tmp, "sync; echo 3 > /proc/sys/vm/drop_caches");
        // the first half, then (its maps held) a rewrite of a file of the second half, then the rest
        readAll(rd, files, 0, n / 2);
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (reader.vfs().dataAheadCounters()[0] < n - 10 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        byte[] again = new byte[files.get(250).length];
        rnd.nextBytes(again);
        Files.write(d.resolve("s0250"), again);
        files.set(250, again);
        readAll(rd, files, n / 2, n);
        long[] c = reader.vfs().dataAheadCounters();
        System.out.printf("data-ahead: %d small files read by another mount: %d fetched ahead, %d opens took them%n", n, c[0], c[1]);
        assertTrue(c[0] >= n / 2, "fetched ahead: " + c[0]);
        assertTrue(c[1] >= n / 2, "opens that took a fetched map: " + c[1]);
    }

    /**
     * Warm re-reads of small files through a mount whose page cache holds them: the opens take
     * no extent map (the MDS sends the attributes only, not the inline bytes) and the reads come
     * from the page cache; once the pages are dropped, a deferred handle reads its map at its
     * first read (right bytes) and the directory's opens take their maps again; a file the
     * writer rewrote (same size) opens with its new bytes.
     */
    @Test
    void warmReopensOfSmallFilesTakeNoMapAndStayCurrent() throws Exception {
        Path d = Files.createDirectory(mnt.resolve("warm"));
        int n = 300;
        Random rnd = new Random(13);
        List<byte[]> files = writeSmallFiles(d, n, rnd);
        Nodes.Client reader = cluster.mount(tmp.resolve("mnt-warm"));
        Path rd = tmp.resolve("mnt-warm").resolve("warm");
        readAll(rd, files, 0, n); // maps taken, pages filled
        long[] first = reader.vfs().deferredMapCounters();
        long aheadBefore = reader.vfs().dataAheadCounters()[0];
        readAll(rd, files, 0, n);
        long[] warm = reader.vfs().deferredMapCounters();
        long aheadWarm = reader.vfs().dataAheadCounters()[0];
        System.out.printf("warm re-read of %d small files: %d opens without a map (%d before), %d maps read later%n",
                n, warm[0] - first[0], first[0], warm[1] - first[1]);
        assertEquals(0, first[0], "the first reads took their maps");
        assertTrue(warm[0] - first[0] >= n / 2, "opens without a map: " + (warm[0] - first[0]));
        assertEquals(aheadBefore, aheadWarm, "data-ahead fetched none of the files held in the page cache");

        Thread.sleep(1500); // past attr_timeout: the next pass lists the directory again (statahead), as an epoch does
        Shell.ok(tmp, "sync; echo 1 > /proc/sys/vm/drop_caches");
        readAll(rd, files, 0, n);
        long[] dropped = reader.vfs().deferredMapCounters();
        System.out.printf("after drop_caches: %d opens without a map, %d maps read at a read%n", dropped[0] - warm[0], dropped[1] - warm[1]);
        assertTrue(dropped[1] - warm[1] >= 1, "a deferred handle found its pages gone and read its map");
        assertTrue(dropped[0] - warm[0] <= n / 4, "then the directory's opens took their maps: " + (dropped[0] - warm[0]));
        long aheadDropped = reader.vfs().dataAheadCounters()[0];
        System.out.printf("data-ahead fetched %d files once the pages were found gone%n", aheadDropped - aheadWarm);
        assertTrue(aheadDropped > aheadWarm, "data-ahead fetched the files it had skipped as held");

        byte[] again = new byte[files.get(42).length];
        rnd.nextBytes(again);
        Files.write(d.resolve("s0042"), again);
        files.set(42, again);
        readAll(rd, files, 0, n);
    }

    /** Writes {@code n} files {@code s0000...} of 20 KiB + i random bytes into {@code d}; returns their bytes. */
    private static List<byte[]> writeSmallFiles(Path d, int n, Random rnd) throws java.io.IOException {
        List<byte[]> files = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            byte[] b = new byte[20 * 1024 + i];
            rnd.nextBytes(b);
            files.add(b);
            Files.write(d.resolve(String.format("s%04d", i)), b);
        }
        return files;
    }

    /** Reads files [from, to) of {@code d} with 8 threads and checks each against {@code files}. */
    private static void readAll(Path d, List<byte[]> files, int from, int to) throws Exception {
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(8);
        try {
            List<java.util.concurrent.Future<?>> fs = new ArrayList<>();
            for (int i = from; i < to; i++) {
                int at = i;
                fs.add(pool.submit(() -> {
                    String name = String.format("s%04d", at);
                    assertArrayEquals(files.get(at), Files.readAllBytes(d.resolve(name)), name);
                    return null;
                }));
            }
            for (var f : fs) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
    }

    /**
     * Small-file packing (client.pack_max 1 MiB; off by default): files above inline_max (256 KiB) and at most pack_max that 8
     * threads close together share S3 blocks: fewer PUTs than files; each reads back whole after
     * the page cache is dropped, also through the mount without packing.
     */
    @Test
    void filesClosedTogetherShareS3Puts() throws Exception {
        cluster.cluster().config().client.packMax = "1MiB"; // opt-in: a second mount of this cluster with packing on
        Path packedMnt = tmp.resolve("mnt-packed");
        cluster.mount(packedMnt);
        Path d = Files.createDirectory(packedMnt.resolve("packed"));
        int threads = 8, perThread = 20, n = threads * perThread;
        List<byte[]> files = new ArrayList<>();
        Random rnd = new Random(9);
        for (int i = 0; i < n; i++) {
            byte[] b = new byte[300 * 1024 + i];
            rnd.nextBytes(b);
            files.add(b);
        }
        long puts = s3Puts();
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(threads);
        try {
            List<java.util.concurrent.Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int first = t * perThread;
                fs.add(pool.submit(() -> {
                    for (int i = first; i < first + perThread; i++) {
                        Files.write(d.resolve("p" + i), files.get(i));
                    }
                    return null;
                }));
            }
            for (var f : fs) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
        long written = s3Puts() - puts;
        System.out.printf("packing: %d files of 300 KiB written by %d threads: %d S3 PUTs%n", n, threads, written);
        assertTrue(written >= 1 && written < n * 3 / 4, written + " PUTs for " + n + " files");
        Shell.ok(tmp, "sync; echo 3 > /proc/sys/vm/drop_caches");
        for (int i = 0; i < n; i++) {
            assertArrayEquals(files.get(i), Files.readAllBytes(d.resolve("p" + i)), "p" + i);
            assertArrayEquals(files.get(i), Files.readAllBytes(mnt.resolve("packed").resolve("p" + i)), "p" + i + " through the other mount");
        }
    }
}
