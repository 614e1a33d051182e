import com.google.protobuf.ByteString;
import dev.granary.mds.proto.CreateRequest;
import dev.granary.mds.proto.MdsRequest;
import dev.granary.mds.proto.MkdirRequest;
import dev.granary.mds.proto.MdsResponse;
import dev.granary.mds.proto.Status;
import dev.granary.mds.proto.UnlinkRequest;
import dev.granary.mds.server.MdsStateMachine;
import dev.granary.raft.KvTxn;
import dev.granary.raft.RocksKv;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.UUID;

/**
 * CPU cost of applying MDS entries on one peer, without Raft, gRPC or FUSE: creates then unlinks
 * of N files in one directory, each entry applied and committed as KvStateMachine does (a look for
 * an earlier reply of its call, the apply, a commit that remembers the call and forgets expired
 * ones), with a RocksDB checkpoint every 10,000 entries as a Raft snapshot makes (it flushes
 * the memtables, so reads go to SST files as in a running MDS). Prints microseconds of thread CPU per entry for each pass. Run with the classpath of a
 * build (bench/mds/apply-cost.sh); compare builds in alternating runs.
 */
public class MdsApplyCost {
    /** Entries between two checkpoints, as the MDS's default snapshot_threshold. */
    static final long SNAPSHOT_EVERY = 10_000;
    /** Entries between two looks for expired calls: KvStateMachine.FORGET_EVERY (1 before 2026-12-03). */
    static final long FORGET_EVERY = Long.getLong("forgetEvery", 16);

    public static void main(String[] args) throws Exception {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 10_000;
        int passes = args.length > 1 ? Integer.parseInt(args[1]) : 5;
        Path dir = Files.createTempDirectory("mds-apply-cost");
        MdsStateMachine sm = new MdsStateMachine();
        var bean = ManagementFactory.getThreadMXBean();
        byte[] client = ByteBuffer.allocate(16).putLong(UUID.randomUUID().getMostSignificantBits()).putLong(1).array();
        try (RocksKv kv = RocksKv.open(dir, sm.columnFamilies(), false)) {
            long[] index = {1};
            long d = apply(sm, kv, index, client, MdsRequest.newBuilder().setMkdir(MkdirRequest.newBuilder()
                    .setParent(1).setName(ByteString.copyFromUtf8("d")).setMode(0755))).getAttr().getIno();
            for (int p = 0; p < passes; p++) {
                long t0 = bean.getCurrentThreadCpuTime();
                for (int i = 0; i < n; i++) {
                    apply(sm, kv, index, client, MdsRequest.newBuilder().setCreate(CreateRequest.newBuilder()
                            .setParent(d).setName(ByteString.copyFromUtf8("f" + p + "." + i)).setMode(0644).setExclusive(true)));
                }
                long t1 = bean.getCurrentThreadCpuTime();
                for (int i = 0; i < n; i++) {
                    apply(sm, kv, index, client, MdsRequest.newBuilder().setUnlink(UnlinkRequest.newBuilder()
                            .setParent(d).setName(ByteString.copyFromUtf8("f" + p + "." + i))));
                }
                long t2 = bean.getCurrentThreadCpuTime();
                System.out.printf("pass %d: create %.1f us, unlink %.1f us of CPU per entry%n",
                        p, (t1 - t0) / 1e3 / n, (t2 - t1) / 1e3 / n);
            }
        }
    }

    private static MdsResponse apply(MdsStateMachine sm, RocksKv kv, long[] index, byte[] client, MdsRequest.Builder r)
            throws Exception {
        long i = index[0]++;
        if (i % SNAPSHOT_EVERY == 0) {
            kv.checkpoint(Files.createTempDirectory("mds-apply-cost-snap").resolve("cp")); // flushes the memtables, as a Raft snapshot does
        }
        byte[] callId = ByteBuffer.allocate(client.length + 8).put(client).putLong(i).array();
        long now = System.currentTimeMillis() * 1_000_000L;
        if (kv.callReply(callId) != null) {
            throw new IllegalStateException("call " + i + " seen before");
        }
        KvTxn t = kv.newTxn();
        byte[] reply = sm.apply(i, r.setNowNs(now).build().toByteArray(), t);
        kv.commit(t, 1, i, new RocksKv.Call(callId, now, reply), i % FORGET_EVERY == 0 ? now - 120_000_000_000L : Long.MIN_VALUE);
        MdsResponse resp = MdsResponse.parseFrom(reply);
        if (resp.getStatus() != Status.OK) {
            throw new IllegalStateException("entry " + i + ": " + resp.getStatus() + " " + resp.getMessage());
        }
        return resp;
    }
}
