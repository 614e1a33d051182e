package dev.granary.oss.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * {@link HttpRangedGets} against a scripted HTTP server on loopback that answers each request
 * with bytes a test chooses: the shapes S3 answers, and the ones this reader must refuse. (Its
 * GETs against a real S3 server, S3Proxy checking the presigned URLs, are in
 * {@link DirectReadBlockIoTest}.)
 */
class HttpRangedGetsTest {
    /** What the server does with one request: the bytes it writes back, and whether it then closes. */
    record Reply(byte[] bytes, boolean close) {
        static Reply of(String head, byte[] body, boolean close) {
            byte[] h = head.getBytes(StandardCharsets.ISO_8859_1);
            byte[] all = Arrays.copyOf(h, h.length + body.length);
            System.arraycopy(body, 0, all, h.length, body.length);
            return new Reply(all, close);
        }
    }

    /** A loopback server that answers every request with {@code script} (given the request head and its index). */
    static final class Scripted implements AutoCloseable {
        final ServerSocket socket;
        final AtomicInteger connections = new AtomicInteger();
        final List<String> requests = new CopyOnWriteArrayList<>();

        Scripted(Function<Integer, Reply> script) throws IOException {
            socket = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            Thread accept = new Thread(() -> {
                while (!socket.isClosed()) {
                    try {
                        Socket s = socket.accept();
                        connections.incrementAndGet();
                        Thread serve = new Thread(() -> serve(s, script));
                        serve.setDaemon(true);
                        serve.start();
                    } catch (IOException e) {
                        return;
                    }
                }
            });
            accept.setDaemon(true);
            accept.start();
        }

        private void serve(Socket s, Function<Integer, Reply> script) {
            try (s; InputStream in = s.getInputStream(); OutputStream out = s.getOutputStream()) {
                while (true) {
                    String head = readHead(in);
                    if (head == null) {
                        return;
                    }
                    requests.add(head);
                    Reply r = script.apply(requests.size() - 1);
                    out.write(r.bytes());
                    out.flush();
                    if (r.close()) {
                        return;
                    }
                }
            } catch (IOException e) {
                // the client went away
            }
        }

        private static String readHead(InputStream in) throws IOException {
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            int c;
            while ((c = in.read()) >= 0) {
                b.write(c);
                String s = b.toString(StandardCharsets.ISO_8859_1);
                if (s.endsWith("\r\n\r\n")) {
                    return s;
                }
            }
            return null;
        }

        URI url(String pathAndQuery) {
            return URI.create("http://127.0.0.1:" + socket.getLocalPort() + pathAndQuery);
        }

        @Override
        public void close() throws IOException {
            socket.close();
        }
    }

    private final HttpRangedGets gets = new HttpRangedGets(4);
    private Scripted server;

    @AfterEach
    void close() throws IOException {
        gets.close();
        if (server != null) {
            server.close();
        }
    }

    private static byte[] object(int n) {
        byte[] b = new byte[n];
        new Random(n).nextBytes(b);
        return b;
    }

    private static byte[] bytes(ByteBuffer b) {
        byte[] a = new byte[b.remaining()];
        b.get(b.position(), a);
        return a;
    }

    private static Reply partial(byte[] obj, int from, int len) {
        byte[] body = Arrays.copyOfRange(obj, from, from + len);
        return Reply.of("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes " + from + "-" + (from + len - 1) + "/" + obj.length
                + "\r\nContent-Length: " + len + "\r\nETag: \"x\"\r\n\r\n", body, false);
    }

    private HttpRangedGets.Answer get(URI url, long offset, int length) throws IOException {
        return gets.get(url, offset, length, c -> { });
    }

    @Test
    void aRangedGetSendsTheSignedHostAndRangeAndReusesItsConnection() throws Exception {
        byte[] obj = object(300_000);
        server = new Scripted(i -> i == 0 ? partial(obj, 1000, 200_000) : partial(obj, 250_000, 50_000));
        URI url = server.url("/bucket/ost0/blk%2F1?X-Amz-Signature=abc&X-Amz-SignedHeaders=host");
        HttpRangedGets.Answer a = get(url, 1000, 200_000);
        assertEquals(206, a.status());
        assertArrayEquals(Arrays.copyOfRange(obj, 1000, 201_000), bytes(a.body()));
        HttpRangedGets.Answer b = get(url, 250_000, 60_000);
        assertArrayEquals(Arrays.copyOfRange(obj, 250_000, 300_000), bytes(b.body()), "fewer bytes at the object's end");
        assertEquals(1, server.connections.get(), "the second GET reused the first's connection");
        String first = server.requests.get(0);
        assertTrue(first.startsWith("GET /bucket/ost0/blk%2F1?X-Amz-Signature=abc&X-Amz-SignedHeaders=host HTTP/1.1\r\n"), first);
        assertTrue(first.contains("\r\nHost: 127.0.0.1:" + server.socket.getLocalPort() + "\r\n"), first);
        assertTrue(first.contains("\r\nRange: bytes=1000-200999\r\n"), first);
    }

    @Test
    void aConnectionTheServerClosedWhileIdleIsReplacedOnce() throws Exception {
        byte[] obj = object(10_000);
        server = new Scripted(i -> {
            Reply r = partial(obj, 0, 100);
            return new Reply(r.bytes(), true); // answers, then closes: the client's idle connection is stale
        });
        URI url = server.url("/b/k");
        assertArrayEquals(Arrays.copyOfRange(obj, 0, 100), bytes(get(url, 0, 100).body()));
        Thread.sleep(100); // the server's close reaches the client's socket
        assertArrayEquals(Arrays.copyOfRange(obj, 0, 100), bytes(get(url, 0, 100).body()));
        assertEquals(2, server.connections.get());
        assertEquals(2, server.requests.size(), "the stale connection's GET was not answered, the new one's was");
    }

    @Test
    void aServerThatIgnoresRangeIsReadToTheRangesBytes() throws Exception {
        byte[] obj = object(50_000);
        server = new Scripted(i -> Reply.of("HTTP/1.1 200 OK\r\nContent-Length: " + obj.length + "\r\n\r\n", obj, false));
        URI url = server.url("/b/k");
        assertArrayEquals(Arrays.copyOfRange(obj, 7_000, 17_000), bytes(get(url, 7_000, 10_000).body()));
        assertArrayEquals(Arrays.copyOfRange(obj, 45_000, 50_000), bytes(get(url, 45_000, 10_000).body()));
        assertEquals(0, get(url, 60_000, 10).body().remaining(), "past the end: no bytes");
        assertEquals(1, server.connections.get(), "each whole body was read: the connection stayed usable");
    }

    @Test
    void errorStatusesComeBackWithoutBytesAndKeepTheConnection() throws Exception {
        String xml = "<Error><Code>NoSuchKey</Code></Error>";
        server = new Scripted(i -> Reply.of("HTTP/1.1 404 Not Found\r\nContent-Type: application/xml\r\nContent-Length: " + xml.length() + "\r\n\r\n",
                xml.getBytes(StandardCharsets.ISO_8859_1), false));
        URI url = server.url("/b/missing");
        HttpRangedGets.Answer a = get(url, 0, 100);
        assertEquals(404, a.status());
        assertEquals(0, a.body().remaining());
        assertEquals(404, get(url, 0, 100).status());
        assertEquals(1, server.connections.get());
    }

    @Test
    void anErrorWhoseBodyHasNoLengthComesBackAndItsConnectionIsDropped() throws Exception {
        server = new Scripted(i -> i == 0
                ? Reply.of("HTTP/1.1 416 Range Not Satisfiable\r\nTransfer-Encoding: chunked\r\n\r\n", "5\r\nabcde\r\n0\r\n\r\n".getBytes(StandardCharsets.ISO_8859_1), false)
                : Reply.of("HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n", "gone".getBytes(StandardCharsets.ISO_8859_1), true));
        URI url = server.url("/b/k");
        assertEquals(416, get(url, 1_000_000, 10).status());
        assertEquals(404, get(url, 0, 10).status());
        assertEquals(2, server.connections.get(), "the chunked error's connection was not reused");
    }

    @Test
    void answersThisReaderDoesNotUnderstandFailWithIOException() throws Exception {
        byte[] obj = object(1000);
        List<Reply> bad = List.of(
                Reply.of("HTTP/1.1 206 Partial Content\r\nTransfer-Encoding: chunked\r\n\r\n", "64\r\n".getBytes(StandardCharsets.ISO_8859_1), true),
                Reply.of("HTTP/1.1 206 Partial Content\r\n\r\n", obj, true), // no length
                Reply.of("HTTP/1.1 206 Partial Content\r\nContent-Length: 2000\r\n\r\n", obj, true), // more than asked
                Reply.of("HTTP/1.1 206 Partial Content\r\nContent-Length: abc\r\n\r\n", obj, true),
                Reply.of("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 1-1000/1001\r\nContent-Length: 1000\r\n\r\n", obj, true), // another range
                Reply.of("SSH-2.0-OpenSSH\r\n\r\n", new byte[0], true),
                Reply.of("HTTP/1.1 2x6 Partial\r\nContent-Length: 10\r\n\r\n", obj, true),
                Reply.of("HTTP/1.1 206 Partial Content\r\nno colon here\r\nContent-Length: 10\r\n\r\n", obj, true),
                Reply.of("HTTP/1.1 206 Partial Content\r\nX-Pad: " + "a".repeat(HttpRangedGets.MAX_HEAD_BYTES) + "\r\n\r\n", obj, true));
        server = new Scripted(bad::get);
        URI url = server.url("/b/k");
        for (int i = 0; i < bad.size(); i++) {
            int n = i;
            IOException e = assertThrows(IOException.class, () -> get(url, 0, 1000), "answer " + n);
            assertTrue(e.getMessage() != null && !e.getMessage().isEmpty(), "answer " + n + " names its fault");
        }
        assertEquals(bad.size(), server.connections.get(), "no failed connection was reused");
    }

    @Test
    void aBodyCutShortFailsWithEofAndItsConnectionIsNotReused() throws Exception {
        byte[] obj = object(100_000);
        server = new Scripted(i -> i == 0
                ? Reply.of("HTTP/1.1 206 Partial Content\r\nContent-Length: 100000\r\n\r\n", Arrays.copyOf(obj, 60_000), true)
                : partial(obj, 0, 100_000));
        URI url = server.url("/b/k");
        EOFException e = assertThrows(EOFException.class, () -> get(url, 0, 100_000));
        assertTrue(e.getMessage().contains("40000 body bytes to come"), e.getMessage());
        assertArrayEquals(obj, bytes(get(url, 0, 100_000).body()));
        assertEquals(2, server.connections.get());
    }

    @Test
    void closingTheWatchedConnectionAbortsAGetThatWaits() throws Exception {
        server = new Scripted(i -> {
            try {
                Thread.sleep(30_000); // never answers in time
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return new Reply(new byte[0], true);
        });
        URI url = server.url("/b/k");
        long t0 = System.nanoTime();
        IOException e = assertThrows(IOException.class, () -> gets.get(url, 0, 10, c -> new Thread(() -> {
            try {
                Thread.sleep(300);
            } catch (InterruptedException ignored) {
                // closing anyway
            }
            c.close();
        }).start()));
        double s = (System.nanoTime() - t0) / 1e9;
        assertTrue(s >= 0.25 && s < 10, "aborted when the connection was closed: " + s + " s, " + e);
    }

    @Test
    void onlyPlainHttpUrlsAreHandled() {
        assertTrue(HttpRangedGets.handles(URI.create("http://s3.local:9000/b/k?X-Amz-Signature=1")));
        assertTrue(HttpRangedGets.handles(URI.create("HTTP://10.0.0.1/b/k")));
        assertEquals(false, HttpRangedGets.handles(URI.create("https://s3.amazonaws.com/b/k")));
        assertEquals(false, HttpRangedGets.handles(URI.create("file:///b/k")));
        assertArrayEquals("GET /b/k HTTP/1.1\r\nHost: 10.0.0.1\r\nRange: bytes=5-14\r\nAccept-Encoding: identity\r\nUser-Agent: granary-direct-read\r\n\r\n"
                .getBytes(StandardCharsets.ISO_8859_1), HttpRangedGets.request(URI.create("http://10.0.0.1/b/k"), 5, 10));
    }
}
