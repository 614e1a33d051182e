package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.client.fuse.FuseMount;
import dev.granary.objbacker.EmbeddedS3;
import dev.granary.tools.cluster.MountPoints;
import dev.granary.tools.config.GranaryConfig;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The deployment path: {@code granary mds}, {@code granary oss} and {@code granary mount} as
 * separate processes from one config file, against an S3 endpoint given by URL (an S3Proxy
 * started by the test, standing in for MinIO or AWS S3), and how a mount process ends: by SIGTERM,
 * or by itself when someone unmounts its mount point.
 */
class SeparateProcessesTest {
    @TempDir
    Path tmp;

    /** The output of {@code granary status -c conf}, which must exit 0. */
    private String status(Path conf) throws Exception {
        try (GranaryProcess status = GranaryProcess.start(tmp, Map.of(), "status", "-c", conf.toString())) {
            assertEquals(0, status.waitFor(120), status.transcript());
            return String.join("\n", status.out);
        }
    }

    @Test
    void mdsOssAndMountAsSeparateProcessesFromOneConfig() throws Exception {
        MiniCluster.assumeFuseDevice();
        int base = MiniCluster.freeBase();
        Path mnt = Files.createDirectories(tmp.resolve("mnt"));
        Path mnt2 = Files.createDirectories(tmp.resolve("mnt2"));
        List<GranaryProcess> procs = new ArrayList<>();
        try (EmbeddedS3 s3 = EmbeddedS3.start(Files.createDirectories(tmp.resolve("s3")), 0, "ak", "sk")) {
            s3.createBucket("train-data");
            GranaryConfig cfg = new GranaryConfig();
            cfg.cluster = "sep";
            cfg.dataDir = tmp.resolve("data").toString();
            cfg.mds.add(new GranaryConfig.Node("mds1", "127.0.0.1:" + (base + 61)));
            cfg.oss.add(new GranaryConfig.Node("oss1", "127.0.0.1:" + (base + 71)));
            cfg.s3.endpoint = s3.endpoint().toString();
            cfg.s3.accessKey = "ak";
            cfg.s3.secretKey = "sk";
            cfg.osts.add(new GranaryConfig.Ost(0, "train-data", "ost0/"));
            cfg.osts.add(new GranaryConfig.Ost(1, "train-data", "ost1/"));
            cfg.client.mount = mnt.toString();
            cfg.ossDiskCache = "64MiB"; // the read cache's local-disk tier, in <data_dir>/oss-cache/oss1
            Path conf = tmp.resolve("granary.yaml");
            cfg.save(conf);

            GranaryProcess mds = GranaryProcess.start(tmp, Map.of(), "mds", "-c", conf.toString(), "--id", "mds1");
            procs.add(mds);
            assertTrue(mds.awaitLine("granary mds mds1 serving", 120), mds.transcript());
            GranaryProcess oss = GranaryProcess.start(tmp, Map.of(), "oss", "-c", conf.toString(), "--id", "oss1");
            procs.add(oss);
            assertTrue(oss.awaitLine("granary oss oss1 serving", 120), oss.transcript());
            // The heap the launcher gives `granary mount`: the default buffers must fit it.
            GranaryProcess mount = GranaryProcess.start(tmp, Map.of(), List.of("-Xms768m", "-Xmx768m"), "mount", "-c", conf.toString());
            procs.add(mount);
            assertTrue(mount.awaitLine("granary mounted at", 120), mount.transcript());

            byte[] data = new byte[9 * 1024 * 1024 + 7];
            new Random(3).nextBytes(data);
            Files.createDirectories(mnt.resolve("shards"));
            Files.write(mnt.resolve("shards/000.bin"), data);
            assertArrayEquals(data, Files.readAllBytes(mnt.resolve("shards/000.bin")));

            String out = status(conf);
            assertTrue(out.contains("OST 0") && out.contains("OST 1") && out.contains("127.0.0.1:" + (base + 71)), out);
            assertTrue(out.contains("MDS mds1  127.0.0.1:" + (base + 61) + "  LEADER  term "), out);
            // The OSS line carries its read cache and S3 counters: the file above was written
            // through it (3 blocks, cached write-through), so nothing was read from S3.
            assertTrue(out.matches("(?s).*OSS 127\\.0\\.0\\.1:" + (base + 71)
                    + "  cache [0-9.]+ MiB  hits [0-9]+  misses 0  disk cache 0 B  disk hits 0  S3 GETs 0  PUTs 3.*"), out);
            try (GranaryProcess drop = GranaryProcess.start(tmp, Map.of(), "cache", "drop", "-c", conf.toString())) {
                assertEquals(0, drop.waitFor(120), drop.transcript());
                assertTrue(String.join("\n", drop.out).matches("(?s)\\s*OSS 127\\.0\\.0\\.1:" + (base + 71) + "  dropped [0-9.]+ MiB\\s*"), drop.transcript());
            }
            Shell.ok(tmp, "sync; echo 3 > /proc/sys/vm/drop_caches");
            assertArrayEquals(data, Files.readAllBytes(mnt.resolve("shards/000.bin")), "read again from S3 after the drop");
            String out2 = status(conf);
            assertTrue(out2.contains("disk hits 0  S3 GETs 3  PUTs 3"), out2);
            // The blocks read from S3 were copied to the disk tier: an OSS restarted on it serves them
            // without S3 (its counters start at 0), and the mount reconnects to it by itself.
            oss.process.destroy(); // SIGTERM
            oss.waitFor(60);
            assertFalse(oss.process.isAlive(), oss.transcript());
            GranaryProcess oss2 = GranaryProcess.start(tmp, Map.of(), "oss", "-c", conf.toString(), "--id", "oss1");
            procs.add(oss2);
            assertTrue(oss2.awaitLine("granary oss oss1 serving", 120), oss2.transcript());
            Shell.ok(tmp, "sync; echo 3 > /proc/sys/vm/drop_caches");
            assertArrayEquals(data, Files.readAllBytes(mnt.resolve("shards/000.bin")), "read again through the restarted OSS");
            String out3 = status(conf);
            assertTrue(out3.matches("(?s).*disk cache 9\\.[0-9]+ MiB  disk hits 3  S3 GETs 0  PUTs 0.*"), out3);
            // The data is in the bucket given by URL, under both OST prefixes (4 MiB stripes, 2 OSTs).
            try (Stream<Path> s = Files.walk(s3.bucketDir("train-data"))) {
                List<String> blocks = s.filter(Files::isRegularFile).map(p -> s3.bucketDir("train-data").relativize(p).toString()).toList();
                assertTrue(blocks.stream().anyMatch(b -> b.startsWith("ost0/")) && blocks.stream().anyMatch(b -> b.startsWith("ost1/")), blocks.toString());
            }
            mount.process.destroy(); // SIGTERM: unmounts
            mount.waitFor(60);
            assertNull(FuseMount.mountedFsType(mnt), "unmounted after SIGTERM");

            // A mount someone else unmounts stops its process (exit 0), as a filesystem daemon
            // does; before, granary mount kept running, serving nothing, until SIGTERM. A lazy
            // unmount ends the session only when the last open file is closed: that file still
            // reads in full meanwhile.
            GranaryProcess mount2 = GranaryProcess.start(tmp, Map.of(), "mount", "-c", conf.toString(), "--mount", mnt2.toString());
            procs.add(mount2);
            assertTrue(mount2.awaitLine("granary mounted at", 120), mount2.transcript());
            try (FileChannel held = FileChannel.open(mnt2.resolve("shards/000.bin"), StandardOpenOption.READ)) {
                Shell.ok(tmp, "umount -l " + mnt2);
                assertNull(FuseMount.mountedFsType(mnt2), "gone from the namespace at once");
                Thread.sleep(1_000);
                assertTrue(mount2.process.isAlive(), "serves the file still open: " + mount2.transcript());
                ByteBuffer all = ByteBuffer.allocate(data.length);
                while (all.hasRemaining() && held.read(all) > 0) { }
                assertArrayEquals(data, all.array(), "the open file reads in full after the lazy unmount");
            }
            assertEquals(0, mount2.waitFor(60), mount2.transcript());
            assertTrue(mount2.out.contains("granary: " + mnt2 + " was unmounted; stopping"), mount2.transcript());

            GranaryProcess mount3 = GranaryProcess.start(tmp, Map.of(), "mount", "-c", conf.toString(), "--mount", mnt2.toString());
            procs.add(mount3);
            assertTrue(mount3.awaitLine("granary mounted at", 120), mount3.transcript());
            assertArrayEquals(data, Files.readAllBytes(mnt2.resolve("shards/000.bin")));
            Shell.ok(tmp, "umount " + mnt2);
            assertEquals(0, mount3.waitFor(60), mount3.transcript());
        } finally {
            for (GranaryProcess p : procs) {
                p.close();
            }
            MountPoints.unmountLazy(mnt);
            MountPoints.unmountLazy(mnt2);
        }
    }
}
