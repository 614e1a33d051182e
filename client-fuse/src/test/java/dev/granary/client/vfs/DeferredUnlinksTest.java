package dev.granary.client.vfs;

import static dev.granary.client.vfs.GranaryVfs.O_CREAT;
import static dev.granary.client.vfs.GranaryVfs.O_WRONLY;
import static dev.granary.client.vfs.LocalCluster.ROOT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import dev.granary.mds.FsException;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.Status;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@link DeferredUnlinks} against the real MDS namespace (local RocksDB). */
class DeferredUnlinksTest {
    @TempDir
    static Path tmp;
    static LocalCluster cluster;

    @BeforeAll
    static void start() {
        cluster = new LocalCluster(tmp);
    }

    @AfterAll
    static void stop() {
        cluster.close();
    }

    /**
     * Refused removals wait for an fsync of their directory, each reported once, for a bounded
     * number of directories: a client that never fsyncs its directories keeps the newest ones, not
     * an error per directory for ever. Regression: nothing bounded the map.
     */
    @Test
    void refusalsAreKeptForABoundedNumberOfDirectoriesAndReportedOnce() {
        int dirs = 5;
        int max = 3;
        Caller user = GranaryVfs.caller(1000, 1000); // may not write the root-owned 0755 directories
        List<long[]> targets = new ArrayList<>();
        try (GranaryVfs vfs = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults())) {
            for (int i = 0; i < dirs; i++) {
                String d = "/refused" + i;
                vfs.mkdir(ROOT, d, 0755);
                vfs.release(ROOT, vfs.create(ROOT, d + "/f", 0644, O_CREAT | O_WRONLY));
                Attr f = vfs.lookup(ROOT, d + "/f");
                targets.add(new long[] {vfs.lookup(ROOT, d).getIno(), f.getIno()});
            }
        }
        List<Long> failedIn = new CopyOnWriteArrayList<>();
        DeferredUnlinks.Outcome outcome = new DeferredUnlinks.Outcome() {
            @Override
            public void removed(DeferredUnlinks.Unlink u, Attr parentAttr) {
                throw new AssertionError("the MDS must refuse " + u);
            }

            @Override
            public void failed(DeferredUnlinks.Unlink u, FsException e) {
                failedIn.add(u.parent());
            }
        };
        try (DeferredUnlinks d = new DeferredUnlinks(cluster.mds, outcome, max)) {
            for (long[] t : targets) {
                d.offer(new DeferredUnlinks.Unlink(user, t[0], "f", t[1]));
                d.awaitDir(t[0]);
            }
            assertEquals(dirs, failedIn.size());
            for (int i = 0; i < dirs; i++) {
                long dir = targets.get(i)[0];
                FsException e = d.takeError(dir);
                if (i < dirs - max) {
                    assertNull(e, "the oldest refusals are dropped: directory " + i);
                } else {
                    assertEquals(Status.EACCES, e.status(), "directory " + i);
                    assertNull(d.takeError(dir), "reported once: directory " + i);
                }
            }
        }
    }
}
