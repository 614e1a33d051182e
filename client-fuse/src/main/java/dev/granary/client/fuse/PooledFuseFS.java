package dev.granary.client.fuse;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import jnr.ffi.LibraryLoader;
import jnr.ffi.Memory;
import jnr.ffi.Pointer;
import jnr.ffi.Runtime;
import jnr.ffi.Struct;
import jnr.ffi.annotations.Delegate;
import jnr.ffi.annotations.IgnoreError;
import jnr.ffi.annotations.SaveError;
import jnr.ffi.byref.IntByReference;
import jnr.ffi.byref.PointerByReference;
import jnr.ffi.types.size_t;
import jnr.ffi.types.ssize_t;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import ru.serce.jnrfuse.FuseException;
import ru.serce.jnrfuse.FuseStubFS;
import ru.serce.jnrfuse.struct.FuseOperations;
import ru.serce.jnrfuse.utils.SecurityUtils;

/**
 * A jnr-fuse filesystem whose FUSE requests are read and dispatched by a fixed pool of Java
 * threads, instead of libfuse2's multi-threaded loop ({@code fuse_main}).
 *
 * <p>Why: libfuse2's loop starts a native thread whenever all its threads are busy and ends one
 * whenever more than 10 are idle, so under a changing load it keeps creating threads. jnr's
 * callbacks (jffi) attach a native thread to the JVM for each callback and detach it afterwards,
 * until that thread has made 1,000 callbacks; each attach creates a {@code java.lang.Thread}.
 * Reading 3,000 small files with 8 threads attached about 8,000 threads, and attach plus detach
 * took 8.5% of the machine's CPU (perf). Here every request is received
 * ({@code fuse_session_receive_buf}) and processed ({@code fuse_session_process_buf}) on a Java
 * thread, so the callbacks run on threads the JVM already knows, and the pool never shrinks.
 *
 * <p>Setting up and tearing down are libfuse's own ({@code fuse_setup}, {@code fuse_teardown}, as
 * {@code fuse_main} calls them): the same options, mount and signal handling as before. libfuse2's
 * session calls are documented in fuse_lowlevel.h (libfuse 2.9).
 *
 * <p>The kernel's attribute cache: the pool knows the raw request it is serving, so subclasses can
 * make the kernel forget the attributes of the request's file
 * ({@link #invalidateKernelAttributesOfRequestFile()}), and the channel's send hook gives replies
 * for files with several names an attribute lifetime of 0 ({@link #limitAttributeCaching}).
 *
 * <p>The kernel's INIT: the send hook also extends libfuse2's reply ({@link #extendInitReply}) to
 * ask for 1 MiB requests, for lookups of one directory at once and for shared mappings of
 * {@code direct_io} files ({@link #directIoMapsShared}); the system property
 * {@code granary.fuse.serialDirops=true} (e.g. in {@code GRANARY_JAVA_OPTS}) leaves the kernel
 * sending one lookup per directory at a time, as libfuse2 alone does.
 */
public abstract class PooledFuseFS extends FuseStubFS {
    private static final Logger LOG = LoggerFactory.getLogger(PooledFuseFS.class);

    /** Threads serving FUSE requests when the subclass does not say otherwise. */
    public static final int DEFAULT_THREADS = 32;

    /** Size of libfuse2's {@code struct fuse_buf} on 64-bit Linux, bytes (size, flags, mem, fd, pos). */
    private static final int FUSE_BUF_BYTES = 40;
    private static final int EINTR = 4;

    /** The libfuse2 calls {@code fuse_main} is made of (fuse.h, fuse_lowlevel.h, libfuse 2.9). */
    public interface LibFuseSession {
        Pointer fuse_setup(int argc, String[] argv, FuseOperations op, @size_t long opSize,
                           PointerByReference mountpoint, IntByReference multithreaded, Pointer userData);

        void fuse_teardown(Pointer fuse, Pointer mountpoint);

        @IgnoreError
        Pointer fuse_get_session(Pointer fuse);

        @IgnoreError
        Pointer fuse_session_next_chan(Pointer se, Pointer ch);

        @IgnoreError
        @size_t long fuse_chan_bufsize(Pointer ch);

        @IgnoreError
        int fuse_session_receive_buf(Pointer se, Pointer buf, Pointer chp);

        @IgnoreError
        void fuse_session_process_buf(Pointer se, Pointer buf, Pointer ch);

        @IgnoreError
        int fuse_session_exited(Pointer se);

        @IgnoreError
        void fuse_session_exit(Pointer se);

        @IgnoreError
        int fuse_lowlevel_notify_inval_inode(Pointer ch, long ino, long off, long len);

        @IgnoreError
        int fuse_chan_fd(Pointer ch);
    }

    /** The C library's {@code writev(2)}. */
    public interface LibC {
        @SaveError
        @ssize_t long writev(int fd, Pointer iov, int iovcnt);
    }

    /** libfuse2's channel send hook ({@code struct fuse_chan_ops.send}): 0, or -errno. */
    public interface ChanSend {
        @Delegate
        int send(Pointer ch, Pointer iov, @size_t long count);
    }

    /** libfuse 2.9's {@code struct fuse_chan} (fuse_session.c): op.receive, op.send, op.destroy, se, fd. */
    private static final int CHAN_OP_SEND = 8, CHAN_SESSION = 24, CHAN_FD = 32;
    /** Offsets in {@code struct fuse_out_header} (linux/fuse.h), which starts every reply. */
    private static final int OUT_HEADER_ERROR = 4, OUT_HEADER_UNIQUE = 8, IN_HEADER_UNIQUE = 8;
    /** Kernel opcodes whose replies carry attributes (linux/fuse.h). */
    private static final int FUSE_LOOKUP = 1, FUSE_GETATTR = 3, FUSE_SETATTR = 4, FUSE_MKNOD = 8,
            FUSE_LINK = 13, FUSE_CREATE = 35;
    /** The kernel's FORGET and BATCH_FORGET opcodes (linux/fuse.h): no reply; lookups of nodes dropped. */
    private static final int FUSE_FORGET = 2, FUSE_BATCH_FORGET = 42;
    /** In {@code struct fuse_attr}: ino (u64), the first field. */
    private static final int ATTR_INO = 0;
    /** In {@code struct fuse_entry_out}: nodeid (u64), the first field. */
    private static final int ENTRY_NODEID = 0;
    /** In {@code struct fuse_entry_out}: attr_valid, attr_valid_nsec, attr. */
    private static final int ENTRY_ATTR_VALID = 24, ENTRY_ATTR_VALID_NSEC = 36, ENTRY_ATTR = 40;
    /** In {@code struct fuse_attr_out}: attr_valid, attr_valid_nsec, attr. */
    private static final int ATTR_OUT_VALID = 0, ATTR_OUT_VALID_NSEC = 8, ATTR_OUT_ATTR = 16;
    /** In {@code struct fuse_attr}: mode, nlink (both u32); the struct is at least 88 bytes. */
    private static final int ATTR_MODE = 60, ATTR_NLINK = 64, ATTR_MIN_BYTES = 88;
    private static final int S_IFMT = 0170000, S_IFDIR = 0040000, ENOENT = 2, ESTALE = 116;
    /** Opcodes of requests on a node found by a path walk, which Linux retries on ESTALE (linux/fuse.h). */
    private static final int FUSE_READLINK = 5, FUSE_SETXATTR = 21, FUSE_GETXATTR = 22, FUSE_LISTXATTR = 23,
            FUSE_REMOVEXATTR = 24, FUSE_OPENDIR = 27, FUSE_ACCESS = 34;

    /** Offsets in the kernel's {@code struct fuse_in_header} (linux/fuse.h), which starts every request. */
    private static final int IN_HEADER_OPCODE = 4, IN_HEADER_NODEID = 16, IN_HEADER_BYTES = 40;
    /** The kernel's {@code FUSE_OPEN}, {@code FUSE_FSYNC}, {@code FUSE_FLUSH} and {@code FUSE_RELEASE} opcodes (linux/fuse.h). */
    private static final int FUSE_OPEN = 14, FUSE_FSYNC = 20, FUSE_FLUSH = 25, FUSE_RELEASE = 18;

    /** {@code FUSE_INIT} and, in its in/out structs, the offsets of flags and max_pages; the flag (linux/fuse.h). */
    private static final int FUSE_INIT = 26, INIT_FLAGS = 12, INIT_OUT_MAX_PAGES = 28, FUSE_MAX_PAGES = 1 << 22;
    /** The INIT flag that lets the kernel send LOOKUPs and READDIRs of one directory at once (linux/fuse.h, Linux 4.7+). */
    private static final int FUSE_PARALLEL_DIROPS = 1 << 18;
    /**
     * INIT's second flag word: {@code FUSE_INIT_EXT} in flags says it is there (at byte 16 of
     * fuse_init_in, 32 of fuse_init_out); {@code FUSE_DIRECT_IO_ALLOW_MMAP} (1 << 36, bit 4 of
     * flags2; Linux 6.6+) lets a shared mapping be made of a {@code direct_io} file (linux/fuse.h).
     */
    private static final int FUSE_INIT_EXT = 1 << 30, INIT_IN_FLAGS2 = 16, INIT_OUT_FLAGS2 = 32, DIRECT_IO_ALLOW_MMAP_FLAGS2 = 1 << 4;
    /** Sizes of {@code struct fuse_out_header}, of libfuse2's fuse_init_out (7.19) and of today's (linux/fuse.h). */
    private static final int OUT_HEADER_BYTES = 16, INIT_OUT_V7_19_BYTES = 24, INIT_OUT_BYTES = 64;
    /** The memory of the last INIT reply {@link #extendInitReply} built on this thread. */
    private static final ThreadLocal<Pointer> INIT_REPLY = new ThreadLocal<>();

    /** The request buffer of the pool thread running the current callback; unset on other threads. */
    private static final ThreadLocal<Pointer> REQUEST = new ThreadLocal<>();
    /**
     * The kernel's node id of the current request's file (the header's, or a LINK's old node),
     * before {@link #toLibfuseNodes} gave libfuse its own id; on pool threads only.
     */
    private static final ThreadLocal<long[]> KERNEL_NODE = ThreadLocal.withInitial(() -> new long[1]);
    /** One kernel node per file version behind a name; null until the send hook is in place (it rewrites replies). */
    private volatile NodeVersions versions;
    private volatile LibFuseSession session;
    private volatile Pointer channel;
    private final AtomicBoolean invalFailureLogged = new AtomicBoolean();
    /** Completed once the session has ended and every worker stopped ({@link #sessionEnded()}). */
    private final CompletableFuture<Void> sessionEnded = new CompletableFuture<>();
    /** Keeps the channel's send closure alive (see {@link #hookSend}). */
    private volatile ChanSend sendHook;
    /** writev and the /dev/fuse fd, for the error replies {@link #toLibfuseNodes} sends itself. */
    private volatile LibC replyLibc;
    private volatile int replyFd = -1;
    /** The kernel took FUSE_DIRECT_IO_ALLOW_MMAP ({@link #directIoMapsShared}). */
    private volatile boolean directIoMmap;

    private final int threads;

    /** @param threads Java threads serving FUSE requests (at least 1) */
    protected PooledFuseFS(int threads) {
        if (threads < 1) {
            throw new IllegalArgumentException("FUSE threads must be >= 1, got " + threads);
        }
        this.threads = threads;
    }

    private static LibFuseSession load() {
        try {
            return LibraryLoader.create(LibFuseSession.class).failImmediately().load("fuse");
        } catch (Throwable e) {
            return LibraryLoader.create(LibFuseSession.class).failImmediately().load("libfuse.so.2");
        }
    }

    /**
     * Byte offset in libfuse 2.9's {@code struct fuse_operations} (LP64) of the 32-bit word whose
     * bits are {@code flag_nullpath_ok}, {@code flag_nopath}, {@code flag_utime_omit_ok}: after 38
     * function pointers (getattr .. bmap). jnr-fuse 0.5.8 maps each flag as one byte of padding,
     * so its own fields cannot set them.
     */
    static final int OPERATION_FLAGS_OFFSET = 38 * 8;
    /** {@code flag_utime_omit_ok}: bit 2 of that word (fuse.h). */
    static final int FLAG_UTIME_OMIT_OK = 1 << 2;

    /**
     * Sets libfuse's {@code flag_utime_omit_ok}, so that a SETATTR changing only one time (touch -m,
     * utimensat with UTIME_OMIT) reaches utimens with UTIME_OMIT for the other, and UTIME_NOW arrives
     * as UTIME_NOW. Without it libfuse 2.9 calls utimens only when both times are set, and answered
     * success for a change it dropped. Left unset (with a warning) when the struct is not libfuse
     * 2.9's 360 bytes.
     */
    private void allowUtimeOmit() {
        if (Struct.size(fuseOperations) != 360) {
            LOG.warn("struct fuse_operations is {} bytes, not libfuse 2.9's 360: flag_utime_omit_ok left unset", Struct.size(fuseOperations));
            return;
        }
        jnr.ffi.Pointer ops = Struct.getMemory(fuseOperations);
        ops.putInt(OPERATION_FLAGS_OFFSET, ops.getInt(OPERATION_FLAGS_OFFSET) | FLAG_UTIME_OMIT_OK);
    }

    /**
     * Mounts at {@code mountPoint} with the libfuse command-line options {@code fuseOpts} (pairs
     * such as "-o", "allow_other") and serves requests on the pool until the filesystem is
     * unmounted. Returns once mounted unless {@code blocking}.
     *
     * @throws FuseException when already mounted, or libfuse refuses the mount point or an option
     */
    @Override
    public void mount(Path mountPoint, boolean blocking, boolean debug, String[] fuseOpts) {
        if (!mounted.compareAndSet(false, true)) {
            throw new FuseException("Fuse fs already mounted!");
        }
        this.mountPoint = mountPoint;
        List<String> args = new ArrayList<>(List.of(getFSName(), "-f"));
        if (debug) {
            args.add("-d");
        }
        args.add(mountPoint.toAbsolutePath().toString());
        args.addAll(List.of(fuseOpts));
        int pages = requestPages(fuseOpts);
        LibFuseSession lib;
        Pointer fuse;
        PointerByReference mp = new PointerByReference();
        try {
            lib = load();
            allowUtimeOmit();
            fuse = lib.fuse_setup(args.size(), args.toArray(new String[0]), fuseOperations,
                    Struct.size(fuseOperations), mp, new IntByReference(), null);
        } catch (Throwable t) {
            mounted.set(false);
            throw new FuseException("Unable to mount FS", t);
        }
        if (fuse == null) {
            mounted.set(false);
            throw new FuseException("Unable to mount FS at " + mountPoint + " (libfuse refused the mount point or an option)");
        }
        Pointer mountpoint = mp.getValue();
        if (SecurityUtils.canHandleShutdownHooks()) {
            // as jnr-fuse's own mount does: a JVM that exits without unmounting leaves no dead mount
            java.lang.Runtime.getRuntime().addShutdownHook(new Thread(this::umount));
        }
        Thread t = new Thread(() -> serve(lib, fuse, mountpoint, pages), "fuse-session " + mountPoint);
        t.setDaemon(true);
        t.start();
        if (blocking) {
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * Completes (normally, never exceptionally) once this filesystem's FUSE session has ended and
     * its worker threads stopped: unmounted by {@link #umount()}, by anyone else with umount(8) or
     * {@code fusermount -u} (a lazy unmount ends it when the last open file is closed), or its
     * connection aborted ({@code /sys/fs/fuse/connections/N/abort}). A copy: completing it does
     * nothing.
     */
    public CompletableFuture<Void> sessionEnded() {
        return sessionEnded.copy();
    }

    /** The opcode of the kernel request the current callback serves (linux/fuse.h); -1 on a thread of no pool. */
    private static int servingOpcode() {
        Pointer req = REQUEST.get();
        return req == null ? -1 : req.getInt(IN_HEADER_OPCODE);
    }

    /**
     * The uid, gid and pid of the caller of the request the current thread serves, from the
     * kernel's request header ({@code struct fuse_in_header}, as libfuse's context has them); null
     * off a pool thread.
     */
    protected static long[] requestCredentials() {
        Pointer req = REQUEST.get();
        return req == null ? null : new long[] {req.getInt(dev.granary.client.fuse.kernel.FuseKernel.IN_UID) & 0xffffffffL,
                req.getInt(dev.granary.client.fuse.kernel.FuseKernel.IN_GID) & 0xffffffffL,
                req.getInt(dev.granary.client.fuse.kernel.FuseKernel.IN_PID) & 0xffffffffL};
    }

    /** Whether the current callback serves a FUSE_GETATTR request from the kernel (not a call libfuse makes itself within another request). */
    protected static boolean servingGetattr() {
        return servingOpcode() == FUSE_GETATTR;
    }

    /**
     * The inode the kernel's node of the current request shows ({@link NodeVersions}): the
     * file this kernel inode was made for, which is not the file the name holds now when another
     * client replaced it. -1 when not known (no entry reply handed it out, not a pool thread, or no send
     * hook), and then the request's path is all there is.
     */
    protected final long requestNodeShows() {
        NodeVersions v = versions;
        return v == null || REQUEST.get() == null ? -1 : v.inoOf(KERNEL_NODE.get()[0]);
    }

    /** Whether the current callback serves a FUSE_RELEASE request (libfuse2 removes a hidden name in it). */
    protected static boolean servingRelease() {
        return servingOpcode() == FUSE_RELEASE;
    }

    /**
     * Called from an {@code open}, {@code flush}, {@code fsync} or {@code link} callback: makes the
     * kernel forget the attributes (size, mtime, nlink, mode...) it cached for the file opened,
     * flushed or synced, or for the existing name a link was made to, so that its next stat, or a
     * read that reaches its idea of the end of file,
     * asks this filesystem again ({@code fuse_lowlevel_notify_inval_inode} with offset -1:
     * attributes only, the page cache is left to {@code keep_cache}).
     * <ul>
     * <li>open, close-to-open (as NFS): an open must see the size another client closed, even when
     *     this kernel cached an older size less than {@code attr_timeout} ago;
     * <li>flush, fsync of a written handle: the commit set the mtime, which the kernel does not
     *     update itself (it only marks it stale at each write, and a stat in between refetched
     *     the old one);
     * <li>link: the old name's kernel inode must show the new st_nlink (Linux no longer
     *     invalidates it in link() since 6.2, and libfuse2 gives the new name its own kernel inode).
     * </ul>
     *
     * @return true when the kernel took the notification; false when the current thread is not
     *         serving an OPEN, FLUSH, FSYNC or LINK request of this pool, or the kernel refused (logged once)
     */
    protected final boolean invalidateKernelAttributesOfRequestFile() {
        Pointer req = REQUEST.get();
        if (req == null || !canNotify()) {
            return false;
        }
        long nodeid;
        switch (req.getInt(IN_HEADER_OPCODE)) {
            // the kernel's id ({@link #toLibfuseNodes} gave libfuse its own in the request); for
            // a LINK, that of its old node (struct fuse_link_in { oldnodeid })
            case FUSE_OPEN, FUSE_FLUSH, FUSE_FSYNC, FUSE_LINK -> nodeid = KERNEL_NODE.get()[0];
            default -> {
                return false;
            }
        }
        int r = notifyInvalInode(nodeid, -1, 0);
        if (r != 0 && invalFailureLogged.compareAndSet(false, true)) {
            LOG.warn("the kernel refused to invalidate cached attributes (errno {}): opens and stats may see attributes cached up to attr_timeout ago", -r);
        }
        return r == 0;
    }

    /**
     * The kernel's requests that may change a node's bytes or its cached pages, or end the node
     * (linux/fuse.h): OPEN (without keep_cache the opener drops the pages; a writer's opens),
     * SETATTR (truncate), WRITE, FLUSH, FSYNC, RELEASE, FALLOCATE, COPY_FILE_RANGE, and FORGET.
     */
    private static final int FUSE_WRITE = 16, FUSE_FALLOCATE = 43, FUSE_COPY_FILE_RANGE = 47;

    /** FUSE_NOTIFY_STORE's code and the size of its {@code struct fuse_notify_store_out} (nodeid, offset, size, padding) (linux/fuse.h). */
    private static final int FUSE_NOTIFY_STORE = 4, NOTIFY_STORE_OUT_BYTES = 24;

    /** Counters per kernel node (hashed into stripes): bumped by every request that may change its pages ({@link #pageGeneration}). */
    private final java.util.concurrent.atomic.AtomicLongArray pageGenerations = new java.util.concurrent.atomic.AtomicLongArray(4096);

    /** Whether requests of {@code opcode} may change their node's bytes or cached pages ({@link #pageGeneration}). */
    private static boolean changesPages(int opcode) {
        return switch (opcode) {
            case FUSE_OPEN, FUSE_SETATTR, FUSE_WRITE, FUSE_FLUSH, FUSE_FSYNC, FUSE_RELEASE, FUSE_FALLOCATE, FUSE_COPY_FILE_RANGE -> true;
            default -> false;
        };
    }

    private static int genSlot(long node) {
        return (int) (Long.hashCode(node * 0x9E3779B97F4A7C15L) & 4095);
    }

    private void bumpPageGeneration(long node) {
        pageGenerations.incrementAndGet(genSlot(node));
    }

    /**
     * A counter of kernel node {@code node} that moves (at least) whenever a request arrives that
     * may change the node's bytes or page cache, before this filesystem serves it, and again just
     * before its reply goes to the kernel (OPEN, SETATTR, WRITE, FLUSH, FSYNC, RELEASE, FALLOCATE,
     * COPY_FILE_RANGE; FORGET on arrival): bytes a READ read after taking it may be stored in the
     * node's page cache ({@link #storeInPageCache}) only while it has not moved, so a READ served
     * while such a request was being served (which may have planned with the old map or size)
     * stores nothing. Nodes share counters, so it may also move for another node's request.
     */
    protected final long pageGeneration(long node) {
        return pageGenerations.get(genSlot(node));
    }

    /** Native memory {@link #storeInPageCache} builds its messages in (grown on demand; guarded by itself). */
    private Pointer storeBuffer;
    private final Object storeLock = new Object();

    /**
     * Puts {@code data} (bytes [0, limit), absolute gets) into the page cache of kernel node
     * {@code node} at byte {@code offset} (page-aligned) with {@code FUSE_NOTIFY_STORE}
     * (linux/fuse.h; Linux marks whole pages, and a last partial page at the end of file,
     * up to date, and raises its idea of the file's size to offset + length if it was smaller), as
     * long as {@link #pageGeneration} of the node is still {@code generation}; if it moved while
     * the store ran, the stored range is invalidated again. Must not run on a thread a pending
     * FUSE request waits for (the kernel locks the pages a READ in flight covers until its
     * reply). Returns 0 when stored, 1 when left out or undone (the generation moved), -errno when
     * the kernel refused (ENOENT: it no longer holds the node) or there is no channel (ENOSYS).
     */
    protected final int storeInPageCache(long node, long generation, long offset, java.nio.ByteBuffer data) {
        LibC libc = replyLibc;
        int fd = replyFd;
        if (libc == null || fd < 0) {
            return -38; // ENOSYS
        }
        int len = data.limit();
        synchronized (storeLock) {
            if (pageGeneration(node) != generation) {
                return 1;
            }
            Runtime rt = Runtime.getSystemRuntime();
            int total = OUT_HEADER_BYTES + NOTIFY_STORE_OUT_BYTES + len;
            if (storeBuffer == null || storeBuffer.size() < total + 16) {
                storeBuffer = Memory.allocateDirect(rt, Math.max(total + 16, 1 << 20), false);
            }
            Pointer m = storeBuffer;
            m.putInt(0, total); // fuse_out_header: len, error = the notify code, unique = 0
            m.putInt(OUT_HEADER_ERROR, FUSE_NOTIFY_STORE);
            m.putLong(OUT_HEADER_UNIQUE, 0);
            m.putLong(OUT_HEADER_BYTES, node); // fuse_notify_store_out
            m.putLong(OUT_HEADER_BYTES + 8, offset);
            m.putInt(OUT_HEADER_BYTES + 16, len);
            m.putInt(OUT_HEADER_BYTES + 20, 0);
            int at = OUT_HEADER_BYTES + NOTIFY_STORE_OUT_BYTES;
            if (data.hasArray()) {
                m.put(at, data.array(), data.arrayOffset(), len);
            } else {
                byte[] chunk = new byte[64 << 10];
                for (int i = 0; i < len; i += chunk.length) {
                    int n = Math.min(chunk.length, len - i);
                    data.get(i, chunk, 0, n);
                    m.put(at + i, chunk, 0, n);
                }
            }
            Pointer vec = m.slice(total, 16);
            vec.putPointer(0, m);
            vec.putLong(8, total);
            if (libc.writev(fd, vec, 1) < 0) {
                return -rt.getLastError();
            }
        }
        if (pageGeneration(node) != generation) {
            // a request that may change the pages arrived meanwhile (a write, a truncate, an open
            // dropping them): the stored bytes may be older than it, so they go again
            if (canNotify()) {
                notifyInvalInode(node, offset, len);
            }
            return 1;
        }
        return 0;
    }

    /** Whether kernel notifications can be sent: a libfuse2 channel, or the /dev/fuse binding's device. */
    private boolean canNotify() {
        return device != null || (session != null && channel != null);
    }

    /** FUSE_NOTIFY_INVAL_INODE for kernel node {@code node} through the binding in use; 0 or -errno. */
    private int notifyInvalInode(long node, long offset, long len) {
        dev.granary.client.fuse.kernel.FuseDevice d = device;
        if (d != null) {
            return d.notifyInvalInode(node, offset, len);
        }
        LibFuseSession lib = session;
        Pointer ch = channel;
        return lib == null || ch == null ? -38 : lib.fuse_lowlevel_notify_inval_inode(ch, node, offset, len);
    }

    /** The /dev/fuse binding's device while mounted with {@link #mountDirect}; null on libfuse2. */
    private volatile dev.granary.client.fuse.kernel.FuseDevice device;

    /**
     * Mounts at {@code mountPoint} on Granary's /dev/fuse binding ({@code client/fuse/kernel}: the
     * kernel protocol from Java, no libfuse; root only) instead of libfuse2, and serves requests
     * on this pool's number of threads: the same callbacks, through
     * {@link dev.granary.client.fuse.kernel.PathFsAdapter} (libfuse2's path API in Java), and the
     * same work on raw requests and replies as on libfuse2's channel (node versions, attribute
     * lifetimes, ESTALE, page generations, notifications). Returns once mounted.
     *
     * @param kernelOptions the fuse filesystem's mount options (allow_other, default_permissions, max_read=N)
     * @param maxRequest    the largest READ/WRITE request, bytes (4 KiB multiple, at most 1 MiB)
     * @param entryValidNs  entry_timeout, ns
     * @param attrValidNs   attr_timeout, ns
     * @throws FuseMount.MountException when /dev/fuse cannot be opened or mount(2) fails
     */
    public void mountDirect(Path mountPoint, String fsname, String subtype, List<String> kernelOptions, int maxRequest,
                            long entryValidNs, long attrValidNs) {
        if (!mounted.compareAndSet(false, true)) {
            throw new FuseException("Fuse fs already mounted!");
        }
        this.mountPoint = mountPoint;
        dev.granary.client.fuse.kernel.FuseDevice d;
        try {
            d = dev.granary.client.fuse.kernel.FuseDevice.mount(mountPoint, fsname, subtype, kernelOptions);
        } catch (RuntimeException e) {
            mounted.set(false);
            throw e;
        }
        NodeVersions v = new NodeVersions();
        replyLibc = LibraryLoader.create(LibC.class).failImmediately().load("c");
        replyFd = d.fd();
        versions = v;
        device = d;
        int want = dev.granary.client.fuse.kernel.PathFsAdapter.LIBFUSE2_FLAGS
                | (Boolean.getBoolean("granary.fuse.serialDirops") ? 0 : dev.granary.client.fuse.kernel.FuseKernel.PARALLEL_DIROPS);
        dev.granary.client.fuse.kernel.PathFsAdapter adapter = new dev.granary.client.fuse.kernel.PathFsAdapter(this, entryValidNs,
                attrValidNs, want, dev.granary.client.fuse.kernel.FuseKernel.DIRECT_IO_ALLOW_MMAP2);
        directAdapter = adapter;
        dev.granary.client.fuse.kernel.FuseSession s = new dev.granary.client.fuse.kernel.FuseSession(d, adapter, maxRequest);
        adapter.lateReplies(s, REQUEST::set); // SETLKW waits on threads of its own, as its own request
        s.intercept(new dev.granary.client.fuse.kernel.FuseSession.Interceptor() {
            @Override
            public boolean beforeServe(dev.granary.client.fuse.kernel.FuseRequest req) {
                REQUEST.set(req.pointer());
                return toLibfuseNodes(req.pointer());
            }

            @Override
            public void beforeReply(dev.granary.client.fuse.kernel.FuseRequest req, Pointer iov, int count) {
                interceptReply(req.pointer(), iov, count, v, PooledFuseFS.this);
            }
        });
        s.ended().whenComplete((x, t) -> {
            device = null;
            d.close();
            mounted.set(false);
            sessionEnded.complete(null);
        });
        s.start(threads, "fuse-");
        if (SecurityUtils.canHandleShutdownHooks()) {
            java.lang.Runtime.getRuntime().addShutdownHook(new Thread(this::umount));
        }
    }

    /** Unmounts: the /dev/fuse binding's lazy unmount, or jnr-fuse's (fusermount). */
    @Override
    public void umount() {
        dev.granary.client.fuse.kernel.FuseDevice d = device;
        if (d != null) {
            d.unmount();
            return;
        }
        super.umount();
    }

    /** The kernel's node id of the file of the request the current thread serves; -1 when not a pool thread. */
    protected static long requestKernelNode() {
        return REQUEST.get() == null ? -1 : KERNEL_NODE.get()[0];
    }

    /**
     * Makes the kernel forget the attributes it cached for every node showing inode {@code ino}
     * (each of its names, {@link NodeVersions#nodesShowing}), as
     * {@link #invalidateKernelAttributesOfRequestFile} does for the request's own node. For an
     * unlink, or a rename over a name, of a file with other names left: their st_nlink changed,
     * and a node may hold attributes cached while the file had one name (another client linked it
     * since), which Linux does not drop, as it only updates the node of the removed name.
     *
     * @return how many nodes the kernel invalidated; 0 without node tracking (no send hook)
     */
    protected final int invalidateKernelAttributesOfInode(long ino) {
        NodeVersions v = versions;
        if (v == null || !canNotify()) {
            return 0;
        }
        int done = 0;
        for (long nodeid : v.nodesShowing(ino)) {
            int r = notifyInvalInode(nodeid, -1, 0);
            if (r == 0) {
                done++;
            } else if (r != -ENOENT && invalFailureLogged.compareAndSet(false, true)) {
                // ENOENT: the kernel evicted that node meanwhile, and its FORGET is on the way
                LOG.warn("the kernel refused to invalidate cached attributes (errno {}): stats may see attributes cached up to attr_timeout ago", -r);
            }
        }
        return done;
    }

    /**
     * A reply of ENOENT to a request on a node the kernel holds (GETATTR, OPEN, ...) becomes
     * ESTALE. The kernel found that node through a name; by the time libfuse2's path API served
     * the request, a rename over the name, or an unlink, on this mount had left the node without
     * a path (libfuse answers ENOENT without calling the filesystem), or another client had
     * removed it. The answer to the caller of stat(2), open(2), chmod(2), ... must be the file the
     * name holds now, as rename(2) is atomic (POSIX): on ESTALE, Linux walks the path once more,
     * revalidating every cached entry ({@code retry_estale}, {@code LOOKUP_REVAL}, as for NFS),
     * and then finds the new file, or answers ENOENT from a LOOKUP when the name is really gone.
     * Calls on an open descriptor (fstat, fchmod) are not walked again and get ESTALE, as on NFS.
     */
    private static void staleNotGone(Pointer req, Pointer outHeader) {
        if (outHeader.getInt(OUT_HEADER_ERROR) == -ENOENT && onNodeFoundByName(req.getInt(IN_HEADER_OPCODE))) {
            outHeader.putInt(OUT_HEADER_ERROR, -ESTALE);
        }
    }

    /** Whether requests of {@code opcode} act on a node the kernel found by a path walk, which Linux retries on ESTALE. */
    private static boolean onNodeFoundByName(int opcode) {
        return switch (opcode) {
            case FUSE_GETATTR, FUSE_SETATTR, FUSE_READLINK, FUSE_OPEN, FUSE_OPENDIR, FUSE_ACCESS, FUSE_GETXATTR,
                    FUSE_SETXATTR, FUSE_LISTXATTR, FUSE_REMOVEXATTR -> true;
            default -> false;
        };
    }

    /**
     * Whether the current callback serves a request on a node the kernel found by a path walk
     * (GETATTR, OPEN, ...), whose ENOENT the kernel gets as ESTALE and answers by walking the
     * path again ({@link #staleNotGone}).
     */
    protected static boolean servingRequestOnNode() {
        return onNodeFoundByName(servingOpcode());
    }

    /**
     * Replaces the send hook of libfuse's kernel channel with {@link #send}, which writes replies
     * the same way ({@code writev} on the /dev/fuse fd, as libfuse's {@code fuse_kern_chan_send})
     * after {@link #limitAttributeCaching} and, for INIT, {@link #extendInitReply} with
     * {@code pages} ({@link #requestPages}). Checks libfuse 2.9's layout of the channel first (its
     * session and fd where expected) and leaves the channel alone otherwise (logged).
     */
    private void hookSend(LibFuseSession lib, Pointer se, Pointer ch, int pages) {
        try {
            int fd = lib.fuse_chan_fd(ch);
            if (fd < 0 || ch.getInt(CHAN_FD) != fd || ch.getPointer(CHAN_SESSION) == null
                    || ch.getPointer(CHAN_SESSION).address() != se.address()) {
                LOG.warn("libfuse's channel is not laid out as libfuse 2.9's: files with several names may show "
                        + "attributes up to attr_timeout old through their other names, and reads come in 128 KiB requests");
                return;
            }
            LibC libc = LibraryLoader.create(LibC.class).failImmediately().load("c");
            Runtime rt = Runtime.getSystemRuntime();
            NodeVersions v = new NodeVersions();
            ChanSend hook = (c, iov, count) -> send(libc, rt, fd, iov, count, pages, v, this);
            Pointer closure = rt.getClosureManager().getClosurePointer(ChanSend.class, hook);
            sendHook = hook; // the closure lives as long as this reference
            ch.putPointer(CHAN_OP_SEND, closure);
            replyLibc = libc;
            replyFd = fd;
            versions = v;
        } catch (Throwable t) {
            LOG.warn("could not hook libfuse's channel ({}): files with several names may show attributes up to "
                    + "attr_timeout old through their other names, and reads come in 128 KiB requests", t.toString());
        }
    }

    /**
     * The channel's send hook: {@link #staleNotGone}, {@link #limitAttributeCaching},
     * {@link #showFileVersions}, for INIT {@link #extendInitReply}, then {@code writev}; 0 or -errno.
     */
    private static int send(LibC libc, Runtime rt, int fd, Pointer iov, long count, int pages, NodeVersions versions, PooledFuseFS owner) {
        if (iov == null) {
            return 0;
        }
        Pointer req = REQUEST.get();
        if (req != null) {
            interceptReply(req, iov, (int) count, versions, owner);
        }
        if (req != null && count >= 2) {
            if (req.getInt(IN_HEADER_OPCODE) == FUSE_INIT && count == 2) {
                Pointer longer = extendInitReply(rt, req, iov, pages, !Boolean.getBoolean("granary.fuse.serialDirops"));
                if (longer != null) {
                    iov = longer;
                    owner.directIoMmap = directIoAllowsMmap(longer);
                }
            }
        }
        if (libc.writev(fd, iov, (int) count) < 0) {
            int err = rt.getLastError();
            if (err != ENOENT) { // ENOENT: the request was interrupted (libfuse says the same)
                LOG.debug("writing a FUSE reply failed: errno {}", err);
            }
            return -err;
        }
        return 0;
    }

    /**
     * What every reply to the kernel request {@code req} goes through before it is written, on
     * either binding: {@link #staleNotGone}, the page generation's second move for requests that
     * change pages, {@link #limitAttributeCaching} and {@link #showFileVersions}.
     */
    private static void interceptReply(Pointer req, Pointer iov, int count, NodeVersions versions, PooledFuseFS owner) {
        staleNotGone(req, iov.getPointer(0));
        if (changesPages(req.getInt(IN_HEADER_OPCODE))) {
            // a READ served while this request was (its generation taken after the bump at
            // arrival) may have planned with the state from before it, such as the old map
            // or size: its store must fail too, before the kernel acts on this reply (an
            // OPEN's page drop, a SETATTR's truncation)
            owner.bumpPageGeneration(KERNEL_NODE.get()[0]);
        }
        if (count >= 2) {
            limitAttributeCaching(req, iov);
            showFileVersions(versions, req, iov);
        }
    }

    /**
     * In a reply handing the kernel a node of any type (LOOKUP, MKNOD, LINK, CREATE:
     * {@code struct fuse_entry_out}), replaces libfuse's node id by the one
     * {@link NodeVersions#onEntry} gives for its inode (its {@code st_ino}: the mount uses
     * {@code use_ino}), so that a name another client gave to another file, of the same type or
     * not, gets a new kernel inode (a node id reused for another type makes Linux mark its inode
     * bad: EIO for every descriptor open on it).
     */
    static void showFileVersions(NodeVersions versions, Pointer req, Pointer iov) {
        switch (req.getInt(IN_HEADER_OPCODE)) {
            case FUSE_LOOKUP, FUSE_MKNOD, FUSE_LINK, FUSE_CREATE -> { }
            default -> {
                return;
            }
        }
        Pointer arg = attributesReply(req, iov, ENTRY_ATTR);
        if (arg == null) {
            return;
        }
        long node = arg.getLong(ENTRY_NODEID);
        long shown = versions.onEntry(node, arg.getLong(ENTRY_ATTR + ATTR_INO));
        if (shown != node) {
            arg.putLong(ENTRY_NODEID, shown);
        }
    }

    /**
     * The argument of the reply in {@code iov} (header, argument) to {@code req} when it is a
     * success holding a {@code struct fuse_attr} at offset {@code attr}; null for an error, a
     * notification, or a reply too short to hold attributes.
     */
    private static Pointer attributesReply(Pointer req, Pointer iov, int attr) {
        Pointer out = iov.getPointer(0);
        Pointer arg = iov.getPointer(16); // iov[1].iov_base; struct iovec is {base, len}
        if (out == null || arg == null || out.getInt(OUT_HEADER_ERROR) != 0
                || out.getLong(OUT_HEADER_UNIQUE) != req.getLong(IN_HEADER_UNIQUE)
                || iov.getLong(24) < attr + ATTR_MIN_BYTES) {
            return null;
        }
        return arg;
    }

    /**
     * In a reply to the request {@code req} that carries attributes (LOOKUP, GETATTR, SETATTR,
     * MKNOD, LINK, CREATE), sets the time the kernel may keep them to 0 when the inode is not a
     * directory and has more than one name. Why: libfuse2's path API gives each name its own
     * kernel inode, so attributes the kernel kept for one name would not follow a change made
     * through another (st_nlink after link/unlink, st_size after a write or truncate). Such files
     * ask this filesystem at every stat, as all files did with {@code attr_timeout=0}.
     */
    static void limitAttributeCaching(Pointer req, Pointer iov) {
        int valid, validNsec, attr;
        switch (req.getInt(IN_HEADER_OPCODE)) {
            case FUSE_LOOKUP, FUSE_MKNOD, FUSE_LINK, FUSE_CREATE -> {
                valid = ENTRY_ATTR_VALID;
                validNsec = ENTRY_ATTR_VALID_NSEC;
                attr = ENTRY_ATTR;
            }
            case FUSE_GETATTR, FUSE_SETATTR -> {
                valid = ATTR_OUT_VALID;
                validNsec = ATTR_OUT_VALID_NSEC;
                attr = ATTR_OUT_ATTR;
            }
            default -> {
                return;
            }
        }
        Pointer arg = attributesReply(req, iov, attr);
        if (arg == null) {
            return;
        }
        int mode = arg.getInt(attr + ATTR_MODE);
        int nlink = arg.getInt(attr + ATTR_NLINK);
        if ((mode & S_IFMT) != S_IFDIR && Integer.compareUnsigned(nlink, 1) > 0) {
            arg.putLong(valid, 0);
            arg.putInt(validNsec, 0);
        }
    }

    /** Whether the INIT reply {@code iov} ({@link #extendInitReply}'s) asks for {@code FUSE_DIRECT_IO_ALLOW_MMAP}. */
    static boolean directIoAllowsMmap(Pointer iov) {
        Pointer init = iov.getPointer(16);
        return (init.getInt(INIT_FLAGS) & FUSE_INIT_EXT) != 0 && (init.getInt(INIT_OUT_FLAGS2) & DIRECT_IO_ALLOW_MMAP_FLAGS2) != 0;
    }

    /**
     * Whether the kernel took {@code FUSE_DIRECT_IO_ALLOW_MMAP} at INIT: a {@code direct_io} open
     * (FOPEN_DIRECT_IO) may then be mapped shared; without it such a mapping fails with ENODEV.
     */
    protected final boolean directIoMapsShared() {
        dev.granary.client.fuse.kernel.PathFsAdapter a = directAdapter;
        return directIoMmap || (a != null && (a.agreedFlags2() & dev.granary.client.fuse.kernel.FuseKernel.DIRECT_IO_ALLOW_MMAP2) != 0);
    }

    /** The path layer of the /dev/fuse binding while mounted with {@link #mountDirect}. */
    private volatile dev.granary.client.fuse.kernel.PathFsAdapter directAdapter;

    /**
     * For libfuse2's reply to the kernel's INIT, a reply that also asks for requests of up to
     * {@code pages} pages ({@code FUSE_MAX_PAGES}, Linux 4.20+), with {@code parallelDirops}
     * for lookups and listings of one directory at once ({@code FUSE_PARALLEL_DIROPS}, Linux 4.7+),
     * and for shared mappings of {@code direct_io} files ({@code FUSE_DIRECT_IO_ALLOW_MMAP} in the
     * second flag word, Linux 6.6+), each when the kernel offers it; null to send libfuse's reply as it is. libfuse2 predates both
     * flags and answers with the 24-byte {@code fuse_init_out} of protocol 7.19, so the kernel split
     * every read into requests of at most 32 pages (128 KiB): a 1 GiB read was 8,192 READ round
     * trips through /dev/fuse, 1,024 with 256 pages; and it sent one LOOKUP at a time per directory
     * (its per-directory mutex), so parallel openers of uncached files in one directory waited for
     * each other's MDS round trips. libfuse2's path API takes its own locks on the paths it builds,
     * so it serves concurrent lookups in one directory (as libfuse 3.16+ does with the flag).
     * The new reply is libfuse's 24 bytes, then {@code time_gran} 0 (unchanged) and
     * {@code max_pages}, in the 64-byte {@code struct fuse_init_out} of linux/fuse.h (flags at
     * 12, max_pages at 28); the header's length grows to match. Writes stay at libfuse2's
     * {@code max_write} (128 KiB: its receive buffer).
     *
     * @return an iovec array of two entries (header, argument) in memory owned by the caller's
     *         thread until the next INIT, or null
     */
    static Pointer extendInitReply(Runtime rt, Pointer req, Pointer iov, int pages, boolean parallelDirops) {
        Pointer out = iov.getPointer(0);
        Pointer arg = iov.getPointer(16); // iov[1].iov_base; struct iovec is {base, len}
        long argLen = iov.getLong(24);
        int offered = req.getInt(IN_HEADER_BYTES + INIT_FLAGS);
        boolean largeRequests = pages > 32 && (offered & FUSE_MAX_PAGES) != 0;
        boolean parallel = parallelDirops && (offered & FUSE_PARALLEL_DIROPS) != 0;
        boolean dioMmap = (offered & FUSE_INIT_EXT) != 0 && req.getInt(0) >= IN_HEADER_BYTES + INIT_IN_FLAGS2 + 4
                && (req.getInt(IN_HEADER_BYTES + INIT_IN_FLAGS2) & DIRECT_IO_ALLOW_MMAP_FLAGS2) != 0;
        if ((!largeRequests && !parallel && !dioMmap) || out == null || arg == null || out.getInt(OUT_HEADER_ERROR) != 0
                || out.getLong(OUT_HEADER_UNIQUE) != req.getLong(IN_HEADER_UNIQUE)
                || argLen < INIT_OUT_V7_19_BYTES || argLen > INIT_OUT_BYTES) {
            return null; // nothing to ask for, an error reply, or an unexpected layout
        }
        Pointer mem = Memory.allocateDirect(rt, OUT_HEADER_BYTES + INIT_OUT_BYTES + 32, true); // zeroed
        Pointer header = mem.slice(0, OUT_HEADER_BYTES);
        Pointer init = mem.slice(OUT_HEADER_BYTES, INIT_OUT_BYTES);
        Pointer vec = mem.slice(OUT_HEADER_BYTES + INIT_OUT_BYTES, 32);
        byte[] copy = new byte[(int) argLen];
        arg.get(0, copy, 0, copy.length);
        init.put(0, copy, 0, copy.length);
        if (largeRequests) {
            init.putInt(INIT_FLAGS, init.getInt(INIT_FLAGS) | FUSE_MAX_PAGES);
            init.putShort(INIT_OUT_MAX_PAGES, (short) Math.min(pages, 256));
        }
        if (parallel) {
            init.putInt(INIT_FLAGS, init.getInt(INIT_FLAGS) | FUSE_PARALLEL_DIROPS);
        }
        if (dioMmap) {
            init.putInt(INIT_FLAGS, init.getInt(INIT_FLAGS) | FUSE_INIT_EXT);
            init.putInt(INIT_OUT_FLAGS2, init.getInt(INIT_OUT_FLAGS2) | DIRECT_IO_ALLOW_MMAP_FLAGS2);
        }
        header.putInt(0, OUT_HEADER_BYTES + INIT_OUT_BYTES); // len
        header.putInt(OUT_HEADER_ERROR, 0);
        header.putLong(OUT_HEADER_UNIQUE, out.getLong(OUT_HEADER_UNIQUE));
        vec.putPointer(0, header);
        vec.putLong(8, OUT_HEADER_BYTES);
        vec.putPointer(16, init);
        vec.putLong(24, INIT_OUT_BYTES);
        INIT_REPLY.set(mem); // alive until writev has run
        return vec;
    }

    /**
     * Pages (4 KiB) per request that {@code max_read} among {@code fuseOpts} allows (default 32,
     * the kernel's), at most 256. Only reads grow: libfuse2 caps {@code max_write} at its 128 KiB
     * receive buffer in the same INIT reply.
     */
    static int requestPages(String[] fuseOpts) {
        long read = -1;
        for (String o : fuseOpts) {
            for (String part : o.split(",")) {
                if (part.startsWith("max_read=")) {
                    try {
                        read = Long.parseLong(part.substring("max_read=".length()));
                    } catch (NumberFormatException e) {
                        read = -1; // libfuse rejects it at mount
                    }
                }
            }
        }
        return read <= 0 ? 32 : (int) Math.max(1, Math.min(256, read / 4096));
    }

    /** Runs the pool until the session ends (unmount), then tears the filesystem down. */
    private void serve(LibFuseSession lib, Pointer fuse, Pointer mountpoint, int pages) {
        Pointer se = lib.fuse_get_session(fuse);
        Pointer ch = lib.fuse_session_next_chan(se, null);
        long bufsize = lib.fuse_chan_bufsize(ch);
        session = lib;
        channel = ch;
        hookSend(lib, se, ch, pages);
        List<Thread> workers = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            Thread w = new Thread(() -> work(lib, se, ch, bufsize, this), "fuse-" + i);
            w.setDaemon(true);
            workers.add(w);
            w.start();
        }
        for (Thread w : workers) {
            try {
                w.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                lib.fuse_session_exit(se);
            }
        }
        channel = null;
        try {
            lib.fuse_teardown(fuse, mountpoint);
        } catch (Throwable t) {
            LOG.warn("tearing down the FUSE session of {} failed: {}", mountPoint, t.toString());
        } finally {
            mounted.set(false);
            sessionEnded.complete(null);
        }
    }

    /** One worker: receive a request, process it (the callbacks run here), until the session ends. */
    private static void work(LibFuseSession lib, Pointer se, Pointer ch, long bufsize, PooledFuseFS fs) {
        Runtime rt = Runtime.getSystemRuntime();
        Pointer mem = Memory.allocateDirect(rt, (int) bufsize, false);
        Pointer buf = Memory.allocateDirect(rt, FUSE_BUF_BYTES, true);
        Pointer chp = Memory.allocateDirect(rt, rt.addressSize(), true);
        REQUEST.set(mem);
        while (lib.fuse_session_exited(se) == 0) {
            buf.putLong(0, bufsize); // size
            buf.putInt(8, 0); // flags: data in memory
            buf.putPointer(16, mem);
            buf.putInt(24, 0); // fd
            buf.putLong(32, 0); // pos
            chp.putPointer(0, ch);
            int res = lib.fuse_session_receive_buf(se, buf, chp);
            if (res == -EINTR) {
                continue;
            }
            if (res <= 0) { // 0: the kernel ended the session (unmounted); < 0: -errno
                if (res < 0) {
                    lib.fuse_session_exit(se);
                }
                break;
            }
            if (fs.toLibfuseNodes(mem)) {
                lib.fuse_session_process_buf(se, buf, chp.getPointer(0));
            }
        }
    }

    /**
     * Before libfuse reads the request in {@code req}: remembers the kernel's node id of its file
     * ({@link #KERNEL_NODE}) and replaces the node ids the kernel sent by libfuse's
     * ({@link NodeVersions}): the header's, a LINK's old node, and each node a FORGET or
     * BATCH_FORGET drops (whose lookups are counted off). Returns false when the request must not
     * reach libfuse: a node id nobody knows (answered ESTALE here; libfuse2 would abort the
     * process on it), or a FORGET of nothing libfuse holds.
     */
    private boolean toLibfuseNodes(Pointer req) {
        NodeVersions v = versions;
        long node = req.getLong(IN_HEADER_NODEID);
        int opcode = req.getInt(IN_HEADER_OPCODE);
        KERNEL_NODE.get()[0] = opcode == FUSE_LINK ? req.getLong(IN_HEADER_BYTES) : node;
        if (changesPages(opcode) || opcode == FUSE_FORGET) {
            bumpPageGeneration(node); // and again before its reply ({@link #send}), FORGET has none
        } else if (opcode == FUSE_BATCH_FORGET) {
            for (int i = 0, count = req.getInt(IN_HEADER_BYTES); i < count; i++) {
                bumpPageGeneration(req.getLong(IN_HEADER_BYTES + 8 + 16L * i));
            }
        }
        if (v == null) {
            return true;
        }
        switch (opcode) {
            case FUSE_FORGET -> {
                long to = v.forget(node, req.getLong(IN_HEADER_BYTES)); // struct fuse_forget_in { nlookup }
                if (to < 0) {
                    return false;
                }
                req.putLong(IN_HEADER_NODEID, to);
                return true;
            }
            case FUSE_BATCH_FORGET -> {
                // struct fuse_batch_forget_in { count, dummy }, then count x fuse_forget_one { nodeid, nlookup }
                int count = req.getInt(IN_HEADER_BYTES);
                int kept = 0;
                for (int i = 0; i < count; i++) {
                    long at = IN_HEADER_BYTES + 8 + 16L * i;
                    long lookups = req.getLong(at + 8);
                    long to = v.forget(req.getLong(at), lookups);
                    if (to >= 0) {
                        long dst = IN_HEADER_BYTES + 8 + 16L * kept++;
                        req.putLong(dst, to);
                        req.putLong(dst + 8, lookups);
                    }
                }
                req.putInt(IN_HEADER_BYTES, kept);
                return kept > 0;
            }
            case FUSE_LINK -> {
                long old = req.getLong(IN_HEADER_BYTES);
                long to = v.toLibfuse(old);
                if (to < 0) {
                    return replyError(req, ESTALE);
                }
                req.putLong(IN_HEADER_BYTES, to);
            }
            default -> { }
        }
        long to = v.toLibfuse(node);
        if (to < 0) {
            return replyError(req, ESTALE);
        }
        if (to != node) {
            req.putLong(IN_HEADER_NODEID, to);
        }
        return true;
    }

    /** Answers the request in {@code req} with -{@code errno} on the channel; returns false (not for libfuse). */
    private boolean replyError(Pointer req, int errno) {
        LOG.warn("kernel request {} on unknown node {}: answered errno {}", req.getInt(IN_HEADER_OPCODE),
                req.getLong(IN_HEADER_NODEID), errno);
        Runtime rt = Runtime.getSystemRuntime();
        Pointer mem = Memory.allocateDirect(rt, OUT_HEADER_BYTES + 16, true);
        mem.putInt(0, OUT_HEADER_BYTES); // len
        mem.putInt(OUT_HEADER_ERROR, -errno);
        mem.putLong(OUT_HEADER_UNIQUE, req.getLong(IN_HEADER_UNIQUE));
        Pointer vec = mem.slice(OUT_HEADER_BYTES, 16);
        vec.putPointer(0, mem);
        vec.putLong(8, OUT_HEADER_BYTES);
        LibC libc = replyLibc;
        if (libc != null) {
            libc.writev(replyFd, vec, 1);
        }
        return false;
    }
}
