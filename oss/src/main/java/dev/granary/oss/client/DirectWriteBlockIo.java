package dev.granary.oss.client;

import dev.granary.oss.BlockIo;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;
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
 * {@link BlockIo} whose block writes go straight to S3: the client asks the block's OSS for a
 * URL it signed ({@link OssClient#signPut}: S3 presigned PutObject, SigV4 query authentication)
 * and PUTs the block's bytes to it itself. That saves the OSS hop for written data (the gRPC
 * transfer to the OSS and the OSS's own PUT: about a fifth of the machine's CPU in a quickstart
 * writing 1 GiB), as JuiceFS and 3FS clients write their chunks to storage themselves, while
 * bucket credentials stay on the OSS (the client only ever holds URLs for single new blocks that
 * expire). Reads and deletes go to {@code inner} (the OSS client, or {@link DirectReadBlockIo}).
 *
 * <p>The block is in S3 when its PUT answered 200 (S3's PutObject is atomic and durable when it
 * returns), as when the OSS uploads it; written blocks do not enter the OSS's read cache. A write
 * falls back to {@code inner} (the OSS uploads, with its retries) when the OSS gives no URL (its
 * store cannot sign, or the S3 endpoint is plain http to another host: the body would travel
 * unsigned, see {@code S3ObjectStore#presignPut}) or the PUT fails; after
 * {@link #FAILURES_TO_PAUSE} failed PUTs in a row (S3 not reachable from this node) every write
 * goes through the OSSes for {@link #PAUSE}. Errors: as {@code inner}'s writes; a failure to get
 * a URL (a bad key, every OSS unreachable) is the write's, with {@link OssException} as through
 * the OSS.
 */
public final class DirectWriteBlockIo implements BlockIo {
    private static final Logger LOG = LoggerFactory.getLogger(DirectWriteBlockIo.class);
    /** Validity of the URLs asked for (seconds); a URL is used once, right after it is signed. */
    static final int URL_TTL_SECONDS = 900;
    /** Failed direct PUTs in a row after which direct writes pause for {@link #PAUSE}. */
    static final int FAILURES_TO_PAUSE = DirectS3Failures.FAILURES_TO_PAUSE;
    /** How long direct writes pause after {@link #FAILURES_TO_PAUSE} failures in a row. */
    static final Duration PAUSE = DirectS3Failures.PAUSE;
    private static final String CONTENT_TYPE = "application/octet-stream";

    private final BlockIo inner;
    private final OssClient oss;
    private final SdkHttpClient http;
    private final ExecutorService pool;
    /** How long one PUT may take as a whole ({@link DirectS3Deadline}). */
    private final Duration ioTimeout;
    private final AtomicLong directPuts = new AtomicLong();
    /** Failed direct PUTs and the pause they cause. */
    private final DirectS3Failures failures = new DirectS3Failures(LOG, "writes straight to S3", "writing");

    /**
     * @param inner reads, deletes, and the writes that do not go straight to S3
     * @param oss signs the PUT URLs
     * @param ioTimeout how long one PUT may take, as a whole and per wait for the answer
     * @param threads threads running the blocking PUTs (at most this many in flight)
     */
    public DirectWriteBlockIo(BlockIo inner, OssClient oss, Duration ioTimeout, int threads) {
        this.inner = inner;
        this.oss = oss;
        this.ioTimeout = ioTimeout;
        this.http = ApacheHttpClient.builder().maxConnections(threads).socketTimeout(ioTimeout)
                .connectionTimeout(Duration.ofSeconds(5)).build();
        this.pool = Executors.newFixedThreadPool(threads, r -> {
            Thread t = new Thread(r, "direct-write");
            t.setDaemon(true);
            return t;
        });
    }

    @Override
    public CompletableFuture<Void> write(int ost, String key, byte[] data) {
        if (data == null || failures.paused()) {
            return inner.write(ost, key, data); // its checks and answers
        }
        return oss.signPut(ost, key, URL_TTL_SECONDS)
                .exceptionallyCompose(t -> { // an OSS older than SignPut uploads; other failures are the write's
                    Throwable c = DirectS3Failures.cause(t);
                    return c instanceof OssException o && "UNIMPLEMENTED".equals(o.code())
                            ? CompletableFuture.completedFuture("") : CompletableFuture.failedFuture(c);
                })
                .thenCompose(url -> url.isEmpty() ? inner.write(ost, key, data)
                        : CompletableFuture.runAsync(() -> put(URI.create(url), data), pool)
                                .exceptionallyCompose(t -> {
                                    failures.failed(t, "direct write of block " + key + " on OST " + ost);
                                    return inner.write(ost, key, data);
                                }));
    }

    /** PUTs {@code data} as the whole body to {@code url}; throws unless S3 answered 200. */
    private void put(URI url, byte[] data) {
        SdkHttpFullRequest req = SdkHttpFullRequest.builder().method(SdkHttpMethod.PUT).uri(url)
                .putHeader("Content-Length", Integer.toString(data.length))
                .putHeader("Content-Type", CONTENT_TYPE)
                .build();
        ExecutableHttpRequest call = http.prepareRequest(HttpExecuteRequest.builder().request(req)
                .contentStreamProvider(() -> new ByteArrayInputStream(data)).build());
        DirectS3Deadline.run(call, ioTimeout, "PUT of " + url.getPath(), () -> putOnce(url, call));
    }

    /** Sends {@code call} (the PUT to {@code url}) and reads its answer; IOException unless S3 answered 200. */
    private Void putOnce(URI url, ExecutableHttpRequest call) throws IOException {
        HttpExecuteResponse rsp = call.call();
        int status = rsp.httpResponse().statusCode();
        try (InputStream in = rsp.responseBody().orElse(null)) {
            if (status != 200) {
                String body = in == null ? "" : new String(in.readNBytes(300), StandardCharsets.UTF_8);
                throw new IOException("PUT of " + url.getPath() + ": HTTP " + status
                        + (body.isBlank() ? "" : ": " + body.replaceAll("\\s+", " ").strip()));
            }
            if (in != null) {
                in.transferTo(java.io.OutputStream.nullOutputStream()); // let the connection be reused
            }
        }
        directPuts.incrementAndGet();
        failures.succeeded();
        return null;
    }

    /** Blocks PUT straight to S3 so far. */
    public long directPuts() {
        return directPuts.get();
    }

    /** Times direct PUTs were paused after failures in a row (each logged once). */
    public long pauses() {
        return failures.pauses();
    }

    /** Direct PUTs that failed and were written through the OSS instead. */
    public long fallbacks() {
        return failures.fallbacks();
    }

    /** The block I/O that reads, deletes, and writes what does not go straight to S3. */
    public BlockIo inner() {
        return inner;
    }

    @Override
    public CompletableFuture<byte[]> read(int ost, String key, long offset, int length) {
        return inner.read(ost, key, offset, length);
    }

    @Override
    public CompletableFuture<ByteBuffer> readView(int ost, String key, long offset, int length) {
        return inner.readView(ost, key, offset, length);
    }

    @Override
    public CompletableFuture<Void> delete(int ost, List<String> keys) {
        return inner.delete(ost, keys);
    }

    /** Closes the HTTP client and its threads; {@code inner} and the OSS client stay open (their owner closes them). */
    @Override
    public void close() {
        pool.shutdownNow();
        http.close();
    }
}
