package dev.granary.mds;

import dev.granary.mds.proto.Extent;

/** Rules about extents shared by the MDS and its clients. */
public final class Extents {
    private Extents() {}

    /**
     * Whether two extents (either may be null: none) name the same bytes: same stripe, OST, block,
     * offset, length and inline data; birth epochs aside (a client holds the extents it committed
     * without the epoch the MDS stamped on them). The condition of a commit's bases
     * ({@code CommitExtentsRequest.bases}, {@code append_base} in mds.proto).
     */
    public static boolean sameData(Extent a, Extent b) {
        if (a == null || b == null) {
            return a == b;
        }
        return a.getStripeIndex() == b.getStripeIndex() && a.getOst() == b.getOst() && a.getBlockKey().equals(b.getBlockKey())
                && a.getBlockOffset() == b.getBlockOffset() && a.getLength() == b.getLength()
                && a.getInlineData().equals(b.getInlineData());
    }
}
