package dev.granary.mds;

import dev.granary.mds.proto.Layout;
import java.util.List;

/**
 * How a new regular file's layout follows from its directory's template (Lustre's default
 * striping, {@code lfs setstripe} on a directory): the MDS applies it when it creates a file, and
 * a client that answers a create itself (a deferred create) applies the same rule, so both get
 * the same layout for the same inode number and OST table.
 */
public final class Layouts {
    private Layouts() {}

    /**
     * The layout of new file {@code ino} under {@code template}: the template itself when it names
     * its OSTs; else {@code stripe_count} OSTs (0: all) taken in table order from position
     * {@code ino mod n} on, wrapping, so files spread over the OSTs. {@code ostIndices} is the OST
     * table's indices in the MDS's order; with none, stripe count 0 (no data can be written).
     */
    public static Layout resolve(Layout template, long ino, List<Integer> ostIndices) {
        if (template.getOstsCount() > 0) {
            return template;
        }
        int n = ostIndices.size();
        if (n == 0) {
            return template.toBuilder().setStripeCount(0).build();
        }
        int count = template.getStripeCount() == 0 ? n : Math.min(template.getStripeCount(), n);
        int start = (int) Long.remainderUnsigned(ino, n);
        Layout.Builder b = Layout.newBuilder().setStripeSize(template.getStripeSize()).setStripeCount(count);
        for (int i = 0; i < count; i++) {
            b.addOsts(ostIndices.get((start + i) % n));
        }
        return b.build();
    }
}
