package dev.granary.client.vfs;

import static dev.granary.client.vfs.GranaryVfs.O_CREAT;
import static dev.granary.client.vfs.GranaryVfs.O_EXCL;
import static dev.granary.client.vfs.GranaryVfs.O_RDONLY;
import static dev.granary.client.vfs.GranaryVfs.O_TRUNC;
import static dev.granary.client.vfs.GranaryVfs.O_WRONLY;
import static dev.granary.client.vfs.LocalCluster.ROOT;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.mds.FsException;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.Extent;
import dev.granary.mds.proto.MdsRequest.OpCase;
import dev.granary.mds.proto.Status;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * Deferred creates ({@link ClientConfig#deferredCreate()}) over the real MDS namespace and real S3:
 * what they cost, when the MDS gets them, and what other clients (the MDS read directly, as
 * another node's client would) see.
 */
class DeferredCreateTest extends LocalClusterTestBase {
    static final int S = 64 * 1024;
    static final int WTRUNC = O_CREAT | O_WRONLY | O_TRUNC;
    GranaryVfs vfs;
    String dir;
    long dirIno;

    @BeforeEach
    void setUp(TestInfo info) {
        // A long cache timeout: nothing goes out in the background while a test looks. No directory
        // leases: these tests look at the deferred creates of O_TRUNC opens without one (with one,
        // another client's lookup recalls the lease and so sees the file: DirLeaseVfsTest).
        vfs = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults().withCacheTimeout(Duration.ofSeconds(60))
                .withDirLease(false));
        dir = "/" + info.getTestMethod().orElseThrow().getName();
        cluster.stripedDir(vfs, dir, S);
        dirIno = vfs.getattr(ROOT, dir).getIno();
    }

    @AfterEach
    void tearDown() {
        vfs.close();
    }

    long calls(OpCase op) {
        return cluster.mdsCalls.computeIfAbsent(op, k -> new java.util.concurrent.atomic.AtomicLong()).get();
    }

    /** What another client finds under {@code name} in the test directory at the MDS, or null. */
    Attr atMds(String name) {
        try {
            return cluster.mds.lookup(ROOT, dirIno, name.getBytes(StandardCharsets.UTF_8));
        } catch (FsException e) {
            assertEquals(Status.ENOENT, e.status(), e.getMessage());
            return null;
        }
    }

    /** The file's bytes as another client reads them from the MDS (inline data). */
    byte[] inlineAtMds(Attr a) {
        List<Extent> ex = cluster.mds.getExtents(ROOT, a.getIno(), 0, 1);
        return ex.isEmpty() ? new byte[0] : ex.get(0).getInlineData().toByteArray();
    }

    long create(Caller c, String name, int flags) {
        return open(c, dir + "/" + name, flags);
    }

    /**
     * An open(2) with O_CREAT as the kernel sends it: a LOOKUP of the name (ENOENT for a new one),
     * then the CREATE.
     */
    long open(Caller c, String path, int flags) {
        try {
            vfs.getattr(c, path);
        } catch (FsException e) {
            assertEquals(Status.ENOENT, e.status(), e.getMessage());
        }
        return vfs.create(c, path, 0644, flags);
    }

    /**
     * open(O_CREAT|O_TRUNC), write, close of a small file costs one MDS write: the create goes
     * with the data's commit in one batch_write (one Raft entry). Before: a create and a commit,
     * two Raft writes per file.
     */
    @Test
    void aSmallFileWrittenWithOTruncCostsOneMdsWrite() {
        vfs.getattr(ROOT, dir); // warm: the inode range is reserved by the first create below
        vfs.release(ROOT, create(ROOT, "warm", WTRUNC));
        long creates = calls(OpCase.CREATE), commits = calls(OpCase.COMMIT_EXTENTS), batches = calls(OpCase.BATCH_WRITE);
        int n = 20;
        for (int i = 0; i < n; i++) {
            byte[] data = ("file " + i).getBytes(StandardCharsets.UTF_8);
            long fh = create(ROOT, "f" + i, WTRUNC);
            vfs.write(ROOT, fh, 0, data, data.length);
            vfs.release(ROOT, fh);
        }
        assertEquals(0, calls(OpCase.CREATE) - creates, "creates sent alone");
        assertEquals(0, calls(OpCase.COMMIT_EXTENTS) - commits, "commits sent alone");
        assertEquals(n, calls(OpCase.BATCH_WRITE) - batches, "one batch_write (create + commit) per file");
        for (int i = 0; i < n; i++) {
            Attr a = atMds("f" + i);
            assertEquals(vfs.getattr(ROOT, dir + "/f" + i).getIno(), a.getIno(), "the inode number the open answered");
            assertArrayEquals(("file " + i).getBytes(StandardCharsets.UTF_8), inlineAtMds(a));
            assertEquals(0100644, a.getMode());
        }
    }

    /** O_EXCL (lock files, mkstemp) and creates without O_TRUNC wait for their Raft commit, as before. */
    @Test
    void exclusiveAndNonTruncatingCreatesAreCommittedBeforeTheyReturn() {
        for (int flags : new int[] {O_CREAT | O_WRONLY | O_EXCL, O_CREAT | O_WRONLY, O_CREAT | O_WRONLY | O_TRUNC | O_EXCL}) {
            String name = "x" + flags;
            long fh = create(ROOT, name, flags);
            try {
                assertTrue(atMds(name) != null, "flags 0" + Integer.toOctalString(flags) + ": at the MDS when open returns");
            } finally {
                vfs.release(ROOT, fh);
            }
        }
        long fh = create(ROOT, "x0" , O_CREAT | O_WRONLY | O_EXCL);
        vfs.release(ROOT, fh);
        assertEquals(Status.EEXIST, assertThrows(FsException.class, () -> create(ROOT, "x0", O_CREAT | O_WRONLY | O_EXCL)).status());
    }

    /**
     * Until its close, a deferred file is this client's alone: stat, lookup and reads answer
     * here, the MDS does not have it. Its close makes it visible everywhere (close-to-open).
     */
    @Test
    void aDeferredFileIsSeenHereAtOnceAndByOthersFromItsClose() {
        long fh = create(ROOT, "p", WTRUNC);
        byte[] data = "pending bytes".getBytes(StandardCharsets.UTF_8);
        vfs.write(ROOT, fh, 0, data, data.length);
        assertEquals(null, atMds("p"), "another client does not see it before the close");
        vfs.invalidateCaches(); // even without the cached dentry, a lookup here answers from the deferred create
        Attr here = vfs.getattr(ROOT, dir + "/p");
        assertEquals(data.length, here.getSize());
        assertEquals(0100644, here.getMode());
        assertArrayEquals(data, vfs.read(ROOT, fh, 0, 100));
        vfs.flush(ROOT, fh);
        Attr there = atMds("p");
        assertEquals(here.getIno(), there.getIno());
        assertArrayEquals(data, inlineAtMds(there));
        vfs.release(ROOT, fh);
        long empty = create(ROOT, "empty", WTRUNC);
        vfs.release(ROOT, empty); // nothing written: the close sends the create alone
        assertEquals(0, atMds("empty").getSize());
    }

    /**
     * Anything that needs a deferred file at the MDS sends its create first: an operation on its
     * inode or name, or a listing or removal of its directory. Each ends as if the create had been
     * committed at once.
     */
    @Test
    void everyOperationOnADeferredFileFindsItAtTheMds() {
        List<Consumer<String>> ops = List.of(
                p -> assertEquals(0100600, vfs.chmod(ROOT, p, 0600).getMode()),
                p -> vfs.rename(ROOT, p, p + ".renamed", 0),
                p -> vfs.link(ROOT, p, p + ".link"),
                p -> vfs.setxattr(ROOT, p, "user.k", new byte[] {1}, 0),
                p -> vfs.unlink(ROOT, p),
                p -> vfs.truncate(ROOT, p, 5),
                p -> vfs.release(ROOT, vfs.open(ROOT, p, O_RDONLY)),
                p -> assertTrue(vfs.readdir(ROOT, dir).stream().anyMatch(e -> p.endsWith("/" + e.name()))),
                p -> vfs.fsyncdir(ROOT, dir));
        for (int i = 0; i < ops.size(); i++) {
            String name = "op" + i;
            long fh = create(ROOT, name, WTRUNC);
            long ino = vfs.fgetattr(ROOT, fh).getIno();
            assertEquals(null, atMds(name), "op " + i + ": not at the MDS before");
            ops.get(i).accept(dir + "/" + name);
            vfs.release(ROOT, fh);
            if (i == 4) {
                assertEquals(null, atMds(name), "unlinked");
                assertEquals(Status.ENOENT, assertThrows(FsException.class, () -> cluster.mds.getattr(ROOT, ino)).status());
                continue;
            }
            Attr a = cluster.mds.getattr(ROOT, ino);
            switch (i) {
                case 0 -> assertEquals(0100600, a.getMode());
                case 1 -> assertEquals(ino, atMds(name + ".renamed").getIno());
                case 2 -> assertEquals(2, a.getNlink());
                case 3 -> assertArrayEquals(new byte[] {1}, cluster.mds.getxattr(ROOT, ino, "user.k".getBytes(StandardCharsets.UTF_8)));
                case 5 -> assertEquals(5, a.getSize());
                default -> { }
            }
            if (i != 1) {
                assertEquals(ino, atMds(name).getIno(), "op " + i);
            }
        }
        // rmdir of a directory holding a deferred file: ENOTEMPTY, as the MDS then sees the file
        vfs.mkdir(ROOT, dir + "/sub", 0755);
        long fh = open(ROOT, dir + "/sub/f", WTRUNC);
        assertEquals(Status.ENOTEMPTY, assertThrows(FsException.class, () -> vfs.rmdir(ROOT, dir + "/sub")).status());
        vfs.release(ROOT, fh);
    }

    /** A file kept open longer than the cache timeout reaches the MDS in the background, before its close. */
    @Test
    void aFileKeptOpenReachesTheMdsWithinTheCacheTimeout() throws Exception {
        vfs.close();
        vfs = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults().withCacheTimeout(Duration.ofMillis(200))
                .withDirLease(false));
        long fh = create(ROOT, "slow", WTRUNC);
        long t0 = System.nanoTime();
        Attr seen = null;
        while (seen == null && System.nanoTime() - t0 < 10_000_000_000L) {
            Thread.sleep(20);
            seen = atMds("slow");
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        System.out.printf("a deferred create of a file kept open reached the MDS after %d ms (cache timeout 200 ms)%n", ms);
        assertTrue(seen != null, "not at the MDS after 10 s");
        assertEquals(vfs.fgetattr(ROOT, fh).getIno(), seen.getIno());
        byte[] data = "late".getBytes(StandardCharsets.UTF_8);
        vfs.write(ROOT, fh, 0, data, data.length);
        vfs.release(ROOT, fh);
        assertArrayEquals(data, inlineAtMds(atMds("slow")));
    }

    /**
     * A file another client made under the name before the deferred create reached the MDS is
     * replaced by it, as the O_TRUNC open would have emptied it; the other client's inode is
     * removed with its last name.
     */
    @Test
    void aNameAnotherClientCreatedMeanwhileIsReplacedByTheDeferredCreate() {
        long fh = create(ROOT, "race", WTRUNC);
        Attr theirs = cluster.mds.create(ROOT, dirIno, "race".getBytes(StandardCharsets.UTF_8), 0100644, true);
        byte[] data = "mine".getBytes(StandardCharsets.UTF_8);
        vfs.write(ROOT, fh, 0, data, data.length);
        vfs.release(ROOT, fh);
        Attr a = atMds("race");
        assertTrue(a.getIno() != theirs.getIno());
        assertArrayEquals(data, inlineAtMds(a));
        assertEquals(Status.ENOENT, assertThrows(FsException.class, () -> cluster.mds.getattr(ROOT, theirs.getIno())).status());
        // a directory under the name is never replaced: the close fails, the directory stays
        long fh2 = create(ROOT, "adir", WTRUNC);
        cluster.mds.mkdir(ROOT, dirIno, "adir".getBytes(StandardCharsets.UTF_8), 0755);
        vfs.write(ROOT, fh2, 0, data, data.length);
        assertEquals(Status.EISDIR, assertThrows(FsException.class, () -> vfs.release(ROOT, fh2)).status());
        assertEquals(040755, atMds("adir").getMode());
    }

    /**
     * A create the MDS refuses when it arrives (another client removed the directory, or took
     * the caller's write permission) fails the close with that errno, and the name is gone here.
     */
    @Test
    void aDeferredCreateTheMdsRefusesFailsItsCloseAndLeavesNoEntry() {
        Caller alice = GranaryVfs.caller(1000, 1000);
        vfs.mkdir(ROOT, dir + "/shared", 0777);
        long shared = vfs.getattr(ROOT, dir + "/shared").getIno();
        long fh = open(alice, dir + "/shared/a", WTRUNC);
        cluster.mds.setattr(ROOT, dev.granary.mds.proto.SetAttrRequest.newBuilder().setIno(shared)
                .setValid(MdsClient.SETATTR_MODE).setMode(0755).build());
        byte[] data = "refused".getBytes(StandardCharsets.UTF_8);
        vfs.write(alice, fh, 0, data, data.length);
        assertEquals(Status.EACCES, assertThrows(FsException.class, () -> vfs.release(alice, fh)).status());
        assertEquals(Status.ENOENT, assertThrows(FsException.class, () -> vfs.getattr(ROOT, dir + "/shared/a")).status());
        assertEquals(Status.ENOENT, assertThrows(FsException.class,
                () -> cluster.mds.lookup(ROOT, shared, "a".getBytes(StandardCharsets.UTF_8))).status());

        vfs.mkdir(ROOT, dir + "/gone", 0777);
        long fh2 = open(ROOT, dir + "/gone/b", WTRUNC);
        cluster.mds.rmdir(ROOT, dirIno, "gone".getBytes(StandardCharsets.UTF_8)); // empty at the MDS
        vfs.write(ROOT, fh2, 0, data, data.length);
        assertEquals(Status.ENOENT, assertThrows(FsException.class, () -> vfs.release(ROOT, fh2)).status());
    }

    /**
     * The layout a deferred create gives the file is its directory's at the MDS when the LOOKUP
     * before the create found no such name, not the one cached here: another client's setstripe
     * of the directory a moment before applies. Regression: with the cached 64 KiB template the
     * 300 KB file was cut in 64 KiB stripes, and its commit against the MDS's 128 KiB layout
     * failed with EINVAL.
     */
    @Test
    void aDeferredCreateTakesTheDirectoryLayoutTheMdsHasNotACachedOne() {
        assertEquals(S, vfs.getattr(ROOT, dir).getLayout().getStripeSize(), "cached here");
        int stripe = 128 * 1024;
        cluster.mds.setLayout(ROOT, dirIno, dev.granary.mds.proto.Layout.newBuilder().setStripeSize(stripe)
                .setStripeCount(1).addOsts(1).build());
        byte[] data = new byte[300_000];
        new java.util.Random(5).nextBytes(data);
        long fh = create(ROOT, "big", WTRUNC);
        assertEquals(null, atMds("big"), "deferred");
        vfs.write(ROOT, fh, 0, data, data.length);
        vfs.release(ROOT, fh);
        Attr a = atMds("big");
        assertEquals(stripe, a.getLayout().getStripeSize());
        List<Extent> ex = cluster.mds.getExtents(ROOT, a.getIno(), 0, 10);
        assertEquals(3, ex.size(), "three 128 KiB stripes");
        for (Extent e : ex) {
            assertEquals(1, e.getOst());
        }
        vfs.invalidateCaches();
        long rh = vfs.open(ROOT, dir + "/big", O_RDONLY);
        byte[] back = vfs.read(ROOT, rh, 0, data.length + 10);
        vfs.release(ROOT, rh);
        assertArrayEquals(data, back);
    }

    /** A create the kernel sends without a LOOKUP of the name at the MDS just before is not deferred. */
    @Test
    void aCreateWithoutAnMdsLookupOfTheNameJustBeforeIsCommittedAtOnce() {
        long fh = vfs.create(ROOT, dir + "/nolookup", 0644, WTRUNC);
        assertTrue(atMds("nolookup") != null);
        vfs.release(ROOT, fh);
    }

    /** With deferred creates off, an O_TRUNC create is a Raft write of its own before it returns. */
    @Test
    void offEveryCreateIsCommittedBeforeItReturns() {
        vfs.close();
        vfs = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults().withDeferredCreate(false));
        long fh = create(ROOT, "sync", WTRUNC);
        assertTrue(atMds("sync") != null);
        vfs.release(ROOT, fh);
    }
}
