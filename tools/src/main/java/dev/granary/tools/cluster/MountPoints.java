package dev.granary.tools.cluster;

import dev.granary.client.fuse.FuseMount;
import dev.granary.tools.UserError;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Checks a mount point before mounting: it must be an empty directory that is not already a mount
 * (a stale FUSE mount left by a killed Granary is cleaned up with {@code fusermount -u -z}).
 */
public final class MountPoints {
    private MountPoints() {}

    /**
     * Prepares {@code mnt} for mounting: detaches a stale FUSE mount left there by a killed process
     * ("Transport endpoint is not connected"), creates the folder when asked, then applies
     * {@link FuseMount#checkMountPoint}. A live mount, whoever serves it, is left alone.
     *
     * @param createIfMissing create the folder when it does not exist (the default mount point only)
     * @throws UserError when it is missing, not a directory, not empty, or already mounted
     */
    public static void prepare(Path mnt, boolean createIfMissing) {
        String fstype = FuseMount.mountedFsType(mnt);
        if (fstype != null) {
            if (!isStale(mnt)) {
                throw new UserError("mount point " + mnt + " is already a mount point (" + fstype + "); unmount it first");
            }
            unmountLazy(mnt);
        }
        if (!Files.exists(mnt)) {
            if (!createIfMissing) {
                throw new UserError("mount point " + mnt + " does not exist; create it with 'mkdir -p " + mnt + "'");
            }
            try {
                Files.createDirectories(mnt);
            } catch (IOException e) {
                throw new UserError("cannot create mount point " + mnt + ": " + e.getMessage());
            }
        }
        try {
            FuseMount.checkMountPoint(mnt);
        } catch (FuseMount.MountException e) {
            throw new UserError(e.getMessage());
        }
    }

    /**
     * Whether the FUSE mount at {@code mnt} has lost its server ("Transport endpoint is not
     * connected"). Probed by listing it: the kernel answers a stat of the mount's root from its
     * attribute cache for {@code attr_timeout} after the server died, but an opendir always goes to
     * the server. A server that does not answer within 5 s counts as live (it may be busy).
     */
    static boolean isStale(Path mnt) {
        CompletableFuture<Boolean> probe = CompletableFuture.supplyAsync(() -> {
            try (DirectoryStream<Path> d = Files.newDirectoryStream(mnt)) {
                return false;
            } catch (IOException e) {
                return String.valueOf(e.getMessage()).contains("not connected");
            }
        }, r -> {
            Thread t = new Thread(r, "mount-point-probe");
            t.setDaemon(true); // a hung server must not keep the JVM alive
            t.start();
        });
        try {
            return probe.get(5, TimeUnit.SECONDS);
        } catch (TimeoutException | ExecutionException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /** Detaches a mount with {@code fusermount -u -z} (lazy), e.g. one left by a killed process. */
    public static void unmountLazy(Path mnt) {
        for (String tool : List.of("fusermount", "fusermount3", "umount")) {
            try {
                List<String> cmd = tool.equals("umount") ? List.of("umount", "-l", mnt.toString()) : List.of(tool, "-u", "-z", mnt.toString());
                Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
                if (p.waitFor(10, TimeUnit.SECONDS) && p.exitValue() == 0) {
                    return;
                }
            } catch (IOException e) {
                // try the next tool
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }
}
