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
 * 300/30), same number again as warm-up.
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
                System.out.printf("%-34s %8s %8s %8s%n", "op (single thread)", "p50 ms", "p90 ms", "n");
                run("110KiB", 110 * KIB, nSmall, direct, served, server, client);
                run("4MiB", 4 * 1024 * KIB, nLarge, direct, served, server, client);
            }
        } finally {
            try (Stream<Path> s = Files.walk(dir)) {
                s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    private static void run(String label, int size, int n, S3ObjectStore direct, S3ObjectStore served,
                            OssServer server, OssClient client) throws Exception {
        byte[] data = new byte[size];
        new Random(size).nextBytes(data);
        for (int round = 0; round < 2; round++) { // round 0 = warm-up
            boolean print = round == 1;
            String p = label + "-r" + round + "-";
            long[] t = new long[n];
            for (int i = 0; i < n; i++) {
                long s = System.nanoTime();
                direct.put(p + i, data);
                t[i] = System.nanoTime() - s;
            }
            report(print, label + " S3ObjectStore put", t);
            for (int i = 0; i < n; i++) {
                long s = System.nanoTime();
                check(direct.get(p + i, 0, size), size);
                t[i] = System.nanoTime() - s;
            }
            report(print, label + " S3ObjectStore get", t);
            // the OSS cache-miss probe GET shape before the fix: [0, 16 MiB] of a small object
            for (int i = 0; i < n; i++) {
                long s = System.nanoTime();
                check(direct.get(p + i, 0, OssConfig.DEFAULT_MAX_CACHED_BLOCK_BYTES + 1), size);
                t[i] = System.nanoTime() - s;
            }
            report(print, label + " S3ObjectStore get [0,16MiB]", t);
            for (int i = 0; i < n; i++) {
                long s = System.nanoTime();
                client.status(server.address()).get();
                t[i] = System.nanoTime() - s;
            }
            report(print, label + " OssClient status (no-op RPC)", t);
            for (int i = 0; i < n; i++) {
                long s = System.nanoTime();
                client.write(0, p + "w" + i, data).get();
                t[i] = System.nanoTime() - s;
            }
            report(print, label + " OssClient write", t);
            for (int i = 0; i < n; i++) { // not through the OSS: its cache has not seen these
                served.put(p + "u" + i, data);
            }
            for (int i = 0; i < n; i++) {
                long s = System.nanoTime();
                check(client.read(0, p + "u" + i, 0, size).get(), size);
                t[i] = System.nanoTime() - s;
            }
            report(print, label + " OssClient read uncached", t);
            for (int i = 0; i < n; i++) {
                long s = System.nanoTime();
                check(client.read(0, p + "u" + i, 0, size).get(), size);
                t[i] = System.nanoTime() - s;
            }
            report(print, label + " OssClient read cached", t);
        }
    }

    private static void check(byte[] got, int size) {
        if (got.length != size) {
            throw new IllegalStateException("read " + got.length + " bytes, expected " + size);
        }
    }

    private static void report(boolean print, String what, long[] nanos) {
        if (!print) {
            return;
        }
        long[] s = nanos.clone();
        Arrays.sort(s);
        System.out.printf("%-34s %8.2f %8.2f %8d%n", what, s[s.length / 2] / 1e6, s[(int) (s.length * 0.9)] / 1e6, s.length);
    }
}
