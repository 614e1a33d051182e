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
 * <p>Two shapes of read, as the client sends them:
 * <ul>
 *   <li><b>Large reads</b> (longer than {@code chunkBytes}: a sequential reader's whole stripe)
 *   fetch {@code [0, maxCachedBlockBytes]} with one GET. When the block is no larger than
 *   {@code maxCachedBlockBytes} that is the whole block: it is cached and this and later reads are
 *   served from memory. A larger block is remembered as "large" and read with ranged GETs from
 *   then on (the first read is served from the probe). A read whose range ends past
 *   {@code maxCachedBlockBytes} goes straight to a ranged GET.
 *   <li><b>Small reads</b> (at most {@code chunkBytes}: random access) fetch only the aligned
 *   chunks of {@code chunkBytes} that hold the range, with one ranged GET, and cache those chunks.
 *   So a random 128 KiB read costs S3 at most one chunk plus one (2 MiB with 1 MiB chunks) instead
 *   of the whole block, and later reads in the same chunks are hits. A chunk 0 shorter than
 *   {@code chunkBytes} is the whole block and answers every read of it.
 * </ul>
 * A whole cached block answers both shapes. Concurrent misses of one block or chunk are coalesced
 * into a single GET, which runs on the thread of the first reader (so a bounded executor cannot
 * deadlock on its own loads).
 *
 * <p>With a {@link DiskTier} (the optional local-disk cache), a miss looks there before S3 (a small
 * read also takes a whole block the disk holds), and what is fetched from S3 is copied there in the
 * background. Blocks just written ({@link #put}) go to memory only.
 *
 * <p>Blocks are immutable (written once under a fresh key), so entries never go stale; they are
 * dropped on delete ({@link #invalidate}) or eviction.
 */
public final class BlockCache {
    /** Per-entry bookkeeping overhead counted in the weight, bytes. */
    private static final int ENTRY_OVERHEAD = 96;

    /** Default chunk of small (random) reads, bytes. */
    public static final int DEFAULT_CHUNK_BYTES = 1 << 20;

    /** {@code chunk} is -1 for a whole block (or the probe of a large one), else the chunk index. */
    private record Key(int ost, String key, long chunk) {
        Key(int ost, String key) {
            this(ost, key, -1);
        }
    }

    /**
     * A whole block ({@code whole}), the probe of a large block, or the failure of a load
     * ({@code error}, handed to coalesced waiters; never left in the cache).
     */
    private record Entry(byte[] data, boolean whole, RuntimeException error) {}

    private static final Entry LARGE = new Entry(new byte[0], false, null);

    private final long maxBytes;
    private final int maxCachedBlockBytes;
    private final int chunkBytes;
    private final AsyncCache<Key, Entry> cache;
    /** The second tier on a local disk, or null. */
    private final DiskTier disk;
    private final AtomicLong hits = new AtomicLong();
    private final AtomicLong misses = new AtomicLong();

    /**
     * @param maxBytes            capacity in bytes (0 = cache nothing, every read is a ranged GET)
     * @param maxCachedBlockBytes largest block (bytes) fetched whole and cached
     * @throws IllegalArgumentException on negative sizes
     */
    public BlockCache(long maxBytes, int maxCachedBlockBytes) {
        this(maxBytes, maxCachedBlockBytes, DEFAULT_CHUNK_BYTES);
    }

    /**
     * @param maxBytes            capacity in bytes (0 = cache nothing, every read is a ranged GET)
     * @param maxCachedBlockBytes largest block (bytes) fetched whole and cached by large reads
     * @param chunkBytes          the unit (bytes) that small reads fetch and cache
     * @throws IllegalArgumentException on negative sizes or a chunk smaller than 4 KiB
     */
    public BlockCache(long maxBytes, int maxCachedBlockBytes, int chunkBytes) {
        this(maxBytes, maxCachedBlockBytes, chunkBytes, null);
    }

    /**
     * A cache whose misses look in {@code disk} before S3, and which copies what it fetches from S3
     * there (in the background): the optional local-disk tier for datasets larger than memory.
     *
     * @param disk the second tier, or null for none (it is closed by its owner, not by this cache)
     * @throws IllegalArgumentException on negative sizes or a chunk smaller than 4 KiB
     */
    public BlockCache(long maxBytes, int maxCachedBlockBytes, int chunkBytes, DiskTier disk) {
        if (maxBytes < 0 || maxCachedBlockBytes < 0) {
            throw new IllegalArgumentException("block cache sizes must be >= 0, got max=" + maxBytes
                    + " maxCachedBlock=" + maxCachedBlockBytes);
        }
        if (chunkBytes < 4096) {
            throw new IllegalArgumentException("block cache chunk must be >= 4096 bytes, got " + chunkBytes);
        }
        this.maxBytes = maxBytes;
        this.maxCachedBlockBytes = maxCachedBlockBytes;
        this.chunkBytes = chunkBytes;
        this.disk = disk;
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

    /** Whether block {@code key} of OST {@code ost} is in memory whole, ready (no hit or miss is counted). */
    public boolean holdsWhole(int ost, String key) {
        if (!enabled()) {
            return false;
        }
        Entry whole = done(new Key(ost, key));
        return whole != null && whole.whole;
    }

    /**
     * The bytes {@code [offset, offset+length)} of block {@code key} of OST {@code ost} when they
     * can be served from memory without waiting (the block is cached whole), else null. Never
     * blocks and never calls the store. With {@code copy} false a read of the whole block returns
     * the cached array itself (the caller must not modify it).
     */
    public byte[] readIfCached(int ost, String key, long offset, int length, boolean copy) {
        if (!enabled() || offset < 0 || length < 0) {
            return null;
        }
        Entry whole = done(new Key(ost, key));
        if (whole != null && whole.whole) {
            hits.incrementAndGet();
            return slice(whole.data, offset, length, copy);
        }
        if (length > chunkBytes) {
            return null;
        }
        long c0 = offset / chunkBytes;
        long c1 = length == 0 ? c0 : (offset + length - 1) / chunkBytes;
        Entry first = done(new Key(ost, key, 0));
        if (first != null && first.whole) {
            hits.incrementAndGet();
            return slice(first.data, offset, length, true);
        }
        Entry a = done(new Key(ost, key, c0));
        Entry b = c1 == c0 ? a : done(new Key(ost, key, c1));
        if (a == null || b == null) {
            return null;
        }
        hits.incrementAndGet();
        return fromChunks(c0, a.data, b.data, offset, length);
    }

    /** The completed, successful entry of {@code k}, or null. */
    private Entry done(Key k) {
        CompletableFuture<Entry> f = cache.getIfPresent(k);
        if (f == null || !f.isDone() || f.isCompletedExceptionally()) {
            return null;
        }
        Entry e = f.join();
        return e.error == null ? e : null;
    }

    /**
     * {@code [offset, offset+length)} from chunk {@code c0} ({@code a}) and, when the range
     * crosses into it, chunk {@code c0+1} ({@code b}); shorter where the block ends.
     */
    private byte[] fromChunks(long c0, byte[] a, byte[] b, long offset, int length) {
        long base = c0 * chunkBytes;
        int from = (int) (offset - base);
        if (offset + length <= base + chunkBytes || a.length < chunkBytes) {
            return slice(a, from, length, true);
        }
        int inA = Math.max(0, a.length - from);
        int inB = Math.min(b.length, length - inA);
        byte[] out = new byte[inA + inB];
        System.arraycopy(a, from, out, 0, inA);
        System.arraycopy(b, 0, out, inA, inB);
        return out;
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
        if (!enabled() || offset < 0 || length < 0) {
            return store.get(key, offset, length);
        }
        if (length <= chunkBytes) {
            byte[] hit = readIfCached(ost, key, offset, length, copy);
            if (hit != null) {
                return hit;
            }
            if (disk == null || offset + length > maxCachedBlockBytes || !disk.contains(ost, key, -1)) {
                return readChunks(ost, store, key, offset, length);
            }
            // the disk holds the whole block: load it as a large read would
        }
        if (offset + length > maxCachedBlockBytes) {
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
                DiskTier.Piece onDisk = disk == null ? null : disk.get(ost, key, -1);
                if (onDisk != null) {
                    f.complete(new Entry(onDisk.data(), true, null));
                } else {
                    byte[] probe = store.get(key, 0, maxCachedBlockBytes + 1);
                    boolean whole = probe.length <= maxCachedBlockBytes;
                    f.complete(new Entry(probe, whole, null));
                    if (whole && disk != null) {
                        disk.putAsync(ost, key, -1, probe, true);
                    }
                }
            } catch (RuntimeException e) {
                // remove first, then complete normally: a failed future would make Caffeine log a
                // warning for every missing block
                cache.asMap().remove(k, f);
                f.complete(new Entry(new byte[0], false, e));
                throw e;
            }
        }
        Entry entry = await(f, key, ost);
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

    /**
     * A small read that {@link #readIfCached} could not answer: the chunks {@code c0..c1} (one or
     * two) holding the range, from the cache or fetched together with one ranged GET. Chunk 0 is fetched with one byte more, so that a block
     * no longer than a chunk is known to be whole.
     */
    private byte[] readChunks(int ost, ObjectStore store, String key, long offset, int length) {
        long c0 = offset / chunkBytes;
        long c1 = length == 0 ? c0 : (offset + length - 1) / chunkBytes;
        Key k0 = new Key(ost, key, c0);
        Key k1 = new Key(ost, key, c1);
        boolean[] mine = {false, false};
        CompletableFuture<Entry> f0 = cache.get(k0, (kk, executor) -> {
            mine[0] = true;
            return new CompletableFuture<>();
        });
        CompletableFuture<Entry> f1 = c1 == c0 ? f0 : cache.get(k1, (kk, executor) -> {
            mine[1] = true;
            return new CompletableFuture<>();
        });
        boolean fromDisk = false;
        if (disk != null) {
            if (mine[0] && fromDisk(ost, key, c0, f0)) {
                mine[0] = false;
                fromDisk = true;
            }
            if (mine[1] && c1 != c0 && fromDisk(ost, key, c1, f1)) {
                mine[1] = false;
                fromDisk = true;
            }
        }
        if (fromDisk || mine[0] || mine[1]) {
            misses.incrementAndGet();
        } else {
            hits.incrementAndGet();
        }
        if (mine[0] || mine[1]) {
            long from = (mine[0] ? c0 : c1) * chunkBytes;
            long to = (mine[1] || c1 == c0 ? c1 + 1 : c0 + 1) * chunkBytes + (mine[0] && c0 == 0 ? 1 : 0);
            try {
                byte[] got = store.get(key, from, (int) (to - from));
                if (mine[0]) {
                    int n = (int) Math.min(got.length, chunkBytes);
                    boolean whole = c0 == 0 && got.length <= chunkBytes;
                    byte[] data = n == got.length ? got : Arrays.copyOf(got, n);
                    f0.complete(new Entry(data, whole, null));
                    if (disk != null) {
                        disk.putAsync(ost, key, c0, data, whole);
                    }
                }
                if (mine[1] && c1 != c0) {
                    int skip = mine[0] ? chunkBytes : 0;
                    int n = Math.max(0, Math.min(got.length - skip, chunkBytes));
                    byte[] data = Arrays.copyOfRange(got, skip, skip + n);
                    f1.complete(new Entry(data, false, null));
                    if (disk != null) {
                        disk.putAsync(ost, key, c1, data, false);
                    }
                }
            } catch (RuntimeException e) {
                // remove first, then complete normally (see read): waiters get the error once
                if (mine[0]) {
                    cache.asMap().remove(k0, f0);
                    f0.complete(new Entry(new byte[0], false, e));
                }
                if (mine[1] && c1 != c0) {
                    cache.asMap().remove(k1, f1);
                    f1.complete(new Entry(new byte[0], false, e));
                }
                throw e;
            }
        }
        Entry a = await(f0, key, ost);
        if (a.whole) {
            return slice(a.data, offset, length, true);
        }
        Entry b = c1 == c0 ? a : await(f1, key, ost);
        return fromChunks(c0, a.data, b.data, offset, length);
    }

    /** Completes {@code f} (a chunk this reader loads) from the disk tier when it holds the chunk. */
    private boolean fromDisk(int ost, String key, long chunk, CompletableFuture<Entry> f) {
        DiskTier.Piece p = disk.get(ost, key, chunk);
        if (p == null) {
            return false;
        }
        f.complete(new Entry(p.data(), p.whole(), null));
        return true;
    }

    /** The entry {@code f} completes with; a load's failure is rethrown to every waiter. */
    private static Entry await(CompletableFuture<Entry> f, String key, int ost) {
        Entry e;
        try {
            e = f.get();
        } catch (InterruptedException ie) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while reading block " + key + " of OST " + ost, ie);
        } catch (ExecutionException ee) {
            throw unwrap(ee.getCause());
        }
        if (e.error != null) {
            throw e.error;
        }
        return e;
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
        if (disk != null) {
            disk.invalidate(ost, key, -1);
        }
        // Chunks of the first maxCachedBlockBytes: a block's chunks beyond (blocks larger than any
        // cached whole) are never read again once it is deleted, and age out by eviction.
        long chunks = Math.max(1, ((long) maxCachedBlockBytes + chunkBytes - 1) / chunkBytes);
        for (long c = 0; c < chunks; c++) {
            cache.synchronous().invalidate(new Key(ost, key, c));
            if (disk != null) {
                disk.invalidate(ost, key, c);
            }
        }
    }

    /**
     * Drops every cached block, in memory and on the disk tier (reads in flight finish and are not
     * cached again by this call).
     *
     * @return the bytes held in memory before, as {@link #weightedBytes()} counts them
     */
    public long invalidateAll() {
        if (disk != null) {
            disk.invalidateAll();
        }
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

    /**
     * Reads not answered from memory, which fetched from the disk tier or S3: a block, the probe of a
     * large block, or the chunks of a small read.
     */
    public long misses() {
        return misses.get();
    }

    /** The local-disk tier, or null when there is none. */
    public DiskTier disk() {
        return disk;
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
