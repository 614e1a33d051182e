package dev.granary.oss;

import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;

/**
 * Asynchronous block I/O on OSTs, as the client sees it. {@code OssClient} implements it over
 * gRPC (routing each OST to an OSS); a direct implementation over objbacker serves unit tests.
 * Blocks are immutable: a key is written once.
 */
public interface BlockIo extends AutoCloseable {
    /** Keys of packs (blocks holding several small files, each at its own offset) start with this. */
    String PACK_KEY_PREFIX = "pack/";

    /** Writes block {@code key} of OST {@code ost}; completes when it is durable in S3. */
    CompletableFuture<Void> write(int ost, String key, byte[] data);

    /**
     * Reads {@code [offset, offset+length)} of block {@code key} on OST {@code ost}; the result
     * is shorter when the block ends earlier. Fails with {@link java.io.IOException} on errors.
     */
    CompletableFuture<byte[]> read(int ost, String key, long offset, int length);

    /**
     * Like {@link #read} but as a buffer (position 0, limit = bytes read) that may share memory
     * with the transport instead of being copied into a fresh array: the read path of a 4 MiB
     * block then allocates and copies 4 MiB less. It may be array-backed, so that a consumer can
     * copy from the array directly; callers must never modify it, and must read it with absolute
     * gets (or a duplicate), as several readers may share it.
     */
    default CompletableFuture<ByteBuffer> readView(int ost, String key, long offset, int length) {
        return read(ost, key, offset, length).thenApply(ByteBuffer::wrap);
    }

    /** Deletes blocks of OST {@code ost} (garbage collection). */
    CompletableFuture<Void> delete(int ost, java.util.List<String> keys);

    @Override
    void close();
}
