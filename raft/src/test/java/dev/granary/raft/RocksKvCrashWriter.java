package dev.granary.raft;

import java.nio.file.Path;
import java.util.List;
import java.util.Random;

/**
 * Child process of {@link RocksKvCrashTest}: commits entries 1..N, each one key of {@code value}
 * bytes in two column families with its index as last-applied, then halts without closing the
 * database (as a SIGKILL would: no flush, no shutdown hook).
 *
 * <p>Arguments: database folder, N, value size in bytes.
 */
public final class RocksKvCrashWriter {
    private RocksKvCrashWriter() {}

    /** The key of entry {@code i} in every column family. */
    static byte[] key(long i) {
        return String.format("k%08d", i).getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    }

    public static void main(String[] args) {
        Path dir = Path.of(args[0]);
        int n = Integer.parseInt(args[1]);
        int size = Integer.parseInt(args[2]);
        Random rnd = new Random(1);
        byte[] value = new byte[size];
        RocksKv kv = RocksKv.open(dir, RocksKvCrashTest.CFS);
        for (int i = 1; i <= n; i++) {
            rnd.nextBytes(value);
            KvTxn t = kv.newTxn();
            for (String cf : RocksKvCrashTest.CFS) {
                t.put(cf, key(i), value);
            }
            kv.commit(t, 1, i);
        }
        System.out.println("committed " + n);
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }
}
