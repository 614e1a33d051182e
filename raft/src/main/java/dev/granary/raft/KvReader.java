package dev.granary.raft;

/**
 * Read access to the replicated key-value state: RocksDB column families by name.
 * Keys and values are raw bytes; ordering is unsigned lexicographic (RocksDB's bytewise comparator).
 */
public interface KvReader {
    /** Returns the value of {@code key} in column family {@code cf}, or null when absent. */
    byte[] get(String cf, byte[] key);

    /**
     * Returns an iterator positioned at the first key {@code >= from} in {@code cf}, ascending,
     * over every key to the end of the column family. The caller must close it.
     */
    default KvIterator seek(String cf, byte[] from) {
        return seek(cf, from, null);
    }

    /**
     * Returns an iterator positioned at the first key {@code >= from} in {@code cf}, ascending,
     * that ends before the first key {@code >= until} ({@code null}: at the end of the column
     * family). The caller must close it.
     *
     * <p>Give a bound whenever the scan has one (a prefix: {@link #prefixEnd}): RocksDB then stops
     * at the bound instead of stepping over the deletion tombstones that lie past the last live key
     * of the range, which can cost more than the scan itself (RocksDB wiki, "Iterator",
     * {@code iterate_upper_bound}).
     */
    KvIterator seek(String cf, byte[] from, byte[] until);

    /**
     * The smallest key greater than every key that starts with {@code prefix} (unsigned byte
     * order), or null when there is none (the prefix is empty or all {@code 0xFF}).
     */
    static byte[] prefixEnd(byte[] prefix) {
        for (int i = prefix.length - 1; i >= 0; i--) {
            if (prefix[i] != (byte) 0xFF) {
                byte[] end = java.util.Arrays.copyOf(prefix, i + 1);
                end[i]++;
                return end;
            }
        }
        return null;
    }
}
