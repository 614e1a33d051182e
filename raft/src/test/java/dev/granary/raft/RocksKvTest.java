package dev.granary.raft;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class RocksKvTest {
    private static final List<String> CFS = List.of("inodes", "dentries");

    @TempDir
    Path tmp;

    private static byte[] b(String s) {
        return s.getBytes(UTF_8);
    }

    private static List<String> keys(KvIterator it) {
        List<String> out = new ArrayList<>();
        try (it) {
            while (it.valid()) {
                out.add(new String(it.key(), UTF_8) + "=" + new String(it.value(), UTF_8));
                it.next();
            }
        }
        return out;
    }

    @Test
    void boundedSeeksStopAtTheBoundOnEveryReader() {
        try (RocksKv kv = RocksKv.open(tmp.resolve("db"), CFS)) {
            KvTxn t = kv.newTxn();
            for (String k : List.of("a1", "a2", "b1", "b2")) {
                t.put("inodes", b(k), b("v"));
            }
            kv.commit(t, 1, 1);
            List<String> a = List.of("a1=v", "a2=v");
            assertEquals(a, keys(kv.seek("inodes", b("a"), KvReader.prefixEnd(b("a")))));
            try (RocksKv.SnapshotReader r = kv.snapshotReader()) {
                assertEquals(a, keys(r.seek("inodes", b("a"), b("b"))));
                assertEquals(List.of("a2=v"), keys(r.seek("inodes", b("a2"), b("b1"))));
            }
            KvTxn t2 = kv.newTxn();
            t2.put("inodes", b("a3"), b("w"));
            t2.put("inodes", b("b0"), b("w"));
            assertEquals(List.of("a1=v", "a2=v", "a3=w"), keys(t2.seek("inodes", b("a"), b("b"))));
            assertEquals(List.of("a1=v", "a2=v", "a3=w", "b0=w", "b1=v", "b2=v"), keys(t2.seek("inodes", b("a"))));
            assertEquals(List.of(), keys(kv.seek("inodes", b("c"), KvReader.prefixEnd(b("c")))));
        }
    }

    @Test
    void prefixEndIsTheFirstKeyPastThePrefix() {
        assertArrayEquals(new byte[] {1, 3}, KvReader.prefixEnd(new byte[] {1, 2}));
        assertArrayEquals(new byte[] {2}, KvReader.prefixEnd(new byte[] {1, (byte) 0xFF}));
        assertNull(KvReader.prefixEnd(new byte[] {(byte) 0xFF, (byte) 0xFF}));
        assertNull(KvReader.prefixEnd(new byte[0]));
    }

    /**
     * Deleted keys past the end of a range cost a scan of that range nothing when it is bounded:
     * RocksDB otherwise steps over every tombstone up to the next live key (here 5,000).
     */
    @Test
    void boundedSeeksDoNotStepOverTombstonesPastTheBound() {
        try (RocksKv kv = RocksKv.open(tmp.resolve("db"), CFS)) {
            KvTxn t = kv.newTxn();
            t.put("inodes", b("a"), b("v"));
            for (int i = 0; i < 5000; i++) {
                t.put("inodes", b(String.format("b%05d", i)), b("v"));
            }
            t.put("inodes", b("c"), b("v"));
            kv.commit(t, 1, 1);
            KvTxn d = kv.newTxn();
            for (int i = 0; i < 5000; i++) {
                d.delete("inodes", b(String.format("b%05d", i)));
            }
            kv.commit(d, 1, 2);
            byte[] until = KvReader.prefixEnd(b("a"));
            assertTrue(kv.deletedKeysSkipped(() -> keys(kv.seek("inodes", b("a")))) >= 5000,
                    "unbounded: the scan steps over the tombstones to reach c");
            assertEquals(0, kv.deletedKeysSkipped(() -> assertEquals(List.of("a=v"), keys(kv.seek("inodes", b("a"), until)))));
            try (RocksKv.SnapshotReader r = kv.snapshotReader()) {
                assertEquals(0, kv.deletedKeysSkipped(() -> assertEquals(List.of("a=v"), keys(r.seek("inodes", b("a"), until)))));
            }
            KvTxn t3 = kv.newTxn();
            assertEquals(0, kv.deletedKeysSkipped(() -> assertEquals(List.of("a=v"), keys(t3.seek("inodes", b("a"), until)))));
        }
    }

    @Test
    void txnReadsItsOwnWritesOverTheDb() {
        try (RocksKv kv = RocksKv.open(tmp.resolve("db"), CFS)) {
            assertEquals(-1, kv.lastAppliedIndex());
            KvTxn t1 = kv.newTxn();
            t1.put("inodes", b("a"), b("1"));
            t1.put("inodes", b("c"), b("3"));
            kv.commit(t1, 1, 5);

            KvTxn t2 = kv.newTxn();
            t2.put("inodes", b("b"), b("2"));
            t2.delete("inodes", b("c"));
            t2.put("inodes", b("a"), b("1bis"));
            assertArrayEquals(b("1bis"), t2.get("inodes", b("a")));
            assertNull(t2.get("inodes", b("c")));
            assertArrayEquals(b("2"), t2.get("inodes", b("b")));
            assertEquals(List.of("a=1bis", "b=2"), keys(t2.seek("inodes", new byte[0])));
            assertEquals(List.of("b=2"), keys(t2.seek("inodes", b("az"))));
            // Not visible outside the txn before commit; other CF untouched.
            assertArrayEquals(b("1"), kv.get("inodes", b("a")));
            assertNull(kv.get("inodes", b("b")));
            assertNull(t2.get("dentries", b("a")));
            kv.abort(t2);
            assertNull(kv.get("inodes", b("b")));
            assertEquals(List.of("a=1", "c=3"), keys(kv.seek("inodes", new byte[0])));
            assertEquals(5, kv.lastAppliedIndex());
            assertThrows(IllegalStateException.class, () -> t2.put("inodes", b("x"), b("y")));
        }
    }

    @Test
    void commitIsAtomicWithTheLastAppliedIndexAndSurvivesReopen() {
        Path dir = tmp.resolve("db");
        try (RocksKv kv = RocksKv.open(dir, CFS)) {
            KvTxn t = kv.newTxn();
            t.put("dentries", b("k"), b("v"));
            kv.commit(t, 3, 42);
            assertEquals(42, kv.lastAppliedIndex());
            assertEquals(3, kv.lastAppliedTerm());
            KvTxn stale = kv.newTxn();
            stale.put("dentries", b("k2"), b("v2"));
            // An index that does not advance is refused and writes nothing.
            assertThrows(IllegalArgumentException.class, () -> kv.commit(stale, 3, 42));
            assertNull(kv.get("dentries", b("k2")));
            kv.markApplied(4, 43);
        }
        try (RocksKv kv = RocksKv.open(dir, CFS)) {
            assertEquals(43, kv.lastAppliedIndex());
            assertEquals(4, kv.lastAppliedTerm());
            assertArrayEquals(b("v"), kv.get("dentries", b("k")));
            assertNull(kv.get("dentries", b("k2")));
        }
    }

    @Test
    void largeValuesSurviveFlushesAndCompactionsWrittenDirect() {
        // 80 MiB of 100 KiB values (small files' inline data): five memtables flushed and a
        // compaction of the level-0 files, through O_DIRECT where the temp dir's file system takes it.
        Path dir = tmp.resolve("db");
        int values = 800;
        try (RocksKv kv = RocksKv.open(dir, CFS)) {
            assertEquals(RocksKv.directIoSupported(tmp), kv.directFlush());
            for (int i = 0; i < values; i++) {
                KvTxn t = kv.newTxn();
                t.put("inodes", b(String.format("i%05d", i)), value(i));
                kv.commit(t, 1, i + 1);
            }
        }
        try (RocksKv kv = RocksKv.open(dir, CFS)) {
            assertEquals(values, kv.lastAppliedIndex());
            for (int i = 0; i < values; i++) {
                assertArrayEquals(value(i), kv.get("inodes", b(String.format("i%05d", i))), "value " + i);
            }
        }
        assertFalse(Files.exists(dir.resolve(".direct-io-probe")), "the probe file is removed");
    }

    @Test
    void directIoProbeRefusesWhatItCannotWrite() {
        assertFalse(RocksKv.directIoSupported(tmp.resolve("missing")));
    }

    private static byte[] value(int i) {
        byte[] v = new byte[100 * 1024];
        new java.util.Random(i).nextBytes(v);
        return v;
    }

    @Test
    void callsAreRememberedWithTheirEntryUntilForgottenByStamp() {
        Path dir = tmp.resolve("db");
        try (RocksKv kv = RocksKv.open(dir, CFS)) {
            for (long i = 1; i <= 5; i++) {
                KvTxn t = kv.newTxn();
                t.put("inodes", b("k" + i), b("v"));
                kv.commit(t, 1, i, new RocksKv.Call(b("call-" + i), 1000 * i, b("reply-" + i)), Long.MIN_VALUE);
            }
            kv.markApplied(1, 6); // a no-op entry: no call
            assertArrayEquals(b("reply-3"), kv.callReply(b("call-3")));
            assertNull(kv.callReply(b("call-6")));
        }
        try (RocksKv kv = RocksKv.open(dir, CFS)) {
            assertArrayEquals(b("reply-5"), kv.callReply(b("call-5")), "durable with the entry");
            KvTxn t = kv.newTxn();
            // Forget calls stamped before 3500: calls 1..3.
            kv.commit(t, 1, 7, new RocksKv.Call(b("call-7"), 7000, b("reply-7")), 3500);
            assertNull(kv.callReply(b("call-1")));
            assertNull(kv.callReply(b("call-3")));
            assertArrayEquals(b("reply-4"), kv.callReply(b("call-4")));
            assertArrayEquals(b("reply-7"), kv.callReply(b("call-7")));
            assertEquals(7, kv.lastAppliedIndex(), "the last-applied record is not a call");
            assertEquals(List.of("k1=v", "k2=v", "k3=v", "k4=v", "k5=v"), keys(kv.seek("inodes", new byte[0])));
            // A call stamped earlier than those already forgotten (a new leader's clock is behind)
            // is still forgotten in stamp order, like on a peer that scans from the start.
            kv.commit(kv.newTxn(), 1, 8, new RocksKv.Call(b("call-8"), 500, b("reply-8")), 3500);
            assertArrayEquals(b("reply-8"), kv.callReply(b("call-8")));
            kv.commit(kv.newTxn(), 1, 9, null, 6000);
            assertNull(kv.callReply(b("call-8")));
            assertNull(kv.callReply(b("call-4")));
            assertNull(kv.callReply(b("call-5")));
            assertArrayEquals(b("reply-7"), kv.callReply(b("call-7")));
        }
    }

    @Test
    void checkpointOpensAsADbWithTheSameData() {
        Path cp = tmp.resolve("cp");
        try (RocksKv kv = RocksKv.open(tmp.resolve("db"), CFS)) {
            for (int i = 0; i < 100; i++) {
                KvTxn t = kv.newTxn();
                t.put("inodes", b(String.format("k%03d", i)), b("v" + i));
                kv.commit(t, 1, i);
            }
            kv.checkpoint(cp);
            assertThrows(IllegalArgumentException.class, () -> kv.checkpoint(cp));
            KvTxn t = kv.newTxn();
            t.put("inodes", b("after"), b("x"));
            kv.commit(t, 2, 100);
        }
        assertTrue(Files.exists(cp.resolve("CURRENT")));
        try (RocksKv copy = RocksKv.open(cp, CFS)) {
            assertEquals(99, copy.lastAppliedIndex());
            assertEquals(100, keys(copy.seek("inodes", new byte[0])).size());
            assertArrayEquals(b("v57"), copy.get("inodes", b("k057")));
            assertNull(copy.get("inodes", b("after")));
        }
    }

    @Test
    void snapshotReaderIsStableWhileCommitsGoOn() {
        try (RocksKv kv = RocksKv.open(tmp.resolve("db"), CFS)) {
            KvTxn t = kv.newTxn();
            t.put("inodes", b("a"), b("1"));
            kv.commit(t, 1, 1);
            try (RocksKv.SnapshotReader r = kv.snapshotReader()) {
                KvTxn t2 = kv.newTxn();
                t2.put("inodes", b("a"), b("2"));
                t2.put("inodes", b("b"), b("2"));
                kv.commit(t2, 1, 2);
                assertArrayEquals(b("1"), r.get("inodes", b("a")));
                assertEquals(List.of("a=1"), keys(r.seek("inodes", new byte[0])));
            }
            assertArrayEquals(b("2"), kv.get("inodes", b("a")));
        }
    }

    @Test
    void badInputGetsClearErrors() {
        RocksKv kv = RocksKv.open(tmp.resolve("db"), CFS);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> kv.get("nope", b("a")));
        assertTrue(e.getMessage().contains("unknown column family: nope"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> kv.seek("nope", b("a")));
        KvTxn t = kv.newTxn();
        assertThrows(IllegalArgumentException.class, () -> t.put("nope", b("a"), b("b")));
        assertThrows(IllegalArgumentException.class, () -> t.put(RocksKv.DEFAULT_CF, b("a"), b("b")));
        kv.abort(t);
        assertThrows(IllegalArgumentException.class, () -> RocksKv.open(tmp.resolve("x"), List.of("a", "a")));
        assertThrows(IllegalArgumentException.class, () -> RocksKv.open(tmp.resolve("y"), List.of("default")));
        KvIterator open = kv.seek("inodes", new byte[0]);
        kv.close();
        kv.close();
        assertFalse(open.valid());
        assertThrows(IllegalStateException.class, () -> kv.get("inodes", b("a")));
        open.close();
        // A second process-level open of a locked db fails with RocksDB's message.
        try (RocksKv first = RocksKv.open(tmp.resolve("locked"), CFS)) {
            KvStoreException ex = assertThrows(KvStoreException.class, () -> RocksKv.open(tmp.resolve("locked"), CFS));
            assertTrue(ex.getMessage().contains("lock"), ex.getMessage());
        }
    }
}
