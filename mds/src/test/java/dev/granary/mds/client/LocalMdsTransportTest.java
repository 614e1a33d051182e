package dev.granary.mds.client;

import static org.junit.jupiter.api.Assertions.*;

import dev.granary.mds.proto.Caller;
import dev.granary.mds.schema.MdsSchema;
import dev.granary.raft.KvTxn;
import dev.granary.raft.RocksKv;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The local transport: survives a reopen, and stops (does not diverge) after a failed apply. */
class LocalMdsTransportTest {
    static final Caller ROOT = Caller.getDefaultInstance();
    @TempDir
    Path tmp;

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void reopenContinuesAfterTheLastAppliedIndex() {
        Path dir = tmp.resolve("db");
        long ino;
        try (MdsClient mds = new MdsClient(LocalMdsTransport.open(dir))) {
            ino = mds.mkdir(ROOT, MdsClient.ROOT_INO, b("d"), 0755).getIno();
        }
        try (LocalMdsTransport t = LocalMdsTransport.open(dir); MdsClient mds = new MdsClient(t)) {
            long before = t.kv().lastAppliedIndex();
            assertTrue(before >= 0);
            assertEquals(ino, mds.lookup(ROOT, MdsClient.ROOT_INO, b("d")).getIno());
            long f = mds.create(ROOT, ino, b("f"), 0644, true).getIno();
            assertEquals(ino + 1, f, "the inode counter survived the reopen");
            assertEquals(before + 1, t.kv().lastAppliedIndex());
        }
    }

    @Test
    void corruptionStopsTheMds() {
        Path dir = tmp.resolve("db");
        try (LocalMdsTransport t = LocalMdsTransport.open(dir); MdsClient mds = new MdsClient(t)) {
            mds.mkdir(ROOT, MdsClient.ROOT_INO, b("d"), 0755);
            // corrupt every version of the root inode behind the MDS's back
            RocksKv kv = t.kv();
            KvTxn txn = kv.newTxn();
            try (var it = kv.seek(MdsSchema.INODES, new byte[0])) {
                for (; it.valid(); it.next()) {
                    txn.put(MdsSchema.INODES, it.key(), new byte[] {9, 9, 9});
                }
            }
            kv.commit(txn, 1, kv.lastAppliedIndex() + 1);
            long applied = kv.lastAppliedIndex();
            assertThrows(IllegalStateException.class, () -> mds.mkdir(ROOT, MdsClient.ROOT_INO, b("e"), 0755));
            assertEquals(applied, kv.lastAppliedIndex(), "the failed entry was not committed");
            IllegalStateException stopped = assertThrows(IllegalStateException.class,
                    () -> mds.listOsts(ROOT));
            assertTrue(stopped.getMessage().contains("stopped"), stopped.getMessage());
        }
    }
}
