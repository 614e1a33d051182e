package dev.granary.raft;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import org.apache.ratis.protocol.exceptions.LeaderSteppingDownException;
import org.apache.ratis.protocol.exceptions.ReadException;
import org.apache.ratis.protocol.exceptions.ReadIndexException;
import org.apache.ratis.protocol.exceptions.ResourceUnavailableException;
import org.apache.ratis.protocol.exceptions.ServerNotReadyException;
import org.apache.ratis.protocol.exceptions.StateMachineException;
import org.apache.ratis.protocol.exceptions.TimeoutIOException;
import org.apache.ratis.protocol.exceptions.TransferLeadershipException;
import org.junit.jupiter.api.Test;

/**
 * Which refusals {@link RaftKvClient} sends again itself (Ratis' client retries only "not leader"
 * and "leader not ready"): a read whenever its peer had no leader to ask; a write only when the
 * leader refused it before appending, since the call sent again has a new call id.
 */
class RaftKvClientRetryTest {

    @Test
    void readsAreSentAgainWhenTheirPeerKnewNoLeader() {
        assertTrue(RaftKvClient.isLeaderlessRead(new ReadIndexException("p0@group-1: Leader is unknown.")));
        assertTrue(RaftKvClient.isLeaderlessRead(new ReadException("failed to get read index")));
        assertTrue(RaftKvClient.isLeaderlessRead(new ServerNotReadyException("starting")));
        assertTrue(RaftKvClient.isLeaderlessRead(new LeaderSteppingDownException("stepping down")));
        assertFalse(RaftKvClient.isLeaderlessRead(new StateMachineException("query threw")), "a query that threw would throw again");
        assertFalse(RaftKvClient.isLeaderlessRead(new IOException("other")));
    }

    @Test
    void writesAreSentAgainOnlyWhenRefusedBeforeAppend() {
        assertTrue(RaftKvClient.refusedBeforeAppend(new ServerNotReadyException("starting")));
        assertTrue(RaftKvClient.refusedBeforeAppend(new LeaderSteppingDownException("stepping down")));
        assertTrue(RaftKvClient.refusedBeforeAppend(new TransferLeadershipException("transferring")));
        assertTrue(RaftKvClient.refusedBeforeAppend(new ResourceUnavailableException("too many pending")));
        // these may come after the entry was appended: a new call id could apply it twice
        assertFalse(RaftKvClient.refusedBeforeAppend(new TimeoutIOException("no reply")));
        assertFalse(RaftKvClient.refusedBeforeAppend(new ReadIndexException("not a write refusal")));
        assertFalse(RaftKvClient.refusedBeforeAppend(new StateMachineException("refused")));
    }
}
