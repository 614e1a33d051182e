package dev.granary.objbacker;

import java.net.URI;
import java.time.Duration;

/**
 * How to reach one OST's storage: an S3 endpoint, a bucket and a key prefix, with the
 * credentials, multipart sizes (bytes), retry count and timeouts used by {@link S3ObjectStore}.
 *
 * <p>All values are validated here; a bad value raises {@link IllegalArgumentException} with a
 * one-line message naming the field. Limits come from the S3 API (part size at least 5 MiB,
 * at most 10,000 parts) and from S3Proxy 2.6.0 (a signed non-chunked request above 128 MiB is
 * refused, so parts are at most 128 MiB).
 *
 * @param endpoint               S3 endpoint, {@code http://host:port} or {@code https://host}
 * @param region                 signing region; S3Proxy and MinIO accept any, AWS needs the real one
 * @param bucket                 bucket name (S3 naming rules: 3-63 chars of a-z, 0-9, '.', '-')
 * @param prefix                 key prefix inside the bucket; empty, or normalised to end with '/'
 * @param accessKey              access key id
 * @param secretKey              secret access key
 * @param pathStyle              path-style addressing ({@code endpoint/bucket/key}); S3Proxy/MinIO need it
 * @param multipartThreshold     objects larger than this many bytes use a multipart upload
 * @param partSize               bytes per multipart part, in [5 MiB, 128 MiB]
 * @param maxAttempts            attempts per request including the first (1 = no retry)
 * @param connectTimeout         TCP connect timeout
 * @param apiCallAttemptTimeout  timeout of one HTTP attempt (a whole block transfer must fit in it)
 * @param listPageSize           keys per ListObjectsV2 page, in [1, 1000]
 */
public record S3Config(
        URI endpoint,
        String region,
        String bucket,
        String prefix,
        String accessKey,
        String secretKey,
        boolean pathStyle,
        long multipartThreshold,
        long partSize,
        int maxAttempts,
        Duration connectTimeout,
        Duration apiCallAttemptTimeout,
        int listPageSize) {

    /** 1 MiB in bytes. */
    public static final long MIB = 1024L * 1024;
    /** Default region. */
    public static final String DEFAULT_REGION = "us-east-1";
    /** Default multipart threshold: 64 MiB. */
    public static final long DEFAULT_MULTIPART_THRESHOLD = 64 * MIB;
    /** Default part size: 32 MiB. */
    public static final long DEFAULT_PART_SIZE = 32 * MIB;
    /** Smallest part size the S3 API accepts (all parts but the last): 5 MiB. */
    public static final long MIN_PART_SIZE = 5 * MIB;
    /** Largest part size: 128 MiB (S3Proxy refuses larger signed non-chunked requests). */
    public static final long MAX_PART_SIZE = 128 * MIB;
    /** Largest single PUT the S3 API accepts: 5 GiB. */
    public static final long MAX_SINGLE_PUT = 5L * 1024 * MIB;
    /** Default attempts per request. */
    public static final int DEFAULT_MAX_ATTEMPTS = 6;
    /** Default TCP connect timeout. */
    public static final Duration DEFAULT_CONNECT_TIMEOUT = Duration.ofSeconds(5);
    /** Default timeout of one HTTP attempt. */
    public static final Duration DEFAULT_ATTEMPT_TIMEOUT = Duration.ofSeconds(60);
    /** Default (and S3's maximum) keys per list page. */
    public static final int DEFAULT_LIST_PAGE_SIZE = 1000;

    /** Validates every field and normalises {@code prefix}; throws IllegalArgumentException. */
    public S3Config {
        if (endpoint == null) {
            throw new IllegalArgumentException("S3 endpoint is missing");
        }
        String scheme = endpoint.getScheme();
        if (scheme == null || !(scheme.equals("http") || scheme.equals("https")) || endpoint.getHost() == null) {
            throw new IllegalArgumentException("S3 endpoint must be http://host[:port] or https://host[:port], got: " + endpoint);
        }
        region = region == null || region.isBlank() ? DEFAULT_REGION : region.trim();
        if (bucket == null || !bucket.matches("[a-z0-9][a-z0-9.\\-]{1,61}[a-z0-9]")) {
            throw new IllegalArgumentException("invalid S3 bucket name (3-63 chars of a-z, 0-9, '.', '-'): " + bucket);
        }
        prefix = prefix == null ? "" : prefix;
        while (prefix.startsWith("/")) {
            prefix = prefix.substring(1);
        }
        if (!prefix.isEmpty() && !prefix.endsWith("/")) {
            prefix = prefix + "/";
        }
        if (prefix.length() > 512) {
            throw new IllegalArgumentException("S3 key prefix longer than 512 characters: " + prefix.length());
        }
        if (accessKey == null || accessKey.isEmpty()) {
            throw new IllegalArgumentException("S3 access key is missing");
        }
        if (secretKey == null || secretKey.isEmpty()) {
            throw new IllegalArgumentException("S3 secret key is missing");
        }
        if (partSize < MIN_PART_SIZE || partSize > MAX_PART_SIZE) {
            throw new IllegalArgumentException("S3 part size must be in [5 MiB, 128 MiB] bytes, got " + partSize);
        }
        if (multipartThreshold < 1 || multipartThreshold > MAX_SINGLE_PUT) {
            throw new IllegalArgumentException("S3 multipart threshold must be in [1, 5 GiB] bytes, got " + multipartThreshold);
        }
        if (maxAttempts < 1 || maxAttempts > 100) {
            throw new IllegalArgumentException("S3 max attempts must be in [1, 100], got " + maxAttempts);
        }
        connectTimeout = connectTimeout == null ? DEFAULT_CONNECT_TIMEOUT : connectTimeout;
        apiCallAttemptTimeout = apiCallAttemptTimeout == null ? DEFAULT_ATTEMPT_TIMEOUT : apiCallAttemptTimeout;
        if (connectTimeout.isNegative() || connectTimeout.isZero()) {
            throw new IllegalArgumentException("S3 connect timeout must be positive, got " + connectTimeout);
        }
        if (apiCallAttemptTimeout.isNegative() || apiCallAttemptTimeout.isZero()) {
            throw new IllegalArgumentException("S3 attempt timeout must be positive, got " + apiCallAttemptTimeout);
        }
        if (listPageSize < 1 || listPageSize > 1000) {
            throw new IllegalArgumentException("S3 list page size must be in [1, 1000], got " + listPageSize);
        }
    }

    /** A config with every default (region us-east-1, path-style, 64 MiB threshold, 32 MiB parts, 6 attempts). */
    public static S3Config of(URI endpoint, String bucket, String prefix, String accessKey, String secretKey) {
        return new S3Config(endpoint, DEFAULT_REGION, bucket, prefix, accessKey, secretKey, true,
                DEFAULT_MULTIPART_THRESHOLD, DEFAULT_PART_SIZE, DEFAULT_MAX_ATTEMPTS,
                DEFAULT_CONNECT_TIMEOUT, DEFAULT_ATTEMPT_TIMEOUT, DEFAULT_LIST_PAGE_SIZE);
    }

    /** This config with another bucket and key prefix (another OST on the same endpoint). */
    public S3Config withBucket(String newBucket, String newPrefix) {
        return new S3Config(endpoint, region, newBucket, newPrefix, accessKey, secretKey, pathStyle,
                multipartThreshold, partSize, maxAttempts, connectTimeout, apiCallAttemptTimeout, listPageSize);
    }

    /** This config with other credentials. */
    public S3Config withCredentials(String newAccessKey, String newSecretKey) {
        return new S3Config(endpoint, region, bucket, prefix, newAccessKey, newSecretKey, pathStyle,
                multipartThreshold, partSize, maxAttempts, connectTimeout, apiCallAttemptTimeout, listPageSize);
    }

    /** This config with another endpoint. */
    public S3Config withEndpoint(URI newEndpoint) {
        return new S3Config(newEndpoint, region, bucket, prefix, accessKey, secretKey, pathStyle,
                multipartThreshold, partSize, maxAttempts, connectTimeout, apiCallAttemptTimeout, listPageSize);
    }

    /** This config with another multipart threshold and part size (bytes). */
    public S3Config withMultipart(long newThreshold, long newPartSize) {
        return new S3Config(endpoint, region, bucket, prefix, accessKey, secretKey, pathStyle,
                newThreshold, newPartSize, maxAttempts, connectTimeout, apiCallAttemptTimeout, listPageSize);
    }

    /** This config with another attempt count per request (1 = no retry). */
    public S3Config withMaxAttempts(int newMaxAttempts) {
        return new S3Config(endpoint, region, bucket, prefix, accessKey, secretKey, pathStyle,
                multipartThreshold, partSize, newMaxAttempts, connectTimeout, apiCallAttemptTimeout, listPageSize);
    }

    /** This config with other connect and per-attempt timeouts. */
    public S3Config withTimeouts(Duration newConnectTimeout, Duration newAttemptTimeout) {
        return new S3Config(endpoint, region, bucket, prefix, accessKey, secretKey, pathStyle,
                multipartThreshold, partSize, maxAttempts, newConnectTimeout, newAttemptTimeout, listPageSize);
    }

    /** This config with another ListObjectsV2 page size (keys per page, 1..1000). */
    public S3Config withListPageSize(int newListPageSize) {
        return new S3Config(endpoint, region, bucket, prefix, accessKey, secretKey, pathStyle,
                multipartThreshold, partSize, maxAttempts, connectTimeout, apiCallAttemptTimeout, newListPageSize);
    }

    /** {@code s3://bucket/prefix} for messages. */
    public String location() {
        return "s3://" + bucket + "/" + prefix;
    }

    /** Hides the secret key. */
    @Override
    public String toString() {
        return "S3Config[endpoint=" + endpoint + ", region=" + region + ", bucket=" + bucket + ", prefix=" + prefix
                + ", accessKey=" + accessKey + ", secretKey=***, pathStyle=" + pathStyle
                + ", multipartThreshold=" + multipartThreshold + ", partSize=" + partSize
                + ", maxAttempts=" + maxAttempts + ", connectTimeout=" + connectTimeout
                + ", apiCallAttemptTimeout=" + apiCallAttemptTimeout + ", listPageSize=" + listPageSize + "]";
    }
}
