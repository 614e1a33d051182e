package dev.granary.tools.dataset;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.granary.tools.UserError;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Runs the bundled {@code dataset.py} (MLPerf-Storage-shaped sample data: unet3d-like .npz
 * volumes and resnet50-like ~110 KiB records) through a mount: {@code generate} writes it with a
 * manifest of SHA-256 checksums, {@code read} reads it back with a PyTorch DataLoader and
 * verifies every checksum. The script's output is echoed; its final
 * {@code GRANARY_RESULT <json>} line is returned parsed.
 */
public final class DatasetRunner {
    private final String python;
    private final Path script;
    private final PrintStream out;

    /** Extracts the script to a temporary file. */
    public DatasetRunner(String python, PrintStream out) {
        this.python = python;
        this.out = out;
        try (InputStream in = DatasetRunner.class.getResourceAsStream("/dev/granary/tools/dataset.py")) {
            if (in == null) throw new IllegalStateException("dataset.py missing from the jar");
            script = Files.createTempFile("granary-dataset", ".py");
            script.toFile().deleteOnExit();
            Files.write(script, in.readAllBytes());
        } catch (IOException e) {
            throw new UserError("cannot extract dataset.py: " + e.getMessage());
        }
    }

    /** Writes the dataset under {@code root} unless its manifest is there; {@code scale} shrinks it (1.0 = full). */
    public JsonNode generate(Path root, double scale) {
        return run(List.of("generate", "--root", root.toString(), "--scale", Double.toString(scale)));
    }

    /** Reads and verifies the dataset with a DataLoader of {@code workers} worker processes. */
    public JsonNode read(Path root, int workers) {
        return run(List.of("read", "--root", root.toString(), "--workers", Integer.toString(workers)));
    }

    private JsonNode run(List<String> args) {
        List<String> cmd = new ArrayList<>(List.of(python, script.toString()));
        cmd.addAll(args);
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            JsonNode result = null;
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    if (line.startsWith("GRANARY_RESULT ")) {
                        result = new ObjectMapper().readTree(line.substring("GRANARY_RESULT ".length()));
                    } else {
                        out.println("  " + line);
                    }
                }
            }
            int rc = p.waitFor();
            if (rc != 0 || result == null) {
                throw new UserError("dataset " + args.get(0) + " failed (exit " + rc + ")");
            }
            return result;
        } catch (IOException e) {
            throw new UserError("cannot run " + python + ": " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new UserError("interrupted");
        }
    }
}
