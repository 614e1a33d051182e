package dev.granary.objbacker;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import java.net.ConnectException;
import java.net.NoRouteToHostException;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.Arrays;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.awscore.exception.AwsServiceException;
import software.amazon.awssdk.awscore.retry.AwsRetryStrategy;
import software.amazon.awssdk.core.checksums.RequestChecksumCalculation;
import software.amazon.awssdk.core.checksums.ResponseChecksumValidation;
import software.amazon.awssdk.core.exception.AbortedException;
import software.amazon.awssdk.core.exception.ApiCallAttemptTimeoutException;
import software.amazon.awssdk.core.exception.ApiCallTimeoutException;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.core.interceptor.Context;
import software.amazon.awssdk.core.interceptor.ExecutionAttribute;
import software.amazon.awssdk.core.interceptor.ExecutionAttributes;
import software.amazon.awssdk.core.interceptor.ExecutionInterceptor;
import software.amazon.awssdk.core.ResponseInputStream;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.http.apache.ApacheHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.retries.api.BackoffStrategy;
import software.amazon.awssdk.retries.api.RetryStrategy;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.S3Configuration;
import software.amazon.awssdk.services.s3.model.CompletedPart;
import software.amazon.awssdk.services.s3.model.GetObjectResponse;
import software.amazon.awssdk.services.s3.model.HeadObjectResponse;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Request;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Response;
import software.amazon.awssdk.services.s3.model.S3Object;

/**
 * {@link ObjectStore} over one S3 bucket + key prefix with the AWS SDK for Java v2 (sync
 * {@link S3Client}, Apache HTTP client, static credentials, path-style by default).
 *
 * <p>Retries: the SDK's standard retry strategy with {@link S3Config#maxAttempts()} attempts,
 * exponential backoff with full jitter (100 ms base, 5 s cap; 500 ms base, 20 s cap when
 * throttled by 503 SlowDown), on 5xx, throttling, I/O errors and attempt timeouts. Every retry is
 * counted in {@link RequestCounters#retries}. Logical requests (put, get, ...) are counted once
 * each, whatever the number of attempts.
 *
 * <p>Errors: every failure is an {@link ObjectStoreException} with a one-line message naming the
 * operation, endpoint, bucket and key; its kind follows the S3 error code: NoSuchKey/404 →
 * NOT_FOUND, 403/AccessDenied/InvalidAccessKeyId/SignatureDoesNotMatch → ACCESS_DENIED,
 * NoSuchBucket → NO_SUCH_BUCKET, connection refused/unknown host/timeouts → UNREACHABLE.
 */
public final class S3ObjectStore implements ObjectStore {
    private static final Logger LOG = LoggerFactory.getLogger(S3ObjectStore.class);
    private static final String CONTENT_TYPE = "application/octet-stream";
    /** Total time budget of {@link #checkAccess()}. */
    private static final Duration PROBE_TIMEOUT = Duration.ofSeconds(5);

    private final S3Config config;
    private final RequestCounters counters = new RequestCounters();
    private final S3Client s3;
    /** A client without retries and with short timeouts, for {@link #checkAccess()}. */
    private final S3Client probe;

    private S3ObjectStore(S3Config config) {
        this.config = config;
        this.s3 = buildClient(config, config.maxAttempts(), config.connectTimeout(), config.apiCallAttemptTimeout(), null);
        Duration probeConnect = min(config.connectTimeout(), Duration.ofSeconds(2));
        this.probe = buildClient(config, 1, probeConnect, min(config.apiCallAttemptTimeout(), PROBE_TIMEOUT), PROBE_TIMEOUT);
    }

    /**
     * Opens a store for {@code config}. Sends no request: call {@link #checkAccess()} to fail
     * fast on a bad endpoint, credentials or bucket.
     */
    public static S3ObjectStore open(S3Config config) {
        if (config == null) {
            throw new IllegalArgumentException("S3 config is missing");
        }
        return new S3ObjectStore(config);
    }

    /** The configuration this store was opened with. */
    public S3Config config() {
        return config;
    }

    private S3Client buildClient(S3Config c, int maxAttempts, Duration connectTimeout, Duration attemptTimeout,
                                 Duration callTimeout) {
        RetryStrategy retry = AwsRetryStrategy.standardRetryStrategy().toBuilder()
                .maxAttempts(maxAttempts)
                .backoffStrategy(BackoffStrategy.exponentialDelay(Duration.ofMillis(100), Duration.ofSeconds(5)))
                .throttlingBackoffStrategy(BackoffStrategy.exponentialDelay(Duration.ofMillis(500), Duration.ofSeconds(20)))
                .retryOnException(t -> t instanceof ApiCallAttemptTimeoutException)
                .build();
        return S3Client.builder()
                .endpointOverride(c.endpoint())
                .region(Region.of(c.region()))
                .credentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create(c.accessKey(), c.secretKey())))
                .forcePathStyle(c.pathStyle())
                // No SHA-256 of each PUT body over http to a loopback S3 server (the embedded one):
                // LoopbackPayloadSigning.
                .putAuthScheme(LoopbackPayloadSigning.forEndpoint(c.endpoint()))
                // Since SDK 2.30 the client adds CRC checksums (aws-chunked trailers) to every PUT and
                // validates response checksums by default. S3Proxy 2.6.0 (and other third-party S3
                // servers such as older MinIO/Ceph) reject those PUTs with 400 "x-amz-content-sha256
                // header does not match"; WHEN_REQUIRED keeps the classic SigV4 signed payload, which
                // every S3 implementation understands (NOTES.md).
                .requestChecksumCalculation(RequestChecksumCalculation.WHEN_REQUIRED)
                // Over http elsewhere the SDK always signs the payload; chunked (aws-chunked) signing hashes it
                // in 128 KiB chunks, each signed, with a chunk decoder on the server. Blocks are
                // whole arrays in memory: one SHA-256 of the body is cheaper for both sides.
                .serviceConfiguration(S3Configuration.builder().chunkedEncodingEnabled(false).build())
                .responseChecksumValidation(ResponseChecksumValidation.WHEN_REQUIRED)
                .httpClientBuilder(ApacheHttpClient.builder()
                        .connectionTimeout(connectTimeout)
                        .socketTimeout(attemptTimeout)
                        .maxConnections(64))
                .overrideConfiguration(o -> {
                    o.retryStrategy(retry)
                            .apiCallAttemptTimeout(attemptTimeout)
                            .addExecutionInterceptor(new RetryCounter(counters));
                    if (callTimeout != null) {
                        o.apiCallTimeout(callTimeout);
                    }
                })
                .build();
    }

    private static Duration min(Duration a, Duration b) {
        return a.compareTo(b) <= 0 ? a : b;
    }

    /** Counts HTTP attempts after the first of each request as retries. */
    private static final class RetryCounter implements ExecutionInterceptor {
        private static final ExecutionAttribute<AtomicInteger> ATTEMPTS = new ExecutionAttribute<>("granary.attempts");
        private final RequestCounters counters;

        RetryCounter(RequestCounters counters) {
            this.counters = counters;
        }

        @Override
        public void beforeExecution(Context.BeforeExecution context, ExecutionAttributes attributes) {
            attributes.putAttribute(ATTEMPTS, new AtomicInteger());
        }

        @Override
        public void beforeTransmission(Context.BeforeTransmission context, ExecutionAttributes attributes) {
            AtomicInteger attempts = attributes.getAttribute(ATTEMPTS);
            if (attempts != null && attempts.incrementAndGet() > 1) {
                counters.retries.incrementAndGet();
            }
        }
    }

    private String fullKey(String key) {
        if (key == null || key.isEmpty()) {
            throw new ObjectStoreException(ObjectStoreException.Kind.INVALID,
                    "empty object key in " + config.location() + " at " + config.endpoint(), null);
        }
        return config.prefix() + key;
    }

    /**
     * Writes {@code data} as object {@code key}: one PUT up to {@link S3Config#multipartThreshold()}
     * bytes, else a multipart upload of {@link S3Config#partSize()}-byte parts that is aborted when
     * any part fails (no orphan parts are left billed).
     *
     * @throws ObjectStoreException on failure after retries
     */
    @Override
    public void put(String key, byte[] data) {
        String fullKey = fullKey(key);
        if (data == null) {
            throw new ObjectStoreException(ObjectStoreException.Kind.INVALID, "null data for " + where(fullKey), null);
        }
        if (data.length > config.multipartThreshold()) {
            putMultipart(fullKey, data);
            return;
        }
        counters.puts.incrementAndGet();
        try {
            s3.putObject(b -> b.bucket(config.bucket()).key(fullKey).contentType(CONTENT_TYPE).contentLength((long) data.length),
                    body(data, 0, data.length));
        } catch (SdkException e) {
            throw map("PUT", fullKey, e);
        }
    }

    private static RequestBody body(byte[] data, int offset, int length) {
        // No copy: the SDK re-opens the stream for each attempt.
        return RequestBody.fromContentProvider(() -> new ByteArrayInputStream(data, offset, length), length, CONTENT_TYPE);
    }

    private void putMultipart(String fullKey, byte[] data) {
        long partSize = config.partSize();
        int parts = (int) ((data.length + partSize - 1) / partSize);
        if (parts > 10_000) {
            throw new ObjectStoreException(ObjectStoreException.Kind.INVALID,
                    "object of " + data.length + " bytes needs more than 10000 parts of " + partSize + " bytes: " + where(fullKey), null);
        }
        counters.puts.incrementAndGet();
        String uploadId;
        try {
            uploadId = s3.createMultipartUpload(b -> b.bucket(config.bucket()).key(fullKey).contentType(CONTENT_TYPE)).uploadId();
        } catch (SdkException e) {
            throw map("CreateMultipartUpload", fullKey, e);
        }
        try {
            List<CompletedPart> done = new ArrayList<>(parts);
            for (int i = 0; i < parts; i++) {
                int partNumber = i + 1;
                int off = (int) (i * partSize);
                int len = (int) Math.min(partSize, data.length - off);
                counters.multipartParts.incrementAndGet();
                String etag = s3.uploadPart(b -> b.bucket(config.bucket()).key(fullKey).uploadId(uploadId)
                        .partNumber(partNumber).contentLength((long) len), body(data, off, len)).eTag();
                done.add(CompletedPart.builder().partNumber(partNumber).eTag(etag).build());
            }
            s3.completeMultipartUpload(b -> b.bucket(config.bucket()).key(fullKey).uploadId(uploadId)
                    .multipartUpload(m -> m.parts(done)));
        } catch (RuntimeException e) {
            try {
                s3.abortMultipartUpload(b -> b.bucket(config.bucket()).key(fullKey).uploadId(uploadId));
            } catch (SdkException abortFailure) {
                e.addSuppressed(abortFailure);
                LOG.warn("could not abort multipart upload {} of {}: {}", uploadId, where(fullKey), abortFailure.toString());
            }
            if (e instanceof SdkException sdk) {
                throw map("multipart PUT", fullKey, sdk);
            }
            throw (RuntimeException) e;
        }
    }

    /**
     * Reads {@code [offset, offset+length)} of {@code key} with a ranged GET
     * ({@code Range: bytes=offset-(offset+length-1)}). A range crossing the end returns the bytes
     * up to the end; an offset at or past the end returns an empty array (S3 answers 416
     * InvalidRange, mapped here).
     *
     * @throws ObjectStoreException NOT_FOUND when the object does not exist, INVALID on a negative
     *                              offset or length
     */
    @Override
    public byte[] get(String key, long offset, int length) {
        String fullKey = fullKey(key);
        if (offset < 0 || length < 0) {
            throw new ObjectStoreException(ObjectStoreException.Kind.INVALID,
                    "negative range offset=" + offset + " length=" + length + " for " + where(fullKey), null);
        }
        if (length == 0) {
            if (head(key) == null) {
                throw new ObjectStoreException(ObjectStoreException.Kind.NOT_FOUND, "GET " + where(fullKey) + ": no such key", null);
            }
            return new byte[0];
        }
        counters.gets.incrementAndGet();
        String range = "bytes=" + offset + "-" + (offset + length - 1);
        try (ResponseInputStream<GetObjectResponse> in = s3.getObject(b -> b.bucket(config.bucket()).key(fullKey).range(range))) {
            return readFully(in, length, in.response().contentLength());
        } catch (AwsServiceException e) {
            if (e.statusCode() == 416 || "InvalidRange".equals(code(e))) {
                return new byte[0];
            }
            throw map("GET", fullKey, e);
        } catch (SdkException e) {
            throw map("GET", fullKey, e);
        } catch (IOException e) {
            throw new ObjectStoreException(ObjectStoreException.Kind.UNREACHABLE,
                    "GET " + where(fullKey) + ": reading the body failed: " + e, e);
        }
    }

    /** Deletes {@code key}; a missing key is not an error (S3 semantics). */
    @Override
    public void delete(String key) {
        String fullKey = fullKey(key);
        counters.deletes.incrementAndGet();
        try {
            s3.deleteObject(b -> b.bucket(config.bucket()).key(fullKey));
        } catch (SdkException e) {
            ObjectStoreException mapped = map("DELETE", fullKey, e);
            if (mapped.kind() != ObjectStoreException.Kind.NOT_FOUND) {
                throw mapped;
            }
        }
    }

    /** Most keys of one DeleteObjects request (S3 API limit). */
    static final int DELETE_BATCH = 1000;

    /**
     * Deletes {@code keys} with one DeleteObjects request per {@value #DELETE_BATCH} keys (quiet
     * mode: the answer lists only failures); a missing key is not an error (S3 semantics).
     *
     * @throws ObjectStoreException for a failed request, or naming the first key S3 did not delete
     */
    @Override
    public void deleteAll(List<String> keys) {
        for (int from = 0; from < keys.size(); from += DELETE_BATCH) {
            List<software.amazon.awssdk.services.s3.model.ObjectIdentifier> ids = new ArrayList<>();
            for (String key : keys.subList(from, Math.min(keys.size(), from + DELETE_BATCH))) {
                ids.add(software.amazon.awssdk.services.s3.model.ObjectIdentifier.builder().key(fullKey(key)).build());
            }
            counters.deletes.incrementAndGet();
            software.amazon.awssdk.services.s3.model.DeleteObjectsResponse r;
            try {
                r = s3.deleteObjects(b -> b.bucket(config.bucket()).delete(d -> d.objects(ids).quiet(true)));
            } catch (SdkException e) {
                throw map("DELETE (" + ids.size() + " keys from)", ids.get(0).key(), e);
            }
            for (software.amazon.awssdk.services.s3.model.S3Error err : r.errors()) {
                if (!"NoSuchKey".equals(err.code())) {
                    throw new ObjectStoreException(ObjectStoreException.Kind.OTHER,
                            "DELETE " + where(err.key()) + ": " + err.code() + " " + err.message(), null);
                }
            }
        }
    }

    /**
     * HEAD of {@code key}: its size in bytes, or null when absent (404). A HEAD answer carries no
     * error code, so a missing bucket also reads as absent here; {@link #checkAccess()} tells them apart.
     */
    @Override
    public ObjectInfo head(String key) {
        String fullKey = fullKey(key);
        counters.heads.incrementAndGet();
        try {
            HeadObjectResponse r = s3.headObject(b -> b.bucket(config.bucket()).key(fullKey));
            return new ObjectInfo(key, r.contentLength());
        } catch (SdkException e) {
            ObjectStoreException mapped = map("HEAD", fullKey, e);
            if (mapped.kind() == ObjectStoreException.Kind.NOT_FOUND) {
                return null;
            }
            throw mapped;
        }
    }

    /**
     * Lists objects whose key (relative to the store prefix) starts with {@code prefix}, in key
     * order, paging through ListObjectsV2 with {@link S3Config#listPageSize()} keys per request.
     */
    @Override
    public List<ObjectInfo> list(String prefix) {
        String fullPrefix = config.prefix() + (prefix == null ? "" : prefix);
        List<ObjectInfo> out = new ArrayList<>();
        String token = null;
        do {
            counters.lists.incrementAndGet();
            ListObjectsV2Request.Builder req = ListObjectsV2Request.builder().bucket(config.bucket())
                    .prefix(fullPrefix).maxKeys(config.listPageSize());
            if (token != null) {
                req.continuationToken(token);
            }
            ListObjectsV2Response page;
            try {
                page = s3.listObjectsV2(req.build());
            } catch (SdkException e) {
                throw map("LIST", fullPrefix + "*", e);
            }
            for (S3Object o : page.contents()) {
                out.add(new ObjectInfo(o.key().substring(config.prefix().length()), o.size()));
            }
            token = Boolean.TRUE.equals(page.isTruncated()) ? page.nextContinuationToken() : null;
        } while (token != null);
        return out;
    }

    /** Creates the bucket when it does not exist (CreateBucket; "already owned" is success). */
    public void ensureBucket() {
        try {
            s3.headBucket(b -> b.bucket(config.bucket()));
            return;
        } catch (SdkException e) {
            ObjectStoreException mapped = map("HEAD bucket", "", e);
            if (mapped.kind() != ObjectStoreException.Kind.NO_SUCH_BUCKET) {
                throw mapped;
            }
        }
        try {
            s3.createBucket(b -> b.bucket(config.bucket()));
            LOG.info("created bucket {} at {}", config.bucket(), config.endpoint());
        } catch (AwsServiceException e) {
            String code = code(e);
            if (!"BucketAlreadyOwnedByYou".equals(code) && !"BucketAlreadyExists".equals(code)) {
                throw map("CreateBucket", "", e);
            }
        } catch (SdkException e) {
            throw map("CreateBucket", "", e);
        }
    }

    /**
     * Proves in one cheap request (ListObjectsV2 of at most one key under the prefix, no retry,
     * 5 s budget) that the endpoint is reachable, the credentials are valid and the bucket exists.
     *
     * @throws ObjectStoreException UNREACHABLE, ACCESS_DENIED or NO_SUCH_BUCKET with a one-line message
     */
    public void checkAccess() {
        counters.lists.incrementAndGet();
        try {
            probe.listObjectsV2(b -> b.bucket(config.bucket()).prefix(config.prefix()).maxKeys(1));
        } catch (SdkException e) {
            throw map("check access to", "", e);
        }
    }

    @Override
    public RequestCounters counters() {
        return counters;
    }

    /** Closes the HTTP clients. */
    @Override
    public void close() {
        s3.close();
        probe.close();
        synchronized (this) {
            if (presigner != null) {
                presigner.close();
            }
        }
    }

    /** Signs URLs for {@link #presignGet} and {@link #presignPut}; built at first use (guarded by this). */
    private software.amazon.awssdk.services.s3.presigner.S3Presigner presigner;

    private synchronized software.amazon.awssdk.services.s3.presigner.S3Presigner presigner() {
        if (presigner == null) {
            presigner = software.amazon.awssdk.services.s3.presigner.S3Presigner.builder()
                    .endpointOverride(config.endpoint())
                    .region(Region.of(config.region()))
                    .credentialsProvider(StaticCredentialsProvider.create(
                            AwsBasicCredentials.create(config.accessKey(), config.secretKey())))
                    .serviceConfiguration(S3Configuration.builder().pathStyleAccessEnabled(config.pathStyle()).build())
                    .build();
        }
        return presigner;
    }

    /**
     * {@inheritDoc} Here: a SigV4 presigned GetObject URL of the bucket's endpoint, path-style
     * when the store is (S3 API "Authenticating Requests: Using Query Parameters"); at most 7
     * days, as S3 allows.
     */
    @Override
    public java.net.URI presignGet(String key, Duration ttl) {
        String fullKey = fullKey(key);
        Duration d = min(ttl, Duration.ofDays(7));
        try {
            return presigner().presignGetObject(b -> b.signatureDuration(d)
                    .getObjectRequest(g -> g.bucket(config.bucket()).key(fullKey))).url().toURI();
        } catch (java.net.URISyntaxException e) {
            throw new ObjectStoreException(ObjectStoreException.Kind.INVALID, "cannot sign a URL for " + where(fullKey), e);
        }
    }

    /**
     * {@inheritDoc} Here: a SigV4 presigned PutObject URL (S3 API "Uploading objects with
     * presigned URLs"), at most 7 days; the body it carries is not signed, so only where nothing
     * between the holder and S3 can change it unseen: https (TLS), or http to a loopback address
     * (the rule of {@link LoopbackPayloadSigning}, which uploads through the SDK follow too). Over
     * plain http to another host the SDK's own PUTs sign the body (SHA-256), and this refuses.
     *
     * @throws UnsupportedOperationException for plain http to a host that is not loopback
     */
    @Override
    public java.net.URI presignPut(String key, Duration ttl) {
        String fullKey = fullKey(key);
        java.net.URI endpoint = config.endpoint();
        if (!"https".equalsIgnoreCase(endpoint.getScheme()) && !LoopbackPayloadSigning.unsignedOn(endpoint)) {
            throw new UnsupportedOperationException("PUT URLs carry unsigned bodies: not signed for plain http to "
                    + endpoint.getHost() + " (upload through the OSS, which signs them)");
        }
        Duration d = min(ttl, Duration.ofDays(7));
        try {
            return presigner().presignPutObject(b -> b.signatureDuration(d)
                    .putObjectRequest(r -> r.bucket(config.bucket()).key(fullKey))).url().toURI();
        } catch (java.net.URISyntaxException e) {
            throw new ObjectStoreException(ObjectStoreException.Kind.INVALID, "cannot sign a URL for " + where(fullKey), e);
        }
    }

    private String where(String fullKey) {
        return "s3://" + config.bucket() + "/" + fullKey + " at " + config.endpoint();
    }

    private static String code(AwsServiceException e) {
        return e.awsErrorDetails() == null ? null : e.awsErrorDetails().errorCode();
    }

    /** Maps an SDK failure to an {@link ObjectStoreException} with a one-line message. */
    private ObjectStoreException map(String op, String fullKey, SdkException e) {
        String where = where(fullKey);
        if (e instanceof AwsServiceException ase) {
            String code = code(ase);
            int status = ase.statusCode();
            String detail = ase.awsErrorDetails() == null ? null : ase.awsErrorDetails().errorMessage();
            String what = (code == null ? "HTTP " + status : code + " (HTTP " + status + ")")
                    + (detail == null || detail.isBlank() ? "" : ": " + oneLine(detail));
            ObjectStoreException.Kind kind;
            if ("NoSuchBucket".equals(code) || (status == 404 && op.contains("bucket") || status == 404 && op.startsWith("check"))) {
                kind = ObjectStoreException.Kind.NO_SUCH_BUCKET;
            } else if ("NoSuchKey".equals(code) || "NoSuchUpload".equals(code) || status == 404) {
                kind = ObjectStoreException.Kind.NOT_FOUND;
            } else if (status == 403 || "AccessDenied".equals(code) || "InvalidAccessKeyId".equals(code)
                    || "SignatureDoesNotMatch".equals(code)) {
                kind = ObjectStoreException.Kind.ACCESS_DENIED;
            } else if (status == 400 || status == 411 || status == 416) {
                kind = ObjectStoreException.Kind.INVALID;
            } else {
                kind = ObjectStoreException.Kind.OTHER;
            }
            if (kind == ObjectStoreException.Kind.NO_SUCH_BUCKET) {
                where = "bucket " + config.bucket() + " at " + config.endpoint();
            }
            return new ObjectStoreException(kind, op + " " + where + ": " + what, e);
        }
        if (isUnreachable(e)) {
            return new ObjectStoreException(ObjectStoreException.Kind.UNREACHABLE,
                    op + " " + where + ": S3 endpoint unreachable: " + rootCause(e), e);
        }
        return new ObjectStoreException(ObjectStoreException.Kind.OTHER, op + " " + where + ": " + oneLine(String.valueOf(e.getMessage())), e);
    }

    private static boolean isUnreachable(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof ConnectException || t instanceof UnknownHostException || t instanceof NoRouteToHostException
                    || t instanceof SocketTimeoutException || t instanceof ApiCallTimeoutException
                    || t instanceof ApiCallAttemptTimeoutException || t instanceof AbortedException
                    || t instanceof InterruptedIOException || t instanceof IOException
                    || t.getClass().getName().endsWith("ConnectTimeoutException")
                    || t.getClass().getName().endsWith("NoHttpResponseException")) {
                return true;
            }
        }
        return false;
    }

    private static String rootCause(Throwable e) {
        Throwable t = e;
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        String name = t.getClass().getSimpleName();
        return oneLine(t.getMessage() == null ? name : name + ": " + t.getMessage());
    }

    private static String oneLine(String s) {
        return s.replaceAll("\\s*[\\r\\n]+\\s*", " ").trim();
    }

    /**
     * Reads up to {@code length} bytes of a GET body whose Content-Length is {@code contentLength}
     * (null when the server sent none) into one array with large reads: the HTTP client then reads
     * straight from the socket into it (InputStream.readNBytes reads in 16 KiB chunks and copies
     * them once more, a syscall per chunk). A body that ends early gives a shorter array (a range
     * past the end of the object).
     *
     * <p>The array is sized by the Content-Length, not by the range asked for: a whole-block read
     * asks for up to the largest cacheable block (16 MiB + 1) to learn the block's size, and
     * allocating (and zeroing) that much for a 4 MiB block cost more CPU than the GET itself.
     * Without a Content-Length the array grows as bytes arrive.
     */
    static byte[] readFully(InputStream in, int length, Long contentLength) throws IOException {
        int cap = contentLength == null || contentLength < 0
                ? Math.min(length, GROW_FROM) : (int) Math.min(length, contentLength);
        byte[] out = new byte[cap];
        int n = 0;
        for (;;) {
            if (n == out.length) {
                if (n == length) {
                    return out;
                }
                int b = in.read(); // at the Content-Length: normally the end of the body
                if (b < 0) {
                    return out;
                }
                out = Arrays.copyOf(out, (int) Math.min(length, Math.max(2L * out.length, GROW_FROM)));
                out[n++] = (byte) b;
                continue;
            }
            int r = in.read(out, n, out.length - n);
            if (r < 0) {
                return Arrays.copyOf(out, n);
            }
            n += r;
        }
    }

    /** First array size of a body read without a Content-Length, bytes. */
    private static final int GROW_FROM = 1 << 20;
}
