package dev.granary.client.fuse;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import dev.granary.mds.proto.Attr;
import java.time.Duration;
import java.util.Objects;

/**
 * The attributes this mount gave the kernel per inode (the replies of getattr and fgetattr, through
 * which every LOOKUP, GETATTR, CREATE, MKNOD, MKDIR, SYMLINK, LINK and SETATTR reply of libfuse2's
 * high-level API gets its attributes), so that an open can tell whether the kernel already holds
 * the fresh attributes that open fetched from the MDS. When it does, making the kernel forget them
 * ({@code notify_inval_inode}) would only cost the next {@code fstat} or read a GETATTR round
 * trip that returns the same values.
 *
 * <p>Conservative: the kernel keeps a reply's attributes for at most {@code attr_timeout} after
 * it arrives, so an inode is known to hold only {@code A} when every reply of the last
 * {@code 2 x attr_timeout + 1 s} carried {@code A} (the margin covers the time between the record
 * and the kernel taking the reply). Replies with other attributes within that time, which may
 * reach the kernel in either order, or a write by this client ({@link #forget}: the kernel
 * changes the size of a file written through it itself), make the inode unknown until that time
 * has passed. An unknown inode is invalidated at open, as before this class.
 */
final class KernelAttrs {
    /**
     * One inode's last reply; from when (System.nanoTime) no other attributes can be in the
     * kernel; until when a reply that let the kernel cache them (one name, not a directory:
     * {@link PooledFuseFS#limitAttributeCaching}) can still be there.
     */
    private record Seen(Attr attr, long soleAfterNanos, long cachedUntilNanos) {}

    private final Cache<Long, Seen> seen;
    private final long windowNanos;

    /** @param attrTimeout the mount's {@code attr_timeout} (= {@code entry_timeout}) */
    KernelAttrs(Duration attrTimeout) {
        Objects.requireNonNull(attrTimeout, "attrTimeout");
        Duration window = attrTimeout.multipliedBy(2).plusSeconds(1);
        this.windowNanos = window.toNanos();
        this.seen = Caffeine.newBuilder().executor(Runnable::run).expireAfterWrite(window).maximumSize(1_000_000).build();
    }

    /** Notes that a reply carrying {@code a} goes to the kernel now. */
    void replied(Attr a) {
        long now = System.nanoTime();
        long cachedUntil = cacheable(a) ? now + windowNanos : now; // now: already past
        seen.asMap().merge(a.getIno(), new Seen(a, now, cachedUntil), (old, mine) -> new Seen(a,
                a.equals(old.attr()) ? old.soleAfterNanos() : now + windowNanos,
                cacheable(a) ? cachedUntil : old.cachedUntilNanos()));
    }

    /** Whether the kernel may keep a reply carrying {@code a} (see {@link PooledFuseFS#limitAttributeCaching}). */
    private static boolean cacheable(Attr a) {
        return a.getNlink() <= 1 || (a.getMode() & 0170000) == 0040000;
    }

    /** Forgets inode {@code ino} (this client writes it): for a while, opens make the kernel forget its attributes. */
    void forget(long ino) {
        long now = System.nanoTime();
        seen.asMap().merge(ino, new Seen(null, now + windowNanos, now + windowNanos),
                (old, mine) -> new Seen(null, now + windowNanos, old.cachedUntilNanos()));
    }

    /**
     * Whether the kernel may still hold attributes of inode {@code ino} from a reply of this mount
     * (one that let it cache them, within the last {@code 2 x attr_timeout + 1 s}); false lets a
     * call that changed the file skip telling the kernel to forget them.
     */
    boolean mayHold(long ino) {
        Seen s = seen.getIfPresent(ino);
        return s != null && s.cachedUntilNanos() - System.nanoTime() > 0;
    }

    /**
     * The size (bytes) in the last attributes of inode {@code ino} this mount gave the kernel, or
     * -1 when there is none on record (none within the last {@code 2 x attr_timeout + 1 s}, or a
     * write by this client since).
     */
    long lastSize(long ino) {
        Seen s = seen.getIfPresent(ino);
        return s == null || s.attr() == null ? -1 : s.attr().getSize();
    }

    /** Whether the kernel can hold no attributes of {@code fresh}'s inode from this mount but {@code fresh}. */
    boolean holds(Attr fresh) {
        Seen s = seen.getIfPresent(fresh.getIno());
        return s != null && fresh.equals(s.attr()) && System.nanoTime() - s.soleAfterNanos() >= 0;
    }
}
