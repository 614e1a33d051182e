package dev.granary.mds.namespace;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.mds.MdsTestBase;
import dev.granary.mds.client.MdsClient.LockReply;
import dev.granary.mds.proto.LockInfo;
import dev.granary.mds.proto.LockKind;
import dev.granary.mds.proto.LockType;
import dev.granary.mds.proto.Status;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Advisory locks held in the MDS: POSIX ranges, flock, sessions and their leases. */
class LocksTest extends MdsTestBase {
    static final long A = 0xA, B = 0xB, C = 0xC; // session ids (one per client)
    static final long LEASE = 5_000_000_000L;
    long ino;

    @BeforeEach
    void file() {
        ino = mds.create(ROOT, R, b("f"), 0644, true).getIno();
    }

    static LockInfo posix(long session, LockType t, long start, long end) {
        return LockInfo.newBuilder().setKind(LockKind.POSIX).setType(t).setSession(session).setOwner(1)
                .setStart(start).setEnd(end).setPid((int) session).build();
    }

    static LockInfo flock(long session, LockType t) {
        return LockInfo.newBuilder().setKind(LockKind.FLOCK).setType(t).setSession(session).setOwner(7).build();
    }

    LockReply take(LockInfo l) {
        return mds.lock(ROOT, ino, l, false, LEASE);
    }

    LockInfo test(LockInfo l) {
        return mds.lock(ROOT, ino, l, true, LEASE).conflict();
    }

    @Test
    void posixRangesConflictSplitAndRelease() {
        assertTrue(take(posix(A, LockType.WRITE, 0, 100)).granted());
        LockReply refused = take(posix(B, LockType.READ, 50, 60));
        assertFalse(refused.granted());
        assertEquals(A, refused.conflict().getSession());
        assertEquals(100, refused.conflict().getEnd());
        assertTrue(take(posix(B, LockType.WRITE, 100, 200)).granted(), "adjacent ranges do not overlap");
        assertEquals(A, test(posix(B, LockType.READ, 0, 10)).getSession(), "F_GETLK reports the holder");
        assertNull(test(posix(A, LockType.WRITE, 0, 100)), "own locks never conflict");

        assertTrue(take(posix(A, LockType.UNLOCK, 20, 30)).granted()); // splits A's lock
        assertTrue(take(posix(B, LockType.READ, 20, 30)).granted());
        assertFalse(take(posix(B, LockType.READ, 19, 21)).granted(), "A still holds [0, 20)");
        assertFalse(take(posix(B, LockType.READ, 29, 31)).granted(), "and [30, 100)");
        assertTrue(take(posix(A, LockType.UNLOCK, 0, 0)).granted(), "end 0 = to the end of the file");
        assertTrue(take(posix(B, LockType.WRITE, 0, 100)).granted());
        assertTrue(take(posix(C, LockType.READ, 200, 0)).granted(), "an unbounded lock past B's ranges");
        assertFalse(take(posix(A, LockType.WRITE, 150, 151)).granted(), "B's [100, 200)");
        assertFalse(take(posix(A, LockType.WRITE, 1_000_000, 1_000_001)).granted(), "C's unbounded read lock");
        assertTrue(take(posix(A, LockType.READ, 1_000_000, 0)).granted(), "reads share");

        assertErrno(Status.EINVAL, () -> take(posix(A, LockType.READ, 10, 10)));
        assertErrno(Status.EINVAL, () -> take(posix(A, LockType.READ, 10, 5)));
        assertErrno(Status.ENOENT, () -> mds.lock(ROOT, 999, posix(A, LockType.READ, 0, 1), false, LEASE));
    }

    @Test
    void flockSharedExclusiveAndIndependentOfPosixLocks() {
        assertTrue(take(flock(A, LockType.READ)).granted());
        assertTrue(take(flock(B, LockType.READ)).granted());
        assertFalse(take(flock(C, LockType.WRITE)).granted());
        assertTrue(take(posix(C, LockType.WRITE, 0, 0)).granted(), "POSIX locks and flocks never conflict (Linux)");
        assertFalse(take(flock(A, LockType.WRITE)).granted(), "upgrade waits for B");
        assertTrue(take(flock(B, LockType.UNLOCK)).granted());
        assertTrue(take(flock(A, LockType.WRITE)).granted(), "upgrade once alone");
        assertFalse(take(flock(B, LockType.READ)).granted());
        assertErrno(Status.EINVAL, () -> take(flock(A, LockType.READ).toBuilder().setEnd(5).build()));
    }

    @Test
    void locksOfADeadClientStopCountingWhenItsLeaseRunsOut() {
        assertTrue(take(posix(A, LockType.WRITE, 0, 0)).granted());
        assertTrue(take(flock(A, LockType.WRITE)).granted());
        assertFalse(take(posix(B, LockType.READ, 0, 1)).granted());
        clock.addAndGet(LEASE / 2);
        assertTrue(mds.renewSession(ROOT, A, LEASE) == false, "renewed in time");
        clock.addAndGet(LEASE / 2 + 1000);
        assertFalse(take(posix(B, LockType.READ, 0, 1)).granted(), "the renewal kept A's locks");
        clock.addAndGet(LEASE + 1); // A stops renewing: it died
        assertTrue(take(posix(B, LockType.READ, 0, 1)).granted());
        assertTrue(take(flock(B, LockType.WRITE)).granted());
        LockReply late = take(posix(A, LockType.READ, 5, 6));
        assertTrue(late.leaseExpired(), "A learns its lease had run out");
        assertTrue(late.granted(), "its old locks are gone; a read lock shares with B");
    }

    @Test
    void endingASessionReleasesItsLocksAtOnce() {
        assertTrue(take(flock(A, LockType.WRITE)).granted());
        assertFalse(take(flock(B, LockType.WRITE)).granted());
        mds.renewSession(ROOT, A, 0); // clean unmount
        assertTrue(take(flock(B, LockType.WRITE)).granted());
    }
}
