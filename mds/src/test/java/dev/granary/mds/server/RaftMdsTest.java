package dev.granary.mds.server;

import static org.junit.jupiter.api.Assertions.*;

import dev.granary.mds.FsException;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.client.RaftMdsTransport;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.DirEntry;
import dev.granary.mds.proto.Status;
import dev.granary.raft.PeerSpec;
import dev.granary.raft.RaftServerConfig;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A single-peer Ratis MDS with MdsStateMachine, reached through RaftMdsTransport. */
class RaftMdsTest {
    @TempDir
    Path tmp;

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

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** The config of the single peer m0 of group "mds-test", with short election timeouts. */
    private RaftServerConfig onePeer(List<PeerSpec> peers) {
        return RaftServerConfig.of("m0", peers, "mds-test", tmp.resolve("m0"))
                .withElectionTimeouts(Duration.ofMillis(300), Duration.ofMillis(600));
    }

    @Test
    void mkdirCreateReaddirThroughRaft() throws Exception {
        List<PeerSpec> peers = List.of(new PeerSpec("m0", "127.0.0.1:" + freePort()));
        RaftServerConfig cfg = onePeer(peers);
        Caller root = Caller.getDefaultInstance();
        try (MdsServer server = MdsServer.start(cfg);
             MdsClient mds = new MdsClient(RaftMdsTransport.connect("mds-test", peers))) {
            Attr d = mds.mkdir(root, MdsClient.ROOT_INO, b("data"), 0755);
            Attr f = mds.create(root, d.getIno(), b("shard-0"), 0644, true);
            mds.create(root, d.getIno(), b("shard-1"), 0644, true);
            FsException e = assertThrows(FsException.class, () -> mds.create(root, d.getIno(), b("shard-0"), 0644, true));
            assertEquals(Status.EEXIST, e.status());
            List<DirEntry> entries = mds.readdir(root, d.getIno(), new byte[0], 10).entries();
            assertEquals(List.of("shard-0", "shard-1"), entries.stream().map(x -> x.getName().toStringUtf8()).toList());
            assertEquals(f.getIno(), entries.get(0).getIno());
            assertEquals(3, mds.getattr(root, MdsClient.ROOT_INO).getNlink());
            assertTrue(mds.getattr(root, f.getIno()).getCtimeNs() > 1_600_000_000_000_000_000L, "leader clock stamped");
            assertTrue(server.isRunning());
        }
    }

    /**
     * Eight threads reading through one client (lookups of existing and missing names, getattrs)
     * share Raft reads: some go out in batches, and every thread gets the answer to its own read.
     */
    @Test
    void concurrentReadsShareRaftReadsAndEachGetsItsOwnAnswer() throws Exception {
        List<PeerSpec> peers = List.of(new PeerSpec("m0", "127.0.0.1:" + freePort()));
        RaftServerConfig cfg = onePeer(peers);
        Caller root = Caller.getDefaultInstance();
        try (MdsServer server = MdsServer.start(cfg);
             RaftMdsTransport transport = RaftMdsTransport.connect("mds-test", peers);
             MdsClient mds = new MdsClient(transport)) {
            long d = mds.mkdir(root, MdsClient.ROOT_INO, b("d"), 0755).getIno();
            long[] inos = new long[40];
            for (int i = 0; i < inos.length; i++) {
                inos[i] = mds.create(root, d, b("f" + i), 0644, true).getIno();
            }
            java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(8);
            try {
                List<java.util.concurrent.Future<Integer>> done = new java.util.ArrayList<>();
                for (int t = 0; t < 8; t++) {
                    int seed = t;
                    done.add(pool.submit(() -> {
                        java.util.Random rnd = new java.util.Random(seed);
                        for (int k = 0; k < 150; k++) {
                            int i = rnd.nextInt(inos.length + 10);
                            if (i >= inos.length) {
                                FsException e = assertThrows(FsException.class, () -> mds.lookup(root, d, b("f" + i)));
                                assertEquals(Status.ENOENT, e.status());
                            } else if (k % 2 == 0) {
                                assertEquals(inos[i], mds.lookup(root, d, b("f" + i)).getIno());
                            } else {
                                assertEquals(inos[i], mds.getattr(root, inos[i]).getIno());
                            }
                        }
                        return 150;
                    }));
                }
                for (var f : done) {
                    assertEquals(150, f.get(120, java.util.concurrent.TimeUnit.SECONDS));
                }
            } finally {
                pool.shutdownNow();
            }
            long[] batched = transport.batchedReads();
            System.out.println("RaftMdsTest: 1,200 reads from 8 threads; " + batched[0] + " of them went out in " + batched[1] + " batches");
            assertTrue(batched[0] > batched[1] && batched[1] > 0, "reads were combined: " + batched[0] + " in " + batched[1]);
        }
    }
    /**
     * Eight threads creating files and unlinking some of them through one client share Raft log
     * entries (group commit): some mutations go out in batch_writes, each thread gets the answer to
     * its own mutation (EEXIST for a name it made twice, ENOENT for one it never made), and the
     * namespace holds exactly what the answers say.
     */
    @Test
    void concurrentMutationsShareRaftEntriesAndEachGetsItsOwnAnswer() throws Exception {
        List<PeerSpec> peers = List.of(new PeerSpec("m0", "127.0.0.1:" + freePort()));
        RaftServerConfig cfg = onePeer(peers);
        Caller root = Caller.getDefaultInstance();
        try (MdsServer server = MdsServer.start(cfg);
             RaftMdsTransport transport = RaftMdsTransport.connect("mds-test", peers);
             MdsClient mds = new MdsClient(transport)) {
            long d = mds.mkdir(root, MdsClient.ROOT_INO, b("d"), 0755).getIno();
            java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(8);
            try {
                List<java.util.concurrent.Future<Integer>> done = new java.util.ArrayList<>();
                for (int t = 0; t < 8; t++) {
                    int thread = t;
                    done.add(pool.submit(() -> {
                        for (int k = 0; k < 40; k++) {
                            byte[] name = b("t" + thread + "-" + k);
                            long ino = mds.create(root, d, name, 0644, true).getIno();
                            FsException again = assertThrows(FsException.class, () -> mds.create(root, d, name, 0644, true));
                            assertEquals(Status.EEXIST, again.status(), "the second exclusive create of " + new String(name));
                            if (k % 4 == 0) {
                                mds.unlink(root, d, name);
                                FsException gone = assertThrows(FsException.class, () -> mds.unlink(root, d, name));
                                assertEquals(Status.ENOENT, gone.status());
                            } else {
                                assertEquals(ino, mds.lookup(root, d, name).getIno());
                            }
                        }
                        return 40;
                    }));
                }
                for (var f : done) {
                    assertEquals(40, f.get(180, java.util.concurrent.TimeUnit.SECONDS));
                }
            } finally {
                pool.shutdownNow();
            }
            List<String> names = new java.util.ArrayList<>();
            byte[] after = new byte[0];
            while (true) {
                var page = mds.readdir(root, d, after, 1000);
                page.entries().forEach(e -> names.add(e.getName().toStringUtf8()));
                if (!page.more() || page.entries().isEmpty()) {
                    break;
                }
                after = page.entries().get(page.entries().size() - 1).getName().toByteArray();
            }
            List<String> want = new java.util.ArrayList<>();
            for (int t = 0; t < 8; t++) {
                for (int k = 0; k < 40; k++) {
                    if (k % 4 != 0) {
                        want.add("t" + t + "-" + k);
                    }
                }
            }
            java.util.Collections.sort(want);
            assertEquals(want, names);
            long[] batched = transport.batchedWrites();
            System.out.println("RaftMdsTest: " + (8 * 40 * 2 + 8 * 10 * 2) + " mutations from 8 threads; " + batched[0]
                    + " of them went out in " + batched[1] + " batch_writes");
            assertTrue(batched[0] > batched[1] && batched[1] > 0, "mutations were combined: " + batched[0] + " in " + batched[1]);
        }
    }
}
