package dev.granary.client.fuse;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import jnr.ffi.LibraryLoader;
import jnr.ffi.Memory;
import jnr.ffi.Pointer;
import jnr.ffi.Runtime;
import jnr.ffi.Struct;
import jnr.ffi.annotations.IgnoreError;
import jnr.ffi.byref.IntByReference;
import jnr.ffi.byref.PointerByReference;
import jnr.ffi.types.size_t;
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
    }

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
        LibFuseSession lib;
        Pointer fuse;
        PointerByReference mp = new PointerByReference();
        try {
            lib = load();
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
        Thread t = new Thread(() -> serve(lib, fuse, mountpoint), "fuse-session " + mountPoint);
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

    /** Runs the pool until the session ends (unmount), then tears the filesystem down. */
    private void serve(LibFuseSession lib, Pointer fuse, Pointer mountpoint) {
        Pointer se = lib.fuse_get_session(fuse);
        Pointer ch = lib.fuse_session_next_chan(se, null);
        long bufsize = lib.fuse_chan_bufsize(ch);
        List<Thread> workers = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            Thread w = new Thread(() -> work(lib, se, ch, bufsize), "fuse-" + i);
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
        try {
            lib.fuse_teardown(fuse, mountpoint);
        } catch (Throwable t) {
            LOG.warn("tearing down the FUSE session of {} failed: {}", mountPoint, t.toString());
        }
        mounted.set(false);
    }

    /** One worker: receive a request, process it (the callbacks run here), until the session ends. */
    private static void work(LibFuseSession lib, Pointer se, Pointer ch, long bufsize) {
        Runtime rt = Runtime.getSystemRuntime();
        Pointer mem = Memory.allocateDirect(rt, (int) bufsize, false);
        Pointer buf = Memory.allocateDirect(rt, FUSE_BUF_BYTES, true);
        Pointer chp = Memory.allocateDirect(rt, rt.addressSize(), true);
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
            lib.fuse_session_process_buf(se, buf, chp.getPointer(0));
        }
    }
}
