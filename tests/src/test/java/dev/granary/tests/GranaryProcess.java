package dev.granary.tests;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/** The {@code granary} CLI run as a separate JVM (as the launcher runs it), with its output captured line by line. */
final class GranaryProcess implements AutoCloseable {
    final Process process;
    final List<String> out = new ArrayList<>();
    final List<String> err = new ArrayList<>();
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();

    private GranaryProcess(Process p) {
        this.process = p;
        pump(p.getInputStream(), out, true);
        pump(p.getErrorStream(), err, false);
    }

    private void pump(java.io.InputStream in, List<String> sink, boolean queue) {
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
                String l;
                while ((l = r.readLine()) != null) {
                    synchronized (sink) {
                        sink.add(l);
                    }
                    if (queue) lines.add(l);
                }
            } catch (IOException e) {
                // process ended
            }
        });
        t.setDaemon(true);
        t.start();
    }

    /** Starts {@code granary ARGS} in {@code dir} with extra environment variables. */
    static GranaryProcess start(Path dir, Map<String, String> env, String... args) throws IOException {
        return start(dir, env, List.of(), args);
    }

    /** Starts {@code granary ARGS} in {@code dir} with extra environment variables and JVM options. */
    static GranaryProcess start(Path dir, Map<String, String> env, List<String> jvmArgs, String... args) throws IOException {
        String java = ProcessHandle.current().info().command().orElse("java");
        List<String> cmd = new ArrayList<>(List.of(java, "--enable-native-access=ALL-UNNAMED", "-Dfile.encoding=ISO-8859-1", "-Xmx1g",
                // the CLI's own logging config (tools' logback.xml), not the tests' logback-test.xml
                "-Dlogback.configurationFile=logback.xml"));
        cmd.addAll(jvmArgs);
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), "dev.granary.tools.GranaryCli"));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(dir.toFile());
        pb.environment().putAll(env);
        return new GranaryProcess(pb.start());
    }

    /** Waits until a stdout line contains {@code text}; false on timeout or process exit. */
    boolean awaitLine(String text, long seconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (System.nanoTime() < deadline) {
            String l = lines.poll(200, TimeUnit.MILLISECONDS);
            if (l != null && l.contains(text)) return true;
            if (l == null && !process.isAlive() && lines.isEmpty()) return false;
        }
        return false;
    }

    /** Waits for exit; returns the status (kills it after {@code seconds}). */
    int waitFor(long seconds) throws InterruptedException {
        if (!process.waitFor(seconds, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            process.waitFor();
            throw new AssertionError("granary did not exit within " + seconds + " s; stdout=" + out + " stderr=" + err);
        }
        Thread.sleep(100); // let the pumps drain
        return process.exitValue();
    }

    /** Lines of stderr that the CLI printed as its own error lines. */
    List<String> errorLines() {
        synchronized (err) {
            return err.stream().filter(l -> l.startsWith("granary:")).toList();
        }
    }

    String transcript() {
        synchronized (out) {
            synchronized (err) {
                return "stdout:\n" + String.join("\n", out) + "\nstderr:\n" + String.join("\n", err);
            }
        }
    }

    /** Whether stderr has a line containing {@code text}. */
    boolean stderrContains(String text) {
        synchronized (err) {
            return err.stream().anyMatch(l -> l.contains(text));
        }
    }

    /** Sends {@code signal} (e.g. "STOP", "CONT") to the process with kill(1). */
    void signal(String signal) throws IOException, InterruptedException {
        Process k = new ProcessBuilder("kill", "-" + signal, Long.toString(process.pid())).inheritIO().start();
        if (k.waitFor() != 0) throw new IOException("kill -" + signal + " " + process.pid() + " failed");
    }

    /** SIGKILL. */
    void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor();
    }

    @Override
    public void close() throws InterruptedException {
        if (process.isAlive()) {
            try {
                signal("CONT"); // a paused process cannot handle SIGTERM
            } catch (IOException e) {
                // gone already
            }
            process.destroy();
            if (!process.waitFor(30, TimeUnit.SECONDS)) kill();
        }
    }
}
