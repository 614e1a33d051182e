package dev.granary.mds.client;

import com.google.protobuf.InvalidProtocolBufferException;
import dev.granary.mds.proto.MdsRequest;
import dev.granary.mds.proto.MdsResponse;
import dev.granary.mds.server.MdsStateMachine;
import dev.granary.raft.KvTxn;
import dev.granary.raft.RocksKv;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Objects;
import java.util.function.LongSupplier;

/**
 * An {@link MdsTransport} that runs {@link MdsStateMachine} directly on a local {@link RocksKv},
 * without Raft: for unit tests of logic above the MDS and for a single-node dev mode. Writes are
 * applied one at a time (synchronized) with an increasing log index that starts after the
 * database's last applied index, and stamped with {@code now_ns} from the clock; reads run on a
 * RocksDB snapshot. Like a Raft peer, it stops after an unexpected apply failure: every later
 * call throws {@link IllegalStateException}.
 */
public final class LocalMdsTransport implements MdsTransport {
    private final RocksKv kv;
    private final boolean ownsKv;
    private final LongSupplier clockNs;
    private final MdsStateMachine sm = new MdsStateMachine();
    private long nextIndex;
    private volatile Throwable failure;
    private volatile boolean closed;

    /**
     * Uses an open database (its column families must include the MDS ones); not closed by
     * {@link #close()} unless {@code ownsKv}.
     *
     * @param clockNs wall clock, ns since the Unix epoch
     */
    public LocalMdsTransport(RocksKv kv, boolean ownsKv, LongSupplier clockNs) {
        this.kv = Objects.requireNonNull(kv, "kv");
        this.ownsKv = ownsKv;
        this.clockNs = Objects.requireNonNull(clockNs, "clockNs");
        this.nextIndex = kv.lastAppliedIndex() + 1;
    }

    /** Opens (creating if missing) the MDS database in {@code dir}, owned by the transport, with the system clock. */
    public static LocalMdsTransport open(Path dir) {
        return new LocalMdsTransport(RocksKv.open(dir, new MdsStateMachine().columnFamilies()), true,
                LocalMdsTransport::systemNanos);
    }

    /** The system wall clock in ns since the Unix epoch. */
    public static long systemNanos() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    /** The underlying database. */
    public RocksKv kv() {
        return kv;
    }

    private void checkUsable() {
        if (closed) {
            throw new IllegalStateException("LocalMdsTransport is closed");
        }
        if (failure != null) {
            throw new IllegalStateException("MDS stopped after an apply failure: " + failure, failure);
        }
    }

    /** Applies a mutation and commits it; returns the reply. */
    @Override
    public synchronized MdsResponse write(MdsRequest request) {
        checkUsable();
        byte[] entry = sm.prepare(request.toByteArray(), clockNs.getAsLong());
        KvTxn txn = kv.newTxn();
        byte[] reply;
        try {
            reply = sm.apply(nextIndex, entry, txn);
            kv.commit(txn, 1, nextIndex);
        } catch (RuntimeException | Error e) {
            failure = e;
            kv.abort(txn);
            throw e;
        }
        nextIndex++;
        return parse(reply);
    }

    /** Answers a read on a consistent snapshot of the database. */
    @Override
    public MdsResponse read(MdsRequest request) {
        checkUsable();
        try (RocksKv.SnapshotReader snap = kv.snapshotReader()) {
            return parse(sm.query(request.toByteArray(), snap));
        }
    }

    private static MdsResponse parse(byte[] reply) {
        try {
            return MdsResponse.parseFrom(reply);
        } catch (InvalidProtocolBufferException e) {
            throw new IllegalStateException("state machine returned a malformed MdsResponse", e);
        }
    }

    /** Closes the database if owned. Idempotent. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (ownsKv) {
            kv.close();
        }
    }
}
