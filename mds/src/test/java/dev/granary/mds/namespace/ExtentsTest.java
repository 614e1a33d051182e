package dev.granary.mds.namespace;

import static org.junit.jupiter.api.Assertions.*;

import dev.granary.mds.MdsTestBase;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Extent;
import dev.granary.mds.proto.Layout;
import dev.granary.mds.proto.SetAttrRequest;
import dev.granary.mds.proto.Status;
import dev.granary.mds.proto.StripeBase;
import dev.granary.mds.schema.MdsSchema;
import dev.granary.mds.schema.proto.GcRecord;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Layouts, commit_extents, get_extents, truncate and the GC queue. */
class ExtentsTest extends MdsTestBase {
    static final long MIB = 1 << 20;


    private List<GcRecord> gc() {
        return MdsSchema.listGc(transport.kv());
    }

    /**
     * Reading a file's attributes, extents and entry does not step over the deleted keys of the
     * files removed after it (a dataset deleted behind it): every MDS scan is bounded. Unbounded,
     * each read stepped over all 2,000 extent tombstones of the later inodes.
     */
    @Test
    void readsOfAFileDoNotStepOverTheDeletedKeysOfLaterFiles() {
        registerOsts(1);
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        mds.commitExtents(ROOT, f.getIno(), List.of(ext(f.getLayout(), 0, "blk-f", 10)), 10, 1);
        Attr d = mds.mkdir(ROOT, R, b("later"), 0755);
        for (int i = 0; i < 2000; i++) {
            Attr g = mds.create(ROOT, d.getIno(), b("g" + i), 0644, true);
            mds.commitExtents(ROOT, g.getIno(), List.of(ext(g.getLayout(), 0, "blk-g" + i, 10)), 10, 1);
        }
        for (int i = 0; i < 2000; i++) {
            mds.unlink(ROOT, d.getIno(), b("g" + i));
        }
        mds.rmdir(ROOT, R, b("later"));
        long skipped = transport.kv().deletedKeysSkipped(() -> {
            assertEquals(1, mds.getExtents(ROOT, f.getIno(), 0, 0).size());
            assertEquals(10, mds.getattr(ROOT, f.getIno()).getSize());
            assertEquals(f.getIno(), mds.lookup(ROOT, R, b("f")).getIno());
        });
        assertTrue(skipped < 100, "tombstones stepped over: " + skipped);
    }

    @Test
    void newFilesGetTheResolvedDefaultLayoutRotatedByInode() {
        registerOsts(3);
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        Attr g = mds.create(ROOT, R, b("g"), 0644, true);
        assertEquals(4 * MIB, f.getLayout().getStripeSize());
        assertEquals(3, f.getLayout().getStripeCount());
        assertEquals(List.of(2, 0, 1), f.getLayout().getOstsList(), "ino 2 starts at OST 2 % 3");
        assertEquals(List.of(0, 1, 2), g.getLayout().getOstsList(), "ino 3 starts at OST 0");
        assertEquals(0, mds.getattr(ROOT, R).getLayout().getStripeCount(), "root template: all OSTs");
    }

    @Test
    void setLayoutOnDirectoryAndFile() {
        registerOsts(4);
        Attr d = mds.mkdir(ROOT, R, b("d"), 0755);
        Layout l = mds.setLayout(ROOT, d.getIno(), Layout.newBuilder().setStripeSize(MIB).setStripeCount(2).build());
        assertEquals(2, l.getStripeCount());
        Attr f = mds.create(ROOT, d.getIno(), b("f"), 0644, true);
        assertEquals(MIB, f.getLayout().getStripeSize());
        assertEquals(2, f.getLayout().getOstsCount());
        Attr sub = mds.mkdir(ROOT, d.getIno(), b("sub"), 0755);
        assertEquals(l, sub.getLayout(), "subdirectories inherit the default");
        Layout fixed = mds.setLayout(ROOT, f.getIno(), Layout.newBuilder().setStripeSize(128 << 10).addOsts(3).addOsts(1).build());
        assertEquals(List.of(3, 1), fixed.getOstsList());
        assertEquals(2, fixed.getStripeCount());
        Layout all = mds.setLayout(ROOT, d.getIno(), Layout.newBuilder().setStripeSize(MIB).setStripeCount(-1).build());
        assertEquals(0, all.getStripeCount());
        assertEquals(4, mds.create(ROOT, d.getIno(), b("g"), 0644, true).getLayout().getOstsCount());

        assertErrno(Status.EINVAL, () -> mds.setLayout(ROOT, d.getIno(), Layout.newBuilder().setStripeSize(1000).setStripeCount(1).build()));
        assertErrno(Status.EINVAL, () -> mds.setLayout(ROOT, d.getIno(), Layout.newBuilder().setStripeSize(0).setStripeCount(1).build()));
        // at most 64 MiB: a stripe is one block in one OSS call (gRPC messages stop at 128 MiB)
        assertEquals(64L << 20, mds.setLayout(ROOT, d.getIno(), Layout.newBuilder().setStripeSize(64L << 20).setStripeCount(1).build()).getStripeSize());
        assertErrno(Status.EINVAL, () -> mds.setLayout(ROOT, d.getIno(), Layout.newBuilder().setStripeSize((64L << 20) + (64 << 10)).setStripeCount(1).build()));
        assertErrno(Status.EINVAL, () -> mds.setLayout(ROOT, d.getIno(), Layout.newBuilder().setStripeSize(128L << 20).setStripeCount(1).build()));
        assertErrno(Status.EINVAL, () -> mds.setLayout(ROOT, d.getIno(), Layout.newBuilder().setStripeSize(4L << 30).setStripeCount(1).build()));
        mds.setLayout(ROOT, d.getIno(), Layout.newBuilder().setStripeSize(MIB).setStripeCount(2).build());
        assertErrno(Status.EINVAL, () -> mds.setLayout(ROOT, d.getIno(), Layout.newBuilder().setStripeSize(MIB).setStripeCount(5).build()));
        assertErrno(Status.EINVAL, () -> mds.setLayout(ROOT, d.getIno(), Layout.newBuilder().setStripeSize(MIB).addOsts(9).build()));
        assertErrno(Status.EINVAL, () -> mds.setLayout(ROOT, d.getIno(), Layout.newBuilder().setStripeSize(MIB).addOsts(1).addOsts(1).build()));
        assertErrno(Status.EPERM, () -> mds.setLayout(ALICE, d.getIno(), Layout.newBuilder().setStripeSize(MIB).setStripeCount(1).build()));
        Attr l2 = mds.symlink(ROOT, R, b("l"), b("x"));
        assertErrno(Status.EINVAL, () -> mds.setLayout(ROOT, l2.getIno(), Layout.newBuilder().setStripeSize(MIB).setStripeCount(1).build()));

        Attr w = mds.lookup(ROOT, d.getIno(), b("f"));
        mds.commitExtents(ROOT, w.getIno(), List.of(ext(w.getLayout(), 0, "blk-0", 100)), 100, 0);
        assertErrno(Status.EBUSY, () -> mds.setLayout(ROOT, w.getIno(), Layout.newBuilder().setStripeSize(MIB).setStripeCount(1).build()));
    }

    /**
     * cp -a writes, sets the source's times with futimens while the file is open, then closes:
     * the commit at close must keep that mtime and must not move ctime past the utimens.
     * Regression: the commit stamped mtime = write time and ctime = now (diff of cp -a trees, tar
     * "file changed as we read it").
     */
    @Test
    void commitKeepsAnExplicitMtimeAndSetsCtimeToTheWriteTime() {
        registerOsts(2);
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        long writeNs = f.getCtimeNs() + 1;
        Attr a = mds.commitExtents(ROOT, f.getIno(), List.of(ext(f.getLayout(), 0, "b0", 10)), 10, writeNs);
        assertEquals(writeNs, a.getMtimeNs(), "mtime = time of the last write");
        assertTrue(a.getCtimeNs() > f.getCtimeNs(), "ctime = the commit's time");

        long explicit = 1_500_000_000_123_456_789L;
        Attr u = mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(f.getIno())
                .setValid(MdsClient.SETATTR_MTIME).setMtimeNs(explicit).build());
        assertEquals(explicit, u.getMtimeNs());
        Attr k = mds.commitExtents(ROOT, f.getIno(), List.of(ext(f.getLayout(), 0, "b1", 20)), 20, writeNs + 5, true);
        assertEquals(explicit, k.getMtimeNs(), "keep_mtime leaves the utimens value");
        // the utimens was later than the write: ctime moves by the least step, as every change of
        // the data must move it (clients compare it to know that a map they hold is current)
        assertEquals(u.getCtimeNs() + 1, k.getCtimeNs());
        assertTrue(u.getCtimeNs() > a.getCtimeNs());
        assertEquals(20, k.getSize());
    }

    /**
     * An inode's ctime grows with every change even when the leader stamped a later log entry
     * with an earlier time (it stamps entries before ordering them; its clock may step back after
     * a failover), so a client holding two answers for one inode keeps the later one by ctime.
     * Regression: two commits of one file answered out of order left the client with the size
     * before the second; with the stamps reversed the later change carried the smaller ctime.
     */
    @Test
    void ctimeGrowsWithEveryChangeWhenTheClockStepsBack() {
        registerOsts(2);
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        Layout l = f.getLayout();
        long prev = f.getCtimeNs();
        List<java.util.function.Supplier<Attr>> changes = List.of(
                () -> mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "c0", 10)), 10, 0),
                () -> mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "c1", 20)), 20, 0),
                () -> mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(MdsClient.SETATTR_MODE).setMode(0600).build()),
                () -> mds.link(ROOT, f.getIno(), R, b("g")),
                () -> { mds.unlink(ROOT, R, b("g")); return mds.getattr(ROOT, f.getIno()); },
                () -> mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "c2", 30)), 30, 0),
                () -> mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "c3", 30)), 30, f.getCtimeNs(), true));
        for (var change : changes) {
            clock.addAndGet(-1_000_000); // the next stamp is 1 ms before the last one
            Attr a = change.get();
            assertTrue(a.getCtimeNs() > prev, "ctime " + a.getCtimeNs() + " after " + prev);
            prev = a.getCtimeNs();
        }
        assertEquals(30, mds.getattr(ROOT, f.getIno()).getSize());
    }

    @Test
    void commitAndGetExtents() {
        registerOsts(2);
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        Layout l = f.getLayout();
        long ss = l.getStripeSize();
        Attr a = mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "k0", ss), ext(l, 1, "k1", ss), ext(l, 2, "k2", 10)),
                2 * ss + 10, f.getMtimeNs() + 12345);
        assertEquals(2 * ss + 10, a.getSize());
        assertEquals(f.getMtimeNs() + 12345, a.getMtimeNs());
        assertTrue(a.getCtimeNs() > f.getCtimeNs());
        List<Extent> got = mds.getExtents(ROOT, f.getIno(), 0, 0);
        assertEquals(List.of("k0", "k1", "k2"), got.stream().map(Extent::getBlockKey).toList());
        assertEquals(1, got.get(0).getBirthEpoch());
        assertEquals(List.of("k1"), mds.getExtents(ROOT, f.getIno(), 1, 2).stream().map(Extent::getBlockKey).toList());
        // a smaller new_size does not shrink the file
        Attr same = mds.commitExtents(ROOT, f.getIno(), List.of(), 5, 0);
        assertEquals(2 * ss + 10, same.getSize());
        assertEquals(same.getCtimeNs(), same.getMtimeNs(), "mtime 0 means now");

        assertErrno(Status.EINVAL, () -> mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 9, "far", 10)), 10, 0));
        assertErrno(Status.EINVAL, () -> mds.commitExtents(ROOT, f.getIno(),
                List.of(ext(l, 0, "k", 1).toBuilder().setOst(l.getOsts(1)).build()), ss, 0));
        assertErrno(Status.EINVAL, () -> mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "k", ss + 1)), 2 * ss, 0));
        assertErrno(Status.EINVAL, () -> mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "a", 1), ext(l, 0, "b", 1)), 1, 0));
        assertErrno(Status.EISDIR, () -> mds.commitExtents(ROOT, R, List.of(), 1, 0));
        assertErrno(Status.ENOENT, () -> mds.commitExtents(ROOT, 999, List.of(), 1, 0));
        assertErrno(Status.EISDIR, () -> mds.getExtents(ROOT, R, 0, 0));
        assertEquals(List.of(), gc(), "nothing replaced yet");
    }

    @Test
    void replacingAStripeSendsTheOldBlockToGc() {
        registerOsts(1);
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        Layout l = f.getLayout();
        mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "old", 100)), 100, 0);
        mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "old", 200)), 200, 0); // same block: not freed
        assertEquals(List.of(), gc());
        mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "new", 50)), 50, 0);
        List<GcRecord> g = gc();
        assertEquals(1, g.size());
        assertEquals("old", g.get(0).getBlockKey());
        assertEquals(l.getOsts(0), g.get(0).getOst());
        assertEquals(1, g.get(0).getBirthEpoch());
        assertEquals(1, g.get(0).getDeathEpoch());
        assertEquals(List.of("new"), mds.getExtents(ROOT, f.getIno(), 0, 0).stream().map(Extent::getBlockKey).toList());
        assertEquals(200, mds.getattr(ROOT, f.getIno()).getSize());
    }

    @Test
    void truncateDownClipsAndFreesThenUp() {
        registerOsts(2);
        Attr d = mds.mkdir(ROOT, R, b("d"), 0755);
        mds.setLayout(ROOT, d.getIno(), Layout.newBuilder().setStripeSize(MIB).setStripeCount(2).build());
        Attr f = mds.create(ROOT, d.getIno(), b("f"), 0644, true);
        Layout l = f.getLayout();
        List<Extent> es = new ArrayList<>();
        for (int k = 0; k < 4; k++) {
            es.add(ext(l, k, "blk" + k, MIB));
        }
        mds.commitExtents(ROOT, f.getIno(), es, 4 * MIB, 0);
        Attr t = mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(MdsClient.SETATTR_SIZE)
                .setSize(MIB + 1000).build());
        assertEquals(MIB + 1000, t.getSize());
        assertEquals(t.getCtimeNs(), t.getMtimeNs(), "size change sets mtime");
        List<Extent> left = mds.getExtents(ROOT, f.getIno(), 0, 0);
        assertEquals(2, left.size());
        assertEquals(MIB, left.get(0).getLength());
        assertEquals(1000, left.get(1).getLength(), "partial stripe clipped");
        assertEquals("blk1", left.get(1).getBlockKey());
        assertEquals(List.of("blk2", "blk3"), gc().stream().map(GcRecord::getBlockKey).toList());
        assertEquals(MIB + 1000, mds.statfs(ROOT).getUsedBytes());

        Attr up = mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(MdsClient.SETATTR_SIZE)
                .setSize(10 * MIB).build());
        assertEquals(10 * MIB, up.getSize());
        assertEquals(2, mds.getExtents(ROOT, f.getIno(), 0, 0).size(), "growing adds no extents");
        assertEquals(1000, mds.getExtents(ROOT, f.getIno(), 1, 2).get(0).getLength(), "the clip stays: zeros after it");

        // truncate to a stripe boundary drops that whole stripe
        mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(MdsClient.SETATTR_SIZE).setSize(MIB).build());
        assertEquals(List.of("blk0"), mds.getExtents(ROOT, f.getIno(), 0, 0).stream().map(Extent::getBlockKey).toList());
        mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(MdsClient.SETATTR_SIZE).setSize(0).build());
        assertEquals(List.of(), mds.getExtents(ROOT, f.getIno(), 0, 0));
        assertEquals(List.of("blk2", "blk3", "blk1", "blk0"), gc().stream().map(GcRecord::getBlockKey).toList());
    }

    private static Extent inline(String data) {
        byte[] b = data.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        return Extent.newBuilder().setStripeIndex(0).setLength(b.length)
                .setInlineData(com.google.protobuf.ByteString.copyFrom(b)).build();
    }

    /**
     * An open's lookup that names the map the client fetched ahead (its inode and ctime) gets the
     * attributes only while the name holds that inode at that ctime, and the current map after
     * any change of the data (a rewrite of the same size, a commit under keep_mtime after a
     * utimens) or of the name (another file renamed over it). getFileMaps answers per inode.
     */
    @Test
    void anOpenLookupSendsNoExtentsForTheMapTheClientHoldsAndTheNewOneAfterAChange() {
        registerOsts(2);
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        mds.commitExtents(ROOT, f.getIno(), List.of(inline("hello")), 5, 0);
        Attr d = mds.mkdir(ROOT, R, b("d"), 0755);
        List<MdsClient.FileMap> maps = mds.getFileMaps(ROOT, List.of(f.getIno(), d.getIno(), 999_999L));
        assertEquals(3, maps.size());
        assertNull(maps.get(1), "a directory has no map");
        assertNull(maps.get(2), "no such inode");
        MdsClient.FileMap held = maps.get(0);
        assertEquals("hello", held.extents().get(0).getInlineData().toStringUtf8());

        // the wire: the MDS sends no extents for the held map
        java.util.function.LongFunction<dev.granary.mds.proto.MdsResponse> openLookup = ctime -> transport.read(
                dev.granary.mds.proto.MdsRequest.newBuilder().setCaller(ROOT).setLookup(dev.granary.mds.proto.LookupRequest.newBuilder()
                        .setParent(R).setName(com.google.protobuf.ByteString.copyFrom(b("f"))).setWithExtents(true).setWholeMap(true)
                        .setCachedIno(f.getIno()).setCachedCtimeNs(ctime)).build());
        var raw = openLookup.apply(held.attr().getCtimeNs());
        assertTrue(raw.getExtentsCached());
        assertTrue(raw.getHasExtents());
        assertEquals(0, raw.getExtentsCount());
        MdsClient.FileMap same = mds.lookupForOpen(ROOT, R, b("f"), held);
        assertEquals("hello", same.extents().get(0).getInlineData().toStringUtf8());
        assertEquals(held.attr().getCtimeNs(), same.attr().getCtimeNs());

        mds.commitExtents(ROOT, f.getIno(), List.of(inline("world")), 5, 0); // same size, new bytes
        var after = openLookup.apply(held.attr().getCtimeNs());
        assertFalse(after.getExtentsCached(), "the data changed: the MDS sends the map");
        assertEquals("world", after.getExtents(0).getInlineData().toStringUtf8());
        assertEquals("world", mds.lookupForOpen(ROOT, R, b("f"), held).extents().get(0).getInlineData().toStringUtf8());

        MdsClient.FileMap held2 = mds.getFileMaps(ROOT, List.of(f.getIno())).get(0);
        mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(MdsClient.SETATTR_MTIME)
                .setMtimeNs(held2.attr().getCtimeNs() + 1_000_000_000L).build());
        MdsClient.FileMap held3 = mds.getFileMaps(ROOT, List.of(f.getIno())).get(0);
        mds.commitExtents(ROOT, f.getIno(), List.of(inline("again")), 5, held2.attr().getCtimeNs(), true);
        assertEquals("again", mds.lookupForOpen(ROOT, R, b("f"), held3).extents().get(0).getInlineData().toStringUtf8(),
                "a commit under keep_mtime after a later utimens still moves the ctime");

        Attr g = mds.create(ROOT, R, b("g"), 0644, true);
        mds.commitExtents(ROOT, g.getIno(), List.of(inline("other")), 5, 0);
        MdsClient.FileMap current = mds.getFileMaps(ROOT, List.of(f.getIno())).get(0);
        mds.rename(ROOT, R, b("g"), R, b("f"), 0);
        MdsClient.FileMap renamed = mds.lookupForOpen(ROOT, R, b("f"), current);
        assertEquals(g.getIno(), renamed.attr().getIno());
        assertEquals("other", renamed.extents().get(0).getInlineData().toStringUtf8());
    }

    /** Data on MDS: a small file's bytes live in its stripe-0 extent; no block is ever freed for them. */
    @Test
    void inlineDataReplacesBlocksIsCutByTruncateAndIsNeverSentToGc() {
        registerOsts(2);
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        Layout l = f.getLayout();
        mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "blk", 100)), 100, 0);
        Attr a = mds.commitExtents(ROOT, f.getIno(), List.of(inline("hello world")), 11, 0);
        assertEquals(100, a.getSize(), "a commit never shrinks the file");
        assertEquals(List.of("blk"), gc().stream().map(GcRecord::getBlockKey).toList(), "the replaced block is freed");
        Extent got = mds.getFileMap(ROOT, f.getIno()).extents().get(0);
        assertEquals("hello world", got.getInlineData().toStringUtf8());
        assertEquals(11, got.getLength());
        assertEquals("", got.getBlockKey());

        mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(MdsClient.SETATTR_SIZE).setSize(5).build());
        Extent cut = mds.getExtents(ROOT, f.getIno(), 0, 0).get(0);
        assertEquals("hello", cut.getInlineData().toStringUtf8(), "truncate cuts the inline bytes too");
        assertEquals(5, cut.getLength());

        // inline replaced by a block, then the file unlinked: only real blocks reach the GC queue
        mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "blk2", 5)), 5, 0);
        mds.commitExtents(ROOT, f.getIno(), List.of(inline("x")), 5, 0);
        mds.unlink(ROOT, R, b("f"));
        assertEquals(List.of("blk", "blk2"), gc().stream().map(GcRecord::getBlockKey).toList());

        Attr g = mds.create(ROOT, R, b("g"), 0644, true);
        assertErrno(Status.EINVAL, () -> mds.commitExtents(ROOT, g.getIno(),
                List.of(inline("x").toBuilder().setStripeIndex(1).build()), l.getStripeSize() + 1, 0));
        assertErrno(Status.EINVAL, () -> mds.commitExtents(ROOT, g.getIno(), List.of(inline("xy").toBuilder().setLength(1).build()), 2, 0));
        assertErrno(Status.EINVAL, () -> mds.commitExtents(ROOT, g.getIno(), List.of(inline("x").toBuilder().setBlockKey("k").build()), 1, 0));
        assertErrno(Status.EINVAL, () -> mds.commitExtents(ROOT, g.getIno(), List.of(inline("abc")), 2, 0)); // ends past the size
        byte[] big = new byte[Namespace.INLINE_MAX + 1];
        assertErrno(Status.EINVAL, () -> mds.commitExtents(ROOT, g.getIno(), List.of(Extent.newBuilder().setLength(big.length)
                .setInlineData(com.google.protobuf.ByteString.copyFrom(big)).build()), big.length, 0));
        assertEquals(0, mds.getattr(ROOT, g.getIno()).getSize(), "rejected commits change nothing");
    }

    @Test
    void unlinkLastLinkFreesBlocks() {
        registerOsts(1);
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        mds.commitExtents(ROOT, f.getIno(), List.of(ext(f.getLayout(), 0, "a", 10)), 10, 0);
        mds.link(ROOT, f.getIno(), R, b("g"));
        mds.unlink(ROOT, R, b("f"));
        assertEquals(List.of(), gc());
        mds.unlink(ROOT, R, b("g"));
        assertEquals(List.of("a"), gc().stream().map(GcRecord::getBlockKey).toList());
        assertEquals(0, mds.statfs(ROOT).getUsedBytes());
    }

    @Test
    void nonRootWriteClearsSetuid() {
        registerOsts(1);
        Attr pub = mds.mkdir(ROOT, R, b("pub"), 0777);
        Attr f = mds.create(ALICE, pub.getIno(), b("f"), 04755, true);
        assertEquals(S_IFREG | 04755, f.getMode());
        Attr a = mds.commitExtents(ALICE, f.getIno(), List.of(ext(f.getLayout(), 0, "x", 1)), 1, 0);
        assertEquals(S_IFREG | 0755, a.getMode());
    }

    /**
     * An O_APPEND commit applies only while the file still ends where the client placed its
     * bytes and the stripe holding that end still has the extent whose head bytes it copied:
     * otherwise EAGAIN, and nothing changes.
     */
    @Test
    void appendCommitsOnlyAtTheEndOfFileTheClientRead() {
        registerOsts(2);
        Attr f = mds.create(ROOT, R, b("log"), 0644, true);
        Layout l = f.getLayout();
        long ss = l.getStripeSize();
        Attr a = mds.commitAppend(ROOT, f.getIno(), List.of(inline("first")), 0, null, 5, 0, false);
        assertEquals(5, a.getSize());
        Extent head = mds.getExtents(ROOT, f.getIno(), 0, 1).get(0);
        // a second appender that read size 0 lost the race: EAGAIN, the file is unchanged
        assertErrno(Status.EAGAIN, () -> mds.commitAppend(ROOT, f.getIno(), List.of(inline("other")), 0, null, 5, 0, false));
        // right size, but the client copied its head bytes from another extent of stripe 0
        Extent stale = head.toBuilder().setInlineData(com.google.protobuf.ByteString.copyFromUtf8("FIRST")).build();
        assertErrno(Status.EAGAIN, () -> mds.commitAppend(ROOT, f.getIno(), List.of(inline("first+more")), 5, stale, 10, 0, false));
        assertErrno(Status.EAGAIN, () -> mds.commitAppend(ROOT, f.getIno(), List.of(inline("first+more")), 5, null, 10, 0, false));
        assertEquals(head, mds.getExtents(ROOT, f.getIno(), 0, 1).get(0));
        assertEquals(5, mds.getattr(ROOT, f.getIno()).getSize());
        // the winner's view: size 5 and that extent
        a = mds.commitAppend(ROOT, f.getIno(), List.of(inline("first+more")), 5, head, 10, 0, false);
        assertEquals(10, a.getSize());
        // grown into blocks: a stripe-aligned end needs no base
        Extent s0 = ext(l, 0, "s0", ss);
        a = mds.commitAppend(ROOT, f.getIno(), List.of(s0), 10, mds.getExtents(ROOT, f.getIno(), 0, 1).get(0), ss, 0, false);
        assertEquals(ss, a.getSize());
        a = mds.commitAppend(ROOT, f.getIno(), List.of(ext(l, 1, "s1", 7)), ss, null, ss + 7, 0, false);
        assertEquals(ss + 7, a.getSize());
        assertErrno(Status.EINVAL, () -> mds.commitAppend(ROOT, f.getIno(), List.of(), ss + 7, null, ss + 7, 0, false));
        assertEquals(List.of("s0", "s1"), mds.getExtents(ROOT, f.getIno(), 0, 0).stream().map(Extent::getBlockKey).toList());
    }

    /**
     * A commit with bases applies only while each of those stripes still has the extent the
     * client built its block on (none: the stripe had no extent), birth epochs aside; otherwise
     * EAGAIN, before any check of the extents, and nothing changes. Stripes without a base are
     * replaced whatever they hold (the client wrote them whole).
     */
    @Test
    void aCommitWithBasesAppliesOnlyWhileThoseStripesAreUnchanged() {
        registerOsts(2);
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        Layout l = f.getLayout();
        long ss = l.getStripeSize();
        long ino = f.getIno();
        mds.commitExtents(ROOT, ino, List.of(ext(l, 0, "a0", ss), ext(l, 1, "a1", 100)), ss + 100, 0);
        Extent a1 = mds.getExtents(ROOT, ino, 1, 2).get(0);
        assertNotEquals(0, a1.getBirthEpoch());
        // another writer replaced stripe 1 since this client read a1
        mds.commitExtents(ROOT, ino, List.of(ext(l, 1, "b1", 200)), ss + 200, 0);
        StripeBase onA1 = StripeBase.newBuilder().setStripeIndex(1).setBase(a1).build();
        assertErrno(Status.EAGAIN, () -> mds.commitExtents(ROOT, ino, List.of(ext(l, 0, "c0", ss), ext(l, 1, "c1", 150)),
                List.of(onA1), ss + 150, 0, false));
        StripeBase onNone = StripeBase.newBuilder().setStripeIndex(1).build();
        assertErrno(Status.EAGAIN, () -> mds.commitExtents(ROOT, ino, List.of(ext(l, 1, "c1", 150)), List.of(onNone), ss + 150, 0, false));
        // stale even though the new extent would end past the size: EAGAIN, not EINVAL
        assertErrno(Status.EAGAIN, () -> mds.commitExtents(ROOT, ino, List.of(ext(l, 1, "c1", 300)), List.of(onA1), ss + 10, 0, false));
        assertEquals(List.of("a0", "b1"), mds.getExtents(ROOT, ino, 0, 0).stream().map(Extent::getBlockKey).toList());
        assertEquals(ss + 200, mds.getattr(ROOT, ino).getSize());
        assertEquals(List.of("a1"), gc().stream().map(GcRecord::getBlockKey).toList(), "only the first replacement freed a block");
        // on the live extent (as a client has it, without its birth epoch): applied
        Extent b1 = mds.getExtents(ROOT, ino, 1, 2).get(0);
        StripeBase onB1 = StripeBase.newBuilder().setStripeIndex(1).setBase(b1.toBuilder().clearBirthEpoch()).build();
        StripeBase stripe2None = StripeBase.newBuilder().setStripeIndex(2).build();
        Attr a = mds.commitExtents(ROOT, ino, List.of(ext(l, 1, "c1", 250), ext(l, 2, "c2", 5)), List.of(onB1, stripe2None),
                2 * ss + 5, 0, false);
        assertEquals(2 * ss + 5, a.getSize());
        assertEquals(List.of("a0", "c1", "c2"), mds.getExtents(ROOT, ino, 0, 0).stream().map(Extent::getBlockKey).toList());
    }

    /**
     * Every commit of new bytes changes the mtime: libfuse's auto_cache keeps another client's
     * cached pages when size and mtime are unchanged, so a commit that repeated the previous
     * mtime (writes older than another handle's commit, or a flush with no write since) left
     * other clients reading old pages. An mtime in the future (utimensat) is not carried on.
     */
    @Test
    void everyDataCommitMovesTheMtimeForwardUnlessItWasSetInTheFuture() {
        registerOsts(1);
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        Layout l = f.getLayout();
        long t = f.getCtimeNs() + 1000;
        Attr a = mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "b0", 10)), 10, t);
        assertEquals(t, a.getMtimeNs());
        Attr same = mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "b1", 10)), 10, t);
        assertEquals(t + 1, same.getMtimeNs(), "same write time: 1 ns later, so the version differs");
        Attr older = mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "b2", 10)), 10, t - 500);
        assertEquals(t + 2, older.getMtimeNs(), "older writes committed later: not back in time");
        Attr later = mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "b3", 10)), 10, t + 700);
        assertEquals(t + 700, later.getMtimeNs());
        long future = System.currentTimeMillis() * 1_000_000L + 3_600_000_000_000L;
        mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(MdsClient.SETATTR_MTIME).setMtimeNs(future).build());
        Attr now = mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "b4", 10)), 10, t + 800);
        assertEquals(t + 800, now.getMtimeNs(), "a write after an mtime set in the future sets the write's time");
        assertEquals(future + 1, Namespace.dataMtime(future, future, future - 1), "never equal to the previous one");
    }
}
