package dev.granary.tools.cli;

import dev.granary.mds.client.MdsClient;
import dev.granary.oss.server.OssServer;
import dev.granary.tools.cluster.Nodes;
import dev.granary.tools.config.GranaryConfig;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/** {@code granary oss --id ID}: runs one object storage server until stopped, and registers it and the OSTs in the MDS. */
@Command(name = "oss", mixinStandardHelpOptions = true,
        description = {"Run one object storage server (gRPC, serving every OST of the config) until SIGTERM.",
                "Registers the config's OSTs and this OSS in the MDS (which must be running).", "",
                "Example:  granary oss -c /etc/granary/granary.yaml --id oss1"})
public final class OssCommand implements Callable<Integer> {
    @Mixin
    ConfigOption config;

    @Option(names = "--id", required = true, description = "This server's id in the config's oss list.")
    String id;

    @Override
    public Integer call() throws Exception {
        GranaryConfig cfg = config.load();
        System.setProperty("granary.log.dir", Path.of(cfg.dataDir).toAbsolutePath().toString());
        Nodes.checkCacheFitsHeap(cfg);
        OssServer server = Nodes.startOss(cfg, id);
        try (MdsClient mds = Nodes.mdsClient(cfg)) {
            Nodes.register(cfg, mds);
        } catch (RuntimeException e) {
            server.close();
            throw e;
        }
        System.out.println("granary oss " + id + " serving " + server.address() + " for OSTs "
                + cfg.osts.stream().map(o -> Integer.toString(o.index)).toList());
        ConfigOption.awaitShutdown(server);
        return 0;
    }
}
