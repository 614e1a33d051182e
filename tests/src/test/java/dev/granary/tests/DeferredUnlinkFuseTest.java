package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.tools.prereq.Prerequisites;
import dev.granary.tools.config.GranaryConfig;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code client.deferred_unlink: true} through a real FUSE mount (A), seen from a second mount
 * with the default (B): {@code rm -r} of a tree, the tree gone on A at once, a name recreated at
 * once, and after {@code fsync} of the parent directory nothing of the tree left on B.
 */
class DeferredUnlinkFuseTest {
    @TempDir
    static Path tmp;
    static MiniCluster cluster;
    static Path mntA;
    static Path mntB;

    @BeforeAll
    static void start() throws Exception {
        MiniCluster.assumeFuseDevice();
        Prerequisites.ensureFuse();
        GranaryConfig cfg = MiniCluster.configFor(tmp.resolve("cluster"));
        cfg.client.deferredUnlink = true;
        cluster = MiniCluster.start(cfg);
        mntA = tmp.resolve("a");
        cluster.mount(mntA);
        cfg.client.deferredUnlink = false;
        mntB = tmp.resolve("b");
        cluster.mount(mntB);
    }

    @AfterAll
    static void stop() {
        if (cluster != null) cluster.close();
    }

    @Test
    void rmOfATreeIsSeenAtOnceHereAndByAnotherClientAfterFsyncOfTheDirectory() throws Exception {
        Path parent = Files.createDirectories(mntA.resolve("data"));
        Path tree = Files.createDirectories(parent.resolve("tree/sub"));
        for (int i = 0; i < 200; i++) {
            Files.writeString(parent.resolve("tree/f" + i), "file " + i);
        }
        for (int i = 0; i < 50; i++) {
            Files.writeString(tree.resolve("g" + i), "sub " + i);
        }
        Files.writeString(parent.resolve("keep"), "kept");
        assertEquals("kept", Files.readString(mntB.resolve("data/keep"))); // B is up (and caches nothing of the tree)

        Process rm = new ProcessBuilder("rm", "-r", parent.resolve("tree").toString()).redirectErrorStream(true).start();
        assertTrue(rm.waitFor(120, TimeUnit.SECONDS));
        assertEquals(0, rm.exitValue(), new String(rm.getInputStream().readAllBytes(), StandardCharsets.UTF_8));
        assertFalse(Files.exists(parent.resolve("tree")), "gone on A at once");
        try (Stream<Path> s = Files.list(parent)) {
            assertEquals(List.of("keep"), s.map(p -> p.getFileName().toString()).toList());
        }
        // a removed name made again at once
        Files.createDirectories(parent.resolve("tree"));
        Files.writeString(parent.resolve("tree/f7"), "again");
        assertEquals("again", Files.readString(parent.resolve("tree/f7")));

        try (FileChannel dir = FileChannel.open(parent, StandardOpenOption.READ)) {
            dir.force(true); // fsync(2) of the directory: waits for the deferred removals in it
        }
        try (FileChannel dir = FileChannel.open(parent.resolve("tree"), StandardOpenOption.READ)) {
            dir.force(true);
        }
        assertThrows(NoSuchFileException.class, () -> Files.readString(mntB.resolve("data/tree/f8")));
        assertThrows(NoSuchFileException.class, () -> Files.readString(mntB.resolve("data/tree/sub/g3")));
        assertEquals("again", Files.readString(mntB.resolve("data/tree/f7")));
        try (Stream<Path> s = Files.list(mntB.resolve("data/tree"))) {
            assertEquals(List.of("f7"), s.map(p -> p.getFileName().toString()).toList());
        }
        assertArrayEquals("again".getBytes(StandardCharsets.UTF_8), Files.readAllBytes(mntB.resolve("data/tree/f7")));
    }
}
