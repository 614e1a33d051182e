package dev.granary.client.fuse;

import dev.granary.client.vfs.ClientConfig;
import dev.granary.client.vfs.GranaryVfs;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Mounts a {@link GranaryVfs} with FUSE and unmounts it: through Granary's /dev/fuse binding
 * ({@code client/fuse/kernel}) when running as root, else through jnr-fuse over libfuse2
 * ({@link #directBinding}).
 *
 * <pre>{@code
 * try (FuseMount m = FuseMount.mount(vfs, Path.of("/mnt/train"), config)) {
 *     ... // the directory now serves Granary
 * }   // unmounted
 * }</pre>
 *
 * <p>Mount options: {@code fsname=granary}, {@code subtype=granary}, {@code use_ino},
 * {@code big_writes}, {@code max_read}/{@code max_write} from the config (default 1 MiB),
 * {@code entry_timeout} and {@code attr_timeout} = {@link ClientConfig#cacheTimeout()} (a stat is
 * one LOOKUP round trip, as the kernel keeps the attributes the lookup returned; every open fetches
 * fresh attributes from the MDS and then tells the kernel to forget the ones it cached, see
 * {@link PooledFuseFS#invalidateKernelAttributesOfRequestFile()}: so an open sees the size another
 * client closed, instead of a size the kernel cached before that close), {@code negative_timeout=0},
 * {@code default_permissions}
 * (the kernel checks permissions, search permission of every directory of a path included, from
 * the attributes it caches; Granary checks again at the MDS), and
 * {@code allow_other} when {@link ClientConfig#allowOther()} is set and we run as root (or
 * /etc/fuse.conf has {@code user_allow_other}). The page cache of a file is kept across opens
 * while it holds the version each open read from the MDS, and dropped at the open otherwise
 * (close-to-open revalidation), when {@link ClientConfig#keepCache()}: decided by
 * {@link GranaryFuse} at each open, not by libfuse's {@code auto_cache}.
 *
 * <p>Errors: {@link MountException} with a one-line message when the mount point is missing,
 * not a directory or not empty, when /dev/fuse or libfuse2 is missing, or when the mount does
 * not come up within 10 s.
 */
public final class FuseMount implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(FuseMount.class);
    private static final long LIVE_TIMEOUT_MS = 10_000;

    private final GranaryFuse fs;
    private final Path mountPoint;
    private volatile boolean mounted;

    /** A failed mount or unmount, with a one-line message for the CLI. */
    public static final class MountException extends RuntimeException {
        /** An error with a one-line message. */
        public MountException(String message) {
            super(message);
        }

        /** An error with a one-line message and its cause. */
        public MountException(String message, Throwable cause) {
            super(message, cause);
        }
    }

    private FuseMount(GranaryFuse fs, Path mountPoint) {
        this.fs = fs;
        this.mountPoint = mountPoint;
    }

    /**
     * Mounts {@code vfs} at {@code mountPoint} in a background thread and returns once the mount is
     * live (listed in /proc/self/mountinfo).
     *
     * @throws MountException see the class comment
     */
    public static FuseMount mount(GranaryVfs vfs, Path mountPoint, ClientConfig config) {
        Path mp = mountPoint.toAbsolutePath().normalize();
        checkMountPoint(mp);
        checkFuseAvailable();
        GranaryFuse fs;
        try {
            fs = new GranaryFuse(vfs);
        } catch (Throwable t) {
            throw new MountException("libfuse2 is missing or cannot be loaded (jnr-fuse needs libfuse.so.2): "
                    + "apt-get install fuse libfuse2 (" + t.getMessage() + ")", t);
        }
        List<String> opts = options(config, isRoot(), userAllowOther());
        FuseMount m = new FuseMount(fs, mp);
        if (directBinding(config)) {
            DIRECT_MOUNTS.incrementAndGet();
            List<String> kernel = kernelOptions(opts);
            long validNs = config.cacheTimeout().toNanos();
            fs.mountDirect(mp, "granary", "granary", kernel, Math.min(config.fuseMaxRead(), 1 << 20), validNs, validNs);
            opts = List.of("binding=direct", String.join(",", kernel));
        } else {
            JNR_MOUNTS.incrementAndGet();
            try {
                fs.mount(mp, false, false, opts.toArray(new String[0]));
            } catch (Throwable t) {
                throw new MountException("mount of " + mp + " failed: " + t.getMessage(), t);
            }
        }
        long deadline = System.currentTimeMillis() + LIVE_TIMEOUT_MS;
        while (!isMounted(mp)) {
            if (System.currentTimeMillis() > deadline) {
                try {
                    fs.umount();
                } catch (Throwable ignored) {
                    // best effort: it never came up
                }
                throw new MountException("mount of " + mp + " did not come up within " + LIVE_TIMEOUT_MS / 1000 + " s");
            }
            sleep(20);
        }
        m.mounted = true;
        raiseKernelReadahead(mp, config.fuseMaxRead());
        LOG.info("mounted granary at {} with {}", mp, String.join(" ", opts));
        return m;
    }

    /**
     * Lets the kernel read ahead at least {@code bytes} (max_read) on the mount at {@code mp}, by
     * its backing device's {@code /sys/class/bdi/MAJOR:MINOR/read_ahead_kb} (Linux sysfs ABI).
     * A FUSE mount starts at 128 KiB, and the kernel never sends a READ larger than its readahead
     * window for a buffered sequential read: even with {@code max_read} 1 MiB and 256-page
     * requests ({@link PooledFuseFS}), a 1 GiB {@code dd} was 8,192 READs of 128 KiB; with 1 MiB,
     * 1,024 of 1 MiB. Needs root (sysfs); otherwise logged and left as it is. A larger window
     * than max_read was not faster here (4 MiB: 219-310 vs 295-366 MiB/s cold). Set after the
     * kernel's INIT, which lowers the window to libfuse2's max_readahead.
     */
    public static void raiseKernelReadahead(Path mp, int bytes) {
        String dev = mountedDevice(mp);
        if (dev == null) {
            return;
        }
        Path knob = Path.of("/sys/class/bdi", dev, "read_ahead_kb");
        try {
            // A stat waits until the kernel has INIT's reply, which caps the window at the
            // max_readahead libfuse2 answers (what the kernel offered): set it after that.
            Files.readAttributes(mp, java.nio.file.attribute.BasicFileAttributes.class);
            long now = Long.parseLong(Files.readString(knob).trim());
            long want = Math.max(1, bytes / 1024);
            if (now < want) {
                Files.writeString(knob, Long.toString(want));
            }
        } catch (IOException | NumberFormatException | SecurityException e) {
            LOG.info("kernel readahead of {} stays as it is ({}): reads reach Granary in requests of at most "
                    + "that window (128 KiB by default)", mp, e.toString());
        }
    }

    /** The device ("MAJOR:MINOR") of the topmost mount exactly at {@code mp} per /proc/self/mountinfo, or null. */
    static String mountedDevice(Path mp) {
        String line = mountinfoLine(mp);
        return line == null ? null : line.split(" ")[2];
    }

    /**
     * The FUSE command-line options for {@code config} (pairs of "-o", "name[=value]"). Public so
     * that {@code granary noopfs} (the FUSE-ceiling benchmark) mounts with exactly these options.
     */
    public static List<String> options(ClientConfig config, boolean root, boolean userAllowOther) {
        double t = config.cacheTimeout().toNanos() / 1e9;
        String timeout = String.format(Locale.ROOT, "%.3f", t);
        List<String> o = new ArrayList<>();
        for (String s : new String[] {"fsname=granary", "subtype=granary", "use_ino", "big_writes",
                "max_read=" + config.fuseMaxRead(), "max_write=" + config.fuseMaxWrite(),
                // attr_timeout > 0 needs GranaryFuse.open's invalidation (class comment): without
                // it a kernel-cached size outlived the open that fetched a newer one, and reads
                // stopped at it. With attr_timeout=0 a stat cost two FUSE round trips (LOOKUP,
                // then GETATTR): 11k instead of 17-20k stat/s in a quickstart here.
                "attr_timeout=" + timeout, "entry_timeout=" + timeout, "negative_timeout=0",
                // the kernel checks permissions (search permission of every directory of a path
                // included) from the attributes it caches; without it, a stat answered from that
                // cache skipped Granary's check of the path. Granary still checks at the MDS.
                "default_permissions"}) {
            o.add("-o");
            o.add(s);
        }
        // keep_cache is decided by GranaryFuse at each open (PageCacheVersions), not by libfuse's
        // auto_cache, whose opens could read pages another open had yet to drop.
        if (config.allowOther() && (root || userAllowOther)) {
            o.add("-o");
            o.add("allow_other");
        } else if (config.allowOther()) {
            LOG.warn("allow_other needs root or user_allow_other in /etc/fuse.conf: only this uid can use the mount");
        }
        return o;
    }

    private static final java.util.concurrent.atomic.AtomicLong DIRECT_MOUNTS = new java.util.concurrent.atomic.AtomicLong();

    private static final java.util.concurrent.atomic.AtomicLong JNR_MOUNTS = new java.util.concurrent.atomic.AtomicLong();

    /** How many mounts this JVM has made on the /dev/fuse binding (tests, diagnostics). */
    public static long directMounts() {
        return DIRECT_MOUNTS.get();
    }

    /** How many mounts this JVM has made on jnr-fuse over libfuse2 (tests, diagnostics). */
    public static long jnrMounts() {
        return JNR_MOUNTS.get();
    }

    /**
     * Whether a mount with {@code config} uses Granary's /dev/fuse binding ({@code client/fuse/kernel},
     * no libfuse; mount(2) needs root) rather than jnr-fuse over libfuse2:
     * {@link ClientConfig#fuseBinding()} ({@code client.fuse_binding}; {@code auto}: direct as root),
     * unless the system property {@code granary.fuse.binding} (auto, direct, jnr; e.g. in
     * {@code GRANARY_JAVA_OPTS}, to compare the two on one config) names another.
     *
     * @throws MountException when the system property names no binding
     */
    public static boolean directBinding(ClientConfig config) {
        String p = System.getProperty("granary.fuse.binding");
        ClientConfig.FuseBinding b = p == null ? config.fuseBinding() : ClientConfig.FuseBinding.parse(p);
        if (b == null) {
            throw new MountException("-Dgranary.fuse.binding=" + p + " names no FUSE binding (auto, direct or jnr)");
        }
        return b == ClientConfig.FuseBinding.DIRECT || (b == ClientConfig.FuseBinding.AUTO && isRoot());
    }

    /**
     * Of libfuse2 command-line options ({@link #options}), those the kernel's fuse filesystem
     * takes itself at mount(2): allow_other, default_permissions, max_read. The rest (timeouts,
     * use_ino, names) are the path layer's, which the /dev/fuse binding applies in Java.
     */
    public static List<String> kernelOptions(List<String> opts) {
        List<String> k = new ArrayList<>();
        for (String o : opts) {
            if (o.equals("allow_other") || o.equals("default_permissions") || o.startsWith("max_read=")) {
                k.add(o);
            }
        }
        return k;
    }

    /** Checks that {@code mp} exists, is a directory and is empty: MountException otherwise. */
    public static void checkMountPoint(Path mp) {
        if (!Files.exists(mp)) {
            throw new MountException("mount point " + mp + " does not exist");
        }
        if (!Files.isDirectory(mp)) {
            throw new MountException("mount point " + mp + " is not a directory");
        }
        if (isMounted(mp)) {
            throw new MountException("mount point " + mp + " is already a mount point");
        }
        try (Stream<Path> s = Files.list(mp)) {
            if (s.findAny().isPresent()) {
                throw new MountException("mount point " + mp + " is not empty");
            }
        } catch (IOException e) {
            throw new MountException("mount point " + mp + " cannot be listed: " + e.getMessage(), e);
        }
    }

    /** Checks /dev/fuse and libfuse.so.2: MountException with how to install them otherwise. */
    public static void checkFuseAvailable() {
        if (!Files.exists(Path.of("/dev/fuse"))) {
            throw new MountException("/dev/fuse is missing: load the fuse kernel module (modprobe fuse) "
                    + "or give the container --device /dev/fuse --cap-add SYS_ADMIN");
        }
        try {
            jnr.ffi.LibraryLoader.create(LibFuseProbe.class).failImmediately().load("libfuse.so.2");
        } catch (Throwable t) {
            throw new MountException("libfuse2 is missing (jnr-fuse needs libfuse.so.2): apt-get install fuse libfuse2", t);
        }
    }

    /** The one symbol used to check that libfuse2 loads. */
    public interface LibFuseProbe {
        /** libfuse's API version (e.g. 29). */
        int fuse_version();
    }

    /**
     * The largest READ request (bytes) the kernel has sent this mount: 128 KiB when it splits
     * reads as for libfuse2, up to {@code max_read} with the larger requests asked for at INIT
     * ({@link PooledFuseFS}) and the raised readahead.
     */
    public long largestReadRequest() {
        return fs.largestReadRequest();
    }

    /** FLUSH requests (closes) the kernel has sent this mount so far (diagnostics, tests). */
    public long flushRequests() {
        return fs.flushRequests();
    }

    /** GETATTR requests the kernel has sent this mount so far (diagnostics, tests). */
    public long getattrRequests() {
        return fs.getattrRequests();
    }

    /** True when {@code mp} is listed as a mount point in /proc/self/mountinfo. */
    public static boolean isMounted(Path mp) {
        return mountedFsType(mp) != null;
    }

    /**
     * The filesystem type and source of the topmost mount exactly at {@code mp} per
     * /proc/self/mountinfo (e.g. "fuse.granary granary"), or null when nothing is mounted there.
     */
    public static String mountedFsType(Path mp) {
        String line = mountinfoLine(mp);
        if (line == null) {
            return null;
        }
        int dash = line.indexOf(" - ");
        String[] tail = dash < 0 ? new String[0] : line.substring(dash + 3).split(" ");
        return tail.length >= 2 ? tail[0] + " " + tail[1] : "?";
    }

    /** The line of /proc/self/mountinfo of the topmost mount exactly at {@code mp} (the last listed), or null. */
    private static String mountinfoLine(Path mp) {
        String want = mp.toAbsolutePath().normalize().toString();
        String found = null;
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
                String[] f = line.split(" ");
                if (f.length > 4 && unescape(f[4]).equals(want)) {
                    found = line;
                }
            }
        } catch (IOException e) {
            LOG.warn("cannot read /proc/self/mountinfo: {}", e.getMessage());
        }
        return found;
    }

    /** Decodes mountinfo's octal escapes (\040 for space, ...). */
    private static String unescape(String s) {
        if (s.indexOf('\\') < 0) {
            return s;
        }
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            if (ch == '\\' && i + 3 < s.length()) {
                try {
                    b.append((char) Integer.parseInt(s.substring(i + 1, i + 4), 8));
                    i += 3;
                    continue;
                } catch (NumberFormatException e) {
                    // not an escape
                }
            }
            b.append(ch);
        }
        return b.toString();
    }

    /** True when this process runs as uid 0 (from /proc/self; user.name when that is unreadable). */
    public static boolean isRoot() {
        try {
            Object uid = Files.getAttribute(Path.of("/proc/self"), "unix:uid");
            return uid instanceof Integer i && i == 0;
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
            return "root".equals(System.getProperty("user.name"));
        }
    }

    private static boolean userAllowOther() {
        try {
            for (String line : Files.readAllLines(Path.of("/etc/fuse.conf"))) {
                if (line.trim().equals("user_allow_other")) {
                    return true;
                }
            }
        } catch (IOException e) {
            // no fuse.conf
        }
        return false;
    }

    /** The mounted directory. */
    public Path mountPoint() {
        return mountPoint;
    }

    /**
     * Completes once the FUSE session has ended: after {@link #umount()}, or when someone else
     * unmounted the mount point (umount(8), {@code fusermount -u}; a lazy unmount once the last open
     * file is closed) or aborted its connection. A process serving the mount stops then
     * ({@code granary mount}), as a filesystem daemon does when its mount goes away.
     */
    public CompletableFuture<Void> sessionEnded() {
        return fs.sessionEnded();
    }

    /** The FUSE filesystem served. */
    public GranaryFuse fs() {
        return fs;
    }

    /**
     * Unmounts: asks libfuse to exit and runs {@code fusermount -u -z}; if the mount is still
     * listed after 5 s, tries {@code fusermount -u} and {@code umount -l} once more.
     *
     * @throws MountException when the mount point is still mounted afterwards
     */
    public synchronized void umount() {
        if (!mounted) {
            return;
        }
        try {
            fs.umount();
        } catch (Throwable t) {
            LOG.warn("jnr-fuse umount of {} failed: {}", mountPoint, t.getMessage());
        }
        if (!waitUnmounted(5_000)) {
            run("fusermount", "-u", mountPoint.toString());
            if (!waitUnmounted(2_000)) {
                run("umount", "-l", mountPoint.toString());
            }
        }
        if (!waitUnmounted(3_000)) {
            throw new MountException("could not unmount " + mountPoint + ": run fusermount -u " + mountPoint);
        }
        mounted = false;
        LOG.info("unmounted granary at {}", mountPoint);
    }

    private boolean waitUnmounted(long ms) {
        long deadline = System.currentTimeMillis() + ms;
        while (isMounted(mountPoint)) {
            if (System.currentTimeMillis() > deadline) {
                return false;
            }
            sleep(20);
        }
        return true;
    }

    private static void run(String... cmd) {
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            if (!p.waitFor(10, TimeUnit.SECONDS)) {
                p.destroyForcibly();
            }
        } catch (IOException e) {
            LOG.warn("{} failed: {}", cmd[0], e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new MountException("interrupted while waiting for the mount");
        }
    }

    /** Same as {@link #umount()}. */
    @Override
    public void close() {
        umount();
    }
}
