package dev.granary.raft;

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.apache.ratis.RaftConfigKeys;
import org.apache.ratis.client.RaftClient;
import org.apache.ratis.client.RaftClientConfigKeys;
import org.apache.ratis.client.impl.RaftClientImpl;
import org.apache.ratis.client.impl.UnorderedAsync;
import org.apache.ratis.client.retry.RequestTypeDependentRetryPolicy;
import org.apache.ratis.conf.RaftProperties;
import org.apache.ratis.proto.RaftProtos.LogInfoProto;
import org.apache.ratis.proto.RaftProtos.RaftClientRequestProto;
import org.apache.ratis.protocol.GroupInfoReply;
import org.apache.ratis.protocol.Message;
import org.apache.ratis.protocol.RaftClientReply;
import org.apache.ratis.protocol.RaftClientRequest;
import org.apache.ratis.protocol.RaftGroup;
import org.apache.ratis.protocol.RaftPeer;
import org.apache.ratis.protocol.RaftPeerId;
import org.apache.ratis.proto.RaftProtos.RaftPeerRole;
import org.apache.ratis.protocol.exceptions.StateMachineException;
import org.apache.ratis.retry.RetryPolicies;
import org.apache.ratis.retry.RetryPolicy;
import org.apache.ratis.rpc.SupportedRpcType;
import org.apache.ratis.thirdparty.com.google.protobuf.ByteString;
import org.apache.ratis.util.TimeDuration;

/**
 * Client of a Raft group: sends mutations through the leader's log and linearizable reads.
 * Thread-safe. Finds the leader itself and retries with exponential backoff (100 ms doubling to
 * 2 s) for a bounded time (default {@link #DEFAULT_RETRY_BUDGET}, attempts that wait for their
 * request timeout included), so callers block while a new leader is elected and then continue.
 * All attempts of one call carry the same call id: the servers' retry cache applies a write once
 * and answers its retries with the first reply, also after a leader change or a restart.
 */
public final class RaftKvClient implements AutoCloseable {
    /** Default time budget for retries of one request. */
    public static final Duration DEFAULT_RETRY_BUDGET = Duration.ofSeconds(60);
    private static final long BASE_SLEEP_MS = 100;
    private static final long MAX_SLEEP_MS = 2_000;
    private static final long REQUEST_TIMEOUT_MS = 3_000;

    private final String clusterName;
    private final Duration retryBudget;
    private final RaftClient client;
    private final RaftGroup group;
    private final Optional<RaftPeerId> initialLeader;
    private volatile RaftPeerId lastReadServer;

    /** A client with the default retry budget of 60 s. */
    public RaftKvClient(String clusterName, List<PeerSpec> peers) {
        this(clusterName, peers, DEFAULT_RETRY_BUDGET);
    }

    /**
     * @param clusterName the group's cluster name (as given to the servers)
     * @param peers the group's peers (any order)
     * @param retryBudget how long one call may retry before {@link RaftUnavailableException} (it
     *     returns at the latest one backoff sleep and one request timeout, 3 s each, after it);
     *     at most the servers' retry cache expiry minus that, or a late retry may apply twice
     * @throws IllegalArgumentException on an empty peer list, blank name or non-positive budget
     */
    public RaftKvClient(String clusterName, List<PeerSpec> peers, Duration retryBudget) {
        this(clusterName, peers, retryBudget, true);
    }

    /** As above; {@code findLeader} false leaves the first peer to Ratis (tests of the search itself). */
    RaftKvClient(String clusterName, List<PeerSpec> peers, Duration retryBudget, boolean findLeader) {
        Objects.requireNonNull(retryBudget, "retryBudget");
        if (retryBudget.isNegative() || retryBudget.isZero()) {
            throw new IllegalArgumentException("retryBudget must be positive, got " + retryBudget);
        }
        this.group = RaftGroups.group(clusterName, peers);
        this.clusterName = clusterName;
        this.retryBudget = retryBudget;
        RaftProperties p = new RaftProperties();
        RaftConfigKeys.Rpc.setType(p, SupportedRpcType.GRPC);
        RaftClientConfigKeys.Rpc.setRequestTimeout(p, TimeDuration.valueOf(REQUEST_TIMEOUT_MS, TimeUnit.MILLISECONDS));
        this.initialLeader = findLeader ? findLeader(group, p) : Optional.empty();
        RaftClient.Builder b = RaftClient.newBuilder()
                .setRaftGroup(group)
                .setProperties(p)
                .setRetryPolicy(retryPolicy(retryBudget));
        initialLeader.ifPresent(b::setLeaderId);
        this.client = b.build();
    }

    /** How long the start-up search for the leader waits for the peers' answers (a request timeout). */
    private static final long FIND_LEADER_TIMEOUT_MS = REQUEST_TIMEOUT_MS;

    /**
     * The peer that says it is the leader, asked once in parallel at start-up, or empty (no answer
     * in time, no leader yet). Why: through Ratis' blocking API a follower answered a linearizable
     * read itself, after asking the leader for its commit index (Raft's ReadIndex, one more round
     * trip and a wait for the follower to apply), and never redirected it, so a client that only
     * reads, as a training node does, stayed on whichever peer it tried first (measured here:
     * getattr p50 1.2 ms through a follower against 0.47 ms on the leader). Reads now take the
     * unordered asynchronous API, which goes to the peer the client takes for the leader, so the
     * search still spares them a wrong first peer. Writes find a new leader after a change.
     */
    static Optional<RaftPeerId> findLeader(RaftGroup group, RaftProperties p) {
        // Not try-with-resources for the executor: its close() would wait for a peer that does not answer.
        ExecutorService ask = Executors.newVirtualThreadPerTaskExecutor();
        try (RaftClient probe = RaftClient.newBuilder().setRaftGroup(group).setProperties(p)
                .setRetryPolicy(RetryPolicies.noRetry()).build()) {
            List<CompletableFuture<Optional<RaftPeerId>>> asked = new ArrayList<>();
            for (RaftPeer peer : group.getPeers()) {
                asked.add(CompletableFuture.supplyAsync(() -> {
                    try {
                        GroupInfoReply info = probe.getGroupManagementApi(peer.getId()).info(group.getGroupId());
                        return info.getRoleInfoProto().getRole() == RaftPeerRole.LEADER
                                ? Optional.of(peer.getId()) : Optional.<RaftPeerId>empty();
                    } catch (IOException | RuntimeException e) {
                        return Optional.<RaftPeerId>empty();
                    }
                }, ask));
            }
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(FIND_LEADER_TIMEOUT_MS);
            for (CompletableFuture<Optional<RaftPeerId>> f : asked) {
                long left = deadline - System.nanoTime();
                try {
                    Optional<RaftPeerId> id = left <= 0 ? f.getNow(Optional.empty()) : f.get(left, TimeUnit.NANOSECONDS);
                    if (id.isPresent()) {
                        return id;
                    }
                } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
                    // no answer from this peer in time: try the next
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return Optional.empty();
                }
            }
            asked.forEach(f -> f.cancel(true));
            return Optional.empty();
        } catch (IOException e) {
            return Optional.empty();
        } finally {
            ask.shutdownNow();
        }
    }

    /** The leader found at start-up (empty: none answered), for tests and diagnostics. */
    Optional<RaftPeerId> initialLeader() {
        return initialLeader;
    }

    /** Asks the leader to hand leadership to {@code peerId} (Raft leadership transfer), for tests. */
    void transferLeadership(String peerId) throws IOException {
        RaftClientReply r = client.admin().transferLeadership(RaftPeerId.valueOf(peerId), REQUEST_TIMEOUT_MS);
        if (!r.isSuccess()) {
            throw r.getException() != null ? r.getException() : new IOException("leadership transfer refused: " + r);
        }
    }

    /** The peer that answered the last read, for tests and diagnostics. */
    Optional<RaftPeerId> lastReadServer() {
        return Optional.ofNullable(lastReadServer);
    }

    /**
     * The longest one call may block with retry budget {@code budget}: the budget, then at most one
     * more backoff sleep (up to 1.5 x the maximum, with jitter) and one more attempt (up to the
     * request timeout).
     */
    static Duration maxCallDuration(Duration budget) {
        return budget.plusMillis(MAX_SLEEP_MS * 3 / 2 + REQUEST_TIMEOUT_MS);
    }

    /**
     * Retries with exponential backoff (100 ms doubling to 2 s, +-50% jitter) until {@code budget}
     * has passed since the call started, time spent waiting on unanswered attempts included (a
     * peer that accepts connections but never answers, e.g. paused, costs a request timeout per
     * attempt). Every attempt of one call carries the same call id, so the servers' retry cache
     * applies it once. A state machine refusal would fail the same way again: not retried.
     */
    static RetryPolicy retryPolicy(Duration budget) {
        RetryPolicy backoff = event -> {
            for (Throwable c = event.getCause(); c != null; c = c.getCause()) {
                if (c instanceof StateMachineException) {
                    return RetryPolicy.NO_RETRY_ACTION;
                }
            }
            TimeDuration sleepTime = TimeDuration.valueOf(backoffMs(event.getAttemptCount()), TimeUnit.MILLISECONDS);
            return () -> sleepTime;
        };
        TimeDuration deadline = TimeDuration.valueOf(budget.toMillis(), TimeUnit.MILLISECONDS);
        return RequestTypeDependentRetryPolicy.newBuilder()
                .setRetryPolicy(RaftClientRequestProto.TypeCase.WRITE, backoff)
                .setRetryPolicy(RaftClientRequestProto.TypeCase.READ, backoff)
                .setTimeout(RaftClientRequestProto.TypeCase.WRITE, deadline)
                .setTimeout(RaftClientRequestProto.TypeCase.READ, deadline)
                .build();
    }

    /**
     * Appends {@code request} to the Raft log and returns the applier's reply once a majority
     * committed and the leader applied it. Sent on Ratis' shared unordered stream, as reads are
     * ({@link #read}): its blocking API opens a new gRPC stream per request (HTTP/2 headers both
     * ways, a new server call), which cost about a third of the client's CPU per create, and its
     * ordered asynchronous API, in Ratis 3.2.2, retried a write to an unreachable group for ever
     * (AlreadyClosedException), past the retry budget. The caller waits for the reply, so one
     * thread's writes still reach the log in the order it made them; retries keep the call id.
     *
     * @throws RaftUnavailableException when no leader answered within the retry budget, or the
     *     calling thread was interrupted
     * @throws RaftStateMachineException when the state machine refused the request
     */
    public byte[] write(byte[] request) {
        Objects.requireNonNull(request, "request");
        byte[] reply = call("write", RaftClientRequest.writeRequestType(), request);
        if (java.util.Arrays.equals(reply, KvStateMachine.EXPIRED_REPLY)) {
            throw new RaftStateMachineException("raft write to cluster " + clusterName + ": this call was applied before "
                    + "a restart more than " + KvStateMachine.CALL_MEMORY.toMinutes() + " min ago and its reply is no "
                    + "longer kept; read its outcome back", null);
        }
        return reply;
    }

    /**
     * A linearizable read: {@link KvApplier#query} on the leader after it confirmed its leadership
     * and applied everything committed before the call.
     *
     * <p>Sent through Ratis' asynchronous unordered API, whose requests share one long-lived gRPC
     * stream per peer, while its blocking API opens a new stream (HTTP/2 headers both ways, a new
     * server call) for every request. Same retries, budget and linearizability (each read gets
     * its own read index or lease check). Not the asynchronous {@code sendReadOnly}: that one
     * takes the ordered stream, which in Ratis 3.2.2 retried a call to an unreachable group for
     * ever, past the retry budget (RaftClusterTest#portInUseAndNoClusterGiveClearErrors hung).
     *
     * @throws RaftUnavailableException when no leader answered within the retry budget, or the
     *     calling thread was interrupted
     * @throws RaftStateMachineException when the query threw
     */
    public byte[] read(byte[] request) {
        Objects.requireNonNull(request, "request");
        return call("read", RaftClientRequest.readRequestType(), request);
    }

    /**
     * Sends one request of {@code type} on the shared unordered stream and waits for its reply,
     * at most the retry budget plus one longest backoff ({@value #MAX_SLEEP_MS} ms; less than
     * {@link #maxCallDuration}): Ratis' own retries stop at the budget, but its asynchronous path
     * let a call to peers that never answer run about one request timeout past it
     * (RetryCacheTest#retryBudgetBoundsTheWholeCallWhenPeersDoNotAnswer).
     *
     * <p>Ratis retries only replies that name another leader or a leader not ready; a reply that
     * carries any other refusal completes the call. Those that mean the peers are between leaders
     * are sent again here, with the same backoff, until the budget is spent: for a read those of
     * {@link #isLeaderlessRead} (right after the whole group restarted, a read failed at once with
     * "ReadIndexException: Leader is unknown", HaFailoverTest); for a write only those a
     * leader gives before it appends the entry ({@link #refusedBeforeAppend}), because the call
     * sent again is a new call id the retry cache does not match with the first.
     */
    private byte[] call(String op, RaftClientRequest.Type type, byte[] request) {
        long deadline = System.nanoTime() + retryBudget.toNanos();
        boolean isRead = type.is(RaftClientRequestProto.TypeCase.READ);
        for (int attempt = 1; ; attempt++) {
            if (Thread.interrupted()) {
                // at once, not sent: a reply that came back before the wait below started was
                // returned although the thread was interrupted (CompletableFuture.get checks the
                // interrupt only when it has to wait; RaftClusterTest failed so on a busy machine)
                throw interrupted(op);
            }
            CompletableFuture<RaftClientReply> pending = UnorderedAsync.send(
                    type, Message.valueOf(ByteString.copyFrom(request)), null, (RaftClientImpl) client);
            IOException refusal;
            try {
                long waitNs = Math.max(0, deadline - System.nanoTime()) + TimeUnit.MILLISECONDS.toNanos(MAX_SLEEP_MS);
                RaftClientReply reply = pending.get(waitNs, TimeUnit.NANOSECONDS);
                if (isRead) {
                    lastReadServer = reply.getServerId();
                }
                if (reply.isSuccess() || reply.getException() == null) {
                    return unwrap(op, reply);
                }
                refusal = reply.getException();
            } catch (InterruptedException e) {
                pending.cancel(true);
                throw interrupted(op);
            } catch (java.util.concurrent.ExecutionException e) {
                refusal = ioCause(e); // UnorderedAsync completes a reply that carries a refusal exceptionally
            } catch (java.util.concurrent.TimeoutException e) {
                pending.cancel(true);
                throw failure(op, new org.apache.ratis.protocol.exceptions.TimeoutIOException(
                        "no reply within the retry budget of " + retryBudget.toMillis() + " ms", e));
            }
            boolean again = isRead ? isLeaderlessRead(refusal) : refusedBeforeAppend(refusal);
            long sleepMs = backoffMs(attempt);
            if (!again || System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(sleepMs) > deadline) {
                throw failure(op, refusal);
            }
            try {
                Thread.sleep(sleepMs);
            } catch (InterruptedException e) {
                throw interrupted(op);
            }
        }
    }

    /** The failure of a call whose thread was interrupted while it waited; the thread stays interrupted. */
    private RuntimeException interrupted(String op) {
        Thread.currentThread().interrupt();
        return failure(op, new java.io.InterruptedIOException("interrupted while waiting for a " + op));
    }

    /**
     * Whether a peer refused a linearizable read because it has no leader it can reach (Ratis
     * RaftServerImpl#readAsync: ReadIndexException from a follower that knows no leader or from a
     * leader that has not committed in its term, ReadException when getting the read index failed).
     */
    static boolean isLeaderlessRead(IOException refusal) {
        return refusal instanceof org.apache.ratis.protocol.exceptions.ReadIndexException
                || refusal instanceof org.apache.ratis.protocol.exceptions.ReadException
                || refusedBeforeAppend(refusal);
    }

    /**
     * Whether a leader refused a write before appending it to its log (Ratis
     * RaftServerImpl#checkLeaderState and the server's start-up and pending-request limits), so
     * sending it again cannot apply it twice.
     */
    static boolean refusedBeforeAppend(IOException refusal) {
        return refusal instanceof org.apache.ratis.protocol.exceptions.ServerNotReadyException
                || refusal instanceof org.apache.ratis.protocol.exceptions.LeaderSteppingDownException
                || refusal instanceof org.apache.ratis.protocol.exceptions.TransferLeadershipException
                || refusal instanceof org.apache.ratis.protocol.exceptions.ResourceUnavailableException;
    }

    /** The sleep before attempt {@code attempt + 1}: 100 ms doubling to 2 s, +-50% jitter (as {@link #retryPolicy}). */
    private static long backoffMs(int attempt) {
        long sleep = Math.min(MAX_SLEEP_MS, BASE_SLEEP_MS << Math.min(Math.max(attempt - 1, 0), 20));
        return (long) (sleep * (0.5 + ThreadLocalRandom.current().nextDouble()));
    }

    /** The IOException behind a failed future (Ratis wraps it in CompletionExceptions), or one that wraps the cause. */
    static IOException ioCause(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof IOException io) {
                return io;
            }
        }
        return new IOException(t.getCause() != null ? t.getCause() : t);
    }

    private byte[] unwrap(String op, RaftClientReply reply) {
        if (reply.isSuccess()) {
            return reply.getMessage() == null ? new byte[0] : reply.getMessage().getContent().toByteArray();
        }
        IOException e = reply.getException();
        throw failure(op, e != null ? e : new IOException("unsuccessful reply " + reply));
    }

    private RuntimeException failure(String op, IOException e) {
        if (e instanceof StateMachineException sme) {
            return new RaftStateMachineException("raft " + op + " refused by the state machine of cluster "
                    + clusterName + ": " + sme.getMessage(), sme);
        }
        if (e instanceof java.io.InterruptedIOException && Thread.currentThread().isInterrupted()) {
            return new RaftUnavailableException("raft " + op + " to cluster " + clusterName + " interrupted while waiting for its reply", e);
        }
        return new RaftUnavailableException("raft " + op + " to cluster " + clusterName + " failed after retrying for about "
                + retryBudget.toSeconds() + " s (no leader reachable?): " + e, e);
    }

    /**
     * Asks every peer, in parallel, for its role and log indices (one request per peer, no retry;
     * a peer that is down or paused is reported {@link PeerStatus#UNREACHABLE} after at most the
     * request timeout). In the group's peer order. For {@code granary status}, tests and diagnostics.
     */
    public List<PeerStatus> peerStatus() {
        // Own threads: the common pool may be tiny (1 thread on 2 cores) and needed by in-process servers.
        try (ExecutorService ask = Executors.newVirtualThreadPerTaskExecutor()) {
            List<CompletableFuture<PeerStatus>> asked = new ArrayList<>();
            for (RaftPeer peer : group.getPeers()) {
                asked.add(CompletableFuture.supplyAsync(() -> status(peer), ask));
            }
            return asked.stream().map(CompletableFuture::join).toList();
        }
    }

    private PeerStatus status(RaftPeer peer) {
        String id = peer.getId().toString();
        try {
            GroupInfoReply info = client.getGroupManagementApi(peer.getId()).info(group.getGroupId());
            LogInfoProto log = info.getLogInfoProto();
            return new PeerStatus(id, peer.getAddress(), info.getRoleInfoProto().getRole().name(),
                    log.hasApplied() ? log.getApplied().getTerm() : -1,
                    log.hasApplied() ? log.getApplied().getIndex() : -1,
                    log.hasCommitted() ? log.getCommitted().getIndex() : -1,
                    log.hasLastSnapshot() ? log.getLastSnapshot().getIndex() : -1,
                    Optional.empty());
        } catch (IOException | RuntimeException e) {
            String why = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage().lines().findFirst().orElse("");
            return new PeerStatus(id, peer.getAddress(), PeerStatus.UNREACHABLE, -1, -1, -1, -1, Optional.of(why));
        }
    }

    /** Closes the client's connections. Idempotent. */
    @Override
    public void close() {
        try {
            client.close();
        } catch (IOException e) {
            // nothing to recover
        }
    }
}
