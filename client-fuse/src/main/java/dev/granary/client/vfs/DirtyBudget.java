package dev.granary.client.vfs;

import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

/**
 * The client-wide budget of dirty write-buffer memory, in bytes, shared by all open files.
 * A writer that needs more than is free blocks (backpressure) and, while it waits, asks the
 * client to spill partially written stripes (upload them early) so that memory is freed even
 * when every buffer is partial; it never fails with out-of-memory.
 */
public final class DirtyBudget {
    private final long maxBytes;
    private final Semaphore permits;

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
        while (!permits.tryAcquire(bytes, 20, TimeUnit.MILLISECONDS)) {
            spill.run();
        }
    }

    /** Returns {@code bytes} to the budget. */
    public void release(int bytes) {
        if (bytes > 0) {
            permits.release(bytes);
        }
    }

    /** Bytes free now. */
    public long available() {
        return permits.availablePermits();
    }
}
