package dev.granary.client.vfs;

import java.util.Map;
import java.util.TreeMap;

/**
 * The byte ranges of one stripe that a handle wrote since its last commit: disjoint, non-adjacent
 * half-open intervals {@code [lo, hi)} of offsets inside the stripe (bytes, 0 .. stripe size).
 * A stripe's new block holds these bytes plus old bytes around them (read-modify-write); the old
 * bytes must be the stripe's bytes as the MDS has them when the block is committed, so that a
 * write changes no byte it did not write (POSIX write(2); NFS sends only the written range too).
 * When another client changed the stripe meanwhile, the ranges say which bytes of the block are
 * this handle's, to be laid again over the newer block ({@link OpenFile}'s commit).
 *
 * <p>Not thread-safe: guarded by the owning handle's lock.
 */
final class WrittenRanges {
    /** lo -> hi of each interval. */
    private final TreeMap<Integer, Integer> ranges = new TreeMap<>();

    /** Records bytes {@code [lo, hi)} as written, merging with overlapping or adjacent intervals; an empty range is ignored. */
    void add(int lo, int hi) {
        if (hi <= lo) {
            return;
        }
        Map.Entry<Integer, Integer> before = ranges.floorEntry(lo);
        if (before != null && before.getValue() >= lo) {
            lo = before.getKey();
            hi = Math.max(hi, before.getValue());
            ranges.remove(before.getKey());
        }
        Map.Entry<Integer, Integer> next;
        while ((next = ranges.ceilingEntry(lo)) != null && next.getKey() <= hi) {
            hi = Math.max(hi, next.getValue());
            ranges.remove(next.getKey());
        }
        ranges.put(lo, hi);
    }

    /** Records every interval of {@code other} as written here too. */
    void addAll(WrittenRanges other) {
        other.ranges.forEach(this::add);
    }

    /** Whether bytes {@code [0, n)} are all written (n > 0). */
    boolean covers(int n) {
        Map.Entry<Integer, Integer> first = ranges.firstEntry();
        return first != null && first.getKey() == 0 && first.getValue() >= n;
    }

    /** One past the last written byte (0 when nothing is written). */
    int end() {
        return ranges.isEmpty() ? 0 : ranges.lastEntry().getValue();
    }

    /** The number of disjoint intervals. */
    int intervals() {
        return ranges.size();
    }

    /** Whether nothing is written. */
    boolean isEmpty() {
        return ranges.isEmpty();
    }

    /** Copies the written bytes of {@code from} into {@code to} at the same offsets (both at least {@link #end()} long). */
    void copy(byte[] from, byte[] to) {
        ranges.forEach((lo, hi) -> System.arraycopy(from, lo, to, lo, hi - lo));
    }

    @Override
    public String toString() {
        return ranges.toString();
    }
}
