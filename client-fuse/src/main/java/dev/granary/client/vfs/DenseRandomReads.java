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
 * <p>With {@link ClientConfig#stripeFillReads()} = N (off when 0): a random read (one that does
 * not continue the handle's previous read) of a stripe whose block had N - 1 random reads before,
 * by any handle of this client within {@link #WINDOW} of each other, fetches the stripe's whole block; that read and reads of the
 * stripe that arrive while the fetch runs are served from it, and the FUSE layer then stores it
 * in the page cache of the file, where later reads find it without a FUSE request. Then the
 * count starts again: reads of the stripe reach this client only once the kernel evicted the
 * pages (or the store was left out). The bytes read beyond what was asked are so bounded: none
 * for sparse random reads (one per stripe), at most one stripe per N random reads of it that
 * reach the client. Measured
 * motive: fio's random 128 KiB reads cost one ranged GET each (s3fs reads large ranges into a
 * local file); a whole stripe is read at the speed of a sequential read. Measured result (a
 * quickstart, 4 fio jobs over 1 GiB, two client processes alternating, N = 2 against off):
 * 1.6-1.8x the IOPS when every block is read, 0.6-0.75x when half of them are, 0.3x for a
 * quarter: on this machine the bytes fetched and not read cost as much as those read, hence off
 * by default.
 *
 * <p>Keyed by block key and offset (a pack holds several files' stripes), so a stripe another
 * client rewrote (a new block) starts again at 0. Bounded in entries; thread-safe.
 */
final class DenseRandomReads {
    /** How long a block's count of random reads lasts after its last read. */
    static final Duration WINDOW = Duration.ofSeconds(60);

    /** A whole-stripe fetch: its bytes (shared read-only) and how many it asked for from the block's start. */
    record Fetch(CompletableFuture<ByteBuffer> data, int length) {}

    /** One block's random reads and, while it runs, its whole-stripe fetch. */
    static final class Block {
        final AtomicInteger reads = new AtomicInteger();
        /** The whole-stripe fetch while it runs (null before and after). */
        volatile Fetch fetching;
    }

    private final Cache<String, Block> blocks = Caffeine.newBuilder().executor(Runnable::run)
            .maximumSize(65_536).expireAfterAccess(WINDOW).build();
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
