package dev.granary.client.vfs;

import dev.granary.mds.FsException;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.MdsRequest;
import dev.granary.mds.proto.MdsResponse;
import dev.granary.mds.proto.Status;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Unlinks sent to the MDS in the background ({@link ClientConfig#deferredUnlink()}), after
 * CephFS's asynchronous unlink ({@code nowsync}): the caller has checked the unlink locally and
 * returned; this queue sends the removals in order, as {@code batch_write}s of up to
 * {@value #MAX_BATCH} (one Raft entry each, one batch in flight, so batches grow with the load),
 * each naming the inode it expects ({@code expect_ino}), so a removal never takes a file that
 * replaced the one the caller saw.
 *
 * <p>What callers wait for: a lookup (or create, rename) of a name whose removal is pending waits
 * for it ({@link #awaitName}), so the MDS never shows this client the old entry; a listing or
 * rmdir of a directory waits for the removals in it ({@link #awaitDir}); at most
 * {@value #MAX_PENDING} removals wait at once, beyond which unlink blocks (backpressure).
 *
 * <p>Outcomes: ENOENT means the entry is gone already or names another inode now, and is not an
 * error. Any other error (EACCES after a permission change another client made, the MDS
 * unreachable: EIO) is logged, makes the entry reappear here ({@code onFailure}), and is kept for
 * the directory until {@link #takeError} (fsync of the directory) returns it; for at most
 * {@value #MAX_ERROR_DIRS} directories at once (the oldest is dropped first, logged).
 */
final class DeferredUnlinks implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(DeferredUnlinks.class);
    /** Removals per batch_write at most. */
    static final int MAX_BATCH = 256;
    /** Removals queued or in flight at most; unlink blocks beyond. */
    static final int MAX_PENDING = 4096;
    /** Directories whose refused removal waits for an fsync at most; beyond, the oldest is dropped (logged). */
    static final int MAX_ERROR_DIRS = 4096;

    /** One deferred removal: {@code name} in directory {@code parent}, expected to name inode {@code ino}. */
    record Unlink(Caller caller, long parent, String name, long ino) {}

    /** Called (on the sender thread) once the MDS answered a removal. */
    interface Outcome {
        /** The removal committed; {@code parentAttr} is the directory's new attributes, or null. */
        void removed(Unlink u, dev.granary.mds.proto.Attr parentAttr);

        /** The removal failed with {@code e} (not ENOENT): the entry is still there. */
        void failed(Unlink u, FsException e);
    }

    private final MdsClient mds;
    private final Outcome outcome;
    private final Object lock = new Object();
    private final ArrayDeque<Unlink> queue = new ArrayDeque<>();
    private final Map<Long, Integer> perDir = new HashMap<>();
    private final Map<GranaryVfs.DentryKey, Integer> perName = new HashMap<>();
    /** First refused removal per directory, oldest first, until fsync takes it; at most maxErrorDirs. */
    private final java.util.LinkedHashMap<Long, FsException> errors = new java.util.LinkedHashMap<>();
    private final int maxErrorDirs;
    private final Thread sender;
    private int inFlight;
    private boolean closed;

    DeferredUnlinks(MdsClient mds, Outcome outcome) {
        this(mds, outcome, MAX_ERROR_DIRS);
    }

    /** With room for the refusals of {@code maxErrorDirs} directories (tests use a small one). */
    DeferredUnlinks(MdsClient mds, Outcome outcome, int maxErrorDirs) {
        this.mds = mds;
        this.outcome = outcome;
        this.maxErrorDirs = maxErrorDirs;
        this.sender = new Thread(this::run, "granary-deferred-unlink");
        this.sender.setDaemon(true);
        this.sender.start();
    }

    /**
     * Queues a removal; blocks while {@value #MAX_PENDING} are pending.
     *
     * @throws FsException EIO when this queue is closed, EINTR when interrupted while waiting
     */
    void offer(Unlink u) {
        synchronized (lock) {
            while (!closed && queue.size() + inFlight >= MAX_PENDING) {
                waitOn();
            }
            if (closed) {
                throw new FsException(Status.EIO, "client closing: unlink not sent");
            }
            queue.add(u);
            perDir.merge(u.parent(), 1, Integer::sum);
            perName.merge(new GranaryVfs.DentryKey(u.parent(), u.name()), 1, Integer::sum);
            lock.notifyAll();
        }
    }

    /** True when no removal is queued or in flight. */
    boolean isEmpty() {
        synchronized (lock) {
            return perName.isEmpty();
        }
    }

    /** True when a removal of {@code name} in {@code parent} is queued or in flight. */
    boolean pending(long parent, String name) {
        synchronized (lock) {
            return perName.containsKey(new GranaryVfs.DentryKey(parent, name));
        }
    }

    /** Waits until no removal of {@code name} in {@code parent} is queued or in flight. */
    void awaitName(long parent, String name) {
        GranaryVfs.DentryKey k = new GranaryVfs.DentryKey(parent, name);
        synchronized (lock) {
            while (perName.containsKey(k)) {
                waitOn();
            }
        }
    }

    /** Waits until no removal in directory {@code parent} is queued or in flight. */
    void awaitDir(long parent) {
        synchronized (lock) {
            while (perDir.containsKey(parent)) {
                waitOn();
            }
        }
    }

    /** Waits (at most {@code timeoutMs}) until every removal was answered; false on timeout. */
    boolean awaitAll(long timeoutMs) {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        synchronized (lock) {
            while (!queue.isEmpty() || inFlight > 0) {
                long left = end - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(lock, left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return false;
                }
            }
            return true;
        }
    }

    /** The first error of a removal in {@code parent} since the last call, or null; clears it. */
    FsException takeError(long parent) {
        synchronized (lock) {
            return errors.remove(parent);
        }
    }

    private void waitOn() {
        try {
            lock.wait();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new FsException(Status.EINTR, "interrupted while waiting for deferred unlinks");
        }
    }

    private void run() {
        while (true) {
            List<Unlink> batch = new ArrayList<>();
            synchronized (lock) {
                while (queue.isEmpty() && !closed) {
                    try {
                        lock.wait();
                    } catch (InterruptedException e) {
                        return;
                    }
                }
                if (queue.isEmpty()) {
                    return; // closed and drained
                }
                while (!queue.isEmpty() && batch.size() < MAX_BATCH) {
                    batch.add(queue.poll());
                }
                inFlight = batch.size();
            }
            send(batch);
            synchronized (lock) {
                for (Unlink u : batch) {
                    perDir.computeIfPresent(u.parent(), (k, n) -> n == 1 ? null : n - 1);
                    perName.computeIfPresent(new GranaryVfs.DentryKey(u.parent(), u.name()), (k, n) -> n == 1 ? null : n - 1);
                }
                inFlight = 0;
                lock.notifyAll();
            }
        }
    }

    private void send(List<Unlink> batch) {
        List<MdsRequest> reqs = new ArrayList<>(batch.size());
        for (Unlink u : batch) {
            reqs.add(mds.unlinkRequest(u.caller(), u.parent(), Names.encode(u.name()), u.ino()));
        }
        List<MdsResponse> answers;
        try {
            answers = mds.batchWrite(reqs);
        } catch (RuntimeException e) {
            FsException f = e instanceof FsException fe ? fe : new FsException(Status.EIO, e.toString());
            for (Unlink u : batch) {
                fail(u, new FsException(Status.EIO, "deferred unlink not sent: " + f.getMessage()));
            }
            return;
        }
        for (int i = 0; i < batch.size(); i++) {
            Unlink u = batch.get(i);
            MdsResponse r = i < answers.size() ? answers.get(i) : null;
            if (r == null) {
                fail(u, new FsException(Status.EIO, "no answer for a deferred unlink"));
            } else if (r.getStatus() == Status.OK) {
                outcome.removed(u, r.hasAttr() && r.getAttr().getIno() == u.parent() ? r.getAttr() : null);
            } else if (r.getStatus() != Status.ENOENT) {
                fail(u, new FsException(r.getStatus(), r.getMessage()));
            }
        }
    }

    private void fail(Unlink u, FsException e) {
        LOG.warn("deferred unlink of '{}' in directory inode {} failed: {} {}; the entry is still there",
                u.name(), Long.toUnsignedString(u.parent()), e.status(), e.getMessage());
        synchronized (lock) {
            errors.putIfAbsent(u.parent(), e);
            if (errors.size() > maxErrorDirs) { // a client that never fsyncs its directories: bounded memory
                var oldest = errors.entrySet().iterator().next();
                errors.remove(oldest.getKey());
                LOG.warn("refused deferred unlinks in more than {} directories not fsynced since: an fsync of directory "
                        + "inode {} will no longer report its refusal ({})", maxErrorDirs,
                        Long.toUnsignedString(oldest.getKey()), oldest.getValue().status());
            }
        }
        outcome.failed(u, e);
    }

    /** Sends what is queued (waits up to 30 s), then stops the sender. */
    @Override
    public void close() {
        if (!awaitAll(30_000)) {
            LOG.warn("closing with deferred unlinks not answered after 30 s; those files may remain");
        }
        synchronized (lock) {
            closed = true;
            lock.notifyAll();
        }
        try {
            sender.join(5_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
