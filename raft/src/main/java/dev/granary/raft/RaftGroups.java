package dev.granary.raft;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.UUID;
import org.apache.ratis.protocol.RaftGroup;
import org.apache.ratis.protocol.RaftGroupId;
import org.apache.ratis.protocol.RaftPeer;
import org.apache.ratis.protocol.RaftPeerId;

/** Maps Granary's cluster name and peer list to Ratis' group; shared by server and client. */
final class RaftGroups {
    private RaftGroups() {}

    /** The group id: a name-based UUID of the cluster name's UTF-8 bytes (same on every host). */
    static RaftGroupId groupId(String clusterName) {
        return RaftGroupId.valueOf(UUID.nameUUIDFromBytes(clusterName.getBytes(StandardCharsets.UTF_8)));
    }

    static RaftGroup group(String clusterName, List<PeerSpec> peers) {
        if (peers == null || peers.isEmpty()) {
            throw new IllegalArgumentException("peers must not be empty");
        }
        if (clusterName == null || clusterName.isBlank()) {
            throw new IllegalArgumentException("clusterName must not be blank");
        }
        List<RaftPeer> raftPeers = peers.stream()
                .map(p -> RaftPeer.newBuilder().setId(RaftPeerId.valueOf(p.id())).setAddress(p.address()).build())
                .toList();
        return RaftGroup.valueOf(groupId(clusterName), raftPeers);
    }
}
