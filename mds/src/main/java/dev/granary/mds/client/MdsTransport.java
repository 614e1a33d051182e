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

    @Override
    void close();
}
