package dev.granary.raft;

/**
 * The writes of one applied Raft log entry. Reads see the database plus this transaction's own
 * writes; everything is committed atomically in one RocksDB write batch together with the
 * last-applied log index, or not at all.
 */
public interface KvTxn extends KvReader {
    /** Puts {@code key -> value} in column family {@code cf}. */
    void put(String cf, byte[] key, byte[] value);

    /** Deletes {@code key} from column family {@code cf} (no error when absent). */
    void delete(String cf, byte[] key);
}
