package dev.granary.oss.client;

import dev.granary.objbacker.EmbeddedS3;
import dev.granary.objbacker.ObjectStore;
import dev.granary.objbacker.ObjectStore.ObjectInfo;
import dev.granary.objbacker.RequestCounters;
import dev.granary.objbacker.S3ObjectStore;
import dev.granary.oss.OssConfig;
import dev.granary.oss.server.OssServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
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
        return toPort(u, 1);
    }

    /** {@code u} pointing at loopback port {@code port} instead of S3's. */
    static URI toPort(URI u, int port) {
        return URI.create(u.toString().replace(":" + u.getPort() + "/", ":" + port + "/"));
    }

    /**
     * A loopback server that accepts connections and never reads from them nor answers: an S3
     * that stopped answering in the middle of a request (a client writing a large body blocks once
     * the socket buffers are full). Closed, with its connections, after the test.
     */
    ServerSocket silentServer() throws IOException {
        return server("silent-s3", s -> false); // held open, never read
    }

    /**
     * A loopback server that answers every request with a 206 of {@code n} bytes (zeros) that it
     * sends one byte every 300 ms: an S3 whose answer trickles in, each byte well within a socket
     * timeout. Closed after the test.
     */
    ServerSocket tricklingServer(int n) throws IOException {
        return server("trickling-s3", s -> {
            InputStream in = s.getInputStream();
            int matched = 0;
            while (matched < 4) { // the request's headers, up to the blank line
                int c = in.read();
                if (c < 0) {
                    return true;
                }
                matched = c == "\r\n\r\n".charAt(matched) ? matched + 1 : c == '\r' ? 1 : 0;
            }
            OutputStream out = s.getOutputStream();
            out.write(("HTTP/1.1 206 Partial Content\r\nContent-Length: " + n + "\r\nContent-Range: bytes 0-" + (n - 1)
                    + "/" + n + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            for (int i = 0; i < n; i++) {
                out.write(0);
                out.flush();
                try {
                    Thread.sleep(300);
                } catch (InterruptedException e) {
                    return true;
                }
            }
            return true;
        });
    }

    /** What a test server does with one accepted connection; true when the connection may be closed. */
    private interface Connection {
        boolean serve(Socket s) throws IOException;
    }

    private ServerSocket server(String name, Connection serve) throws IOException {
        ServerSocket ss = new ServerSocket();
        ss.setReceiveBufferSize(4096);
        ss.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
        List<Socket> held = new java.util.concurrent.CopyOnWriteArrayList<>();
        closing(() -> {
            ss.close();
            for (Socket s : held) {
                s.close();
            }
        });
        Thread accept = new Thread(() -> {
            try {
                while (true) {
                    Socket s = ss.accept();
                    held.add(s);
                    Thread t = new Thread(() -> {
                        try {
                            if (serve.serve(s)) {
                                s.close();
                            }
                        } catch (IOException e) {
                            // the client went away (aborted): nothing to serve
                        }
                    }, name + "-conn");
                    t.setDaemon(true);
                    t.start();
                }
            } catch (IOException e) {
                // closed after the test
            }
        }, name);
        accept.setDaemon(true);
        accept.start();
        return ss;
    }

    static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }
}
