package dev.granary.tools.cluster;

import dev.granary.tools.UserError;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Checks a mount point before mounting: it must be an empty directory that is not already a mount
 * (a stale FUSE mount left by a killed Granary is cleaned up with {@code fusermount -u -z}).
 */
public final class MountPoints {
    private MountPoints() {}

    /**
     * Prepares {@code mnt} for mounting.
     *
     * @param createIfMissing create the folder when it does not exist (the default mount point only)
     * @throws UserError when it is missing, not a directory, not empty, or already mounted
     */
    public static void prepare(Path mnt, boolean createIfMissing) {
        String fstype = mountedFsType(mnt);
        if (fstype != null) {
            if (fstype.startsWith("fuse") && fstype.contains("granary") || isStale(mnt)) {
                unmountLazy(mnt);
            } else {
                throw new UserError("mount point " + mnt + " is already a mount point (" + fstype + "); unmount it first");
            }
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
        if (!Files.isDirectory(mnt)) {
            throw new UserError("mount point " + mnt + " is not a directory");
        }
        try (Stream<Path> s = Files.list(mnt)) {
            if (s.findAny().isPresent()) {
                throw new UserError("mount point " + mnt + " is not empty");
            }
        } catch (IOException e) {
            throw new UserError("cannot read mount point " + mnt + ": " + e.getMessage());
        }
    }

    /** The filesystem type mounted exactly at {@code mnt} per /proc/self/mountinfo, or null. */
    public static String mountedFsType(Path mnt) {
        String want = mnt.toAbsolutePath().normalize().toString();
        try {
            List<String> lines = Files.readAllLines(Path.of("/proc/self/mountinfo"));
            String found = null;
            for (String line : lines) {
                String[] f = line.split(" ");
                if (f.length > 4 && unescape(f[4]).equals(want)) {
                    int dash = line.indexOf(" - ");
                    found = dash < 0 ? "?" : line.substring(dash + 3).split(" ")[0] + " " + line.substring(dash + 3).split(" ")[1];
                }
            }
            return found;
        } catch (IOException e) {
            return null;
        }
    }

    private static String unescape(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\' && i + 3 < s.length()) {
                b.append((char) Integer.parseInt(s.substring(i + 1, i + 4), 8));
                i += 3;
            } else {
                b.append(c);
            }
        }
        return b.toString();
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
