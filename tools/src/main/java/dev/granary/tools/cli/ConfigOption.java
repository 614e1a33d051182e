package dev.granary.tools.cli;

import dev.granary.tools.config.GranaryConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import picocli.CommandLine.Option;

/** The {@code --config FILE} option shared by the daemon commands (mixin). */
public final class ConfigOption {
    @Option(names = {"-c", "--config"}, paramLabel = "FILE",
            description = "Cluster config (YAML). Default: ./granary.yaml, else /etc/granary/granary.yaml.")
    Path config;

    /** Loads and validates the config; throws ConfigException with a one-line message. */
    public GranaryConfig load() {
        Path p = config;
        if (p == null) {
            p = Files.exists(Path.of("granary.yaml")) ? Path.of("granary.yaml") : Path.of("/etc/granary/granary.yaml");
        }
        return GranaryConfig.load(p);
    }

    /** Blocks until the JVM is asked to stop (SIGTERM/SIGINT), then runs {@code onStop} once. */
    static void awaitShutdown(AutoCloseable onStop) throws InterruptedException {
        java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                onStop.close();
            } catch (Exception e) {
                System.err.println("granary: error while stopping: " + e.getMessage());
            } finally {
                done.countDown();
            }
        }, "granary-shutdown"));
        done.await();
    }
}
