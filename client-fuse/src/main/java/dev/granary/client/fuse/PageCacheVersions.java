package dev.granary.client.fuse;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Which version of a file each kernel inode's page cache holds, so that an open keeps the pages
 * ({@code FOPEN_KEEP_CACHE}) only when they are the version the open read from the MDS and no
 * other open is still dropping older ones (close-to-open, as NFS's revalidation at open).
 *
 * <p>An open without keep_cache makes Linux drop the inode's pages before open(2) returns
 * ({@code fuse_finish_open}), in the opener's process, after the reply. So a version counts as
 * held only once a later request on the handle of an open of it that dropped the pages (a read,
 * write, flush, fstat or release) shows that its open(2) returned; until then, other opens of
 * the same version go without keep_cache too and each drops the pages itself. An open while
 * this client holds uncommitted writes to the file keeps no pages either ({@link #unsaved}).
 * libfuse2's {@code auto_cache}, used before, kept the pages
 * for a second open as soon as the first had noticed the new mtime, and the second open's read
 * could run before the first opener's drop: it returned the bytes from before another client's
 * close, with the new mtime (1-7 stale opens in 250-2,000 with readers looping on the same mount).
 *
 * <p>A version is the MDS ctime (ns) of the extent map the open's handle holds: every change of
 * the file's bytes moves it ({@code Namespace.ctimeAfter}); a metadata-only change (chmod) moves
 * it too and costs one needless re-read. Keys are (kernel node id, Granary inode), so a node id
 * the kernel reuses for another file starts unknown. Bounded: a forgotten entry only costs one
 * more drop. Thread-safe.
 */
final class PageCacheVersions {
    private record Key(long node, long ino) {}

    /** What a node's pages hold: {@code version}; {@code settled}: an open's drop of older pages is known done. */
    private record Held(long version, boolean settled) {}

    private final Cache<Key, Held> held = Caffeine.newBuilder().executor(Runnable::run).maximumSize(200_000).build();

    /** Settled versions by inode alone, whatever the node (hard links aside, one node per inode). */
    private final Cache<Long, Long> settledByIno = Caffeine.newBuilder().executor(Runnable::run).maximumSize(200_000).build();

    /** An open that went without keep_cache: the node it drops the pages of, and the version it holds. */
    private record Drop(Key key, long version) {}

    /** Handles whose open is dropping a node's pages, until a request on them shows it done. */
    private final ConcurrentHashMap<Long, Drop> dropping = new ConcurrentHashMap<>();

    /**
     * For the open of inode {@code ino} through kernel node {@code node} that made handle
     * {@code fh}, holding the file at {@code version}: true when the open may keep the node's
     * pages; false when it must go without keep_cache, so that the kernel drops them.
     */
    boolean keep(long node, long ino, long version, long fh) {
        Key k = new Key(node, ino);
        boolean[] keep = {false};
        held.asMap().compute(k, (key, h) -> {
            if (h != null && h.version() == version) {
                keep[0] = h.settled(); // else another open of this version is still dropping older pages
                return h;
            }
            settledByIno.invalidate(ino);
            return new Held(version, false);
        });
        if (!keep[0]) {
            dropping.put(fh, new Drop(k, version));
        }
        return keep[0];
    }

    /**
     * The version of inode {@code ino} that node {@code node}'s pages hold, when an open of it
     * is known to have returned ({@code settled}, see {@link #keep}): an open that finds the file
     * at this version at the MDS keeps them, and needs no map of its own until the kernel asks for
     * a page it does not hold. {@code GranaryVfs.NO_PAGES} when unknown or not settled.
     */
    long settled(long node, long ino) {
        Held h = held.getIfPresent(new Key(node, ino));
        return h != null && h.settled() ? h.version() : dev.granary.client.vfs.GranaryVfs.NO_PAGES;
    }

    /** {@link #settled(long, long)} through whichever node holds inode {@code ino}'s pages. */
    long settledAnyNode(long ino) {
        Long v = settledByIno.getIfPresent(ino);
        return v != null ? v : dev.granary.client.vfs.GranaryVfs.NO_PAGES;
    }

    /**
     * For an open of inode {@code ino} through node {@code node} while this client holds writes
     * to the file it has not committed (through any name): the open goes without keep_cache, and
     * the next open drops the pages again, since they may have been filled with those bytes,
     * which the version (the MDS's) does not count.
     */
    void unsaved(long node, long ino) {
        held.invalidate(new Key(node, ino));
        settledByIno.invalidate(ino);
    }

    /**
     * A request on handle {@code fh} other than its OPEN arrived: its open(2) has returned, so
     * the drop that open made the kernel do is done, and the version it holds is held from now on
     * if it is still the one recorded: any open of that version that dropped the pages will do,
     * so one descriptor that stays idle does not make every later open drop them.
     */
    void opened(long fh) {
        if (dropping.isEmpty()) {
            return;
        }
        Drop d = dropping.remove(fh);
        if (d != null) {
            held.asMap().computeIfPresent(d.key(), (key, h) -> {
                if (h.version() == d.version() && !h.settled()) {
                    settledByIno.put(key.ino(), h.version());
                    return new Held(h.version(), true);
                }
                return h;
            });
        }
    }
}
