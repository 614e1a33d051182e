package dev.granary.mds.client;

import dev.granary.mds.FsException;
import dev.granary.mds.proto.BatchReadRequest;
import dev.granary.mds.proto.MdsRequest;
import dev.granary.mds.proto.MdsResponse;
import dev.granary.mds.proto.Status;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.Function;

/**
 * Combines the MDS reads of concurrent threads: at most {@code maxInFlight} Raft reads are in
 * flight; reads that arrive while they are form a queue, and when one returns, everything queued
 * goes out as one {@code batch_read} (one linearizable Raft read that the MDS answers request by
 * request). A lone reader is sent at once, as before; eight threads opening small files share a
 * round trip, a gRPC call on each side and a read-index check instead of paying one each (the same
 * idea as group commit, for reads).
 *
 * <p>Each read is still linearizable: the batch is sent after every read in it was invoked. The
 * thread whose read ends a round trip does not send the next batch: the first queued reader does,
 * so no thread waits for reads that are not its own. A transport failure fails every read of the
 * batch with the same {@link FsException}; a read's own error status reaches only its caller.
 * A reader that sends a batch with an interrupt pending sends it anyway and keeps the interrupt
 * (an interrupt that arrives during the call still fails the batch). Thread-safe.
 */
final class ReadCombiner {
    /** One queued read: its request and the future its caller waits on (a result, or "send this batch"). */
    private static final class Waiter {
        final MdsRequest request;
        final CompletableFuture<MdsResponse> reply = new CompletableFuture<>();
        /** Set (before {@link #turn} completes) when this waiter must send these waiters' reads. */
        List<Waiter> batch;
        final CompletableFuture<Void> turn = new CompletableFuture<>();

        Waiter(MdsRequest request) {
            this.request = request;
        }
    }

    /** Reads per batch at most; more wait for the next round trip. */
    static final int MAX_BATCH_REQUESTS = 64;
    /** Serialized request bytes per batch at most (the first read always goes). */
    static final int MAX_BATCH_BYTES = 2 << 20;

    private final Function<MdsRequest, MdsResponse> send;
    private final int maxInFlight;
    private final Object lock = new Object();
    private int inFlight;
    private List<Waiter> queue = new ArrayList<>();
    private long batches;
    private long batchedReads;

    /**
     * @param send        sends one read (or a batch_read) and returns its response; may throw
     *                    {@link FsException} (EIO) for a transport failure
     * @param maxInFlight reads in flight at most before later ones queue (>= 1)
     */
    ReadCombiner(Function<MdsRequest, MdsResponse> send, int maxInFlight) {
        if (maxInFlight < 1) {
            throw new IllegalArgumentException("maxInFlight must be >= 1, got " + maxInFlight);
        }
        this.send = send;
        this.maxInFlight = maxInFlight;
    }

    /** Sends {@code request} alone or in a batch with other threads' reads; returns its own response. */
    MdsResponse read(MdsRequest request) {
        Waiter me;
        synchronized (lock) {
            if (inFlight < maxInFlight) {
                inFlight++;
                me = null;
            } else {
                me = new Waiter(request);
                queue.add(me);
            }
        }
        if (me == null) {
            try {
                return send.apply(request);
            } finally {
                handOff();
            }
        }
        me.turn.join();
        if (me.batch != null) {
            // The batch carries other threads' reads: an interrupt pending on this thread must not
            // fail them (the Raft client gives up on an interrupted caller). It is kept for later.
            boolean interrupted = Thread.interrupted();
            try {
                sendBatch(me.batch);
            } finally {
                handOff();
                if (interrupted) {
                    Thread.currentThread().interrupt();
                }
            }
        }
        try {
            return me.reply.join();
        } catch (CompletionException e) {
            if (e.getCause() instanceof Error err) {
                throw err;
            }
            throw e.getCause() instanceof RuntimeException r ? r : e;
        }
    }

    /** After a round trip: the queued reads go out (sent by the first of them), or a slot is freed. */
    private void handOff() {
        List<Waiter> next;
        synchronized (lock) {
            if (queue.isEmpty()) {
                inFlight--;
                return;
            }
            int n = 0;
            long bytes = 0;
            while (n < queue.size() && n < MAX_BATCH_REQUESTS) {
                bytes += queue.get(n).request.getSerializedSize();
                if (n > 0 && bytes > MAX_BATCH_BYTES) {
                    break;
                }
                n++;
            }
            next = new ArrayList<>(queue.subList(0, n));
            queue.subList(0, n).clear();
            batches++;
            batchedReads += next.size();
        }
        Waiter sender = next.get(0);
        sender.batch = next;
        sender.turn.complete(null);
        for (int i = 1; i < next.size(); i++) {
            next.get(i).turn.complete(null);
        }
    }

    private void sendBatch(List<Waiter> batch) {
        try {
            if (batch.size() == 1) {
                batch.get(0).reply.complete(send.apply(batch.get(0).request));
                return;
            }
            BatchReadRequest.Builder b = BatchReadRequest.newBuilder();
            for (Waiter w : batch) {
                b.addRequests(w.request);
            }
            MdsResponse all = send.apply(MdsRequest.newBuilder().setBatchRead(b).build());
            if (all.getStatus() != Status.OK || all.getBatchCount() != batch.size()) {
                throw new FsException(all.getStatus() == Status.OK ? Status.EIO : all.getStatus(),
                        "MDS answered a batch of " + batch.size() + " reads with " + all.getBatchCount() + " responses"
                                + (all.getMessage().isEmpty() ? "" : ": " + all.getMessage()));
            }
            for (int i = 0; i < batch.size(); i++) {
                batch.get(i).reply.complete(all.getBatch(i));
            }
        } catch (Throwable t) {
            for (Waiter w : batch) {
                w.reply.completeExceptionally(t);
            }
        }
    }

    /** Batches sent so far (of two reads or more, or one read that had queued). */
    long batches() {
        synchronized (lock) {
            return batches;
        }
    }

    /** Reads waiting for a round trip to return (tests). */
    int queuedForTests() {
        synchronized (lock) {
            return queue.size();
        }
    }

    /** Reads that went out in those batches. */
    long batchedReads() {
        synchronized (lock) {
            return batchedReads;
        }
    }
}
