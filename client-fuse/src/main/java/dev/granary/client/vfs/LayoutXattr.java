package dev.granary.client.vfs;

import dev.granary.mds.FsException;
import dev.granary.mds.proto.Layout;
import dev.granary.mds.proto.Status;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The layout of a file or directory as the virtual xattr {@value #NAME} (Lustre exposes its
 * layout as the xattr {@code lustre.lov}; {@code lfs getstripe}/{@code setstripe} read and write
 * it). The value is ASCII text, space-separated {@code key=value} pairs:
 * <ul>
 *   <li>{@code stripe_count}: OSTs the data is striped over; {@code -1} = all OSTs;</li>
 *   <li>{@code stripe_size}: bytes per stripe (a multiple of 64 KiB);</li>
 *   <li>{@code stripe_offset}: OST index of the first stripe; {@code -1} = chosen per file
 *       (Granary rotates the start by inode number);</li>
 *   <li>{@code osts}: comma-separated OST indices in stripe order (files always; directories
 *       when fixed with {@code stripe_offset}).</li>
 *   <li>{@code dom_size}: files whose first bytes are held on the MDS (data on MDS, as Lustre's
 *       DoM component): how many, from offset 0. A file of at most {@code client.inline_max}
 *       bytes has all its data there; one that grew past it may keep them there and have the
 *       rest in OST blocks. Absent when stripe 0 is a block or a hole.</li>
 * </ul>
 * Example: {@code stripe_count=2 stripe_size=4194304 stripe_offset=1 osts=1,0}.
 *
 * <p>Setting it accepts {@code stripe_count}, {@code stripe_size} and {@code stripe_offset}; a
 * key left out keeps the current value (a directory's default, or the file's own). The name is
 * not listed by listxattr, so that {@code cp -a} and {@code rsync -X} do not copy it.
 */
public final class LayoutXattr {
    /** The virtual xattr name. */
    public static final String NAME = "granary.layout";

    private LayoutXattr() {}

    /**
     * A parsed request; a field left out is null. (It was -2, so a value of -2 typed by the user
     * read as "not given" and was accepted without a change.)
     */
    record Request(Long stripeSize, Integer stripeCount, Integer stripeOffset) {
        /** Whether the request names the first OST (stripe_offset &gt;= 0; -1 is "chosen per file"). */
        boolean fixesFirstOst() {
            return stripeOffset != null && stripeOffset >= 0;
        }

        /**
         * The first OST this request leaves in force over the current layout {@code cur}: its own
         * stripe_offset when given, else the one {@code cur} fixes (its first listed OST), else -1
         * (chosen per file). A request that names only the size or the count keeps the rest.
         */
        int firstOstOver(Layout cur) {
            if (stripeOffset != null) {
                return stripeOffset;
            }
            return cur.getOstsCount() > 0 ? cur.getOsts(0) : -1;
        }
    }

    /** Formats {@code l} (a file's resolved layout, or a directory's template) as the xattr value. */
    public static String format(Layout l) {
        int count = l.getStripeCount() == 0 ? -1 : l.getStripeCount();
        int offset = l.getOstsCount() == 0 ? -1 : l.getOsts(0);
        StringBuilder b = new StringBuilder();
        b.append("stripe_count=").append(count).append(" stripe_size=").append(l.getStripeSize())
                .append(" stripe_offset=").append(offset);
        if (l.getOstsCount() > 0) {
            b.append(" osts=");
            for (int i = 0; i < l.getOstsCount(); i++) {
                b.append(i == 0 ? "" : ",").append(l.getOsts(i));
            }
        }
        return b.toString();
    }

    /**
     * Parses a value written to the xattr.
     *
     * @throws FsException EINVAL for an unknown key, a malformed number or an empty value
     */
    static Request parse(String text) {
        Long size = null;
        Integer count = null;
        Integer offset = null;
        for (Map.Entry<String, String> f : fields(text).entrySet()) {
            String key = f.getKey();
            String val = f.getValue();
            try {
                switch (key) {
                    case "stripe_size" -> size = Long.parseLong(val);
                    case "stripe_count" -> count = Integer.parseInt(val);
                    case "stripe_offset" -> offset = Integer.parseInt(val);
                    case "osts", "dom_size" -> { } // informative in the formatted value; stripe_offset sets it
                    default -> throw new FsException(Status.EINVAL, NAME + ": unknown key '" + key + "'");
                }
            } catch (NumberFormatException e) {
                throw new FsException(Status.EINVAL, NAME + ": " + key + " '" + val + "' is not a number");
            }
        }
        if (size != null && size <= 0) {
            throw new FsException(Status.EINVAL, NAME + ": stripe_size must be a positive number of bytes, got " + size);
        }
        if (count != null && count != -1 && count < 1) {
            throw new FsException(Status.EINVAL, NAME + ": stripe_count must be -1 or >= 1, got " + count);
        }
        if (offset != null && offset < -1) {
            throw new FsException(Status.EINVAL, NAME + ": stripe_offset must be -1 or an OST index, got " + offset);
        }
        return new Request(size, count, offset);
    }

    /**
     * The {@code key=value} pairs of a value in order, keys in lower case (what {@code granary
     * getstripe} prints from, and what {@link #parse} reads).
     *
     * @throws FsException EINVAL for an empty value or a part that is not key=value
     */
    public static Map<String, String> fields(String text) {
        String[] parts = text.trim().split("\\s+");
        if (parts.length == 0 || parts[0].isEmpty()) {
            throw new FsException(Status.EINVAL, NAME + ": empty value");
        }
        Map<String, String> out = new LinkedHashMap<>();
        for (String p : parts) {
            int eq = p.indexOf('=');
            if (eq <= 0) {
                throw new FsException(Status.EINVAL, NAME + ": '" + p + "' is not key=value");
            }
            out.put(p.substring(0, eq).toLowerCase(Locale.ROOT), p.substring(eq + 1));
        }
        return out;
    }

    /**
     * The layout to ask the MDS for: {@code req} over the current layout {@code cur}, each field
     * the request leaves out kept from {@code cur} (its first OST too: regression, {@code -S 2M}
     * on a directory set with {@code -c 2 -i 1} reset stripe_offset to -1); with a first OST, an
     * explicit OST list starting there, taken in order from the registered OST indices
     * {@code osts} (ascending), wrapping around.
     *
     * @throws FsException EINVAL when stripe_offset is not a registered OST or stripe_count exceeds the OSTs
     */
    static Layout merge(Request req, Layout cur, List<Integer> osts) {
        long size = req.stripeSize() != null ? req.stripeSize() : cur.getStripeSize();
        int count = req.stripeCount() != null ? req.stripeCount()
                : cur.getStripeCount() == 0 ? -1 : cur.getStripeCount();
        Layout.Builder b = Layout.newBuilder().setStripeSize(size).setStripeCount(count);
        int first = req.firstOstOver(cur);
        if (first >= 0) {
            int start = osts.indexOf(first);
            if (start < 0) {
                throw new FsException(Status.EINVAL, NAME + ": stripe_offset " + first + " is not a registered OST " + osts);
            }
            int n = count == -1 ? osts.size() : count;
            if (n > osts.size()) {
                throw new FsException(Status.EINVAL, NAME + ": stripe_count " + n + " exceeds the " + osts.size() + " OSTs");
            }
            List<Integer> list = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                list.add(osts.get((start + i) % osts.size()));
            }
            b.setStripeCount(n).addAllOsts(list);
        }
        return b.build();
    }
}
