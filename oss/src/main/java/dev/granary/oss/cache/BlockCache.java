package dev.granary.oss.cache;

import com.github.benmanes.caffeine.cache.AsyncCache;
import com.github.benmanes.caffeine.cache.Caffeine;
import dev.granary.objbacker.ObjectStore;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The OSS shared read cache of blocks, keyed by (OST, block key) and weighed in bytes (Caffeine,
 * W-TinyLFU eviction).
 *
 * <p>A read of a block not in the cache fetches {@code [0, maxCachedBlockBytes]} with one GET.
 * When the block is no larger than {@code maxCachedBlockBytes} that is the whole block: it is
 * cached and this and later reads are served from memory. A larger block is remembered as
 * "large" and read with ranged GETs from then on (the first read is served from the probe).
 * A read whose range ends past {@code maxCachedBlockBytes} goes straight to a ranged GET.
 * Concurrent misses of one block are coalesced into a single GET, which runs on the thread of the
 * first reader (so a bounded executor cannot deadlock on its own loads).
 *
 * <p>Blocks are immutable (written once under a fresh key), so entries never go stale; they are
 * dropped on delete ({@link #invalidate}) or eviction.
 */
public final class BlockCache {
    /** Per-entry bookkeeping overhead counted in the weight, bytes. */
    private static final int ENTRY_OVERHEAD = 96;

    private record Key(int ost, String key) {}

    /**
     * A whole block ({@code whole}), the probe of a large block, or the failure of a load
     * ({@code error}, handed to coalesced waiters; never left in the cache).
     */
    private record Entry(byte[] data, boolean whole, RuntimeException error) {}

    private static final Entry LARGE = new Entry(new byte[0], false, null);

    private final long maxBytes;
    private final int maxCachedBlockBytes;
    private final AsyncCache<Key, Entry> cache;
    private final AtomicLong hits = new AtomicLong();
    private final AtomicLong misses = new AtomicLong();

    /**
     * @param maxBytes            capacity in bytes (0 = cache nothing, every read is a ranged GET)
     * @param maxCachedBlockBytes largest block (bytes) fetched whole and cached
     * @throws IllegalArgumentException on negative sizes
     */
    public BlockCache(long maxBytes, int maxCachedBlockBytes) {
        if (maxBytes < 0 || maxCachedBlockBytes < 0) {
            throw new IllegalArgumentException("block cache sizes must be >= 0, got max=" + maxBytes
                    + " maxCachedBlock=" + maxCachedBlockBytes);
        }
        this.maxBytes = maxBytes;
        this.maxCachedBlockBytes = maxCachedBlockBytes;
        this.cache = Caffeine.newBuilder()
                .maximumWeight(maxBytes)
                .weigher((Key k, Entry e) -> e.data.length + ENTRY_OVERHEAD + 2 * k.key.length())
                .executor(Runnable::run)
                .buildAsync();
    }

    private boolean enabled() {
        return maxBytes > 0 && maxCachedBlockBytes > 0;
    }

    /**
     * Reads {@code [offset, offset+length)} of block {@code key} of OST {@code ost}, from the
     * cache when possible, else from {@code store}. Blocking.
     *
     * @return the bytes, shorter when the block ends earlier, empty at or past its end
     * @throws dev.granary.objbacker.ObjectStoreException from the store (NOT_FOUND, ...)
     */
    public byte[] read(int ost, ObjectStore store, String key, long offset, int length) {
        return read(ost, store, key, offset, length, true);
    }

    /**
     * Like {@link #read(int, ObjectStore, String, long, int)}, but a read of a whole cached block
     * returns the cached array itself, without a copy: the caller must not modify it.
     */
    public byte[] readShared(int ost, ObjectStore store, String key, long offset, int length) {
        return read(ost, store, key, offset, length, false);
    }

    /**
     * The bytes {@code [offset, offset+length)} of block {@code key} of OST {@code ost} when they
     * can be served from memory without waiting (the block is cached whole), else null. Never
     * blocks and never calls the store. With {@code copy} false a read of the whole block returns
     * the cached array itself (the caller must not modify it).
     */
    public byte[] readIfCached(int ost, String key, long offset, int length, boolean copy) {
        if (!enabled() || offset < 0 || length < 0 || offset + length > maxCachedBlockBytes) {
            return null;
        }
        CompletableFuture<Entry> f = cache.getIfPresent(new Key(ost, key));
        if (f == null || !f.isDone() || f.isCompletedExceptionally()) {
            return null;
        }
        Entry entry = f.join();
        if (entry.error != null || !entry.whole) {
            return null;
        }
        hits.incrementAndGet();
        return slice(entry.data, offset, length, copy);
    }

    private static byte[] slice(byte[] data, long offset, int length, boolean copy) {
        if (offset >= data.length) {
            return new byte[0];
        }
        int end = (int) Math.min(data.length, offset + length);
        if (!copy && offset == 0 && end == data.length) {
            return data;
        }
        return Arrays.copyOfRange(data, (int) offset, end);
    }

    private byte[] read(int ost, ObjectStore store, String key, long offset, int length, boolean copy) {
        if (!enabled() || offset < 0 || length < 0 || offset + length > maxCachedBlockBytes) {
            return store.get(key, offset, length);
        }
        Key k = new Key(ost, key);
        boolean[] mine = {false};
        CompletableFuture<Entry> f = cache.get(k, (kk, executor) -> {
            mine[0] = true;
            return new CompletableFuture<>();
        });
        if (mine[0]) {
            misses.incrementAndGet();
            try {
                byte[] probe = store.get(key, 0, maxCachedBlockBytes + 1);
                f.complete(new Entry(probe, probe.length <= maxCachedBlockBytes, null));
            } catch (RuntimeException e) {
                // remove first, then complete normally: a failed future would make Caffeine log a
                // warning for every missing block
                cache.asMap().remove(k, f);
                f.complete(new Entry(new byte[0], false, e));
                throw e;
            }
        }
        Entry entry;
        try {
            entry = f.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while reading block " + key + " of OST " + ost, e);
        } catch (ExecutionException e) {
            throw unwrap(e.getCause());
        }
        if (entry.error != null) {
            throw entry.error;
        }
        if (!entry.whole) {
            if (entry != LARGE) {
                // keep only the marker: later reads of this block are ranged GETs
                cache.synchronous().put(k, LARGE);
            }
            if (entry.data.length > 0 && offset + length <= entry.data.length) {
                if (!mine[0]) {
                    hits.incrementAndGet();
                }
                return Arrays.copyOfRange(entry.data, (int) offset, (int) offset + length);
            }
            return store.get(key, offset, length);
        }
        if (!mine[0]) {
            hits.incrementAndGet();
        }
        return slice(entry.data, offset, length, copy);
    }

    private static RuntimeException unwrap(Throwable t) {
        while (t instanceof CompletionException && t.getCause() != null) {
            t = t.getCause();
        }
        return t instanceof RuntimeException r ? r : new IllegalStateException(t);
    }

    /**
     * Caches a block just written (write-through: it is likely read soon) when it is small enough.
     * The caller must not modify {@code data} afterwards.
     */
    public void put(int ost, String key, byte[] data) {
        if (enabled() && data.length <= maxCachedBlockBytes) {
            cache.put(new Key(ost, key), CompletableFuture.completedFuture(new Entry(data, true, null)));
        }
    }

    /** Drops block {@code key} of OST {@code ost} (after a delete). */
    public void invalidate(int ost, String key) {
        cache.synchronous().invalidate(new Key(ost, key));
    }

    /**
     * Drops every cached block (reads in flight finish and are not cached again by this call).
     *
     * @return the bytes held before, as {@link #weightedBytes()} counts them
     */
    public long invalidateAll() {
        cache.synchronous().cleanUp();
        long before = weightedBytes();
        cache.synchronous().invalidateAll();
        cache.synchronous().cleanUp();
        return before;
    }

    /** Bytes held by the cache now (weighted size, including per-entry overhead). */
    public long weightedBytes() {
        return cache.synchronous().policy().eviction().map(e -> e.weightedSize().orElse(0L)).orElse(0L);
    }

    /** Reads served from memory without a GET of their own (including reads that waited on another reader's GET). */
    public long hits() {
        return hits.get();
    }

    /** Reads that fetched a block (or the probe of a large block) from S3. */
    public long misses() {
        return misses.get();
    }

    /** Capacity in bytes. */
    public long maxBytes() {
        return maxBytes;
    }

    /** Largest cached block in bytes. */
    public int maxCachedBlockBytes() {
        return maxCachedBlockBytes;
    }

    /** Applies pending evictions now (tests and status). */
    public void cleanUp() {
        cache.synchronous().cleanUp();
    }
}
