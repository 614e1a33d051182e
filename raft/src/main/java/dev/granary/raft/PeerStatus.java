package dev.granary.raft;

import java.util.Optional;

/**
 * What one peer of a Raft group reports about itself (Ratis group info), or why it could not be
 * asked. Indices are -1 when unknown.
 *
 * @param id the peer's id
 * @param address its {@code host:port}
 * @param role {@code LEADER}, {@code FOLLOWER}, {@code CANDIDATE}, ... or {@code UNREACHABLE}
 * @param term the term of the peer's last applied entry
 * @param appliedIndex last log index applied to its state machine
 * @param committedIndex last log index it knows committed
 * @param snapshotIndex log index of its latest snapshot (taken or installed)
 * @param error why the peer did not answer (empty when it did)
 */
public record PeerStatus(String id, String address, String role, long term, long appliedIndex, long committedIndex,
                         long snapshotIndex, Optional<String> error) {
    /** Role reported for a peer that did not answer. */
    public static final String UNREACHABLE = "UNREACHABLE";

    /** True when the peer answered and is the leader. */
    public boolean isLeader() {
        return "LEADER".equals(role);
    }

    /** True when the peer answered. */
    public boolean reachable() {
        return error.isEmpty();
    }
}
