package dev.granary.raft;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.ratis.protocol.ClientId;
import org.apache.ratis.protocol.RaftClientReply;
import org.apache.ratis.server.RaftServerConfigKeys;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A write retried with the same client id and call id (its reply was lost or timed out) is
 * applied once, and the retry returns the first attempt's reply: Ratis' retry cache, on the same
 * leader, on a new leader after a failover, and after every peer crashed and restarted.
 *
 * <p>{@code put K V} answers {@code ok <index> new} the first time K is written and
 * {@code ok <index> old} after: a retry that was applied a second time shows up as "old" with
 * another index.
 */
class RetryCacheTest {
    private static final Duration WAIT = Duration.ofSeconds(30);

    @TempDir
    Path tmp;

    private static String text(RaftClientReply r) {
        assertTrue(r.isSuccess(), "reply failed: " + r);
        return r.getMessage().getContent().toStringUtf8();
    }

    /** The real client: its first attempt times out (the leader applies late), its retry gets the first result. */
    @Test
    void raftKvClientRetryAfterARequestTimeoutIsAnsweredFromTheRetryCache() throws Exception {
        try (TestCluster cl = new TestCluster(tmp, "timeout", 3, 10_000, 8L << 20).startAll();
             RaftKvClient c = cl.client()) {
            int leader = cl.awaitLeader(WAIT);
            c.write("put warm 1".getBytes(UTF_8));
            MapApplier slow = cl.appliers[leader];
            int preparesBefore = slow.prepares.get();
            slow.slowApplyMs = 4_500; // longer than the client's 3 s request timeout
            long t0 = System.nanoTime();
            String reply = new String(c.write("put slow-k v".getBytes(UTF_8)), UTF_8);
            long ms = (System.nanoTime() - t0) / 1_000_000;
            slow.slowApplyMs = 0;
            System.out.println("RETRY_AFTER_TIMEOUT_MS=" + ms + " reply=" + reply);
            assertTrue(ms >= 3_000, "the first attempt timed out before the reply came (" + ms + " ms)");
            assertTrue(reply.startsWith("ok ") && reply.endsWith(" new"), reply);
            assertEquals(1, slow.prepares.get() - preparesBefore,
                    "the retry was answered from the retry cache, not appended again");
            assertEquals("v", new String(c.read("get slow-k".getBytes(UTF_8)), UTF_8));
            assertEquals("2", new String(c.read("count".getBytes(UTF_8)), UTF_8));
        }
    }

    @Test
    void retryWithTheSameCallIdReturnsTheFirstReplyOnTheLeaderAndAfterFailover() throws Exception {
        try (TestCluster cl = new TestCluster(tmp, "failover", 3, 10_000, 8L << 20).startAll();
             RawCall raw = new RawCall(cl.name, cl.peers, ClientId.randomId())) {
            int leader = cl.awaitLeader(WAIT);
            byte[] put = "put k v1".getBytes(UTF_8);
            String first = text(raw.sendToLeader(cl.peers, 1, put, WAIT));
            assertTrue(first.endsWith(" new"), first);
            assertEquals(first, text(raw.sendToLeader(cl.peers, 1, put, WAIT)), "retry on the same leader");
            // Every follower applied the entry (and cached its reply) before the leader goes away.
            long index = Long.parseLong(first.split(" ")[1]);
            for (RaftKvServer s : cl.servers) {
                TestCluster.awaitTrue(s.peerId() + " applied " + index, WAIT, () -> s.lastAppliedIndex() >= index);
            }
            cl.stop(leader);
            cl.awaitLeader(WAIT);
            assertEquals(first, text(raw.sendToLeader(cl.peers, 1, put, WAIT)), "retry on the new leader");
            // A new call id is a new request: applied again.
            String second = text(raw.sendToLeader(cl.peers, 2, put, WAIT));
            assertTrue(second.endsWith(" old") && !second.equals(first), second);
        }
    }

    /**
     * Every peer crashes (no snapshot on stop, as after SIGKILL) after applying a write whose reply
     * was lost; restarted, each replays its log over a db that already holds the entry. The
     * client's retry must still get the first reply. Regression: the replay answered entries
     * already in the db with an empty reply, and the retry cache handed that to the retry as success.
     */
    @Test
    void retryAfterEveryPeerCrashedAndRestartedReturnsTheFirstReply() throws Exception {
        RaftKvServer.snapshotOnStop = false;
        try {
            TestCluster cl = new TestCluster(tmp, "crash", 3, 10_000, 8L << 20).startAll();
            byte[] put = "put k v1".getBytes(UTF_8);
            String first;
            ClientId id = ClientId.randomId();
            try (RawCall raw = new RawCall(cl.name, cl.peers, id)) {
                cl.awaitLeader(WAIT);
                first = text(raw.sendToLeader(cl.peers, 7, put, WAIT));
                long index = Long.parseLong(first.split(" ")[1]);
                for (RaftKvServer s : cl.servers) {
                    TestCluster.awaitTrue(s.peerId() + " applied " + index, WAIT, () -> s.lastAppliedIndex() >= index);
                }
            } finally {
                cl.close();
            }
            try (cl; RawCall raw = new RawCall(cl.name, cl.peers, id); RaftKvClient c = cl.client()) {
                // Same client id as a client that kept retrying across the outage.
                cl.startAll();
                cl.awaitLeader(WAIT);
                assertEquals(first, text(raw.sendToLeader(cl.peers, 7, put, WAIT)), "retry after the restart");
                assertEquals("1", new String(c.read("count".getBytes(UTF_8)), UTF_8), "applied once");
            }
        } finally {
            RaftKvServer.snapshotOnStop = true;
        }
    }

    /**
     * Ratis' retry cache lives in memory: a clean restart (which takes a snapshot on stop, so
     * nothing is replayed) or a snapshot install leaves it empty. The call must still be applied
     * once. Regression: the retry was appended again and applied a second time ("ok 9 old").
     */
    @Test
    void retryAfterACleanRestartOfEveryPeerReturnsTheFirstReply() throws Exception {
        TestCluster cl = new TestCluster(tmp, "clean", 3, 10_000, 8L << 20).startAll();
        byte[] put = "put k v1".getBytes(UTF_8);
        ClientId id = ClientId.randomId();
        String first;
        try (RawCall raw = new RawCall(cl.name, cl.peers, id)) {
            cl.awaitLeader(WAIT);
            first = text(raw.sendToLeader(cl.peers, 9, put, WAIT));
            long index = Long.parseLong(first.split(" ")[1]);
            for (RaftKvServer s : cl.servers) {
                TestCluster.awaitTrue(s.peerId() + " applied " + index, WAIT, () -> s.lastAppliedIndex() >= index);
            }
        } finally {
            cl.close(); // clean stop: each peer takes a snapshot at its last applied entry
        }
        try (cl; RawCall raw = new RawCall(cl.name, cl.peers, id); RaftKvClient c = cl.client()) {
            cl.startAll();
            for (RaftKvServer s : cl.servers) {
                assertTrue(s.latestSnapshotIndex() >= Long.parseLong(first.split(" ")[1]), s.peerId() + " snapshot");
            }
            cl.awaitLeader(WAIT);
            assertEquals(first, text(raw.sendToLeader(cl.peers, 9, put, WAIT)), "retry after the clean restart");
            assertEquals("1", new String(c.read("count".getBytes(UTF_8)), UTF_8));
            String again = new String(c.write(put), UTF_8);
            assertTrue(again.endsWith(" old"), "a new call is applied: " + again);
        }
    }

    /**
     * Peers that accept connections but never answer (paused, SIGSTOP): every attempt waits for the
     * request timeout. The retry budget must still bound the whole call. Regression: the budget only
     * counted the sleeps between attempts, so a 4 s budget blocked for about 23 s (60 s: ~3 min).
     */
    @Test
    void retryBudgetBoundsTheWholeCallWhenPeersDoNotAnswer() throws Exception {
        List<ServerSocket> holes = new ArrayList<>();
        List<PeerSpec> peers = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                ServerSocket hole = new ServerSocket(0, 50, InetAddress.getLoopbackAddress()); // never accepts
                holes.add(hole);
                peers.add(new PeerSpec("h" + i, "127.0.0.1:" + hole.getLocalPort()));
            }
            Duration budget = Duration.ofSeconds(4);
            long t0 = System.nanoTime();
            try (RaftKvClient c = new RaftKvClient("blackhole", peers, budget)) {
                RaftUnavailableException e = assertThrows(RaftUnavailableException.class,
                        () -> c.write("put a b".getBytes(UTF_8)));
                assertTrue(e.getMessage().contains("blackhole"), e.getMessage());
            }
            long ms = (System.nanoTime() - t0) / 1_000_000;
            System.out.println("UNAVAILABLE_AFTER_MS=" + ms + " (budget " + budget.toMillis() + " ms)");
            assertTrue(ms <= RaftKvClient.maxCallDuration(budget).toMillis() + 2_000,
                    "a call gives up within its budget plus one request timeout and one sleep; took " + ms + " ms");
        } finally {
            for (ServerSocket h : holes) {
                h.close();
            }
        }
    }

    /** The retry cache must remember a call for longer than its client may keep retrying it. */
    @Test
    void retryCacheOutlivesTheClientsRetries() {
        List<PeerSpec> peers = List.of(new PeerSpec("a", "127.0.0.1:1"));
        RaftKvServer s = new RaftKvServer(RaftServerConfig.of("a", peers, "n", tmp.resolve("a")), new MapApplier(false));
        Duration expiry = Duration.ofMillis(RaftServerConfigKeys.RetryCache.expiryTime(s.properties()).toLong(TimeUnit.MILLISECONDS));
        Duration longestCall = RaftKvClient.maxCallDuration(RaftKvClient.DEFAULT_RETRY_BUDGET);
        assertTrue(expiry.compareTo(longestCall) > 0, "retry cache expiry " + expiry + " vs longest call " + longestCall);
    }
}
