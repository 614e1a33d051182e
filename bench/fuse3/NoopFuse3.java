import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A no-op FUSE filesystem on libfuse3's low-level (inode) API, called through Java's FFM API
 * (java.lang.foreign, JDK 22+): the ceiling of a FUSE binding Granary could use instead of
 * jnr-fuse over libfuse2's high-level (path) API. It serves what {@code granary noopfs} serves, so
 * the two ceilings compare on the same work: {@code /zeros} (a read-only file of zeros, for dd) and
 * {@code /names} (every name in it is an empty file, for stat loops).
 *
 * <p>Not part of Granary's build (which targets Java 21, where FFM is a preview): run it with the
 * JDK 25 source launcher, as {@code bench/compare.sh} does:
 * <pre>
 *   java --enable-native-access=ALL-UNNAMED bench/fuse3/NoopFuse3.java MOUNT [--size BYTES] [--kernel-cache] [--lookup-us N]
 * </pre>
 * It mounts with Granary's FUSE options where libfuse3 has them (allow_other, default_permissions,
 * max_read 1 MiB, attribute and entry timeouts of 1 s, no negative caching, kernel readahead raised
 * to 1 MiB), serves requests on 32 Java threads ({@code fuse_session_receive_buf} then
 * {@code fuse_session_process_buf}, as Granary's PooledFuseFS does on libfuse2), and unmounts on
 * SIGTERM/Ctrl-C. {@code --lookup-us N} makes every lookup take N microseconds more (a stand-in for
 * an MDS round trip), to see how many lookups in one directory the kernel sends at once. Needs root (libfuse3 mounts without fusermount3) and libfuse3.so.3 (Debian
 * package libfuse3-3). Struct layouts are those of libfuse 3.14 on x86_64 Linux
 * (fuse_lowlevel.h, fuse_common.h; struct stat from the x86_64 ABI).
 */
public final class NoopFuse3 {
    private static final Linker LINKER = Linker.nativeLinker();
    private static final long ROOT = 1, ZEROS = 2, NAMES = 3, FIRST_NAME = 1_000;
    private static final int ENOENT = 2, EINTR = 4, ENOTDIR = 20, EISDIR = 21;
    private static final int S_IFDIR = 0040000, S_IFREG = 0100000;
    private static final double TIMEOUT_S = 1.0;
    /** sizeof(struct stat) on x86_64, and the offsets of the fields set here. */
    private static final int STAT_BYTES = 144, ST_INO = 8, ST_NLINK = 16, ST_MODE = 24, ST_SIZE = 48, ST_BLKSIZE = 56;
    /** struct fuse_entry_param: ino, generation, attr (struct stat), attr_timeout, entry_timeout. */
    private static final int ENTRY_BYTES = 176, E_ATTR = 16, E_ATTR_TIMEOUT = 160, E_ENTRY_TIMEOUT = 168;
    /** struct fuse_file_info: the bit field word after flags holds direct_io (bit 1) and keep_cache (bit 2). */
    private static final int FI_BITS = 4, KEEP_CACHE_BIT = 1 << 2;
    /** struct fuse_conn_info: proto_major, proto_minor, max_write, max_read, max_readahead, ... (u32 each). */
    private static final int CONN_BYTES = 40, CONN_MAX_READ = 12, CONN_MAX_READAHEAD = 16, CONN_CAPABLE = 20, CONN_WANT = 24;
    /** struct fuse_buf: size, flags, mem, fd, pos. */
    private static final int FUSE_BUF_BYTES = 40;
    /** Slots of struct fuse_lowlevel_ops (libfuse 3.14 has 44 function pointers). */
    private static final int OPS_SLOTS = 44, OP_INIT = 0, OP_LOOKUP = 2, OP_GETATTR = 4, OP_OPEN = 14, OP_READ = 15, OP_READDIR = 21;
    private static final int THREADS = 32;
    private static final int MAX_READ = 1 << 20;

    private static MethodHandle replyEntry, replyAttr, replyOpen, replyBuf, replyErr, addDirentry;
    private static long size;
    private static boolean keepCache;
    /** Time each lookup takes before it answers (--lookup-us): an MDS round trip's stand-in. */
    private static long lookupNanos;
    private static MemorySegment zeros;
    private static final ConcurrentHashMap<String, Long> NAME_INOS = new ConcurrentHashMap<>();
    private static final AtomicLong NEXT_INO = new AtomicLong(FIRST_NAME);
    private static final ThreadLocal<MemorySegment> SCRATCH =
            ThreadLocal.withInitial(() -> Arena.global().allocate(ENTRY_BYTES + 64, 8));

    public static void main(String[] args) throws Throwable {
        if (args.length < 1) {
            System.err.println("usage: NoopFuse3 MOUNT [--size BYTES] [--kernel-cache]");
            System.exit(2);
        }
        Path mount = Path.of(args[0]).toAbsolutePath().normalize();
        size = 4L << 30;
        for (int i = 1; i < args.length; i++) {
            switch (args[i]) {
                case "--size" -> size = Long.parseLong(args[++i]);
                case "--kernel-cache" -> keepCache = true;
                case "--lookup-us" -> lookupNanos = Long.parseLong(args[++i]) * 1_000;
                default -> {
                    System.err.println("NoopFuse3: unknown argument " + args[i]);
                    System.exit(2);
                }
            }
        }
        Arena arena = Arena.global();
        SymbolLookup lib = SymbolLookup.libraryLookup("libfuse3.so.3", arena);
        replyEntry = fn(lib, "fuse_reply_entry", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS));
        replyAttr = fn(lib, "fuse_reply_attr", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_DOUBLE));
        replyOpen = fn(lib, "fuse_reply_open", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS));
        replyBuf = fn(lib, "fuse_reply_buf", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
        replyErr = fn(lib, "fuse_reply_err", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
        addDirentry = fn(lib, "fuse_add_direntry", FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.ADDRESS,
                ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
        MethodHandle sessionNew = fn(lib, "fuse_session_new", FunctionDescriptor.of(ValueLayout.ADDRESS,
                ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS));
        MethodHandle sessionMount = fn(lib, "fuse_session_mount", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS));
        MethodHandle receiveBuf = fn(lib, "fuse_session_receive_buf", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS));
        MethodHandle processBuf = fn(lib, "fuse_session_process_buf", FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.ADDRESS));
        MethodHandle exited = fn(lib, "fuse_session_exited", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS));
        MethodHandle exit = fn(lib, "fuse_session_exit", FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));
        MethodHandle unmount = fn(lib, "fuse_session_unmount", FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));

        zeros = arena.allocate(MAX_READ, 4096); // zero-filled by FFM

        MemorySegment ops = arena.allocate((long) OPS_SLOTS * 8, 8);
        MethodHandles.Lookup l = MethodHandles.lookup();
        ops.setAtIndex(ValueLayout.ADDRESS, OP_INIT, upcall(l, "init", MethodType.methodType(void.class, MemorySegment.class, MemorySegment.class),
                FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.ADDRESS)));
        ops.setAtIndex(ValueLayout.ADDRESS, OP_LOOKUP, upcall(l, "lookup", MethodType.methodType(void.class, MemorySegment.class, long.class, MemorySegment.class),
                FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS)));
        ops.setAtIndex(ValueLayout.ADDRESS, OP_GETATTR, upcall(l, "getattr", MethodType.methodType(void.class, MemorySegment.class, long.class, MemorySegment.class),
                FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS)));
        ops.setAtIndex(ValueLayout.ADDRESS, OP_OPEN, upcall(l, "open", MethodType.methodType(void.class, MemorySegment.class, long.class, MemorySegment.class),
                FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS)));
        ops.setAtIndex(ValueLayout.ADDRESS, OP_READ, upcall(l, "read", MethodType.methodType(void.class, MemorySegment.class, long.class, long.class, long.class, MemorySegment.class),
                FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS)));
        ops.setAtIndex(ValueLayout.ADDRESS, OP_READDIR, upcall(l, "readdir", MethodType.methodType(void.class, MemorySegment.class, long.class, long.class, long.class, MemorySegment.class),
                FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS)));

        String[] argv = {"noopfuse3", "-o", "fsname=granary-noop3,subtype=granary-noop3,allow_other,default_permissions,max_read=" + MAX_READ};
        MemorySegment argvSeg = arena.allocate(ValueLayout.ADDRESS, argv.length + 1);
        for (int i = 0; i < argv.length; i++) {
            argvSeg.setAtIndex(ValueLayout.ADDRESS, i, arena.allocateFrom(argv[i]));
        }
        MemorySegment fuseArgs = arena.allocate(24, 8); // struct fuse_args { int argc; char **argv; int allocated; }
        fuseArgs.set(ValueLayout.JAVA_INT, 0, argv.length);
        fuseArgs.set(ValueLayout.ADDRESS, 8, argvSeg);
        MemorySegment se = (MemorySegment) sessionNew.invokeExact(fuseArgs, ops, (long) OPS_SLOTS * 8, MemorySegment.NULL);
        if (se.equals(MemorySegment.NULL)) {
            System.err.println("NoopFuse3: fuse_session_new failed (options?)");
            System.exit(1);
        }
        int rc = (int) sessionMount.invokeExact(se, arena.allocateFrom(mount.toString()));
        if (rc != 0) {
            System.err.println("NoopFuse3: fuse_session_mount of " + mount + " failed: " + rc);
            System.exit(1);
        }
        CountDownLatch done = new CountDownLatch(THREADS);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            Thread th = new Thread(() -> {
                MemorySegment buf = Arena.global().allocate(FUSE_BUF_BYTES, 8); // mem NULL: libfuse allocates it
                try {
                    while ((int) exited.invokeExact(se) == 0) {
                        int n = (int) receiveBuf.invokeExact(se, buf);
                        if (n == -EINTR) {
                            continue;
                        }
                        if (n <= 0) {
                            break;
                        }
                        processBuf.invokeExact(se, buf);
                    }
                } catch (Throwable e) {
                    e.printStackTrace();
                } finally {
                    done.countDown();
                }
            }, "fuse3-" + t);
            th.setDaemon(true);
            th.start();
            threads.add(th);
        }
        raiseReadahead(mount);
        System.out.println("noopfuse3 mounted at " + mount + " (/zeros, " + size + " bytes; keep_cache " + keepCache + "); Ctrl-C to unmount");
        System.out.flush();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                exit.invokeExact(se);
                unmount.invokeExact(se);
            } catch (Throwable e) {
                e.printStackTrace();
            }
        }));
        done.await();
    }

    private static MethodHandle fn(SymbolLookup lib, String name, FunctionDescriptor d) {
        return LINKER.downcallHandle(lib.find(name).orElseThrow(() -> new IllegalStateException("libfuse3 has no " + name)), d);
    }

    /**
     * An upcall stub for the static method {@code name}. A request handler (its first parameter is
     * the fuse_req_t) is wrapped so that whatever it throws is answered with EIO: an exception must
     * not leave an upcall (the JVM would exit).
     */
    private static MemorySegment upcall(MethodHandles.Lookup l, String name, MethodType type, FunctionDescriptor d) throws ReflectiveOperationException {
        MethodHandle target = l.findStatic(NoopFuse3.class, name, type);
        if (!name.equals("init")) {
            target = MethodHandles.catchException(target, Throwable.class,
                    l.findStatic(NoopFuse3.class, "failed", MethodType.methodType(void.class, Throwable.class, MemorySegment.class)));
        }
        return LINKER.upcallStub(target, d, Arena.global());
    }

    /** What a request handler threw: printed, and the request answered with EIO. */
    static void failed(Throwable e, MemorySegment req) {
        e.printStackTrace();
        try {
            int r = (int) replyErr.invokeExact(req, 5);
        } catch (Throwable ignored) {
            // the request stays unanswered; nothing more to do
        }
    }

    private static void fillStat(MemorySegment st, long ino) {
        st.fill((byte) 0);
        st.set(ValueLayout.JAVA_LONG, ST_INO, ino);
        st.set(ValueLayout.JAVA_LONG, ST_BLKSIZE, 4096);
        if (ino == ROOT || ino == NAMES) {
            st.set(ValueLayout.JAVA_INT, ST_MODE, S_IFDIR | 0755);
            st.set(ValueLayout.JAVA_LONG, ST_NLINK, 2);
        } else {
            st.set(ValueLayout.JAVA_INT, ST_MODE, S_IFREG | 0444);
            st.set(ValueLayout.JAVA_LONG, ST_NLINK, 1);
            st.set(ValueLayout.JAVA_LONG, ST_SIZE, ino == ZEROS ? size : 0);
        }
    }

    private static boolean known(long ino) {
        return ino == ROOT || ino == ZEROS || ino == NAMES || ino >= FIRST_NAME;
    }

    /** init(userdata, conn): max_read and max_readahead of 1 MiB (libfuse3 wants max_read as in the mount options). */
    static void init(MemorySegment userdata, MemorySegment conn) {
        MemorySegment c = conn.reinterpret(CONN_BYTES);
        c.set(ValueLayout.JAVA_INT, CONN_MAX_READ, MAX_READ);
        c.set(ValueLayout.JAVA_INT, CONN_MAX_READAHEAD, MAX_READ);
        int capable = c.get(ValueLayout.JAVA_INT, CONN_CAPABLE);
        int want = c.get(ValueLayout.JAVA_INT, CONN_WANT);
        System.out.printf("noopfuse3: kernel capable 0x%x, libfuse wants 0x%x%n", capable, want);
    }

    /** lookup(req, parent, name): an entry with 1 s attribute and entry timeouts, or ENOENT. */
    static void lookup(MemorySegment req, long parent, MemorySegment name) throws Throwable {
        String n = name.reinterpret(Long.MAX_VALUE).getString(0);
        if (lookupNanos > 0) {
            java.util.concurrent.locks.LockSupport.parkNanos(lookupNanos);
        }
        long ino;
        if (parent == ROOT) {
            ino = n.equals("zeros") ? ZEROS : n.equals("names") ? NAMES : 0;
        } else if (parent == NAMES) {
            ino = NAME_INOS.computeIfAbsent(n, k -> NEXT_INO.getAndIncrement());
        } else {
            ino = 0;
        }
        if (ino == 0) {
            int r = (int) replyErr.invokeExact(req, ENOENT);
            return;
        }
        MemorySegment e = SCRATCH.get().asSlice(0, ENTRY_BYTES);
        e.fill((byte) 0);
        e.set(ValueLayout.JAVA_LONG, 0, ino);
        fillStat(e.asSlice(E_ATTR, STAT_BYTES), ino);
        e.set(ValueLayout.JAVA_DOUBLE, E_ATTR_TIMEOUT, TIMEOUT_S);
        e.set(ValueLayout.JAVA_DOUBLE, E_ENTRY_TIMEOUT, TIMEOUT_S);
        int r = (int) replyEntry.invokeExact(req, e);
    }

    /** getattr(req, ino, fi). */
    static void getattr(MemorySegment req, long ino, MemorySegment fi) throws Throwable {
        if (!known(ino)) {
            int r = (int) replyErr.invokeExact(req, ENOENT);
            return;
        }
        MemorySegment st = SCRATCH.get().asSlice(0, STAT_BYTES);
        fillStat(st, ino);
        int r = (int) replyAttr.invokeExact(req, st, TIMEOUT_S);
    }

    /** open(req, ino, fi): files only; keep_cache with --kernel-cache. */
    static void open(MemorySegment req, long ino, MemorySegment fi) throws Throwable {
        if (ino == ROOT || ino == NAMES) {
            int r = (int) replyErr.invokeExact(req, EISDIR);
            return;
        }
        MemorySegment f = fi.reinterpret(40);
        if (keepCache) {
            f.set(ValueLayout.JAVA_INT, FI_BITS, f.get(ValueLayout.JAVA_INT, FI_BITS) | KEEP_CACHE_BIT);
        }
        int r = (int) replyOpen.invokeExact(req, f);
    }

    /** read(req, ino, size, off, fi): zeros up to the file's size. */
    static void read(MemorySegment req, long ino, long len, long off, MemorySegment fi) throws Throwable {
        long fileSize = ino == ZEROS ? size : 0;
        long n = Math.max(0, Math.min(Math.min(len, MAX_READ), fileSize - off));
        int r = (int) replyBuf.invokeExact(req, zeros, n);
    }

    /** readdir(req, ino, size, off, fi): the root lists zeros and names; /names lists nothing. */
    static void readdir(MemorySegment req, long ino, long len, long off, MemorySegment fi) throws Throwable {
        if (ino != ROOT && ino != NAMES) {
            int r = (int) replyErr.invokeExact(req, ENOTDIR);
            return;
        }
        String[] names = ino == ROOT ? new String[] {".", "..", "zeros", "names"} : new String[] {".", ".."};
        long[] inos = ino == ROOT ? new long[] {ROOT, ROOT, ZEROS, NAMES} : new long[] {NAMES, ROOT};
        try (Arena a = Arena.ofConfined()) {
            MemorySegment buf = a.allocate(Math.max(len, 1));
            MemorySegment st = a.allocate(STAT_BYTES, 8);
            long used = 0;
            for (int i = (int) off; i < names.length; i++) {
                fillStat(st, inos[i]);
                MemorySegment nm = a.allocateFrom(names[i]);
                long need = (long) addDirentry.invokeExact(req, buf.asSlice(used), len - used, nm, st, (long) (i + 1));
                if (need > len - used) {
                    break;
                }
                used += need;
            }
            int r = (int) replyBuf.invokeExact(req, buf, used);
        }
    }

    /** As Granary's mount: the kernel reads ahead max_read (its bdi's read_ahead_kb), set after INIT. */
    private static void raiseReadahead(Path mount) {
        try {
            Files.readAttributes(mount, java.nio.file.attribute.BasicFileAttributes.class); // waits for INIT
            for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
                String[] f = line.split(" ");
                if (f.length > 4 && f[4].equals(mount.toString())) {
                    Path knob = Path.of("/sys/class/bdi", f[2], "read_ahead_kb");
                    Files.writeString(knob, Integer.toString(MAX_READ / 1024));
                }
            }
        } catch (Exception e) {
            System.err.println("NoopFuse3: kernel readahead left as it is: " + e);
        }
    }
}
