package dev.granary.raft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A process that dies while committing (no close, no flush) leaves a database that reopens at one
 * consistent point: its last-applied index L, every entry up to L in every column family and none
 * after it. The state machine relies on it: commits skip RocksDB's WAL, and a restarted peer
 * re-applies the Raft log after L. With column families flushed one by one (no atomic_flush) the
 * family holding L never flushed at all here: it reopened at -1 with the data families holding
 * entries past it.
 */
class RocksKvCrashTest {
    static final List<String> CFS = List.of("inodes", "extents");

    @TempDir
    Path tmp;

    @Test
    void aDatabaseKilledMidWriteReopensAtOneConsistentPoint() throws Exception {
        Path dir = tmp.resolve("db");
        int n = 2000;
        String java = ProcessHandle.current().info().command().orElse("java");
        Process p = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
                RocksKvCrashWriter.class.getName(), dir.toString(), Integer.toString(n), Integer.toString(64 * 1024))
                .redirectErrorStream(true).start();
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "the writer finished");
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.contains("committed " + n), out);

        try (RocksKv kv = RocksKv.open(dir, CFS)) {
            long last = kv.lastAppliedIndex();
            System.out.printf("killed after %d commits of 2 x 64 KiB: reopened at %d%n", n, last);
            assertTrue(last > 0 && last <= n, "last applied " + last + " (memtables of 16 MiB were flushed meanwhile)");
            for (int i = 1; i <= n; i++) {
                for (String cf : CFS) {
                    byte[] v = kv.get(cf, RocksKvCrashWriter.key(i));
                    if (i <= last) {
                        assertNotNull(v, cf + " lost entry " + i + " of " + last);
                    } else {
                        assertNull(v, cf + " holds entry " + i + " past the last applied " + last);
                    }
                }
            }
            KvTxn t = kv.newTxn(); // the next entry applies on top, as the Raft log replay does
            t.put("inodes", RocksKvCrashWriter.key(last + 1), new byte[] {1});
            kv.commit(t, 1, last + 1);
            assertEquals(last + 1, kv.lastAppliedIndex());
        }
    }
}
