package dev.granary.tools.cli;

import com.fasterxml.jackson.databind.JsonNode;
import dev.granary.tools.UserError;
import dev.granary.tools.cluster.LocalCluster;
import dev.granary.tools.cluster.MountPoints;
import dev.granary.tools.cluster.Nodes;
import dev.granary.tools.config.GranaryConfig;
import dev.granary.tools.dataset.DatasetRunner;
import dev.granary.tools.prereq.Prerequisites;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.stream.Stream;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code granary quickstart}: the whole system in one JVM — the embedded S3 server (S3Proxy on a
 * local folder), 3 MDS Raft peers, 2 OSS and the FUSE mount, each talking over loopback with its
 * real protocol — then a sample dataset in MLPerf Storage shapes written through the mount and
 * read back with a PyTorch DataLoader, every checksum verified, throughput printed.
 */
@Command(name = "quickstart", mixinStandardHelpOptions = true,
        description = {"Run a whole cluster in one process: embedded S3, 3 MDS, 2 OSS and the FUSE mount.",
                "Then write a sample dataset through the mount and read it back with a PyTorch DataLoader.",
                "Stays mounted until Ctrl-C (or until its mount is unmounted) unless --exit.", "",
                "Example:  ./granary quickstart --exit",
                "          ./granary quickstart --data /srv/granary --mount /mnt/train --dataset none"})
public final class QuickstartCommand implements Callable<Integer> {
    @Option(names = "--data", paramLabel = "DIR", description = "Data folder: S3 bucket folder, MDS storage, config, log (default: ${DEFAULT-VALUE}).")
    Path data = Path.of("granary-data");

    @Option(names = "--mount", paramLabel = "DIR", description = "Mount point (default: /mnt/train, created if missing; a given one must exist and be empty).")
    Path mount;

    @Option(names = "--dataset", paramLabel = "NAME", description = "Folder of the sample dataset inside the mount, or 'none' to skip it (default: ${DEFAULT-VALUE}).")
    String dataset = "mlperf-sample";

    @Option(names = "--dataset-scale", paramLabel = "S", description = "Scale of the sample dataset, 1.0 = 8 x 28 MiB .npz + 2000 x 110 KiB records (default: ${DEFAULT-VALUE}).")
    double scale = 1.0;

    @Option(names = "--workers", description = "DataLoader worker processes (default: ${DEFAULT-VALUE}).")
    int workers = 4;

    @Option(names = "--base-port", description = "First port: S3 on it, MDS on +61..+63, OSS on +71..+72; only for a new data folder (default: ${DEFAULT-VALUE}).")
    int basePort = 19000;

    @Option(names = "--exit", description = "Unmount and exit when the dataset has been read, instead of staying mounted.")
    boolean exit;

    @Override
    public Integer call() throws Exception {
        PrintStream out = System.out;
        if (!dataset.equals("none") && !dataset.matches("[A-Za-z0-9._-]+")) {
            throw new UserError("--dataset must be a simple folder name or 'none', got '" + dataset + "'");
        }
        if (scale <= 0 || scale > 100) throw new UserError("--dataset-scale must be in (0, 100], got " + scale);
        if (workers < 0 || workers > 64) throw new UserError("--workers must be 0..64, got " + workers);
        if (basePort < 1024 || basePort > 65400) throw new UserError("--base-port must be 1024..65400, got " + basePort);

        Path dataDir = data.toAbsolutePath().normalize();
        if (Files.exists(dataDir) && !Files.isDirectory(dataDir)) {
            throw new UserError("--data " + dataDir + " is not a directory");
        }
        try {
            Files.createDirectories(dataDir);
        } catch (java.io.IOException e) {
            throw new UserError("--data " + dataDir + " cannot be created: " + e.getClass().getSimpleName() + " " + e.getMessage());
        }
        System.setProperty("granary.log.dir", dataDir.toString());
        boolean defaultMount = mount == null;
        Path mnt = (defaultMount ? Path.of("/mnt/train") : mount).toAbsolutePath().normalize();

        Path configFile = dataDir.resolve("granary.yaml");
        GranaryConfig cfg;
        if (Files.exists(configFile)) {
            cfg = GranaryConfig.load(configFile);
            cfg.client.mount = mnt.toString();
            if (basePort != 19000) {
                System.err.println("granary quickstart: --base-port " + basePort + " ignored: " + configFile
                        + " already fixes the ports (delete it, with the data folder, to start anew)");
            }
        } else {
            cfg = GranaryConfig.localDefault(dataDir, mnt, basePort);
            cfg.validate(configFile.toString());
        }

        Prerequisites.ensureFuse();
        String python = dataset.equals("none") ? null : Prerequisites.ensurePython();
        LocalCluster.checkPortsFree(cfg); // first: a running quickstart holds the ports
        MountPoints.prepare(mnt, defaultMount);
        if (!Files.exists(configFile)) cfg.save(configFile);

        out.println("Granary quickstart: data in " + dataDir + " (log: " + dataDir.resolve("granary.log") + ")");
        long t0 = System.nanoTime();
        try (LocalCluster cluster = LocalCluster.start(cfg, out)) {
            Nodes.Client client = cluster.mount(mnt);
            out.printf(Locale.ROOT, "  ready in %.1f s: mounted at %s%n", (System.nanoTime() - t0) / 1e9, mnt);
            if (python != null) {
                runDataset(out, python, mnt.resolve(dataset), cluster, dataDir);
            }
            if (exit) {
                out.println("Unmounting and stopping (--exit).");
            } else {
                out.println("Mounted at " + mnt + ". Press Ctrl-C to unmount and stop.");
                // Also stops when the mount goes away (umount, fusermount -u), as `granary mount`
                // does: a quickstart serving no mount would only hold its ports and the data folder.
                CompletableFuture<?> unmounted = client.mount().sessionEnded();
                ConfigOption.awaitShutdown(() -> {
                    if (!unmounted.isDone()) { // Ctrl-C or SIGTERM, not an unmount
                        out.println("\nUnmounting " + mnt + " and stopping...");
                    }
                    cluster.close();
                }, unmounted, () -> out.println("granary: " + mnt + " was unmounted; stopping"));
            }
        }
        return 0;
    }

    private void runDataset(PrintStream out, String python, Path root, LocalCluster cluster, Path dataDir) throws IOException {
        DatasetRunner runner = new DatasetRunner(python, out);
        out.println("Writing the sample dataset to " + root + " (unet3d-like .npz volumes, resnet50-like 110 KiB records)...");
        runner.generate(root, scale);
        out.println("Reading it back with a PyTorch DataLoader (" + workers + " workers), verifying every checksum...");
        JsonNode r = runner.read(root, workers);
        if (!r.path("ok").asBoolean()) {
            throw new UserError("dataset verification FAILED: " + r.path("bad"));
        }
        JsonNode f = r.path("figures");
        long samples = 0;
        long bytes = 0;
        double secs = 0;
        for (JsonNode n : f) {
            samples += n.path("samples").asLong();
            bytes += n.path("bytes").asLong();
            secs += n.path("seconds").asDouble();
        }
        out.printf(Locale.ROOT, "Verified %d files: %,.0f samples/s, %,.1f MiB/s overall (unet3d %,.1f MiB/s, resnet50 %,.0f samples/s)%n",
                r.path("files").asLong(), samples / secs, bytes / 1048576.0 / secs,
                f.path("unet3d").path("mib_per_s").asDouble(), f.path("resnet50").path("samples_per_s").asDouble());
        Path bucket = cluster.bucketFolder();
        if (bucket != null && Files.isDirectory(bucket)) {
            long objects;
            try (Stream<Path> s = Files.walk(bucket)) {
                objects = s.filter(Files::isRegularFile).count();
            }
            out.println("Blocks are objects in the embedded bucket's folder: " + objects + " objects under " + bucket);
        }
    }
}
