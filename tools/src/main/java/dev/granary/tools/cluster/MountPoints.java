package dev.granary.tools.cluster;

import dev.granary.client.fuse.FuseMount;
import dev.granary.tools.UserError;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

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

    private static boolean isStale(Path mnt) {
        try {
            Files.readAttributes(mnt, "basic:isDirectory");
            return false;
        } catch (IOException e) {
            return String.valueOf(e.getMessage()).contains("not connected");
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
