package dev.granary.raft;

/**
 * The state machine refused a request: {@link KvApplier#prepare} or {@link KvApplier#query} threw,
 * or the serving peer stopped after a failed apply. Not retried by {@link RaftKvClient}: retrying the
 * same request would fail the same way. The message carries the server-side message.
 */
public final class RaftStateMachineException extends RuntimeException {
    /** Creates the exception with a one-line message and its cause. */
    public RaftStateMachineException(String message, Throwable cause) {
        super(message, cause);
    }
}
