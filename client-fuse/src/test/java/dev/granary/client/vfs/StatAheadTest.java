package dev.granary.client.vfs;

import static dev.granary.client.vfs.GranaryVfs.O_CREAT;
import static dev.granary.client.vfs.GranaryVfs.O_WRONLY;
import static dev.granary.client.vfs.LocalCluster.ROOT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import dev.granary.mds.proto.Attr;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.Test;

/** {@link StatAhead} on the real namespace (LocalCluster's MDS), its fetches run on one executor thread. */
class StatAheadTest extends LocalClusterTestBase {

    /**
     * A name this client removes while a fetch of its directory is caching a page read before
     * the removal is not cached from that page: the removal marks the name (the skip test) and
     * then drops its dentry, and when the mark lands between the fetch's skip test and its
     * insert, the fetch finds it after the insert and drops the entry. Regression (CI, 2026-12-04):
     * an unlink that left the file another name does not move the generation, and the removed
     * name came back, so a stat of it succeeded.
     */
    @Test
    void aNameRemovedBetweenTheSkipTestAndTheInsertIsNotCached() throws Exception {
        GranaryVfs vfs = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults());
        ExecutorService fetcher = Executors.newSingleThreadExecutor();
        try {
            vfs.mkdir(ROOT, "/sa", 0755);
            for (String n : new String[] {"a", "b", "gone", "z"}) {
                vfs.release(ROOT, vfs.create(ROOT, "/sa/" + n, 0644, O_CREAT | O_WRONLY));
            }
            long dir = vfs.getattr(ROOT, "/sa").getIno();
            Cache<GranaryVfs.DentryKey, Long> dentries = Caffeine.newBuilder().build();
            Cache<Long, Attr> attrs = Caffeine.newBuilder().build();
            Set<String> removed = ConcurrentHashMap.newKeySet();
            // the skip test of "gone" answers "not removed", and the removal marks it right after
            StatAhead sa = new StatAhead(cluster.mds, fetcher, ClientConfig.defaults(), dentries, attrs, () -> 0L,
                    (d, name) -> {
                        if (name.equals("gone") && removed.add(name)) {
                            return false;
                        }
                        return removed.contains(name);
                    });
            sa.missed(ROOT, dir, "a");
            sa.missed(ROOT, dir, "b"); // the second miss starts the fetch
            fetcher.submit(() -> { }).get(); // the fetch queued before has run
            assertEquals(1, sa.fetches());
            assertNotNull(dentries.getIfPresent(new GranaryVfs.DentryKey(dir, "z")), "the other names are cached");
            assertNull(dentries.getIfPresent(new GranaryVfs.DentryKey(dir, "gone")), "the removed name is not");
        } finally {
            fetcher.shutdownNow();
            vfs.close();
        }
    }
}
