package dev.granary.mds;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.google.protobuf.ByteString;
import dev.granary.mds.client.LocalMdsTransport;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.DirEntry;
import dev.granary.mds.proto.OstInfo;
import dev.granary.mds.proto.Status;
import dev.granary.mds.server.MdsStateMachine;
import dev.granary.raft.RocksKv;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.function.Executable;

/** A real RocksDB in a temp dir behind LocalMdsTransport + MdsClient, with a stepping clock. */
public abstract class MdsTestBase {
    protected static final Caller ROOT = Caller.newBuilder().setUid(0).setGid(0).build();
    protected static final Caller ALICE = Caller.newBuilder().setUid(1000).setGid(1000).addGids(1000).addGids(50).build();
    protected static final Caller BOB = Caller.newBuilder().setUid(1001).setGid(1001).build();
    protected static final long R = MdsClient.ROOT_INO;
    protected static final int S_IFDIR = 0040000, S_IFREG = 0100000, S_IFLNK = 0120000;

    @TempDir
    protected Path tmp;
    /** The clock: starts at 1e18 ns and advances 1000 ns per write. */
    protected final AtomicLong clock = new AtomicLong(1_000_000_000_000_000_000L);
    protected LocalMdsTransport transport;
    protected MdsClient mds;
    /** The database under {@link #transport}, for reads of state no request answers (pack counts). */
    protected RocksKv kv;

    @BeforeEach
    void openMds() {
        kv = RocksKv.open(tmp.resolve("db"), new MdsStateMachine().columnFamilies());
        transport = new LocalMdsTransport(kv, true, () -> clock.addAndGet(1000));
        mds = new MdsClient(transport);
    }

    @AfterEach
    void closeMds() {
        mds.close();
    }

    protected static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    protected static void assertErrno(Status expected, Executable op) {
        FsException e = assertThrows(FsException.class, op);
        assertEquals(expected, e.status(), e.getMessage());
    }

    /** All entry names of a directory, reading pages of {@code pageSize}. */
    protected List<String> list(Caller c, long dir, int pageSize) {
        List<String> out = new ArrayList<>();
        byte[] after = new byte[0];
        while (true) {
            var page = mds.readdir(c, dir, after, pageSize);
            for (DirEntry e : page.entries()) {
                out.add(e.getName().toStringUtf8());
            }
            if (!page.more()) {
                return out;
            }
            after = page.entries().get(page.entries().size() - 1).getName().toByteArray();
        }
    }

    /** An extent of stripe {@code stripe} in block {@code key} on the OST the layout gives that stripe. */
    protected static dev.granary.mds.proto.Extent ext(dev.granary.mds.proto.Layout l, long stripe, String key, long len) {
        return dev.granary.mds.proto.Extent.newBuilder().setStripeIndex(stripe).setOst(l.getOsts((int) (stripe % l.getStripeCount())))
                .setBlockKey(key).setLength(len).build();
    }

    protected void registerOsts(int n) {
        for (int i = 0; i < n; i++) {
            mds.registerOst(ROOT, OstInfo.newBuilder().setIndex(i).setEndpoint("http://s3:9000").setBucket("b" + i).build());
        }
    }

    protected static ByteString bs(String s) {
        return ByteString.copyFromUtf8(s);
    }
}
