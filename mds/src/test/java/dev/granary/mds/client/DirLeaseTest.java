package dev.granary.mds.client;

import static org.junit.jupiter.api.Assertions.*;

import com.google.protobuf.ByteString;
import dev.granary.mds.Errno;
import dev.granary.mds.FsException;
import dev.granary.mds.proto.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Directory leases (mds.proto DirLeaseRequest) on the real namespace state machine: what a lease
 * keeps other sessions out of, how a recall reaches the holder, that a lease runs out, and that
 * another session's request waits for the recall instead of failing.
 */
class DirLeaseTest {
    static final Caller ROOT = Caller.getDefaultInstance();
    static final Caller USER = Caller.newBuilder().setUid(1000).setGid(1000).build();
    static final long A = 0x1111L, B = 0x2222L;
    static final long LEASE_NS = 10_000_000_000L;

    @TempDir
    Path tmp;
    LocalMdsTransport transport;
    MdsClient a, b;
    long dir, other;

    static byte[] n(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @BeforeEach
    void setUp() {
        transport = LocalMdsTransport.open(tmp.resolve("db"));
        a = new MdsClient(transport).withSession(A);
        b = new MdsClient(transport).withSession(B);
        dir = a.mkdir(ROOT, MdsClient.ROOT_INO, n("d"), 0777).getIno();
        other = a.mkdir(ROOT, MdsClient.ROOT_INO, n("e"), 0777).getIno();
    }

    @AfterEach
    void tearDown() {
        transport.close();
    }

    /** Session B's request as it reaches the MDS (no retry). */
    MdsRequest.Builder asB() {
        return MdsRequest.newBuilder().setCaller(ROOT).setSession(B);
    }

    @Test
    void aLeaseKeepsEveryOtherSessionOutOfTheDirectoryAndNothingElse() {
        long f = a.create(ROOT, dir, n("f"), 0100644, true).getIno();
        a.mkdir(ROOT, dir, n("sub"), 0755);
        long g = a.create(ROOT, other, n("g"), 0100644, true).getIno();
        a.mkdir(ROOT, MdsClient.ROOT_INO, n("spare"), 0755);
        assertTrue(a.acquireDirLease(ROOT, dir, LEASE_NS).granted());

        ByteString name = ByteString.copyFrom(n("x"));
        List<MdsRequest> keptOut = List.of(
                asB().setLookup(LookupRequest.newBuilder().setParent(dir).setName(name)).build(),
                asB().setReaddir(ReadDirRequest.newBuilder().setIno(dir).setLimit(10)).build(),
                asB().setCreate(CreateRequest.newBuilder().setParent(dir).setName(name).setMode(0100644)).build(),
                asB().setMkdir(MkdirRequest.newBuilder().setParent(dir).setName(name).setMode(0755)).build(),
                asB().setSymlink(SymlinkRequest.newBuilder().setParent(dir).setName(name).setTarget(name)).build(),
                asB().setLink(LinkRequest.newBuilder().setIno(g).setNewParent(dir).setNewName(name)).build(),
                asB().setUnlink(UnlinkRequest.newBuilder().setParent(dir).setName(ByteString.copyFrom(n("f")))).build(),
                asB().setRmdir(RmdirRequest.newBuilder().setParent(dir).setName(ByteString.copyFrom(n("sub")))).build(),
                asB().setRmdir(RmdirRequest.newBuilder().setParent(MdsClient.ROOT_INO).setName(ByteString.copyFrom(n("d")))).build(),
                asB().setRename(RenameRequest.newBuilder().setSrcParent(dir).setSrcName(ByteString.copyFrom(n("f")))
                        .setDstParent(other).setDstName(name)).build(),
                asB().setRename(RenameRequest.newBuilder().setSrcParent(other).setSrcName(ByteString.copyFrom(n("g")))
                        .setDstParent(dir).setDstName(name)).build(),
                // a rename of an empty directory over the leased one (helper-found: it replaced a
                // leased directory that looked empty at the MDS, and the holder's unsent creates were lost)
                asB().setRename(RenameRequest.newBuilder().setSrcParent(MdsClient.ROOT_INO).setSrcName(ByteString.copyFrom(n("spare")))
                        .setDstParent(MdsClient.ROOT_INO).setDstName(ByteString.copyFrom(n("d")))).build(),
                asB().setSetattr(SetAttrRequest.newBuilder().setIno(dir).setValid(MdsClient.SETATTR_MODE).setMode(0700)).build(),
                asB().setSetxattr(SetXattrRequest.newBuilder().setIno(dir).setName(ByteString.copyFrom(n("user.k")))
                        .setValue(name)).build(),
                asB().setSetlayout(SetLayoutRequest.newBuilder().setIno(dir).setLayout(Layout.newBuilder()
                        .setStripeSize(1 << 20).setStripeCount(1).addOsts(0))).build());
        for (MdsRequest r : keptOut) {
            boolean isRead = r.getOpCase() == MdsRequest.OpCase.LOOKUP || r.getOpCase() == MdsRequest.OpCase.READDIR;
            MdsResponse resp = isRead ? transport.read(r) : transport.write(r);
            assertEquals(Status.LEASED, resp.getStatus(), r.getOpCase() + " of another session");
            assertEquals(dir, resp.getDirLease().getDir(), r.getOpCase().toString());
            assertEquals(A, resp.getDirLease().getHolder(), r.getOpCase().toString());
        }
        // nothing was applied: the entries and the directory are as they were
        assertEquals(f, a.lookup(ROOT, dir, n("f")).getIno());
        assertEquals(0777, a.getattr(ROOT, dir).getMode() & 07777);
        assertThrows(FsException.class, () -> a.lookup(ROOT, dir, n("x")));

        // not kept out: the directory's own attributes, other directories, the file's own inode
        assertEquals(Status.OK, transport.read(asB().setGetattr(GetAttrRequest.newBuilder().setIno(dir)).build()).getStatus());
        assertEquals(Status.OK, transport.write(asB().setCreate(CreateRequest.newBuilder().setParent(other)
                .setName(name).setMode(0100644)).build()).getStatus());
        assertEquals(Status.OK, transport.write(asB().setSetattr(SetAttrRequest.newBuilder().setIno(f)
                .setValid(MdsClient.SETATTR_MODE).setMode(0600)).build()).getStatus());
        // the holder itself is not kept out
        a.create(ROOT, dir, n("by-holder"), 0100644, true);
        assertEquals(3, a.readdir(ROOT, dir, new byte[0], 100).entries().size(), "f, sub and by-holder");

        // released: B gets in
        a.releaseDirLease(ROOT, dir);
        assertEquals(Status.ENOENT, transport.read(keptOut.get(0)).getStatus());
        assertEquals(0, b.dirLeaseStatus(ROOT, dir).getHolder());
        b.create(ROOT, dir, n("x"), 0100644, true);
    }

    @Test
    void aBatchWriteWithOneRequestKeptOutAppliesNone() {
        assertTrue(a.acquireDirLease(ROOT, dir, LEASE_NS).granted());
        MdsRequest inOther = asB().setCreate(CreateRequest.newBuilder().setParent(other).setName(ByteString.copyFrom(n("y")))
                .setMode(0100644)).build();
        MdsRequest inLeased = asB().setCreate(CreateRequest.newBuilder().setParent(dir).setName(ByteString.copyFrom(n("y")))
                .setMode(0100644)).build();
        MdsResponse r = transport.write(MdsRequest.newBuilder().setSession(B)
                .setBatchWrite(BatchWriteRequest.newBuilder().addRequests(inOther).addRequests(inLeased)).build());
        assertEquals(2, r.getBatchCount());
        assertEquals(Status.LEASED, r.getBatch(0).getStatus());
        assertEquals(Status.LEASED, r.getBatch(1).getStatus());
        assertThrows(FsException.class, () -> a.lookup(ROOT, other, n("y")), "the first request was not applied either");
    }

    @Test
    void anotherSessionsRequestWaitsForTheRecallAndSeesWhatTheHolderMade() throws Exception {
        assertTrue(a.acquireDirLease(ROOT, dir, LEASE_NS).granted());
        CompletableFuture<FsException> bCreate = CompletableFuture.supplyAsync(() -> {
            try {
                b.create(ROOT, dir, n("lock"), 0100644, true);
                return null;
            } catch (FsException e) {
                return e;
            }
        });
        // the holder polls its lease as a client does, sees the recall, makes its create, releases
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (!a.dirLeaseStatus(ROOT, dir).getRecalled()) {
            assertTrue(System.nanoTime() < deadline, "B's refused create recalled the lease");
            Thread.sleep(2);
        }
        assertFalse(bCreate.isDone(), "B waits while the lease runs");
        MdsClient.DirLeaseReply renew = a.acquireDirLease(ROOT, dir, LEASE_NS);
        assertFalse(renew.granted(), "a recalled lease is not renewed");
        assertTrue(renew.lease().getRecalled());
        a.create(ROOT, dir, n("lock"), 0100644, true);
        a.releaseDirLease(ROOT, dir);
        FsException e = bCreate.get(5, TimeUnit.SECONDS);
        assertNotNull(e, "B's exclusive create must not also succeed");
        assertEquals(Status.EEXIST, e.status());
        assertTrue(b.leaseRefusals() >= 1, "B was refused at least once: " + b.leaseRefusals());
        assertEquals(0, a.leaseRefusals());
    }

    @Test
    void aLeaseRunsOutWithoutItsHolder() {
        long t0 = System.nanoTime();
        MdsClient.DirLeaseReply got = a.acquireDirLease(ROOT, dir, 300_000_000L);
        assertTrue(got.granted());
        assertEquals(A, got.lease().getHolder());
        assertEquals(dir, got.dir().getIno(), "the grant carries the directory's attributes");
        // the holder is gone (never releases): B's lookup waits until the lease ran out, then answers
        assertThrows(NoEntryException.class, () -> b.lookup(ROOT, dir, n("nothing")));
        long waitedMs = (System.nanoTime() - t0) / 1_000_000;
        assertTrue(waitedMs >= 200, "B waited for the lease: " + waitedMs + " ms");
        assertTrue(b.leaseRefusals() >= 1);
        assertEquals(0, b.dirLeaseStatus(ROOT, dir).getHolder(), "no lease runs any more");
        // and B can take it now
        assertTrue(b.acquireDirLease(ROOT, dir, LEASE_NS).granted());
    }

    @Test
    void acquireRules() {
        assertTrue(a.acquireDirLease(ROOT, dir, LEASE_NS).granted());
        MdsClient.DirLeaseReply theirs = b.acquireDirLease(ROOT, dir, LEASE_NS);
        assertFalse(theirs.granted(), "another session's running lease is not taken over");
        assertEquals(A, theirs.lease().getHolder());
        long firstExpiry = a.dirLeaseStatus(ROOT, dir).getExpiresNs();
        MdsClient.DirLeaseReply renewed = a.acquireDirLease(ROOT, dir, LEASE_NS);
        assertTrue(renewed.granted());
        assertTrue(renewed.lease().getExpiresNs() >= firstExpiry, "renewed");
        // clamped to 30 s
        long now = System.currentTimeMillis() * 1_000_000L;
        long clamped = a.acquireDirLease(ROOT, dir, 3_600_000_000_000L).lease().getExpiresNs();
        assertTrue(clamped - now <= 31_000_000_000L, "at most 30 s: " + (clamped - now));

        long file = a.create(ROOT, other, n("file"), 0100644, true).getIno();
        assertEquals(Status.ENOTDIR, assertThrows(FsException.class, () -> a.acquireDirLease(ROOT, file, LEASE_NS)).status());
        long closed = a.mkdir(ROOT, MdsClient.ROOT_INO, n("closed"), 0755).getIno();
        MdsClient user = new MdsClient(transport).withSession(0x3333L);
        assertEquals(Status.EACCES, assertThrows(FsException.class, () -> user.acquireDirLease(USER, closed, LEASE_NS)).status(),
                "a lease needs write permission: it keeps others out");
        MdsClient none = new MdsClient(transport);
        assertEquals(Status.EINVAL, assertThrows(FsException.class, () -> none.acquireDirLease(ROOT, other, LEASE_NS)).status());
        assertEquals(Status.ENOENT, assertThrows(FsException.class, () -> a.acquireDirLease(ROOT, 987_654, LEASE_NS)).status());

        // a removed directory takes its lease record with it
        long gone = a.mkdir(ROOT, MdsClient.ROOT_INO, n("gone"), 0777).getIno();
        assertTrue(a.acquireDirLease(ROOT, gone, LEASE_NS).granted());
        a.rmdir(ROOT, MdsClient.ROOT_INO, n("gone"));
        assertEquals(0, a.dirLeaseStatus(ROOT, gone).getHolder());

        assertEquals(11, Errno.of(Status.LEASED), "should it ever reach a caller: EAGAIN");
    }
}
