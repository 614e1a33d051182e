package dev.granary.raft;

/**
 * Read access to the replicated key-value state: RocksDB column families by name.
 * Keys and values are raw bytes; ordering is unsigned lexicographic (RocksDB's bytewise comparator).
 */
public interface KvReader {
    /** Returns the value of {@code key} in column family {@code cf}, or null when absent. */
    byte[] get(String cf, byte[] key);

    /**
     * Returns an iterator positioned at the first key {@code >= from} in {@code cf}, ascending.
     * The caller must close it.
     */
    KvIterator seek(String cf, byte[] from);
}
