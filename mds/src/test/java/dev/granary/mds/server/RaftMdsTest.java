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

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void mkdirCreateReaddirThroughRaft() throws Exception {
        List<PeerSpec> peers = List.of(new PeerSpec("m0", "127.0.0.1:" + freePort()));
        RaftServerConfig cfg = RaftServerConfig.of("m0", peers, "mds-test", tmp.resolve("m0"))
                .withElectionTimeouts(Duration.ofMillis(300), Duration.ofMillis(600));
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
}
