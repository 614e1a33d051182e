package dev.granary.tools.cli;

import dev.granary.tools.config.GranaryConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
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
        awaitShutdown(onStop, new CompletableFuture<>(), () -> { });
    }

    /**
     * Blocks until the JVM is asked to stop (SIGTERM/SIGINT) or {@code ended} completes (a mount
     * this process serves went away: someone unmounted it), then runs {@code onStop} once; on
     * {@code ended}, {@code onEnded} runs first (to say why the process stops) and this returns,
     * so the command exits. Errors of {@code onStop} are printed, not thrown.
     */
    static void awaitShutdown(AutoCloseable onStop, CompletableFuture<?> ended, Runnable onEnded) throws InterruptedException {
        AtomicBoolean stopping = new AtomicBoolean();
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (stopping.compareAndSet(false, true)) {
                stop(onStop, stopped);
            } else {
                awaitQuietly(stopped); // the unmount path is closing: let it finish before the JVM halts
            }
        }, "granary-shutdown"));
        CountDownLatch wake = new CountDownLatch(1);
        ended.whenComplete((v, t) -> wake.countDown());
        wake.await();
        if (stopping.compareAndSet(false, true)) {
            onEnded.run();
            stop(onStop, stopped);
        } else {
            stopped.await(); // a signal's hook unmounted: wait for it to close everything
        }
    }

    private static void stop(AutoCloseable onStop, CountDownLatch stopped) {
        try {
            onStop.close();
        } catch (Exception e) {
            System.err.println("granary: error while stopping: " + e.getMessage());
        } finally {
            stopped.countDown();
        }
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
