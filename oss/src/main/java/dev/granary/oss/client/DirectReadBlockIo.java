package dev.granary.oss.client;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.Expiry;
import com.google.protobuf.ByteString;
import dev.granary.oss.BlockIo;
import dev.granary.oss.proto.LocateBlockReply;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import software.amazon.awssdk.http.ExecutableHttpRequest;
import software.amazon.awssdk.http.HttpExecuteRequest;
import software.amazon.awssdk.http.HttpExecuteResponse;
import software.amazon.awssdk.http.SdkHttpClient;
import software.amazon.awssdk.http.SdkHttpFullRequest;
import software.amazon.awssdk.http.SdkHttpMethod;
import software.amazon.awssdk.http.apache.ApacheHttpClient;

/**
 * {@link BlockIo} whose reads of blocks the OSS does not hold in its read cache go straight to
 * S3: the client asks the block's OSS where to read it ({@link OssClient#locate}); for a cold
 * block the OSS answers with a URL it signed (S3 presigned GET, SigV4 query authentication), and
 * the client sends ranged GETs of that URL to S3 itself ({@link HttpRangedGets} for {@code http}
 * URLs, the AWS SDK's HTTP client for {@code https}). That saves the OSS hop (its GET, the
 * gRPC reply) for cold data, while bucket credentials stay on the OSS (the client only ever holds
 * URLs for single blocks that expire). Blocks the OSS holds are read through it as before
 * (served from memory), and so are writes, deletes, and a cold block another client is already
 * reading straight from S3 (so that it lands in the OSS's shared cache). Any failure of a direct
 * GET other than a missing object (HTTP 404) falls back to a read through the OSS, and after
 * {@link #FAILURES_TO_PAUSE} in a row (S3 not reachable from this node) all reads go through the
 * OSSes for {@link #PAUSE}.
 *
 * <p>Where a block is read from is remembered per block: a URL for half its validity, "cached at
 * the OSS" for {@link #CACHED_FOR}. Errors: as {@link OssClient}; a missing block fails with
 * {@link FileNotFoundException}, as the OSS path does.
 */
public final class DirectReadBlockIo implements BlockIo {
    private static final Logger LOG = LoggerFactory.getLogger(DirectReadBlockIo.class);
    /** Validity of the URLs asked for (seconds). */
    static final int URL_TTL_SECONDS = 900;
    /** How long a "held in the OSS cache" answer is trusted (the cache may evict the block). */
    static final Duration CACHED_FOR = Duration.ofSeconds(5);

    private record Key(int ost, String key) {}

    /** Where a block is read from: its OSS (url null) or a signed URL. */
    private record Where(URI url) {}

    private final OssClient oss;
    private final SdkHttpClient http;
    private final HttpRangedGets gets;
    private final ExecutorService pool;
    /** How long one GET may take as a whole ({@link DirectS3Deadline}). */
    private final Duration ioTimeout;
    private final Cache<Key, Where> where;
    /**
     * This client's name in its locates (16 random bytes, picked at construction): its OSS hands
     * it a URL again for a block it was given one for, and only other clients' asks within the
     * OSS's window read the block through the OSS (oss.proto, LocateBlock).
     */
    private final ByteString clientId;
    private final AtomicLong directGets = new AtomicLong();
    /** Failed direct GETs (404 aside) and the pause they cause. */
    private final DirectS3Failures failures = new DirectS3Failures(LOG, "reads straight from S3", "reading");
    /** Failed direct GETs in a row after which direct reads pause for {@link #PAUSE}. */
    static final int FAILURES_TO_PAUSE = DirectS3Failures.FAILURES_TO_PAUSE;
    /** How long direct reads pause after {@link #FAILURES_TO_PAUSE} failures in a row. */
    static final Duration PAUSE = DirectS3Failures.PAUSE;

    /**
     * @param oss the OSS client (writes, deletes, cached blocks, signing, fallback)
     * @param ioTimeout how long one direct GET may take, as a whole and per wait for bytes
     * @param threads threads running the blocking GETs (at most this many in flight)
     */
    public DirectReadBlockIo(OssClient oss, Duration ioTimeout, int threads) {
        this.oss = oss;
        this.ioTimeout = ioTimeout;
        this.http = ApacheHttpClient.builder().maxConnections(threads).socketTimeout(ioTimeout)
                .connectionTimeout(Duration.ofSeconds(5)).build();
        this.gets = new HttpRangedGets(threads);
        UUID id = UUID.randomUUID();
        this.clientId = ByteString.copyFrom(ByteBuffer.allocate(16)
                .putLong(id.getMostSignificantBits()).putLong(id.getLeastSignificantBits()).flip());
        this.pool = Executors.newFixedThreadPool(threads, r -> {
            Thread t = new Thread(r, "direct-read");
            t.setDaemon(true);
            return t;
        });
        this.where = Caffeine.newBuilder().executor(Runnable::run).maximumSize(100_000).expireAfter(new Expiry<Key, Where>() {
            @Override
            public long expireAfterCreate(Key k, Where w, long now) {
                return (w.url() == null ? CACHED_FOR : Duration.ofSeconds(URL_TTL_SECONDS / 2)).toNanos();
            }

            @Override
            public long expireAfterUpdate(Key k, Where w, long now, long current) {
                return expireAfterCreate(k, w, now);
            }

            @Override
            public long expireAfterRead(Key k, Where w, long now, long current) {
                return current;
            }
        }).build();
    }

    @Override
    public CompletableFuture<Void> write(int ost, String key, byte[] data) {
        return oss.write(ost, key, data);
    }

    @Override
    public CompletableFuture<byte[]> read(int ost, String key, long offset, int length) {
        return readView(ost, key, offset, length).thenApply(b -> {
            if (b.hasArray() && b.arrayOffset() == 0 && b.limit() == b.array().length) {
                return b.array();
            }
            byte[] a = new byte[b.limit()];
            b.get(0, a);
            return a;
        });
    }

    @Override
    public CompletableFuture<ByteBuffer> readView(int ost, String key, long offset, int length) {
        if (offset < 0 || length <= 0) {
            return oss.readView(ost, key, offset, length); // its checks and answers
        }
        if (failures.paused()) {
            return oss.readView(ost, key, offset, length);
        }
        Key k = new Key(ost, key);
        Where w = where.getIfPresent(k);
        CompletableFuture<Where> located = w != null ? CompletableFuture.completedFuture(w)
                : oss.locate(ost, key, URL_TTL_SECONDS, clientId).thenApply(r -> {
                    Where n = new Where(r.getCached() || r.getUrl().isEmpty() ? null : URI.create(r.getUrl()));
                    where.put(k, n);
                    return n;
                });
        return located.exceptionally(t -> new Where(null)) // cannot sign (or locate): read through the OSS
                .thenCompose(loc -> loc.url() == null ? oss.readView(ost, key, offset, length)
                        : CompletableFuture.supplyAsync(() -> get(loc.url(), offset, length), pool)
                                .exceptionallyCompose(t -> {
                                    Throwable c = DirectS3Failures.cause(t);
                                    if (c instanceof FileNotFoundException) {
                                        return CompletableFuture.failedFuture(c);
                                    }
                                    where.invalidate(k); // an expired URL or an S3 problem: ask again next time
                                    failures.failed(c, "direct read of block " + key + " on OST " + ost);
                                    return oss.readView(ost, key, offset, length);
                                }));
    }

    /** Forgets where every block is read from, as when the remembered answers expire (tests). */
    void forgetLocations() {
        where.invalidateAll();
    }

    /** A ranged GET of {@code url}: bytes {@code [offset, offset+length)}, fewer at the object's end. */
    private ByteBuffer get(URI url, long offset, int length) {
        if (HttpRangedGets.handles(url)) {
            AtomicReference<HttpRangedGets.Conn> conn = new AtomicReference<>();
            return DirectS3Deadline.run(() -> {
                HttpRangedGets.Conn c = conn.get();
                if (c != null) {
                    c.close();
                }
            }, ioTimeout, "GET of " + url.getPath(), () -> answered(url, gets.get(url, offset, length, conn::set)));
        }
        SdkHttpFullRequest req = SdkHttpFullRequest.builder().method(SdkHttpMethod.GET).uri(url)
                .putHeader("Range", "bytes=" + offset + "-" + (offset + length - 1)).build();
        ExecutableHttpRequest call = http.prepareRequest(HttpExecuteRequest.builder().request(req).build());
        return DirectS3Deadline.run(call, ioTimeout, "GET of " + url.getPath(), () -> getOnce(url, offset, length, call));
    }

    /** The bytes of a GET {@link HttpRangedGets} answered, as {@link #getOnce} reads them from the SDK's client. */
    private ByteBuffer answered(URI url, HttpRangedGets.Answer a) {
        ByteBuffer none = noBody(url, a.status());
        return none != null ? none : succeeded(a.body());
    }

    /**
     * What a GET's status means: null when the range's bytes follow (200, 206), no bytes for 416
     * (the range starts at or past the object's end); a 404 fails with
     * {@link FileNotFoundException}, any other status with an {@link IOException} (both wrapped
     * in a {@link CompletionException}).
     */
    private static ByteBuffer noBody(URI url, int status) {
        if (status == 404) {
            throw new CompletionException(new FileNotFoundException("block " + url.getPath() + " not found (HTTP 404)"));
        }
        if (status == 416) {
            return ByteBuffer.allocate(0);
        }
        if (status != 206 && status != 200) {
            throw new CompletionException(new IOException("GET of " + url.getPath() + ": HTTP " + status));
        }
        return null;
    }

    /** Counts a direct GET that answered {@code data}, and returns it. */
    private ByteBuffer succeeded(ByteBuffer data) {
        directGets.incrementAndGet();
        failures.succeeded();
        return data;
    }

    /** Sends {@code call} (the ranged GET of {@code url}) and reads the bytes it answers; see {@link #get}. */
    private ByteBuffer getOnce(URI url, long offset, int length, ExecutableHttpRequest call) throws IOException {
        HttpExecuteResponse rsp = call.call();
        int status = rsp.httpResponse().statusCode();
        try (InputStream in = rsp.responseBody().orElse(null)) {
            ByteBuffer none = noBody(url, status);
            if (none != null) {
                return none;
            }
            if (in == null) {
                return ByteBuffer.allocate(0);
            }
            byte[] data;
            long declared = rsp.httpResponse().firstMatchingHeader("Content-Length").map(Long::parseLong).orElse(-1L);
            if (status == 206 && declared >= 0 && declared <= length) {
                data = new byte[(int) declared]; // read straight into the result: one copy less
                int n = in.readNBytes(data, 0, data.length);
                if (n < data.length) {
                    throw new IOException("GET of " + url.getPath() + ": " + n + " of " + declared + " bytes before the end");
                }
            } else {
                if (status == 200 && offset > 0) {
                    in.skipNBytes(offset); // a server that ignored the Range header
                }
                data = in.readNBytes(length);
            }
            return succeeded(ByteBuffer.wrap(data));
        }
    }

    /** Ranged GETs sent straight to S3 so far. */
    public long directGets() {
        return directGets.get();
    }

    /** Direct GETs that failed and were read through the OSS instead. */
    public long fallbacks() {
        return failures.fallbacks();
    }

    @Override
    public CompletableFuture<Void> delete(int ost, List<String> keys) {
        keys.forEach(key -> where.invalidate(new Key(ost, key)));
        return oss.delete(ost, keys);
    }

    /** Closes the HTTP client and its threads; the OSS client stays open (its owner closes it). */
    @Override
    public void close() {
        pool.shutdownNow();
        http.close();
        gets.close();
    }
}
