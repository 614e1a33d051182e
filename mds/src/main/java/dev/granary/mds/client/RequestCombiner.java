package dev.granary.mds.client;

import dev.granary.mds.FsException;
import dev.granary.mds.proto.BatchReadRequest;
import dev.granary.mds.proto.BatchWriteRequest;
import dev.granary.mds.proto.MdsRequest;
import dev.granary.mds.proto.MdsResponse;
import dev.granary.mds.proto.Status;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.Function;

/**
 * Combines the MDS requests of concurrent threads, one kind per combiner (reads or mutations): at
 * most {@code maxInFlight} Raft calls are in flight; requests that arrive while they are form a
 * queue, and when one returns, everything queued goes out as one batch: reads as one
 * {@code batch_read} (one linearizable Raft read that the MDS answers request by request),
 * mutations as one {@code batch_write} (one Raft entry, applied request by request, each on its
 * own; a caller's own {@code batch_write} is spliced in, its requests kept together and in order).
 * A lone request is sent at once, as before; eight threads opening small files share a round trip,
 * a gRPC call on each side and a read-index check, and eight threads closing small files share a
 * log entry, its replication and its apply on every peer, instead of paying one each (group
 * commit, as databases and Lustre's MDT do).
 *
 * <p>Each read is still linearizable and each mutation still committed when its call returns: the
 * batch is sent after every request in it was invoked, and each caller waits for its own answer.
 * A thread's requests keep their order (it waits for each); requests of different threads in one
 * batch were concurrent, so any order is one they could have had. The thread whose call ends a
 * round trip does not send the next batch: the first queued caller does, so no thread waits for
 * calls that are not its own. A transport failure fails every request of the batch with the same
 * {@link FsException}; a request's own error status reaches only its caller. A caller that sends
 * a batch with an interrupt pending sends it anyway and keeps the interrupt (an interrupt that
 * arrives during the call still fails the batch). Thread-safe.
 */
final class RequestCombiner {
    /** What a combiner batches: reads into a batch_read, or mutations into a batch_write. */
    enum Kind { READS, WRITES }

    /** One queued request: the request and the future its caller waits on (a result, or "send this batch"). */
    private static final class Waiter {
        final MdsRequest request;
        final CompletableFuture<MdsResponse> reply = new CompletableFuture<>();
        /** Set (before {@link #turn} completes) when this waiter must send these waiters' requests. */
        List<Waiter> batch;
        final CompletableFuture<Void> turn = new CompletableFuture<>();

        Waiter(MdsRequest request) {
            this.request = request;
        }
    }

    /** Requests per batch at most (a caller's batch_write counts as one); more wait for the next round trip. */
    static final int MAX_BATCH_REQUESTS = 64;
    /** Serialized request bytes per batch at most (the first request always goes). */
    static final int MAX_BATCH_BYTES = 2 << 20;

    private final Kind kind;
    private final Function<MdsRequest, MdsResponse> send;
    private final int maxInFlight;
    private final Object lock = new Object();
    private int inFlight;
    private List<Waiter> queue = new ArrayList<>();
    private long batches;
    private long batchedRequests;

    /**
     * @param kind        what this combiner carries: reads or mutations, never both
     * @param send        sends one request (or a batch) and returns its response; may throw
     *                    {@link FsException} (EIO) for a transport failure
     * @param maxInFlight calls in flight at most before later ones queue (>= 1)
     */
    RequestCombiner(Kind kind, Function<MdsRequest, MdsResponse> send, int maxInFlight) {
        if (maxInFlight < 1) {
            throw new IllegalArgumentException("maxInFlight must be >= 1, got " + maxInFlight);
        }
        this.kind = java.util.Objects.requireNonNull(kind, "kind");
        this.send = send;
        this.maxInFlight = maxInFlight;
    }

    /** Sends {@code request} alone or in a batch with other threads' requests; returns its own response. */
    MdsResponse call(MdsRequest request) {
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
            // The batch carries other threads' requests: an interrupt pending on this thread must not
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

    /** After a round trip: the queued requests go out (sent by the first of them), or a slot is freed. */
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
            batchedRequests += next.size();
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
            List<MdsRequest> flat = new ArrayList<>();
            int[] ends = new int[batch.size()];
            for (int i = 0; i < batch.size(); i++) {
                MdsRequest r = batch.get(i).request;
                if (kind == Kind.WRITES && r.getOpCase() == MdsRequest.OpCase.BATCH_WRITE) {
                    flat.addAll(r.getBatchWrite().getRequestsList()); // spliced in, kept together and in order
                } else {
                    flat.add(r);
                }
                ends[i] = flat.size();
            }
            MdsRequest.Builder b = MdsRequest.newBuilder(); // each request carries its own caller
            if (kind == Kind.READS) {
                b.setBatchRead(BatchReadRequest.newBuilder().addAllRequests(flat));
            } else {
                b.setBatchWrite(BatchWriteRequest.newBuilder().addAllRequests(flat));
            }
            MdsResponse all = send.apply(b.build());
            if (all.getStatus() != Status.OK || all.getBatchCount() != flat.size()) {
                throw new FsException(all.getStatus() == Status.OK ? Status.EIO : all.getStatus(),
                        "MDS answered a batch of " + flat.size() + " requests with " + all.getBatchCount() + " responses"
                                + (all.getMessage().isEmpty() ? "" : ": " + all.getMessage()));
            }
            int from = 0;
            for (int i = 0; i < batch.size(); i++) {
                Waiter w = batch.get(i);
                if (kind == Kind.WRITES && w.request.getOpCase() == MdsRequest.OpCase.BATCH_WRITE) {
                    w.reply.complete(MdsResponse.newBuilder().setStatus(Status.OK)
                            .addAllBatch(all.getBatchList().subList(from, ends[i])).build());
                } else {
                    w.reply.complete(all.getBatch(from));
                }
                from = ends[i];
            }
        } catch (Throwable t) {
            for (Waiter w : batch) {
                w.reply.completeExceptionally(t);
            }
        }
    }

    /** Batches sent so far (of two requests or more, or one request that had queued). */
    long batches() {
        synchronized (lock) {
            return batches;
        }
    }

    /** Requests waiting for a round trip to return (tests). */
    int queuedForTests() {
        synchronized (lock) {
            return queue.size();
        }
    }

    /** Requests that went out in those batches (a caller's batch_write counts as one). */
    long batchedRequests() {
        synchronized (lock) {
            return batchedRequests;
        }
    }
}
