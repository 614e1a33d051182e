package dev.granary.client.vfs;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.Extent;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiPredicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Data-ahead: readahead across the small files of a directory. When statahead has read a
 * directory's entries ({@link StatAhead}: lookups there keep missing) and files of it are being
 * opened (two opens within {@link #HOLD}, as a DataLoader's or a sample reader's are; a stat loop,
 * {@code ls -l} or {@code du} opens none and fetches no data), the extent maps of its small
 * regular files, with their inline bytes (data on MDS), are fetched in the background in the
 * directory's name order, 32 files (at most 2 MiB) per MDS read,
 * two reads in flight, each sent beside the client's batched reads instead of among them
 * ({@link MdsClient#getFileMaps}). An open of such a file still asks the MDS (close-to-open), but
 * names the map it holds ({@link MdsClient#lookupForOpen(Caller, long, byte[], MdsClient.FileMap)}):
 * while the file's ctime is the same, the MDS answers with its attributes only and the held map is
 * used; after any change the MDS sends the current map, as without data-ahead (NFS's revalidation
 * of cached data by change attribute). So the MDS reads a small file's bytes in bulk, ahead, and
 * an open costs a small read (no 100 KiB value read from the MDS's disk and sent in it).
 *
 * <p>Memory: held maps take their bytes from the client's read-window budget
 * ({@link ReadaheadBudget}, {@code client.max_readahead}), at most half of it, so large-file
 * readahead keeps room; nothing is fetched when the budget has no room, and the fetch waits for
 * opens to take held maps (a map is handed over once, at its open) or for them to age out (held
 * {@link #HOLD} at most). Files opened before their turn are skipped. A map that ages out
 * unopened stops its directory's data-ahead (the reader stopped, or reads slower than it is
 * worth: a directory of 32,768 files would otherwise be fetched and dropped half of
 * {@code max_readahead} at a time) until the directory is quiet for twice {@link #HOLD}.
 *
 * <p>Thread-safe. Fetch failures are logged at debug and end that directory's data-ahead: opens
 * then read their maps as without it.
 */
final class DataAhead implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(DataAhead.class);
    /** Files per MDS read, and bytes (sum of their sizes). */
    static final int BATCH_FILES = 32;
    static final long BATCH_BYTES = 2L << 20;
    /** MDS reads of data-ahead in flight at most per client. */
    static final int IN_FLIGHT = 2;
    /** Longest a fetched map waits for its open. */
    static final Duration HOLD = Duration.ofSeconds(30);
    /** Directory pages queued at most; pages past it are dropped (their files are read at open). */
    private static final int MAX_QUEUED_PAGES = 4096;
    /** Pages of a directory kept as skipped for their page cache ({@link #pagesMissed}); older ones are dropped. */
    static final int MAX_SKIPPED_PAGES = 8;
    /** Opens in a directory, within {@link #HOLD} of each other, that start its data-ahead. */
    static final int OPENS_TO_START = 2;

    private final MdsClient mds;
    private final ReadaheadBudget budget;
    private final long maxBytes;
    private final long fileMax;
    /** How long a fetched map waits for its open ({@link #HOLD}; shorter in tests). */
    private final long holdNanos;
    private final ConcurrentHashMap<Long, Held> held = new ConcurrentHashMap<>();
    private final AtomicLong heldBytes = new AtomicLong();
    /** When inodes were opened lately (ns): a page queued before an open does not fetch its file. */
    private final Cache<Long, Long> opened;
    private final LinkedBlockingQueue<Page> pages = new LinkedBlockingQueue<>(MAX_QUEUED_PAGES);
    /** Per directory: statahead's pages waiting for opens, and the opens seen. */
    private final Cache<Long, DirState> dirs;
    private final Semaphore inFlight = new Semaphore(IN_FLIGHT);
    private final ExecutorService senders;
    private final Thread worker;
    private final AtomicLong fetched = new AtomicLong();
    private final AtomicLong hits = new AtomicLong();
    private final AtomicLong expired = new AtomicLong();
    private volatile boolean closed;

    /** A fetched map of a file of directory {@code dir} waiting for its open; {@code bytes} taken from the budget. */
    private record Held(MdsClient.FileMap map, long dir, long bytes, long atNanos) {}

    /** A directory's pages not fetched yet (until its opens start it), its opens, and whether it started. Guarded by itself. */
    private static final class DirState {
        final List<Page> waiting = new ArrayList<>();
        int opens;
        long firstOpenNanos;
        boolean started;
        /** A map of it aged out unopened: nothing more is fetched for it. */
        volatile boolean stopped;
        /** Its files skipped because the kernel's page cache held them as listed, in case their pages turn out gone ({@link #pagesMissed}). */
        final List<Page> skippedHeld = new ArrayList<>();
    }

    /** Small regular files of one directory page, in name order, who asked, and when it was queued. */
    private record Page(Caller caller, long dir, List<Attr> files, long atNanos) {}

    /** Whether {@code ino} was opened since {@code sinceNanos}: its open came before its turn. */
    private boolean openedSince(long ino, long sinceNanos) {
        Long at = opened.getIfPresent(ino);
        return at != null && at - sinceNanos >= 0;
    }

    /**
     * @param budget   the client's read-window budget; held maps take at most half of its maximum
     * @param fileMax  largest file fetched ahead, bytes ({@code client.inline_max}: larger files keep their data in blocks)
     */
    DataAhead(MdsClient mds, ReadaheadBudget budget, long fileMax) {
        this(mds, budget, fileMax, HOLD);
    }

    /** As above, with maps held {@code hold} at most (tests). */
    DataAhead(MdsClient mds, ReadaheadBudget budget, long fileMax, Duration hold) {
        this.holdNanos = hold.toNanos();
        this.mds = mds;
        this.budget = budget;
        this.maxBytes = budget.stats().maxBytes() / 2;
        this.fileMax = fileMax;
        this.opened = Caffeine.newBuilder().executor(Runnable::run).expireAfterWrite(hold.multipliedBy(2)).maximumSize(1_000_000).build();
        this.dirs = Caffeine.newBuilder().executor(Runnable::run).expireAfterAccess(hold.multipliedBy(2)).maximumSize(10_000).build();
        AtomicInteger n = new AtomicInteger();
        this.senders = Executors.newFixedThreadPool(IN_FLIGHT, r -> {
            Thread t = new Thread(r, "granary-dataahead-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        this.worker = new Thread(this::run, "granary-dataahead");
        this.worker.setDaemon(true);
        this.worker.start();
    }

    /**
     * Whether the kernel's page cache holds a file of a directory (dir inode, the file's
     * attributes as listed) as it is, so that its open takes no map
     * ({@link GranaryVfs#open(Caller, String, int, java.util.function.LongUnaryOperator)}); null: never.
     */
    private volatile BiPredicate<Long, Attr> pagesHeld;

    /** Tells data-ahead which files' pages the kernel holds as listed: it fetches no bytes of those. */
    void pagesHeld(BiPredicate<Long, Attr> held) {
        this.pagesHeld = held;
    }

    /**
     * Statahead cached a page of directory {@code dir}'s entries with their attributes (name
     * order): its regular files of 1 byte to {@code fileMax} are queued for data-ahead, or kept
     * until opens in the directory start it.
     */
    void offer(Caller c, long dir, List<Attr> entries) {
        if (closed || maxBytes <= 0) {
            return;
        }
        List<Attr> files = new ArrayList<>();
        for (Attr a : entries) {
            if ((a.getMode() & GranaryVfs.S_IFMT) == GranaryVfs.S_IFREG && a.getSize() > 0 && a.getSize() <= fileMax) {
                files.add(a);
            }
        }
        if (files.isEmpty()) {
            return;
        }
        Page p = new Page(c, dir, files, System.nanoTime());
        DirState d = dirs.get(dir, k -> new DirState());
        synchronized (d) {
            if (!d.started) {
                d.waiting.add(p);
                return;
            }
        }
        queue(p);
    }

    private void queue(Page p) {
        if (!pages.offer(p)) {
            LOG.debug("data-ahead queue full: a page of directory {} dropped", p.dir());
        }
    }

    /**
     * The open of {@code ino} (by its name in directory {@code dir}) takes the map fetched ahead
     * for it, or null (none held). Marks the inode opened either way, so that pages queued before
     * are not fetched for it, and counts the open towards starting the directory's data-ahead.
     */
    MdsClient.FileMap take(long dir, long ino) {
        long now = System.nanoTime();
        opened.put(ino, now);
        DirState d = dirs.getIfPresent(dir);
        if (d != null) {
            List<Page> start = null;
            synchronized (d) {
                if (!d.started) {
                    if (d.opens == 0 || now - d.firstOpenNanos > holdNanos) {
                        d.opens = 0;
                        d.firstOpenNanos = now;
                    }
                    if (++d.opens >= OPENS_TO_START) {
                        d.started = true;
                        start = new ArrayList<>(d.waiting);
                        d.waiting.clear();
                    }
                }
            }
            if (start != null) {
                start.forEach(this::queue);
            }
        }
        Held h = held.remove(ino);
        if (h == null) {
            return null;
        }
        giveBack(h.bytes());
        hits.incrementAndGet();
        return h.map();
    }

    /** Pages of directory {@code dir} kept as skipped for the page cache (tests). */
    int skippedPages(long dir) {
        DirState d = dirs.getIfPresent(dir);
        if (d == null) {
            return 0;
        }
        synchronized (d) {
            return d.skippedHeld.size();
        }
    }

    /** Files fetched ahead, maps taken by opens, and maps dropped unopened (tests, diagnostics). */
    long[] counters() {
        return new long[] {fetched.get(), hits.get(), expired.get()};
    }

    private void giveBack(long bytes) {
        heldBytes.addAndGet(-bytes);
        budget.release(bytes);
    }

    private void run() {
        while (!closed) {
            Page p;
            try {
                p = pages.poll(1, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                return;
            }
            dropAged();
            if (p == null) {
                continue;
            }
            try {
                fetchPage(p);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    /**
     * Keeps the files of page {@code p} that were skipped as held in the kernel's page cache, so
     * that {@link #pagesMissed} fetches them if their pages turn out gone; queues them at once
     * when that is known already (the directory's pages were found gone meanwhile).
     */
    private void keepSkipped(DirState d, Page p, List<Attr> skipped, BiPredicate<Long, Attr> cached) {
        if (skipped.isEmpty() || d == null) {
            return;
        }
        Page rest = new Page(p.caller(), p.dir(), skipped, p.atNanos());
        synchronized (d) {
            if (cached.test(p.dir(), skipped.get(0))) {
                d.skippedHeld.add(rest);
                while (d.skippedHeld.size() > MAX_SKIPPED_PAGES) {
                    d.skippedHeld.remove(0); // each listing of the directory brings its files again, newer
                }
                return;
            }
        }
        queue(rest);
    }

    /**
     * An open of directory {@code dir} found the kernel's pages of its file gone (evicted,
     * {@code drop_caches}): the files data-ahead skipped there as held in the page cache are
     * fetched after all (their opens now take maps, {@code GranaryVfs}).
     */
    void pagesMissed(long dir) {
        DirState d = dirs.getIfPresent(dir);
        if (d == null) {
            return;
        }
        List<Page> again;
        synchronized (d) {
            again = new ArrayList<>(d.skippedHeld);
            d.skippedHeld.clear();
        }
        // as queued first: a file opened since then (this pass of the reader) is not fetched again;
        // statahead's next listing of the directory brings the others with a newer time
        again.forEach(this::queue);
    }

    /** Fetches the page's files not opened or held yet, a batch at a time, as the budget allows. */
    private void fetchPage(Page p) throws InterruptedException {
        DirState d = dirs.getIfPresent(p.dir());
        long batchMax = Math.min(BATCH_BYTES, maxBytes);
        List<Attr> batch = new ArrayList<>();
        List<Attr> inPageCache = new ArrayList<>();
        long bytes = 0;
        BiPredicate<Long, Attr> cached = pagesHeld;
        try {
            for (Attr a : p.files()) {
                if (closed || (d != null && d.stopped)) {
                    return;
                }
                if (a.getSize() > batchMax || held.containsKey(a.getIno()) || openedSince(a.getIno(), p.atNanos())) {
                    continue; // larger than all data-ahead may hold (read at open), held, or its open came first
                }
                if (cached != null && cached.test(p.dir(), a)) {
                    inPageCache.add(a); // its open takes no map at all, unless its pages are gone
                    continue;
                }
                if (batch.size() == BATCH_FILES || bytes + a.getSize() > batchMax) {
                    if (!send(p, batch, bytes)) {
                        return; // no room for long: the rest of the page is read at open
                    }
                    batch = new ArrayList<>();
                    bytes = 0;
                }
                batch.add(a);
                bytes += a.getSize();
            }
        } finally {
            keepSkipped(d, p, inPageCache, cached);
        }
        if (!batch.isEmpty()) {
            send(p, batch, bytes);
        }
    }

    /**
     * Sends one batch once the budget has room for it (waiting for opens to take held maps, at
     * most {@link #HOLD}); false when it never had.
     */
    private boolean send(Page p, List<Attr> batch, long bytes) throws InterruptedException {
        long deadline = System.nanoTime() + holdNanos;
        DirState d = dirs.getIfPresent(p.dir());
        while (true) {
            // checked before every try: dropping aged maps below makes room and stops their
            // directory at once (CI: the batch went out on the room its own aged maps left)
            if (closed || (d != null && d.stopped) || System.nanoTime() - deadline > 0) {
                return false;
            }
            if (heldBytes.get() + bytes <= maxBytes && budget.tryReserve(bytes)) {
                break;
            }
            Thread.sleep(5);
            dropAged();
        }
        heldBytes.addAndGet(bytes);
        inFlight.acquire();
        try {
            senders.execute(() -> {
                try {
                    fetchBatch(p, batch, bytes);
                } finally {
                    inFlight.release();
                }
            });
        } catch (RejectedExecutionException e) {
            inFlight.release();
            giveBack(bytes);
            return false;
        }
        return true;
    }

    /** One MDS read of the batch's maps; keeps those with inline bytes, gives back the rest of {@code bytes}. */
    private void fetchBatch(Page p, List<Attr> batch, long bytes) {
        long kept = 0;
        try {
            List<Long> inos = new ArrayList<>(batch.size());
            for (Attr a : batch) {
                inos.add(a.getIno());
            }
            List<MdsClient.FileMap> maps = mds.getFileMaps(p.caller(), inos);
            long now = System.nanoTime();
            for (int i = 0; i < batch.size(); i++) {
                MdsClient.FileMap m = maps.get(i);
                long size = batch.get(i).getSize();
                if (closed || m == null || !inlineWhole(m) || openedSince(m.attr().getIno(), p.atNanos())) {
                    continue; // gone, not data on MDS (blocks), or its open came first
                }
                if (held.putIfAbsent(m.attr().getIno(), new Held(m, p.dir(), size, now)) == null) {
                    kept += size;
                    fetched.incrementAndGet();
                }
            }
        } catch (RuntimeException e) {
            LOG.debug("data-ahead read of {} files failed: {}", batch.size(), e.toString());
        } finally {
            giveBack(bytes - kept);
        }
    }

    /** Whether {@code m} is a file whose bytes are all inline in its one extent. */
    private static boolean inlineWhole(MdsClient.FileMap m) {
        List<Extent> ex = m.extents();
        return ex != null && ex.size() == 1 && ex.get(0).getStripeIndex() == 0
                && ex.get(0).getBlockKey().isEmpty() && !ex.get(0).getInlineData().isEmpty()
                && ex.get(0).getLength() == m.attr().getSize();
    }

    /** Drops maps held longer than the hold time (their opens did not come) and stops their directories. */
    private void dropAged() {
        long now = System.nanoTime();
        for (var e : held.entrySet()) {
            Held h = e.getValue();
            if (now - h.atNanos() > holdNanos && held.remove(e.getKey(), h)) {
                giveBack(h.bytes());
                expired.incrementAndGet();
                DirState d = dirs.getIfPresent(h.dir());
                if (d != null) {
                    d.stopped = true;
                }
            }
        }
    }

    /** Stops fetching and gives back every held map's bytes. */
    @Override
    public void close() {
        closed = true;
        worker.interrupt();
        senders.shutdownNow();
        pages.clear();
        for (Long ino : new ArrayList<>(held.keySet())) {
            Held h = held.remove(ino);
            if (h != null) {
                giveBack(h.bytes());
            }
        }
    }
}
