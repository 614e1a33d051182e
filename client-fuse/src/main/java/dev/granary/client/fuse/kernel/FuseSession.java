package dev.granary.client.fuse.kernel;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import jnr.ffi.Pointer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Serves a {@link LowLevelFs} on a mounted {@link FuseDevice}: a fixed pool of Java threads, each
 * reading a request, calling the filesystem and writing the reply, with no libfuse between the
 * kernel and Java and no callbacks into the JVM (the measured motive: stat of uncached names and
 * reads cost less than through libfuse2's high-level API and jnr-fuse's upcalls, see
 * docs/ARCHITECTURE.md). INIT is answered here: protocol 7.{@value FuseKernel#MINOR} at most,
 * {@code max_write} and, with MAX_PAGES, requests of up to {@code maxRequest} bytes, and the
 * flags {@link LowLevelFs#initFlags} asks for. Ends when the filesystem is unmounted (the device
 * reads ENODEV).
 */
public final class FuseSession {
    private static final Logger LOG = LoggerFactory.getLogger(FuseSession.class);

    /**
     * Sees each request before it is served and each reply before it is written (the raw
     * protocol bytes), as {@code PooledFuseFS} does on libfuse2's channel.
     */
    public interface Interceptor {
        /**
         * Called first on the serving thread; false when the request must not be served (the
         * interceptor answered it itself, or it needs no answer).
         */
        boolean beforeServe(FuseRequest req);

        /**
         * Called with the reply's iovecs ({@code count} of them: header, argument, more) before
         * they are written; may change their bytes.
         */
        void beforeReply(FuseRequest req, Pointer iov, int count);
    }

    private static final Interceptor NONE = new Interceptor() {
        @Override
        public boolean beforeServe(FuseRequest req) {
            return true;
        }

        @Override
        public void beforeReply(FuseRequest req, Pointer iov, int count) {}
    };

    private final FuseDevice device;
    private final LowLevelFs fs;
    private volatile Interceptor interceptor = NONE;
    private final int maxRequest;
    private final List<Thread> threads = new ArrayList<>();
    private final AtomicInteger running = new AtomicInteger();
    private final CompletableFuture<Void> ended = new CompletableFuture<>();
    private volatile int minor;

    /**
     * @param maxRequest the largest READ and WRITE payload the kernel may send, bytes (a multiple
     *                   of 4 KiB, at most 1 MiB: the kernel's FUSE_MAX_MAX_PAGES of 256 pages)
     */
    public FuseSession(FuseDevice device, LowLevelFs fs, int maxRequest) {
        if (maxRequest < 4096 || maxRequest > (1 << 20) || maxRequest % 4096 != 0) {
            throw new IllegalArgumentException("maxRequest must be a multiple of 4 KiB in [4 KiB, 1 MiB], got " + maxRequest);
        }
        this.device = device;
        this.fs = fs;
        this.maxRequest = maxRequest;
    }

    /**
     * What a handler returns when it replies later itself, with {@link #replyLater}: a request
     * that may wait long (F_SETLKW) must not hold one of the serving threads meanwhile.
     */
    public static final int LATER = Integer.MIN_VALUE;

    /**
     * Replies {@code error} (0, or a negative errno) with no payload to request {@code unique},
     * which its handler answered {@link #LATER}. May run on any thread. The kernel refusing it
     * with ENOENT (the request was interrupted and is no longer waited for) is not an error.
     */
    public void replyLater(long unique, int error) {
        FuseReply r = new FuseReply(FuseKernel.OUT_HEADER_BYTES + 8);
        r.reset();
        long w = device.writev(r.iovPointer, r.seal(unique, error));
        if (w < 0 && w != -FuseKernel.ENOENT) {
            LOG.warn("the kernel refused the late reply to request {}: errno {}", unique, -w);
        }
    }

    /** Sets the interceptor (before {@link #start}). */
    public void intercept(Interceptor i) {
        interceptor = i;
    }

    /** Starts {@code count} threads serving requests. */
    public synchronized void start(int count, String namePrefix) {
        for (int i = 0; i < count; i++) {
            Thread t = new Thread(this::serve, namePrefix + i);
            t.setDaemon(true);
            running.incrementAndGet();
            threads.add(t);
            t.start();
        }
    }

    /** Completes once every serving thread has stopped (the filesystem was unmounted). */
    public CompletableFuture<Void> ended() {
        return ended;
    }

    /** The device this session serves. */
    public FuseDevice device() {
        return device;
    }

    /** The protocol minor version agreed at INIT (0 before it). */
    public int minor() {
        return minor;
    }

    private void serve() {
        FuseRequest req = new FuseRequest(maxRequest + 64 * 1024); // a WRITE's payload and its header
        FuseReply reply = new FuseReply(64 * 1024);
        Pointer in = req.pointer;
        try {
            while (true) {
                long n = device.read(in, req.in.capacity());
                if (n < 0) {
                    int e = (int) -n;
                    if (e == FuseKernel.ENOENT || e == FuseKernel.EINTR || e == FuseKernel.EAGAIN) {
                        continue;
                    }
                    if (e != FuseKernel.ENODEV) {
                        LOG.warn("reading /dev/fuse failed (errno {}): this thread stops serving", e);
                    }
                    return;
                }
                handle(req, reply);
            }
        } finally {
            if (running.decrementAndGet() == 0) {
                ended.complete(null);
            }
        }
    }

    private void handle(FuseRequest req, FuseReply reply) {
        Interceptor ic = interceptor;
        if (req.opcode() != FuseKernel.INIT && !ic.beforeServe(req)) {
            return;
        }
        int opcode = req.opcode();
        long node = req.nodeid();
        reply.reset();
        int r;
        try {
            r = switch (opcode) {
                case FuseKernel.INIT -> init(req, reply);
                case FuseKernel.LOOKUP -> fs.lookup(req, node, req.name(0), reply);
                case FuseKernel.FORGET -> {
                    fs.forget(node, req.argLong(FuseKernel.FORGET_IN_NLOOKUP));
                    yield 0;
                }
                case FuseKernel.BATCH_FORGET -> {
                    int count = req.argInt(FuseKernel.BATCH_FORGET_IN_COUNT);
                    for (int i = 0; i < count; i++) {
                        int at = FuseKernel.BATCH_FORGET_FIRST + FuseKernel.FORGET_ONE_BYTES * i;
                        fs.forget(req.argLong(at), req.argLong(at + 8));
                    }
                    yield 0;
                }
                case FuseKernel.GETATTR -> fs.getattr(req, node,
                        (req.argInt(FuseKernel.GETATTR_IN_FLAGS) & FuseKernel.FUSE_GETATTR_FH) != 0 ? req.argLong(FuseKernel.GETATTR_IN_FH) : -1, reply);
                case FuseKernel.OPEN -> fs.open(req, node, req.argInt(FuseKernel.OPEN_IN_FLAGS), reply);
                case FuseKernel.READ -> fs.read(req, node, req.argLong(FuseKernel.READ_IN_FH), req.argLong(FuseKernel.READ_IN_OFFSET),
                        req.argInt(FuseKernel.READ_IN_SIZE), reply);
                case FuseKernel.FLUSH -> fs.flush(req, node, req.argLong(0), reply);
                case FuseKernel.RELEASE -> fs.release(req, node, req.argLong(FuseKernel.RELEASE_IN_FH), reply);
                case FuseKernel.OPENDIR -> fs.opendir(req, node, req.argInt(FuseKernel.OPEN_IN_FLAGS), reply);
                case FuseKernel.READDIR -> fs.readdir(req, node, req.argLong(FuseKernel.READ_IN_FH), req.argLong(FuseKernel.READ_IN_OFFSET),
                        req.argInt(FuseKernel.READ_IN_SIZE), reply);
                case FuseKernel.RELEASEDIR -> fs.releasedir(req, node, req.argLong(FuseKernel.RELEASE_IN_FH), reply);
                case FuseKernel.STATFS -> fs.statfs(req, node, reply);
                case FuseKernel.INTERRUPT -> {
                    // struct fuse_interrupt_in { unique }: the file system may end that request
                    // early with EINTR (a lock wait does); otherwise it runs to its end and the
                    // kernel takes its reply or drops it (ENOENT)
                    fs.interrupt(req.argLong(0));
                    yield 0;
                }
                case FuseKernel.DESTROY -> 0;
                default -> fs.other(req, reply);
            };
        } catch (RuntimeException | Error e) {
            LOG.warn("FUSE request {} on node {} failed: {}", opcode, node, e.toString(), e);
            r = -FuseKernel.EIO;
        }
        if (FuseKernel.noReply(opcode) || r == LATER) {
            return;
        }
        int parts = reply.seal(req.unique(), r > 0 ? -FuseKernel.EIO : r);
        ic.beforeReply(req, reply.iovPointer, parts);
        long w = device.writev(reply.iovPointer, parts);
        if (w < 0 && w != -FuseKernel.ENOENT) { // ENOENT: interrupted, the kernel no longer waits for it
            // a reply the kernel refused (EINVAL: malformed) leaves the caller waiting for ever:
            // answer EIO instead, which always has the right shape
            LOG.warn("the kernel refused the reply to request {} (opcode {}): errno {}; answering EIO", req.unique(), opcode, -w);
            device.writev(reply.iovPointer, reply.seal(req.unique(), -FuseKernel.EIO));
        }
    }

    /** INIT: agrees on the protocol version, request sizes and flags; EPROTO for another major version. */
    private int init(FuseRequest req, FuseReply reply) {
        int major = req.argInt(FuseKernel.INIT_IN_MAJOR);
        int kernelMinor = req.argInt(FuseKernel.INIT_IN_MINOR);
        int kernelFlags = req.argInt(FuseKernel.INIT_IN_FLAGS);
        if (major != FuseKernel.MAJOR) {
            LOG.error("the kernel speaks FUSE protocol {}.{}; this binding speaks {}", major, kernelMinor, FuseKernel.MAJOR);
            return -FuseKernel.EPROTO;
        }
        int agreed = Math.min(kernelMinor, FuseKernel.MINOR);
        minor = agreed;
        int flags = fs.initFlags(kernelFlags) & kernelFlags & ~FuseKernel.INIT_EXT;
        int flags2 = 0;
        if ((kernelFlags & FuseKernel.INIT_EXT) != 0 && req.length() >= FuseKernel.IN_HEADER_BYTES + FuseKernel.INIT_IN_FLAGS2 + 4) {
            int offered2 = req.argInt(FuseKernel.INIT_IN_FLAGS2);
            flags2 = fs.initFlags2(offered2) & offered2;
            if (flags2 != 0) {
                flags |= FuseKernel.INIT_EXT;
            }
        }
        reply.putInt(FuseKernel.MAJOR).putInt(agreed)
                .putInt(Math.min(req.argInt(FuseKernel.INIT_IN_MAX_READAHEAD), maxRequest))
                .putInt(flags);
        reply.out.putShort((short) 64).putShort((short) 48); // max_background, congestion_threshold
        reply.putInt(maxRequest); // max_write
        reply.putInt(1); // time_gran: ns
        reply.out.putShort((short) (maxRequest / 4096)).putShort((short) 0); // max_pages, map_alignment
        reply.putInt(flags2);
        for (int i = 0; i < 7; i++) {
            reply.putInt(0); // max_stack_depth, unused
        }
        LOG.debug("FUSE INIT: kernel 7.{} flags {}, agreed 7.{} flags {}", kernelMinor, Integer.toHexString(kernelFlags),
                agreed, Integer.toHexString(flags));
        return 0;
    }
}
