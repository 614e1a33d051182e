package dev.granary.mds.server;

import static org.junit.jupiter.api.Assertions.*;

import com.google.protobuf.ByteString;
import dev.granary.mds.namespace.Namespace;
import dev.granary.mds.proto.*;
import dev.granary.raft.KvIterator;
import dev.granary.raft.KvTxn;
import dev.granary.raft.RocksKv;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Replicas are deterministic: the same request log applied to two fresh RocksDBs gives identical
 * contents in every column family. The log is a random mix of operations (many fail with an
 * errno); afterwards the tree's invariants hold (nlink, parent links, usage counters).
 */
class DeterminismTest {
    static final int OPS = 2000;
    @TempDir
    Path tmp;

    static final Caller[] CALLERS = {
        Caller.getDefaultInstance(),
        Caller.newBuilder().setUid(1000).setGid(1000).build(),
    };

    /**
     * A random request over a small pool of names and over inodes known to exist (from earlier
     * replies of the generating replica), so that operations collide and mostly reach their logic.
     */
    static MdsRequest randomRequest(Random rnd, long step, List<Long> dirs, List<Long> files) {
        String[] names = {"a", "b", "c", "d", "e", "f"};
        ByteString n1 = ByteString.copyFromUtf8(names[rnd.nextInt(names.length)]);
        ByteString n2 = ByteString.copyFromUtf8(names[rnd.nextInt(names.length)]);
        long p1 = dirs.get(rnd.nextInt(dirs.size())), p2 = dirs.get(rnd.nextInt(dirs.size()));
        long f1 = files.isEmpty() ? 1 : files.get(rnd.nextInt(files.size()));
        MdsRequest.Builder r = MdsRequest.newBuilder().setCaller(CALLERS[rnd.nextInt(10) == 0 ? 1 : 0]).setNowNs(1_000_000 + step);
        switch (rnd.nextInt(12)) {
            case 0, 1 -> r.setMkdir(MkdirRequest.newBuilder().setParent(p1).setName(n1).setMode(0755));
            case 2, 3 -> r.setCreate(CreateRequest.newBuilder().setParent(p1).setName(n1).setMode(0644).setExclusive(rnd.nextBoolean()));
            case 4 -> r.setUnlink(UnlinkRequest.newBuilder().setParent(p1).setName(n1));
            case 5 -> r.setRmdir(RmdirRequest.newBuilder().setParent(p1).setName(n1));
            case 6, 7 -> r.setRename(RenameRequest.newBuilder().setSrcParent(p1).setSrcName(n1).setDstParent(p2).setDstName(n2)
                    .setFlags(rnd.nextInt(4) == 0 ? rnd.nextInt(3) : 0));
            case 8 -> r.setLink(LinkRequest.newBuilder().setIno(f1).setNewParent(p2).setNewName(n2));
            case 9 -> r.setSetattr(SetAttrRequest.newBuilder().setIno(f1).setValid(1 | 8).setMode(0700).setSize(rnd.nextInt(1 << 24)));
            case 10 -> r.setSetxattr(SetXattrRequest.newBuilder().setIno(rnd.nextBoolean() ? f1 : p1)
                    .setName(ByteString.copyFromUtf8("user." + n1.toStringUtf8())).setValue(n2));
            default -> r.setCommitExtents(CommitExtentsRequest.newBuilder().setIno(f1).setNewSize(5_000_000)
                    .addExtents(Extent.newBuilder().setStripeIndex(rnd.nextInt(2)).setOst(0).setBlockKey("blk" + step).setLength(1000)));
        }
        return r.build();
    }

    /** Generates a log by applying random requests to {@code kv}; returns the log (entries as applied). */
    List<byte[]> generate(RocksKv kv) throws Exception {
        Random rnd = new Random(42);
        MdsStateMachine sm = new MdsStateMachine();
        List<byte[]> log = new ArrayList<>();
        log.add(MdsRequest.newBuilder().setNowNs(1).setRegisterOst(RegisterOstRequest.newBuilder()
                .setOst(OstInfo.newBuilder().setIndex(0).setEndpoint("e").setBucket("b"))).build().toByteArray());
        List<Long> dirs = new ArrayList<>(List.of(1L)), files = new ArrayList<>();
        long idx = 1;
        for (int i = 0; i <= OPS; i++) {
            byte[] entry = i == OPS ? new byte[] {(byte) 0xff, 0x01} /* garbage: EINVAL, no writes */
                    : i == 0 ? log.get(0) : randomRequest(rnd, i, dirs, files).toByteArray();
            if (i > 0) {
                log.add(entry);
            }
            KvTxn t = kv.newTxn();
            MdsResponse reply = MdsResponse.parseFrom(sm.apply(idx, entry, t));
            kv.commit(t, 1, idx++);
            if (reply.getStatus() == Status.OK && reply.hasAttr()) {
                (reply.getAttr().getMode() >>> 12 == 4 ? dirs : files).add(reply.getAttr().getIno());
            }
        }
        return log;
    }

    static Map<String, List<byte[][]>> dump(RocksKv kv) {
        Map<String, List<byte[][]>> out = new HashMap<>();
        for (String cf : kv.columnFamilies()) {
            List<byte[][]> entries = new ArrayList<>();
            try (KvIterator it = kv.seek(cf, new byte[0])) {
                for (; it.valid(); it.next()) {
                    entries.add(new byte[][] {it.key(), it.value()});
                }
            }
            out.put(cf, entries);
        }
        return out;
    }

    List<MdsResponse> applyAll(RocksKv kv, List<byte[]> log) throws Exception {
        MdsStateMachine sm = new MdsStateMachine();
        List<MdsResponse> replies = new ArrayList<>();
        long idx = 1;
        for (byte[] entry : log) {
            KvTxn t = kv.newTxn();
            replies.add(MdsResponse.parseFrom(sm.apply(idx, entry, t)));
            kv.commit(t, 1, idx++);
        }
        return replies;
    }

    @Test
    void sameLogSameDatabase() throws Exception {
        MdsStateMachine sm = new MdsStateMachine();
        try (RocksKv gen = RocksKv.open(tmp.resolve("gen"), sm.columnFamilies());
             RocksKv a = RocksKv.open(tmp.resolve("a"), sm.columnFamilies());
             RocksKv b = RocksKv.open(tmp.resolve("b"), sm.columnFamilies())) {
            List<byte[]> log = generate(gen);
            List<MdsResponse> ra = applyAll(a, log);
            List<MdsResponse> rb = applyAll(b, log);
            assertEquals(ra, rb, "identical replies");
            long ok = ra.stream().filter(r -> r.getStatus() == Status.OK).count();
            Map<String, Integer> histogram = new java.util.TreeMap<>();
            for (int i = 0; i < ra.size(); i++) {
                MdsRequest q = i < log.size() - 1 ? MdsRequest.parseFrom(log.get(i)) : MdsRequest.getDefaultInstance();
                histogram.merge(q.getOpCase() + ":" + ra.get(i).getStatus(), 1, Integer::sum);
            }
            assertTrue(ok > OPS / 4 && ok < OPS, "a real mix of successes and errnos: " + ok + " " + histogram);
            Map<String, List<byte[][]>> da = dump(a), db = dump(b);
            assertEquals(da.keySet(), db.keySet());
            for (String cf : da.keySet()) {
                List<byte[][]> x = da.get(cf), y = db.get(cf);
                assertEquals(x.size(), y.size(), "entries in " + cf);
                for (int i = 0; i < x.size(); i++) {
                    assertArrayEquals(x.get(i)[0], y.get(i)[0], cf + " key " + i);
                    assertArrayEquals(x.get(i)[1], y.get(i)[1], cf + " value " + i);
                }
            }
            assertTrue(da.get("dentries").size() > 3, "the log built a tree");
            Map<String, List<byte[][]>> dg = dump(gen);
            for (String cf : dg.keySet()) {
                assertEquals(dg.get(cf).size(), da.get(cf).size(), "generator replica agrees on " + cf);
            }
            checkInvariants(a);
        }
    }

    /** nlink of directories = 2 + subdirs, of files = dentries pointing at them; ".." links; usage. */
    static void checkInvariants(RocksKv kv) {
        Namespace ns = Namespace.readOnly(kv);
        Caller root = Caller.getDefaultInstance();
        Map<Long, Integer> refs = new HashMap<>();
        List<Long> dirs = new ArrayList<>(List.of(1L));
        for (int i = 0; i < dirs.size(); i++) {
            long dir = dirs.get(i);
            int subdirs = 0;
            for (DirEntry e : ns.readdir(root, dir, new byte[0], 10_000).entries()) {
                Attr a = ns.getattr(root, e.getIno());
                assertEquals(a.getMode() & 0170000, e.getMode(), "dentry type matches the inode");
                if (e.getMode() == 0040000) {
                    subdirs++;
                    dirs.add(e.getIno());
                    assertEquals(dir, ns.lookup(root, e.getIno(), new byte[] {'.', '.'}).getIno(), "parent link");
                } else {
                    refs.merge(e.getIno(), 1, Integer::sum);
                }
            }
            assertEquals(2 + subdirs, ns.getattr(root, dir).getNlink(), "nlink of dir " + dir);
        }
        for (Map.Entry<Long, Integer> r : refs.entrySet()) {
            assertEquals((int) r.getValue(), ns.getattr(root, r.getKey()).getNlink(), "nlink of " + r.getKey());
        }
        assertEquals(dirs.size() + refs.size(), ns.statfs(root).getUsedInodes(), "no orphan inodes");
    }
}
