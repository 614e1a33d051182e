package dev.granary.raft;

import java.util.List;

/**
 * The application logic a {@link RaftKvServer} replicates. The raft module knows nothing about
 * files: the MDS namespace implements this interface.
 *
 * <p>Rules (deterministic replicas): {@link #prepare} runs on the leader only, before the entry
 * is appended, and fixes everything that could differ between replicas (time); {@link #apply}
 * must depend only on the request bytes, the log index and the database. A user error is a
 * normal reply that writes nothing. An exception thrown from {@link #apply} stops the peer
 * (it must not diverge).
 */
public interface KvApplier {
    /** Column families this applier uses (besides RocksDB's "default", which the raft module owns). */
    List<String> columnFamilies();

    /**
     * Leader-side rewrite of a mutation before it is appended to the log; e.g. stamps the time.
     *
     * @param request the client's request bytes
     * @param nowNanos the leader's wall clock, ns since the Unix epoch
     * @return the bytes to append (may be {@code request} itself)
     */
    default byte[] prepare(byte[] request, long nowNanos) {
        return request;
    }

    /**
     * Applies one committed mutation. Writes go to {@code txn}, committed atomically afterwards.
     *
     * @param logIndex the Raft log index of the entry, unique and increasing: usable to allocate ids
     * @return the reply bytes sent to the client; not beginning with a zero byte followed by
     *     "granary.raft:" (reserved for a replayed entry whose reply expired; a protobuf message
     *     never begins with a zero byte)
     */
    byte[] apply(long logIndex, byte[] request, KvTxn txn);

    /**
     * Called each time the state machine opens the database later {@link #apply} calls write to
     * (at start, and when a snapshot Ratis installed replaces it). An applier that remembers a fact
     * about the database's content, to skip reading it on every entry, forgets it here.
     */
    default void databaseOpened() {}

    /** Answers a read-only request against a consistent view. */
    byte[] query(byte[] request, KvReader reader);
}
