package dev.granary.raft;

import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.ratis.RaftConfigKeys;
import org.apache.ratis.client.RaftClient;
import org.apache.ratis.client.RaftClientConfigKeys;
import org.apache.ratis.conf.RaftProperties;
import org.apache.ratis.protocol.ClientId;
import org.apache.ratis.protocol.Message;
import org.apache.ratis.protocol.RaftClientReply;
import org.apache.ratis.protocol.RaftClientRequest;
import org.apache.ratis.protocol.RaftGroup;
import org.apache.ratis.protocol.RaftPeerId;
import org.apache.ratis.retry.RetryPolicies;
import org.apache.ratis.rpc.SupportedRpcType;
import org.apache.ratis.thirdparty.com.google.protobuf.ByteString;
import org.apache.ratis.util.TimeDuration;

/**
 * Sends Ratis write requests with a chosen client id and call id, the way a client's retry
 * re-sends a request whose reply it never got (RaftKvClient does this inside one call; a test
 * needs to do it across a failover or a restart, with the two attempts far apart).
 */
final class RawCall implements AutoCloseable {
    private final RaftGroup group;
    private final RaftClient rpcHolder;
    final ClientId clientId;

    /** Calls as client {@code clientId} (the same id across two instances stands for one client that kept retrying). */
    RawCall(String clusterName, List<PeerSpec> peers, ClientId clientId) {
        this.clientId = clientId;
        this.group = RaftGroups.group(clusterName, peers);
        RaftProperties p = new RaftProperties();
        RaftConfigKeys.Rpc.setType(p, SupportedRpcType.GRPC);
        RaftClientConfigKeys.Rpc.setRequestTimeout(p, TimeDuration.valueOf(3, TimeUnit.SECONDS));
        this.rpcHolder = RaftClient.newBuilder().setRaftGroup(group).setProperties(p)
                .setRetryPolicy(RetryPolicies.noRetry()).build();
    }

    /** One attempt of write {@code callId} to peer {@code peerId}. */
    RaftClientReply send(String peerId, long callId, byte[] message) throws IOException {
        RaftClientRequest r = RaftClientRequest.newBuilder()
                .setClientId(clientId)
                .setServerId(RaftPeerId.valueOf(peerId))
                .setGroupId(group.getGroupId())
                .setCallId(callId)
                .setMessage(Message.valueOf(ByteString.copyFrom(message)))
                .setType(RaftClientRequest.writeRequestType())
                .build();
        return rpcHolder.getClientRpc().sendRequest(r);
    }

    /**
     * Sends write {@code callId} to each peer in turn until one answers it as the ready leader
     * (others answer NotLeader/LeaderNotReady or are down), for up to {@code timeout}.
     */
    RaftClientReply sendToLeader(List<PeerSpec> peers, long callId, byte[] message, Duration timeout)
            throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        Exception last = null;
        while (System.nanoTime() < deadline) {
            for (PeerSpec peer : peers) {
                try {
                    RaftClientReply reply = send(peer.id(), callId, message);
                    if (reply.isSuccess() || reply.getStateMachineException() != null) {
                        return reply;
                    }
                    last = reply.getException();
                } catch (IOException e) {
                    last = e;
                }
            }
            Thread.sleep(100);
        }
        throw new AssertionError("no leader answered call " + callId + " within " + timeout + ": " + last);
    }

    @Override
    public void close() throws IOException {
        rpcHolder.close();
    }
}
