import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Caller;
import dev.granary.tools.cluster.Nodes;
import dev.granary.tools.config.GranaryConfig;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.locks.LockSupport;
import java.util.function.IntConsumer;

/**
 * Latency of one MDS read as a client sees it, end to end through Raft and gRPC (Ratis' client,
 * the leader's lease check, the state machine's RocksDB read, the reply), single thread, against a
 * running cluster: getattr of the root, lookup of a name, lookup-for-open of a 100 KiB file kept
 * inline in the MDS (the reply carries its bytes) and of a 64 MiB file (16 stripes: the reply
 * carries its extent map). Each op runs back to back and paced (a 0.5 ms pause between calls, as
 * a reader that does something between its opens): on a VM whose idle vCPUs halt, every thread
 * hand-off of a call then also pays a wake-up. Also prints the context switches of the whole
 * machine per call ({@code ctxt} of /proc/stat). A benchmark: it prints figures, asserts nothing.
 *
 * <p>Usage: {@code bench/mds/rpc-latency.sh CONFIG MOUNT [CALLS]}, CONFIG the cluster's
 * granary.yaml, MOUNT a Granary mount of it where the benchmark writes its files (in a folder it
 * makes and removes), CALLS per op and round (default 2,000; 5 rounds, the first 2 unreported).
 */
public final class MdsRpcLatency {
    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: MdsRpcLatency CONFIG MOUNT [CALLS]");
            System.exit(2);
        }
        GranaryConfig cfg = GranaryConfig.load(Path.of(args[0]));
        Path dir = Path.of(args[1]).resolve("mds-rpc-latency-" + ProcessHandle.current().pid());
        int calls = args.length > 2 ? Integer.parseInt(args[2]) : 2000;
        int names = 500;
        Files.createDirectory(dir);
        try (MdsClient mds = Nodes.mdsClient(cfg)) {
            byte[] small = new byte[100 << 10];
            new Random(1).nextBytes(small);
            for (int i = 0; i < names; i++) {
                Files.write(dir.resolve(name(i)), small);
            }
            byte[] big = new byte[64 << 20];
            new Random(2).nextBytes(big);
            Files.write(dir.resolve("big"), big);
            Caller root = Caller.newBuilder().setUid(0).setGid(0).build();
            long d = mds.lookup(root, MdsClient.ROOT_INO, bytes(dir.getFileName().toString())).getIno();
            System.out.printf("%-50s %9s %9s %9s %12s%n", "MDS read (one thread)", "p10 us", "p50 us", "p90 us", "ctx sw/call");
            run("getattr of /", calls, i -> mds.getattr(root, MdsClient.ROOT_INO));
            run("lookup of a name", calls, i -> mds.lookup(root, d, bytes(name(i % names))));
            run("lookup for open, 100 KiB inline file", calls, i -> mds.lookupForOpen(root, d, bytes(name(i % names))));
            run("lookup for open, 64 MiB file (16 stripes)", Math.max(1, calls / 4), i -> mds.lookupForOpen(root, d, bytes("big")));
        } finally {
            try (var s = Files.list(dir)) {
                for (Path p : (Iterable<Path>) s::iterator) {
                    Files.delete(p);
                }
            }
            Files.delete(dir);
        }
        System.exit(0); // after the cleanup (an exit inside the try skipped it and left the files in the mount)
    }

    private static String name(int i) {
        return String.format("s%05d", i);
    }

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** Runs {@code op} back to back and paced, 5 rounds each, and prints the last 3 rounds' percentiles. */
    private static void run(String what, int calls, IntConsumer op) throws IOException {
        for (boolean paced : new boolean[] {false, true}) {
            long[] t = new long[calls * 3];
            long switches = 0;
            for (int round = 0; round < 5; round++) {
                long ctxt = contextSwitches();
                for (int i = 0; i < calls; i++) {
                    if (paced) {
                        LockSupport.parkNanos(500_000);
                    }
                    long t0 = System.nanoTime();
                    op.accept(i);
                    long ns = System.nanoTime() - t0;
                    if (round >= 2) {
                        t[(round - 2) * calls + i] = ns;
                    }
                }
                if (round >= 2) {
                    switches += contextSwitches() - ctxt;
                }
            }
            Arrays.sort(t);
            System.out.printf("%-50s %9d %9d %9d %12.1f%n", what + (paced ? ", paced" : ""),
                    t[t.length / 10] / 1000, t[t.length / 2] / 1000, t[t.length * 9 / 10] / 1000, switches / (double) t.length);
        }
    }

    /** Context switches of the whole machine since boot (/proc/stat {@code ctxt}). */
    private static long contextSwitches() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/stat"))) {
            if (line.startsWith("ctxt ")) {
                return Long.parseLong(line.substring(5).trim());
            }
        }
        return 0;
    }
}
