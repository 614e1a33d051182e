package dev.granary.raft;

/**
 * An unchecked failure of the RocksDB store (I/O error, corruption, closed database). The message
 * carries RocksDB's own message. Not a user error: the state machine stops the peer on it.
 */
public final class KvStoreException extends RuntimeException {
    /** Creates the exception with a one-line message. */
    public KvStoreException(String message) {
        super(message);
    }

    /** Creates the exception with a one-line message and its cause (usually a RocksDBException). */
    public KvStoreException(String message, Throwable cause) {
        super(message, cause);
    }
}
