package dev.granary.oss.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.granary.objbacker.ObjectStore.ObjectInfo;
import dev.granary.objbacker.ObjectStore;
import dev.granary.objbacker.RequestCounters;
import dev.granary.objbacker.S3ObjectStore;
import dev.granary.objbacker.EmbeddedS3;
import dev.granary.oss.OssConfig;
import dev.granary.oss.server.OssServer;
import java.io.FileNotFoundException;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link DirectReadBlockIo} against an OSS over gRPC loopback and a real embedded S3Proxy, which
 * checks the signatures of the URLs the OSS hands out.
 */
class DirectReadBlockIoTest {
    @TempDir
    static Path tmp;
    static EmbeddedS3 s3;

    private final List<AutoCloseable> closers = new ArrayList<>();

    @BeforeAll
    static void startS3() {
        s3 = EmbeddedS3.start(tmp.resolve("s3"), 0, "direct-access", "direct-secret");
        s3.createBucket("direct");
    }

    @AfterAll
    static void stopS3() {
        s3.close();
    }

    @AfterEach
    void tearDown() throws Exception {
        for (int i = closers.size() - 1; i >= 0; i--) {
            closers.get(i).close();
        }
    }

    private <T extends AutoCloseable> T closing(T c) {
        closers.add(c);
        return c;
    }

    private OssServer server(ObjectStore store) {
        return closing(OssServer.start(OssConfig.defaults("127.0.0.1", 0), Map.of(0, store)));
    }

    private DirectReadBlockIo client(OssServer server) {
        OssClient oss = closing(new OssClient(List.of(server.address())));
        return closing(new DirectReadBlockIo(oss, Duration.ofSeconds(10), 4));
    }

    private static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    /**
     * The first client of a cold block reads it from S3 itself; the second reads it through the
     * OSS, which then holds it; the third is served from the OSS's memory.
     */
    @Test
    void theFirstReaderOfAColdBlockGetsItFromS3AndLaterOnesFromTheOssCache() throws Exception {
        S3ObjectStore store = closing(S3ObjectStore.open(s3.config("direct", "shared")));
        byte[] block = random(1_500_000, 1);
        store.put("b1", block);
        OssServer server = server(store);
        DirectReadBlockIo first = client(server);
        assertArrayEquals(Arrays.copyOfRange(block, 1000, 201_000), first.read(0, "b1", 1000, 200_000).get(20, TimeUnit.SECONDS));
        assertArrayEquals(Arrays.copyOfRange(block, 1_400_000, block.length), first.read(0, "b1", 1_400_000, 200_000).get());
        assertArrayEquals(new byte[0], first.read(0, "b1", block.length, 10).get(), "a range past the end is empty");
        assertEquals(2, first.directGets());
        assertEquals(0, server.s3Gets(), "the OSS sent no GET");

        DirectReadBlockIo second = client(server);
        assertArrayEquals(block, second.read(0, "b1", 0, block.length).get());
        assertEquals(0, second.directGets(), "another client's block: through the OSS");
        long ossGets = server.s3Gets();
        assertEquals(1, ossGets);

        DirectReadBlockIo third = client(server);
        assertArrayEquals(Arrays.copyOfRange(block, 7, 70_007), third.read(0, "b1", 7, 70_000).get());
        assertEquals(0, third.directGets());
        assertEquals(ossGets, server.s3Gets(), "served from the OSS cache");
    }

    @Test
    void aMissingBlockFailsWithFileNotFoundLikeThroughTheOss() throws Exception {
        S3ObjectStore store = closing(S3ObjectStore.open(s3.config("direct", "missing")));
        DirectReadBlockIo io = client(server(store));
        ExecutionException e = assertThrows(ExecutionException.class, () -> io.read(0, "nothing-here", 0, 100).get(20, TimeUnit.SECONDS));
        assertInstanceOf(FileNotFoundException.class, e.getCause(), e.toString());
        assertEquals(0, io.fallbacks());
    }

    /**
     * S3 unreachable from the client (the URLs point at a closed port): every read still returns
     * the right bytes through the OSS, and after three failed GETs in a row the client stops
     * trying for a while instead of paying a failed connection per read.
     */
    @Test
    void whenS3IsUnreachableFromTheClientReadsGoThroughTheOssAndDirectGetsPause() throws Exception {
        S3ObjectStore real = closing(S3ObjectStore.open(s3.config("direct", "unreachable")));
        ObjectStore signsBadUrls = new ObjectStore() {
            public void put(String key, byte[] data) { real.put(key, data); }
            public byte[] get(String key, long offset, int length) { return real.get(key, offset, length); }
            public URI presignGet(String key, Duration ttl) {
                URI u = real.presignGet(key, ttl);
                return URI.create(u.toString().replace(":" + u.getPort() + "/", ":1/")); // nothing listens on port 1
            }
            public void delete(String key) { real.delete(key); }
            public ObjectInfo head(String key) { return real.head(key); }
            public List<ObjectInfo> list(String prefix) { return real.list(prefix); }
            public RequestCounters counters() { return real.counters(); }
            public void close() {}
        };
        List<byte[]> blocks = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            blocks.add(random(100_000 + i, 10 + i));
            real.put("u" + i, blocks.get(i));
        }
        DirectReadBlockIo io = client(server(signsBadUrls));
        for (int i = 0; i < 6; i++) {
            assertArrayEquals(blocks.get(i), io.read(0, "u" + i, 0, 200_000).get(30, TimeUnit.SECONDS), "block " + i);
        }
        assertEquals(0, io.directGets());
        assertEquals(DirectReadBlockIo.FAILURES_TO_PAUSE, io.fallbacks(), "no direct GET tried once paused");
    }
}
