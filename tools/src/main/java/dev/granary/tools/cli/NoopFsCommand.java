package dev.granary.tools.cli;

import dev.granary.client.fuse.FuseMount;
import dev.granary.client.fuse.PooledFuseFS;
import dev.granary.client.fuse.kernel.FuseDevice;
import dev.granary.client.fuse.kernel.FuseKernel;
import dev.granary.client.fuse.kernel.FuseReply;
import dev.granary.client.fuse.kernel.FuseRequest;
import dev.granary.client.fuse.kernel.FuseSession;
import dev.granary.client.fuse.kernel.LowLevelFs;
import dev.granary.client.vfs.ClientConfig;
import dev.granary.tools.UserError;
import dev.granary.tools.config.Sizes;
import dev.granary.tools.prereq.Prerequisites;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import jnr.ffi.Pointer;
import jnr.ffi.types.off_t;
import jnr.ffi.types.size_t;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import ru.serce.jnrfuse.ErrorCodes;
import ru.serce.jnrfuse.FuseFillDir;
import ru.serce.jnrfuse.struct.FileStat;
import ru.serce.jnrfuse.struct.FuseFileInfo;

/**
 * {@code granary noopfs MOUNT} (hidden; used by {@code bench/compare.sh}): mounts a jnr-fuse
 * filesystem that does nothing but serve one read-only file of zeros, {@code /zeros}, with the
 * same FUSE options Granary's client mounts with ({@link FuseMount#options}). Reading it measures
 * the ceiling of the FUSE binding itself (kernel FUSE + libfuse2 + jnr-fuse upcalls), with no
 * Granary work behind it; stat of names in {@code /names} (each an empty file) measures the
 * binding's ceiling for lookups, and reading whole files in {@code /small} (every name there a
 * file of {@code --small-size} zeros) its ceiling for small files (a LOOKUP, OPEN, READs, FLUSH
 * and RELEASE each). Serves until SIGTERM/Ctrl-C, then unmounts.
 */
@Command(name = "noopfs", hidden = true, mixinStandardHelpOptions = true,
        description = {"Mount a no-op FUSE filesystem with Granary's FUSE options (the FUSE binding's ceiling).",
                "It holds one file of zeros, /zeros, for reads; every name in /names is an empty file, for stat;",
                "every name in /small is a file of --small-size zeros, for small-file reads.",
                "Serves until SIGTERM/Ctrl-C.", "",
                "Example:  granary noopfs /tmp/noop --size 4g   then   dd if=/tmp/noop/zeros of=/dev/null bs=1M"})
public final class NoopFsCommand implements Callable<Integer> {
    @Parameters(index = "0", paramLabel = "MOUNT", description = "Mount point; must exist and be empty.")
    Path mount;

    @Option(names = "--size", paramLabel = "SIZE", description = "Size of /zeros, e.g. 4g, 512m (default: ${DEFAULT-VALUE}).")
    String size = "4g";

    @Option(names = "--small-size", paramLabel = "SIZE", description = "Size of every file in /small (default: ${DEFAULT-VALUE}).")
    String smallSize = "100k";

    @Option(names = "--kernel-cache", description = "Add -o kernel_cache (keep the page cache across opens) to Granary's options.")
    boolean kernelCache;

    @Option(names = "--binding", paramLabel = "BINDING", description = {"FUSE binding: jnr (jnr-fuse over libfuse2, Granary's mount today) "
            + "direct (the kernel protocol on /dev/fuse, no libfuse; needs root), or direct-path (the same through the path "
            + "layer Granary's mount uses on it) (default: ${DEFAULT-VALUE})."})
    String binding = "jnr";

    @Override
    public Integer call() throws Exception {
        long bytes;
        try {
            bytes = Sizes.parseBytes(size);
        } catch (IllegalArgumentException e) {
            throw new UserError("--size: " + e.getMessage());
        }
        long small;
        try {
            small = Sizes.parseBytes(smallSize);
        } catch (IllegalArgumentException e) {
            throw new UserError("--small-size: " + e.getMessage());
        }
        Path mp = mount.toAbsolutePath().normalize();
        if (!binding.equals("jnr") && !binding.equals("direct") && !binding.equals("direct-path")) {
            throw new UserError("--binding: expected jnr, direct or direct-path, got '" + binding + "'");
        }
        if (binding.startsWith("direct")) {
            return serveDirect(mp, bytes, small);
        }
        Prerequisites.ensureFuse();
        FuseMount.checkMountPoint(mp);
        FuseMount.checkFuseAvailable();
        List<String> opts = new ArrayList<>(FuseMount.options(ClientConfig.defaults(), FuseMount.isRoot(), false));
        // The same fsname/subtype as Granary would make this mount look like a real Granary mount.
        opts.replaceAll(o -> o.equals("fsname=granary") ? "fsname=granary-noop" : o.equals("subtype=granary") ? "subtype=granary-noop" : o);
        if (kernelCache) {
            opts.add("-o");
            opts.add("kernel_cache");
        }
        ZeroFs fs = new ZeroFs(bytes, small);
        fs.mount(mp, false, false, opts.toArray(new String[0]));
        long deadline = System.currentTimeMillis() + 10_000;
        while (!FuseMount.isMounted(mp)) {
            if (System.currentTimeMillis() > deadline) {
                fs.umount();
                throw new UserError("noopfs mount of " + mp + " did not come up within 10 s");
            }
            Thread.sleep(20);
        }
        FuseMount.raiseKernelReadahead(mp, ClientConfig.defaults().fuseMaxRead()); // as Granary's mount
        System.out.println("noopfs mounted at " + mp + " (/zeros, " + bytes + " bytes) with " + String.join(" ", opts) + "; Ctrl-C to unmount");
        System.out.flush();
        ConfigOption.awaitShutdown(fs::umount, fs.sessionEnded(), () -> System.out.println("noopfs: " + mp + " was unmounted; stopping"));
        return 0;
    }

    /**
     * The same filesystem on Granary's /dev/fuse binding ({@link FuseSession}): kernel options as
     * Granary's mount ({@code allow_other}, {@code default_permissions}, {@code max_read}), 1 MiB
     * requests, {@link PooledFuseFS#DEFAULT_THREADS} threads, entries and attributes cached for
     * the client's cache timeout, the same kernel readahead.
     */
    private Integer serveDirect(Path mp, long bytes, long small) throws Exception {
        if (kernelCache) {
            throw new UserError("--kernel-cache: only with --binding jnr");
        }
        FuseMount.checkMountPoint(mp);
        ClientConfig config = ClientConfig.defaults();
        int maxRead = config.fuseMaxRead();
        FuseDevice dev;
        try {
            dev = FuseDevice.mount(mp, "granary-noop", "granary-noop", FuseMount.kernelOptions(FuseMount.options(config, FuseMount.isRoot(), false)));
        } catch (FuseMount.MountException e) {
            throw new UserError(e.getMessage());
        }
        long valid = config.cacheTimeout().toNanos();
        LowLevelFs fs = binding.equals("direct-path") ? new dev.granary.client.fuse.kernel.PathFsAdapter(new ZeroFs(bytes, small), valid, valid)
                : new ZeroLowLevelFs(bytes, small, valid);
        FuseSession session = new FuseSession(dev, fs, Math.min(maxRead, 1 << 20));
        session.start(PooledFuseFS.DEFAULT_THREADS, "noopfs-fuse-");
        Files.readAttributes(mp, java.nio.file.attribute.BasicFileAttributes.class); // waits for INIT
        FuseMount.raiseKernelReadahead(mp, maxRead);
        System.out.println("noopfs mounted at " + mp + " (/zeros, " + bytes + " bytes) on the /dev/fuse binding, protocol 7."
                + session.minor() + "; Ctrl-C to unmount");
        System.out.flush();
        ConfigOption.awaitShutdown(dev::unmount, session.ended(), () -> System.out.println("noopfs: " + mp + " was unmounted; stopping"));
        dev.close();
        return 0;
    }

    /**
     * The no-op filesystem on node ids: node 1 the root, 2 {@code /zeros}, 3 {@code /names}, 4
     * {@code /small}; each name in {@code /names} a node of its own from 1,000 up, an empty
     * file, and each name in {@code /small} one from 2^40 up, a file of {@code smallSize} zeros.
     */
    static final class ZeroLowLevelFs implements LowLevelFs {
        private static final long ROOT = 1, ZEROS = 2, NAMES = 3, SMALL = 4, FIRST_NAME = 1_000, FIRST_SMALL = 1L << 40;
        /** Zeros the READ replies point at (never written). */
        private static final java.nio.ByteBuffer ZERO_BYTES = java.nio.ByteBuffer.allocateDirect(1 << 20);
        private static final long ZERO_ADDRESS = jnr.ffi.Pointer.wrap(jnr.ffi.Runtime.getSystemRuntime(), ZERO_BYTES).address();
        private final long size;
        private final long smallSize;
        private final long validNs;
        private final java.util.concurrent.ConcurrentHashMap<String, Long> names = new java.util.concurrent.ConcurrentHashMap<>();
        private final java.util.concurrent.atomic.AtomicLong nextName = new java.util.concurrent.atomic.AtomicLong(FIRST_NAME);
        private final java.util.concurrent.ConcurrentHashMap<String, Long> smalls = new java.util.concurrent.ConcurrentHashMap<>();
        private final java.util.concurrent.atomic.AtomicLong nextSmall = new java.util.concurrent.atomic.AtomicLong(FIRST_SMALL);

        ZeroLowLevelFs(long size, long smallSize, long validNs) {
            this.size = size;
            this.smallSize = smallSize;
            this.validNs = validNs;
        }

        /** Bytes of node {@code node}. */
        private long sizeOf(long node) {
            return node == ZEROS ? size : node >= FIRST_SMALL ? smallSize : 0;
        }

        private void attr(FuseReply r, long node) {
            boolean dir = node == ROOT || node == NAMES || node == SMALL;
            long sz = sizeOf(node);
            r.attr(node, sz, (sz + 511) / 512, 0, 0, 0, dir ? FileStat.S_IFDIR | 0755 : FileStat.S_IFREG | 0444, dir ? 2 : 1, 0, 0, 0, 4096);
        }

        @Override
        public int lookup(FuseRequest req, long parent, String name, FuseReply reply) {
            long node;
            if (parent == ROOT) {
                node = name.equals("zeros") ? ZEROS : name.equals("names") ? NAMES : name.equals("small") ? SMALL : -1;
            } else if (parent == NAMES) {
                node = names.computeIfAbsent(name, k -> nextName.getAndIncrement());
            } else if (parent == SMALL) {
                node = smalls.computeIfAbsent(name, k -> nextSmall.getAndIncrement());
            } else {
                node = -1;
            }
            if (node < 0) {
                return -FuseKernel.ENOENT;
            }
            reply.entry(node, 0, validNs, validNs);
            attr(reply, node);
            return 0;
        }

        @Override
        public int getattr(FuseRequest req, long nodeid, long fh, FuseReply reply) {
            reply.attrOut(validNs);
            attr(reply, nodeid);
            return 0;
        }

        @Override
        public int open(FuseRequest req, long nodeid, int flags, FuseReply reply) {
            reply.open(nodeid, 0);
            return 0;
        }

        @Override
        public int read(FuseRequest req, long nodeid, long fh, long offset, int len, FuseReply reply) {
            long sz = sizeOf(nodeid);
            long n = Math.max(0, Math.min(Math.min(len, sz - offset), ZERO_BYTES.capacity()));
            if (n > 0) {
                reply.appendNative(ZERO_ADDRESS, n);
            }
            return 0;
        }

        @Override
        public int opendir(FuseRequest req, long nodeid, int flags, FuseReply reply) {
            reply.open(nodeid, 0);
            return 0;
        }

        @Override
        public int readdir(FuseRequest req, long nodeid, long fh, long offset, int len, FuseReply reply) {
            if (nodeid != ROOT) {
                return 0; // /names and /small list nothing: their names exist only when looked up
            }
            String[] entries = {".", "..", "zeros", "names", "small"};
            long[] nodes = {ROOT, ROOT, ZEROS, NAMES, SMALL};
            for (int i = (int) offset; i < entries.length; i++) {
                if (!reply.dirent(nodes[i], i + 1, nodes[i] == ZEROS ? FuseKernel.DT_REG : FuseKernel.DT_DIR, entries[i], len)) {
                    break;
                }
            }
            return 0;
        }
    }

    /**
     * The no-op filesystem: a root directory holding one read-only file of zeros, a directory
     * {@code /names} in which every name is an empty file (its lookups measure the binding's
     * ceiling for stat), and a directory {@code /small} in which every name is a file of
     * {@code smallSize} zeros.
     */
    static final class ZeroFs extends PooledFuseFS {
        private static final String FILE = "/zeros";
        private static final String NAMES = "/names";
        private static final String SMALL = "/small";
        private final long size;
        private final long smallSize;

        ZeroFs(long size, long smallSize) {
            super(PooledFuseFS.DEFAULT_THREADS); // the same binding and threads as Granary's mount
            this.size = size;
            this.smallSize = smallSize;
        }

        /** Whether {@code path} is a name directly in directory {@code dir}. */
        private static boolean in(String dir, String path) {
            return path.startsWith(dir + "/") && path.length() > dir.length() + 1 && path.indexOf('/', dir.length() + 1) < 0;
        }

        /** Bytes of file {@code path} (-1: not a file of this filesystem). */
        private long sizeOf(String path) {
            return path.equals(FILE) ? size : in(SMALL, path) ? smallSize : in(NAMES, path) ? 0 : -1;
        }

        @Override
        public int getattr(String path, FileStat stat) {
            if (path.equals("/") || path.equals(NAMES) || path.equals(SMALL)) {
                stat.st_mode.set(FileStat.S_IFDIR | 0755);
                stat.st_nlink.set(2);
                return 0;
            }
            long sz = sizeOf(path);
            if (sz < 0) {
                return -ErrorCodes.ENOENT();
            }
            stat.st_mode.set(FileStat.S_IFREG | 0444);
            stat.st_nlink.set(1);
            stat.st_size.set(sz);
            return 0;
        }

        @Override
        public int readdir(String path, Pointer buf, FuseFillDir filter, @off_t long offset, FuseFileInfo fi) {
            if (path.equals(NAMES) || path.equals(SMALL)) { // their names exist only when looked up
                filter.apply(buf, ".", null, 0);
                filter.apply(buf, "..", null, 0);
                return 0;
            }
            if (!path.equals("/")) {
                return sizeOf(path) >= 0 ? -ErrorCodes.ENOTDIR() : -ErrorCodes.ENOENT();
            }
            filter.apply(buf, ".", null, 0);
            filter.apply(buf, "..", null, 0);
            filter.apply(buf, FILE.substring(1), null, 0);
            filter.apply(buf, NAMES.substring(1), null, 0);
            filter.apply(buf, SMALL.substring(1), null, 0);
            return 0;
        }

        @Override
        public int open(String path, FuseFileInfo fi) {
            return sizeOf(path) >= 0 ? 0 : -ErrorCodes.ENOENT();
        }

        @Override
        public int read(String path, Pointer buf, @size_t long len, @off_t long offset, FuseFileInfo fi) {
            long sz = sizeOf(path);
            if (offset >= sz) {
                return 0;
            }
            int n = (int) Math.min(Math.min(len, sz - offset), Integer.MAX_VALUE);
            buf.setMemory(0, n, (byte) 0);
            return n;
        }
    }
}
