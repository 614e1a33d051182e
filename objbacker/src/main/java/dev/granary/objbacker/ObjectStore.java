package dev.granary.objbacker;

import java.util.List;

/**
 * An S3-style object store restricted to one bucket and key prefix (an OST's storage).
 * Keys passed here are relative to the prefix. Objects are immutable once written.
 * All methods are thread-safe and retry transient failures (5xx, 503 SlowDown, timeouts)
 * with backoff before throwing {@link ObjectStoreException}.
 */
public interface ObjectStore extends AutoCloseable {
    /** Writes {@code data} as object {@code key} (multipart upload above the configured threshold). */
    void put(String key, byte[] data);

    /**
     * Reads bytes {@code [offset, offset+length)} of {@code key} (an S3 ranged GET).
     * Returns fewer bytes when the object ends earlier; an empty array when offset is at or past its end.
     *
     * @throws ObjectStoreException with kind NOT_FOUND when the object does not exist
     */
    byte[] get(String key, long offset, int length);

    /**
     * A URL for an HTTP GET of object {@code key} by someone who holds no credentials (S3's
     * presigned URLs: SigV4 query-string authentication), valid for {@code ttl}; a {@code Range}
     * header selects bytes, as for {@link #get}. Signing sends no request.
     *
     * @throws UnsupportedOperationException when the store cannot sign URLs
     */
    default java.net.URI presignGet(String key, java.time.Duration ttl) {
        throw new UnsupportedOperationException(getClass().getSimpleName() + " does not sign URLs");
    }

    /**
     * A URL for an HTTP PUT of object {@code key} (its whole body, with a {@code Content-Length})
     * by someone who holds no credentials (S3 presigned URLs, SigV4 query-string authentication,
     * payload unsigned), valid for {@code ttl}. Signing sends no request.
     *
     * @throws UnsupportedOperationException when the store cannot sign URLs, or will not let a
     *         body travel unprotected to it (see {@link S3ObjectStore#presignPut})
     */
    default java.net.URI presignPut(String key, java.time.Duration ttl) {
        throw new UnsupportedOperationException(getClass().getSimpleName() + " does not sign URLs");
    }

    /** Deletes {@code key}; deleting a missing key is not an error (S3 semantics). */
    void delete(String key);

    /**
     * Deletes every key of {@code keys}; missing keys are not errors. The default deletes them one
     * by one; S3 stores send one multi-object delete per 1,000 keys (S3 API DeleteObjects).
     *
     * @throws ObjectStoreException naming the first key that could not be deleted (the others
     *     may or may not be gone: deleting again is safe)
     */
    default void deleteAll(List<String> keys) {
        for (String key : keys) {
            delete(key);
        }
    }

    /** Returns metadata of {@code key}, or null when absent. */
    ObjectInfo head(String key);

    /** Lists all objects whose key starts with {@code prefix}, in key order (paged internally). */
    List<ObjectInfo> list(String prefix);

    /** Counters of S3 requests issued by this store since it was created. */
    RequestCounters counters();

    @Override
    void close();

    /** Key (relative to the store's prefix) and size in bytes of one object. */
    record ObjectInfo(String key, long size) {}
}
