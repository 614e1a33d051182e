package dev.granary.mds;

import dev.granary.mds.proto.Status;

/**
 * The one errno table: {@link Status} values are numbered with the Linux errno numbers, so the
 * mapping is the identity on numbers. Source: Linux {@code include/uapi/asm-generic/errno-base.h}
 * (1..34) and {@code include/uapi/asm-generic/errno.h} (35 and up; x86-64/arm64 use these).
 */
public final class Errno {
    private Errno() {}

    /**
     * The positive Linux errno of {@code s} (0 for OK); {@link Status#LEASED}, the MDS's internal
     * answer that its client retries, as EAGAIN should one ever reach a caller.
     */
    public static int of(Status s) {
        if (s == Status.UNRECOGNIZED) {
            throw new IllegalArgumentException("unrecognized status has no errno");
        }
        return s == Status.LEASED ? Status.EAGAIN.getNumber() : s.getNumber();
    }

    /** The Status of Linux errno {@code errno}, or {@link Status#EIO} when the MDS protocol has no such status. */
    public static Status status(int errno) {
        Status s = Status.forNumber(errno);
        return s == null ? Status.EIO : s;
    }

    /** The symbolic name of Linux errno {@code errno} ("ENOENT"), "OK" for 0, or "errno N" when unknown here. */
    public static String name(int errno) {
        Status s = Status.forNumber(errno);
        return s == null ? "errno " + errno : s.name();
    }
}
