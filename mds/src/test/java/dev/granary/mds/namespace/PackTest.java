package dev.granary.mds.namespace;

import static org.junit.jupiter.api.Assertions.*;

import dev.granary.mds.MdsTestBase;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Extent;
import dev.granary.mds.proto.GcBlock;
import dev.granary.mds.proto.MdsRequest;
import dev.granary.mds.proto.MdsResponse;
import dev.granary.mds.proto.SetAttrRequest;
import dev.granary.mds.proto.Status;
import dev.granary.mds.proto.StripeBase;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Small-file packs (mds.proto CommitPackRequest) on the real namespace state machine: the files of
 * one pack commit in one request, each on its own; the pack's block is freed exactly when the last
 * file referring to it lets go (unlink, overwrite, truncate to 0), never before; and a packed
 * extent anywhere else is refused.
 */
class PackTest extends MdsTestBase {
    static final int LEN = 100 * 1024;
    int ost;

    @BeforeEach
    void osts() {
        registerOsts(1); // every file's stripe 0 on OST 0: one pack can hold them all
    }

    Attr file(String name) {
        Attr a = mds.create(ROOT, R, b(name), 0644, true);
        ost = a.getLayout().getOsts(0);
        return a;
    }

    /** The commit of {@code f}'s LEN bytes at {@code slot * LEN} of pack {@code key}. */
    MdsRequest packed(Attr f, String key, int slot) {
        Extent e = Extent.newBuilder().setStripeIndex(0).setOst(ost).setBlockKey(key).setBlockOffset((long) slot * LEN)
                .setLength(LEN).setPacked(true).build();
        return mds.commitExtentsRequest(ROOT, f.getIno(), List.of(e),
                List.of(StripeBase.newBuilder().setStripeIndex(0).build()), LEN, 0, false);
    }

    List<MdsResponse> commitPack(String key, Attr... files) {
        List<MdsRequest> commits = new ArrayList<>();
        for (int i = 0; i < files.length; i++) {
            commits.add(packed(files[i], key, i));
        }
        return mds.commitPack(ost, key, (long) files.length * LEN, commits);
    }

    List<String> freed() {
        return mds.gcList(ROOT, 0, 0, Long.MAX_VALUE).blocks().stream().map(GcBlock::getBlockKey).toList();
    }

    long refs(String key) {
        return Namespace.readOnly(kv).packRefs(ost, key);
    }

    @Test
    void thePackIsFreedWhenItsLastFileLetsGoAndNotBefore() {
        Attr a = file("a"), b = file("b"), c = file("c"), d = file("d");
        List<MdsResponse> r = commitPack("p1", a, b, c, d);
        assertEquals(4, r.size());
        for (MdsResponse one : r) {
            assertEquals(Status.OK, one.getStatus(), one.getMessage());
            assertEquals(LEN, one.getAttr().getSize());
        }
        assertEquals(4, refs("p1"));
        Extent e = mds.getExtents(ROOT, c.getIno(), 0, 0).get(0);
        assertEquals("p1", e.getBlockKey());
        assertEquals(2L * LEN, e.getBlockOffset(), "each file at its own offset");
        assertTrue(e.getPacked());

        mds.unlink(ROOT, R, b("a"));
        // b overwritten by a block of its own
        Extent own = ext(b.getLayout(), 0, "b-own", 10);
        mds.commitExtents(ROOT, b.getIno(), List.of(own), 10, 0);
        // c truncated to 0, d truncated shorter (still refers to the pack)
        mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(c.getIno()).setValid(MdsClient.SETATTR_SIZE).setSize(0).build());
        mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(d.getIno()).setValid(MdsClient.SETATTR_SIZE).setSize(7).build());
        assertEquals(1, refs("p1"), "d still refers to it");
        assertFalse(freed().contains("p1"), "not freed while d refers to it");

        mds.unlink(ROOT, R, b("d"));
        assertEquals(0, refs("p1"));
        assertEquals(1, freed().stream().filter("p1"::equals).count(), "freed once, by the last file");
    }

    @Test
    void commitsApplyEachOnTheirOwnAndAPackNoneReferToIsFreedAtOnce() {
        Attr a = file("a"), b = file("b");
        mds.unlink(ROOT, R, b("b")); // removed before its pack was committed
        List<MdsResponse> r = commitPack("p2", a, b);
        assertEquals(Status.OK, r.get(0).getStatus());
        assertEquals(Status.ENOENT, r.get(1).getStatus());
        assertEquals(1, refs("p2"));

        Attr x = file("x");
        mds.unlink(ROOT, R, b("x"));
        List<MdsResponse> none = commitPack("p3", x);
        assertEquals(Status.ENOENT, none.get(0).getStatus());
        assertEquals(0, refs("p3"));
        assertTrue(freed().contains("p3"), "no file refers to it: queued at once");
    }

    @Test
    void aFileCommittedTwiceInOnePackCountsOnce() {
        Attr a = file("a");
        // the second without bases: two handles of one file closed together (the second built on the first)
        MdsRequest second = packed(a, "p4", 1).toBuilder().setCommitExtents(packed(a, "p4", 1).getCommitExtents().toBuilder().clearBases()).build();
        List<MdsRequest> commits = List.of(packed(a, "p4", 0), second);
        mds.commitPack(ost, "p4", 2L * LEN, commits).forEach(one -> assertEquals(Status.OK, one.getStatus(), one.getMessage()));
        assertEquals(1, refs("p4"), "one extent refers to it");
        mds.unlink(ROOT, R, b("a"));
        assertTrue(freed().contains("p4"));
    }

    @Test
    void packedExtentsOutsideTheirCommitPackAndMalformedPacksAreRefused() {
        Attr a = file("a"), b = file("b");
        Extent e = Extent.newBuilder().setStripeIndex(0).setOst(ost).setBlockKey("p5").setLength(LEN).setPacked(true).build();
        assertErrno(Status.EINVAL, () -> mds.commitExtents(ROOT, a.getIno(), List.of(e), LEN, 0));
        commitPack("p5", a).forEach(one -> assertEquals(Status.OK, one.getStatus()));
        // the same pack again: its count must never rise after its commit_pack
        assertErrno(Status.EINVAL, () -> commitPack("p5", b));
        assertEquals(1, refs("p5"));
        // an extent of another block, past the pack's end, or not stripe 0, inside a commit_pack
        MdsRequest other = mds.commitExtentsRequest(ROOT, b.getIno(), List.of(e.toBuilder().setBlockKey("elsewhere").build()),
                List.of(), LEN, 0, false);
        MdsRequest past = mds.commitExtentsRequest(ROOT, b.getIno(), List.of(e.toBuilder().setBlockKey("p6").setBlockOffset(LEN).build()),
                List.of(), 2L * LEN, 0, false);
        List<MdsResponse> r = mds.commitPack(ost, "p6", LEN, List.of(other, past));
        assertEquals(Status.EINVAL, r.get(0).getStatus(), r.get(0).getMessage());
        assertEquals(Status.EINVAL, r.get(1).getStatus(), r.get(1).getMessage());
        assertTrue(freed().contains("p6"), "nothing refers to it");
        // only commit_extents inside
        MdsRequest unlink = MdsRequest.newBuilder().setCaller(ROOT)
                .setUnlink(dev.granary.mds.proto.UnlinkRequest.newBuilder().setParent(R).setName(com.google.protobuf.ByteString.copyFrom(b("a"))))
                .build();
        assertErrno(Status.EINVAL, () -> mds.commitPack(ost, "p7", LEN, List.of(unlink)));
        assertEquals(LEN, mds.getattr(ROOT, a.getIno()).getSize(), "nothing of it applied");
    }

    @Test
    void aPackInsideABatchWriteCountsAsOnItsOwn() {
        Attr a = file("a"), b = file("b");
        MdsRequest pack = MdsRequest.newBuilder().setCaller(ROOT)
                .setCommitPack(dev.granary.mds.proto.CommitPackRequest.newBuilder().setOst(ost).setBlockKey("p8")
                        .setBlockLength(2L * LEN).addCommits(packed(a, "p8", 0)).addCommits(packed(b, "p8", 1)))
                .build();
        List<MdsResponse> r = mds.batchWrite(List.of(pack));
        assertEquals(Status.OK, r.get(0).getStatus());
        assertEquals(2, r.get(0).getBatchCount());
        assertEquals(2, refs("p8"));
    }
}
