package dev.granary.mds.schema;

import static org.junit.jupiter.api.Assertions.*;

import com.google.protobuf.ByteString;
import dev.granary.mds.namespace.Namespace;
import dev.granary.mds.proto.*;
import dev.granary.mds.schema.proto.DentryRecord;
import dev.granary.mds.server.MdsStateMachine;
import dev.granary.raft.KvIterator;
import dev.granary.raft.KvTxn;
import dev.granary.raft.RocksKv;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Multi-versioned keys: reads at an epoch see the newest version at or before it; tombstones. */
class EpochVersioningTest {
    static final Caller ROOT = Caller.getDefaultInstance();
    @TempDir
    Path tmp;
    RocksKv kv;
    final MdsStateMachine sm = new MdsStateMachine();
    long index = 1;

    @BeforeEach
    void open() {
        kv = RocksKv.open(tmp.resolve("db"), sm.columnFamilies());
    }

    @AfterEach
    void close() {
        kv.close();
    }

    MdsResponse apply(MdsRequest.Builder r) throws Exception {
        KvTxn t = kv.newTxn();
        byte[] out = sm.apply(index, r.setCaller(ROOT).setNowNs(1000 * index).build().toByteArray(), t);
        kv.commit(t, 1, index++);
        MdsResponse resp = MdsResponse.parseFrom(out);
        assertEquals(Status.OK, resp.getStatus(), resp.getMessage());
        return resp;
    }

    void bumpEpoch(long e) {
        KvTxn t = kv.newTxn();
        MdsSchema.setCurrentEpoch(t, e);
        kv.commit(t, 1, index++);
    }

    static ByteString bs(String s) {
        return ByteString.copyFromUtf8(s);
    }

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    List<String> names(Namespace ns, long dir) {
        List<String> out = new ArrayList<>();
        for (DirEntry e : ns.readdir(ROOT, dir, new byte[0], 100).entries()) {
            out.add(e.getName().toStringUtf8());
        }
        return out;
    }

    int versions(String cf) {
        int n = 0;
        try (KvIterator it = kv.seek(cf, new byte[0])) {
            for (; it.valid(); it.next()) {
                n++;
            }
        }
        return n;
    }

    @Test
    void newerEpochsSortFirst() {
        byte[] f = MdsSchema.inodeFields(7);
        assertTrue(Arrays.compareUnsigned(MdsSchema.versionKey(f, 2), MdsSchema.versionKey(f, 1)) < 0);
        assertEquals(5, MdsSchema.epochOf(MdsSchema.versionKey(f, 5)));
        // "a" and all its versions sort before "a\x01" and "ab"
        byte[] a1 = MdsSchema.versionKey(MdsSchema.dentryFields(1, b("a")), 1);
        byte[] ab = MdsSchema.versionKey(MdsSchema.dentryFields(1, b("ab")), Long.MAX_VALUE);
        byte[] a01 = MdsSchema.versionKey(MdsSchema.dentryFields(1, new byte[] {'a', 1}), Long.MAX_VALUE);
        assertTrue(Arrays.compareUnsigned(a1, a01) < 0);
        assertTrue(Arrays.compareUnsigned(a01, ab) < 0);
    }

    @Test
    void overwriteAndDeleteAcrossEpochs() throws Exception {
        assertEquals(1, MdsSchema.currentEpoch(kv));
        long d = apply(MdsRequest.newBuilder().setMkdir(MkdirRequest.newBuilder().setParent(1).setName(bs("d")).setMode(0755))).getAttr().getIno();
        long f = apply(MdsRequest.newBuilder().setCreate(CreateRequest.newBuilder().setParent(d).setName(bs("f")).setMode(0644))).getAttr().getIno();
        apply(MdsRequest.newBuilder().setCreate(CreateRequest.newBuilder().setParent(d).setName(bs("g")).setMode(0644)));
        apply(MdsRequest.newBuilder().setSetattr(SetAttrRequest.newBuilder().setIno(f).setValid(1).setMode(0600)));
        int inodeVersions = versions(MdsSchema.INODES);
        assertEquals(4, inodeVersions, "root, d, f, g: one version each at epoch 1 (same-epoch writes overwrite)");

        bumpEpoch(2);
        apply(MdsRequest.newBuilder().setSetattr(SetAttrRequest.newBuilder().setIno(f).setValid(1).setMode(0640)));
        apply(MdsRequest.newBuilder().setSetattr(SetAttrRequest.newBuilder().setIno(f).setValid(1).setMode(0444)));
        assertEquals(0600, MdsSchema.getInode(kv, f, 1).getMode() & 07777, "epoch 1 sees the old version");
        assertEquals(0444, MdsSchema.getInode(kv, f, 2).getMode() & 07777, "epoch 2 sees the newest");
        assertEquals(0444, MdsSchema.getInode(kv, f, 9).getMode() & 07777, "later epochs too");
        assertNull(MdsSchema.getInode(kv, f, 0), "nothing existed before epoch 1");

        apply(MdsRequest.newBuilder().setUnlink(UnlinkRequest.newBuilder().setParent(d).setName(bs("g"))));
        DentryRecord g1 = MdsSchema.getDentry(kv, d, b("g"), 1);
        assertNotNull(g1, "the deleted dentry is still visible at epoch 1");
        assertNull(MdsSchema.getDentry(kv, d, b("g"), 2), "tombstone hides it at epoch 2");
        assertNotNull(MdsSchema.getInode(kv, g1.getIno(), 1));
        assertNull(MdsSchema.getInode(kv, g1.getIno(), 2));

        apply(MdsRequest.newBuilder().setCreate(CreateRequest.newBuilder().setParent(d).setName(bs("h")).setMode(0644)));
        Namespace live = Namespace.readOnly(kv);
        Namespace old = Namespace.atEpoch(kv, 1);
        assertEquals(2, live.epoch());
        assertEquals(List.of("f", "h"), names(live, d));
        assertEquals(List.of("f", "g"), names(old, d));
        assertEquals(0600, old.lookup(ROOT, d, b("f")).getMode() & 07777);
        assertThrows(dev.granary.mds.FsException.class, () -> old.setattr(ROOT, SetAttrRequest.newBuilder().setIno(f).setValid(1).build(), 1));

        // an entry born and deleted in the same epoch leaves no key at all (no version can see it)
        int dentryKeys = versions(MdsSchema.DENTRIES);
        apply(MdsRequest.newBuilder().setCreate(CreateRequest.newBuilder().setParent(d).setName(bs("tmp")).setMode(0644)));
        apply(MdsRequest.newBuilder().setUnlink(UnlinkRequest.newBuilder().setParent(d).setName(bs("tmp"))));
        assertEquals(dentryKeys, versions(MdsSchema.DENTRIES));
        // re-creating "g" at epoch 2 overwrites its tombstone; epoch 1 still sees the old inode
        long g2 = apply(MdsRequest.newBuilder().setCreate(CreateRequest.newBuilder().setParent(d).setName(bs("g")).setMode(0644))).getAttr().getIno();
        assertNotEquals(g1.getIno(), g2);
        assertEquals(g1.getIno(), MdsSchema.getDentry(kv, d, b("g"), 1).getIno());
        assertEquals(g2, MdsSchema.getDentry(kv, d, b("g"), 2).getIno());
    }

    @Test
    void extentVersionsAndGcBirthDeath() throws Exception {
        apply(MdsRequest.newBuilder().setRegisterOst(RegisterOstRequest.newBuilder().setOst(
                OstInfo.newBuilder().setIndex(0).setEndpoint("e").setBucket("b"))));
        Attr f = apply(MdsRequest.newBuilder().setCreate(CreateRequest.newBuilder().setParent(1).setName(bs("f")).setMode(0644))).getAttr();
        Extent e = Extent.newBuilder().setStripeIndex(0).setOst(0).setBlockKey("b1").setLength(10).build();
        apply(MdsRequest.newBuilder().setCommitExtents(CommitExtentsRequest.newBuilder().setIno(f.getIno()).addExtents(e).setNewSize(10)));
        bumpEpoch(3);
        apply(MdsRequest.newBuilder().setCommitExtents(CommitExtentsRequest.newBuilder().setIno(f.getIno())
                .addExtents(e.toBuilder().setBlockKey("b2")).setNewSize(10)));
        assertEquals("b1", MdsSchema.getExtent(kv, f.getIno(), 0, 2).getBlockKey());
        assertEquals("b2", MdsSchema.getExtent(kv, f.getIno(), 0, 3).getBlockKey());
        assertEquals(3, MdsSchema.getExtent(kv, f.getIno(), 0, 3).getBirthEpoch());
        var gc = MdsSchema.listGc(kv);
        assertEquals(1, gc.size());
        assertEquals(1, gc.get(0).getBirthEpoch());
        assertEquals(3, gc.get(0).getDeathEpoch());
        List<String> atOne = new ArrayList<>();
        MdsSchema.scanExtents(kv, f.getIno(), 0, -1L, 1, x -> atOne.add(x.getBlockKey()));
        assertEquals(List.of("b1"), atOne);
    }
}
