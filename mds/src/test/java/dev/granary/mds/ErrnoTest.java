package dev.granary.mds;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.granary.mds.proto.Status;
import org.junit.jupiter.api.Test;

/** The errno table matches Linux asm-generic numbers. */
class ErrnoTest {
    @Test
    void linuxNumbers() {
        assertEquals(0, Errno.of(Status.OK));
        assertEquals(1, Errno.of(Status.EPERM));
        assertEquals(2, Errno.of(Status.ENOENT));
        assertEquals(7, Errno.of(Status.E2BIG));
        assertEquals(13, Errno.of(Status.EACCES));
        assertEquals(39, Errno.of(Status.ENOTEMPTY));
        assertEquals(61, Errno.of(Status.ENODATA));
        assertEquals(95, Errno.of(Status.ENOTSUP));
        assertEquals("ENAMETOOLONG", Errno.name(36));
        assertEquals("EINTR", Errno.name(4));
        assertEquals("errno 3", Errno.name(3)); // ESRCH: not an MDS status
        assertEquals(Status.EXDEV, Errno.status(18));
        assertEquals(Status.EIO, Errno.status(3));
        assertEquals(22, new FsException(Status.EINVAL, "x").errno());
    }
}
