package dev.granary.client.vfs;

import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * The client-wide budget of dirty write-buffer memory, in bytes, shared by all open files.
 * A writer that needs more than is free blocks (backpressure) and, while it waits, asks the
 * client to spill partially written stripes (upload them early) so that memory is freed even
 * when every buffer is partial; it never fails with out-of-memory.
 *
 * <p>It also counts what it handed out ({@link #stats()}): the bytes held now, the most ever held
 * at once, and how many reservations had to wait. The held count is raised only after the permits
 * are taken and lowered before they are returned, so it never runs ahead of the permits.
 */
public final class DirtyBudget {
    private final long maxBytes;
    private final Semaphore permits;
    private final AtomicLong held = new AtomicLong();
    private final AtomicLong peak = new AtomicLong();
    private final LongAdder waits = new LongAdder();

    /**
     * What the budget handed out so far.
     *
     * @param maxBytes  the budget (client.max_dirty, clamped to 2 GiB - 1)
     * @param heldBytes bytes reserved now
     * @param peakBytes the most bytes reserved at once since the client started
     * @param waits     reservations that could not be granted at once and blocked the writer
     */
    public record Stats(long maxBytes, long heldBytes, long peakBytes, long waits) {}

    /** A budget of {@code maxBytes} bytes (clamped to Integer.MAX_VALUE permits). */
    public DirtyBudget(long maxBytes) {
        this.maxBytes = Math.min(maxBytes, Integer.MAX_VALUE);
        this.permits = new Semaphore((int) this.maxBytes, true);
    }

    /** The largest single reservation: a request above it is clamped to it. */
    public int clamp(long bytes) {
        return (int) Math.min(bytes, maxBytes);
    }

    /**
     * Reserves {@code bytes} (already clamped), running {@code spill} every 20 ms while it cannot.
     *
     * @throws InterruptedException when interrupted while waiting
     */
    public void acquire(int bytes, Runnable spill) throws InterruptedException {
        if (!permits.tryAcquire(bytes, 0, TimeUnit.MILLISECONDS)) { // a timed try keeps the queue fair
            waits.increment();
            while (!permits.tryAcquire(bytes, 20, TimeUnit.MILLISECONDS)) {
                spill.run();
            }
        }
        peak.accumulateAndGet(held.addAndGet(bytes), Math::max);
    }

    /** Returns {@code bytes} to the budget. */
    public void release(int bytes) {
        if (bytes > 0) {
            held.addAndGet(-bytes);
            permits.release(bytes);
        }
    }

    /** Bytes free now. */
    public long available() {
        return permits.availablePermits();
    }

    /** Counters of what was reserved (tests and diagnostics). */
    public Stats stats() {
        return new Stats(maxBytes, held.get(), peak.get(), waits.sum());
    }
}
