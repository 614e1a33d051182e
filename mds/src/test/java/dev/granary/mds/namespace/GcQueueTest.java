package dev.granary.mds.namespace;

import static org.junit.jupiter.api.Assertions.*;

import dev.granary.mds.MdsTestBase;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Extent;
import dev.granary.mds.proto.GcBlock;
import dev.granary.mds.proto.Layout;
import dev.granary.mds.proto.SetAttrRequest;
import dev.granary.mds.proto.Status;
import java.util.List;
import org.junit.jupiter.api.Test;

/** gc_list and gc_done: the GC worker's view of the queue of freed blocks (grace period, pages, retries, root only). */
class GcQueueTest extends MdsTestBase {

    private static List<String> keys(MdsClient.GcPage p) {
        return p.blocks().stream().map(GcBlock::getBlockKey).toList();
    }

    @Test
    void freedBlocksAreListedOldestFirstOnceTheirGraceIsOverAndDroppedWhenDone() {
        registerOsts(2);
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        Layout l = f.getLayout();
        long ss = l.getStripeSize();
        mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "a0", ss), ext(l, 1, "a1", ss)), 2 * ss, 0);
        long beforeOverwrite = clock.get();
        mds.commitExtents(ROOT, f.getIno(), List.of(ext(l, 0, "b0", ss)), 2 * ss, 0); // frees a0
        long afterOverwrite = clock.get();
        SetAttrRequest trunc = SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(MdsClient.SETATTR_SIZE).setSize(ss).build();
        mds.setattr(ROOT, trunc); // frees a1
        Attr g = mds.create(ROOT, R, b("g"), 0644, true);
        mds.commitExtents(ROOT, g.getIno(), List.of(ext(g.getLayout(), 0, "c0", 10)), 10, 0);
        mds.unlink(ROOT, R, b("g")); // frees c0
        long end = clock.get();

        assertEquals(List.of(), keys(mds.gcList(ROOT, 0, 0, beforeOverwrite)), "nothing was freed before the overwrite");
        assertEquals(List.of("a0"), keys(mds.gcList(ROOT, 0, 0, afterOverwrite + 1)), "the grace keeps what was freed later");
        MdsClient.GcPage all = mds.gcList(ROOT, 0, 0, end + 1);
        assertEquals(List.of("a0", "a1", "c0"), keys(all));
        assertFalse(all.more());
        GcBlock a0 = all.blocks().get(0);
        assertEquals(f.getIno(), a0.getIno());
        assertEquals(0, a0.getStripeIndex());
        assertEquals(l.getOsts(0), a0.getOst());
        assertTrue(a0.getDeathTimeNs() > beforeOverwrite && a0.getDeathTimeNs() <= afterOverwrite, "stamped when freed");
        assertTrue(all.blocks().stream().noneMatch(GcBlock::getStillReferenced));

        MdsClient.GcPage first = mds.gcList(ROOT, 0, 2, end + 1);
        assertEquals(List.of("a0", "a1"), keys(first));
        assertTrue(first.more(), "a third block is eligible past the limit");
        MdsClient.GcPage rest = mds.gcList(ROOT, first.blocks().get(1).getSeq() + 1, 2, end + 1);
        assertEquals(List.of("c0"), keys(rest));
        assertFalse(rest.more());

        List<Long> seqs = first.blocks().stream().map(GcBlock::getSeq).toList();
        assertEquals(2, mds.gcDone(ROOT, seqs));
        assertEquals(0, mds.gcDone(ROOT, seqs), "a retried gc_done changes nothing");
        assertEquals(List.of("c0"), keys(mds.gcList(ROOT, 0, 0, end + 1)));
        assertEquals(List.of("b0"), mds.getExtents(ROOT, f.getIno(), 0, 0).stream().map(Extent::getBlockKey).toList(),
                "the live extent is untouched");
    }

    @Test
    void onlyRootReadsOrDropsTheQueue() {
        assertErrno(Status.EPERM, () -> mds.gcList(ALICE, 0, 0, Long.MAX_VALUE));
        assertErrno(Status.EPERM, () -> mds.gcDone(ALICE, List.of(0L)));
    }
}
