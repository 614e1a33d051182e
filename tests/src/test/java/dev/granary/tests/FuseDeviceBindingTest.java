package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.client.fuse.FuseMount;
import dev.granary.client.fuse.kernel.FuseDevice;
import dev.granary.client.fuse.kernel.FuseKernel;
import dev.granary.client.fuse.kernel.FuseReply;
import dev.granary.client.fuse.kernel.FuseRequest;
import dev.granary.client.fuse.kernel.FuseSession;
import dev.granary.client.fuse.kernel.LowLevelFs;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.TreeSet;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Granary's FUSE binding on /dev/fuse ({@code client/fuse/kernel}: the kernel protocol spoken
 * from Java, no libfuse), through a real mount: a small filesystem on node ids serves a file of
 * known bytes (READ replies copied into the reply and sent from native memory of their own), a
 * directory listed over several READDIR requests, and errors; the values read through the kernel
 * are checked, and unmounting ends the session.
 */
class FuseDeviceBindingTest {
    private static final long ROOT = 1, FILE = 2, DIR = 3, FIRST_CHILD = 100;
    private static final int CHILDREN = 700;
    private static final int FILE_BYTES = 3 * (1 << 20) + 12_345; // not a multiple of a request

    @TempDir
    Path tmp;

    /** The test filesystem: /file (FILE_BYTES of a known pattern), /dir (CHILDREN empty files); a lookup of /broken throws. */
    static final class PatternFs implements LowLevelFs {
        final byte[] data = new byte[FILE_BYTES];
        final ByteBuffer nativeData = ByteBuffer.allocateDirect(FILE_BYTES);
        final long nativeAddress = jnr.ffi.Pointer.wrap(jnr.ffi.Runtime.getSystemRuntime(), nativeData).address();
        volatile long forgets;

        PatternFs() {
            new Random(42).nextBytes(data);
            nativeData.put(0, data);
        }

        static String child(int i) {
            return "child-with-a-rather-long-name-" + i; // ~40 bytes: a 4 KiB READDIR holds about 60
        }

        void attr(FuseReply r, long node) {
            boolean dir = node == ROOT || node == DIR;
            long size = node == FILE ? FILE_BYTES : 0;
            r.attr(node, size, (size + 511) / 512, 1_700_000_000_123_456_789L, 1_700_000_001_000_000_007L, 1_700_000_002_000_000_000L,
                    (dir ? 0040000 : 0100000) | (dir ? 0755 : 0640), dir ? 2 : 1, 0, 0, 0, 4096);
        }

        @Override
        public int lookup(FuseRequest req, long parent, String name, FuseReply reply) {
            long node = -1;
            if (parent == ROOT && name.equals("broken")) {
                throw new IllegalStateException("a fault in the filesystem");
            }
            if (parent == ROOT) {
                node = switch (name) {
                    case "file" -> FILE;
                    case "dir" -> DIR;
                    default -> -1;
                };
            } else if (parent == DIR && name.startsWith("child-with-a-rather-long-name-")) {
                int i = Integer.parseInt(name.substring(30));
                node = i >= 0 && i < CHILDREN ? FIRST_CHILD + i : -1;
            }
            if (node < 0) {
                return -FuseKernel.ENOENT;
            }
            reply.entry(node, 0, 1_000_000_000L, 1_000_000_000L);
            attr(reply, node);
            return 0;
        }

        @Override
        public void forget(long nodeid, long nlookup) {
            forgets += nlookup;
        }

        @Override
        public int getattr(FuseRequest req, long nodeid, long fh, FuseReply reply) {
            reply.attrOut(1_000_000_000L);
            attr(reply, nodeid);
            return 0;
        }

        @Override
        public int open(FuseRequest req, long nodeid, int flags, FuseReply reply) {
            if ((flags & 3) != 0) {
                return -FuseKernel.EACCES;
            }
            reply.open(nodeid, 0);
            return 0;
        }

        @Override
        public int read(FuseRequest req, long nodeid, long fh, long offset, int size, FuseReply reply) {
            int n = (int) Math.max(0, Math.min(size, FILE_BYTES - offset));
            if (n == 0) {
                return 0;
            }
            // the first half of the bytes copied into the reply, the rest sent from native memory
            int copied = Math.min(n / 2, reply.room());
            reply.put(data, (int) offset, copied);
            reply.appendNative(nativeAddress + offset + copied, n - copied);
            return 0;
        }

        @Override
        public int opendir(FuseRequest req, long nodeid, int flags, FuseReply reply) {
            reply.open(nodeid, 0);
            return 0;
        }

        @Override
        public int readdir(FuseRequest req, long nodeid, long fh, long offset, int size, FuseReply reply) {
            List<String> names = new ArrayList<>(List.of(".", ".."));
            if (nodeid == ROOT) {
                names.addAll(List.of("file", "dir", "broken"));
            } else {
                for (int i = 0; i < CHILDREN; i++) {
                    names.add(child(i));
                }
            }
            for (int i = (int) offset; i < names.size(); i++) {
                if (!reply.dirent(1000 + i, i + 1, FuseKernel.DT_REG, names.get(i), size)) {
                    break;
                }
            }
            return 0;
        }
    }

    @Test
    void aFilesystemOnTheDeviceServesBytesNamesAndErrorsThroughTheKernel() throws Exception {
        Path mp = Files.createDirectory(tmp.resolve("m"));
        PatternFs fs = new PatternFs();
        FuseDevice dev = FuseDevice.mount(mp, "granary-test", "granary-test", List.of("default_permissions", "max_read=1048576"));
        FuseSession session = new FuseSession(dev, fs, 1 << 20);
        try {
            session.start(4, "test-fuse-");
            assertEquals("fuse.granary-test granary-test", FuseMount.mountedFsType(mp));
            Path file = mp.resolve("file");
            assertEquals(FILE_BYTES, Files.size(file));
            assertEquals("rw-r-----", PosixFilePermissions.toString(Files.getPosixFilePermissions(file)));
            assertEquals(1_700_000_001_000_000_007L,
                    Files.getLastModifiedTime(file).to(TimeUnit.NANOSECONDS), "mtime with its nanoseconds");
            assertTrue(Files.isDirectory(mp.resolve("dir")));
            assertTrue(session.minor() >= 12 && session.minor() <= FuseKernel.MINOR, "agreed minor " + session.minor());

            assertArrayEquals(fs.data, Files.readAllBytes(file), "the whole file, read through the kernel");
            // reads at odd offsets and sizes, from 4 threads at once, with the page cache dropped
            try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
                ExecutorService pool = Executors.newFixedThreadPool(4);
                List<Future<?>> done = new ArrayList<>();
                for (int t = 0; t < 4; t++) {
                    int seed = t;
                    done.add(pool.submit(() -> {
                        Random rnd = new Random(seed);
                        for (int i = 0; i < 50; i++) {
                            long off = rnd.nextInt(FILE_BYTES + 1000);
                            ByteBuffer b = ByteBuffer.allocate(1 + rnd.nextInt(300_000));
                            int n = Math.max(0, ch.read(b, off));
                            int want = (int) Math.max(0, Math.min(b.capacity(), FILE_BYTES - off));
                            assertEquals(want, n, "bytes read at " + off);
                            for (int k = 0; k < n; k++) {
                                if (b.get(k) != fs.data[(int) off + k]) {
                                    throw new AssertionError("byte " + (off + k) + " differs");
                                }
                            }
                        }
                        return null;
                    }));
                }
                for (Future<?> f : done) {
                    f.get(60, TimeUnit.SECONDS);
                }
                pool.shutdown();
            }

            TreeSet<String> listed = new TreeSet<>();
            try (Stream<Path> s = Files.list(mp.resolve("dir"))) {
                s.forEach(p -> listed.add(p.getFileName().toString()));
            }
            assertEquals(CHILDREN, listed.size(), "a listing of several READDIR replies");
            assertTrue(listed.contains(PatternFs.child(0)) && listed.contains(PatternFs.child(CHILDREN - 1)));
            assertEquals(0, Files.size(mp.resolve("dir").resolve(PatternFs.child(CHILDREN - 1))));

            assertThrows(NoSuchFileException.class, () -> Files.size(mp.resolve("missing")), "ENOENT from LOOKUP");
            IOException denied = assertThrows(IOException.class, () -> Files.newOutputStream(file, StandardOpenOption.WRITE).close());
            assertFalse(denied instanceof NoSuchFileException, "EACCES from OPEN, not ENOENT: " + denied);
            IOException notImplemented = assertThrows(IOException.class, () -> Files.createDirectory(mp.resolve("new")));
            assertTrue(String.valueOf(notImplemented.getMessage()).contains("Function not implemented")
                    || notImplemented.getClass().getSimpleName().contains("FileSystem"), "ENOSYS for MKDIR: " + notImplemented);
            IOException fault = assertThrows(IOException.class, () -> Files.size(mp.resolve("broken")));
            assertTrue(String.valueOf(fault.getMessage()).contains("Input/output error"), "EIO for a fault in the filesystem: " + fault);
        } finally {
            dev.unmount();
        }
        session.ended().get(30, TimeUnit.SECONDS);
        dev.close();
        assertEquals(null, FuseMount.mountedFsType(mp), "unmounted");
    }

    @Test
    void aMountPointThatDoesNotExistIsAClearError() {
        FuseMount.MountException e = assertThrows(FuseMount.MountException.class,
                () -> FuseDevice.mount(tmp.resolve("absent"), "granary-test", "granary-test", List.of()));
        assertTrue(e.getMessage().contains("No such file or directory") && e.getMessage().contains("absent"), e.getMessage());
    }
}
