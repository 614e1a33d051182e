package dev.granary.raft;

import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * Configuration of one {@link RaftKvServer} peer.
 *
 * @param peerId id of this peer; must be one of {@code peers}
 * @param peers all peers of the group (this one included), in the same order on every peer
 * @param clusterName name of the group; the Raft group id is derived from it (UUID v3 of its UTF-8 bytes)
 * @param storageDir directory of the Raft log and state machine (created if missing)
 * @param snapshotAutoTriggerThreshold log entries applied after which a snapshot (RocksDB
 *     checkpoint) is taken and the log before it purged; default {@value #DEFAULT_SNAPSHOT_THRESHOLD}
 * @param electionTimeoutMin lower bound of the randomized election timeout (default 1 s)
 * @param electionTimeoutMax upper bound, greater than the minimum (default 2 s); a leader crash is
 *     noticed after about this long
 * @param logSegmentSizeMaxBytes size of a Raft log segment file, bytes (default 8 MiB); only closed
 *     segments can be purged after a snapshot
 * @throws IllegalArgumentException on a missing or inconsistent value
 */
public record RaftServerConfig(
        String peerId,
        List<PeerSpec> peers,
        String clusterName,
        Path storageDir,
        int snapshotAutoTriggerThreshold,
        Duration electionTimeoutMin,
        Duration electionTimeoutMax,
        long logSegmentSizeMaxBytes) {

    /** Default {@link #snapshotAutoTriggerThreshold()}, log entries. */
    public static final int DEFAULT_SNAPSHOT_THRESHOLD = 10_000;
    /** Default {@link #electionTimeoutMin()}. */
    public static final Duration DEFAULT_ELECTION_TIMEOUT_MIN = Duration.ofSeconds(1);
    /** Default {@link #electionTimeoutMax()}. */
    public static final Duration DEFAULT_ELECTION_TIMEOUT_MAX = Duration.ofSeconds(2);
    /** Default {@link #logSegmentSizeMaxBytes()}, bytes. */
    public static final long DEFAULT_LOG_SEGMENT_SIZE = 8L << 20;

    public RaftServerConfig {
        Objects.requireNonNull(peerId, "peerId");
        Objects.requireNonNull(peers, "peers");
        Objects.requireNonNull(clusterName, "clusterName");
        Objects.requireNonNull(storageDir, "storageDir");
        Objects.requireNonNull(electionTimeoutMin, "electionTimeoutMin");
        Objects.requireNonNull(electionTimeoutMax, "electionTimeoutMax");
        peers = List.copyOf(peers);
        if (peers.isEmpty()) {
            throw new IllegalArgumentException("peers must not be empty");
        }
        Set<String> ids = new HashSet<>();
        Set<String> addresses = new HashSet<>();
        for (PeerSpec p : peers) {
            if (!ids.add(p.id())) {
                throw new IllegalArgumentException("duplicate peer id: " + p.id());
            }
            if (!addresses.add(p.address())) {
                throw new IllegalArgumentException("duplicate peer address: " + p.address());
            }
        }
        if (!ids.contains(peerId)) {
            throw new IllegalArgumentException("peerId '" + peerId + "' is not among the peers " + ids);
        }
        if (clusterName.isBlank()) {
            throw new IllegalArgumentException("clusterName must not be blank");
        }
        if (snapshotAutoTriggerThreshold < 1) {
            throw new IllegalArgumentException("snapshotAutoTriggerThreshold must be >= 1 log entries, got "
                    + snapshotAutoTriggerThreshold);
        }
        if (electionTimeoutMin.toMillis() < 50) {
            throw new IllegalArgumentException("electionTimeoutMin must be >= 50 ms, got " + electionTimeoutMin);
        }
        if (electionTimeoutMax.compareTo(electionTimeoutMin) <= 0) {
            throw new IllegalArgumentException("electionTimeoutMax (" + electionTimeoutMax
                    + ") must exceed electionTimeoutMin (" + electionTimeoutMin + ")");
        }
        if (logSegmentSizeMaxBytes < 1024) {
            throw new IllegalArgumentException("logSegmentSizeMaxBytes must be >= 1024, got " + logSegmentSizeMaxBytes);
        }
    }

    /** A configuration with the default threshold, election timeouts and segment size. */
    public static RaftServerConfig of(String peerId, List<PeerSpec> peers, String clusterName, Path storageDir) {
        return new RaftServerConfig(peerId, peers, clusterName, storageDir, DEFAULT_SNAPSHOT_THRESHOLD,
                DEFAULT_ELECTION_TIMEOUT_MIN, DEFAULT_ELECTION_TIMEOUT_MAX, DEFAULT_LOG_SEGMENT_SIZE);
    }

    /** This configuration with another snapshot threshold (log entries). */
    public RaftServerConfig withSnapshotAutoTriggerThreshold(int entries) {
        return new RaftServerConfig(peerId, peers, clusterName, storageDir, entries,
                electionTimeoutMin, electionTimeoutMax, logSegmentSizeMaxBytes);
    }

    /** This configuration with other election timeouts. */
    public RaftServerConfig withElectionTimeouts(Duration min, Duration max) {
        return new RaftServerConfig(peerId, peers, clusterName, storageDir, snapshotAutoTriggerThreshold,
                min, max, logSegmentSizeMaxBytes);
    }

    /** This configuration with another log segment size, bytes. */
    public RaftServerConfig withLogSegmentSizeMaxBytes(long bytes) {
        return new RaftServerConfig(peerId, peers, clusterName, storageDir, snapshotAutoTriggerThreshold,
                electionTimeoutMin, electionTimeoutMax, bytes);
    }

    /** The spec of this peer. */
    public PeerSpec self() {
        return peers.stream().filter(p -> p.id().equals(peerId)).findFirst().orElseThrow();
    }
}
