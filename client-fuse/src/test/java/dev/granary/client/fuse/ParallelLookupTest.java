package dev.granary.client.fuse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.client.vfs.ClientConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import ru.serce.jnrfuse.ErrorCodes;
import ru.serce.jnrfuse.struct.FileStat;

/**
 * The kernel sends lookups of one directory at once through {@link PooledFuseFS} (its INIT reply
 * asks for {@code FUSE_PARALLEL_DIROPS}): on a real FUSE mount whose every lookup in {@code /d}
 * takes 1 s, 4 threads stat-ing 4 names of {@code /d} are served together. With libfuse2's own
 * INIT reply the kernel held its per-directory lock across each lookup: one in flight at a time.
 */
class ParallelLookupTest {
    @TempDir
    Path tmp;

    /** A filesystem of one directory, /d, whose every name is an empty file that takes 1 s to look up. */
    static final class SlowLookupFs extends PooledFuseFS {
        final AtomicInteger inFlight = new AtomicInteger();
        final AtomicInteger most = new AtomicInteger();

        SlowLookupFs() {
            super(8);
        }

        @Override
        public int getattr(String path, FileStat stat) {
            if (path.equals("/") || path.equals("/d")) {
                stat.st_mode.set(FileStat.S_IFDIR | 0755);
                stat.st_nlink.set(2);
                return 0;
            }
            if (!path.startsWith("/d/") || path.indexOf('/', 3) >= 0) {
                return -ErrorCodes.ENOENT();
            }
            most.accumulateAndGet(inFlight.incrementAndGet(), Math::max);
            try {
                Thread.sleep(1_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                inFlight.decrementAndGet();
            }
            stat.st_mode.set(FileStat.S_IFREG | 0644);
            stat.st_nlink.set(1);
            return 0;
        }
    }

    @Test
    void lookupsInOneDirectoryRunAtOnce() throws Exception {
        FuseMountTest.requireFuse();
        Path mnt = Files.createDirectories(tmp.resolve("mnt"));
        SlowLookupFs fs = new SlowLookupFs();
        List<String> opts = FuseMount.options(ClientConfig.defaults(), FuseMount.isRoot(), false);
        fs.mount(mnt, false, false, opts.toArray(new String[0]));
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!FuseMount.isMounted(mnt) && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            assertTrue(Files.isDirectory(mnt.resolve("d")));
            List<Future<Boolean>> stats = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                Path p = mnt.resolve("d").resolve("f" + i);
                stats.add(pool.submit(() -> Files.isRegularFile(p)));
            }
            for (Future<Boolean> s : stats) {
                assertTrue(s.get(30, TimeUnit.SECONDS));
            }
            assertEquals(4, fs.most.get(), "lookups of /d in flight at once");
        } finally {
            pool.shutdownNow();
            fs.umount();
        }
    }
}
