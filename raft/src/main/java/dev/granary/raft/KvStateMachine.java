package dev.granary.raft;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.time.Instant;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.apache.ratis.proto.RaftProtos.LogEntryProto;
import org.apache.ratis.proto.RaftProtos.StateMachineLogEntryProto;
import org.apache.ratis.protocol.ClientInvocationId;
import org.apache.ratis.protocol.Message;
import org.apache.ratis.protocol.RaftClientRequest;
import org.apache.ratis.protocol.RaftGroupId;
import org.apache.ratis.protocol.exceptions.StateMachineException;
import org.apache.ratis.server.RaftServer;
import org.apache.ratis.server.protocol.TermIndex;
import org.apache.ratis.server.raftlog.RaftLog;
import org.apache.ratis.server.storage.RaftStorage;
import org.apache.ratis.statemachine.StateMachineStorage;
import org.apache.ratis.statemachine.TransactionContext;
import org.apache.ratis.statemachine.impl.BaseStateMachine;
import org.apache.ratis.statemachine.impl.FileListSnapshotInfo;
import org.apache.ratis.thirdparty.com.google.protobuf.ByteString;
import org.apache.ratis.thirdparty.com.google.protobuf.UnsafeByteOperations;
import org.apache.ratis.util.LifeCycle;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Ratis state machine of one peer: replicates a {@link KvApplier} over a {@link RocksKv} kept
 * in the Ratis state machine directory ({@code <storage>/<group>/sm/db}).
 *
 * <ul>
 *   <li>{@link #startTransaction} (leader only) runs {@link KvApplier#prepare} and appends its
 *       result as the entry's log data, behind a header with the leader's clock.</li>
 *   <li>{@link #applyTransaction} applies one entry in one RocksDB write batch together with the
 *       entry's (term, index) and its client call (client id, call id, reply), remembered for
 *       {@link #CALL_MEMORY}: a call appended again by a retry, or replayed after a restart, is
 *       answered with its first reply and not applied twice (Ratis' retry cache lives in memory
 *       only, so it forgets calls on restart and on a snapshot install). An exception from the applier or RocksDB marks this peer failed and
 *       is rethrown: Ratis' state machine updater then closes this peer (it never diverges).</li>
 *   <li>{@link #query} answers reads on a RocksDB snapshot.</li>
 *   <li>{@link #takeSnapshot} writes a RocksDB checkpoint to {@code sm/snapshots/snapshot.T_I};
 *       Ratis sends its files to a lagging follower, and {@link #reinitialize} swaps the received
 *       checkpoint in as the database.</li>
 * </ul>
 */
public final class KvStateMachine extends BaseStateMachine {
    private static final Logger LOG = LoggerFactory.getLogger(KvStateMachine.class);

    /**
     * How long applied client calls are remembered, by the leader's clock: a retry of a call
     * within this time is answered with the first reply instead of being applied again, whatever
     * happened between (leader change, restart, snapshot install). More than the longest
     * {@link RaftKvClient} call with the default budget.
     */
    static final Duration CALL_MEMORY = Duration.ofMinutes(2);

    /** {@link #CALL_MEMORY} as applied; tests shorten it to make replies expire at once. */
    static volatile Duration callMemory = CALL_MEMORY;

    /**
     * Log indexes between two looks for expired calls (at indexes that are multiples of it, the
     * same on every peer). A look makes and positions a RocksDB iterator: at every entry it was 14%
     * of the CPU of applying a create or unlink. Each look forgets up to 256 calls, 16 per entry
     * between two looks, and an entry adds one, so none is kept much past {@link #CALL_MEMORY}.
     */
    static final long FORGET_EVERY = 16;

    /**
     * The reply of a replayed entry whose call is no longer remembered (see {@link #replayedReply}).
     * Starts with a zero byte, which no protobuf message does (field number 0 is invalid), so it
     * cannot be an applier's protobuf reply; {@link RaftKvClient#write} turns it into an error.
     */
    static final byte[] EXPIRED_REPLY = "\0granary.raft: reply no longer kept".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    private final KvApplier applier;
    private final boolean syncCommits;
    private final CheckpointSnapshotStorage storage = new CheckpointSnapshotStorage();
    /** Read: use of {@link #kv}; write: swapping or closing it. */
    private final ReentrantReadWriteLock dbLock = new ReentrantReadWriteLock();
    private final Object applyLock = new Object();
    private volatile RocksKv kv;
    private volatile Throwable failure;

    /**
     * @param applier the application logic to replicate
     * @param syncCommits write every applied entry to RocksDB's WAL and fsync it (not needed for
     *     safety: without it the database skips its WAL, and after a crash the Raft log is
     *     replayed from the last-applied index of its last flush)
     */
    public KvStateMachine(KvApplier applier, boolean syncCommits) {
        this.applier = Objects.requireNonNull(applier, "applier");
        this.syncCommits = syncCommits;
    }

    /** Same as {@code new KvStateMachine(applier, false)}. */
    public KvStateMachine(KvApplier applier) {
        this(applier, false);
    }

    /** Opens (or restores from the latest snapshot) the db and reports its last-applied entry to Ratis. */
    @Override
    public void initialize(RaftServer server, RaftGroupId groupId, RaftStorage raftStorage) throws IOException {
        super.initialize(server, groupId, raftStorage);
        storage.init(raftStorage);
        getLifeCycle().startAndTransition(this::loadDb);
    }

    /** Opens the database, restoring it from the latest snapshot when missing or older. */
    private void loadDb() throws IOException {
        FileListSnapshotInfo snap = storage.getLatestSnapshot();
        Path dbDir = storage.dbDir();
        RocksKv opened = null;
        if (Files.exists(dbDir.resolve("CURRENT"))) {
            opened = RocksKv.open(dbDir, applier.columnFamilies(), syncCommits);
            if (snap != null && opened.lastAppliedIndex() < snap.getIndex()) {
                LOG.info("{}: db at index {} is behind snapshot {}: restoring from the snapshot",
                        getId(), opened.lastAppliedIndex(), snap.getTermIndex());
                opened.close();
                opened = null;
            }
        }
        if (opened == null && snap != null) {
            restoreFromSnapshot(storage.latestSnapshotDir().orElseThrow());
        }
        if (opened == null) {
            opened = RocksKv.open(dbDir, applier.columnFamilies(), syncCommits);
        }
        kv = opened;
        applier.databaseOpened();
        if (opened.lastAppliedIndex() >= 0) {
            setLastAppliedTermIndex(TermIndex.valueOf(opened.lastAppliedTerm(), opened.lastAppliedIndex()));
        } else if (snap != null) {
            setLastAppliedTermIndex(snap.getTermIndex());
        }
        LOG.info("{}: state machine db {} opened, last applied {}, latest snapshot {}",
                getId(), dbDir, getLastAppliedTermIndex(), snap == null ? "none" : snap.getTermIndex());
    }

    /** Replaces sm/db with a copy (SST hard links) of the checkpoint in {@code snapshotDir}. */
    private void restoreFromSnapshot(Path snapshotDir) throws IOException {
        Path dbDir = storage.dbDir();
        Path staging = storage.smDir().resolve("db.restoring");
        CheckpointSnapshotStorage.deleteRecursively(staging);
        CheckpointSnapshotStorage.materialize(snapshotDir, staging);
        CheckpointSnapshotStorage.deleteRecursively(dbDir);
        Files.move(staging, dbDir, StandardCopyOption.ATOMIC_MOVE);
        LOG.info("{}: restored db from snapshot {}", getId(), snapshotDir.getFileName());
    }

    /** The checkpoint-based snapshot storage under {@code sm/}. */
    @Override
    public StateMachineStorage getStateMachineStorage() {
        return storage;
    }

    /** The latest checkpoint snapshot (its files are what Ratis sends to a lagging follower), or null. */
    @Override
    public FileListSnapshotInfo getLatestSnapshot() {
        return storage.getLatestSnapshot();
    }

    /** Leader side: runs {@link KvApplier#prepare} and puts its result in the log entry. */
    @Override
    public TransactionContext startTransaction(RaftClientRequest request) {
        TransactionContext.Builder b = TransactionContext.newBuilder().setStateMachine(this).setClientRequest(request);
        Exception refusal = null;
        byte[] prepared = null;
        Instant now = Instant.now();
        long nowNanos = now.getEpochSecond() * 1_000_000_000L + now.getNano();
        try {
            checkNotFailed();
            byte[] in = request.getMessage().getContent().toByteArray();
            prepared = applier.prepare(in, nowNanos);
            if (prepared == null) {
                refusal = new IOException("prepare returned null");
            }
        } catch (Exception e) {
            refusal = e;
        }
        if (refusal != null) {
            // Ratis answers the client with a StateMachineException and appends nothing.
            TransactionContext ctx = b.setLogData(ByteString.EMPTY).build();
            ctx.setException(refusal);
            return ctx;
        }
        return b.setLogData(UnsafeByteOperations.unsafeWrap(encodeEntry(nowNanos, prepared))).build();
    }

    /**
     * Applies one committed entry atomically with its (term, index). On any exception the peer is
     * marked failed and the exception is rethrown, so Ratis stops this peer instead of diverging.
     */
    @Override
    public CompletableFuture<Message> applyTransaction(TransactionContext trx) {
        LogEntryProto entry = trx.getLogEntry();
        long term = entry.getTerm();
        long index = entry.getIndex();
        byte[] reply;
        dbLock.readLock().lock();
        try {
            checkNotFailedUnchecked();
            synchronized (applyLock) {
                RocksKv db = kv;
                StateMachineLogEntryProto smEntry = trx.getStateMachineLogEntry();
                byte[] callId = callId(smEntry);
                if (index <= db.lastAppliedIndex()) {
                    // Already in the db: Ratis replays the log from its latest snapshot (from the
                    // start when there is none, e.g. after SIGKILL), but the db is durable on its
                    // own and records the last applied index. Skip without moving the applied
                    // index backwards (BaseStateMachine asserts it only grows), and answer with
                    // the reply remembered when the entry was applied: Ratis puts it in its retry
                    // cache, where a client still retrying this call finds it.
                    LOG.debug("{}: entry {} already applied (db at {}), skipping", getId(), index, db.lastAppliedIndex());
                    return replayedReply(db, callId, index);
                }
                byte[] earlier = callId == null ? null : db.callReply(callId);
                if (earlier != null) {
                    // A retry of a call already applied, appended again because the leader's
                    // in-memory retry cache did not know it (restart, snapshot install, new
                    // leader): answer with the first reply and change nothing.
                    LOG.info("{}: entry {} retries call {} applied before: answered with its first reply",
                            getId(), index, ClientInvocationId.valueOf(smEntry));
                    db.markApplied(term, index);
                    updateLastAppliedTermIndex(term, index);
                    return CompletableFuture.completedFuture(Message.valueOf(UnsafeByteOperations.unsafeWrap(earlier)));
                }
                Entry e = decodeEntry(smEntry.getLogData());
                KvTxn txn = db.newTxn();
                try {
                    reply = applier.apply(index, e.payload(), txn);
                    byte[] r = reply == null ? new byte[0] : reply;
                    RocksKv.Call call = callId == null ? null : new RocksKv.Call(callId, e.stampNanos(), r);
                    long forgetBefore = e.stampNanos() > 0 && index % FORGET_EVERY == 0
                            ? e.stampNanos() - callMemory.toNanos() : Long.MIN_VALUE;
                    db.commit(txn, term, index, call, forgetBefore);
                } catch (Throwable t) {
                    db.abort(txn);
                    throw t;
                }
                updateLastAppliedTermIndex(term, index);
            }
        } catch (Throwable t) {
            if (failure == null) {
                failure = t;
            }
            LOG.error("{}: applying log entry ({}, {}) failed; stopping this peer so it cannot diverge",
                    getId(), term, index, t);
            throw new IllegalStateException("apply of log entry (" + term + ", " + index + ") failed on "
                    + getId() + ": " + t, t);
        } finally {
            dbLock.readLock().unlock();
        }
        return CompletableFuture.completedFuture(
                Message.valueOf(UnsafeByteOperations.unsafeWrap(reply == null ? new byte[0] : reply)));
    }

    /**
     * The reply of an entry replayed over a db that already holds it: the one remembered when it
     * was applied. None is kept for calls older than {@link #CALL_MEMORY}: then the answer is
     * {@link #EXPIRED_REPLY}, which a client still retrying the call (none retries that long)
     * gets as a clear error rather than a made-up success. Not a failed future: Ratis logs each of
     * those as an ERROR with its stack, and a restart replaying thousands of old entries buried
     * the log in them.
     */
    private CompletableFuture<Message> replayedReply(RocksKv db, byte[] callId, long index) {
        byte[] stored = callId == null ? null : db.callReply(callId);
        if (stored != null) {
            return CompletableFuture.completedFuture(Message.valueOf(UnsafeByteOperations.unsafeWrap(stored)));
        }
        LOG.debug("{}: the reply of replayed entry {} is no longer kept", getId(), index);
        return CompletableFuture.completedFuture(Message.valueOf(UnsafeByteOperations.unsafeWrap(EXPIRED_REPLY)));
    }

    /** The client id and call id of a client's entry (what its retries share), or null for other entries. */
    static byte[] callId(StateMachineLogEntryProto e) {
        ByteString client = e.getClientId();
        if (client.isEmpty()) {
            return null;
        }
        return ByteBuffer.allocate(client.size() + 8).put(client.asReadOnlyByteBuffer()).putLong(e.getCallId()).array();
    }

    /** Version byte of the log data written by {@link #startTransaction}: stamp and applier bytes follow. */
    private static final byte ENTRY_FORMAT = 0;

    /** Log data: the format byte, the leader's clock (ns, big-endian) and the applier's prepared bytes. */
    static byte[] encodeEntry(long stampNanos, byte[] prepared) {
        return ByteBuffer.allocate(9 + prepared.length).put(ENTRY_FORMAT).putLong(stampNanos).put(prepared).array();
    }

    /** A decoded log entry. Entries written before the header existed (never starting with 0) have stamp 0. */
    record Entry(long stampNanos, byte[] payload) {}

    static Entry decodeEntry(ByteString data) {
        if (data.size() >= 9 && data.byteAt(0) == ENTRY_FORMAT) {
            ByteBuffer b = data.asReadOnlyByteBuffer();
            b.get();
            long stamp = b.getLong();
            byte[] payload = new byte[b.remaining()];
            b.get(payload);
            return new Entry(stamp, payload);
        }
        return new Entry(0, data.toByteArray());
    }

    /** Entries without a mutation (no-op, configuration): recorded as applied in the db too. */
    @Override
    public void notifyTermIndexUpdated(long term, long index) {
        dbLock.readLock().lock();
        try {
            RocksKv db = kv;
            if (db != null && failure == null) {
                synchronized (applyLock) {
                    if (index <= db.lastAppliedIndex()) {
                        return; // replayed entry already in the db: see applyTransaction
                    }
                    db.markApplied(term, index);
                }
            }
        } finally {
            dbLock.readLock().unlock();
        }
        super.notifyTermIndexUpdated(term, index);
    }

    /** Read-only request: {@link KvApplier#query} on a RocksDB snapshot of this peer's db. */
    @Override
    public CompletableFuture<Message> query(Message request) {
        dbLock.readLock().lock();
        try {
            checkNotFailed();
            RocksKv db = kv;
            if (db == null) {
                throw new IOException("state machine of " + getId() + " is not open");
            }
            try (RocksKv.SnapshotReader reader = db.snapshotReader()) {
                byte[] out = applier.query(request.getContent().toByteArray(), reader);
                return CompletableFuture.completedFuture(
                        Message.valueOf(UnsafeByteOperations.unsafeWrap(out == null ? new byte[0] : out)));
            }
        } catch (Throwable t) {
            // Ratis turns only a StateMachineException into an error reply the client does not retry.
            return CompletableFuture.failedFuture(new StateMachineException("query failed on " + getId() + ": " + t, t));
        } finally {
            dbLock.readLock().unlock();
        }
    }

    /**
     * Writes a RocksDB checkpoint of the db at its last-applied (term, index) into
     * {@code sm/snapshots/snapshot.T_I}, makes it the latest snapshot and deletes older ones.
     *
     * @return the log index of the snapshot, or -1 when nothing was applied yet
     * @throws IOException on any failure (RocksDB, the file system), never an unchecked
     *         exception: Ratis' state machine updater logs an IOException once and goes on (or
     *         stops), while an unchecked one sends it into a loop that retries the snapshot
     *         forever and never stops the server (seen with the storage folder deleted)
     */
    @Override
    public long takeSnapshot() throws IOException {
        try {
            return checkpointSnapshot();
        } catch (RuntimeException e) {
            throw new IOException(getId() + ": snapshot failed: " + e.getMessage(), e);
        }
    }

    private long checkpointSnapshot() throws IOException {
        dbLock.readLock().lock();
        try {
            RocksKv db = kv;
            if (db == null || failure != null) {
                return RaftLog.INVALID_LOG_INDEX;
            }
            synchronized (applyLock) {
                long term = db.lastAppliedTerm();
                long index = db.lastAppliedIndex();
                if (index < 0) {
                    return RaftLog.INVALID_LOG_INDEX;
                }
                Path dir = storage.snapshotDir(term, index);
                if (!Files.isDirectory(dir)) {
                    Path tmp = storage.snapshotsDir().resolve(".checkpoint-" + index + "-" + System.nanoTime());
                    db.checkpoint(tmp);
                    Files.move(tmp, dir, StandardCopyOption.ATOMIC_MOVE);
                }
                storage.reloadLatest();
                storage.deleteOldSnapshots(CheckpointSnapshotStorage.SNAPSHOTS_RETAINED);
                LOG.info("{}: took snapshot {} at ({}, {})", getId(), dir.getFileName(), term, index);
                return index;
            }
        } finally {
            dbLock.readLock().unlock();
        }
    }

    /** Called by Ratis before a snapshot from the leader is installed. Idempotent. */
    @Override
    public void pause() {
        LifeCycle lc = getLifeCycle();
        if (lc.compareAndTransition(LifeCycle.State.RUNNING, LifeCycle.State.PAUSING)) {
            lc.transition(LifeCycle.State.PAUSED);
        }
    }

    /** Called by Ratis after a snapshot was installed: the received checkpoint becomes the db. */
    @Override
    public void reinitialize() throws IOException {
        dbLock.writeLock().lock();
        try {
            storage.reloadLatest();
            FileListSnapshotInfo snap = storage.getLatestSnapshot();
            Optional<Path> snapDir = storage.latestSnapshotDir();
            RocksKv old = kv;
            kv = null;
            if (old != null) {
                old.close();
            }
            if (snapDir.isPresent()) {
                restoreFromSnapshot(snapDir.get());
            }
            RocksKv opened = RocksKv.open(storage.dbDir(), applier.columnFamilies(), syncCommits);
            kv = opened;
            applier.databaseOpened();
            TermIndex ti = opened.lastAppliedIndex() >= 0
                    ? TermIndex.valueOf(opened.lastAppliedTerm(), opened.lastAppliedIndex()) : null;
            if (snap != null && (ti == null || ti.getIndex() < snap.getIndex())) {
                ti = snap.getTermIndex();
            }
            if (ti != null) {
                setLastAppliedTermIndex(ti);
            }
            LOG.info("{}: reinitialized from snapshot {}, last applied {}", getId(),
                    snap == null ? "none" : snap.getTermIndex(), ti);
        } finally {
            dbLock.writeLock().unlock();
        }
        LifeCycle lc = getLifeCycle();
        if (lc.getCurrentState() == LifeCycle.State.PAUSED) {
            lc.transition(LifeCycle.State.STARTING);
            lc.transition(LifeCycle.State.RUNNING);
        }
    }

    /** Closes the db. */
    @Override
    public void close() throws IOException {
        dbLock.writeLock().lock();
        try {
            RocksKv old = kv;
            kv = null;
            if (old != null) {
                old.close();
            }
        } finally {
            dbLock.writeLock().unlock();
        }
        super.close();
    }

    /** The exception that stopped this peer, or null while healthy. */
    public Throwable failure() {
        return failure;
    }

    /** Last log index applied by this peer (kept after close or failure), or -1 when none. */
    public long lastAppliedIndex() {
        TermIndex ti = getLastAppliedTermIndex();
        return ti == null ? -1 : ti.getIndex();
    }

    /**
     * A reader of this peer's local db (on a follower it may lag the leader). Each call reads the
     * db current at that moment; iterators become invalid if a snapshot install swaps the db.
     */
    public KvReader localReader() {
        return new KvReader() {
            @Override
            public byte[] get(String cf, byte[] key) {
                dbLock.readLock().lock();
                try {
                    return openDb().get(cf, key);
                } finally {
                    dbLock.readLock().unlock();
                }
            }

            @Override
            public KvIterator seek(String cf, byte[] from, byte[] until) {
                dbLock.readLock().lock();
                try {
                    return openDb().seek(cf, from, until);
                } finally {
                    dbLock.readLock().unlock();
                }
            }
        };
    }

    private RocksKv openDb() {
        RocksKv db = kv;
        if (db == null) {
            throw new IllegalStateException("state machine db of " + getId() + " is not open");
        }
        return db;
    }

    private void checkNotFailed() throws IOException {
        Throwable f = failure;
        if (f != null) {
            throw new IOException("peer " + getId() + " stopped after a failed apply: " + f, f);
        }
    }

    private void checkNotFailedUnchecked() {
        Throwable f = failure;
        if (f != null) {
            throw new IllegalStateException("peer " + getId() + " stopped after a failed apply: " + f, f);
        }
    }
}
