import com.google.protobuf.ByteString;
import dev.granary.mds.client.LocalMdsTransport;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.CreateRequest;
import dev.granary.mds.proto.LookupRequest;
import dev.granary.mds.proto.MdsRequest;
import dev.granary.mds.proto.MdsResponse;
import dev.granary.mds.proto.MkdirRequest;
import dev.granary.mds.proto.ReadDirRequest;
import dev.granary.mds.proto.Status;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * CPU cost of the MDS's metadata reads on one peer, without Raft, gRPC or FUSE: a directory of N
 * files, flushed to SST files (a checkpoint, as a Raft snapshot makes), then listed in pages of
 * 1,024 (readdir), listed with attributes (readdir plus, statahead's fetch) and looked up name by
 * name, each query on a fresh RocksDB snapshot as the MDS answers one. Prints microseconds of
 * thread CPU per entry for each pass. Run with the classpath of a build
 * (bench/mds/read-cost.sh); compare builds in alternating runs.
 */
public class MdsReadCost {
    public static void main(String[] args) throws Exception {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 10_000;
        int passes = args.length > 1 ? Integer.parseInt(args[1]) : 5;
        Path dir = Files.createTempDirectory("mds-read-cost");
        var bean = ManagementFactory.getThreadMXBean();
        Caller root = Caller.newBuilder().setUid(0).setGid(0).build();
        try (LocalMdsTransport t = LocalMdsTransport.open(dir)) {
            long d = check(t.write(MdsRequest.newBuilder().setCaller(root).setMkdir(MkdirRequest.newBuilder()
                    .setParent(1).setName(ByteString.copyFromUtf8("d")).setMode(0755)).build())).getAttr().getIno();
            for (int i = 0; i < n; i++) {
                check(t.write(MdsRequest.newBuilder().setCaller(root).setCreate(CreateRequest.newBuilder()
                        .setParent(d).setName(ByteString.copyFromUtf8(String.format("m%06d", i))).setMode(0644).setExclusive(true)).build()));
            }
            t.kv().checkpoint(Files.createTempDirectory("mds-read-cost-snap").resolve("cp")); // flushes the memtables
            for (int p = 0; p < passes; p++) {
                long t0 = bean.getCurrentThreadCpuTime();
                int listed = list(t, root, d, false);
                long t1 = bean.getCurrentThreadCpuTime();
                int plus = list(t, root, d, true);
                long t2 = bean.getCurrentThreadCpuTime();
                for (int i = 0; i < n; i++) {
                    check(t.read(MdsRequest.newBuilder().setCaller(root).setLookup(LookupRequest.newBuilder()
                            .setParent(d).setName(ByteString.copyFromUtf8(String.format("m%06d", i)))).build()));
                }
                long t3 = bean.getCurrentThreadCpuTime();
                if (listed != n || plus != n) {
                    throw new IllegalStateException("listed " + listed + " and " + plus + " of " + n);
                }
                System.out.printf("pass %d: readdir %.2f us, readdir plus %.2f us, lookup %.2f us of CPU per entry%n",
                        p, (t1 - t0) / 1e3 / n, (t2 - t1) / 1e3 / n, (t3 - t2) / 1e3 / n);
            }
        }
    }

    /** Lists directory {@code d} in pages of 1,024; returns the entries seen. */
    static int list(LocalMdsTransport t, Caller c, long d, boolean plus) {
        int seen = 0;
        ByteString after = ByteString.EMPTY;
        while (true) {
            MdsResponse r = check(t.read(MdsRequest.newBuilder().setCaller(c).setReaddir(ReadDirRequest.newBuilder()
                    .setIno(d).setAfter(after).setLimit(1024).setPlus(plus)).build()));
            seen += r.getEntriesCount();
            if (!r.getMore() || r.getEntriesCount() == 0) {
                return seen;
            }
            after = r.getEntries(r.getEntriesCount() - 1).getName();
        }
    }

    static MdsResponse check(MdsResponse r) {
        if (r.getStatus() != Status.OK) {
            throw new IllegalStateException(r.getStatus() + " " + r.getMessage());
        }
        return r;
    }
}
