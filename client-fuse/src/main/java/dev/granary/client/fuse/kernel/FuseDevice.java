package dev.granary.client.fuse.kernel;

import dev.granary.client.fuse.FuseMount.MountException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import jnr.ffi.LibraryLoader;
import jnr.ffi.Pointer;
import jnr.ffi.Runtime;
import jnr.ffi.annotations.IgnoreError;
import jnr.ffi.annotations.SaveError;
import jnr.ffi.types.size_t;
import jnr.ffi.types.ssize_t;

/**
 * One FUSE connection on {@code /dev/fuse}, mounted without libfuse: the device is opened, the
 * filesystem mounted with {@code mount(2)} ({@code fd=N,rootmode=...} as the kernel's fuse
 * filesystem takes them, Documentation/filesystems/fuse.rst), and requests are read and replies
 * written with plain {@code read(2)}/{@code writev(2)} calls (jnr-ffi downcalls, no callbacks into
 * the JVM). Several threads may read at once: the kernel gives each request to one reader.
 * {@code mount(2)} needs CAP_SYS_ADMIN (root); without it the jnr-fuse binding, which mounts
 * through fusermount, is the one to use.
 */
public final class FuseDevice implements AutoCloseable {
    /** The C library calls this binding makes. */
    public interface LibC {
        @SaveError
        int open(String path, int flags);

        @SaveError
        @ssize_t long read(int fd, Pointer buf, @size_t long count);

        @SaveError
        @ssize_t long writev(int fd, Pointer iov, int iovcnt);

        @SaveError
        int mount(String source, String target, String fstype, long flags, String data);

        @IgnoreError
        int umount2(String target, int flags);

        @IgnoreError
        int close(int fd);

        @IgnoreError
        String strerror(int errnum);

        @IgnoreError
        int getuid();

        @IgnoreError
        int getgid();
    }

    private static final int O_RDWR = 2, O_CLOEXEC = 02000000;
    private static final long MS_NOSUID = 2, MS_NODEV = 4;
    private static final int MNT_DETACH = 2;

    private static volatile LibC libc;
    private static volatile Runtime runtime;

    private final int fd;
    private final Path mountPoint;
    private final AtomicBoolean unmounted = new AtomicBoolean();

    private FuseDevice(int fd, Path mountPoint) {
        this.fd = fd;
        this.mountPoint = mountPoint;
    }

    /** The C library, loaded once. */
    static LibC libc() {
        LibC l = libc;
        if (l == null) {
            synchronized (FuseDevice.class) {
                if (libc == null) {
                    LibC loaded = LibraryLoader.create(LibC.class).load("c");
                    runtime = Runtime.getRuntime(loaded);
                    libc = loaded;
                }
                l = libc;
            }
        }
        return l;
    }

    /** The jnr runtime of {@link #libc()} (for wrapping direct buffers as pointers). */
    static Runtime runtime() {
        libc();
        return runtime;
    }

    /**
     * Opens {@code /dev/fuse} and mounts it at {@code mountPoint} as filesystem type
     * {@code fuse.SUBTYPE} with source {@code fsname}, with {@code MS_NOSUID|MS_NODEV}.
     *
     * @param kernelOptions the fuse filesystem's own mount options besides fd, rootmode, user_id
     *                      and group_id, e.g. {@code allow_other}, {@code default_permissions},
     *                      {@code max_read=1048576}
     * @throws MountException when the device cannot be opened or {@code mount(2)} fails (EPERM
     *                        without root), with the errno's text
     */
    public static FuseDevice mount(Path mountPoint, String fsname, String subtype, List<String> kernelOptions) {
        LibC c = libc();
        int fd = c.open("/dev/fuse", O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            int e = runtime.getLastError();
            throw new MountException("cannot open /dev/fuse: " + c.strerror(e) + " (errno " + e + ")");
        }
        StringBuilder data = new StringBuilder("fd=").append(fd).append(",rootmode=40000,user_id=")
                .append(c.getuid()).append(",group_id=").append(c.getgid());
        for (String o : kernelOptions) {
            data.append(',').append(o);
        }
        String target = mountPoint.toAbsolutePath().normalize().toString();
        if (c.mount(fsname, target, "fuse." + subtype, MS_NOSUID | MS_NODEV, data.toString()) != 0) {
            int e = runtime.getLastError();
            c.close(fd);
            String why = e == FuseKernel.EPERM ? ": the /dev/fuse binding mounts with mount(2), which needs root (CAP_SYS_ADMIN)" : "";
            throw new MountException("mount of " + target + " failed: " + c.strerror(e) + " (errno " + e + ")" + why);
        }
        return new FuseDevice(fd, mountPoint);
    }

    /** The /dev/fuse file descriptor (for code that writes raw replies or notifications). */
    public int fd() {
        return fd;
    }

    /** FUSE_NOTIFY_INVAL_INODE's code and {@code struct fuse_notify_inval_inode_out} (ino, off, len) (linux/fuse.h). */
    private static final int NOTIFY_INVAL_INODE = 2, INVAL_INODE_OUT_BYTES = 24;
    private static final ThreadLocal<ByteBuffer> NOTIFY = ThreadLocal.withInitial(
            () -> ByteBuffer.allocateDirect(64).order(java.nio.ByteOrder.LITTLE_ENDIAN));

    /**
     * Makes the kernel drop what it cached of node {@code node}: its attributes, and its pages
     * from {@code offset} for {@code length} bytes (0: to the end) when {@code offset} is not
     * negative (FUSE_NOTIFY_INVAL_INODE, linux/fuse.h).
     *
     * @return 0, or -errno (ENOENT: the kernel holds no such node)
     */
    public int notifyInvalInode(long node, long offset, long length) {
        ByteBuffer b = NOTIFY.get();
        int total = FuseKernel.OUT_HEADER_BYTES + INVAL_INODE_OUT_BYTES;
        b.putInt(0, total).putInt(4, NOTIFY_INVAL_INODE).putLong(8, 0)
                .putLong(16, node).putLong(24, offset).putLong(32, length);
        long address = pointer(b).address();
        b.putLong(40, address).putLong(48, total); // one iovec after the message
        long n = writev(pointer(b).slice(40, 16), 1);
        return n < 0 ? (int) n : 0;
    }

    /** Where this connection is mounted. */
    public Path mountPoint() {
        return mountPoint;
    }

    /**
     * Reads one request into {@code in} (a direct buffer of at least max_write + 64 KiB, from
     * position 0); blocks until one arrives.
     *
     * @return its length in bytes, or -errno: ENOENT (the request was interrupted before it was
     *         read), EINTR and EAGAIN (try again), ENODEV (the filesystem was unmounted)
     */
    long read(Pointer in, long capacity) {
        long n = libc.read(fd, in, capacity);
        return n >= 0 ? n : -runtime.getLastError();
    }

    /**
     * Writes one reply or notification whose parts are the {@code count} iovecs at {@code iov}
     * (one {@code writev(2)}: the kernel takes a reply only whole).
     *
     * @return bytes written, or -errno (ENOENT: the request was interrupted and the kernel no
     *         longer waits for it; EINVAL: a malformed reply)
     */
    long writev(Pointer iov, int count) {
        long n = libc.writev(fd, iov, count);
        return n >= 0 ? n : -runtime.getLastError();
    }

    /** Wraps the direct buffer {@code b} as a pointer to its first byte. */
    static Pointer pointer(ByteBuffer b) {
        return Pointer.wrap(runtime(), b);
    }

    /**
     * Unmounts lazily ({@code umount2(MNT_DETACH)}): the mount point is free at once and the
     * kernel ends the connection, so readers get ENODEV, once no one uses the filesystem. Once.
     */
    public void unmount() {
        if (unmounted.compareAndSet(false, true)) {
            libc.umount2(mountPoint.toAbsolutePath().normalize().toString(), MNT_DETACH);
        }
    }

    /** Closes the device (after {@link #unmount} and once no thread reads it). */
    @Override
    public void close() {
        libc.close(fd);
    }
}
