package dev.granary.oss.client;

import java.io.EOFException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.function.Consumer;

/**
 * Ranged GETs of presigned {@code http://} URLs (S3 API GetObject with a {@code Range} header,
 * RFC 9110 section 14; HTTP/1.1 message syntax, RFC 9112), with as little work per request as a
 * blocking exchange allows: the request is one prepared string, the answer's head is parsed from
 * one buffer, and its body is read straight into the buffer returned. Against the AWS SDK's
 * Apache client (request objects, URI parsing, header maps) it takes about 60 µs less client CPU
 * per GET, which is what random 128 KiB reads on a 2-core node are bound by after the S3 server's
 * own cost: 1,476-2,076 against 1,337-1,889 IOPS (2026-12-07, fio, 4 jobs, two quickstarts read in
 * turn; {@code docs/ARCHITECTURE.md}).
 *
 * <p>Only what an S3 server answers a GET is understood: a status line, headers, and a body of
 * {@code Content-Length} bytes. Any other shape of a 200 or 206 (a chunked transfer coding, no
 * length, more bytes than asked, a {@code Content-Range} starting elsewhere than asked, RFC 9110
 * 14.4) or a malformed head fails with an {@link IOException}, which the caller treats as any
 * failed direct read (it reads through the OSS instead). Connections are kept alive and reused per
 * {@code host:port}; a GET on a reused connection that fails before any byte of its answer came
 * (the server closed the connection while it was idle) is sent once more on a new one. Other
 * statuses come back without their bodies (an error's body without a length closes its
 * connection). HTTPS URLs are not handled here ({@link #handles}). Thread-safe.
 */
final class HttpRangedGets implements AutoCloseable {
    /** Longest status line plus headers accepted, bytes. */
    static final int MAX_HEAD_BYTES = 16 * 1024;
    /**
     * Most bytes asked of the socket per read, bytes: the JDK reads a socket into a heap buffer
     * through a direct buffer of the size asked, which it keeps per thread.
     */
    static final int READ_CHUNK = 256 * 1024;
    /** Longest body of an error answer read to keep its connection; longer ones close it, bytes. */
    static final int MAX_DRAINED = 64 * 1024;

    private final int maxIdle;
    private final Map<String, ConcurrentLinkedDeque<Conn>> idle = new ConcurrentHashMap<>();
    private volatile boolean closed;

    /** @param maxIdle idle connections kept per server (the most GETs in flight is a good value) */
    HttpRangedGets(int maxIdle) {
        this.maxIdle = maxIdle;
    }

    /** Whether {@link #get} can fetch {@code url}: plain {@code http} with a host. */
    static boolean handles(URI url) {
        return "http".equalsIgnoreCase(url.getScheme()) && url.getHost() != null && url.getRawAuthority() != null;
    }

    /** An HTTP/1.1 connection and the buffer the heads of its answers are read into. */
    static final class Conn {
        private final SocketChannel channel;
        private final ByteBuffer head = ByteBuffer.allocate(MAX_HEAD_BYTES);

        private Conn(SocketChannel channel) {
            this.channel = channel;
        }

        /** Closes the connection; a GET blocked on it fails with an {@link IOException}. Idempotent. */
        void close() {
            try {
                channel.close();
            } catch (IOException ignored) {
                // closing: nothing left to do
            }
        }
    }

    /**
     * The answer to one GET: its HTTP status and, for 200 and 206, the bytes of the range
     * (position 0, limit = bytes; fewer than asked at the object's end); empty for other statuses.
     */
    record Answer(int status, ByteBuffer body) {}

    /**
     * Sends {@code GET url} with {@code Range: bytes=offset-(offset+length-1)} and reads the answer.
     * A server that ignores the range (200 with the whole object) is read up to the range's end and
     * the range's bytes are kept.
     *
     * @param offset first byte of the range, {@code >= 0}
     * @param length bytes asked, {@code > 0}
     * @param watch  given each connection the GET uses, before it is used (a deadline closes it
     *               to abort the GET)
     * @throws IOException the connection failed or closed early, or the answer is not one this
     *         reader understands (see the class comment)
     */
    Answer get(URI url, long offset, int length, Consumer<Conn> watch) throws IOException {
        String server = url.getHost() + ":" + port(url);
        ConcurrentLinkedDeque<Conn> pool = idle.computeIfAbsent(server, s -> new ConcurrentLinkedDeque<>());
        ByteBuffer request = ByteBuffer.wrap(request(url, offset, length));
        while (true) {
            if (closed) {
                throw new IOException("HTTP client closed");
            }
            Conn c = pool.pollFirst();
            boolean reused = c != null;
            if (!reused) {
                c = new Conn(SocketChannel.open());
            }
            watch.accept(c);
            if (!reused) {
                connect(c, url);
            }
            boolean keep = false;
            try {
                c.head.clear(); // empty until the answer's first byte: what the catch below tells apart
                request.rewind();
                while (request.hasRemaining()) {
                    c.channel.write(request);
                }
                int headEnd = readHead(c);
                if (headEnd < 0) {
                    if (reused) {
                        continue; // an idle connection the server had closed: again on a new one
                    }
                    throw new EOFException("GET of " + url.getPath() + ": connection closed before an answer");
                }
                Parsed p = answer(url, c, headEnd, offset, length);
                keep = p.keepAlive;
                return new Answer(p.status, p.body);
            } catch (IOException e) {
                if (reused && c.head.position() == 0 && c.channel.isOpen()) {
                    continue; // the request could not be sent on a stale connection: again on a new one
                }
                throw e;
            } finally {
                if (keep && !closed && pool.size() < maxIdle) {
                    pool.addFirst(c);
                } else {
                    c.close();
                }
            }
        }
    }

    private static int port(URI url) {
        return url.getPort() >= 0 ? url.getPort() : 80;
    }

    private static void connect(Conn c, URI url) throws IOException {
        try {
            c.channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
            c.channel.connect(new InetSocketAddress(url.getHost(), port(url)));
        } catch (IOException e) {
            c.close();
            throw e;
        }
    }

    /**
     * The request's bytes. Host is the URL's authority as written: a presigned URL signs the
     * {@code host} header (SigV4 {@code X-Amz-SignedHeaders=host}), which the signer built from
     * the same text; the Range header is not signed.
     */
    static byte[] request(URI url, long offset, int length) {
        String target = url.getRawPath() + (url.getRawQuery() == null ? "" : "?" + url.getRawQuery());
        String r = "GET " + target + " HTTP/1.1\r\nHost: " + url.getRawAuthority()
                + "\r\nRange: bytes=" + offset + "-" + (offset + length - 1)
                + "\r\nAccept-Encoding: identity\r\nUser-Agent: granary-direct-read\r\n\r\n";
        return r.getBytes(StandardCharsets.ISO_8859_1);
    }

    /**
     * Reads until the head's blank line is in {@code c.head} (empty when called); returns the index
     * just after it, or -1 if the connection closed before any byte came.
     */
    private static int readHead(Conn c) throws IOException {
        ByteBuffer h = c.head;
        int scanned = 3;
        while (true) {
            if (c.channel.read(h) < 0) {
                if (h.position() == 0) {
                    return -1;
                }
                throw new EOFException("connection closed within an answer's head");
            }
            for (int end = h.position(); scanned < end; scanned++) {
                if (h.get(scanned) == '\n' && h.get(scanned - 1) == '\r' && h.get(scanned - 2) == '\n' && h.get(scanned - 3) == '\r') {
                    return scanned + 1;
                }
            }
            if (!h.hasRemaining()) {
                throw new IOException("answer head longer than " + MAX_HEAD_BYTES + " bytes");
            }
        }
    }

    private record Parsed(int status, ByteBuffer body, boolean keepAlive) {}

    /** Parses the head in {@code c.head} (ending at {@code headEnd}) and reads the body it announces. */
    private static Parsed answer(URI url, Conn c, int headEnd, long offset, int length) throws IOException {
        ByteBuffer h = c.head;
        String head = new String(h.array(), 0, headEnd, StandardCharsets.ISO_8859_1);
        String what = "GET of " + url.getPath();
        String[] lines = head.split("\r\n");
        String[] statusLine = lines[0].split(" ", 3);
        if (statusLine.length < 2 || !statusLine[0].startsWith("HTTP/1.")) {
            throw new IOException(what + ": not an HTTP/1.x answer: " + lines[0]);
        }
        int status;
        try {
            status = Integer.parseInt(statusLine[1]);
        } catch (NumberFormatException e) {
            throw new IOException(what + ": bad status line: " + lines[0]);
        }
        long contentLength = -1;
        String contentRange = null;
        boolean chunked = false;
        boolean keepAlive = statusLine[0].equals("HTTP/1.1"); // RFC 9112 9.3: 1.1 persists unless "close"
        for (int i = 1; i < lines.length; i++) {
            int colon = lines[i].indexOf(':');
            if (colon <= 0) {
                throw new IOException(what + ": malformed header line: " + lines[i]);
            }
            String name = lines[i].substring(0, colon).trim();
            String value = lines[i].substring(colon + 1).trim();
            if (name.equalsIgnoreCase("Content-Length")) {
                try {
                    contentLength = Long.parseLong(value);
                } catch (NumberFormatException e) {
                    throw new IOException(what + ": bad Content-Length: " + value);
                }
            } else if (name.equalsIgnoreCase("Content-Range")) {
                contentRange = value;
            } else if (name.equalsIgnoreCase("Transfer-Encoding") && !value.equalsIgnoreCase("identity")) {
                chunked = true;
                if (status == 200 || status == 206) {
                    throw new IOException(what + ": Transfer-Encoding " + value + " is not read here");
                }
            } else if (name.equalsIgnoreCase("Connection")) {
                String v = value.toLowerCase(Locale.ROOT);
                keepAlive = !v.contains("close") && (keepAlive || v.contains("keep-alive"));
            }
        }
        if (status != 200 && status != 206 && (contentLength < 0 || chunked)) {
            return new Parsed(status, ByteBuffer.allocate(0), false); // an error's body we do not read: drop the connection
        }
        if (contentLength < 0) {
            throw new IOException(what + ": answer " + status + " without Content-Length");
        }
        Body body = new Body(c, h, headEnd, contentLength, what);
        if (status == 206) {
            if (contentLength > length) {
                throw new IOException(what + ": " + contentLength + " bytes answered for a range of " + length);
            }
            if (contentRange != null && !contentRange.startsWith("bytes " + offset + "-")) {
                throw new IOException(what + ": asked bytes from " + offset + ", answered " + contentRange);
            }
            ByteBuffer b = ByteBuffer.allocate((int) contentLength);
            body.readInto(b);
            return new Parsed(status, b.flip(), keepAlive);
        }
        if (status == 200) { // a server that ignored Range: skip to offset, keep up to length bytes
            long end = Math.min(contentLength, offset + length);
            ByteBuffer b = ByteBuffer.allocate((int) Math.max(0, end - offset));
            body.skip(Math.min(offset, contentLength));
            body.readInto(b);
            boolean drained = body.left() <= MAX_DRAINED;
            if (drained) {
                body.skip(body.left());
            }
            return new Parsed(status, b.flip(), keepAlive && drained);
        }
        // another status (an error): read a short body to keep the connection, else drop it
        boolean drained = contentLength <= MAX_DRAINED;
        if (drained) {
            body.skip(contentLength);
        }
        return new Parsed(status, ByteBuffer.allocate(0), keepAlive && drained);
    }

    /** The body of one answer: the bytes read with its head first, then the socket's. */
    private static final class Body {
        private final Conn c;
        private final ByteBuffer head;
        private int headPos;
        private final int headFilled;
        private long left;
        private final String what;

        Body(Conn c, ByteBuffer head, int headEnd, long contentLength, String what) throws IOException {
            this.c = c;
            this.head = head;
            this.headPos = headEnd;
            this.headFilled = head.position();
            this.left = contentLength;
            this.what = what;
            if (headFilled - headEnd > contentLength) {
                throw new IOException(what + ": more bytes than Content-Length after the answer's head");
            }
        }

        long left() {
            return left;
        }

        /** Fills {@code b} (position to limit) with the body's next bytes; {@code b} must not need more than are left. */
        void readInto(ByteBuffer b) throws IOException {
            int fromHead = Math.min(headFilled - headPos, b.remaining());
            b.put(b.position(), head, headPos, fromHead).position(b.position() + fromHead);
            headPos += fromHead;
            left -= fromHead;
            int limit = b.limit();
            while (b.hasRemaining()) {
                b.limit(Math.min(limit, b.position() + READ_CHUNK));
                int n = c.channel.read(b);
                b.limit(limit);
                if (n < 0) {
                    throw new EOFException(what + ": connection closed with " + left + " body bytes to come");
                }
                left -= n;
            }
        }

        /** Reads and drops the body's next {@code n} bytes. */
        void skip(long n) throws IOException {
            ByteBuffer trash = ByteBuffer.allocate((int) Math.min(READ_CHUNK, Math.max(n, 1)));
            while (n > 0) {
                trash.clear().limit((int) Math.min(trash.capacity(), n));
                readInto(trash);
                n -= trash.position();
            }
        }
    }

    /** Closes the idle connections; GETs in flight close theirs when they end. */
    @Override
    public void close() {
        closed = true;
        idle.values().forEach(d -> {
            for (Conn c; (c = d.pollFirst()) != null; ) {
                c.close();
            }
        });
    }
}
