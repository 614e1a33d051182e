package dev.granary.client.vfs;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.DirLease;
import java.time.Duration;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Function;
import java.util.function.LongConsumer;
import java.util.function.LongPredicate;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The directory leases this client holds (mds.proto {@code DirLeaseRequest}; after CephFS's
 * directory capabilities, under which its clients create files asynchronously). While this client
 * holds a directory's lease, the MDS keeps every other client out of the directory's entries, so
 * a name the MDS answered absent after the grant stays absent for everyone else: an
 * {@code O_EXCL} create of it can be answered here and sent later ({@link DeferredCreates}), and
 * no other client can contradict the answer or see the directory without the file.
 *
 * <p>Life of a lease:
 * <ul>
 *   <li><b>taken</b> when this client makes its second file in a directory within
 *       {@link #TRIGGER_NS} ({@link #changedWithout}; one Raft write), for {@link #LEASE_NS};</li>
 *   <li><b>used</b> locally until {@link #MARGIN_NS} before it runs out, counted from when its
 *       grant was sent (the margin covers clock rates and the time the deferred creates take to
 *       reach the MDS: they are sent within {@link DeferredCreates#LEASED_SEND_NS} of their
 *       answer); renewed while creates go on;</li>
 *   <li><b>ended</b> when no create used it for {@link #IDLE_NS}, when another client recalled it
 *       (polled every {@link #POLL_MS} ms: that client waits meanwhile), or before it runs out:
 *       no create or unlink is answered under it any more, its directory's deferred creates and
 *       unlinks are sent and answered, then it is released. So another client that reads the directory after this
 *       client's close sees the file (close-to-open).</li>
 * </ul>
 * A client that dies with a lease keeps other clients out until the lease runs out (at most
 * {@link #LEASE_NS}) and loses the creates it had not sent, as a local filesystem loses the
 * creates of a crash before the directory's fsync. Thread-safe.
 */
final class DirLeases implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(DirLeases.class);
    /**
     * Lease asked for, ns. What it bounds: how long other clients wait on a holder that died
     * (CephFS waits 60 s for a dead client's capabilities, NFSv4 90 s for a delegation), and how
     * long a holder may stall (a VM freeze, SIGSTOP) before creates it already answered can reach
     * the MDS after the lease ran out: then another client may have made the name meanwhile, and
     * the late create is refused (EEXIST), logged as an error, and lost (helper-found with a 5 s
     * lease and SIGSTOPs of 5-6.5 s: hundreds of names won by both clients).
     */
    static final long LEASE_NS = 15_000_000_000L;
    /**
     * The lease is used locally until this long before it runs out (from when its grant was
     * sent), ns: a create answered at the last moment still has this long, less
     * {@link DeferredCreates#LEASED_SEND_NS}, to reach the MDS.
     */
    static final long MARGIN_NS = 5_000_000_000L;
    /** A lease in use is renewed when less than this is left of its local use, ns. */
    static final long RENEW_AHEAD_NS = 7_500_000_000L;
    /** A lease no create used for this long is ended, ns. */
    static final long IDLE_NS = 200_000_000L;
    /** A lease is ended this long before its local use runs out, if not renewed by then, ns. */
    static final long END_AHEAD_NS = 200_000_000L;
    /** A second create in one directory within this time takes its lease, ns. */
    static final long TRIGGER_NS = 1_000_000_000L;
    /** How often a held lease's recall is polled (one MDS read each), ms. */
    static final long POLL_MS = 10;
    /** Leases held at most at once: each costs a poll every {@link #POLL_MS}. */
    static final int MAX_HELD = 16;
    /** Tries at most of a grant's listing while this client's own writes to the directory are in flight. */
    static final int LISTING_TRIES = 50;
    /** Pause between two tries of a grant's listing, ms. */
    static final long LISTING_RETRY_MS = 2;

    /** One held lease. {@code rw}: creates answered under it take the read lock; ending it, the write lock. */
    private static final class Held {
        final long dir;
        final Caller caller;
        final ReentrantReadWriteLock rw = new ReentrantReadWriteLock();
        /** When its grant arrived (System.nanoTime): names seen absent before are not trusted. */
        final long grantedNanos;
        volatile long validUntilNanos;
        volatile long lastUseNanos;
        /** Set under the write lock: nothing more is answered under it. */
        volatile boolean ending;

        Held(long dir, Caller caller, long grantedNanos, long validUntilNanos) {
            this.dir = dir;
            this.caller = caller;
            this.grantedNanos = grantedNanos;
            this.validUntilNanos = validUntilNanos;
            this.lastUseNanos = grantedNanos;
        }
    }

    private final MdsClient mds;
    /** Sends a directory's deferred creates and unlinks and waits for the MDS's answers. */
    private final LongConsumer flushDir;
    /** The listings read after each grant (negative lookups answered here). */
    private final LeasedListings listings;
    private final ConcurrentHashMap<Long, Held> held = new ConcurrentHashMap<>();
    /** The last create or unlink in each directory that was not answered under a lease (System.nanoTime). */
    private final Cache<Long, Long> lastChange = Caffeine.newBuilder().executor(Runnable::run)
            .expireAfterWrite(Duration.ofNanos(TRIGGER_NS)).maximumSize(10_000).build();
    /** Directories whose lease was refused lately (another client holds it, no permission): not asked again for a while. */
    private final Cache<Long, Boolean> refused = Caffeine.newBuilder().executor(Runnable::run)
            .expireAfterWrite(Duration.ofNanos(TRIGGER_NS)).maximumSize(10_000).build();
    private final ScheduledExecutorService timer;
    /** The poll while leases are held, else null (an idle client does not wake up): guarded by {@code this}. */
    private ScheduledFuture<?> polling;
    /** Runs on the poll thread just before a due renewal reads the clock (tests stall it there); nothing by default. */
    volatile Runnable beforeRenewal = () -> { };
    private final AtomicLong grants = new AtomicLong();
    private final AtomicLong recalls = new AtomicLong();
    private final AtomicLong answered = new AtomicLong();
    private volatile boolean closed;

    /**
     * Leases over {@code mds} (a client with its session); {@code flushDir} sends a directory's
     * deferred creates and unlinks and waits for their answers; each grant's directory is listed
     * into {@code listings} in the background ({@link LeasedListings#build}), so that lookups of
     * absent names in it are answered here ({@link #withLease}).
     */
    DirLeases(MdsClient mds, LongConsumer flushDir, LeasedListings listings) {
        this.mds = mds;
        this.flushDir = flushDir;
        this.listings = java.util.Objects.requireNonNull(listings, "listings");
        this.timer = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "granary-dir-leases");
            t.setDaemon(true);
            return t;
        });
    }

    /** Starts the poll of held leases if it is not running (after a lease was added to {@code held}). */
    private synchronized void startPolling() {
        if (polling == null && !closed) {
            polling = timer.scheduleWithFixedDelay(this::tick, POLL_MS, POLL_MS, TimeUnit.MILLISECONDS);
        }
    }

    /** Stops the poll when no lease is held; a lease added meanwhile starts it again (both under {@code this}). */
    private synchronized void stopPollingIfIdle() {
        if (polling != null && held.isEmpty()) {
            polling.cancel(false);
            polling = null;
        }
    }

    /** True while the background poll runs: only while some lease is held (tests). */
    synchronized boolean polling() {
        return polling != null;
    }

    /**
     * Runs {@code action} on directory {@code dir}'s lease under its read lock and returns its
     * result, when this client holds that lease and may still use it (the use is recorded: the
     * lease does not idle out); else returns null without running it. The lease cannot end
     * while {@code action} runs.
     */
    private <T> T whileUsable(long dir, Function<Held, T> action) {
        Held h = held.get(dir);
        if (h == null) {
            return null;
        }
        h.rw.readLock().lock();
        try {
            long now = System.nanoTime();
            if (h.ending || now - h.validUntilNanos >= 0) {
                return null;
            }
            h.lastUseNanos = now;
            return action.apply(h);
        } finally {
            h.rw.readLock().unlock();
        }
    }

    /**
     * Runs {@code action} under the lease of directory {@code dir} and returns its result, when
     * this client holds that lease, may still use it, and the name concerned was seen absent at
     * the MDS by a read sent at {@code absentSeenNanos} (System.nanoTime), after the grant; else
     * returns null without running it. The lease cannot end while {@code action} runs.
     */
    <T> T underLease(long dir, long absentSeenNanos, Supplier<T> action) {
        T r = whileUsable(dir, h -> absentSeenNanos - h.grantedNanos < 0 ? null : action.get());
        if (r != null) {
            answered.incrementAndGet();
        }
        return r;
    }

    /**
     * Tests {@code test} with the grant time of directory {@code dir}'s lease (System.nanoTime,
     * as {@link LeasedListings} keys its listings) while this client holds that lease and may
     * still use it; false without testing otherwise. The lease cannot end meanwhile, and counts
     * as used (a lookup before a create).
     */
    boolean withLease(long dir, LongPredicate test) {
        return whileUsable(dir, h -> test.test(h.grantedNanos) ? Boolean.TRUE : null) != null;
    }

    /**
     * Runs {@code action} under the lease of directory {@code dir} when this client holds it and
     * may still use it (for a change of an entry this client knows, such as an unlink), and
     * returns its result; else returns null without running it.
     */
    <T> T whileHeld(long dir, Supplier<T> action) {
        Held h = held.get(dir);
        return h == null ? null : underLease(dir, h.grantedNanos, action);
    }

    /** True when this client holds directory {@code dir}'s lease and it has not begun to end. */
    boolean holds(long dir) {
        Held h = held.get(dir);
        return h != null && !h.ending && System.nanoTime() - h.validUntilNanos < 0;
    }

    /**
     * A file was made or removed in directory {@code dir} (by caller {@code c}) without the lease:
     * the second within {@link #TRIGGER_NS} takes the lease (one Raft write), so the creates and
     * unlinks that follow can be answered here. A refusal (another client holds it, no write permission) is not an error:
     * the creates go on as before, and the lease is not asked for again for a while.
     */
    void changedWithout(Caller c, long dir) {
        if (closed || held.containsKey(dir) || held.size() >= MAX_HELD || refused.getIfPresent(dir) != null) {
            return;
        }
        long now = System.nanoTime();
        Long last = lastChange.asMap().put(dir, now);
        if (last == null || now - last > TRIGGER_NS) {
            return;
        }
        try {
            MdsClient.DirLeaseReply r = mds.acquireDirLease(c, dir, LEASE_NS);
            if (!r.granted()) {
                refused.put(dir, Boolean.TRUE);
                return;
            }
            Held h = new Held(dir, c, System.nanoTime(), now + LEASE_NS - MARGIN_NS); // from when the grant was asked for
            if (held.putIfAbsent(dir, h) == null) {
                grants.incrementAndGet();
                startPolling();
                onTimer(() -> list(h, 1), 0);
            }
        } catch (RuntimeException e) {
            refused.put(dir, Boolean.TRUE);
            LOG.debug("directory lease of inode {} not taken: {}", dir, e.getMessage());
        }
    }

    /** Background: ends idle, recalled and expiring leases; renews those in use. */
    private void tick() {
        for (Held h : held.values()) {
            try {
                long now = System.nanoTime();
                boolean end = now - h.lastUseNanos > IDLE_NS || h.validUntilNanos - now < END_AHEAD_NS;
                if (!end) {
                    DirLease l = mds.dirLeaseStatus(h.caller, h.dir);
                    if (l.getHolder() != mds.session() || l.getRecalled()) {
                        recalls.incrementAndGet();
                        end = true;
                    }
                }
                if (!end && h.validUntilNanos - now < RENEW_AHEAD_NS) {
                    beforeRenewal.run();
                    long sent = System.nanoTime();
                    if (sent - h.validUntilNanos >= 0) {
                        // this thread stalled past the lease's local use since it read the clock:
                        // the MDS's lease may have run out meanwhile, and another client may have
                        // changed the directory before a renewal re-granted it, which neither the
                        // listing nor the names seen absent under this grant would show. Ended,
                        // not renewed: the next create takes a new lease (helper-noticed, by reading)
                        end = true;
                    } else if (mds.acquireDirLease(h.caller, h.dir, LEASE_NS).granted()) {
                        h.validUntilNanos = sent + LEASE_NS - MARGIN_NS;
                    } else {
                        recalls.incrementAndGet();
                        end = true;
                    }
                }
                if (end) {
                    end(h);
                }
            } catch (RuntimeException e) {
                LOG.warn("directory lease of inode {}: {}; ending it", h.dir, GranaryVfs.rootMessage(e));
                end(h);
            }
        }
        stopPollingIfIdle();
    }

    /**
     * On the timer thread: reads the listing of lease {@code h}'s directory for it, again after
     * {@link #LISTING_RETRY_MS} while this client's writes to the directory are in flight (at most
     * {@link #LISTING_TRIES} tries), as long as the lease is held.
     */
    private void list(Held h, int attempt) {
        if (closed || h.ending || held.get(h.dir) != h) {
            return;
        }
        if (!listings.build(mds, h.caller, h.dir, h.grantedNanos) && attempt < LISTING_TRIES) {
            onTimer(() -> list(h, attempt + 1), LISTING_RETRY_MS);
        }
    }

    /** Runs {@code task} on the timer thread after {@code delayMs}; not at all once the timer is shut down (closing). */
    private void onTimer(Runnable task, long delayMs) {
        try {
            timer.schedule(task, delayMs, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            // closing: nothing left to do for a lease
        }
    }

    /** Ends lease {@code h}: nothing more is answered under it, its directory's deferred changes are sent, then it is released. */
    private void end(Held h) {
        h.rw.writeLock().lock();
        try {
            h.ending = true;
        } finally {
            h.rw.writeLock().unlock();
        }
        listings.ended(h.dir, h.grantedNanos);
        try {
            flushDir.accept(h.dir);
        } catch (RuntimeException e) {
            LOG.warn("sending the deferred creates of directory inode {} failed: {}", h.dir, GranaryVfs.rootMessage(e));
        }
        try {
            mds.releaseDirLease(h.caller, h.dir);
        } catch (RuntimeException e) {
            LOG.debug("releasing the lease of directory inode {} failed (it runs out by itself): {}", h.dir, e.getMessage());
        }
        held.remove(h.dir, h);
    }

    /** Leases taken, leases ended because another client recalled them, and creates answered under a lease so far (tests, diagnostics). */
    long[] counters() {
        return new long[] {grants.get(), recalls.get(), answered.get()};
    }

    /** Ends every lease (sending their directories' deferred creates) and stops the background thread. */
    @Override
    public void close() {
        closed = true;
        timer.shutdownNow();
        try {
            timer.awaitTermination(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        for (Held h : held.values()) {
            end(h);
        }
    }
}
