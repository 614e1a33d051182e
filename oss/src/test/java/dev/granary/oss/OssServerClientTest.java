package dev.granary.oss;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.objbacker.EmbeddedS3;
import dev.granary.objbacker.ObjectStore;
import dev.granary.objbacker.S3ObjectStore;
import dev.granary.oss.client.OssClient;
import dev.granary.oss.client.OssException;
import dev.granary.oss.proto.OssStatusReply;
import dev.granary.oss.server.OssServer;
import java.io.FileNotFoundException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** OssServer + OssClient over gRPC loopback, with two OSTs (two buckets) on a real embedded S3Proxy. */
class OssServerClientTest {
    private static final int MIB = 1024 * 1024;
    @TempDir
    static Path tmp;
    static EmbeddedS3 s3;

    private final List<AutoCloseable> closers = new ArrayList<>();
    private Map<Integer, ObjectStore> osts;
    private OssServer server;
    private OssClient client;

    @BeforeAll
    static void startS3() {
        s3 = EmbeddedS3.start(tmp.resolve("s3"), 0, "oss-access", "oss-secret");
        s3.createBucket("ost-zero");
        s3.createBucket("ost-one");
    }

    @AfterAll
    static void stopS3() {
        s3.close();
    }

    /** Fresh stores (fresh counters) for every test. */
    private Map<Integer, ObjectStore> newOsts() {
        S3ObjectStore a = S3ObjectStore.open(s3.config("ost-zero", "blocks"));
        S3ObjectStore b = S3ObjectStore.open(s3.config("ost-one", "blocks"));
        closers.add(a);
        closers.add(b);
        return Map.of(0, a, 1, b);
    }

    private OssServer newServer(OssConfig config, Map<Integer, ObjectStore> stores) {
        OssServer s = OssServer.start(config, stores);
        closers.add(s);
        return s;
    }

    @BeforeEach
    void setUp() {
        osts = newOsts();
        server = newServer(OssConfig.defaults("127.0.0.1", 0), osts);
        client = new OssClient(List.of(server.address()));
        closers.add(client);
    }

    @AfterEach
    void tearDown() throws Exception {
        for (int i = closers.size() - 1; i >= 0; i--) {
            closers.get(i).close();
        }
    }

    private static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    private static Throwable failure(CompletableFuture<?> f) {
        ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(20, TimeUnit.SECONDS));
        return e.getCause();
    }

    @Test
    void aBlockLargerThanFourMiBReadsWholeAndInRanges() throws Exception {
        // gRPC's own protobuf marshaller parses replies above 4 MiB another way; ours has one way.
        byte[] big = random(6 * 1024 * 1024 + 17, 9);
        client.write(0, "f9/s0", big).get();
        java.nio.ByteBuffer all = client.readView(0, "f9/s0", 0, big.length).get();
        assertEquals(big.length, all.remaining());
        assertArrayEquals(big, Arrays.copyOfRange(all.array(), all.arrayOffset(), all.arrayOffset() + all.remaining()));
        assertArrayEquals(Arrays.copyOfRange(big, 5_000_000, big.length), client.read(0, "f9/s0", 5_000_000, 2_000_000).get());
    }

    @Test
    void writeAndReadBlocksAndRanges() throws Exception {
        byte[] a = random(300_000, 1);
        byte[] b = random(5_000, 2);
        client.write(0, "f1/s0", a).get();
        client.write(1, "f1/s1", b).get();
        assertArrayEquals(a, client.read(0, "f1/s0", 0, a.length).get());
        assertArrayEquals(b, client.read(1, "f1/s1", 0, b.length).get());
        assertArrayEquals(Arrays.copyOfRange(a, 1000, 3000), client.read(0, "f1/s0", 1000, 2000).get());
        assertArrayEquals(Arrays.copyOfRange(b, 4000, 5000), client.read(1, "f1/s1", 4000, 9000).get());
        assertEquals(0, client.read(1, "f1/s1", 5000, 10).get().length);
        // The view without a copy holds the same bytes from position 0, over an array the FUSE
        // layer copies from directly.
        java.nio.ByteBuffer view = client.readView(0, "f1/s0", 1000, 2000).get();
        assertTrue(view.hasArray());
        assertEquals(0, view.position());
        assertEquals(2000, view.remaining());
        byte[] viewed = new byte[2000];
        view.get(0, viewed);
        assertArrayEquals(Arrays.copyOfRange(a, 1000, 3000), viewed);
        assertEquals(0, client.readView(1, "f1/s1", 5000, 10).get().remaining());
        // blocks are objects in each OST's bucket folder
        assertArrayEquals(a, Files.readAllBytes(s3.bucketDir("ost-zero").resolve("blocks/f1/s0")));
        assertArrayEquals(b, Files.readAllBytes(s3.bucketDir("ost-one").resolve("blocks/f1/s1")));
        // write-through: none of these reads went to S3
        OssStatusReply st = client.status(server.address()).get();
        assertEquals(0, st.getS3Gets());
        assertEquals(2, st.getS3Puts());
        assertEquals(List.of(0, 1), st.getOstsList());
        assertTrue(st.getCacheBytes() >= a.length + b.length, "cache bytes " + st.getCacheBytes());
    }

    @Test
    void secondReadIsACacheHit() throws Exception {
        byte[] data = random(2 * MIB, 3);
        osts.get(0).put("cold", data); // written behind the OSS: not in its cache
        assertArrayEquals(Arrays.copyOfRange(data, 0, 4096), client.read(0, "cold", 0, 4096).get());
        OssStatusReply first = client.status(server.address()).get();
        assertEquals(1, first.getS3Gets());
        assertEquals(1, first.getCacheMisses());
        // a small (random) read fetched only its 1 MiB chunk: the same chunk is a hit
        assertArrayEquals(Arrays.copyOfRange(data, 8192, 8192 + 4096), client.read(0, "cold", 8192, 4096).get());
        assertEquals(1, client.status(server.address()).get().getS3Gets());
        // a whole-block (sequential) read fetches the block once; then every read is a hit
        assertArrayEquals(data, client.read(0, "cold", 0, data.length).get());
        assertArrayEquals(Arrays.copyOfRange(data, MIB, MIB + 4096), client.read(0, "cold", MIB, 4096).get());
        OssStatusReply second = client.status(server.address()).get();
        assertEquals(2, second.getS3Gets());
        assertEquals(2, second.getCacheHits());
        assertEquals(2, second.getCacheMisses());
    }

    @Test
    void dropCacheEmptiesTheCacheSoTheNextReadGoesToS3() throws Exception {
        byte[] data = random(2 * MIB, 4);
        osts.get(0).put("drop", data);
        assertArrayEquals(data, client.read(0, "drop", 0, data.length).get());
        assertEquals(1, client.status(server.address()).get().getS3Gets());
        long dropped = client.dropCache(server.address()).get();
        assertTrue(dropped >= data.length, "dropped " + dropped + " bytes");
        OssStatusReply empty = client.status(server.address()).get();
        assertEquals(0, empty.getCacheBytes());
        assertArrayEquals(data, client.read(0, "drop", 0, data.length).get());
        OssStatusReply after = client.status(server.address()).get();
        assertEquals(2, after.getS3Gets(), "the read after the drop fetched the block again");
        assertEquals(0, client.dropCache(server.address()).thenCompose(b -> client.dropCache(server.address())).get());
        ExecutionException down = assertThrows(ExecutionException.class, () -> client.dropCache("127.0.0.1:1").get());
        assertTrue(down.getCause() instanceof OssException, down.toString());
    }

    @Test
    void concurrentMissesAreCoalesced() throws Exception {
        byte[] data = random(4 * MIB, 4);
        osts.get(1).put("hot", data);
        int readers = 8;
        CountDownLatch go = new CountDownLatch(1);
        List<CompletableFuture<byte[]>> reads = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < readers; i++) {
            int off = i * 1000;
            CompletableFuture<byte[]> r = new CompletableFuture<>();
            reads.add(r);
            Thread t = new Thread(() -> {
                try {
                    go.await();
                    r.complete(client.read(1, "hot", off, 1000).get());
                } catch (Exception e) {
                    r.completeExceptionally(e);
                }
            });
            threads.add(t);
            t.start();
        }
        go.countDown();
        for (int i = 0; i < readers; i++) {
            assertArrayEquals(Arrays.copyOfRange(data, i * 1000, i * 1000 + 1000), reads.get(i).get(20, TimeUnit.SECONDS));
        }
        assertEquals(1, server.s3Gets());
        assertEquals(1, server.cache().misses());
        assertEquals(readers - 1, server.cache().hits());
    }

    @Test
    void blocksAboveTheCachedSizePassThroughAsRangedGets() throws Exception {
        OssServer small = newServer(OssConfig.defaults("127.0.0.1", 0).withCache(64L * MIB, MIB), osts);
        OssClient c = new OssClient(List.of(small.address()));
        closers.add(c);
        byte[] data = random(3 * MIB, 5);
        osts.get(0).put("large", data);
        long before = small.s3Gets();
        // large reads of a block above the cached size: ranged GETs, nothing kept
        assertArrayEquals(Arrays.copyOfRange(data, 0, 2 * MIB), c.read(0, "large", 0, 2 * MIB).get());
        assertArrayEquals(Arrays.copyOfRange(data, MIB, 3 * MIB), c.read(0, "large", MIB, 2 * MIB).get());
        assertEquals(2, small.s3Gets() - before);
        small.cache().cleanUp();
        assertTrue(small.cache().weightedBytes() < 4096, "large block kept in cache: " + small.cache().weightedBytes());
        // small reads of it fetch and keep only their 1 MiB chunks
        assertArrayEquals(Arrays.copyOfRange(data, 100, 200), c.read(0, "large", 100, 100).get());
        assertArrayEquals(Arrays.copyOfRange(data, 300, 400), c.read(0, "large", 300, 100).get());
        assertArrayEquals(Arrays.copyOfRange(data, 2 * MIB, 2 * MIB + 100), c.read(0, "large", 2 * MIB, 100).get());
        assertEquals(4, small.s3Gets() - before);
        small.cache().cleanUp();
        assertTrue(small.cache().weightedBytes() >= 2L * MIB && small.cache().weightedBytes() < 2L * MIB + 8192,
                "two chunks cached: " + small.cache().weightedBytes());
    }

    /**
     * The read cache's local-disk tier against S3Proxy: with a memory cache smaller than the blocks
     * read, a second pass costs no GET; an OSS restarted on the same folder serves them without S3;
     * status reports the tier; a cache drop empties it (the next read is a GET again).
     */
    @Test
    void theDiskTierServesWhatMemoryCannotHoldAndSurvivesARestart() throws Exception {
        Path dir = tmp.resolve("disk-tier");
        OssConfig cfg = OssConfig.defaults("127.0.0.1", 0).withCache(3L * MIB, 16 * MIB).withDiskCache(dir, 64L * MIB);
        byte[][] blocks = new byte[8][];
        for (int i = 0; i < blocks.length; i++) {
            blocks[i] = random(MIB + 1000 * i, 40 + i);
            osts.get(i % 2).put("disk/" + i, blocks[i]);
        }
        OssServer first = newServer(cfg, osts);
        OssClient c = new OssClient(List.of(first.address()));
        closers.add(c);
        for (int round = 0; round < 2; round++) {
            for (int i = 0; i < blocks.length; i++) {
                assertArrayEquals(blocks[i], c.read(i % 2, "disk/" + i, 0, blocks[i].length).get(), "round " + round + " block " + i);
            }
            first.cache().disk().flush(10_000);
        }
        assertEquals(blocks.length, first.s3Gets(), "8 blocks (8.03 MiB) through a 3 MiB memory cache: one GET each");
        assertTrue(first.cache().disk().hits() >= 4, "disk hits " + first.cache().disk().hits());
        first.close();

        Map<Integer, ObjectStore> fresh = newOsts();
        OssServer second = newServer(cfg, fresh);
        OssClient c2 = new OssClient(List.of(second.address()));
        closers.add(c2);
        for (int i = 0; i < blocks.length; i++) {
            assertArrayEquals(blocks[i], c2.read(i % 2, "disk/" + i, 0, blocks[i].length).get());
        }
        assertEquals(0, second.s3Gets(), "restarted on the same folder: every block from disk");
        OssStatusReply st = c2.status(second.address()).get();
        assertTrue(st.getDiskCache());
        assertEquals(blocks.length, st.getDiskCacheHits());
        assertTrue(st.getDiskCacheBytes() > 8L * MIB, "disk bytes " + st.getDiskCacheBytes());

        c2.dropCache(second.address()).get();
        assertEquals(0, c2.status(second.address()).get().getDiskCacheBytes());
        assertArrayEquals(blocks[3], c2.read(1, "disk/3", 0, blocks[3].length).get());
        assertEquals(1, second.s3Gets(), "after a cache drop the block comes from S3");
    }

    @Test
    void missingBlockIsFileNotFound() {
        Throwable t = failure(client.read(0, "no/such/block", 0, 10));
        assertInstanceOf(FileNotFoundException.class, t);
        assertTrue(t.getMessage().contains("no/such/block") && t.getMessage().contains("OST 0"), t.getMessage());
    }

    @Test
    void unknownOstIsAClearIOException() {
        Throwable t = failure(client.read(7, "k", 0, 10));
        OssException e = assertInstanceOf(OssException.class, t);
        assertEquals("INVALID_ARGUMENT", e.code());
        assertTrue(e.getMessage().contains("OST 7 is not served by this OSS"), e.getMessage());
        t = failure(client.write(9, "k", new byte[1]));
        assertTrue(t.getMessage().contains("OST 9"), t.getMessage());
    }

    @Test
    void twentyMebibyteBlockRoundTrip() throws Exception {
        byte[] data = random(20 * MIB, 6);
        client.write(1, "big/20m", data).get(60, TimeUnit.SECONDS);
        assertArrayEquals(data, client.read(1, "big/20m", 0, data.length).get(60, TimeUnit.SECONDS));
        assertEquals(data.length, osts.get(1).head("big/20m").size());
    }

    @Test
    void deleteThenReadIsNotFound() throws Exception {
        client.write(0, "gc/a", new byte[] {1, 2, 3}).get();
        client.write(0, "gc/b", new byte[] {4}).get();
        assertArrayEquals(new byte[] {1, 2, 3}, client.read(0, "gc/a", 0, 3).get()); // cached
        client.delete(0, List.of("gc/a", "gc/b", "gc/never-written")).get();
        assertInstanceOf(FileNotFoundException.class, failure(client.read(0, "gc/a", 0, 3)));
        assertInstanceOf(FileNotFoundException.class, failure(client.read(0, "gc/b", 0, 1)));
        assertTrue(Files.notExists(s3.bucketDir("ost-zero").resolve("blocks/gc/a")));
    }

    @Test
    void routesByOstAndFailsOverWhenAnOssStops() throws Exception {
        OssServer second = newServer(OssConfig.defaults("127.0.0.1", 0), newOsts());
        OssClient two = new OssClient(List.of(server.address(), second.address()));
        closers.add(two);
        byte[] d0 = random(1000, 7);
        byte[] d1 = random(1000, 8);
        two.write(0, "route/0", d0).get();
        two.write(1, "route/1", d1).get();
        // OST 0 -> first OSS, OST 1 -> second OSS
        assertEquals(1, server.s3Puts());
        assertEquals(1, second.s3Puts());
        server.close();
        assertArrayEquals(d0, two.read(0, "route/0", 0, 1000).get(20, TimeUnit.SECONDS));
        assertArrayEquals(d1, two.read(1, "route/1", 0, 1000).get(20, TimeUnit.SECONDS));
        assertEquals(1, second.s3Gets()); // route/0 was fetched by the second OSS; route/1 was cached there
        // with every OSS down the client gives up with UNAVAILABLE after a bounded number of attempts
        second.close();
        OssException e = assertInstanceOf(OssException.class, failure(two.read(0, "route/0", 0, 10)));
        assertEquals("UNAVAILABLE", e.code());
    }

    @Test
    void setAddressesChangesRouting() throws Exception {
        OssServer second = newServer(OssConfig.defaults("127.0.0.1", 0), newOsts());
        client.write(0, "moved", new byte[] {9}).get();
        client.setAddresses(List.of(second.address()));
        assertArrayEquals(new byte[] {9}, client.read(0, "moved", 0, 1).get());
        assertEquals(1, second.s3Gets());
        assertEquals(List.of(second.address()), client.addresses());
        assertThrows(IllegalArgumentException.class, () -> client.setAddresses(List.of("no-port")));
        assertThrows(IllegalArgumentException.class, () -> client.setAddresses(List.of()));
    }
}
