package dev.granary.oss;

/**
 * Settings of one OSS process.
 *
 * @param host                 address to bind (e.g. 127.0.0.1 or 0.0.0.0)
 * @param port                 TCP port; 0 picks a free one
 * @param cacheMaxBytes        capacity of the shared read cache in bytes (0 disables caching)
 * @param maxCachedBlockBytes  blocks up to this many bytes are fetched whole and cached; larger
 *                             ones are served by ranged GETs
 * @param executorThreads      threads running blocking S3 calls (the bounded executor)
 * @param maxMessageBytes      largest gRPC message accepted, bytes (a whole block must fit)
 * @param diskCacheDir         folder of the read cache's local-disk tier, or null for none
 * @param diskCacheMaxBytes    capacity of that tier in bytes (used only with a folder; then > 0)
 */
public record OssConfig(String host, int port, long cacheMaxBytes, int maxCachedBlockBytes,
                        int executorThreads, int maxMessageBytes, java.nio.file.Path diskCacheDir,
                        long diskCacheMaxBytes) {
    /** 1 MiB in bytes. */
    public static final int MIB = 1024 * 1024;
    /** Default cache capacity: 512 MiB. */
    public static final long DEFAULT_CACHE_MAX_BYTES = 512L * MIB;
    /** Default largest cached block: 16 MiB. */
    public static final int DEFAULT_MAX_CACHED_BLOCK_BYTES = 16 * MIB;
    /** Default executor threads: 32 (S3 calls mostly wait on the network). */
    public static final int DEFAULT_EXECUTOR_THREADS = 32;
    /** Default largest gRPC message: 128 MiB. */
    public static final int DEFAULT_MAX_MESSAGE_BYTES = 128 * MIB;
    /**
     * HTTP/2 flow-control window of OSS channels and servers, bytes: several 4 MiB blocks may be in
     * flight on one connection without a WINDOW_UPDATE round trip (gRPC's default is 1 MiB).
     */
    public static final int FLOW_CONTROL_WINDOW = 16 * MIB;

    /** Validates every field; throws IllegalArgumentException with a one-line message. */
    public OssConfig {
        if (host == null || host.isBlank()) {
            throw new IllegalArgumentException("OSS host is missing");
        }
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("OSS port must be in [0, 65535], got " + port);
        }
        if (cacheMaxBytes < 0) {
            throw new IllegalArgumentException("OSS cache size must be >= 0 bytes, got " + cacheMaxBytes);
        }
        if (maxCachedBlockBytes < 0) {
            throw new IllegalArgumentException("OSS max cached block size must be >= 0 bytes, got " + maxCachedBlockBytes);
        }
        if (executorThreads < 1 || executorThreads > 4096) {
            throw new IllegalArgumentException("OSS executor threads must be in [1, 4096], got " + executorThreads);
        }
        if (maxMessageBytes < MIB) {
            throw new IllegalArgumentException("OSS max message size must be at least 1 MiB, got " + maxMessageBytes);
        }
        if (diskCacheDir != null && diskCacheMaxBytes <= 0) {
            throw new IllegalArgumentException("OSS disk cache size must be > 0 bytes with a folder, got " + diskCacheMaxBytes);
        }
    }

    /** Defaults (512 MiB cache, 16 MiB max cached block, 32 threads, 128 MiB messages) on host:port. */
    public static OssConfig defaults(String host, int port) {
        return new OssConfig(host, port, DEFAULT_CACHE_MAX_BYTES, DEFAULT_MAX_CACHED_BLOCK_BYTES,
                DEFAULT_EXECUTOR_THREADS, DEFAULT_MAX_MESSAGE_BYTES, null, 0);
    }

    /** This config with another cache capacity and largest cached block (bytes). */
    public OssConfig withCache(long newCacheMaxBytes, int newMaxCachedBlockBytes) {
        return new OssConfig(host, port, newCacheMaxBytes, newMaxCachedBlockBytes, executorThreads, maxMessageBytes,
                diskCacheDir, diskCacheMaxBytes);
    }

    /** This config with a local-disk tier of {@code bytes} in {@code dir} (null: none). */
    public OssConfig withDiskCache(java.nio.file.Path dir, long bytes) {
        return new OssConfig(host, port, cacheMaxBytes, maxCachedBlockBytes, executorThreads, maxMessageBytes, dir, bytes);
    }
}
