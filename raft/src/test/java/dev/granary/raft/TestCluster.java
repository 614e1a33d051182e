package dev.granary.raft;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.BooleanSupplier;

/** N real Ratis peers on loopback free ports, each with its own storage dir. */
final class TestCluster implements AutoCloseable {
    final String name;
    final List<PeerSpec> peers = new ArrayList<>();
    final RaftKvServer[] servers;
    /** The applier of each peer's current (or last) server. */
    final MapApplier[] appliers;
    private final Path root;
    private final int snapshotThreshold;
    private final long segmentBytes;
    private final boolean[] failOnBoom;

    TestCluster(Path root, String name, int n, int snapshotThreshold, long segmentBytes, boolean... failOnBoom)
            throws IOException {
        this.root = root;
        this.name = name;
        this.snapshotThreshold = snapshotThreshold;
        this.segmentBytes = segmentBytes;
        this.servers = new RaftKvServer[n];
        this.appliers = new MapApplier[n];
        this.failOnBoom = new boolean[n];
        for (int i = 0; i < n; i++) {
            peers.add(new PeerSpec("p" + i, "127.0.0.1:" + freePort()));
            this.failOnBoom[i] = i < failOnBoom.length && failOnBoom[i];
        }
    }

    /** Ports {@link #freePort()} handed out in this JVM: never handed out twice. */
    private static final java.util.Set<Integer> GIVEN = java.util.concurrent.ConcurrentHashMap.newKeySet();

    /**
     * A loopback port free now and not handed out before in this JVM. The kernel may give the
     * same ephemeral port to two binds in a row once the first socket is closed: two peers of one
     * cluster then had one address ("duplicate peer address"), a failure of CI on 2026-12-06.
     */
    static int freePort() throws IOException {
        while (true) {
            try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                if (GIVEN.add(s.getLocalPort())) {
                    return s.getLocalPort();
                }
            }
        }
    }

    RaftServerConfig config(int i) {
        return RaftServerConfig.of("p" + i, peers, name, root.resolve("p" + i))
                .withSnapshotAutoTriggerThreshold(snapshotThreshold)
                .withLogSegmentSizeMaxBytes(segmentBytes)
                .withElectionTimeouts(Duration.ofMillis(1000), Duration.ofMillis(2000));
    }

    TestCluster startAll() {
        for (int i = 0; i < servers.length; i++) {
            start(i);
        }
        return this;
    }

    RaftKvServer start(int i) {
        appliers[i] = new MapApplier(failOnBoom[i]);
        RaftKvServer s = new RaftKvServer(config(i), appliers[i]);
        s.start();
        servers[i] = s;
        return s;
    }

    void stop(int i) {
        if (servers[i] != null) {
            servers[i].close();
            servers[i] = null;
        }
    }

    RaftKvClient client() {
        return new RaftKvClient(name, peers);
    }

    Optional<Integer> leader() {
        for (int i = 0; i < servers.length; i++) {
            if (servers[i] != null && servers[i].isLeader()) {
                return Optional.of(i);
            }
        }
        return Optional.empty();
    }

    int awaitLeader(Duration timeout) {
        awaitTrue("a leader", timeout, () -> leader().isPresent());
        return leader().orElseThrow();
    }

    static void awaitTrue(String what, Duration timeout, BooleanSupplier cond) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + timeout + " waiting for " + what);
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted waiting for " + what);
            }
        }
    }

    @Override
    public void close() {
        for (int i = 0; i < servers.length; i++) {
            stop(i);
        }
    }
}
