package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/** Runs shell commands for end-to-end tests and returns their output. */
final class Shell {
    private Shell() {}

    /** The result of a command: exit status, stdout, stderr. */
    record Result(int rc, String out, String err) {}

    /** Runs {@code bash -c script} in {@code dir} with extra environment; never fails the test itself. */
    static Result run(Path dir, Map<String, String> env, String script) throws IOException, InterruptedException {
        ProcessBuilder pb = new ProcessBuilder("bash", "-c", script).directory(dir.toFile());
        pb.environment().putAll(env);
        Path outF = java.nio.file.Files.createTempFile("sh", ".out");
        Path errF = java.nio.file.Files.createTempFile("sh", ".err");
        pb.redirectOutput(outF.toFile()).redirectError(errF.toFile());
        Process p = pb.start();
        if (!p.waitFor(300, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            fail("timed out after 300 s: " + script);
        }
        Result r = new Result(p.exitValue(), java.nio.file.Files.readString(outF, StandardCharsets.UTF_8),
                java.nio.file.Files.readString(errF, StandardCharsets.UTF_8));
        java.nio.file.Files.deleteIfExists(outF);
        java.nio.file.Files.deleteIfExists(errF);
        return r;
    }

    /** Runs {@code script} in {@code dir}; fails the test with its output unless it exits 0; returns stdout. */
    static String ok(Path dir, String script) throws IOException, InterruptedException {
        Result r = run(dir, Map.of(), script);
        if (r.rc() != 0) {
            fail("command failed (exit " + r.rc() + ") in " + dir + ": " + script + "\nstdout: " + r.out() + "\nstderr: " + r.err());
        }
        return r.out();
    }
}
