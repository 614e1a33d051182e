package dev.granary.tools.cli;

import dev.granary.tools.cluster.MountPoints;
import dev.granary.tools.cluster.Nodes;
import dev.granary.tools.config.GranaryConfig;
import dev.granary.tools.prereq.Prerequisites;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code granary mount}: mounts the filesystem with FUSE and serves it until stopped (SIGTERM/Ctrl-C,
 * then unmounts) or until its mount point is unmounted by someone else (then exits 0).
 */
@Command(name = "mount", mixinStandardHelpOptions = true,
        description = {"Mount Granary at the config's client.mount (or --mount) and serve it until SIGTERM/Ctrl-C",
                "(which unmounts) or until the mount point is unmounted (umount, fusermount -u).", "",
                "Example:  granary mount -c /etc/granary/granary.yaml --mount /mnt/train"})
public final class MountCommand implements Callable<Integer> {
    @Mixin
    ConfigOption config;

    @Option(names = "--mount", paramLabel = "DIR", description = "Mount point; must exist and be empty.")
    Path mount;

    @Override
    public Integer call() throws Exception {
        GranaryConfig cfg = config.load();
        Path mnt = (mount != null ? mount : Path.of(cfg.client.mount)).toAbsolutePath().normalize();
        Nodes.checkClientBuffersFitHeap(cfg);
        Prerequisites.ensureFuse();
        MountPoints.prepare(mnt, false);
        // After the local checks, before anything is mounted: a mount with no MDS behind it answered
        // every call after 60 s with EIO, and a stop while the kernel waited on its first getattr
        // left an unkillable JVM.
        Nodes.requireReachableMds(cfg, "mount");
        Nodes.Client client = Nodes.mount(cfg, mnt);
        System.out.println("granary mounted at " + mnt + " (Ctrl-C to unmount)");
        // Stops by itself when the mount goes away (umount, fusermount -u, a lazy unmount once the
        // last open file is closed), as a filesystem daemon does: nothing is left serving nothing.
        ConfigOption.awaitShutdown(client, client.mount().sessionEnded(),
                () -> System.out.println("granary: " + mnt + " was unmounted; stopping"));
        return 0;
    }
}
