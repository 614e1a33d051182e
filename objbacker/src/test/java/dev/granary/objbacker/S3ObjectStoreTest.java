package dev.granary.objbacker;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** S3ObjectStore against a real embedded S3Proxy on a temporary folder. */
class S3ObjectStoreTest {
    private static final String BUCKET = "granary-test";
    @TempDir
    static Path tmp;
    static EmbeddedS3 s3;
    static S3ObjectStore store;

    @BeforeAll
    static void startS3() {
        s3 = EmbeddedS3.start(tmp.resolve("s3"), 0, "test-access", "test-secret-key");
        s3.createBucket(BUCKET);
        store = S3ObjectStore.open(s3.config(BUCKET, "ost0"));
    }

    @AfterAll
    static void stopS3() {
        store.close();
        s3.close();
    }

    private static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    @Test
    void putGetWholeAndRanges() {
        byte[] data = random(10_000, 1);
        long getsBefore = store.counters().gets.get();
        store.put("blocks/a", data);
        assertArrayEquals(data, store.get("blocks/a", 0, data.length));
        assertArrayEquals(Arrays.copyOfRange(data, 100, 1100), store.get("blocks/a", 100, 1000));
        // a range crossing the end returns the bytes up to the end
        assertArrayEquals(Arrays.copyOfRange(data, 9_000, 10_000), store.get("blocks/a", 9_000, 5_000));
        // at or past the end: empty (S3 answers 416)
        assertEquals(0, store.get("blocks/a", 10_000, 10).length);
        assertEquals(0, store.get("blocks/a", 50_000, 10).length);
        assertEquals(0, store.get("blocks/a", 5, 0).length);
        assertEquals(5, store.counters().gets.get() - getsBefore);
    }

    /**
     * A GET asking for more than the object holds (as a whole-block read does, to learn the
     * block's size) allocates about the object's size, not the range's: it allocated and zeroed
     * 16 MiB + 1 for every 4 MiB block before.
     */
    @Test
    void aGetLargerThanTheObjectAllocatesOnlyTheObjectsBytes() {
        byte[] data = random(4 << 20, 7);
        store.put("blocks/sized", data);
        store.get("blocks/sized", 0, 1000); // warm the connection and the SDK's lazy state
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        long tid = Thread.currentThread().threadId();
        long before = mx.getThreadAllocatedBytes(tid);
        byte[] got = store.get("blocks/sized", 0, (16 << 20) + 1);
        long allocated = mx.getThreadAllocatedBytes(tid) - before;
        assertArrayEquals(data, got);
        assertTrue(allocated < (4 << 20) + (1 << 20), "allocated " + allocated + " bytes for a 4 MiB object");
        // a body without a Content-Length grows as it arrives, and stops at the length asked for
        byte[] grown = assertDoesNotThrow(() -> S3ObjectStore.readFully(new java.io.ByteArrayInputStream(data), (3 << 20) + 5, null));
        assertArrayEquals(Arrays.copyOf(data, (3 << 20) + 5), grown);
        byte[] whole = assertDoesNotThrow(() -> S3ObjectStore.readFully(new java.io.ByteArrayInputStream(data), 16 << 20, null));
        assertArrayEquals(data, whole);
        byte[] none = assertDoesNotThrow(() -> S3ObjectStore.readFully(new java.io.ByteArrayInputStream(new byte[0]), 100, 0L));
        assertEquals(0, none.length);
    }

    @Test
    void emptyObject() {
        store.put("blocks/empty", new byte[0]);
        assertEquals(0, store.head("blocks/empty").size());
        assertEquals(0, store.get("blocks/empty", 0, 100).length);
    }

    @Test
    void blockLandsAsFileInBucketFolder() throws IOException {
        byte[] data = "block bytes".getBytes(StandardCharsets.US_ASCII);
        store.put("blocks/ab/file-1", data);
        Path file = s3.bucketDir(BUCKET).resolve("ost0/blocks/ab/file-1");
        assertTrue(Files.isRegularFile(file), "missing " + file);
        assertArrayEquals(data, Files.readAllBytes(file));
    }

    @Test
    void multipartUpload() throws IOException {
        S3Config cfg = s3.config(BUCKET, "mp").withMultipart(5 * S3Config.MIB, 5 * S3Config.MIB);
        try (S3ObjectStore mp = S3ObjectStore.open(cfg)) {
            byte[] data = random(12 * 1024 * 1024 + 123, 2);
            mp.put("big", data);
            assertEquals(1, mp.counters().puts.get());
            assertEquals(3, mp.counters().multipartParts.get());
            assertEquals(data.length, mp.head("big").size());
            assertArrayEquals(data, mp.get("big", 0, data.length));
            int off = 5 * 1024 * 1024 - 10;
            assertArrayEquals(Arrays.copyOfRange(data, off, off + 20), mp.get("big", off, 20));
            assertArrayEquals(data, Files.readAllBytes(s3.bucketDir(BUCKET).resolve("mp/big")));
        }
    }

    @Test
    void deleteAndHead() {
        store.put("del/x", new byte[] {1, 2, 3});
        assertEquals(new ObjectStore.ObjectInfo("del/x", 3), store.head("del/x"));
        store.delete("del/x");
        assertNull(store.head("del/x"));
        store.delete("del/x"); // deleting a missing key is fine
        ObjectStoreException e = assertThrows(ObjectStoreException.class, () -> store.get("del/x", 0, 10));
        assertEquals(ObjectStoreException.Kind.NOT_FOUND, e.kind());
        assertTrue(e.getMessage().contains("s3://" + BUCKET + "/ost0/del/x"), e.getMessage());
        assertFalse(e.getMessage().contains("\n"));
    }

    @Test
    void deleteAllRemovesManyKeysInBatchesAndIgnoresMissingOnes() {
        List<String> keys = new java.util.ArrayList<>();
        for (int i = 0; i < 2500; i++) {
            keys.add("many/k" + i);
            if (i % 2 == 0) {
                store.put("many/k" + i, new byte[] {(byte) i}); // every other key is missing
            }
        }
        store.put("many/keep", new byte[] {9});
        long before = store.counters().deletes.get();
        store.deleteAll(keys);
        assertEquals(3, store.counters().deletes.get() - before, "one request per 1,000 keys");
        assertEquals(List.of(new ObjectStore.ObjectInfo("many/keep", 1)), store.list("many/"));
        store.deleteAll(keys); // again: nothing left to delete, no error
        store.deleteAll(List.of());
    }

    @Test
    void listPagesThroughManyKeys() {
        try (S3ObjectStore small = S3ObjectStore.open(s3.config(BUCKET, "listing").withListPageSize(3))) {
            for (int i = 0; i < 10; i++) {
                small.put(String.format("k/%02d", i), new byte[i]);
            }
            small.put("other", new byte[1]);
            long listsBefore = small.counters().lists.get();
            List<ObjectStore.ObjectInfo> all = small.list("k/");
            assertEquals(10, all.size());
            for (int i = 0; i < 10; i++) {
                assertEquals(new ObjectStore.ObjectInfo(String.format("k/%02d", i), i), all.get(i));
            }
            assertEquals(4, small.counters().lists.get() - listsBefore); // 3+3+3+1
            assertEquals(11, small.list("").size());
        }
    }

    @Test
    void wrongCredentialsAreAccessDenied() {
        try (S3ObjectStore bad = S3ObjectStore.open(s3.config(BUCKET, "ost0").withCredentials("test-access", "wrong"))) {
            ObjectStoreException e = assertThrows(ObjectStoreException.class, bad::checkAccess);
            assertEquals(ObjectStoreException.Kind.ACCESS_DENIED, e.kind(), e.getMessage());
            e = assertThrows(ObjectStoreException.class, () -> bad.get("blocks/a", 0, 1));
            assertEquals(ObjectStoreException.Kind.ACCESS_DENIED, e.kind(), e.getMessage());
        }
        try (S3ObjectStore bad = S3ObjectStore.open(s3.config(BUCKET, "ost0").withCredentials("nobody", "wrong"))) {
            ObjectStoreException e = assertThrows(ObjectStoreException.class, () -> bad.put("x", new byte[1]));
            assertEquals(ObjectStoreException.Kind.ACCESS_DENIED, e.kind(), e.getMessage());
        }
    }

    @Test
    void unreachableEndpointFailsFast() throws IOException {
        int port;
        try (ServerSocket ss = new ServerSocket(0)) {
            port = ss.getLocalPort();
        }
        S3Config cfg = s3.config(BUCKET, "").withEndpoint(URI.create("http://127.0.0.1:" + port));
        try (S3ObjectStore dead = S3ObjectStore.open(cfg)) {
            long t0 = System.nanoTime();
            ObjectStoreException e = assertThrows(ObjectStoreException.class, dead::checkAccess);
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertEquals(ObjectStoreException.Kind.UNREACHABLE, e.kind(), e.getMessage());
            assertTrue(ms < 3_000, "checkAccess took " + ms + " ms");
            assertTrue(e.getMessage().contains("127.0.0.1:" + port), e.getMessage());

            t0 = System.nanoTime();
            e = assertThrows(ObjectStoreException.class, () -> dead.get("k", 0, 1));
            ms = (System.nanoTime() - t0) / 1_000_000;
            assertEquals(ObjectStoreException.Kind.UNREACHABLE, e.kind(), e.getMessage());
            assertTrue(ms < 15_000, "get took " + ms + " ms");
            assertEquals(cfg.maxAttempts() - 1, dead.counters().retries.get());
        }
    }

    @Test
    void missingBucket() {
        try (S3ObjectStore nb = S3ObjectStore.open(s3.config("no-such-bucket-here", ""))) {
            ObjectStoreException e = assertThrows(ObjectStoreException.class, nb::checkAccess);
            assertEquals(ObjectStoreException.Kind.NO_SUCH_BUCKET, e.kind(), e.getMessage());
            assertTrue(e.getMessage().contains("no-such-bucket-here"), e.getMessage());
            e = assertThrows(ObjectStoreException.class, () -> nb.get("k", 0, 1));
            assertEquals(ObjectStoreException.Kind.NO_SUCH_BUCKET, e.kind(), e.getMessage());
        }
        try (S3ObjectStore created = S3ObjectStore.open(s3.config("made-by-ensure", "p"))) {
            created.ensureBucket();
            created.ensureBucket(); // idempotent
            created.checkAccess();
            created.put("k", new byte[] {7});
            assertTrue(Files.isRegularFile(s3.bucketDir("made-by-ensure").resolve("p/k")));
        }
    }

    @Test
    void retriesSlowDownThenSucceeds() throws IOException {
        byte[] body = random(777, 3);
        AtomicInteger requests = new AtomicInteger();
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext("/", exchange -> {
            try (exchange) {
                exchange.getRequestBody().readAllBytes();
                if (requests.incrementAndGet() <= 2) {
                    byte[] err = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code>"
                            + "<Message>Please reduce your request rate.</Message></Error>").getBytes(StandardCharsets.UTF_8);
                    exchange.getResponseHeaders().add("Content-Type", "application/xml");
                    exchange.sendResponseHeaders(503, err.length);
                    exchange.getResponseBody().write(err);
                } else {
                    exchange.getResponseHeaders().add("Content-Type", "application/octet-stream");
                    exchange.getResponseHeaders().add("Content-Range", "bytes 0-776/777");
                    exchange.sendResponseHeaders(206, body.length);
                    exchange.getResponseBody().write(body);
                }
            }
        });
        server.start();
        try (S3ObjectStore flaky = S3ObjectStore.open(s3.config(BUCKET, "")
                .withEndpoint(URI.create("http://127.0.0.1:" + server.getAddress().getPort())))) {
            assertArrayEquals(body, flaky.get("k", 0, 1000));
            assertEquals(3, requests.get());
            assertEquals(1, flaky.counters().gets.get());
            assertEquals(2, flaky.counters().retries.get());
        } finally {
            server.stop(0);
        }
    }

    @Test
    void embeddedServerQuietsJettyAndJcloudsLogging() {
        // logback-test.xml leaves these loggers unset: EmbeddedS3.start lowered them to WARN
        assertFalse(org.slf4j.LoggerFactory.getLogger("org.gaul.shaded.org.eclipse.jetty.server.Server").isInfoEnabled());
        assertFalse(org.slf4j.LoggerFactory.getLogger("org.jclouds.rest").isInfoEnabled());
        assertTrue(org.slf4j.LoggerFactory.getLogger("dev.granary").isInfoEnabled());
    }

    @Test
    void badInputIsRejected() {
        ObjectStoreException e = assertThrows(ObjectStoreException.class, () -> store.get("k", -1, 10));
        assertEquals(ObjectStoreException.Kind.INVALID, e.kind());
        e = assertThrows(ObjectStoreException.class, () -> store.put("", new byte[1]));
        assertEquals(ObjectStoreException.Kind.INVALID, e.kind());
    }
}
