package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.client.fuse.FuseMount;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Data written and closed survives SIGKILL of the whole process (3 MDS, 2 OSS, S3, FUSE in one
 * JVM, as quickstart runs them): restarted on the same data folder, every file has the same bytes.
 */
class DurabilityTest {
    @TempDir
    Path tmp;

    @Test
    void closedFilesSurviveSigkillOfTheWholeProcess() throws Exception {
        MiniCluster.assumeFuseDevice();
        Path data = tmp.resolve("data");
        Path mnt = Files.createDirectories(tmp.resolve("mnt"));
        int base = MiniCluster.freeBase();
        String[] args = {"quickstart", "--dataset", "none", "--data", data.toString(), "--mount", mnt.toString(),
                "--base-port", Integer.toString(base)};
        Map<String, byte[]> files = new LinkedHashMap<>();
        Random rnd = new Random(5);
        try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), args)) {
            assertTrue(g.awaitLine("Press Ctrl-C", 180), g.transcript());
            Files.createDirectories(mnt.resolve("dir/sub"));
            for (int size : new int[] {0, 10, 100_000, 4 * 1024 * 1024 + 17, 9 * 1024 * 1024}) {
                byte[] b = new byte[size];
                rnd.nextBytes(b);
                String name = "dir/sub/file-" + size;
                Files.write(mnt.resolve(name), b); // open, write, close: committed when close returns
                files.put(name, b);
            }
            Files.writeString(mnt.resolve("dir/renamed.tmp"), "renamed");
            Files.move(mnt.resolve("dir/renamed.tmp"), mnt.resolve("dir/renamed.txt"));
            files.put("dir/renamed.txt", "renamed".getBytes());
            g.kill(); // SIGKILL: no shutdown hook, no unmount
        }
        assertTrue(FuseMount.mountedFsType(mnt) != null, "the killed process leaves a stale mount behind");
        try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), args)) {
            assertTrue(g.awaitLine("Press Ctrl-C", 180), g.transcript());
            for (Map.Entry<String, byte[]> e : files.entrySet()) {
                assertArrayEquals(e.getValue(), Files.readAllBytes(mnt.resolve(e.getKey())), e.getKey());
            }
            assertTrue(Files.notExists(mnt.resolve("dir/renamed.tmp")));
            g.process.destroy(); // SIGTERM: the shutdown hook unmounts and stops every part
            int rc = g.waitFor(60);
            assertTrue(rc == 0 || rc == 143, "exit status after SIGTERM: " + rc + "\n" + g.transcript());
        }
        assertEquals(null, FuseMount.mountedFsType(mnt), "unmounted after SIGTERM");
    }
    /**
     * A quickstart whose mount is unmounted under it (umount, fusermount -u) stops by itself with
     * exit status 0 and says why, as `granary mount` does, instead of serving no mount while it
     * holds its ports and data folder; started again on the same folder, it has every closed file.
     */
    @Test
    void unmountingTheQuickstartMountStopsItAndKeepsTheData() throws Exception {
        MiniCluster.assumeFuseDevice();
        Path data = tmp.resolve("data");
        Path mnt = Files.createDirectories(tmp.resolve("mnt"));
        String[] args = {"quickstart", "--dataset", "none", "--data", data.toString(), "--mount", mnt.toString(),
                "--base-port", Integer.toString(MiniCluster.freeBase())};
        byte[] b = new byte[300_000];
        new Random(7).nextBytes(b);
        try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), args)) {
            assertTrue(g.awaitLine("Press Ctrl-C", 180), g.transcript());
            Files.write(mnt.resolve("kept.bin"), b);
            Shell.ok(tmp, "umount " + mnt);
            assertEquals(0, g.waitFor(60), g.transcript());
            assertTrue(g.out.contains("granary: " + mnt + " was unmounted; stopping"), g.transcript());
            assertTrue(g.out.stream().noneMatch(l -> l.startsWith("Unmounting ")), "no second unmount message:\n" + g.transcript());
        }
        assertEquals(null, FuseMount.mountedFsType(mnt));
        try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), args)) {
            assertTrue(g.awaitLine("Press Ctrl-C", 180), "the ports were freed: " + g.transcript());
            assertArrayEquals(b, Files.readAllBytes(mnt.resolve("kept.bin")));
            g.process.destroy();
            int rc = g.waitFor(60);
            assertTrue(rc == 0 || rc == 143, "exit status after SIGTERM: " + rc + "\n" + g.transcript());
        }
        assertEquals(null, FuseMount.mountedFsType(mnt), "unmounted after SIGTERM");
    }
}
