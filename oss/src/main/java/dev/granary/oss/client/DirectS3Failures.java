package dev.granary.oss.client;

import java.time.Duration;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;

/**
 * The rule {@link DirectReadBlockIo} and {@link DirectWriteBlockIo} share for requests a client
 * sends straight to S3: each failed one is redone through the OSS (counted as a fallback), and
 * after {@link #FAILURES_TO_PAUSE} failures in a row (S3 not reachable from this node) every
 * request goes through the OSSes for {@link #PAUSE}, instead of paying a failed connection each.
 * Thread-safe.
 */
final class DirectS3Failures {
    /** Failed direct requests in a row after which direct requests pause for {@link #PAUSE}. */
    static final int FAILURES_TO_PAUSE = 3;
    /** How long direct requests pause after {@link #FAILURES_TO_PAUSE} failures in a row. */
    static final Duration PAUSE = Duration.ofSeconds(60);

    private final Logger log;
    /** What the warning says failed and what is done instead, e.g. "reads straight from S3", "reading". */
    private final String requests;
    private final String doing;
    private final AtomicLong fallbacks = new AtomicLong();
    private final AtomicLong pauses = new AtomicLong();
    private final AtomicInteger inARow = new AtomicInteger();
    /** System.nanoTime() until which requests go through the OSSes only. */
    private volatile long pausedUntilNs = System.nanoTime();

    /**
     * @param log where the pause is warned of and single failures are logged (debug)
     * @param requests the requests, as the warning names them ("reads straight from S3")
     * @param doing what the client does through the OSSes meanwhile ("reading")
     */
    DirectS3Failures(Logger log, String requests, String doing) {
        this.log = log;
        this.requests = requests;
        this.doing = doing;
    }

    /** Whether direct requests are paused now (send through the OSS). */
    boolean paused() {
        return System.nanoTime() - pausedUntilNs < 0;
    }

    /** A direct request succeeded: the count of failures in a row starts again. */
    void succeeded() {
        inARow.set(0);
    }

    /**
     * A direct request failed with {@code t} and is redone through the OSS: counts it, and
     * pauses direct requests at the {@link #FAILURES_TO_PAUSE}th in a row. Returns the cause
     * (unwrapped from a {@link CompletionException}).
     *
     * @param what the request, for the debug log ("direct read of block K on OST 0")
     */
    Throwable failed(Throwable t, String what) {
        Throwable c = cause(t);
        fallbacks.incrementAndGet();
        if (inARow.incrementAndGet() >= FAILURES_TO_PAUSE) {
            inARow.set(0);
            boolean wasPaused = paused();
            pausedUntilNs = System.nanoTime() + PAUSE.toNanos();
            if (!wasPaused) { // requests in flight when the pause began fail too: one warning, not one per request
                pauses.incrementAndGet();
                log.warn("{} failed {} times in a row (last: {}); {} through the OSSes for {} s",
                        requests, FAILURES_TO_PAUSE, c.toString(), doing, PAUSE.toSeconds());
            }
        } else {
            log.debug("{} failed ({}); redone through its OSS", what, c.toString());
        }
        return c;
    }

    /** Direct requests that failed and were redone through the OSS so far. */
    long fallbacks() {
        return fallbacks.get();
    }

    /** Pauses begun so far (each warned of once; failures during a pause extend it). */
    long pauses() {
        return pauses.get();
    }

    /** {@code t}, or its cause when it is a {@link CompletionException} with one. */
    static Throwable cause(Throwable t) {
        return t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
    }
}
