package dev.granary.mds.client;

import dev.granary.mds.proto.MdsRequest;
import dev.granary.mds.proto.MdsResponse;

/**
 * Carries MDS requests: mutations through Raft {@code send}, reads through linearizable
 * {@code sendReadOnly}. Implementations: over a Ratis client (real clusters), or applying the
 * namespace state machine to a local RocksDB directly (unit tests of logic above the MDS).
 */
public interface MdsTransport extends AutoCloseable {
    /** Sends a mutation; returns once committed by a Raft majority and applied. */
    MdsResponse write(MdsRequest request);

    /** Sends a read-only request. */
    MdsResponse read(MdsRequest request);

    /**
     * Sends a large read-only request (a batch of many reads, megabytes of answer) on its own, so
     * that it never holds up the small reads other threads wait on (the Raft transport batches
     * those and keeps one batch in flight). By default the same as {@link #read}.
     */
    default MdsResponse readBulk(MdsRequest request) {
        return read(request);
    }

    @Override
    void close();
}
