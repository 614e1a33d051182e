package dev.granary.tools.cli;

import dev.granary.client.vfs.LayoutXattr;
import dev.granary.tools.UserError;
import dev.granary.tools.layout.NativeXattr;
import dev.granary.tools.layout.NativeXattr.XattrException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code granary getstripe}: prints the layout of files and directories in a Granary mount in
 * the shape of Lustre's {@code lfs getstripe} (read from the virtual xattr
 * {@value LayoutXattr#NAME}).
 */
@Command(name = "getstripe", mixinStandardHelpOptions = true,
        description = {"Print the striping layout of files and directories, as Lustre's lfs getstripe.", "",
                "Example:  granary getstripe /mnt/train/shards/part-0001.tar"})
public final class GetstripeCommand implements Callable<Integer> {
    @Option(names = {"--raw"}, description = "Print the raw " + LayoutXattr.NAME + " value.")
    boolean raw;

    @Parameters(paramLabel = "PATH", arity = "1..*", description = "Files or directories inside a Granary mount.")
    List<Path> paths;

    @Override
    public Integer call() {
        int failed = 0;
        for (Path p : paths) {
            String value;
            try {
                value = new String(NativeXattr.get(p.toString(), LayoutXattr.NAME), StandardCharsets.US_ASCII);
            } catch (XattrException e) {
                if (paths.size() == 1) {
                    throw new UserError("getstripe: " + p + ": " + SetstripeCommand.explain(e.errno(), false));
                }
                System.err.println("getstripe: " + p + ": " + SetstripeCommand.explain(e.errno(), false));
                failed++;
                continue;
            }
            if (raw) {
                System.out.println(value);
                continue;
            }
            Map<String, String> kv = LayoutXattr.fields(value);
            System.out.println(p);
            if (Files.isDirectory(p)) {
                System.out.printf("stripe_count:  %s stripe_size:   %s stripe_offset: %s%n",
                        kv.get("stripe_count"), kv.get("stripe_size"), kv.get("stripe_offset"));
            } else {
                // lmm_pattern as Lustre prints it: mdt when all the data is on the MDS (DoM), raid0
                // when it is striped over OSTs (a file may keep its first bytes on the MDS as well).
                String dom = kv.get("dom_size");
                boolean allOnMds = dom != null && sizeOf(p) <= Long.parseLong(dom);
                System.out.printf("lmm_stripe_count:  %s%nlmm_stripe_size:   %s%nlmm_pattern:       %s%n",
                        kv.get("stripe_count"), kv.get("stripe_size"), allOnMds ? "mdt" : "raid0");
                if (dom != null) {
                    System.out.printf("lmm_dom_size:      %s (bytes held on the MDS, from offset 0)%n", dom);
                }
                System.out.printf("lmm_stripe_offset: %s%n", kv.get("stripe_offset"));
                System.out.println("\tobdidx");
                for (String o : kv.getOrDefault("osts", "").split(",")) {
                    if (!o.isEmpty()) {
                        System.out.printf("\t%6s%n", o);
                    }
                }
            }
        }
        if (failed > 0) {
            throw new UserError("getstripe: " + failed + " of " + paths.size() + " paths failed");
        }
        return 0;
    }

    /** Size of {@code p} in bytes, or Long.MAX_VALUE when it cannot be read (then not "all on the MDS"). */
    private static long sizeOf(Path p) {
        try {
            return Files.size(p);
        } catch (java.io.IOException e) {
            return Long.MAX_VALUE;
        }
    }
}
