package dev.granary.client.vfs;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

/**
 * Which stripes random readers of this client read densely, so that a stripe is fetched once,
 * whole, into the kernel's page cache ({@link PageCacheFill}) instead of with one ranged GET per
 * read.
 *
 * <p>A random read (one that does not continue the handle's previous read) of a stripe whose
 * block had {@link #THRESHOLD}{@code - 1} random reads before, by any handle of this client within
 * {@link #WINDOW}, fetches the stripe's whole block; that read and reads of the stripe that arrive
 * while the fetch runs are served from it, and the FUSE layer then stores it in the page cache
 * of the file, where later reads find it without a FUSE request. A block is filled at most once
 * per window. The bytes read beyond what was asked are so bounded: none for sparse random reads
 * (one per stripe), at most one stripe for a stripe read {@link #THRESHOLD} times. Measured
 * motive: fio's random 128 KiB reads of half a 1 GiB file cost one ranged GET each (4,150 GETs,
 * 0.6-0.8x s3fs, which reads large ranges into a local file); a whole stripe is read at the
 * speed of a sequential read.
 *
 * <p>Keyed by block key and offset (a pack holds several files' stripes), so a stripe another
 * client rewrote (a new block) starts again at 0. Bounded in entries; thread-safe.
 */
final class DenseRandomReads {
    /**
     * Random reads of one block (within {@link #WINDOW}) whose last fetches the stripe whole: 2,
     * or the system property {@code granary.client.denseReads} (e.g. in {@code GRANARY_JAVA_OPTS};
     * 0 turns whole-stripe fetches off: every random read fetches just its range).
     */
    static final int THRESHOLD = Integer.getInteger("granary.client.denseReads", 2);
    /** How long random reads of a block count towards {@link #THRESHOLD}, and how long a filled block stays filled. */
    static final Duration WINDOW = Duration.ofSeconds(60);

    /** One block's random reads and, while it runs, its whole-stripe fetch. */
    static final class Block {
        final AtomicInteger reads = new AtomicInteger();
        /** The whole-stripe fetch while it runs (null before and after); its bytes, shared read-only. */
        volatile CompletableFuture<ByteBuffer> fetching;
    }

    private final Cache<String, Block> blocks = Caffeine.newBuilder().executor(Runnable::run)
            .maximumSize(65_536).expireAfterWrite(WINDOW).build();
    private final LongAdder fills = new LongAdder();
    private final LongAdder fillBytes = new LongAdder();

    /** The state of the stripe at {@code offset} bytes into block {@code blockKey}. */
    Block block(String blockKey, long offset) {
        return blocks.get(blockKey + '@' + offset, k -> new Block());
    }

    /** Counts a whole-stripe fetch of {@code bytes}. */
    void filled(long bytes) {
        fills.increment();
        fillBytes.add(bytes);
    }

    /** Whole stripes fetched for dense random readers so far. */
    long fills() {
        return fills.sum();
    }

    /** Bytes of those fetches. */
    long fillBytes() {
        return fillBytes.sum();
    }
}
