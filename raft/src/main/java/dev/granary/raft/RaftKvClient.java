package dev.granary.raft;

import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import org.apache.ratis.RaftConfigKeys;
import org.apache.ratis.client.RaftClient;
import org.apache.ratis.client.RaftClientConfigKeys;
import org.apache.ratis.conf.RaftProperties;
import org.apache.ratis.protocol.Message;
import org.apache.ratis.protocol.RaftClientReply;
import org.apache.ratis.protocol.RaftGroup;
import org.apache.ratis.protocol.exceptions.StateMachineException;
import org.apache.ratis.retry.ExponentialBackoffRetry;
import org.apache.ratis.retry.RetryPolicy;
import org.apache.ratis.rpc.SupportedRpcType;
import org.apache.ratis.thirdparty.com.google.protobuf.ByteString;
import org.apache.ratis.util.TimeDuration;

/**
 * Client of a Raft group: sends mutations through the leader's log and linearizable reads.
 * Thread-safe. Finds the leader itself and retries with exponential backoff (100 ms doubling to
 * 2 s) for a bounded time (default {@link #DEFAULT_RETRY_BUDGET}), so callers block while a new
 * leader is elected and then continue; Ratis' retry cache applies a retried write once.
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

    /** A client with the default retry budget of 60 s. */
    public RaftKvClient(String clusterName, List<PeerSpec> peers) {
        this(clusterName, peers, DEFAULT_RETRY_BUDGET);
    }

    /**
     * @param clusterName the group's cluster name (as given to the servers)
     * @param peers the group's peers (any order)
     * @param retryBudget about how long one request may retry before {@link RaftUnavailableException}
     * @throws IllegalArgumentException on an empty peer list, blank name or non-positive budget
     */
    public RaftKvClient(String clusterName, List<PeerSpec> peers, Duration retryBudget) {
        Objects.requireNonNull(retryBudget, "retryBudget");
        if (retryBudget.isNegative() || retryBudget.isZero()) {
            throw new IllegalArgumentException("retryBudget must be positive, got " + retryBudget);
        }
        RaftGroup group = RaftGroups.group(clusterName, peers);
        this.clusterName = clusterName;
        this.retryBudget = retryBudget;
        RaftProperties p = new RaftProperties();
        RaftConfigKeys.Rpc.setType(p, SupportedRpcType.GRPC);
        RaftClientConfigKeys.Rpc.setRequestTimeout(p, TimeDuration.valueOf(REQUEST_TIMEOUT_MS, TimeUnit.MILLISECONDS));
        this.client = RaftClient.newBuilder()
                .setRaftGroup(group)
                .setProperties(p)
                .setRetryPolicy(retryPolicy(retryBudget))
                .build();
    }

    /**
     * Exponential backoff whose attempt count makes the sleeps add up to about {@code budget}
     * (each failed attempt may also take up to the request timeout).
     */
    static RetryPolicy retryPolicy(Duration budget) {
        long remaining = budget.toMillis();
        int attempts = 0;
        long sleep = BASE_SLEEP_MS;
        while (remaining > 0) {
            remaining -= sleep;
            attempts++;
            sleep = Math.min(MAX_SLEEP_MS, sleep * 2);
        }
        RetryPolicy backoff = ExponentialBackoffRetry.newBuilder()
                .setBaseSleepTime(TimeDuration.valueOf(BASE_SLEEP_MS, TimeUnit.MILLISECONDS))
                .setMaxSleepTime(TimeDuration.valueOf(MAX_SLEEP_MS, TimeUnit.MILLISECONDS))
                .setMaxAttempts(Math.max(1, attempts))
                .build();
        // A state machine refusal would fail the same way again: do not retry it.
        return event -> {
            for (Throwable c = event.getCause(); c != null; c = c.getCause()) {
                if (c instanceof StateMachineException) {
                    return RetryPolicy.NO_RETRY_ACTION;
                }
            }
            return backoff.handleAttemptFailure(event);
        };
    }

    /**
     * Appends {@code request} to the Raft log and returns the applier's reply once a majority
     * committed and the leader applied it.
     *
     * @throws RaftUnavailableException when no leader answered within the retry budget
     * @throws RaftStateMachineException when the state machine refused the request
     */
    public byte[] write(byte[] request) {
        Objects.requireNonNull(request, "request");
        try {
            return unwrap("write", client.io().send(Message.valueOf(ByteString.copyFrom(request))));
        } catch (IOException e) {
            throw failure("write", e);
        }
    }

    /**
     * A linearizable read: {@link KvApplier#query} on the leader after it confirmed its leadership
     * and applied everything committed before the call.
     *
     * @throws RaftUnavailableException when no leader answered within the retry budget
     * @throws RaftStateMachineException when the query threw
     */
    public byte[] read(byte[] request) {
        Objects.requireNonNull(request, "request");
        try {
            return unwrap("read", client.io().sendReadOnly(Message.valueOf(ByteString.copyFrom(request))));
        } catch (IOException e) {
            throw failure("read", e);
        }
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
        return new RaftUnavailableException("raft " + op + " to cluster " + clusterName + " failed after retrying for about "
                + retryBudget.toSeconds() + " s (no leader reachable?): " + e, e);
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
