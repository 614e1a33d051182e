package dev.granary.client.vfs;

import dev.granary.mds.client.LocalMdsTransport;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.Layout;
import dev.granary.mds.proto.OstInfo;
import dev.granary.objbacker.EmbeddedS3;
import dev.granary.objbacker.ObjectStore;
import dev.granary.objbacker.S3ObjectStore;
import dev.granary.oss.DirectBlockIo;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * Real parts for client tests: an embedded S3 server (S3Proxy) with one bucket holding two OSTs
 * (prefixes ost0/ and ost1/), {@link DirectBlockIo} over two {@link S3ObjectStore}s, and the real
 * MDS namespace on a local RocksDB ({@link LocalMdsTransport}) with both OSTs registered.
 */
public final class LocalCluster implements AutoCloseable {
    public static final String BUCKET = "granary-client-test";
    public static final Caller ROOT = GranaryVfs.caller(0, 0);

    public final EmbeddedS3 s3;
    public final S3ObjectStore ost0;
    public final S3ObjectStore ost1;
    public final ExecutorService blockExecutor;
    public final DirectBlockIo blockIo;
    public final MdsClient mds;
    /** MDS requests sent, by operation (the namespace's real state machine answers them). */
    public final java.util.Map<dev.granary.mds.proto.MdsRequest.OpCase, java.util.concurrent.atomic.AtomicLong> mdsCalls =
            new java.util.concurrent.ConcurrentHashMap<>();
    /** Runs before each MDS read reaches the state machine (a test may hold one there); none by default. */
    public volatile java.util.function.Consumer<dev.granary.mds.proto.MdsRequest> beforeRead = r -> { };
    /** Runs after each MDS read, before its answer goes back (a test may hold one there); none by default. */
    public volatile java.util.function.Consumer<dev.granary.mds.proto.MdsRequest> afterRead = r -> { };
    /** Runs before each MDS write reaches the state machine (a test may hold one there); none by default. */
    public volatile java.util.function.Consumer<dev.granary.mds.proto.MdsRequest> beforeWrite = r -> { };

    public LocalCluster(Path dir) {
        s3 = EmbeddedS3.start(dir.resolve("s3"), 0, "test-access", "test-secret-key");
        s3.createBucket(BUCKET);
        ost0 = S3ObjectStore.open(s3.config(BUCKET, "ost0"));
        ost1 = S3ObjectStore.open(s3.config(BUCKET, "ost1"));
        blockExecutor = Executors.newFixedThreadPool(16);
        blockIo = new DirectBlockIo(Map.<Integer, ObjectStore>of(0, ost0, 1, ost1), blockExecutor);
        LocalMdsTransport local = LocalMdsTransport.open(dir.resolve("mds"));
        mds = new MdsClient(new dev.granary.mds.client.MdsTransport() {
            private dev.granary.mds.proto.MdsResponse count(dev.granary.mds.proto.MdsRequest r) {
                mdsCalls.computeIfAbsent(r.getOpCase(), k -> new java.util.concurrent.atomic.AtomicLong()).incrementAndGet();
                return null;
            }

            @Override
            public dev.granary.mds.proto.MdsResponse write(dev.granary.mds.proto.MdsRequest r) {
                count(r);
                beforeWrite.accept(r);
                return local.write(r);
            }

            @Override
            public dev.granary.mds.proto.MdsResponse read(dev.granary.mds.proto.MdsRequest r) {
                count(r);
                beforeRead.accept(r);
                dev.granary.mds.proto.MdsResponse answer = local.read(r);
                afterRead.accept(r);
                return answer;
            }

            @Override
            public void close() {
                local.close();
            }
        });
        for (int i = 0; i < 2; i++) {
            mds.registerOst(ROOT, OstInfo.newBuilder().setIndex(i).setEndpoint(s3.endpoint().toString())
                    .setBucket(BUCKET).setPrefix("ost" + i).build());
        }
    }

    /** Makes directory {@code path} (as root, mode 0777) with a layout of {@code stripeSize}-byte stripes over both OSTs. */
    public void stripedDir(GranaryVfs vfs, String path, long stripeSize) {
        var a = vfs.mkdir(ROOT, path, 0777);
        mds.setLayout(ROOT, a.getIno(), Layout.newBuilder().setStripeSize(stripeSize).setStripeCount(2).build());
        vfs.invalidateCaches();
    }

    @Override
    public void close() {
        mds.close();
        blockIo.close();
        blockExecutor.shutdownNow();
        ost0.close();
        ost1.close();
        s3.close();
    }
}
