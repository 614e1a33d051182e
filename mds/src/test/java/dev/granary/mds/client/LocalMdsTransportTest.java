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

    /**
     * A batch_write applies its mutations in order, each on its own (a failing one writes nothing
     * and the others go on; later ones see earlier ones), and an unlink with expect_ino never
     * removes a file that replaced the one it meant.
     */
    @Test
    void aBatchWriteAppliesEachMutationOnItsOwnAndAnUnlinkChecksItsInode() {
        try (LocalMdsTransport t = LocalMdsTransport.open(tmp.resolve("db")); MdsClient mds = new MdsClient(t)) {
            long d = mds.mkdir(ROOT, MdsClient.ROOT_INO, b("d"), 0755).getIno();
            long a = mds.create(ROOT, d, b("a"), 0644, true).getIno();
            long bb = mds.create(ROOT, d, b("b"), 0644, true).getIno();
            long c = mds.create(ROOT, d, b("c"), 0644, true).getIno();
            dev.granary.mds.proto.MdsRequest createN = dev.granary.mds.proto.MdsRequest.newBuilder().setCaller(ROOT)
                    .setCreate(dev.granary.mds.proto.CreateRequest.newBuilder().setParent(d)
                            .setName(com.google.protobuf.ByteString.copyFromUtf8("n")).setMode(0644).setExclusive(true)).build();
            dev.granary.mds.proto.MdsRequest nested = dev.granary.mds.proto.MdsRequest.newBuilder()
                    .setBatchWrite(dev.granary.mds.proto.BatchWriteRequest.newBuilder().addRequests(mds.unlinkRequest(ROOT, d, b("c"), 0))).build();
            dev.granary.mds.proto.MdsRequest mkdirA = dev.granary.mds.proto.MdsRequest.newBuilder().setCaller(ROOT)
                    .setMkdir(dev.granary.mds.proto.MkdirRequest.newBuilder().setParent(d)
                            .setName(com.google.protobuf.ByteString.copyFromUtf8("a")).setMode(0700)).build();
            var out = mds.batchWrite(java.util.List.of(
                    mds.unlinkRequest(ROOT, d, b("a"), a),          // 0: removed
                    mds.unlinkRequest(ROOT, d, b("missing"), 0),    // 1: ENOENT
                    mds.unlinkRequest(ROOT, d, b("b"), c),          // 2: b names another inode: ENOENT, b stays
                    createN,                                        // 3: created ...
                    mds.unlinkRequest(ROOT, d, b("n"), 0),          // 4: ... and removed by the next one
                    nested,                                         // 5: EINVAL
                    mkdirA));                                       // 6: a is free again
            assertEquals(7, out.size());
            var st = out.stream().map(dev.granary.mds.proto.MdsResponse::getStatus).toList();
            assertEquals(java.util.List.of(dev.granary.mds.proto.Status.OK, dev.granary.mds.proto.Status.ENOENT,
                    dev.granary.mds.proto.Status.ENOENT, dev.granary.mds.proto.Status.OK, dev.granary.mds.proto.Status.OK,
                    dev.granary.mds.proto.Status.EINVAL, dev.granary.mds.proto.Status.OK), st);
            assertTrue(out.get(2).getMessage().contains("now names inode " + c) || out.get(2).getMessage().contains("not " + c),
                    out.get(2).getMessage());
            assertEquals(bb, mds.lookup(ROOT, d, b("b")).getIno(), "an unlink that expected another inode removed nothing");
            assertEquals(c, mds.lookup(ROOT, d, b("c")).getIno(), "the nested batch did nothing");
            assertEquals(0040700, mds.lookup(ROOT, d, b("a")).getMode(), "a is the new directory");
            assertThrows(dev.granary.mds.FsException.class, () -> mds.lookup(ROOT, d, b("n")));
            // a batch_write sent as a read is refused
            dev.granary.mds.proto.MdsResponse asRead = t.read(dev.granary.mds.proto.MdsRequest.newBuilder()
                    .setBatchWrite(dev.granary.mds.proto.BatchWriteRequest.newBuilder().addRequests(mds.unlinkRequest(ROOT, d, b("b"), 0))).build());
            assertEquals(dev.granary.mds.proto.Status.EINVAL, asRead.getStatus());
            assertEquals(bb, mds.lookup(ROOT, d, b("b")).getIno());
        }
    }
}
