package dev.granary.raft;

/**
 * The Raft group could not serve a request within the client's retry budget: no leader reachable
 * (peers down, election not settled, network cut) or the client was closed. The request may or
 * may not have been applied; retrying it through the same {@link RaftKvClient} is safe (Ratis'
 * retry cache applies a retried call once).
 */
public final class RaftUnavailableException extends RuntimeException {
    /** Creates the exception with a one-line message and its cause. */
    public RaftUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
