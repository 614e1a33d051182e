package dev.granary.client.fuse.kernel;

/**
 * The Linux FUSE kernel protocol as this binding speaks it: opcodes, the offsets of the fields it
 * reads and writes, and INIT flags, from {@code include/uapi/linux/fuse.h}. Granary answers INIT
 * with minor version {@link #MINOR} at most, so the kernel sends and expects the structures of
 * that version (all little-endian on x86_64, the only ABI this binding supports).
 */
public final class FuseKernel {
    private FuseKernel() {}

    /** The protocol's major version; the kernel refuses another one. */
    public static final int MAJOR = 7;
    /** The highest minor version this binding answers INIT with (Linux 5.x's 7.31). */
    public static final int MINOR = 31;

    /** Opcodes ({@code enum fuse_opcode}). */
    public static final int LOOKUP = 1, FORGET = 2, GETATTR = 3, SETATTR = 4, READLINK = 5, SYMLINK = 6,
            MKNOD = 8, MKDIR = 9, UNLINK = 10, RMDIR = 11, RENAME = 12, LINK = 13, OPEN = 14, READ = 15,
            WRITE = 16, STATFS = 17, RELEASE = 18, FSYNC = 20, SETXATTR = 21, GETXATTR = 22,
            LISTXATTR = 23, REMOVEXATTR = 24, FLUSH = 25, INIT = 26, OPENDIR = 27, READDIR = 28,
            RELEASEDIR = 29, FSYNCDIR = 30, GETLK = 31, SETLK = 32, SETLKW = 33, ACCESS = 34,
            CREATE = 35, INTERRUPT = 36, BMAP = 37, DESTROY = 38, IOCTL = 39, POLL = 40,
            BATCH_FORGET = 42, FALLOCATE = 43, READDIRPLUS = 44, RENAME2 = 45, LSEEK = 46,
            COPY_FILE_RANGE = 47;

    /** {@code struct fuse_in_header} (40 bytes): len, opcode, unique, nodeid, uid, gid, pid. */
    public static final int IN_LEN = 0, IN_OPCODE = 4, IN_UNIQUE = 8, IN_NODEID = 16, IN_UID = 24,
            IN_GID = 28, IN_PID = 32, IN_HEADER_BYTES = 40;
    /** {@code struct fuse_out_header} (16 bytes): len, error (0 or -errno), unique. */
    public static final int OUT_LEN = 0, OUT_ERROR = 4, OUT_UNIQUE = 8, OUT_HEADER_BYTES = 16;

    /** {@code struct fuse_init_in}, after the in header: major, minor, max_readahead, flags. */
    public static final int INIT_IN_MAJOR = 0, INIT_IN_MINOR = 4, INIT_IN_MAX_READAHEAD = 8, INIT_IN_FLAGS = 12;

    /** {@code struct fuse_read_in}, after the in header: fh, offset, size (also READDIR's). */
    public static final int READ_IN_FH = 0, READ_IN_OFFSET = 8, READ_IN_SIZE = 16;
    /** {@code struct fuse_open_in}: flags. */
    public static final int OPEN_IN_FLAGS = 0;
    /** {@code struct fuse_release_in}: fh, flags. */
    public static final int RELEASE_IN_FH = 0;
    /** {@code struct fuse_getattr_in}: getattr_flags, dummy, fh. */
    public static final int GETATTR_IN_FLAGS = 0, GETATTR_IN_FH = 8, FUSE_GETATTR_FH = 1;
    /** {@code struct fuse_forget_in}: nlookup. {@code fuse_batch_forget_in}: count, then {nodeid, nlookup} pairs. */
    public static final int FORGET_IN_NLOOKUP = 0, BATCH_FORGET_IN_COUNT = 0, BATCH_FORGET_FIRST = 8, FORGET_ONE_BYTES = 16;

    /** Size of {@code struct fuse_attr} (7.9 and later). */
    public static final int ATTR_BYTES = 88;
    /** {@code struct fuse_entry_out}: nodeid, generation, entry_valid, attr_valid, their nsecs, then the attr. */
    public static final int ENTRY_OUT_BYTES = 40 + ATTR_BYTES;
    /** {@code struct fuse_attr_out}: attr_valid, attr_valid_nsec, dummy, then the attr. */
    public static final int ATTR_OUT_BYTES = 16 + ATTR_BYTES;
    /** {@code struct fuse_open_out}: fh, open_flags, padding. */
    public static final int OPEN_OUT_BYTES = 16;
    /** {@code struct fuse_kstatfs} inside {@code fuse_statfs_out}. */
    public static final int STATFS_OUT_BYTES = 80;
    /** {@code struct fuse_dirent}: ino, off, namelen, type, then the name padded to 8 bytes. */
    public static final int DIRENT_HEADER_BYTES = 24;

    /**
     * {@code fuse_open_out.open_flags}. {@code FOPEN_NOFLUSH} (Linux 5.16+; older kernels ignore
     * it): close(2) of the file sends no FLUSH.
     */
    public static final int FOPEN_DIRECT_IO = 1, FOPEN_KEEP_CACHE = 1 << 1, FOPEN_NOFLUSH = 1 << 5;

    /** INIT flags ({@code fuse_init_in.flags}, {@code fuse_init_out.flags}). */
    public static final int ASYNC_READ = 1, POSIX_LOCKS = 1 << 1, ATOMIC_O_TRUNC = 1 << 3, BIG_WRITES = 1 << 5,
            DONT_MASK = 1 << 6, FLOCK_LOCKS = 1 << 10, AUTO_INVAL_DATA = 1 << 12, DO_READDIRPLUS = 1 << 13,
            PARALLEL_DIROPS = 1 << 18, MAX_PAGES = 1 << 22, INIT_EXT = 1 << 30;
    /** {@code fuse_init_in.flags2} (after flags, with INIT_EXT) and {@code fuse_init_out.flags2}'s offset. */
    public static final int INIT_IN_FLAGS2 = 16, INIT_OUT_FLAGS2 = 32;
    /** flags2: shared mappings of FOPEN_DIRECT_IO files (bit 36 of the 64 flags; Linux 6.6+). */
    public static final int DIRECT_IO_ALLOW_MMAP2 = 1 << 4;

    /** Linux errno values (asm-generic/errno-base.h, errno.h) this binding uses. */
    public static final int EPERM = 1, ENOENT = 2, EINTR = 4, EIO = 5, EBADF = 9, EAGAIN = 11, ENOMEM = 12, EBUSY = 16,
            EACCES = 13, ENODEV = 19, ENOTDIR = 20, EISDIR = 21, EINVAL = 22, ENOSYS = 38, EPROTO = 71;

    /** {@code d_type} values of a dirent (dirent.h). */
    public static final int DT_DIR = 4, DT_REG = 8, DT_LNK = 10;

    /** Whether the kernel expects no reply to {@code opcode} (FORGET, BATCH_FORGET, INTERRUPT's is optional). */
    public static boolean noReply(int opcode) {
        return opcode == FORGET || opcode == BATCH_FORGET || opcode == INTERRUPT;
    }
}
