package dev.granary.tools.cli;

import dev.granary.tools.cluster.Nodes;
import dev.granary.tools.config.GranaryConfig;
import dev.granary.tools.config.Sizes;
import dev.granary.tools.gc.BlockGc;
import java.time.Duration;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code granary gc}: runs one pass of the block garbage collector now ({@link BlockGc}): deletes
 * from the OSTs the blocks freed at least the grace ago (overwritten, truncated away, of unlinked
 * files) and drops their records from the MDS's GC queue. The MDS leader's process runs the same
 * pass every {@code gc.interval}. Exit 1 when some OST's delete failed (its blocks stay queued).
 */
@Command(name = "gc", mixinStandardHelpOptions = true,
        description = {"Delete the blocks the namespace freed (one pass of the block GC, now).", "",
                "Example:  granary gc -c granary-data/granary.yaml --grace 0s"})
public final class GcCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Mixin
    ConfigOption config;

    @Option(names = "--grace", paramLabel = "DURATION",
            description = "Delete only blocks freed at least this long ago (default: the config's gc.grace). "
                    + "0s deletes every freed block: a reader that opened a file before another client changed it then reads the "
                    + "newer file (ESTALE when it was removed), and a write through such a descriptor lands on the newer file.")
    String grace;

    @Override
    public Integer call() {
        GranaryConfig cfg = config.load();
        Duration g;
        try {
            g = Sizes.parseDuration(grace != null ? grace : cfg.gc.grace);
        } catch (IllegalArgumentException e) {
            throw new ParameterException(spec.commandLine(), "--grace: " + e.getMessage());
        }
        Nodes.requireReachableMds(cfg, "gc");
        try (Nodes.Gc gc = Nodes.gc(cfg, g, null)) {
            BlockGc.Pass p = gc.gc().runPass();
            System.out.println("granary gc: " + p.deleted() + " blocks deleted (freed more than " + g.toSeconds() + " s ago)"
                    + (p.failed() > 0 ? "; " + p.failed() + " could not be deleted and stay queued (see the log)" : "")
                    + (p.referenced() > 0 ? "; " + p.referenced() + " queued blocks were still referenced and were kept" : ""));
            return p.failed() > 0 ? 1 : 0;
        }
    }
}
