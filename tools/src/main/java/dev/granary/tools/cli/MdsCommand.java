package dev.granary.tools.cli;

import dev.granary.raft.RaftKvServer;
import dev.granary.tools.cluster.Nodes;
import dev.granary.tools.config.GranaryConfig;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/** {@code granary mds --id ID}: runs one MDS Raft peer of the config until stopped. */
@Command(name = "mds", mixinStandardHelpOptions = true,
        description = {"Run one metadata server (a Raft peer of the namespace) until SIGTERM.", "",
                "Example:  granary mds -c /etc/granary/granary.yaml --id mds1"})
public final class MdsCommand implements Callable<Integer> {
    @Mixin
    ConfigOption config;

    @Option(names = "--id", required = true, description = "This peer's id in the config's mds list.")
    String id;

    @Override
    public Integer call() throws Exception {
        GranaryConfig cfg = config.load();
        System.setProperty("granary.log.dir", Path.of(cfg.dataDir).toAbsolutePath().toString());
        RaftKvServer server = Nodes.startMds(cfg, id);
        System.out.println("granary mds " + id + " serving " + GranaryConfig.node(cfg.mds, id, "mds").address
                + " (storage " + Path.of(cfg.dataDir, "mds", id) + ")");
        // The block GC runs beside every peer and works while that peer leads (one worker at a time).
        Nodes.Gc gc = Nodes.gc(cfg, server::isLeader);
        ConfigOption.awaitShutdown(() -> {
            try {
                gc.close();
            } finally {
                server.close();
            }
        });
        return 0;
    }
}
