package dev.granary.tools.prereq;

import dev.granary.client.fuse.FuseMount;
import dev.granary.tools.UserError;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Checks what Granary needs from the machine (libfuse2 and /dev/fuse for the mount; a python3
 * with torch and numpy for the DataLoader) and installs the Debian packages when running as root.
 * Environment: {@code GRANARY_LIBFUSE} overrides the libfuse2 path checked;
 * {@code GRANARY_NO_INSTALL=1} forbids installing.
 */
public final class Prerequisites {
    private static final List<String> LIBFUSE_PATHS = List.of(
            "/lib/x86_64-linux-gnu/libfuse.so.2", "/usr/lib/x86_64-linux-gnu/libfuse.so.2",
            "/lib/aarch64-linux-gnu/libfuse.so.2", "/usr/lib/aarch64-linux-gnu/libfuse.so.2",
            "/usr/lib/libfuse.so.2", "/usr/lib64/libfuse.so.2", "/lib64/libfuse.so.2");

    private Prerequisites() {}

    private static boolean mayInstall() {
        return FuseMount.isRoot() && !"1".equals(System.getenv("GRANARY_NO_INSTALL")) && Files.isExecutable(Path.of("/usr/bin/apt-get"));
    }

    private static boolean libfusePresent() {
        String override = System.getenv("GRANARY_LIBFUSE");
        if (override != null) {
            return Files.exists(Path.of(override));
        }
        return LIBFUSE_PATHS.stream().anyMatch(p -> Files.exists(Path.of(p)));
    }

    private static boolean fusermountPresent() {
        for (String d : System.getenv().getOrDefault("PATH", "/usr/bin:/bin").split(":")) {
            if (Files.isExecutable(Path.of(d, "fusermount")) || Files.isExecutable(Path.of(d, "fusermount3"))) {
                return true;
            }
        }
        return false;
    }

    /**
     * Ensures the FUSE mount can work: libfuse2 loadable, fusermount present, /dev/fuse present.
     *
     * @throws UserError naming what is missing and how to install it
     */
    public static void ensureFuse() {
        if ((!libfusePresent() || !fusermountPresent()) && mayInstall()) {
            List<String> pkgs = new ArrayList<>();
            if (!libfusePresent()) pkgs.add("libfuse2");
            if (!fusermountPresent()) pkgs.add("fuse");
            aptInstall(pkgs);
        }
        if (!libfusePresent()) {
            throw new UserError("libfuse2 is missing (libfuse.so.2): install it with 'apt-get install libfuse2 fuse'");
        }
        if (!fusermountPresent()) {
            throw new UserError("fusermount is missing: install it with 'apt-get install fuse'");
        }
        try {
            FuseMount.checkFuseAvailable(); // /dev/fuse, and libfuse.so.2 really loads
        } catch (FuseMount.MountException e) {
            throw new UserError(e.getMessage());
        }
    }

    /**
     * Returns a python3 that can import torch and numpy, installing python3-torch and
     * python3-numpy when running as root and none is found.
     *
     * @throws UserError when there is none
     */
    public static String ensurePython() {
        String py = findPython();
        if (py == null && mayInstall()) {
            aptInstall(List.of("python3-torch", "python3-numpy"));
            py = findPython();
        }
        if (py == null) {
            throw new UserError("no python3 with torch and numpy found: install them with 'apt-get install python3-torch python3-numpy'"
                    + " (or pass --dataset none)");
        }
        return py;
    }

    /** The first of /usr/bin/python3, python3 on PATH that imports torch and numpy; null when none. */
    public static String findPython() {
        List<String> candidates = new ArrayList<>();
        String env = System.getenv("GRANARY_PYTHON");
        if (env != null) candidates.add(env);
        candidates.add("/usr/bin/python3");
        candidates.add("python3");
        for (String c : candidates) {
            try {
                Process p = new ProcessBuilder(c, "-c", "import torch, numpy").redirectErrorStream(true)
                        .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
                if (p.waitFor(120, TimeUnit.SECONDS) && p.exitValue() == 0) {
                    return c;
                }
                p.destroyForcibly();
            } catch (IOException e) {
                // not there: try the next one
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return null;
            }
        }
        return null;
    }

    private static void aptInstall(List<String> pkgs) {
        System.out.println("granary: installing " + String.join(" ", pkgs) + " (apt-get)...");
        try {
            run(List.of("apt-get", "update", "-qq"));
            List<String> cmd = new ArrayList<>(List.of("apt-get", "install", "-y", "-qq", "--no-install-recommends"));
            cmd.addAll(pkgs);
            if (run(cmd) != 0) {
                throw new UserError("apt-get install " + String.join(" ", pkgs) + " failed");
            }
        } catch (IOException e) {
            throw new UserError("cannot run apt-get: " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new UserError("interrupted while installing " + pkgs);
        }
    }

    private static int run(List<String> cmd) throws IOException, InterruptedException {
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD);
        pb.environment().put("DEBIAN_FRONTEND", "noninteractive");
        Process p = pb.start();
        return p.waitFor();
    }
}
