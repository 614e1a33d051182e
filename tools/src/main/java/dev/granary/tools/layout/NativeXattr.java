package dev.granary.tools.layout;

import dev.granary.mds.Errno;
import jnr.ffi.LibraryLoader;
import jnr.ffi.Runtime;
import jnr.ffi.types.size_t;
import jnr.ffi.types.ssize_t;

/**
 * The getxattr(2)/setxattr(2) system calls on a path, through libc (jnr-ffi): the CLI reads and
 * writes a Granary mount's virtual layout xattr with them, as Lustre's {@code lfs} uses
 * {@code lustre.lov}. Java's own xattr view only reaches the "user." namespace.
 */
public final class NativeXattr {
    /** libc's xattr calls; -1 and errno on failure. */
    public interface LibC {
        int setxattr(String path, String name, byte[] value, @size_t long size, int flags);

        @ssize_t long getxattr(String path, String name, byte[] value, @size_t long size);
    }

    /** A failed call: the errno and its name (ENOENT, ENODATA, ...). */
    public static final class XattrException extends Exception {
        private final int errno;

        XattrException(String call, int errno) {
            super(call + ": " + Errno.name(errno));
            this.errno = errno;
        }

        /** The errno of the failed call. */
        public int errno() {
            return errno;
        }
    }

    private static final LibC LIBC = LibraryLoader.create(LibC.class).load("c");

    private NativeXattr() {}

    /** getxattr(path, name): the value, up to 64 KiB. @throws XattrException with the call's errno */
    public static byte[] get(String path, String name) throws XattrException {
        byte[] buf = new byte[65536];
        long n = LIBC.getxattr(path, name, buf, buf.length);
        if (n < 0) {
            throw new XattrException("getxattr", Runtime.getRuntime(LIBC).getLastError());
        }
        return java.util.Arrays.copyOf(buf, (int) n);
    }

    /** setxattr(path, name, value, 0). @throws XattrException with the call's errno */
    public static void set(String path, String name, byte[] value) throws XattrException {
        if (LIBC.setxattr(path, name, value, value.length, 0) != 0) {
            throw new XattrException("setxattr", Runtime.getRuntime(LIBC).getLastError());
        }
    }
}
