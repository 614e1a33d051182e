package dev.granary.client.fuse;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.client.vfs.ClientConfig;
import dev.granary.client.vfs.GranaryVfs;
import dev.granary.client.vfs.LocalCluster;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A real FUSE mount of GranaryVfs (real MDS namespace, real embedded S3) driven by java.nio and coreutils. */
class FuseMountTest {
    @TempDir
    Path tmp;

    /** Runs a command; returns stdout; fails the test on a non-zero exit. */
    static String sh(String... cmd) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "timeout: " + String.join(" ", cmd));
        assertEquals(0, p.exitValue(), String.join(" ", cmd) + " failed: " + out);
        return out;
    }

    /** Skips the test, saying why, on a machine where nothing can be mounted with FUSE. */
    static void requireFuse() {
        if (!Files.exists(Path.of("/dev/fuse"))) {
            Assumptions.abort("skipped: /dev/fuse is missing on this machine");
        }
        try {
            FuseMount.checkFuseAvailable();
        } catch (FuseMount.MountException e) {
            Assumptions.abort("skipped: " + e.getMessage());
        }
    }

    @Test
    void mountPointChecksGiveClearMessages() throws IOException {
        Path missing = tmp.resolve("missing");
        assertTrue(assertThrows(FuseMount.MountException.class, () -> FuseMount.checkMountPoint(missing))
                .getMessage().contains("does not exist"));
        Path file = Files.writeString(tmp.resolve("file"), "x");
        assertTrue(assertThrows(FuseMount.MountException.class, () -> FuseMount.checkMountPoint(file))
                .getMessage().contains("not a directory"));
        Path full = Files.createDirectories(tmp.resolve("full"));
        Files.writeString(full.resolve("f"), "x");
        assertTrue(assertThrows(FuseMount.MountException.class, () -> FuseMount.checkMountPoint(full))
                .getMessage().contains("not empty"));
        List<String> opts = FuseMount.options(ClientConfig.defaults().withAllowOther(true), true, false);
        assertTrue(opts.containsAll(List.of("fsname=granary", "big_writes", "max_read=1048576", "max_write=1048576",
                "attr_timeout=1.000", "entry_timeout=1.000", "default_permissions", "allow_other")), opts.toString());
        // keep_cache is decided per open (PageCacheVersions): libfuse's auto_cache would race with it
        assertFalse(opts.contains("auto_cache"), opts.toString());
        assertFalse(FuseMount.options(ClientConfig.defaults().withAllowOther(true), false, false).contains("allow_other"));
    }

    /**
     * The kernel sends reads of max_read (1 MiB), not libfuse2's 128 KiB: PooledFuseFS asks for
     * 256-page requests in its INIT reply and FuseMount raises the mount's readahead. Before,
     * the largest READ was 131,072 bytes, for O_DIRECT and buffered reads alike.
     */
    @Test
    void readsReachGranaryInRequestsOfMaxRead() throws Exception {
        withMount((cluster, m, mnt) -> {
            byte[] data = new byte[8 << 20];
            new Random(3).nextBytes(data);
            Files.write(mnt.resolve("big"), data);
            Files.write(mnt.resolve("big2"), data);
            sh("dd", "if=" + mnt.resolve("big"), "of=/dev/null", "bs=1M", "iflag=direct");
            assertEquals(1 << 20, m.largestReadRequest(), "O_DIRECT 1 MiB reads");
            String dev = FuseMount.mountedDevice(mnt);
            if (FuseMount.isRoot()) {
                assertEquals("1024", Files.readString(Path.of("/sys/class/bdi", dev, "read_ahead_kb")).trim());
            }
            // buffered: pages written through the mount may be cached; read a file the page cache lacks
            sh("sh", "-c", "echo 1 > /proc/sys/vm/drop_caches || true");
            assertArrayEquals(data, Files.readAllBytes(mnt.resolve("big2")));
        });
    }

    /**
     * An open fetches fresh attributes from the MDS (close-to-open) and makes the kernel forget
     * the ones it cached only when they differ from what this mount gave it: opening, fstat-ing
     * and reading a file that did not change costs no GETATTR round trip (before: one per open,
     * the fstat after the open's invalidation), while a file another client changed is still seen
     * with its new size and bytes by the next open.
     */
    @Test
    void anOpenAsksTheKernelToForgetAttributesOnlyWhenTheyChanged() throws Exception {
        withMount((cluster, m, mnt) -> {
            GranaryVfs other = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults());
            try {
                byte[] v1 = "first version\n".getBytes(StandardCharsets.UTF_8);
                byte[] v2 = "second, longer version\n".getBytes(StandardCharsets.UTF_8);
                writeAsOtherClient(other, "/sample", v1);
                Path f = mnt.resolve("sample");
                assertEquals(v1.length, Files.size(f)); // LOOKUP: the kernel holds these attributes now
                long before = m.getattrRequests();
                for (int i = 0; i < 3; i++) {
                    try (FileChannel ch = FileChannel.open(f)) { // open, fstat, close
                        assertEquals(v1.length, ch.size());
                    }
                }
                assertEquals(0, m.getattrRequests() - before, "GETATTRs for opens of an unchanged file");
                assertArrayEquals(v1, Files.readAllBytes(f));
                // (a read that reached Granary makes the kernel ask for atime at the next stat: not counted below)

                writeAsOtherClient(other, "/sample", v2);
                assertArrayEquals(v2, Files.readAllBytes(f), "close-to-open: the other client's new size and bytes");
                assertTrue(m.getattrRequests() - before >= 1, "the changed file's attributes were asked for again");
            } finally {
                other.close();
            }
        });
    }

    /**
     * With {@code granary.fuse.noflushReadOnly}, close(2) of a read-only descriptor sends no FLUSH
     * on the /dev/fuse binding (FOPEN_NOFLUSH: nothing to commit; a read of a small file is
     * LOOKUP, OPEN, IOCTL, READ, RELEASE), while a descriptor that may write still flushes at
     * close (close-to-open: its bytes are committed when close returns), and so does a read-only
     * one opened while this process holds a POSIX lock on the file (closing it must release the
     * lock, POSIX). Without the property (the default) every close flushes.
     */
    @Test
    void closesOfReadOnlyDescriptorsSendNoFlushWhenAskedTo() throws Exception {
        if (!FuseMount.directBinding(ClientConfig.defaults())) {
            Assumptions.abort("skipped: FOPEN_NOFLUSH is sent by the /dev/fuse binding, used as root; libfuse2 keeps sending FLUSH");
        }
        withMount((cluster, m, mnt) -> {
            Path f = mnt.resolve("default");
            Files.write(f, new byte[10]);
            long before = m.flushRequests();
            for (int i = 0; i < 3; i++) {
                assertEquals(10, Files.readAllBytes(f).length);
            }
            assertEquals(3, m.flushRequests() - before, "FLUSHes for 3 read-only opens by default");
        });
        System.setProperty(GranaryFuse.NOFLUSH_READ_ONLY_PROPERTY, "true");
        try {
            withMount(FuseMountTest::readOnlyClosesWithoutFlush);
        } finally {
            System.clearProperty(GranaryFuse.NOFLUSH_READ_ONLY_PROPERTY);
        }
    }

    private static void readOnlyClosesWithoutFlush(LocalCluster cluster, FuseMount m, Path mnt) throws Exception {
        {
            Path f = mnt.resolve("sample");
            byte[] data = "sample bytes\n".getBytes(StandardCharsets.UTF_8);
            Files.write(f, data);
            long before = m.flushRequests();
            for (int i = 0; i < 3; i++) {
                assertArrayEquals(data, Files.readAllBytes(f));
            }
            assertEquals(0, m.flushRequests() - before, "FLUSHes for 3 read-only opens");

            Files.write(f, data, java.nio.file.StandardOpenOption.APPEND);
            assertTrue(m.flushRequests() - before >= 1, "a write's close flushes");
            assertEquals(2 * data.length, Files.size(f));

            long locked = m.flushRequests();
            try (FileChannel rw = FileChannel.open(f, java.nio.file.StandardOpenOption.READ, java.nio.file.StandardOpenOption.WRITE);
                 java.nio.channels.FileLock l = rw.lock(0, 10, false)) {
                assertTrue(l.isValid());
                try (FileChannel ro = FileChannel.open(f)) {
                    assertEquals(2 * data.length, ro.size());
                }
                assertEquals(1, m.flushRequests() - locked, "the read-only close while this process held a lock flushed");
            }
        }
    }

    /** A test body that runs while a client with the default configuration is mounted at {@code mnt}. */
    @FunctionalInterface
    private interface MountedBody {
        void run(LocalCluster cluster, FuseMount m, Path mnt) throws Exception;
    }

    /** Runs {@code body} with a fresh cluster mounted at tmp/mnt; unmounts and closes everything after it. */
    private void withMount(MountedBody body) throws Exception {
        requireFuse();
        Path mnt = Files.createDirectories(tmp.resolve("mnt"));
        try (LocalCluster cluster = new LocalCluster(tmp.resolve("cluster"))) {
            GranaryVfs vfs = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults());
            try {
                FuseMount m = FuseMount.mount(vfs, mnt, vfs.config());
                try {
                    body.run(cluster, m, mnt);
                } finally {
                    m.close();
                }
            } finally {
                vfs.close();
            }
        }
    }

    /** Writes {@code data} as the whole file {@code path} through {@code client}'s own API and closes it. */
    private static void writeAsOtherClient(GranaryVfs client, String path, byte[] data) {
        long fh = client.create(LocalCluster.ROOT, path, 0644, GranaryVfs.O_WRONLY | GranaryVfs.O_TRUNC);
        client.write(LocalCluster.ROOT, fh, 0, data, data.length);
        client.flush(LocalCluster.ROOT, fh);
        client.release(LocalCluster.ROOT, fh);
    }

    @Test
    void theBindingFollowsTheConfigUnlessThePropertyNamesAnother() {
        String saved = System.getProperty("granary.fuse.binding");
        System.clearProperty("granary.fuse.binding");
        try {
            ClientConfig c = ClientConfig.defaults();
            assertEquals(ClientConfig.FuseBinding.AUTO, c.fuseBinding());
            assertEquals(FuseMount.isRoot(), FuseMount.directBinding(c), "auto is the /dev/fuse binding exactly as root");
            assertTrue(FuseMount.directBinding(c.withFuseBinding(ClientConfig.FuseBinding.DIRECT)));
            assertFalse(FuseMount.directBinding(c.withFuseBinding(ClientConfig.FuseBinding.JNR)));
            System.setProperty("granary.fuse.binding", "JNR");
            assertFalse(FuseMount.directBinding(c.withFuseBinding(ClientConfig.FuseBinding.DIRECT)), "the property wins");
            System.setProperty("granary.fuse.binding", "direct");
            assertTrue(FuseMount.directBinding(c.withFuseBinding(ClientConfig.FuseBinding.JNR)));
            System.setProperty("granary.fuse.binding", "libfuse3");
            FuseMount.MountException e = assertThrows(FuseMount.MountException.class, () -> FuseMount.directBinding(c));
            assertEquals("-Dgranary.fuse.binding=libfuse3 names no FUSE binding (auto, direct or jnr)", e.getMessage());
            assertEquals(null, ClientConfig.FuseBinding.parse(""));
            assertEquals(ClientConfig.FuseBinding.AUTO, ClientConfig.FuseBinding.parse(" Auto "));
        } finally {
            if (saved == null) {
                System.clearProperty("granary.fuse.binding");
            } else {
                System.setProperty("granary.fuse.binding", saved);
            }
        }
    }

    @Test
    void mountedFilesystemServesCoreutils() throws Exception {
        requireFuse();
        Path mnt = Files.createDirectories(tmp.resolve("mnt"));
        try (LocalCluster cluster = new LocalCluster(tmp.resolve("cluster"))) {
            GranaryVfs vfs = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults().withAllowOther(true));
            try {
                cluster.stripedDir(vfs, "/data", 64 * 1024);
                FuseMount m = FuseMount.mount(vfs, mnt, vfs.config());
                try {
                    assertTrue(FuseMount.isMounted(mnt));
                    // write and read back through the kernel
                    Path hello = mnt.resolve("data/hello.txt");
                    Files.writeString(hello, "hello through fuse\n");
                    assertEquals("hello through fuse\n", Files.readString(hello));
                    assertEquals("hello through fuse\n", sh("cat", hello.toString()));
                    // a multi-stripe file with cp, compared with cmp
                    byte[] big = new byte[5 * 64 * 1024 + 777];
                    new Random(1).nextBytes(big);
                    Path src = Files.write(tmp.resolve("big.bin"), big);
                    sh("cp", src.toString(), mnt.resolve("data/big.bin").toString());
                    sh("cmp", src.toString(), mnt.resolve("data/big.bin").toString());
                    assertEquals(big.length, Files.size(mnt.resolve("data/big.bin")));
                    assertArrayEquals(big, Files.readAllBytes(mnt.resolve("data/big.bin")));
                    // append with the shell
                    sh("sh", "-c", "echo more >> " + hello);
                    assertEquals("hello through fuse\nmore\n", Files.readString(hello));
                    // mkdir / readdir
                    Files.createDirectory(mnt.resolve("data/sub"));
                    try (Stream<Path> s = Files.list(mnt.resolve("data"))) {
                        assertEquals(List.of("big.bin", "hello.txt", "sub"),
                                s.map(p -> p.getFileName().toString()).sorted().toList());
                    }
                    String ls = sh("ls", "-la", mnt.resolve("data").toString());
                    assertTrue(ls.contains("big.bin") && ls.contains("hello.txt"), ls);
                    // rename
                    Files.move(hello, mnt.resolve("data/sub/renamed.txt"), StandardCopyOption.ATOMIC_MOVE);
                    assertFalse(Files.exists(hello));
                    assertEquals("hello through fuse\nmore\n", Files.readString(mnt.resolve("data/sub/renamed.txt")));
                    // symlink
                    Path link = mnt.resolve("data/link");
                    Files.createSymbolicLink(link, Path.of("sub/renamed.txt"));
                    assertEquals(Path.of("sub/renamed.txt"), Files.readSymbolicLink(link));
                    assertEquals("hello through fuse\nmore\n", Files.readString(link));
                    // chmod
                    Files.setPosixFilePermissions(mnt.resolve("data/big.bin"), PosixFilePermissions.fromString("rw-r-----"));
                    assertEquals("rw-r-----", PosixFilePermissions.toString(Files.getPosixFilePermissions(mnt.resolve("data/big.bin"))));
                    assertEquals("640", sh("stat", "-c", "%a", mnt.resolve("data/big.bin").toString()).trim());
                    // another uid (allow_other): Granary checks permissions with the caller from the FUSE context
                    if (Files.isExecutable(Path.of("/usr/bin/setpriv")) && "root".equals(System.getProperty("user.name"))) {
                        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwxr-xr-x"));
                        Path pub = Files.writeString(mnt.resolve("data/public.txt"), "pub");
                        Path priv = Files.writeString(mnt.resolve("data/private.txt"), "priv");
                        Files.setPosixFilePermissions(priv, PosixFilePermissions.fromString("rw-------"));
                        assertEquals("pub", sh("setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "cat", pub.toString()));
                        Process denied = new ProcessBuilder("setpriv", "--reuid=1000", "--regid=1000", "--clear-groups",
                                "cat", priv.toString()).redirectErrorStream(true).start();
                        String err = new String(denied.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                        assertTrue(denied.waitFor(30, TimeUnit.SECONDS));
                        assertTrue(denied.exitValue() != 0 && err.contains("Permission denied"), err);
                        Files.delete(pub);
                        Files.delete(priv);
                    }
                    // truncate
                    sh("truncate", "-s", "1000", mnt.resolve("data/big.bin").toString());
                    assertEquals(1000, Files.size(mnt.resolve("data/big.bin")));
                    // unlink / rmdir
                    Files.delete(link);
                    Files.delete(mnt.resolve("data/sub/renamed.txt"));
                    Files.delete(mnt.resolve("data/sub"));
                    assertThrows(NoSuchFileException.class, () -> Files.readString(mnt.resolve("data/sub/renamed.txt")));
                    // unsupported operations fail loudly instead of faking success
                    Process fifo = new ProcessBuilder("mkfifo", mnt.resolve("data/fifo").toString()).redirectErrorStream(true).start();
                    assertTrue(fifo.waitFor(30, TimeUnit.SECONDS));
                    assertTrue(fifo.exitValue() != 0, "mkfifo must fail");
                } finally {
                    m.umount();
                }
                assertFalse(FuseMount.isMounted(mnt));
                try (Stream<Path> s = Files.list(mnt)) {
                    assertEquals(0, s.count(), "the mount point is empty after unmount");
                }
            } finally {
                vfs.close();
            }
            // the data is still in Granary after unmount
            GranaryVfs again = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults());
            try {
                assertEquals(1000, again.getattr(LocalCluster.ROOT, "/data/big.bin").getSize());
            } finally {
                again.close();
            }
        }
    }
}
