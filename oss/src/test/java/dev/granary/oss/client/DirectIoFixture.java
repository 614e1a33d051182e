package dev.granary.oss.client;

import dev.granary.objbacker.EmbeddedS3;
import dev.granary.objbacker.ObjectStore;
import dev.granary.objbacker.ObjectStore.ObjectInfo;
import dev.granary.objbacker.RequestCounters;
import dev.granary.objbacker.S3ObjectStore;
import dev.granary.oss.OssConfig;
import dev.granary.oss.server.OssServer;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;

/**
 * What the tests of the direct S3 paths share: a real embedded S3Proxy (bucket {@code direct})
 * for the class, OSS servers over gRPC loopback, and everything a test opens closed after it.
 */
abstract class DirectIoFixture {
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
        closers.clear();
    }

    /** {@code c}, closed after the test (in reverse order of registration). */
    <T extends AutoCloseable> T closing(T c) {
        closers.add(c);
        return c;
    }

    /** An OSS serving OST 0 from {@code store} on a free loopback port. */
    OssServer server(ObjectStore store) {
        return closing(OssServer.start(OssConfig.defaults("127.0.0.1", 0), Map.of(0, store)));
    }

    /** An OSS client of {@code server}. */
    OssClient ossClient(OssServer server) {
        return closing(new OssClient(List.of(server.address())));
    }

    /** {@code real}, with {@code rewrite} applied to every URL it signs (GET and PUT). */
    static ObjectStore rewritingUrls(S3ObjectStore real, UnaryOperator<URI> rewrite) {
        return new ObjectStore() {
            public void put(String key, byte[] data) { real.put(key, data); }
            public byte[] get(String key, long offset, int length) { return real.get(key, offset, length); }
            public URI presignGet(String key, Duration ttl) { return rewrite.apply(real.presignGet(key, ttl)); }
            public URI presignPut(String key, Duration ttl) { return rewrite.apply(real.presignPut(key, ttl)); }
            public void delete(String key) { real.delete(key); }
            public ObjectInfo head(String key) { return real.head(key); }
            public List<ObjectInfo> list(String prefix) { return real.list(prefix); }
            public RequestCounters counters() { return real.counters(); }
            public void close() {}
        };
    }

    /** {@code u} pointing at port 1, where nothing listens (S3 unreachable from the client). */
    static URI toClosedPort(URI u) {
        return URI.create(u.toString().replace(":" + u.getPort() + "/", ":1/"));
    }

    static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }
}
