package dev.granary.mds.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import dev.granary.mds.FsException;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.client.RaftMdsTransport;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.CreateRequest;
import dev.granary.mds.proto.MdsRequest;
import dev.granary.mds.proto.MdsResponse;
import dev.granary.mds.proto.RenameRequest;
import dev.granary.mds.proto.Status;
import dev.granary.raft.PeerSpec;
import dev.granary.raft.RaftServerConfig;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.ratis.RaftConfigKeys;
import org.apache.ratis.client.RaftClient;
import org.apache.ratis.conf.RaftProperties;
import org.apache.ratis.protocol.ClientId;
import org.apache.ratis.protocol.Message;
import org.apache.ratis.protocol.RaftClientReply;
import org.apache.ratis.protocol.RaftClientRequest;
import org.apache.ratis.protocol.RaftGroup;
import org.apache.ratis.protocol.RaftGroupId;
import org.apache.ratis.protocol.RaftPeer;
import org.apache.ratis.protocol.RaftPeerId;
import org.apache.ratis.retry.RetryPolicies;
import org.apache.ratis.rpc.SupportedRpcType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A create and a rename whose replies were lost, retried with the same Raft client id and call
 * id, are applied once and the retry gets the first reply (not EEXIST, not ENOENT): on the same
 * leader, on a new leader after the old one stopped, and after every peer was restarted.
 */
class MdsRetryTest {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final Caller ROOT = Caller.getDefaultInstance();

    @TempDir
    Path tmp;

    private final List<PeerSpec> peers = new ArrayList<>();
    private final MdsServer[] servers = new MdsServer[3];

    private RaftServerConfig config(int i) {
        return RaftServerConfig.of("m" + i, peers, "retry", tmp.resolve("m" + i))
                .withElectionTimeouts(Duration.ofMillis(500), Duration.ofMillis(1000));
    }

    private void startAll() {
        for (int i = 0; i < 3; i++) {
            servers[i] = MdsServer.start(config(i));
        }
    }

    private void stopAll() {
        for (int i = 0; i < 3; i++) {
            if (servers[i] != null) {
                servers[i].close();
                servers[i] = null;
            }
        }
    }

    /** A Raft client that sends one MDS request with a chosen client id and call id, as a retry does. */
    private final class RawMds implements AutoCloseable {
        final RaftGroup group;
        final RaftClient client;
        final ClientId clientId;

        RawMds(ClientId clientId) {
            this.clientId = clientId;
            RaftGroupId gid = RaftGroupId.valueOf(UUID.nameUUIDFromBytes("retry".getBytes(StandardCharsets.UTF_8)));
            group = RaftGroup.valueOf(gid, peers.stream()
                    .map(p -> RaftPeer.newBuilder().setId(RaftPeerId.valueOf(p.id())).setAddress(p.address()).build()).toList());
            RaftProperties p = new RaftProperties();
            RaftConfigKeys.Rpc.setType(p, SupportedRpcType.GRPC);
            client = RaftClient.newBuilder().setRaftGroup(group).setProperties(p)
                    .setRetryPolicy(RetryPolicies.noRetry()).build();
        }

        /** Sends write {@code callId} to each peer in turn until the leader answers it. */
        MdsResponse write(long callId, MdsRequest request) throws Exception {
            long deadline = System.nanoTime() + WAIT.toNanos();
            Object last = null;
            while (System.nanoTime() < deadline) {
                for (PeerSpec peer : peers) {
                    RaftClientRequest r = RaftClientRequest.newBuilder().setClientId(clientId)
                            .setServerId(RaftPeerId.valueOf(peer.id())).setGroupId(group.getGroupId())
                            .setCallId(callId).setType(RaftClientRequest.writeRequestType())
                            .setMessage(Message.valueOf(org.apache.ratis.thirdparty.com.google.protobuf.ByteString
                                    .copyFrom(request.toByteArray())))
                            .build();
                    try {
                        RaftClientReply reply = client.getClientRpc().sendRequest(r);
                        if (reply.isSuccess()) {
                            return MdsResponse.parseFrom(reply.getMessage().getContent().toByteArray());
                        }
                        last = reply.getException();
                        if (reply.getStateMachineException() != null) {
                            throw new AssertionError("state machine refused call " + callId + ": " + last);
                        }
                    } catch (java.io.IOException e) {
                        last = e;
                    }
                }
                TimeUnit.MILLISECONDS.sleep(100);
            }
            throw new AssertionError("no leader answered call " + callId + ": " + last);
        }

        @Override
        public void close() throws Exception {
            client.close();
        }
    }

    private static MdsRequest create(String name) {
        return MdsRequest.newBuilder().setCaller(ROOT).setCreate(CreateRequest.newBuilder().setParent(MdsClient.ROOT_INO)
                .setName(ByteString.copyFromUtf8(name)).setMode(0100644).setExclusive(true)).build();
    }

    private static MdsRequest rename(String from, String to) {
        return MdsRequest.newBuilder().setCaller(ROOT).setRename(RenameRequest.newBuilder()
                .setSrcParent(MdsClient.ROOT_INO).setSrcName(ByteString.copyFromUtf8(from))
                .setDstParent(MdsClient.ROOT_INO).setDstName(ByteString.copyFromUtf8(to))).build();
    }

    private int leader() throws InterruptedException {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            for (int i = 0; i < 3; i++) {
                if (servers[i] != null && servers[i].isLeader()) return i;
            }
            TimeUnit.MILLISECONDS.sleep(20);
        }
        throw new AssertionError("no leader");
    }

    private void awaitAllApplied() throws InterruptedException {
        long target = servers[leader()].raft().lastAppliedIndex();
        long deadline = System.nanoTime() + WAIT.toNanos();
        for (MdsServer s : servers) {
            while (s != null && s.raft().lastAppliedIndex() < target) {
                assertTrue(System.nanoTime() < deadline, s.peerId() + " did not apply " + target);
                TimeUnit.MILLISECONDS.sleep(20);
            }
        }
    }

    @Test
    void createAndRenameRetriedWithTheSameCallIdAreAppliedOnce() throws Exception {
        for (int i = 0; i < 3; i++) {
            peers.add(new PeerSpec("m" + i, "127.0.0.1:" + RaftMdsTest.freePort()));
        }
        ClientId id = ClientId.randomId();
        MdsResponse created;
        MdsResponse renamed;
        try (RawMds raw = new RawMds(id); MdsClient mds = new MdsClient(RaftMdsTransport.connect("retry", peers))) {
            startAll();
            leader();
            created = raw.write(1, create("a"));
            assertEquals(Status.OK, created.getStatus(), created.getMessage());
            long ino = created.getAttr().getIno();
            assertTrue(ino > 1, "a new inode: " + created);
            renamed = raw.write(2, rename("a", "b"));
            assertEquals(Status.OK, renamed.getStatus(), renamed.getMessage());

            // The replies were lost: the client retries both calls on the same leader.
            assertEquals(created, raw.write(1, create("a")), "retried create: the first reply, not EEXIST");
            assertEquals(renamed, raw.write(2, rename("a", "b")), "retried rename: the first reply, not ENOENT");
            // A new call of the same create is a new request: it runs and fails.
            assertEquals(Status.EEXIST, raw.write(3, create("b")).getStatus());

            // ... and on a new leader after the old one went away.
            awaitAllApplied();
            int old = leader();
            servers[old].close();
            servers[old] = null;
            assertNotEquals(old, leader());
            assertEquals(created, raw.write(1, create("a")), "retried create on the new leader");
            assertEquals(renamed, raw.write(2, rename("a", "b")), "retried rename on the new leader");
            servers[old] = MdsServer.start(config(old));
            awaitAllApplied();
        } finally {
            stopAll(); // clean stop: each peer snapshots its state; the in-memory retry caches are gone
        }
        // ... and after every peer restarted.
        try (RawMds raw = new RawMds(id); MdsClient mds = new MdsClient(RaftMdsTransport.connect("retry", peers))) {
            startAll();
            leader();
            assertEquals(created, raw.write(1, create("a")), "retried create after a restart of every peer");
            assertEquals(renamed, raw.write(2, rename("a", "b")), "retried rename after a restart of every peer");
            assertEquals(created.getAttr().getIno(), mds.lookup(ROOT, MdsClient.ROOT_INO, "b".getBytes(StandardCharsets.UTF_8)).getIno());
            FsException gone = assertThrows(FsException.class, () -> mds.lookup(ROOT, MdsClient.ROOT_INO, "a".getBytes(StandardCharsets.UTF_8)));
            assertEquals(Status.ENOENT, gone.status());
            assertEquals(1, mds.readdir(ROOT, MdsClient.ROOT_INO, new byte[0], 100).entries().size(), "one file, created once");
        } finally {
            stopAll();
        }
    }
}
