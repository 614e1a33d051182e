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

/** {@code granary mount}: mounts the filesystem with FUSE and serves it until stopped (then unmounts). */
@Command(name = "mount", mixinStandardHelpOptions = true,
        description = {"Mount Granary at the config's client.mount (or --mount) and serve it until SIGTERM/Ctrl-C.", "",
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
        Prerequisites.ensureFuse();
        MountPoints.prepare(mnt, false);
        Nodes.Client client = Nodes.mount(cfg, mnt);
        System.out.println("granary mounted at " + mnt + " (Ctrl-C to unmount)");
        ConfigOption.awaitShutdown(client);
        return 0;
    }
}
