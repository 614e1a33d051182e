package dev.granary.raft;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Real 3-peer Ratis groups on loopback: replication, failover, recovery, snapshot install, stop on apply failure. */
class RaftClusterTest {
    private static final Logger LOG = LoggerFactory.getLogger(RaftClusterTest.class);
    private static final Duration WAIT = Duration.ofSeconds(20);

    @TempDir
    Path tmp;

    private static String put(RaftKvClient c, String k, String v) {
        return new String(c.write(("put " + k + " " + v).getBytes(UTF_8)), UTF_8);
    }

    private static String get(RaftKvClient c, String k) {
        return new String(c.read(("get " + k).getBytes(UTF_8)), UTF_8);
    }

    private static String local(RaftKvServer s, String cf, String k) {
        byte[] v = s.localReader().get(cf, k.getBytes(UTF_8));
        return v == null ? null : new String(v, UTF_8);
    }

    /**
     * A client that only reads is answered by the leader, also when the peer Ratis would try
     * first is a follower (the test makes it one by a leadership transfer). Through Ratis'
     * blocking API a follower answered such reads itself (ReadIndex, one more round trip) and a
     * client without the start-up search stayed there; reads now take the asynchronous API, and
     * such a client reads the right value too.
     */
    @Test
    void aReadOnlyClientIsAnsweredByTheLeader() throws Exception {
        try (TestCluster cl = new TestCluster(tmp, "readers", 3, 10_000, 8L << 20).startAll();
             RaftKvClient w = cl.client()) {
            cl.awaitLeader(WAIT);
            put(w, "k", "v");
            String ratisFirst;
            try (RaftKvClient probe = new RaftKvClient(cl.name, cl.peers, RaftKvClient.DEFAULT_RETRY_BUDGET, false)) {
                get(probe, "k");
                ratisFirst = probe.lastReadServer().orElseThrow().toString();
            }
            if (cl.servers[cl.awaitLeader(WAIT)].peerId().equals(ratisFirst)) {
                String other = cl.peers.stream().map(PeerSpec::id).filter(id -> !id.equals(ratisFirst)).findFirst().orElseThrow();
                w.transferLeadership(other);
                TestCluster.awaitTrue("leadership moved", WAIT, () -> cl.leader().map(i -> cl.servers[i].peerId().equals(other)).orElse(false));
            }
            String leaderId = cl.servers[cl.awaitLeader(WAIT)].peerId();
            try (RaftKvClient unaware = new RaftKvClient(cl.name, cl.peers, RaftKvClient.DEFAULT_RETRY_BUDGET, false)) {
                assertEquals("v", get(unaware, "k"));
            }
            try (RaftKvClient r = cl.client()) {
                assertEquals(leaderId, r.initialLeader().map(Object::toString).orElse("none"));
                for (int i = 0; i < 5; i++) {
                    assertEquals("v", get(r, "k"));
                    assertEquals(leaderId, r.lastReadServer().map(Object::toString).orElse("none"), "read " + i);
                }
            }
        }
    }

    /**
     * Reads sent while the whole group restarts are answered once it has a leader, also the ones
     * that reach a peer before it knows the new leader (Ratis refuses those with
     * "ReadIndexException: Leader is unknown", which its client does not retry; HaFailoverTest saw
     * EIO on a mount right after the restart).
     */
    @Test
    void readsDuringAWholeGroupRestartAllSucceed() throws Exception {
        TestCluster cl = new TestCluster(tmp, "restart-reads", 3, 10_000, 8L << 20).startAll();
        try (cl; RaftKvClient c = cl.client()) {
            cl.awaitLeader(WAIT);
            put(c, "k", "v");
            for (int round = 0; round < 3; round++) { // before the fix, round 0 failed (636 refusals)
                cl.close();
                AtomicBoolean stop = new AtomicBoolean();
                List<String> failures = Collections.synchronizedList(new ArrayList<>());
                AtomicInteger reads = new AtomicInteger();
                ExecutorService ex = Executors.newFixedThreadPool(8);
                try {
                    List<Future<?>> readers = new ArrayList<>();
                    for (int t = 0; t < 8; t++) {
                        readers.add(ex.submit(() -> {
                            while (!stop.get()) {
                                try {
                                    String v = get(c, "k");
                                    if (!v.equals("v")) failures.add("read " + v);
                                    reads.incrementAndGet();
                                } catch (RuntimeException e) {
                                    failures.add(e.toString());
                                }
                            }
                        }));
                    }
                    Thread.sleep(300);
                    cl.startAll();
                    cl.awaitLeader(WAIT);
                    int before = reads.get();
                    TestCluster.awaitTrue("reads after the restart", WAIT, () -> reads.get() > before + 200);
                    stop.set(true);
                    for (Future<?> f : readers) f.get();
                } finally {
                    stop.set(true); // a failed wait must not leave readers spinning into the next tests
                    ex.shutdownNow();
                }
                LOG.info("round {}: {} reads, failures {}", round, reads.get(), failures.size());
                assertEquals(List.of(), failures.subList(0, Math.min(3, failures.size())), "round " + round);
            }
        }
    }

    /** A read on an interrupted thread fails at once with a message that says so, and the thread stays interrupted. */
    @Test
    void anInterruptedReadFailsAndKeepsTheInterrupt() throws Exception {
        try (TestCluster cl = new TestCluster(tmp, "interrupt", 1, 10_000, 8L << 20).startAll();
             RaftKvClient c = cl.client()) {
            cl.awaitLeader(WAIT);
            put(c, "k", "v");
            Thread.currentThread().interrupt();
            RaftUnavailableException e = assertThrows(RaftUnavailableException.class, () -> get(c, "k"));
            assertTrue(Thread.interrupted(), "the thread is still interrupted");
            assertTrue(e.getMessage().contains("interrupted while waiting"), e.getMessage());
            assertEquals("v", get(c, "k")); // the client works on
        }
    }

    @Test
    void writesReachEveryPeersDbWithTheLeadersTimestamp() throws Exception {
        try (TestCluster cl = new TestCluster(tmp, "replicate", 3, 10_000, 8L << 20).startAll();
             RaftKvClient c = cl.client()) {
            cl.awaitLeader(WAIT);
            for (int i = 0; i < 20; i++) {
                assertTrue(put(c, "k" + i, "v" + i).startsWith("ok "));
            }
            assertTrue(put(c, "k3", "again").endsWith(" old"));
            assertEquals("again", get(c, "k3"));
            assertEquals("20", new String(c.read("count".getBytes(UTF_8)), UTF_8));
            String stamp = new String(c.read("stamp k7".getBytes(UTF_8)), UTF_8);
            long nanos = Long.parseLong(stamp);
            assertTrue(Math.abs(System.currentTimeMillis() - nanos / 1_000_000) < 60_000, stamp);
            for (RaftKvServer s : cl.servers) {
                // The last write ("again") reaches a follower's state machine when the follower
                // learns its commit, with the next append or heartbeat (no commit-index log entry).
                TestCluster.awaitTrue(s.peerId() + " applied all", WAIT, () -> "again".equals(local(s, "kv", "k3")));
                assertEquals("v19", local(s, "kv", "k19"));
                assertEquals(stamp, local(s, "stamp", "k7"), "prepare's stamp is replicated, not recomputed");
            }
            // prepare throwing is a state-machine refusal, not an outage.
            RaftStateMachineException e = assertThrows(RaftStateMachineException.class,
                    () -> c.write("reject me".getBytes(UTF_8)));
            assertTrue(e.getMessage().contains("rejected by prepare"), e.getMessage());
            RaftStateMachineException q = assertThrows(RaftStateMachineException.class,
                    () -> c.read("nonsense".getBytes(UTF_8)));
            assertTrue(q.getMessage().contains("unknown query nonsense"), q.getMessage());
            assertEquals("v0", get(c, "k0"));
            // Every peer reports itself; exactly one leader; all applied the writes above.
            List<PeerStatus> status = c.peerStatus();
            assertEquals(cl.peers.stream().map(PeerSpec::id).toList(), status.stream().map(PeerStatus::id).toList());
            assertEquals(1, status.stream().filter(PeerStatus::isLeader).count(), status.toString());
            long leaderApplied = cl.servers[cl.leader().orElseThrow()].lastAppliedIndex();
            for (PeerStatus s : status) {
                assertTrue(s.reachable() && s.appliedIndex() > 20 && s.appliedIndex() <= leaderApplied, s.toString());
            }
        }
    }

    /**
     * A client write costs exactly one log entry (one fsync per peer). With Ratis' default log
     * metadata entries on, every commit appended a second entry recording the commit index: twice
     * the fsyncs, and the next write queued behind it.
     */
    @Test
    void eachWriteAppendsExactlyOneLogEntry() throws Exception {
        try (TestCluster cl = new TestCluster(tmp, "entries", 3, 10_000, 8L << 20).startAll();
             RaftKvClient c = cl.client()) {
            cl.awaitLeader(WAIT);
            put(c, "warm", "up");
            RaftKvServer leader = cl.servers[cl.leader().orElseThrow()];
            TestCluster.awaitTrue("leader applied the first write", WAIT, () -> "up".equals(local(leader, "kv", "warm")));
            long before = leader.lastAppliedIndex();
            int n = 50;
            for (int i = 0; i < n; i++) {
                put(c, "e" + i, "v" + i);
            }
            assertEquals(before + n, leader.lastAppliedIndex(), "log entries appended by " + n + " writes");
        }
    }

    @Test
    void leaderKilledDuringWritesNoAcknowledgedWriteLostAndRestartedPeerCatchesUp() throws Exception {
        try (TestCluster cl = new TestCluster(tmp, "failover", 3, 10_000, 8L << 20).startAll();
             RaftKvClient c = cl.client()) {
            int leader = cl.awaitLeader(WAIT);
            List<String> acked = Collections.synchronizedList(new ArrayList<>());
            AtomicBoolean stop = new AtomicBoolean();
            AtomicInteger errors = new AtomicInteger();
            ExecutorService pool = Executors.newFixedThreadPool(3);
            List<Future<?>> writers = new ArrayList<>();
            for (int w = 0; w < 3; w++) {
                int wid = w;
                writers.add(pool.submit(() -> {
                    for (int i = 0; !stop.get(); i++) {
                        String k = "w" + wid + "-" + i;
                        try {
                            put(c, k, "x" + i);
                            acked.add(k);
                        } catch (RuntimeException e) {
                            errors.incrementAndGet();
                            LOG.warn("write {} failed: {}", k, e.toString());
                        }
                    }
                }));
            }
            TestCluster.awaitTrue("30 acked writes", WAIT, () -> acked.size() >= 30);
            long killedAt = System.nanoTime();
            cl.stop(leader);
            int newLeader = cl.awaitLeader(WAIT);
            long failoverMs = (System.nanoTime() - killedAt) / 1_000_000;
            LOG.info("new leader p{} elected {} ms after leader p{} was closed", newLeader, failoverMs, leader);
            System.out.println("FAILOVER_MS=" + failoverMs);
            assertTrue(newLeader != leader);
            int before = acked.size();
            TestCluster.awaitTrue("30 more acked writes", WAIT, () -> acked.size() >= before + 30);
            stop.set(true);
            for (Future<?> f : writers) {
                f.get();
            }
            pool.shutdown();
            assertEquals(0, errors.get(), "writers block through the election instead of failing");

            List<String> all = new ArrayList<>(acked);
            for (String k : all) {
                assertEquals("x" + k.substring(k.indexOf('-') + 1), get(c, k), k);
            }
            // The killed peer restarts from its disk and catches up through the log.
            long appliedByLeader = cl.servers[newLeader].lastAppliedIndex();
            RaftKvServer back = cl.start(leader);
            TestCluster.awaitTrue("restarted peer catches up", WAIT, () -> back.lastAppliedIndex() >= appliedByLeader);
            for (String k : all) {
                assertNotNull(local(back, "kv", k), k);
            }
        }
    }

    /**
     * A peer whose storage folder was deleted under it (a data folder removed while the server
     * ran) still stops: the snapshot it takes on stop fails once, with a logged error. Regression:
     * the failure escaped to Ratis' state machine updater as an unchecked exception, which retried
     * the snapshot in a loop forever, logging each attempt (84 MB in 20 s) and never stopping, so
     * SIGTERM did not stop a quickstart.
     */
    @Test
    void aPeerWhoseStorageWasDeletedStillStops() throws Exception {
        TestCluster cl = new TestCluster(tmp, "deleted", 1, 10_000, 8L << 20).startAll();
        try (RaftKvClient c = cl.client()) {
            cl.awaitLeader(WAIT);
            put(c, "k", "v");
        }
        deleteTree(tmp.resolve("p0"));
        Thread stopper = new Thread(() -> cl.stop(0), "stopper");
        stopper.start();
        stopper.join(30_000);
        assertFalse(stopper.isAlive(), "close() of the peer returned");
        cl.close();
    }

    private static void deleteTree(Path root) throws IOException {
        try (var walk = java.nio.file.Files.walk(root)) {
            for (Path p : walk.sorted(java.util.Comparator.reverseOrder()).toList()) {
                java.nio.file.Files.deleteIfExists(p);
            }
        }
    }

    @Test
    void wholeClusterRestartKeepsState() throws Exception {
        TestCluster cl = new TestCluster(tmp, "restart", 3, 10_000, 8L << 20).startAll();
        long applied;
        try (RaftKvClient c = cl.client()) {
            cl.awaitLeader(WAIT);
            for (int i = 0; i < 15; i++) {
                put(c, "r" + i, "v" + i);
            }
            applied = cl.servers[cl.leader().orElseThrow()].lastAppliedIndex();
        } finally {
            cl.close();
        }
        try (cl; RaftKvClient c = cl.client()) {
            cl.startAll();
            for (RaftKvServer s : cl.servers) {
                // Recovered from its own db before any new leader: the state is there at once.
                assertTrue(s.lastAppliedIndex() >= 0, s.peerId());
            }
            cl.awaitLeader(WAIT);
            for (int i = 0; i < 15; i++) {
                assertEquals("v" + i, get(c, "r" + i));
            }
            assertTrue(put(c, "r15", "v15").startsWith("ok "));
            int l = cl.leader().orElseThrow();
            assertTrue(cl.servers[l].lastAppliedIndex() > applied);
            assertEquals("16", new String(c.read("count".getBytes(UTF_8)), UTF_8));
        }
    }

    /**
     * A crash leaves no Raft snapshot of the latest state: Ratis then replays the log from its
     * start over a db that already holds those entries. Regression: the replay tried to move the
     * applied index backwards and every peer's state machine stopped.
     */
    @Test
    void restartWithoutSnapshotLikeAfterSigkillSkipsEntriesAlreadyInTheDb() throws Exception {
        RaftKvServer.snapshotOnStop = false;
        try {
            restartWithoutSnapshotKeepsEveryEntryOnce("crash", () -> { });
        } finally {
            RaftKvServer.snapshotOnStop = true;
        }
    }

    /**
     * 10 writes, a stop without snapshot, {@code beforeRestart}, a restart (Ratis replays the log
     * over the db), one more write: every value there, each entry applied once, every peer running.
     */
    private void restartWithoutSnapshotKeepsEveryEntryOnce(String name, Runnable beforeRestart) throws Exception {
        TestCluster cl = new TestCluster(tmp, name, 3, 10_000, 8L << 20).startAll();
        try (RaftKvClient c = cl.client()) {
            cl.awaitLeader(WAIT);
            for (int i = 0; i < 10; i++) {
                put(c, "k" + i, "v" + i);
            }
        } finally {
            cl.close();
        }
        beforeRestart.run();
        try (cl; RaftKvClient c = cl.client()) {
            cl.startAll();
            for (RaftKvServer s : cl.servers) {
                assertEquals(-1, s.latestSnapshotIndex(), "no snapshot was taken: " + s.peerId());
            }
            cl.awaitLeader(WAIT);
            assertTrue(put(c, "k10", "v10").startsWith("ok "));
            for (int i = 0; i <= 10; i++) {
                assertEquals("v" + i, get(c, "k" + i));
            }
            assertEquals("11", new String(c.read("count".getBytes(UTF_8)), UTF_8), "each entry applied once");
            for (RaftKvServer s : cl.servers) {
                assertTrue(s.isRunning() && s.failure().isEmpty(), s.peerId() + " failed: " + s.failure());
            }
        }
    }

    /**
     * The same restart once the replayed calls' replies are forgotten (older than the call memory,
     * shortened to 0 here): the replay skips them quietly, each answered with the expired-reply
     * marker. Regression: each was a failed future, which Ratis logged as an ERROR with a stack
     * trace (1,068 of them after one quickstart restart in a trial).
     */
    @Test
    void aReplayOfEntriesWhoseRepliesExpiredLogsNoErrors() throws Exception {
        RaftKvServer.snapshotOnStop = false;
        KvStateMachine.callMemory = java.time.Duration.ZERO;
        ch.qos.logback.classic.Logger root = (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
        ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent> errors = new ch.qos.logback.core.read.ListAppender<>();
        errors.start();
        try {
            restartWithoutSnapshotKeepsEveryEntryOnce("expired", () -> root.addAppender(errors));
            // Not counted: a follower already closing (the cluster's close at the end of the
            // restart) refusing the leader's last heartbeat, which Ratis logs at ERROR with a
            // ServerNotReadyException ("current state is CLOSING"); seen once in CI.
            List<String> logged = errors.list.stream().filter(e -> e.getLevel() == ch.qos.logback.classic.Level.ERROR)
                    .filter(e -> !refusedWhileClosing(e))
                    .map(e -> e.getLoggerName() + ": " + e.getFormattedMessage()).toList();
            assertEquals(List.of(), logged, "errors logged during the restart");
        } finally {
            root.detachAppender(errors);
            KvStateMachine.callMemory = KvStateMachine.CALL_MEMORY;
            RaftKvServer.snapshotOnStop = true;
        }
    }

    /** Whether {@code e} is Ratis refusing a request because the peer is closing (ServerNotReadyException). */
    private static boolean refusedWhileClosing(ch.qos.logback.classic.spi.ILoggingEvent e) {
        ch.qos.logback.classic.spi.IThrowableProxy t = e.getThrowableProxy();
        return t != null && t.getClassName().equals(org.apache.ratis.protocol.exceptions.ServerNotReadyException.class.getName())
                && t.getMessage() != null && t.getMessage().contains("current state is CLOSING");
    }

    @Test
    void laggingPeerCatchesUpBySnapshotInstallAfterLogPurge() throws Exception {
        try (TestCluster cl = new TestCluster(tmp, "snap", 3, 40, 4096).startAll();
             RaftKvClient c = cl.client()) {
            int leader = cl.awaitLeader(WAIT);
            int lagging = (leader + 1) % 3;
            put(c, "first", "1");
            TestCluster.awaitTrue("follower applied first", WAIT, () -> "1".equals(local(cl.servers[lagging], "kv", "first")));
            long laggingApplied = cl.servers[lagging].lastAppliedIndex();
            cl.stop(lagging);

            ExecutorService pool = Executors.newFixedThreadPool(4);
            List<Future<?>> fs = new ArrayList<>();
            for (int w = 0; w < 4; w++) {
                int wid = w;
                fs.add(pool.submit(() -> {
                    for (int i = 0; i < 75; i++) {
                        put(c, "s" + wid + "-" + i, "payload-" + i + "-" + "y".repeat(64));
                    }
                }));
            }
            for (Future<?> f : fs) {
                f.get();
            }
            pool.shutdown();
            RaftKvServer l = cl.servers[leader];
            TestCluster.awaitTrue("leader snapshot and purge", WAIT,
                    () -> l.latestSnapshotIndex() > 200 && l.logStartIndex() > laggingApplied + 1);
            LOG.info("leader snapshot at {}, log starts at {}, lagging peer stopped at {}",
                    l.latestSnapshotIndex(), l.logStartIndex(), laggingApplied);

            RaftKvServer back = cl.start(lagging);
            long target = l.lastAppliedIndex();
            TestCluster.awaitTrue("lagging peer installs snapshot and catches up", WAIT,
                    () -> back.lastAppliedIndex() >= target);
            assertTrue(back.latestSnapshotIndex() > laggingApplied, "state came from an installed snapshot");
            assertEquals("1", local(back, "kv", "first"));
            for (int w = 0; w < 4; w++) {
                for (int i = 0; i < 75; i++) {
                    assertEquals("payload-" + i + "-" + "y".repeat(64), local(back, "kv", "s" + w + "-" + i));
                }
            }
            // And it keeps applying new entries after the install.
            put(c, "after", "z");
            TestCluster.awaitTrue("new entry on installed peer", WAIT, () -> "z".equals(local(back, "kv", "after")));
            // A restart of the installed peer recovers from the swapped-in db.
            cl.stop(lagging);
            RaftKvServer again = cl.start(lagging);
            assertEquals("z", local(again, "kv", "after"));
        }
    }

    @Test
    void applyFailureStopsOnlyThatPeer() throws Exception {
        // p2 throws when applying "put boom ...": it must stop, not skip the entry and diverge.
        try (TestCluster cl = new TestCluster(tmp, "poison", 3, 10_000, 8L << 20, false, false, true).startAll();
             RaftKvClient c = cl.client()) {
            cl.awaitLeader(WAIT);
            put(c, "before", "1");
            RaftKvServer victim = cl.servers[2];
            TestCluster.awaitTrue("p2 applied before", WAIT, () -> "1".equals(local(victim, "kv", "before")));
            assertTrue(put(c, "boom", "x").startsWith("ok "));
            TestCluster.awaitTrue("p2 stops", WAIT, () -> !victim.isRunning());
            assertTrue(victim.failure().isPresent());
            assertTrue(victim.failure().get().getMessage().contains("injected apply failure"));
            long stoppedAt = victim.lastAppliedIndex();
            for (int i = 0; i < 5; i++) {
                put(c, "later" + i, "v");
            }
            assertEquals("x", get(c, "boom"));
            assertEquals("v", get(c, "later4"));
            Thread.sleep(300);
            assertEquals(stoppedAt, victim.lastAppliedIndex(), "a stopped peer applies nothing more");
            assertFalse(victim.isLeader());
            int l = cl.leader().orElseThrow();
            assertTrue(l != 2);
            assertEquals("v", local(cl.servers[l], "kv", "later4"));
        }
    }

    @Test
    void portInUseAndNoClusterGiveClearErrors() throws Exception {
        try (ServerSocket busy = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            String addr = "127.0.0.1:" + busy.getLocalPort();
            List<PeerSpec> peers = List.of(new PeerSpec("a", addr));
            RaftKvServer s = new RaftKvServer(RaftServerConfig.of("a", peers, "busy", tmp.resolve("a")),
                    new MapApplier(false));
            IllegalStateException e = assertThrows(IllegalStateException.class, s::start);
            assertTrue(e.getMessage().contains(addr) && e.getMessage().contains("in use"), e.getMessage());
            s.close();
        }
        List<PeerSpec> nobody = List.of(new PeerSpec("a", "127.0.0.1:" + TestCluster.freePort()));
        long t0 = System.nanoTime();
        try (RaftKvClient c = new RaftKvClient("nobody", nobody, Duration.ofSeconds(2))) {
            RaftUnavailableException e = assertThrows(RaftUnavailableException.class,
                    () -> c.write("put a b".getBytes(UTF_8)));
            assertTrue(e.getMessage().contains("nobody"), e.getMessage());
            RaftUnavailableException r = assertThrows(RaftUnavailableException.class,
                    () -> c.read("get a".getBytes(UTF_8)));
            assertTrue(r.getMessage().contains("nobody"), r.getMessage());
            PeerStatus down = c.peerStatus().get(0);
            assertEquals(PeerStatus.UNREACHABLE, down.role());
            assertTrue(!down.reachable() && down.error().isPresent(), down.toString());
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        assertTrue(ms < 30_000, "bounded retries, took " + ms + " ms");
    }

    @Test
    void configValidation() throws IOException {
        List<PeerSpec> peers = List.of(new PeerSpec("a", "127.0.0.1:9001"), new PeerSpec("b", "127.0.0.1:9002"));
        Path d = tmp.resolve("x");
        assertThrows(IllegalArgumentException.class, () -> RaftServerConfig.of("c", peers, "n", d));
        assertThrows(IllegalArgumentException.class, () -> RaftServerConfig.of("a", peers, " ", d));
        assertThrows(IllegalArgumentException.class, () -> RaftServerConfig.of("a", List.of(), "n", d));
        assertThrows(IllegalArgumentException.class,
                () -> RaftServerConfig.of("a", List.of(peers.get(0), new PeerSpec("a", "h:1")), "n", d));
        assertThrows(IllegalArgumentException.class,
                () -> RaftServerConfig.of("a", peers, "n", d).withSnapshotAutoTriggerThreshold(0));
        assertThrows(IllegalArgumentException.class,
                () -> RaftServerConfig.of("a", peers, "n", d).withElectionTimeouts(Duration.ofSeconds(2), Duration.ofSeconds(1)));
        assertThrows(IllegalArgumentException.class, () -> new PeerSpec("a", "nohost"));
        assertThrows(IllegalArgumentException.class, () -> new PeerSpec("a", "h:70000"));
        assertThrows(IllegalArgumentException.class, () -> new PeerSpec("a b", "h:1"));
        assertEquals(new PeerSpec("m1", "10.0.0.1:9000"), PeerSpec.parse("m1=10.0.0.1:9000"));
        assertEquals("::1", new PeerSpec("v6", "[::1]:9000").host());
        assertEquals(RaftGroups.groupId("granary"), RaftGroups.groupId("granary"));
        RaftServerConfig cfg = RaftServerConfig.of("b", peers, "n", d);
        assertEquals(10_000, cfg.snapshotAutoTriggerThreshold());
        assertEquals("127.0.0.1:9002", cfg.self().address());
    }
}
