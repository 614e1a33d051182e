package dev.granary.client.vfs;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;

/**
 * Complete listings of large directories this client read, each with the directory's ctime at
 * the MDS when it was read, so that listing the directory again costs one small MDS read (the
 * first entry and the directory's attributes) instead of every page, while no entry changed.
 *
 * <p>Why it is exact, not a cache with a timeout: the MDS moves a directory's ctime (ns, strictly
 * increasing) in the same Raft entry as every change of its entries (create, mkdir, symlink,
 * link, unlink, rmdir, rename in and out), and answers each listing page with the directory's
 * attributes from the same snapshot. A listing whose pages all carried ctime C is the directory
 * at C; a later read that finds ctime C again finds no entry changed since. (A chmod of the
 * directory moves it too, and only costs a full listing.)
 *
 * <p>Kept only for listings of more than one page (a one-page listing costs the same one read
 * anyway), bounded by entries in total, dropped after {@link #IDLE} unused. Thread-safe.
 */
final class DirListings {
    /** Entries all kept listings hold together at most. */
    static final long MAX_ENTRIES = 262_144;
    /** A listing not used for this long is dropped. */
    static final Duration IDLE = Duration.ofMinutes(10);

    /** Directory {@code ino}'s entries (without "." and ".."), in name byte order, as of the directory's {@code ctimeNs}. */
    record Listing(long ctimeNs, List<GranaryVfs.Entry> entries) {}

    private final Cache<Long, Listing> listings = Caffeine.newBuilder().executor(Runnable::run)
            .maximumWeight(MAX_ENTRIES).weigher((Long ino, Listing l) -> Math.max(1, l.entries().size()))
            .expireAfterAccess(IDLE).build();
    private final LongAdder hits = new LongAdder();

    /** The listing kept for directory {@code ino}, whatever its version; null when none. */
    Listing peek(long ino) {
        return listings.getIfPresent(ino);
    }

    /**
     * A complete listing of directory {@code ino}, all of whose {@code pages} pages carried ctime
     * {@code ctimeNs}: kept (immutable from here on) when it took more than one page; otherwise
     * any copy kept before goes.
     */
    void put(long ino, long ctimeNs, List<GranaryVfs.Entry> entries, int pages) {
        if (pages > 1) {
            listings.put(ino, new Listing(ctimeNs, List.copyOf(entries)));
        } else {
            listings.invalidate(ino);
        }
    }

    /** Forgets directory {@code ino}'s listing. */
    void forget(long ino) {
        listings.invalidate(ino);
    }

    /** Counts a listing answered from a kept one. */
    void hit() {
        hits.increment();
    }

    /** Listings answered from kept ones so far. */
    long hits() {
        return hits.sum();
    }
}
