package dev.granary.oss.client;

import java.io.IOException;
import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
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
final class DirectS3Deadline implements AutoCloseable {
    private static final ScheduledExecutorService TIMER = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "direct-s3-deadline");
        t.setDaemon(true);
        return t;
    });

    private final ScheduledFuture<?> abort;
    private final Duration timeout;

    private DirectS3Deadline(ExecutableHttpRequest call, Duration timeout) {
        this.timeout = timeout;
        this.abort = TIMER.schedule(call::abort, timeout.toNanos(), TimeUnit.NANOSECONDS);
    }

    /** Starts the deadline of {@code call}: it is aborted {@code timeout} from now unless closed before. */
    static DirectS3Deadline start(ExecutableHttpRequest call, Duration timeout) {
        return new DirectS3Deadline(call, timeout);
    }

    /**
     * The failure to report for {@code e}, which the request raised: an IOException naming the
     * timeout when the deadline aborted the request, else {@code e}.
     *
     * @param what the request, e.g. "PUT of /bucket/key"
     */
    IOException failure(String what, IOException e) {
        if (abort.isDone() && !abort.isCancelled()) {
            return new IOException(what + ": no answer within " + timeout.toMillis() + " ms (client.io_timeout); aborted", e);
        }
        return e;
    }

    /** Ends the deadline (the request is over): it will not abort it any more. */
    @Override
    public void close() {
        abort.cancel(false);
    }
}
