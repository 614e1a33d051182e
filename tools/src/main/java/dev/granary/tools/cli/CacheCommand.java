package dev.granary.tools.cli;

import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.OssInfo;
import dev.granary.oss.client.OssClient;
import dev.granary.tools.cluster.Nodes;
import dev.granary.tools.config.GranaryConfig;
import dev.granary.tools.config.Sizes;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletionException;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code granary cache drop}: empties the read cache of every OSS registered with the MDS, the
 * server-side half of a cold start (the client's half is the kernel page cache,
 * {@code echo 3 > /proc/sys/vm/drop_caches}). Loses no data: the cache holds copies of immutable
 * blocks. Exit 1 when an OSS could not be reached (the others are still dropped).
 */
@Command(name = "cache", mixinStandardHelpOptions = true,
        description = {"Manage the OSS read caches.", "",
                "Example:  granary cache drop -c granary-data/granary.yaml"},
        subcommands = {CacheCommand.Drop.class})
public final class CacheCommand implements Runnable {
    @Spec
    CommandSpec spec;

    /** Without a subcommand: a usage error (exit 2), as picocli reports one. */
    @Override
    public void run() {
        throw new ParameterException(spec.commandLine(), "missing subcommand (try: granary cache drop --help)");
    }

    /** {@code granary cache drop}: see {@link CacheCommand}. */
    @Command(name = "drop", mixinStandardHelpOptions = true,
            description = {"Empty the read cache of every OSS (for cold-read measurements); no data is lost."})
    public static final class Drop implements Callable<Integer> {
        @Mixin
        ConfigOption config;

        @Override
        public Integer call() {
            GranaryConfig cfg = config.load();
            Nodes.requireReachableMds(cfg, "cache drop");
            List<String> addresses;
            try (MdsClient mds = Nodes.mdsClient(cfg)) {
                addresses = mds.listOss(Nodes.ROOT).stream().map(OssInfo::getAddress).toList();
            }
            if (addresses.isEmpty()) {
                System.err.println("granary cache drop: no OSS is registered with the MDS");
                return 1;
            }
            int failed = 0;
            try (OssClient oss = new OssClient(addresses)) {
                for (String a : addresses) {
                    try {
                        long bytes = oss.dropCache(a).join();
                        System.out.println("  OSS " + a + "  dropped " + Sizes.format(bytes));
                    } catch (CompletionException e) {
                        failed++;
                        System.err.println("  OSS " + a + "  unreachable: " + Nodes.rootMessage(e));
                    }
                }
            }
            return failed == 0 ? 0 : 1;
        }
    }
}
