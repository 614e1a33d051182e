package dev.granary.oss.client;

import java.io.IOException;
import java.time.Duration;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import software.amazon.awssdk.http.ExecutableHttpRequest;

/**
 * The deadline of one request a client sends straight to S3 ({@link DirectReadBlockIo},
 * {@link DirectWriteBlockIo}): the request is aborted (its connection closed) when it is still
 * running {@code client.io_timeout} after it started, whatever it is doing. The HTTP client's own
 * socket timeout bounds each wait for bytes to arrive, not the sending of a body nor a response
 * that trickles in: a PUT to an S3 that stopped answering mid-upload blocked in a socket write
 * until TCP gave up (about 15 minutes with Linux's default {@code tcp_retries2}), and its
 * {@code fsync} with it (helper-found, 2026-12-07). The request then fails with an
 * {@link IOException} that names the timeout, and is redone through the OSS as any failed direct
 * request. Thread-safe; one daemon timer thread for the whole process.
 */
final class DirectS3Deadline {
    /**
     * Aborts the requests that run past their deadline. A deadline ended in time is removed from
     * the queue at once: left there until it would have fired, it kept its request, and a PUT's
     * block with it, for {@code io_timeout} after the PUT returned (a GiB per 4 s of writing).
     */
    private static final ScheduledThreadPoolExecutor TIMER = new ScheduledThreadPoolExecutor(1, r -> {
        Thread t = new Thread(r, "direct-s3-deadline");
        t.setDaemon(true);
        return t;
    });

    static {
        TIMER.setRemoveOnCancelPolicy(true);
    }

    /** A request's exchange with S3: sends it and reads the answer. */
    @FunctionalInterface
    interface Exchange<T> {
        T run() throws IOException;
    }

    private DirectS3Deadline() {}

    /**
     * Runs {@code exchange} (which sends {@code call}) under a deadline of {@code timeout}: past it
     * {@code call} is aborted. An {@link IOException} becomes a {@link CompletionException}, with
     * a message naming the timeout when the deadline aborted the request.
     *
     * @param what the request, e.g. "PUT of /bucket/key"
     */
    static <T> T run(ExecutableHttpRequest call, Duration timeout, String what, Exchange<T> exchange) {
        return run((Runnable) call::abort, timeout, what, exchange);
    }

    /** As {@link #run(ExecutableHttpRequest, Duration, String, Exchange)}, past the deadline running {@code abort}. */
    static <T> T run(Runnable abortAction, Duration timeout, String what, Exchange<T> exchange) {
        ScheduledFuture<?> abort = TIMER.schedule(abortAction, timeout.toNanos(), TimeUnit.NANOSECONDS);
        try {
            return exchange.run();
        } catch (IOException e) {
            throw new CompletionException(abort.isDone() && !abort.isCancelled()
                    ? new IOException(what + ": no answer within " + timeout.toMillis() + " ms (client.io_timeout); aborted", e)
                    : e);
        } finally {
            abort.cancel(false);
        }
    }

    /** Deadlines waiting to fire now (diagnostics, tests): one per direct request in flight. */
    static int pending() {
        return TIMER.getQueue().size();
    }
}
