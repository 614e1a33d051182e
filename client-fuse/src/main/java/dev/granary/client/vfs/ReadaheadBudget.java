package dev.granary.client.vfs;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * The client-wide budget of read-window memory, in bytes, shared by all open files: the stripes a
 * sequential reader holds for its next reads (the one being read and those read ahead). Readahead
 * of a stripe starts only when the budget has room for it, so many readers at once get shorter
 * windows instead of an OutOfMemoryError (measured before it existed: 32 sequential readers in a
 * client with a 384 MiB heap, 4 stripes of 4 MiB ahead each, ended in OutOfMemoryError and a
 * wedged mount). The stripe a read needs now is always fetched, and counted ({@link #reserve}):
 * the budget bounds what is fetched ahead, never a read.
 *
 * <p>Never blocks. Counts what it handed out ({@link #stats()}).
 */
public final class ReadaheadBudget {
    private final long maxBytes;
    private final AtomicLong held = new AtomicLong();
    private final AtomicLong peak = new AtomicLong();
    private final LongAdder refused = new LongAdder();

    /**
     * What the budget handed out so far.
     *
     * @param maxBytes  the budget (client.max_readahead)
     * @param heldBytes bytes of read windows held now
     * @param peakBytes the most bytes held at once since the client started
     * @param refused   readahead stripes not started for want of room
     */
    public record Stats(long maxBytes, long heldBytes, long peakBytes, long refused) {}

    /** A budget of {@code maxBytes} bytes (0: no readahead at all). */
    public ReadaheadBudget(long maxBytes) {
        if (maxBytes < 0) {
            throw new IllegalArgumentException("maxBytes must be >= 0, got " + maxBytes);
        }
        this.maxBytes = maxBytes;
    }

    /** Takes {@code bytes} for a readahead stripe if they fit; false (nothing taken) when they do not. */
    public boolean tryReserve(long bytes) {
        long now;
        do {
            now = held.get();
            if (now + bytes > maxBytes) {
                refused.increment();
                return false;
            }
        } while (!held.compareAndSet(now, now + bytes));
        peak.accumulateAndGet(now + bytes, Math::max);
        return true;
    }

    /** Takes {@code bytes} for a stripe a read needs now, even past the budget (it is counted, never refused). */
    public void reserve(long bytes) {
        peak.accumulateAndGet(held.addAndGet(bytes), Math::max);
    }

    /** Returns {@code bytes} taken by {@link #tryReserve} or {@link #reserve}. */
    public void release(long bytes) {
        if (bytes > 0) {
            held.addAndGet(-bytes);
        }
    }

    /** Counters of what was handed out (tests and diagnostics). */
    public Stats stats() {
        return new Stats(maxBytes, held.get(), peak.get(), refused.sum());
    }
}
