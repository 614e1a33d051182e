package dev.granary.client.vfs;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.client.ReadDirPage;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.DirEntry;
import dev.granary.mds.proto.MdsRequest;
import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Complete name sets of the directories this client holds the lease of ({@link DirLeases}), so
 * that the kernel's LOOKUP of a new name before each create there is answered here (ENOENT)
 * instead of by an MDS read: under the lease no other client can make a name in the directory,
 * so a name that was absent from a listing read after the grant, and that this client has not
 * touched since, is still absent. CephFS answers such negative lookups from a directory whose
 * complete contents its client holds a capability for ({@code I_COMPLETE}); this is that rule for
 * the directories whose leases Granary takes.
 *
 * <p>What keeps an answer right:
 * <ul>
 *   <li>The listing is read after the grant and belongs to that grant only
 *       ({@link #absent} is given the lease's grant time): a listing left from an earlier lease
 *       of the same directory is never used.</li>
 *   <li>Every write this client sends is seen before it goes out ({@link MdsClient.WriteObserver}):
 *       each name it creates, removes, links or renames in the directory is marked touched and
 *       never answered absent here (the MDS, the deferred creates and the deferred unlinks answer
 *       it as before); a change of the directory's own attributes, or a write of a kind this
 *       class does not know, ends the use of the listing.</li>
 *   <li>A write to the directory still in flight when the listing is registered (sent before, so
 *       not marked) may reach the MDS after the read: then no listing is made this time
 *       ({@link #build} answers "try again").</li>
 *   <li>A directory of more than {@link #LISTED_MAX} names (one listing page), one the caller may
 *       not list, or one with more than {@link #MAX_TOUCHED} touched names gets no (more) answers;
 *       a directory found too large is not listed again for {@link #TOO_LARGE_NS}, so leases
 *       taken again and again on a huge directory do not each read a page of it.</li>
 * </ul>
 * Thread-safe.
 */
final class LeasedListings implements MdsClient.WriteObserver {
    private static final Logger LOG = LoggerFactory.getLogger(LeasedListings.class);
    /** Names listed at most (one page): a larger directory is looked up at the MDS. */
    static final int LISTED_MAX = 8_192;
    /** Names touched at most per listing, after which it is no longer used. */
    static final int MAX_TOUCHED = 65_536;
    /** How long a directory found too large is not listed again, ns. */
    static final long TOO_LARGE_NS = 60_000_000_000L;

    /** The listing of one leased directory, made for one grant. */
    private static final class Listing {
        /** The grant it belongs to ({@link DirLeases}: when the grant arrived, System.nanoTime). */
        final long lease;
        /** Names this client sent a change of since the listing was registered: never answered absent. */
        final Set<String> touched = ConcurrentHashMap.newKeySet();
        /** The names the MDS listed after the grant; null until read. */
        volatile Set<String> names;
        /** The directory's attributes from the same read (its layout, owner and mode). */
        volatile Attr dir;
        /** Set when it may no longer be used. */
        volatile boolean broken;

        Listing(long lease) {
            this.lease = lease;
        }

        void breakIt() {
            broken = true;
            names = Set.of();
            touched.clear();
        }
    }

    /** Writes in flight per directory (the directories they change entries or attributes of). */
    private final ConcurrentHashMap<Long, Integer> inFlight = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Long, Listing> listings = new ConcurrentHashMap<>();
    /** Directories found larger than {@link #LISTED_MAX} lately. */
    private final Cache<Long, Boolean> tooLarge = Caffeine.newBuilder().executor(Runnable::run)
            .expireAfterWrite(Duration.ofNanos(TOO_LARGE_NS)).maximumSize(10_000).build();
    private final AtomicLong built = new AtomicLong();
    private final AtomicLong answered = new AtomicLong();

    @Override
    public void sending(MdsRequest r) {
        visit(r, 1);
    }

    @Override
    public void sent(MdsRequest r) {
        visit(r, -1);
    }

    /** Counts {@code r}'s directories in flight ({@code delta} +1 before sending, -1 after) and, before, marks what it touches. */
    private void visit(MdsRequest r, int delta) {
        switch (r.getOpCase()) {
            case CREATE -> entry(delta, r.getCreate().getParent(), r.getCreate().getName().toByteArray());
            case MKDIR -> entry(delta, r.getMkdir().getParent(), r.getMkdir().getName().toByteArray());
            case SYMLINK -> entry(delta, r.getSymlink().getParent(), r.getSymlink().getName().toByteArray());
            case UNLINK -> entry(delta, r.getUnlink().getParent(), r.getUnlink().getName().toByteArray());
            case RMDIR -> entry(delta, r.getRmdir().getParent(), r.getRmdir().getName().toByteArray());
            case LINK -> entry(delta, r.getLink().getNewParent(), r.getLink().getNewName().toByteArray());
            case RENAME -> {
                entry(delta, r.getRename().getSrcParent(), r.getRename().getSrcName().toByteArray());
                entry(delta, r.getRename().getDstParent(), r.getRename().getDstName().toByteArray());
            }
            case SETATTR -> attributes(delta, r.getSetattr().getIno());
            case SETXATTR -> attributes(delta, r.getSetxattr().getIno());
            case REMOVEXATTR -> attributes(delta, r.getRemovexattr().getIno());
            case SETLAYOUT -> attributes(delta, r.getSetlayout().getIno());
            case BATCH_WRITE -> r.getBatchWrite().getRequestsList().forEach(b -> visit(b, delta));
            case COMMIT_PACK -> r.getCommitPack().getCommitsList().forEach(b -> visit(b, delta));
            // writes that change no directory entry and no directory's attributes
            case COMMIT_EXTENTS, LOCK, RENEW_SESSION, ALLOC_INODES, GC_DONE, DIR_LEASE, REGISTER_OST, REGISTER_OSS -> { }
            // reads never come here; a write kind added later is taken to change anything
            default -> {
                if (delta > 0) {
                    listings.values().forEach(Listing::breakIt);
                }
            }
        }
    }

    private void count(long dir, int delta) {
        inFlight.compute(dir, (k, n) -> {
            int v = (n == null ? 0 : n) + delta;
            return v == 0 ? null : v;
        });
    }

    /** A write that changes entry {@code name} of directory {@code dir}: counted first, then marked (see {@link #build}). */
    private void entry(int delta, long dir, byte[] name) {
        count(dir, delta);
        if (delta > 0) {
            Listing l = listings.get(dir);
            if (l != null && !l.broken) {
                l.touched.add(Names.decode(name));
                if (l.touched.size() > MAX_TOUCHED) {
                    l.breakIt();
                }
            }
        }
    }

    /** A write that changes inode {@code ino}'s attributes: a listed directory's template is no longer known. */
    private void attributes(int delta, long ino) {
        count(ino, delta);
        if (delta > 0) {
            Listing l = listings.get(ino);
            if (l != null) {
                l.breakIt();
            }
        }
    }

    /**
     * Reads the listing of directory {@code dir} for the lease granted at {@code lease}
     * (System.nanoTime, as {@link DirLeases} keeps it), as {@code c} (the lease's caller), in one
     * page of at most {@link #LISTED_MAX} names. Returns false when it should be tried again
     * shortly: a write of this client to the directory was in flight (it may land after the read
     * without having been marked). A larger directory, and errors (EACCES: no read permission;
     * the MDS unreachable), leave the directory without a listing.
     */
    boolean build(MdsClient mds, Caller c, long dir, long lease) {
        if (tooLarge.getIfPresent(dir) != null) {
            return true;
        }
        Listing l = new Listing(lease);
        listings.put(dir, l);
        // after the put: a write sent from now on finds the listing and marks its name; one sent
        // before is still counted here (each write counts before it looks for the listing)
        if (inFlight.containsKey(dir)) {
            listings.remove(dir, l);
            return false;
        }
        try {
            ReadDirPage p = mds.readdir(c, dir, new byte[0], LISTED_MAX);
            if (p.more() || p.dir() == null) {
                l.breakIt();
                if (p.more()) {
                    tooLarge.put(dir, Boolean.TRUE);
                }
                return true;
            }
            Set<String> names = new HashSet<>();
            for (DirEntry e : p.entries()) {
                names.add(Names.decode(e.getName().toByteArray()));
            }
            l.dir = p.dir();
            l.names = names;
            built.incrementAndGet();
        } catch (RuntimeException e) {
            l.breakIt();
            LOG.debug("no listing of leased directory inode {}: {}", dir, e.getMessage());
        }
        return true;
    }

    /**
     * True when {@code name} is absent from directory {@code dir} as of now, by the listing made
     * for the lease granted at {@code lease}: not listed, not touched by this client since, and
     * {@code cachedDir} (the directory's attributes the caller would create with) has the
     * layout, owner, mode and xattr count the listing's read gave. The caller holds the lease
     * ({@link DirLeases#withLease}) while it asks.
     */
    boolean absent(long dir, long lease, String name, Attr cachedDir) {
        Listing l = listings.get(dir);
        if (l == null || l.lease != lease || l.broken) {
            return false;
        }
        Set<String> names = l.names;
        Attr d = l.dir;
        if (names == null || d == null || names.contains(name) || l.touched.contains(name)
                || d.getMode() != cachedDir.getMode() || d.getUid() != cachedDir.getUid() || d.getGid() != cachedDir.getGid()
                || d.getXattrCount() != cachedDir.getXattrCount() || !d.getLayout().equals(cachedDir.getLayout())) {
            return false;
        }
        answered.incrementAndGet();
        return true;
    }

    /** Forgets directory {@code dir}'s listing when its lease (granted at {@code lease}) ends. */
    void ended(long dir, long lease) {
        listings.computeIfPresent(dir, (k, l) -> l.lease == lease ? null : l);
    }

    /** Listings made, and lookups answered absent from them, so far (tests, diagnostics). */
    long[] counters() {
        return new long[] {built.get(), answered.get()};
    }
}
