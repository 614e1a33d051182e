import dev.granary.objbacker.EmbeddedS3;
import dev.granary.objbacker.ObjectStore;
import dev.granary.objbacker.S3ObjectStore;
import dev.granary.oss.OssConfig;
import dev.granary.oss.client.OssClient;
import dev.granary.oss.server.OssServer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;

/**
 * Per-request latency of the OSS hop, single client thread, in one JVM: an embedded S3Proxy, an
 * OssServer on loopback and an OssClient. Prints p50/p90 (ms) of S3ObjectStore put/get and of
 * OssClient write / read of a block not in the OSS cache / read of a cached block, for 110 KiB and
 * 4 MiB blocks. A benchmark: it prints figures and asserts nothing. Run with bench/oss-latency.sh.
 *
 * <p>System properties: {@code n.small}/{@code n.large} measured requests per op (default
 * 300/30); {@code warmup.rounds} rounds of as many requests run first, unreported (default 3).
 */
public final class OssLatency {
    private static final int KIB = 1024;

    public static void main(String[] args) throws Exception {
        int nSmall = Integer.getInteger("n.small", 300);
        int nLarge = Integer.getInteger("n.large", 30);
        Path dir = Files.createTempDirectory("granary-oss-latency");
        try (EmbeddedS3 s3 = EmbeddedS3.start(dir.resolve("s3"), 0, "bench-access", "bench-secret")) {
            s3.createBucket("ost");
            try (S3ObjectStore direct = S3ObjectStore.open(s3.config("ost", "direct"));
                 S3ObjectStore served = S3ObjectStore.open(s3.config("ost", "served"));
                 OssServer server = OssServer.start(OssConfig.defaults("127.0.0.1", 0), Map.<Integer, ObjectStore>of(0, served));
                 OssClient client = new OssClient(List.of(server.address()))) {
                System.out.printf("%-40s %8s %8s %8s%n", "op (single thread)", "p50 ms", "p90 ms", "n");
                run("110KiB", 110 * KIB, nSmall, direct, served, server, client);
                run("4MiB", 4 * 1024 * KIB, nLarge, direct, served, server, client);
            }
        } finally {
            try (Stream<Path> s = Files.walk(dir)) {
                s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    /** The ops measured, in the order run within each iteration (interleaved, so load spikes hit all alike). */
    private static final String[] OPS = {
            "S3ObjectStore put", "S3ObjectStore get", "S3ObjectStore get [0,16MiB+1]", "OssClient status (no-op RPC)",
            "OssClient write", "OssClient read uncached", "OssClient read cached"};

    private static void run(String label, int size, int n, S3ObjectStore direct, S3ObjectStore served,
                            OssServer server, OssClient client) throws Exception {
        byte[] data = new byte[size];
        new Random(size).nextBytes(data);
        int probe = OssConfig.DEFAULT_MAX_CACHED_BLOCK_BYTES + 1; // the OSS cache-miss GET before the fix
        int rounds = Integer.getInteger("warmup.rounds", 3) + 1;
        for (int round = 0; round < rounds; round++) { // all but the last = warm-up (JIT)
            long[][] t = new long[OPS.length][n];
            for (int i = 0; i < n; i++) {
                String k = label + "-r" + round + "-" + i;
                served.put(k + "u", data); // not through the OSS: its cache has not seen it
                long s0 = System.nanoTime();
                direct.put(k, data);
                long s1 = System.nanoTime();
                check(direct.get(k, 0, size), size);
                long s2 = System.nanoTime();
                check(direct.get(k, 0, probe), size);
                long s3 = System.nanoTime();
                client.status(server.address()).get();
                long s4 = System.nanoTime();
                client.write(0, k + "w", data).get();
                long s5 = System.nanoTime();
                check(client.read(0, k + "u", 0, size).get(), size);
                long s6 = System.nanoTime();
                check(client.read(0, k + "u", 0, size).get(), size);
                long s7 = System.nanoTime();
                long[] at = {s0, s1, s2, s3, s4, s5, s6, s7};
                for (int op = 0; op < OPS.length; op++) {
                    t[op][i] = at[op + 1] - at[op];
                }
            }
            if (round == rounds - 1) {
                for (int op = 0; op < OPS.length; op++) {
                    report(label + " " + OPS[op], t[op]);
                }
            }
        }
    }

    private static void check(byte[] got, int size) {
        if (got.length != size) {
            throw new IllegalStateException("read " + got.length + " bytes, expected " + size);
        }
    }

    private static void report(String what, long[] nanos) {
        long[] s = nanos.clone();
        Arrays.sort(s);
        System.out.printf("%-40s %8.2f %8.2f %8d%n", what, s[s.length / 2] / 1e6, s[(int) (s.length * 0.9)] / 1e6, s.length);
    }
}
