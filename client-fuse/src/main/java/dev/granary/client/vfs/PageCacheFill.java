package dev.granary.client.vfs;

import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;

/**
 * Where a read may put bytes of its file that it fetched beyond what was asked: the kernel's
 * page cache of the file, through FUSE's {@code FUSE_NOTIFY_STORE} (linux/fuse.h). Given to
 * {@link GranaryVfs#readBuffers(dev.granary.mds.proto.Caller, long, long, int, PageCacheFill)} by
 * the FUSE layer for one READ of a handle whose reads go through the page cache; the FUSE layer
 * decides whether the bytes are still the file's when it stores them.
 */
public interface PageCacheFill {
    /**
     * Stores {@code data} (a shared read-only view: bytes [0, limit), read with absolute gets) as
     * the file's bytes from {@code fileOffset} (bytes, page-aligned) on. Asynchronous and best
     * effort: completes when done or left out (never exceptionally); the caller keeps
     * {@code data} until then.
     */
    CompletableFuture<Void> store(long fileOffset, ByteBuffer data);
}
