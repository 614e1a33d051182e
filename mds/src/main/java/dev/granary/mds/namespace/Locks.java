package dev.granary.mds.namespace;

import dev.granary.mds.proto.LockInfo;
import dev.granary.mds.proto.LockKind;
import dev.granary.mds.proto.LockType;
import java.util.ArrayList;
import java.util.List;

/**
 * Advisory lock rules over one inode's lock table (pure functions, no storage).
 *
 * <p>POSIX record locks (fcntl(2), POSIX.1-2017 "Advisory record locking"): a lock covers
 * {@code [start, end)} ({@code end} 0 = to the end of any file); two locks conflict when they
 * belong to different owners, overlap, and one of them is a write lock; an owner's new lock or
 * unlock replaces its own locks in that range, splitting them where they stick out. BSD locks
 * (flock(2)) cover the whole file; an owner's new flock replaces its old one. As on Linux, POSIX
 * locks and flocks never conflict with each other.
 */
final class Locks {
    private Locks() {}

    /** The exclusive end of a lock as a number ({@code end} 0 means unbounded). */
    static long end(LockInfo l) {
        return l.getKind() == LockKind.FLOCK || l.getEnd() == 0 ? Long.MAX_VALUE : l.getEnd();
    }

    private static long start(LockInfo l) {
        return l.getKind() == LockKind.FLOCK ? 0 : l.getStart();
    }

    private static boolean sameOwner(LockInfo a, LockInfo b) {
        return a.getSession() == b.getSession() && a.getOwner() == b.getOwner();
    }

    private static boolean overlap(LockInfo a, LockInfo b) {
        return start(a) < end(b) && start(b) < end(a);
    }

    /** True when {@code held} stops {@code want} (a READ or WRITE request) from being granted. */
    static boolean conflicts(LockInfo held, LockInfo want) {
        return held.getKind() == want.getKind() && !sameOwner(held, want)
                && (held.getType() == LockType.WRITE || want.getType() == LockType.WRITE) && overlap(held, want);
    }

    /** The first lock of {@code held} that conflicts with {@code want}, or null. */
    static LockInfo firstConflict(List<LockInfo> held, LockInfo want) {
        for (LockInfo h : held) {
            if (conflicts(h, want)) {
                return h;
            }
        }
        return null;
    }

    /**
     * The table after {@code req} (READ, WRITE or UNLOCK) by its owner, conflicts already ruled
     * out: the owner's locks of the same kind inside the range are removed (POSIX: the parts
     * outside the range stay), then the new lock is added unless it is an unlock.
     */
    static List<LockInfo> apply(List<LockInfo> held, LockInfo req) {
        List<LockInfo> out = new ArrayList<>();
        long rs = start(req);
        long re = end(req);
        for (LockInfo h : held) {
            if (h.getKind() != req.getKind() || !sameOwner(h, req)) {
                out.add(h);
                continue;
            }
            if (h.getKind() == LockKind.FLOCK || !overlap(h, req)) {
                if (h.getKind() == LockKind.POSIX) {
                    out.add(h);
                }
                continue;
            }
            if (start(h) < rs) {
                out.add(h.toBuilder().setEnd(rs).build()); // the part before the range
            }
            if (re != Long.MAX_VALUE && end(h) > re) {
                out.add(h.toBuilder().setStart(re).build()); // the part after it (keeps h's end)
            }
        }
        if (req.getType() != LockType.UNLOCK) {
            out.add(req);
        }
        return out;
    }
}
