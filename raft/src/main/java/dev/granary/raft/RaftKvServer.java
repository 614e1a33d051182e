package dev.granary.raft;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.BindException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.apache.ratis.RaftConfigKeys;
import org.apache.ratis.conf.RaftProperties;
import org.apache.ratis.grpc.GrpcConfigKeys;
import org.apache.ratis.protocol.RaftGroup;
import org.apache.ratis.protocol.RaftPeerId;
import org.apache.ratis.rpc.SupportedRpcType;
import org.apache.ratis.server.DivisionInfo;
import org.apache.ratis.server.RaftServer;
import org.apache.ratis.server.RaftServerConfigKeys;
import org.apache.ratis.server.storage.RaftStorage;
import org.apache.ratis.util.ExitUtils;
import org.apache.ratis.util.SizeInBytes;
import org.apache.ratis.util.TimeDuration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One peer of a Raft group: an Apache Ratis server (gRPC transport) hosting a {@link KvStateMachine}
 * around the given {@link KvApplier}.
 *
 * <p>Storage: {@code <storageDir>/<group uuid>/} holds Ratis' log ({@code current/}) and the state
 * machine ({@code sm/db}, {@code sm/snapshots}). The first start formats it; later starts recover
 * from it (the db up to its last-applied index, then the log after it).
 *
 * <p>Not restartable: after {@link #close()} build a new instance on the same storage dir.
 */
public final class RaftKvServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(RaftKvServer.class);

    static {
        // Ratis calls System.exit on some startup failures (e.g. a port in use); in a process that
        // hosts other services (quickstart runs 3 peers in one JVM) it must throw instead.
        ExitUtils.disableSystemExit();
    }

    private final RaftServerConfig config;
    private final RaftGroup group;
    private final KvStateMachine stateMachine;
    private RaftServer server;
    private volatile boolean closed;

    /** Creates the peer (nothing runs until {@link #start()}). */
    public RaftKvServer(RaftServerConfig config, KvApplier applier) {
        this.config = Objects.requireNonNull(config, "config");
        this.group = RaftGroups.group(config.clusterName(), config.peers());
        this.stateMachine = new KvStateMachine(Objects.requireNonNull(applier, "applier"));
    }

    /**
     * Whether a peer takes a Raft snapshot when it stops cleanly (Ratis default: yes). Tests turn
     * it off to restart peers the way a crash (SIGKILL) leaves them: with no snapshot of the latest state.
     */
    static volatile boolean snapshotOnStop = true;

    /**
     * How long Ratis' in-memory retry cache remembers a client call and its reply (Ratis' default:
     * 60 s). It must outlast every retry of a call: a {@link RaftKvClient} call with the default
     * 60 s budget may retry for up to 65 s. The state machine remembers calls as long
     * ({@link KvStateMachine#CALL_MEMORY}), also across restarts.
     */
    static final Duration RETRY_CACHE_EXPIRY = KvStateMachine.CALL_MEMORY;

    /** Ratis properties for this peer (exposed for tests and tuning). */
    RaftProperties properties() {
        RaftProperties p = new RaftProperties();
        RaftConfigKeys.Rpc.setType(p, SupportedRpcType.GRPC);
        PeerSpec self = config.self();
        GrpcConfigKeys.Server.setHost(p, self.host());
        GrpcConfigKeys.Server.setPort(p, self.port());
        RaftServerConfigKeys.setStorageDir(p, List.of(config.storageDir().toFile()));

        TimeDuration min = TimeDuration.valueOf(config.electionTimeoutMin().toMillis(), TimeUnit.MILLISECONDS);
        TimeDuration max = TimeDuration.valueOf(config.electionTimeoutMax().toMillis(), TimeUnit.MILLISECONDS);
        RaftServerConfigKeys.Rpc.setTimeoutMin(p, min);
        RaftServerConfigKeys.Rpc.setTimeoutMax(p, max);
        RaftServerConfigKeys.Rpc.setFirstElectionTimeoutMin(p, min);
        RaftServerConfigKeys.Rpc.setFirstElectionTimeoutMax(p, max);
        RaftServerConfigKeys.Read.setOption(p, RaftServerConfigKeys.Read.Option.LINEARIZABLE);
        // Linearizable reads served by the leader under its lease (Raft thesis 6.4.1): no heartbeat
        // round per read while the leader heard from a majority within 0.9 x the min election timeout.
        RaftServerConfigKeys.Read.setLeaderLeaseEnabled(p, true);
        RaftServerConfigKeys.RetryCache.setExpiryTime(p,
                TimeDuration.valueOf(RETRY_CACHE_EXPIRY.toMillis(), TimeUnit.MILLISECONDS));
        // Send new entries to followers at once instead of batching for up to 10 ms (metadata latency).
        RaftServerConfigKeys.Log.Appender.setWaitTimeMin(p, TimeDuration.valueOf(0, TimeUnit.MILLISECONDS));
        // No Ratis metadata entry (the commit index, written after every commit): it doubled the log
        // entries and fsyncs per write, and the next write queued behind it. Raft needs no durable
        // commit index; a restarted peer learns it from the leader, and our db keeps its own
        // last-applied index (see KvStateMachine).
        RaftServerConfigKeys.Log.setLogMetadataEnabled(p, false);

        int threshold = config.snapshotAutoTriggerThreshold();
        RaftServerConfigKeys.Snapshot.setAutoTriggerEnabled(p, true);
        RaftServerConfigKeys.Snapshot.setTriggerWhenStopEnabled(p, snapshotOnStop);
        RaftServerConfigKeys.Snapshot.setAutoTriggerThreshold(p, threshold);
        RaftServerConfigKeys.Snapshot.setCreationGap(p, Math.min(1024, threshold));
        RaftServerConfigKeys.Log.setPurgeUptoSnapshotIndex(p, true);
        // Keep one threshold of entries before the snapshot: a peer that was down briefly (a
        // restarted process) catches up through the log. Ratis 3.2.2 can also lose its log appender
        // to a restarted peer when the entries that peer asks for were purged (the appender fails
        // and is never restarted, see docs/ARCHITECTURE.md); keeping them makes that rarer.
        RaftServerConfigKeys.Log.setPurgePreservationLogNum(p, threshold);
        RaftServerConfigKeys.Log.setPurgeGap(p, Math.min(1024, threshold));
        SizeInBytes segment = SizeInBytes.valueOf(config.logSegmentSizeMaxBytes());
        RaftServerConfigKeys.Log.setSegmentSizeMax(p, segment);
        return p;
    }

    /**
     * Starts the peer: formats its storage on first start, recovers it otherwise.
     *
     * @throws IllegalStateException if already started/closed, or the address is in use (message names it)
     * @throws UncheckedIOException on a storage or startup error
     */
    public synchronized void start() {
        if (closed) {
            throw new IllegalStateException("raft peer " + config.peerId() + " is closed");
        }
        if (server != null) {
            throw new IllegalStateException("raft peer " + config.peerId() + " already started");
        }
        Path groupDir = config.storageDir().resolve(group.getGroupId().getUuid().toString());
        RaftStorage.StartupOption option = Files.isDirectory(groupDir)
                ? RaftStorage.StartupOption.RECOVER : RaftStorage.StartupOption.FORMAT;
        checkPortFree();
        try {
            Files.createDirectories(config.storageDir());
            server = RaftServer.newBuilder()
                    .setServerId(RaftPeerId.valueOf(config.peerId()))
                    .setGroup(group)
                    .setStateMachine(stateMachine)
                    .setProperties(properties())
                    .setOption(option)
                    .build();
            server.start();
            LOG.info("raft peer {} of cluster {} ({}) started at {} ({})", config.peerId(), config.clusterName(),
                    group.getGroupId(), config.self().address(), option);
        } catch (IOException | RuntimeException e) {
            RaftServer s = server;
            server = null;
            if (s != null) {
                try {
                    s.close();
                } catch (IOException | RuntimeException suppressed) {
                    e.addSuppressed(suppressed);
                }
            }
            closed = true;
            if (hasCause(e, BindException.class)) {
                throw new IllegalStateException("raft peer " + config.peerId() + " cannot listen on "
                        + config.self().address() + ": address already in use", e);
            }
            if (e instanceof IOException io) {
                throw new UncheckedIOException("raft peer " + config.peerId() + " failed to start at "
                        + config.self().address() + " with storage " + config.storageDir() + ": " + e.getMessage(), io);
            }
            throw (RuntimeException) e;
        }
    }

    /** Fails fast with a clear message when this peer's address is taken (Ratis would only log it). */
    private void checkPortFree() {
        PeerSpec self = config.self();
        try (ServerSocket probe = new ServerSocket()) {
            probe.setReuseAddress(true);
            probe.bind(new InetSocketAddress(self.host(), self.port()));
        } catch (IOException e) {
            closed = true;
            throw new IllegalStateException("raft peer " + config.peerId() + " cannot listen on " + self.address()
                    + ": address already in use or not local (" + e.getMessage() + ")", e);
        }
    }

    private static boolean hasCause(Throwable t, Class<? extends Throwable> type) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (type.isInstance(c) || (c.getMessage() != null && c.getMessage().contains("Address already in use"))) {
                return true;
            }
        }
        return false;
    }

    private Optional<DivisionInfo> info() {
        RaftServer s = server;
        if (s == null || closed) {
            return Optional.empty();
        }
        try {
            return Optional.of(s.getDivision(group.getGroupId()).getInfo());
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
    }

    /** This peer's id. */
    public String peerId() {
        return config.peerId();
    }

    /** The configuration this peer was built with. */
    public RaftServerConfig config() {
        return config;
    }

    /** True while this peer is the group's leader (and ready to serve). */
    public boolean isLeader() {
        return info().map(i -> i.isAlive() && i.isLeaderReady()).orElse(false);
    }

    /** The leader this peer currently knows of, if any. */
    public Optional<String> leaderId() {
        return info().filter(DivisionInfo::isAlive)
                .map(DivisionInfo::getLeaderId)
                .map(RaftPeerId::toString);
    }

    /** True while the peer runs: started, not closed, not stopped by a failed apply. */
    public boolean isRunning() {
        return stateMachine.failure() == null && info().map(DivisionInfo::isAlive).orElse(false);
    }

    /** The exception of a failed apply that stopped this peer, if any. */
    public Optional<Throwable> failure() {
        return Optional.ofNullable(stateMachine.failure());
    }

    /** Last log index applied to this peer's db, or -1 when none (or not open). */
    public long lastAppliedIndex() {
        return stateMachine.lastAppliedIndex();
    }

    /** Current Raft term seen by this peer, or -1 when not running. */
    public long currentTerm() {
        return info().map(DivisionInfo::getCurrentTerm).orElse(-1L);
    }

    /**
     * Reads this peer's local db directly (no Raft round trip; a follower may lag the leader).
     * For diagnostics, tests and documented stale reads.
     */
    public KvReader localReader() {
        return stateMachine.localReader();
    }

    /** Index of the latest snapshot (RocksDB checkpoint) of this peer, or -1 when none. */
    public long latestSnapshotIndex() {
        var s = stateMachine.getLatestSnapshot();
        return s == null ? -1 : s.getIndex();
    }

    /** First index still in this peer's Raft log (entries before it were purged), or -1 when not running. */
    long logStartIndex() {
        RaftServer s = server;
        if (s == null || closed) {
            return -1;
        }
        try {
            return s.getDivision(group.getGroupId()).getRaftLog().getStartIndex();
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    /** Stops the peer and closes its db. Idempotent. */
    @Override
    public synchronized void close() {
        closed = true;
        RaftServer s = server;
        server = null;
        if (s != null) {
            try {
                s.close();
            } catch (IOException e) {
                LOG.warn("closing raft peer {} failed: {}", config.peerId(), e.toString());
            }
        }
        try {
            stateMachine.close(); // no-op if Ratis closed it already
        } catch (IOException e) {
            LOG.warn("closing state machine of {} failed: {}", config.peerId(), e.toString());
        }
    }

    @Override
    public String toString() {
        return "RaftKvServer[" + config.peerId() + "@" + config.self().address() + ", " + config.clusterName() + "]";
    }
}
