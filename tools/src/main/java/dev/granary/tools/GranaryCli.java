package dev.granary.tools;

import dev.granary.mds.FsException;
import dev.granary.tools.cli.CacheCommand;
import dev.granary.tools.cli.GcCommand;
import dev.granary.tools.cli.GetstripeCommand;
import dev.granary.tools.cli.MdsCommand;
import dev.granary.tools.cli.MountCommand;
import dev.granary.tools.cli.NoopFsCommand;
import dev.granary.tools.cli.OssCommand;
import dev.granary.tools.cli.QuickstartCommand;
import dev.granary.tools.cli.SetstripeCommand;
import dev.granary.tools.cli.StatusCommand;
import dev.granary.tools.config.ConfigException;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * The {@code granary} command line (picocli): one class per verb in {@code dev.granary.tools.cli}.
 * Exit status: 0 success, 1 a user error (one line on stderr), 2 bad usage, 70 an internal error.
 */
@Command(name = "granary", mixinStandardHelpOptions = true, version = "granary 0.1.0",
        description = "Granary: an object-backed parallel filesystem (Raft metadata, S3 data, FUSE client).",
        subcommands = {QuickstartCommand.class, MdsCommand.class, OssCommand.class, MountCommand.class,
                StatusCommand.class, CacheCommand.class, GcCommand.class, SetstripeCommand.class, GetstripeCommand.class, NoopFsCommand.class,
                CommandLine.HelpCommand.class})
public final class GranaryCli implements Runnable {
    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public void run() {
        throw new CommandLine.ParameterException(spec.commandLine(), "missing command (try: granary quickstart --help)");
    }

    /** Entry point of the launcher script. */
    public static void main(String[] args) {
        int rc = run(args);
        System.exit(rc);
    }

    /** Runs the CLI with {@code args}; returns the exit status instead of exiting (for tests). */
    public static int run(String... args) {
        CommandLine cl = new CommandLine(new GranaryCli());
        cl.setExecutionExceptionHandler((ex, cmd, parsed) -> {
            Throwable t = ex;
            String msg = userMessage(t);
            if (msg != null) {
                cmd.getErr().println("granary: " + msg);
                return 1;
            }
            cmd.getErr().println("granary: internal error: " + t);
            if (System.getenv("GRANARY_DEBUG") != null) {
                t.printStackTrace(cmd.getErr());
            }
            return 70;
        });
        return cl.execute(args);
    }

    /** The one-line message for errors caused by input or environment, or null for internal errors. */
    static String userMessage(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof UserError || c instanceof ConfigException || c instanceof FsException) {
                return c.getMessage();
            }
        }
        return null;
    }
}
