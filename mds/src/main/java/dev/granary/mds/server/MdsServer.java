package dev.granary.mds.server;

import dev.granary.raft.KvReader;
import dev.granary.raft.RaftKvServer;
import dev.granary.raft.RaftServerConfig;
import java.util.Objects;
import java.util.Optional;

/**
 * One MDS peer: a {@link RaftKvServer} (Apache Ratis over gRPC, RocksDB state) hosting the
 * {@link MdsStateMachine}. Three peers form a group; one is allowed for development. Clients
 * reach the group with {@code RaftMdsTransport}.
 */
public final class MdsServer implements AutoCloseable {
    private final RaftKvServer raft;

    /** Creates the peer; nothing runs until {@link #start()}. */
    public MdsServer(RaftServerConfig config) {
        this.raft = new RaftKvServer(Objects.requireNonNull(config, "config"), new MdsStateMachine());
    }

    /** Creates and starts a peer. @throws IllegalStateException if its address is in use */
    public static MdsServer start(RaftServerConfig config) {
        MdsServer s = new MdsServer(config);
        s.start();
        return s;
    }

    /** Starts the peer (formats its storage on first start, recovers it otherwise). */
    public void start() {
        raft.start();
    }

    /** This peer's id. */
    public String peerId() {
        return raft.peerId();
    }

    /** True while this peer is the leader of its group. */
    public boolean isLeader() {
        return raft.isLeader();
    }

    /** True while the peer runs (not closed, not stopped by a failed apply). */
    public boolean isRunning() {
        return raft.isRunning();
    }

    /** The exception of a failed apply that stopped this peer, if any. */
    public Optional<Throwable> failure() {
        return raft.failure();
    }

    /** This peer's local database (may lag the leader): diagnostics and tests. */
    public KvReader localReader() {
        return raft.localReader();
    }

    /** The underlying Raft peer. */
    public RaftKvServer raft() {
        return raft;
    }

    /** Stops the peer and closes its database. Idempotent. */
    @Override
    public void close() {
        raft.close();
    }
}
