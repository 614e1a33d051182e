package dev.granary.raft;

/**
 * The Raft group could not serve a request within the client's retry budget: no leader reachable
 * (peers down, a majority paused or cut off, election not settled) or the client was closed. A
 * write may or may not have been applied: the attempts inside the failed call were one call (same
 * call id, applied at most once), but a new {@link RaftKvClient#write} is a new call, so a caller
 * that sends it again may apply it twice; read the state back to learn the outcome.
 */
public final class RaftUnavailableException extends RuntimeException {
    /** Creates the exception with a one-line message and its cause. */
    public RaftUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
