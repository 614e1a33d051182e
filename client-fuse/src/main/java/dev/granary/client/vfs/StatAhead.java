package dev.granary.client.vfs;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.client.ReadDirPage;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.DirEntry;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiPredicate;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Statahead, after Lustre's: when lookups in one directory keep missing the client's cache
 * (a stat loop, {@code ls -l}, a DataLoader opening a shuffled list of samples), the directory's
 * entries are fetched with their attributes, a page at a time (readdir plus, as NFSv3
 * READDIRPLUS), into the dentry and attribute caches, and the lookups that follow are answered
 * from there. With libfuse2 the kernel sends one LOOKUP at a time per directory (no
 * FUSE_PARALLEL_DIROPS), so each lookup that needs an MDS round trip stalls every other thread
 * opening files in that directory.
 *
 * <p>Trigger: the second lookup of another name within {@link ClientConfig#cacheTimeout()} that
 * asked the MDS and found an entry (lookups of absent names, as creates make them, do not count). One fetch
 * per directory at a time, at most {@link ClientConfig#stataheadMax()} entries, on the client's
 * io threads. A lookup that misses meanwhile waits only until the fetch has passed its name (pages
 * come in the MDS's byte order of names), not for the whole directory: a stat loop over a large
 * directory runs behind the first page while the rest is fetched. Fetched entries follow the
 * cache timeout like any other (the same NFS {@code actimeo}-like window for other clients' changes).
 *
 * <p>This client's own changes stay visible at once: an entry it removed lately (or whose removal
 * is still on its way to the MDS) is skipped in every page, a page fetched while it made any
 * other change (the generation moved) is not kept, and fetched entries never
 * replace cached ones.
 */
final class StatAhead {
    private static final Logger LOG = LoggerFactory.getLogger(StatAhead.class);
    /** Longest a lookup waits for a fetch in flight before asking the MDS itself. */
    private static final long AWAIT_MS = 2_000;

    private final MdsClient mds;
    private final ExecutorService executor;
    private final ClientConfig config;
    private final Cache<GranaryVfs.DentryKey, Long> dentries;
    private final Cache<Long, Attr> attrs;
    private final LongSupplier generation;
    /** Entries not to cache: ones this client removed lately or whose deferred removal is pending. */
    private final BiPredicate<Long, String> skip;
    private final Cache<Long, Dir> dirs;
    private final AtomicLong fetches = new AtomicLong();
    private final AtomicLong fetchedEntries = new AtomicLong();

    /**
     * Per directory: misses in the current window, the fetch in flight and how far it got, when
     * the last one ended. Guarded by its own monitor, which waiting lookups wait on.
     */
    private static final class Dir {
        int misses;
        String lastName;
        long windowStartNs;
        long fetchedAtNs;
        boolean fetchedOnce;
        boolean inFlight;
        /** Encoded name of the last entry the fetch in flight has cached (null: no page yet). */
        byte[] fetchedThrough;
    }

    /**
     * @param generation a counter this client bumps on each of its own namespace or attribute
     *                   changes (create, unlink, rename, setattr, commit at close, ...)
     * @param skip       (directory inode, name) of entries not to cache from a page: removed by
     *                   this client lately, or with a deferred removal pending
     */
    StatAhead(MdsClient mds, ExecutorService executor, ClientConfig config, Cache<GranaryVfs.DentryKey, Long> dentries,
              Cache<Long, Attr> attrs, LongSupplier generation, BiPredicate<Long, String> skip) {
        this.mds = mds;
        this.executor = executor;
        this.config = config;
        this.dentries = dentries;
        this.attrs = attrs;
        this.generation = generation;
        this.skip = skip;
        this.dirs = Caffeine.newBuilder().executor(Runnable::run).expireAfterAccess(config.cacheTimeout().multipliedBy(4).plusSeconds(1))
                .maximumSize(10_000).build();
    }

    /** Receives a complete listing a fetch read at one ctime of the directory ({@link DirListings}). */
    interface ListingSink {
        void listed(long dir, long ctimeNs, List<GranaryVfs.Entry> entries, int pages);
    }

    /** Where complete listings go; null: nowhere. */
    private volatile ListingSink listed;

    /** Sends the complete listings fetches read at one ctime of their directory to {@code sink}. */
    void onCompleteListing(ListingSink sink) {
        this.listed = sink;
    }

    /** Receives each page a fetch cached: the attributes of its entries, in name order ({@link DataAhead}). */
    interface PageSink {
        void page(Caller c, long dir, List<Attr> entries);
    }

    /** Where cached pages go; null: nowhere. */
    private volatile PageSink pageSink;

    /** Sends every page a fetch cached to {@code sink}. */
    void onPage(PageSink sink) {
        this.pageSink = sink;
    }

    private boolean enabled() {
        return config.stataheadMax() > 0 && !config.cacheTimeout().isZero();
    }

    /**
     * Before a lookup of {@code name} in {@code dirIno} asks the MDS: while a fetch of that
     * directory is in flight, waits (at most 2 s in all) until it has cached the page that holds
     * {@code name} (or ended), so the caller can find its entry in the cache instead.
     *
     * @param name the name looked up, encoded as the MDS orders names ({@link Names#encode})
     */
    void awaitFetch(long dirIno, byte[] name) {
        if (!enabled()) {
            return;
        }
        Dir d = dirs.getIfPresent(dirIno);
        if (d == null) {
            return;
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(AWAIT_MS);
        synchronized (d) {
            while (d.inFlight && (d.fetchedThrough == null || Arrays.compareUnsigned(d.fetchedThrough, name) < 0)) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return; // ask the MDS ourselves
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(d, left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }
    }

    /**
     * A lookup of {@code name} in directory {@code dirIno} asked the MDS and found an entry: on the
     * second such miss (of another name) within the cache timeout, starts a fetch of the directory (unless one runs, or one ended
     * less than half a cache timeout ago: then the miss is a new entry, not an expired cache).
     */
    void missed(Caller c, long dirIno, String name) {
        if (!enabled()) {
            return;
        }
        long now = System.nanoTime();
        long window = config.cacheTimeout().toNanos();
        Dir d = dirs.get(dirIno, k -> new Dir());
        synchronized (d) {
            if (d.inFlight || (d.fetchedOnce && now - d.fetchedAtNs < window / 2)) {
                return;
            }
            if (now - d.windowStartNs > window) {
                d.windowStartNs = now;
                d.misses = 0;
            }
            if (name.equals(d.lastName)) {
                return; // the same name again (a directory on a path, its attributes dropped): no scan
            }
            d.lastName = name;
            if (++d.misses < 2) {
                return;
            }
            d.misses = 0;
            d.inFlight = true;
            d.fetchedThrough = null;
            try {
                executor.execute(() -> {
                    try {
                        fetch(c, dirIno, d);
                    } catch (RuntimeException e) {
                        // EACCES (no read permission), the directory removed, the MDS away: lookups go one by one
                        LOG.debug("statahead of directory {} stopped: {}", dirIno, e.toString());
                    } finally {
                        synchronized (d) {
                            d.inFlight = false;
                            d.fetchedAtNs = System.nanoTime();
                            d.fetchedOnce = true;
                            d.notifyAll();
                        }
                    }
                });
            } catch (java.util.concurrent.RejectedExecutionException e) {
                d.inFlight = false;
            }
        }
    }

    /**
     * Fetches up to stataheadMax entries of the directory with attributes into the caches, and
     * after each page wakes the lookups waiting for names up to its last one.
     */
    private void fetch(Caller c, long dirIno, Dir d) {
        byte[] after = new byte[0];
        int got = 0;
        int max = config.stataheadMax();
        fetches.incrementAndGet();
        List<GranaryVfs.Entry> listing = listed != null ? new ArrayList<>() : null; // the whole directory, if it all comes at one ctime
        long ctime = Long.MIN_VALUE;
        int pages = 0;
        while (got < max) {
            long gen = generation.getAsLong();
            ReadDirPage p = mds.readdirPlus(c, dirIno, after, Math.min(config.readdirPageSize(), max - got));
            pages++;
            if (listing != null) {
                if (p.dir() == null || (pages > 1 && p.dir().getCtimeNs() != ctime)) {
                    listing = null;
                } else {
                    ctime = p.dir().getCtimeNs();
                    for (DirEntry e : p.entries()) {
                        if (!e.hasAttr()) {
                            listing = null;
                            break;
                        }
                        listing.add(GranaryVfs.Entry.of(e));
                    }
                }
            }
            List<GranaryVfs.DentryKey> put = new ArrayList<>();
            List<Long> putAttrs = new ArrayList<>();
            if (generation.getAsLong() == gen) {
                for (DirEntry e : p.entries()) {
                    if (!e.hasAttr()) {
                        continue;
                    }
                    String name = Names.decode(e.getName().toByteArray());
                    if (skip.test(dirIno, name)) {
                        continue;
                    }
                    GranaryVfs.DentryKey key = new GranaryVfs.DentryKey(dirIno, name);
                    // An entry already cached with the same content is put again, which restarts
                    // its cache timeout: files this client made within the last timeout (their
                    // entries cached at create) would otherwise expire one by one during the scan
                    // and each cost an MDS lookup (a stat loop right after 5,000 fast creates ran
                    // at 4,800/s against 14,000 when the creates were slower than the timeout).
                    if (fromPage(dentries, key, e.getIno(), gen)) {
                        put.add(key);
                    }
                    if (fromPage(attrs, e.getIno(), e.getAttr(), gen)) {
                        putAttrs.add(e.getIno());
                    }
                }
                if (generation.getAsLong() != gen) { // a change of ours raced with the inserts: drop them
                    dentries.invalidateAll(put);
                    attrs.invalidateAll(putAttrs);
                } else {
                    // A removal here that does not move the generation (an unlink leaving no
                    // other name) marks its name before it drops the dentry, so a name marked
                    // between the skip test and the insert above is found now: without this the
                    // removed name came back from a page read before the unlink (CI: a stat of
                    // an unlinked name succeeded).
                    for (GranaryVfs.DentryKey key : put) {
                        if (skip.test(dirIno, key.name())) {
                            dentries.invalidate(key);
                        }
                    }
                    fetchedEntries.addAndGet(put.size());
                    PageSink sink = pageSink;
                    if (sink != null) {
                        List<Attr> cached = new ArrayList<>(p.entries().size());
                        for (DirEntry e : p.entries()) {
                            if (e.hasAttr()) {
                                cached.add(e.getAttr());
                            }
                        }
                        sink.page(c, dirIno, cached);
                    }
                }
            }
            got += p.entries().size();
            if (!p.more() || p.entries().isEmpty()) {
                if (listing != null) {
                    listed.listed(dirIno, ctime, listing, pages);
                }
                break;
            }
            after = p.entries().get(p.entries().size() - 1).getName().toByteArray();
            synchronized (d) {
                d.fetchedThrough = after;
                d.notifyAll();
            }
        }
    }

    /**
     * Caches {@code fresh}, read from a page when the generation was {@code gen}, under {@code key}:
     * when nothing is cached and this client has changed nothing since, or in place of an equal
     * cached value (restarting its timeout). Each is one atomic step on the key, so a change of
     * this client that lands meanwhile (it moves the generation before it writes or drops the
     * key) is never overwritten by the page's older value. Regression (CI, 2026-12-06): a file's
     * other names (thousands in one page, one inode) were each read and then put in two steps;
     * a {@code link(2)}'s new nlink written between the two was replaced by the page's, and a
     * stat of the old name right after the link showed the old nlink until the page ended.
     *
     * @return whether the value was written
     */
    private <K, V> boolean fromPage(Cache<K, V> cache, K key, V fresh, long gen) {
        boolean[] inserted = {false};
        V cur = cache.asMap().computeIfAbsent(key, k -> {
            if (generation.getAsLong() != gen) {
                return null; // a change of ours since the page was read: nothing is cached
            }
            inserted[0] = true;
            return fresh;
        });
        if (inserted[0]) {
            return true;
        }
        return cur != null && cur.equals(fresh) && cache.asMap().replace(key, cur, fresh);
    }

    /** Directory fetches started so far (for tests and diagnostics). */
    long fetches() {
        return fetches.get();
    }

    /** Entries those fetches put into the caches. */
    long fetchedEntries() {
        return fetchedEntries.get();
    }
}
