package dev.granary.client.fuse.kernel;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import jnr.ffi.Pointer;
import jnr.ffi.Runtime;
import ru.serce.jnrfuse.FuseFS;
import ru.serce.jnrfuse.FuseFillDir;
import ru.serce.jnrfuse.struct.FileStat;
import ru.serce.jnrfuse.struct.Flock;
import ru.serce.jnrfuse.struct.FuseFileInfo;
import ru.serce.jnrfuse.struct.Statvfs;
import ru.serce.jnrfuse.struct.Timespec;

/**
 * Serves a path-based filesystem (jnr-fuse's {@link FuseFS}, as libfuse2's path API calls it) on
 * the node-id protocol of a {@link FuseSession}, doing in Java what libfuse2's fuse.c does
 * between the kernel and such a filesystem: node ids to paths ({@link PathNodes}), a LOOKUP as
 * a getattr of the path, a directory's entries collected by readdir with offset 0 and handed out
 * page by page, and the file system's structs ({@code struct stat}, {@code struct
 * fuse_file_info}) in native memory of each serving thread. With {@code use_ino} semantics: the
 * attributes' inode numbers are the file system's. Every request libfuse2's path API serves is
 * served ({@link #other} for those beyond the read-only ones); IOCTL, POLL, BMAP, RENAME2, LSEEK,
 * COPY_FILE_RANGE and READDIRPLUS answer ENOSYS, as libfuse2 does.
 */
public final class PathFsAdapter implements LowLevelFs {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(PathFsAdapter.class);
    /** x86_64 {@code struct stat}: size and field offsets. */
    private static final int STAT_BYTES = 144, ST_INO = 8, ST_NLINK = 16, ST_MODE = 24, ST_UID = 28, ST_GID = 32,
            ST_RDEV = 40, ST_SIZE = 48, ST_BLKSIZE = 56, ST_BLOCKS = 64, ST_ATIM = 72, ST_MTIM = 88, ST_CTIM = 104;
    /** libfuse 2.9's {@code struct fuse_file_info} (LP64): flags, fh_old, writepage, bit fields, fh, lock_owner. */
    private static final int FI_BYTES = 40, FI_FLAGS = 0, FI_BITS = 20, FI_FH = 24;
    private static final int FI_DIRECT_IO = 1, FI_KEEP_CACHE = 1 << 1, FI_NONSEEKABLE = 1 << 3;
    /** A padding bit of libfuse2's struct that a file system sets for FOPEN_NOFLUSH ({@code GranaryFuse.NOFLUSH_BIT}). */
    static final int FI_NOFLUSH = 1 << 5;
    private static final int FOPEN_NONSEEKABLE = 1 << 2;
    /** {@code struct statvfs} (x86_64): bsize, frsize, blocks, bfree, bavail, files, ffree, favail, fsid, flag, namemax. */
    private static final int STATVFS_BYTES = 112, SV_BSIZE = 0, SV_FRSIZE = 8, SV_BLOCKS = 16, SV_BFREE = 24, SV_BAVAIL = 32,
            SV_FILES = 40, SV_FFREE = 48, SV_NAMEMAX = 80;

    private final FuseFS fs;
    private final PathNodes nodes = new PathNodes();
    private final long entryValidNs;
    private final long attrValidNs;
    private final Runtime rt = Runtime.getSystemRuntime();

    /** One serving thread's native structs and READ buffer. */
    private final class Scratch {
        final ByteBuffer statBytes = ByteBuffer.allocateDirect(STAT_BYTES).order(ByteOrder.LITTLE_ENDIAN);
        final Pointer statPtr = Pointer.wrap(rt, statBytes);
        final FileStat stat = FileStat.of(statPtr);
        final ByteBuffer fiBytes = ByteBuffer.allocateDirect(FI_BYTES).order(ByteOrder.LITTLE_ENDIAN);
        final FuseFileInfo fi = FuseFileInfo.of(Pointer.wrap(rt, fiBytes));
        final ByteBuffer svBytes = ByteBuffer.allocateDirect(STATVFS_BYTES).order(ByteOrder.LITTLE_ENDIAN);
        final Statvfs statvfs = Statvfs.of(Pointer.wrap(rt, svBytes));
        final ByteBuffer readBytes;
        final Pointer readPtr;
        final ByteBuffer timesBytes = ByteBuffer.allocateDirect(32).order(ByteOrder.LITTLE_ENDIAN);
        final Timespec[] times = {Timespec.of(Pointer.wrap(rt, timesBytes).slice(0, 16)), Timespec.of(Pointer.wrap(rt, timesBytes).slice(16, 16))};
        final ByteBuffer flockBytes = ByteBuffer.allocateDirect(32).order(ByteOrder.LITTLE_ENDIAN);
        final Flock flock = Flock.of(Pointer.wrap(rt, flockBytes));

        /** A serving thread's: with a 1 MiB buffer for READ. */
        Scratch() {
            this(true);
        }

        Scratch(boolean read) {
            readBytes = read ? ByteBuffer.allocateDirect(1 << 20) : null;
            readPtr = read ? Pointer.wrap(rt, readBytes) : null;
        }

        FileStat clearStat() {
            for (int i = 0; i < STAT_BYTES; i += 8) {
                statBytes.putLong(i, 0);
            }
            return stat;
        }

        FuseFileInfo fi(int flags, long fh) {
            for (int i = 0; i < FI_BYTES; i += 8) {
                fiBytes.putLong(i, 0);
            }
            fiBytes.putInt(FI_FLAGS, flags).putLong(FI_FH, fh);
            return fi;
        }
    }

    private final ThreadLocal<Scratch> scratch = ThreadLocal.withInitial(Scratch::new);

    /** A directory handle: the file system's handle and the entries its readdir gave at offset 0. */
    private record DirHandle(long fh, List<Dirent> entries) {}

    private record Dirent(String name, long ino, int type) {}

    private final ConcurrentHashMap<Long, DirHandle> dirs = new ConcurrentHashMap<>();
    private final AtomicLong nextDir = new AtomicLong(1);

    /**
     * @param entryValidNs how long the kernel may keep a name's entry (libfuse2's entry_timeout), ns
     * @param attrValidNs  how long it may keep attributes (attr_timeout), ns
     */
    public PathFsAdapter(FuseFS fs, long entryValidNs, long attrValidNs) {
        this(fs, entryValidNs, attrValidNs, LIBFUSE2_FLAGS | FuseKernel.PARALLEL_DIROPS, 0);
    }

    /**
     * The INIT flags libfuse2 asks for on a file system with every operation (jnr-fuse's), plus
     * 1 MiB requests: no ATOMIC_O_TRUNC, so an O_TRUNC open comes as OPEN then SETATTR.
     */
    public static final int LIBFUSE2_FLAGS = FuseKernel.ASYNC_READ | FuseKernel.BIG_WRITES | FuseKernel.MAX_PAGES
            | FuseKernel.POSIX_LOCKS | FuseKernel.FLOCK_LOCKS;

    /**
     * @param wantFlags  the INIT flags to ask for when offered
     * @param wantFlags2 the second word's ({@link FuseKernel#DIRECT_IO_ALLOW_MMAP2} ...)
     */
    public PathFsAdapter(FuseFS fs, long entryValidNs, long attrValidNs, int wantFlags, int wantFlags2) {
        this.fs = fs;
        this.entryValidNs = entryValidNs;
        this.attrValidNs = attrValidNs;
        this.wantFlags = wantFlags;
        this.wantFlags2 = wantFlags2;
    }

    private final int wantFlags;
    private final int wantFlags2;
    private volatile int agreedFlags2;

    @Override
    public int initFlags(int kernelFlags) {
        return kernelFlags & wantFlags;
    }

    @Override
    public int initFlags2(int kernelFlags2) {
        agreedFlags2 = kernelFlags2 & wantFlags2;
        return agreedFlags2;
    }

    /** The second word of INIT flags the kernel was asked for and offered (0 before INIT). */
    public int agreedFlags2() {
        return agreedFlags2;
    }

    /** Appends the attributes in the thread's {@code struct stat} as {@code struct fuse_attr}. */
    private static void attrFromStat(ByteBuffer st, FuseReply reply) {
        reply.attr(st.getLong(ST_INO), st.getLong(ST_SIZE), st.getLong(ST_BLOCKS),
                st.getLong(ST_ATIM) * 1_000_000_000L + st.getLong(ST_ATIM + 8),
                st.getLong(ST_MTIM) * 1_000_000_000L + st.getLong(ST_MTIM + 8),
                st.getLong(ST_CTIM) * 1_000_000_000L + st.getLong(ST_CTIM + 8),
                st.getInt(ST_MODE), (int) st.getLong(ST_NLINK), st.getInt(ST_UID), st.getInt(ST_GID),
                (int) st.getLong(ST_RDEV), (int) st.getLong(ST_BLKSIZE));
    }

    @Override
    public int lookup(FuseRequest req, long parent, String name, FuseReply reply) {
        String path = nodes.childPath(parent, name);
        if (path == null) {
            return -FuseKernel.ENOENT;
        }
        return entry(parent, name, path, scratch.get(), reply);
    }

    /**
     * The entry of {@code name} in {@code parent} (path {@code path}) from a getattr of its path,
     * counted as one more kernel reference to its node (fuse.c's {@code lookup_path}); ENOENT
     * when the parent node went meanwhile.
     */
    private int entry(long parent, String name, String path, Scratch s, FuseReply reply) {
        int r = fs.getattr(path, s.clearStat());
        if (r != 0) {
            return r;
        }
        long node;
        try {
            node = nodes.lookup(parent, name);
        } catch (IllegalArgumentException e) {
            return -FuseKernel.ENOENT;
        }
        reply.entry(node, 0, entryValidNs, attrValidNs);
        attrFromStat(s.statBytes, reply);
        return 0;
    }

    @Override
    public void forget(long nodeid, long nlookup) {
        nodes.forget(nodeid, nlookup);
    }

    @Override
    public int getattr(FuseRequest req, long nodeid, long fh, FuseReply reply) {
        String path = nodes.path(nodeid);
        if (path == null) {
            return -FuseKernel.ENOENT;
        }
        return attrReply(path, fh, scratch.get(), reply);
    }

    /** The attributes of {@code path} (through handle {@code fh} when not negative) as {@code struct fuse_attr_out}. */
    private int attrReply(String path, long fh, Scratch s, FuseReply reply) {
        int r = fh >= 0 ? fs.fgetattr(path, s.clearStat(), s.fi(0, fh)) : fs.getattr(path, s.clearStat());
        if (r != 0) {
            return r;
        }
        reply.attrOut(attrValidNs);
        attrFromStat(s.statBytes, reply);
        return 0;
    }

    /**
     * Locks that order an OPEN of a node against an UNLINK or RENAME that removes or replaces its
     * name (striped by node id): the removal decides whether the node is open (then it is renamed
     * to a hidden name instead, {@link #hide}) and an open in flight must count in that decision,
     * as libfuse2's tree locks on the paths an operation uses make it (fuse.c, {@code get_path}
     * and {@code wait_path}). Without them an open that resolved the name before a rename and
     * counted itself after it held a file without a path: its fstat answered ESTALE.
     */
    private final java.util.concurrent.locks.ReentrantReadWriteLock[] nodeLocks = new java.util.concurrent.locks.ReentrantReadWriteLock[64];

    {
        for (int i = 0; i < nodeLocks.length; i++) {
            nodeLocks[i] = new java.util.concurrent.locks.ReentrantReadWriteLock();
        }
    }

    private int stripe(long node) {
        return (int) Math.floorMod(node * 0x9E3779B97F4A7C15L >>> 32, (long) nodeLocks.length);
    }

    private java.util.concurrent.locks.ReentrantReadWriteLock nodeLock(long node) {
        return nodeLocks[stripe(node)];
    }

    @Override
    public int open(FuseRequest req, long nodeid, int flags, FuseReply reply) {
        java.util.concurrent.locks.Lock lock = nodeLock(nodeid).readLock();
        lock.lock();
        try {
            String path = nodes.path(nodeid);
            if (path == null) {
                return -FuseKernel.ENOENT;
            }
            Scratch s = scratch.get();
            int r = fs.open(path, s.fi(flags, 0));
            if (r != 0) {
                return r;
            }
            nodes.opened(nodeid);
            reply.open(s.fiBytes.getLong(FI_FH), openFlags(s.fiBytes.getInt(FI_BITS)));
            return 0;
        } finally {
            lock.unlock();
        }
    }

    /** Runs {@code body} holding the write locks of the nodes {@code a} and {@code b} (-1: none), in stripe order. */
    private int removing(long a, long b, java.util.function.IntSupplier body) {
        int sa = a < 0 ? -1 : stripe(a);
        int sb = b < 0 ? -1 : stripe(b);
        if (sa == sb) {
            sb = -1;
        }
        java.util.concurrent.locks.Lock la = Math.min(sa, sb) >= 0 ? nodeLocks[Math.min(sa, sb)].writeLock() : null;
        java.util.concurrent.locks.Lock lb = Math.max(sa, sb) >= 0 ? nodeLocks[Math.max(sa, sb)].writeLock() : null;
        if (la != null) {
            la.lock();
        }
        if (lb != null) {
            lb.lock();
        }
        try {
            return body.getAsInt();
        } finally {
            if (lb != null) {
                lb.unlock();
            }
            if (la != null) {
                la.unlock();
            }
        }
    }

    @Override
    public int read(FuseRequest req, long nodeid, long fh, long offset, int size, FuseReply reply) {
        String path = pathOrEmpty(nodeid); // an unlinked open file has none: reads go by handle
        Scratch s = scratch.get();
        FuseFileInfo fi = s.fi(req.argInt(32), fh); // struct fuse_read_in { fh, offset, size, read_flags, lock_owner, flags }
        int max = Math.min(size, s.readBytes.capacity());
        int n = fs instanceof ByteBufferReads direct ? direct.read(path, s.readBytes, max, offset, fi)
                : fs.read(path, s.readPtr, max, offset, fi);
        if (n < 0) {
            return n;
        }
        if (n > 0) {
            reply.appendNative(s.readPtr.address(), n);
        }
        return 0;
    }

    @Override
    public int flush(FuseRequest req, long nodeid, long fh, FuseReply reply) {
        Scratch s = scratch.get();
        FuseFileInfo fi = s.fi(0, fh);
        s.fiBytes.putLong(FI_LOCK_OWNER, req.argLong(16)); // struct fuse_flush_in { fh, unused, padding, lock_owner }
        s.fiBytes.putInt(FI_BITS, FI_FLUSH);
        return flushCommon(pathOrEmpty(nodeid), fi, s);
    }

    /**
     * A flush as fuse.c's {@code fuse_flush_common}: the file system's flush, then the POSIX
     * locks of the closing owner released ({@code lock(F_SETLK)} of F_UNLCK over the whole file:
     * close(2) drops a process's record locks, POSIX), whose error is not the flush's.
     */
    private int flushCommon(String path, FuseFileInfo fi, Scratch s) {
        int r = fs.flush(path, fi);
        ByteBuffer l = s.flockBytes;
        l.putShort(0, (short) F_UNLCK).putShort(2, (short) 0).putLong(8, 0).putLong(16, 0).putInt(24, 0);
        int unlock = fs.lock(path, fi, F_SETLK, s.flock);
        return r == -FuseKernel.ENOSYS && unlock != -FuseKernel.ENOSYS ? 0 : r;
    }

    /**
     * RELEASE as fuse.c's {@code fuse_lib_release}: a flush first when the kernel asks
     * (FUSE_RELEASE_FLUSH), flock locks of the owner dropped (FUSE_RELEASE_FLOCK_UNLOCK), then the
     * release; a hidden node's last release removes its hidden name.
     */
    @Override
    public int release(FuseRequest req, long nodeid, long fh, FuseReply reply) {
        // under the node's lock, as the open that counted the handle: a rename that hides the
        // node meanwhile would otherwise mark it hidden after this last release counted it
        // closed, and its hidden name would stay for ever (fuse.c holds the path's tree lock)
        java.util.concurrent.locks.Lock lock = nodeLock(nodeid).readLock();
        lock.lock();
        try {
            Scratch s = scratch.get();
            String path = pathOrEmpty(nodeid);
            int releaseFlags = req.argInt(RELEASE_RELEASE_FLAGS);
            long owner = req.argLong(RELEASE_LOCK_OWNER);
            if ((releaseFlags & FUSE_RELEASE_FLUSH) != 0) {
                FuseFileInfo fi = s.fi(req.argInt(RELEASE_FLAGS), fh);
                s.fiBytes.putLong(FI_LOCK_OWNER, owner);
                flushCommon(path, fi, s);
            }
            FuseFileInfo fi = s.fi(req.argInt(RELEASE_FLAGS), fh);
            s.fiBytes.putLong(FI_LOCK_OWNER, owner);
            if ((releaseFlags & FUSE_RELEASE_FLOCK_UNLOCK) != 0) {
                s.fiBytes.putInt(FI_BITS, FI_FLOCK_RELEASE);
            }
            int r = fs.release(path, fi);
            String hiddenPath = nodes.released(nodeid);
            if (hiddenPath != null) {
                fs.unlink(hiddenPath);
            }
            return r;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public int opendir(FuseRequest req, long nodeid, int flags, FuseReply reply) {
        String path = nodes.path(nodeid);
        if (path == null) {
            return -FuseKernel.ENOENT;
        }
        Scratch s = scratch.get();
        int r = fs.opendir(path, s.fi(flags, 0));
        if (r != 0) {
            return r;
        }
        long dh = nextDir.getAndIncrement();
        dirs.put(dh, new DirHandle(s.fiBytes.getLong(FI_FH), new ArrayList<>()));
        reply.open(dh, 0);
        return 0;
    }

    @Override
    public int readdir(FuseRequest req, long nodeid, long fh, long offset, int size, FuseReply reply) {
        DirHandle d = dirs.get(fh);
        String path = nodes.path(nodeid);
        if (d == null || path == null) {
            return -FuseKernel.EBADF;
        }
        synchronized (d) {
            if (offset == 0) { // (re)read the whole directory, as libfuse2 does for a file system that fills with offset 0
                d.entries.clear();
                Scratch s = scratch.get();
                FuseFillDir filler = (buf, name, stbuf, off) -> {
                    byte[] b = new byte[name.remaining()];
                    name.duplicate().get(b);
                    int len = 0;
                    while (len < b.length && b[len] != 0) {
                        len++;
                    }
                    long ino = 0xffffffffL;
                    int type = 0;
                    if (stbuf != null) {
                        ino = stbuf.getLong(ST_INO);
                        type = (stbuf.getInt(ST_MODE) >>> 12) & 0xf;
                    }
                    d.entries.add(new Dirent(new String(b, 0, len, StandardCharsets.ISO_8859_1), ino, type));
                    return 0;
                };
                int r = fs.readdir(path, Pointer.wrap(rt, 0L), filler, 0, s.fi(0, d.fh));
                if (r != 0) {
                    return r;
                }
            }
            for (int i = (int) offset; i < d.entries.size(); i++) {
                Dirent e = d.entries.get(i);
                if (!reply.dirent(e.ino, i + 1, e.type, e.name, size)) {
                    break;
                }
            }
        }
        return 0;
    }

    @Override
    public int releasedir(FuseRequest req, long nodeid, long fh, FuseReply reply) {
        DirHandle d = dirs.remove(fh);
        if (d == null) {
            return 0;
        }
        return fs.releasedir(pathOrEmpty(nodeid), scratch.get().fi(0, d.fh));
    }

    /** setattr's {@code valid} bits and {@code struct fuse_setattr_in} offsets (linux/fuse.h). */
    private static final int FATTR_MODE = 1, FATTR_UID = 2, FATTR_GID = 4, FATTR_SIZE = 8, FATTR_ATIME = 16, FATTR_MTIME = 32,
            FATTR_FH = 64, FATTR_ATIME_NOW = 128, FATTR_MTIME_NOW = 256;
    private static final int SA_VALID = 0, SA_FH = 8, SA_SIZE = 16, SA_ATIME = 32, SA_MTIME = 40, SA_ATIMENSEC = 56,
            SA_MTIMENSEC = 60, SA_MODE = 68, SA_UID = 76, SA_GID = 80;
    /** utimensat(2)'s special nanosecond values (sys/stat.h). */
    private static final long UTIME_NOW = (1L << 30) - 1, UTIME_OMIT = (1L << 30) - 2;
    /** {@code struct fuse_write_in}: fh, offset, size, write_flags, lock_owner, flags; the data after its 40 bytes. */
    private static final int WRITE_IN_BYTES = 40, FUSE_WRITE_CACHE = 1, FI_WRITEPAGE = 16;
    /** {@code struct fuse_release_in}: fh, flags, release_flags, lock_owner. */
    private static final int RELEASE_FLAGS = 8, RELEASE_RELEASE_FLAGS = 12, RELEASE_LOCK_OWNER = 16, FUSE_RELEASE_FLUSH = 1,
            FUSE_RELEASE_FLOCK_UNLOCK = 2, FI_LOCK_OWNER = 32, FI_FLUSH = 1 << 2, FI_FLOCK_RELEASE = 1 << 4;
    /** {@code struct fuse_lk_in}: fh, owner, lk {start, end, type, pid}, lk_flags. */
    private static final int LK_FH = 0, LK_OWNER = 8, LK_START = 16, LK_END = 24, LK_TYPE = 32, LK_PID = 36, LK_FLAGS = 40,
            FUSE_LK_FLOCK = 1;
    private static final int F_GETLK = 5, F_SETLK = 6, F_SETLKW = 7, F_UNLCK = 2, LOCK_SH = 1, LOCK_EX = 2, LOCK_NB = 4, LOCK_UN = 8;
    private static final int ERANGE = 34;

    /** Every request besides the read-only ones above (fuse.c's {@code fuse_lib_*} for each). */
    @Override
    public int other(FuseRequest req, FuseReply reply) {
        try {
            return serveOther(req, reply);
        } catch (StaleNode e) {
            return -FuseKernel.ENOENT;
        }
    }

    private int serveOther(FuseRequest req, FuseReply reply) {
        long node = req.nodeid();
        Scratch s = scratch.get();
        switch (req.opcode()) {
            case FuseKernel.SETATTR:
                return setattr(req, node, s, reply);
            case FuseKernel.READLINK: {
                String path = nodes.path(node);
                if (path == null) {
                    return -FuseKernel.ENOENT;
                }
                int r = fs.readlink(path, s.readPtr, s.readBytes.capacity());
                if (r != 0) {
                    return r;
                }
                int n = 0;
                while (n < s.readBytes.capacity() && s.readBytes.get(n) != 0) {
                    n++;
                }
                if (n > 0) {
                    reply.appendNative(s.readPtr.address(), n);
                }
                return 0;
            }
            case FuseKernel.SYMLINK: {
                String name = req.name(0);
                String target = req.name(req.afterName(0));
                return made(node, name, fs.symlink(target, childPath(node, name)), s, reply);
            }
            case FuseKernel.MKNOD: {
                String name = req.name(16); // struct fuse_mknod_in { mode, rdev, umask, padding }
                int mode = req.argInt(0);
                String path = childPath(node, name);
                if ((mode & 0170000) == 0100000) { // a regular file: create and release, as fuse.c does
                    FuseFileInfo fi = s.fi(01 | 0100 | 0200, 0); // O_WRONLY | O_CREAT | O_EXCL
                    int r = fs.create(path, mode, fi);
                    if (r != 0) {
                        return r;
                    }
                    long fh = s.fiBytes.getLong(FI_FH);
                    r = made(node, name, 0, s, reply);
                    fs.release(path, s.fi(01, fh));
                    return r;
                }
                return made(node, name, fs.mknod(path, mode, req.argInt(4) & 0xffffffffL), s, reply);
            }
            case FuseKernel.MKDIR: {
                String name = req.name(8); // struct fuse_mkdir_in { mode, umask }
                return made(node, name, fs.mkdir(childPath(node, name), req.argInt(0)), s, reply);
            }
            case FuseKernel.UNLINK:
                return remove(node, req.name(0), false);
            case FuseKernel.RMDIR:
                return remove(node, req.name(0), true);
            case FuseKernel.RENAME: {
                long newDir = req.argLong(0); // struct fuse_rename_in { newdir }
                String oldName = req.name(8);
                String newName = req.name(req.afterName(8));
                return rename(node, oldName, newDir, newName);
            }
            case FuseKernel.LINK: {
                long old = req.argLong(0); // struct fuse_link_in { oldnodeid }
                String name = req.name(8);
                String oldPath = nodes.path(old);
                if (oldPath == null) {
                    return -FuseKernel.ENOENT;
                }
                return made(node, name, fs.link(oldPath, childPath(node, name)), s, reply);
            }
            case FuseKernel.WRITE: {
                String path = pathOrEmpty(node);
                FuseFileInfo fi = s.fi(req.argInt(32), req.argLong(0));
                s.fiBytes.putInt(FI_WRITEPAGE, req.argInt(20) & FUSE_WRITE_CACHE);
                int size = req.argInt(16);
                int n = fs.write(path, req.pointer().slice(FuseKernel.IN_HEADER_BYTES + WRITE_IN_BYTES, size), size, req.argLong(8), fi);
                if (n < 0) {
                    return n;
                }
                reply.putInt(n).putInt(0); // struct fuse_write_out { size, padding }
                return 0;
            }
            case FuseKernel.FSYNC:
                return fs.fsync(pathOrEmpty(node), req.argInt(8) & 1, s.fi(0, req.argLong(0)));
            case FuseKernel.FSYNCDIR: {
                DirHandle d = dirs.get(req.argLong(0));
                return fs.fsyncdir(pathOrEmpty(node), s.fi(0, d == null ? 0 : d.fh));
            }
            case FuseKernel.SETXATTR: {
                String path = nodes.path(node);
                if (path == null) {
                    return -FuseKernel.ENOENT;
                }
                int size = req.argInt(0); // struct fuse_setxattr_in { size, flags } (before 7.33)
                int flags = req.argInt(4);
                String name = req.name(8);
                int valueAt = req.afterName(8);
                return fs.setxattr(path, name, req.pointer().slice(FuseKernel.IN_HEADER_BYTES + valueAt, size), size, flags);
            }
            case FuseKernel.GETXATTR:
            case FuseKernel.LISTXATTR: {
                String path = nodes.path(node);
                if (path == null) {
                    return -FuseKernel.ENOENT;
                }
                int size = req.argInt(0); // struct fuse_getxattr_in { size, padding }
                boolean list = req.opcode() == FuseKernel.LISTXATTR;
                int cap = s.readBytes.capacity();
                int n = list ? fs.listxattr(path, s.readPtr, size == 0 ? 0 : Math.min(size, cap))
                        : fs.getxattr(path, req.name(8), s.readPtr, size == 0 ? 0 : Math.min(size, cap));
                if (n < 0) {
                    return n;
                }
                if (size == 0) {
                    reply.putInt(n).putInt(0); // struct fuse_getxattr_out { size, padding }
                } else if (n > size) {
                    return -ERANGE;
                } else if (n > 0) {
                    reply.appendNative(s.readPtr.address(), n); // up to 64 KiB and more: not through the reply's own buffer
                }
                return 0;
            }
            case FuseKernel.REMOVEXATTR: {
                String path = nodes.path(node);
                return path == null ? -FuseKernel.ENOENT : fs.removexattr(path, req.name(0));
            }
            case FuseKernel.ACCESS: {
                String path = nodes.path(node);
                return path == null ? -FuseKernel.ENOENT : fs.access(path, req.argInt(0));
            }
            case FuseKernel.CREATE: {
                int flags = req.argInt(0); // struct fuse_create_in { flags, mode, umask, padding }
                int mode = req.argInt(4);
                String name = req.name(16);
                String path = childPath(node, name);
                FuseFileInfo fi = s.fi(flags, 0);
                int r = fs.create(path, mode, fi);
                if (r != 0) {
                    return r;
                }
                long fh = s.fiBytes.getLong(FI_FH);
                int bits = s.fiBytes.getInt(FI_BITS);
                r = made(node, name, 0, s, reply);
                if (r != 0) {
                    fs.release(path, s.fi(flags, fh));
                    return r;
                }
                nodes.opened(nodes.find(node, name));
                reply.open(fh, openFlags(bits));
                return 0;
            }
            case FuseKernel.GETLK:
            case FuseKernel.SETLK:
            case FuseKernel.SETLKW:
                return lock(req, node, s, reply);
            case FuseKernel.FALLOCATE:
                // struct fuse_fallocate_in { fh, offset, length, mode, padding }
                return fs.fallocate(pathOrEmpty(node), req.argInt(24), req.argLong(8), req.argLong(16), s.fi(0, req.argLong(0)));
            default:
                return -FuseKernel.ENOSYS; // IOCTL, POLL, BMAP, RENAME2, LSEEK, COPY_FILE_RANGE, READDIRPLUS: as libfuse2
        }
    }

    private String childPath(long parent, String name) {
        String p = nodes.childPath(parent, name);
        if (p == null) {
            throw new StaleNode();
        }
        return p;
    }

    private String pathOrEmpty(long node) {
        String p = nodes.path(node);
        return p == null ? "" : p;
    }

    /** A request on a node the table no longer has a path for (answered ENOENT). */
    private static final class StaleNode extends RuntimeException {
        StaleNode() {
            super(null, null, false, false);
        }
    }

    private static int openFlags(int bits) {
        return ((bits & FI_DIRECT_IO) != 0 ? FuseKernel.FOPEN_DIRECT_IO : 0)
                | ((bits & FI_KEEP_CACHE) != 0 ? FuseKernel.FOPEN_KEEP_CACHE : 0)
                | ((bits & FI_NONSEEKABLE) != 0 ? FOPEN_NONSEEKABLE : 0)
                | ((bits & FI_NOFLUSH) != 0 ? FuseKernel.FOPEN_NOFLUSH : 0);
    }

    /**
     * After a call that made {@code name} in {@code parent} (its result {@code r}): the new
     * node's entry, from a getattr of its path, as fuse.c's {@code lookup_path}.
     */
    private int made(long parent, String name, int r, Scratch s, FuseReply reply) {
        return r != 0 ? r : entry(parent, name, childPath(parent, name), s, reply);
    }

    /** UNLINK or RMDIR; an open file is renamed to a hidden name instead (fuse.c's {@code hide_node}). */
    private int remove(long parent, String name, boolean dir) {
        String path = childPath(parent, name);
        return removing(nodes.find(parent, name), -1, () -> {
            if (!dir && nodes.isOpen(parent, name)) {
                return hide(parent, name, path);
            }
            int r = dir ? fs.rmdir(path) : fs.unlink(path);
            if (r == 0) {
                nodes.removed(parent, name);
            }
            return r;
        });
    }

    /** Counter of hidden names (fuse.c's {@code hidectr}). */
    private final AtomicLong hidden = new AtomicLong();

    private int hide(long parent, String name, String path) {
        long node = nodes.find(parent, name);
        Scratch s = scratch.get();
        for (int tries = 0; tries < 10; tries++) {
            String hiddenName = String.format(".fuse_hidden%08x%08x", node & 0xffffffffL, hidden.incrementAndGet() & 0xffffffffL);
            String hiddenPath = childPath(parent, hiddenName);
            if (fs.getattr(hiddenPath, s.clearStat()) != -FuseKernel.ENOENT) {
                continue; // taken
            }
            int r = fs.rename(path, hiddenPath);
            if (r == 0) {
                nodes.hidden(parent, name, hiddenName);
            }
            return r;
        }
        return -FuseKernel.EBUSY;
    }

    private int rename(long oldDir, String oldName, long newDir, String newName) {
        String oldPath = childPath(oldDir, oldName);
        String newPath = childPath(newDir, newName);
        return removing(nodes.find(oldDir, oldName), nodes.find(newDir, newName), () -> {
            if (nodes.isOpen(newDir, newName) && nodes.find(newDir, newName) != nodes.find(oldDir, oldName)) {
                int r = hide(newDir, newName, newPath);
                if (r != 0) {
                    return r;
                }
            }
            int r = fs.rename(oldPath, newPath);
            if (r == 0) {
                nodes.renamed(oldDir, oldName, newDir, newName);
            }
            return r;
        });
    }

    /** SETATTR as fuse.c's {@code fuse_lib_setattr}: chmod, chown, (f)truncate, utimens, then the attributes. */
    private int setattr(FuseRequest req, long node, Scratch s, FuseReply reply) {
        String path = nodes.path(node);
        if (path == null) {
            return -FuseKernel.ENOENT;
        }
        int valid = req.argInt(SA_VALID);
        long fh = (valid & FATTR_FH) != 0 ? req.argLong(SA_FH) : -1;
        int r = 0;
        if ((valid & FATTR_MODE) != 0) {
            r = fs.chmod(path, req.argInt(SA_MODE) & 0xffffffffL);
        }
        if (r == 0 && (valid & (FATTR_UID | FATTR_GID)) != 0) {
            long uid = (valid & FATTR_UID) != 0 ? req.argInt(SA_UID) & 0xffffffffL : -1L & 0xffffffffL;
            long gid = (valid & FATTR_GID) != 0 ? req.argInt(SA_GID) & 0xffffffffL : -1L & 0xffffffffL;
            r = fs.chown(path, uid, gid);
        }
        if (r == 0 && (valid & FATTR_SIZE) != 0) {
            r = fh >= 0 ? fs.ftruncate(path, req.argLong(SA_SIZE), s.fi(0, fh)) : fs.truncate(path, req.argLong(SA_SIZE));
        }
        if (r == 0 && (valid & (FATTR_ATIME | FATTR_MTIME)) != 0) {
            ByteBuffer t = s.timesBytes;
            t.putLong(0, req.argLong(SA_ATIME)).putLong(8, (valid & FATTR_ATIME_NOW) != 0 ? UTIME_NOW
                    : (valid & FATTR_ATIME) != 0 ? req.argInt(SA_ATIMENSEC) : UTIME_OMIT);
            t.putLong(16, req.argLong(SA_MTIME)).putLong(24, (valid & FATTR_MTIME_NOW) != 0 ? UTIME_NOW
                    : (valid & FATTR_MTIME) != 0 ? req.argInt(SA_MTIMENSEC) : UTIME_OMIT);
            r = fs.utimens(path, s.times);
        }
        return r != 0 ? r : attrReply(path, fh, s, reply);
    }

    /** A SETLKW waiting on a thread of its own: the thread once it runs, and whether INTERRUPT came. */
    private static final class LockWait {
        volatile Thread thread;
        volatile boolean interrupted;
    }

    /** SETLKW requests waiting, by the request's unique id. */
    private final ConcurrentHashMap<Long, LockWait> lockWaits = new ConcurrentHashMap<>();
    private final java.util.concurrent.ExecutorService lockWaiters = java.util.concurrent.Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "fuse-lock-wait");
        t.setDaemon(true);
        return t;
    });
    private volatile FuseSession session;
    private volatile java.util.function.Consumer<Pointer> requestContext = p -> { };

    /**
     * The session whose {@link FuseSession#replyLater} answers SETLKW requests: with it, a
     * blocking lock waits on a thread of its own, so that any number of waiters never takes all
     * the serving threads (with 32 waiters on one lock the mount stopped answering, the holder's
     * unlock included), and an INTERRUPT ends the wait with EINTR. Without it SETLKW waits on the
     * serving thread.
     *
     * @param context called on the waiting thread with a copy of the request (header and
     *                arguments) before the lock call, as the serving thread's interceptor is
     *                (the caller's credentials come from it)
     */
    public void lateReplies(FuseSession s, java.util.function.Consumer<Pointer> context) {
        requestContext = context;
        session = s;
    }

    @Override
    public void interrupt(long unique) {
        LockWait w = lockWaits.get(unique);
        if (w != null) {
            w.interrupted = true;
            Thread t = w.thread;
            if (t != null) {
                t.interrupt();
            }
        }
    }

    /** GETLK, SETLK, SETLKW: POSIX record locks, or flock(2) locks with FUSE_LK_FLOCK (fuse.c). */
    private int lock(FuseRequest req, long node, Scratch s, FuseReply reply) {
        String path = pathOrEmpty(node);
        long fh = req.argLong(LK_FH), owner = req.argLong(LK_OWNER), start = req.argLong(LK_START), end = req.argLong(LK_END);
        int type = req.argInt(LK_TYPE), pid = req.argInt(LK_PID), opcode = req.opcode();
        boolean flock = (req.argInt(LK_FLAGS) & FUSE_LK_FLOCK) != 0;
        FuseSession later = session;
        if (opcode != FuseKernel.SETLKW || later == null) {
            return lockNow(path, fh, owner, type, start, end, pid, opcode, flock, s, reply);
        }
        long unique = req.unique();
        Pointer copy = jnr.ffi.Memory.allocateDirect(rt, req.length());
        req.pointer().transferTo(0, copy, 0, req.length()); // the serving thread's buffer takes the next request
        LockWait w = new LockWait();
        lockWaits.put(unique, w);
        lockWaiters.execute(() -> {
            int r;
            try {
                w.thread = Thread.currentThread();
                if (w.interrupted) {
                    r = -FuseKernel.EINTR;
                } else {
                    requestContext.accept(copy);
                    r = lockNow(path, fh, owner, type, start, end, pid, opcode, flock, new Scratch(false), null);
                }
            } catch (RuntimeException | Error e) {
                LOG.warn("SETLKW on {} failed: {}", path, e.toString(), e);
                r = -FuseKernel.EIO;
            } finally {
                lockWaits.remove(unique);
                Thread.interrupted(); // an INTERRUPT that came after the wait ended
            }
            if (w.interrupted && r == -FuseKernel.EIO) {
                r = -FuseKernel.EINTR; // the wait was cut short by the interrupt, wherever it was
            }
            later.replyLater(unique, r > 0 ? -FuseKernel.EIO : r);
        });
        return FuseSession.LATER;
    }

    private int lockNow(String path, long fh, long owner, int type, long start, long end, int pid, int opcode, boolean flock,
                        Scratch s, FuseReply reply) {
        FuseFileInfo fi = s.fi(0, fh);
        s.fiBytes.putLong(FI_LOCK_OWNER, owner);
        if (flock && opcode != FuseKernel.GETLK) {
            int op = type == F_UNLCK ? LOCK_UN : type == 0 /* F_RDLCK */ ? LOCK_SH : LOCK_EX;
            return fs.flock(path, fi, op | (opcode == FuseKernel.SETLKW ? 0 : LOCK_NB));
        }
        ByteBuffer l = s.flockBytes;
        l.putShort(0, (short) type).putShort(2, (short) 0 /* SEEK_SET */).putLong(8, start)
                .putLong(16, end == Long.MAX_VALUE || end == -1 ? 0 : end - start + 1).putInt(24, pid);
        int cmd = opcode == FuseKernel.GETLK ? F_GETLK : opcode == FuseKernel.SETLKW ? F_SETLKW : F_SETLK;
        int r = fs.lock(path, fi, cmd, s.flock);
        if (r != 0 || cmd != F_GETLK) {
            return r;
        }
        long lStart = l.getLong(8);
        long lLen = l.getLong(16);
        reply.putLong(lStart).putLong(lLen == 0 ? Long.MAX_VALUE : lStart + lLen - 1).putInt(l.getShort(0)).putInt(l.getInt(24));
        return 0;
    }

    @Override
    public int statfs(FuseRequest req, long nodeid, FuseReply reply) {
        Scratch s = scratch.get();
        for (int i = 0; i < STATVFS_BYTES; i += 8) {
            s.svBytes.putLong(i, 0);
        }
        int r = fs.statfs("/", s.statvfs);
        if (r != 0) {
            return r;
        }
        ByteBuffer v = s.svBytes;
        reply.putLong(v.getLong(SV_BLOCKS)).putLong(v.getLong(SV_BFREE)).putLong(v.getLong(SV_BAVAIL))
                .putLong(v.getLong(SV_FILES)).putLong(v.getLong(SV_FFREE))
                .putInt((int) v.getLong(SV_BSIZE)).putInt((int) v.getLong(SV_NAMEMAX)).putInt((int) v.getLong(SV_FRSIZE)).putInt(0);
        for (int i = 0; i < 6; i++) {
            reply.putInt(0);
        }
        return 0;
    }
}
