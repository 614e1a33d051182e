package dev.granary.client.fuse.kernel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The node table of the path layer: ids, paths, forget, unlink and rename as libfuse2's fuse.c keeps them. */
class PathNodesTest {
    @Test
    void lookupsGiveOneIdPerNameAndPathsFollowTheParents() {
        PathNodes t = new PathNodes();
        assertEquals("/", t.path(PathNodes.ROOT));
        long a = t.lookup(PathNodes.ROOT, "a");
        long b = t.lookup(a, "b");
        long c = t.lookup(b, "c");
        assertEquals(a, t.lookup(PathNodes.ROOT, "a"), "the same name, the same node");
        assertNotEquals(a, PathNodes.ROOT);
        assertEquals("/a/b/c", t.path(c));
        assertEquals("/a/b/x", t.childPath(b, "x"));
        assertEquals("/x", t.childPath(PathNodes.ROOT, "x"));
        assertNull(t.path(12345), "an unknown node has no path");
        assertThrows(IllegalArgumentException.class, () -> t.lookup(12345, "x"));
    }

    @Test
    void aNodeGoesOnlyWhenTheKernelForgotEveryLookup() {
        PathNodes t = new PathNodes();
        long a = t.lookup(PathNodes.ROOT, "a");
        t.lookup(PathNodes.ROOT, "a");
        t.forget(a, 1);
        assertEquals("/a", t.path(a), "one lookup left");
        t.forget(a, 1);
        assertNull(t.path(a));
        assertEquals(0, t.size());
        long again = t.lookup(PathNodes.ROOT, "a");
        assertNotEquals(a, again, "ids are not reused");
        t.forget(PathNodes.ROOT, 100);
        assertEquals("/", t.path(PathNodes.ROOT), "the root is never forgotten");
        t.forget(999, 1); // unknown: ignored
    }

    @Test
    void anUnlinkedNodeKeepsItsIdButHasNoPathAndItsNameIsFree() {
        PathNodes t = new PathNodes();
        long d = t.lookup(PathNodes.ROOT, "d");
        long f = t.lookup(d, "f");
        t.removed(d, "f");
        assertNull(t.path(f), "unlinked: no path, as fuse.c's get_path of a node without a name");
        long g = t.lookup(d, "f");
        assertNotEquals(f, g, "a new file of the same name is a new node");
        assertEquals("/d/f", t.path(g));
        t.forget(f, 1); // the unlinked node's FORGET must not drop the new name
        assertEquals("/d/f", t.path(g));
        long below = t.lookup(g, "x");
        t.removed(PathNodes.ROOT, "d");
        assertNull(t.path(below), "everything below an unlinked directory has no path");
    }

    @Test
    void renameMovesTheNodeAndEverythingBelowItAndUnlinksWhatTheNewNameHeld() {
        PathNodes t = new PathNodes();
        long src = t.lookup(PathNodes.ROOT, "src");
        long child = t.lookup(src, "child");
        long dst = t.lookup(PathNodes.ROOT, "dst");
        long old = t.lookup(dst, "name");
        t.renamed(PathNodes.ROOT, "src", dst, "name");
        assertEquals("/dst/name", t.path(src));
        assertEquals("/dst/name/child", t.path(child));
        assertNull(t.path(old), "the replaced node is unlinked");
        assertEquals(src, t.lookup(dst, "name"));
        assertNotEquals(src, t.lookup(PathNodes.ROOT, "src"), "the old name is free: a new node");
        t.renamed(dst, "name", dst, "name"); // onto itself: nothing changes
        assertEquals("/dst/name", t.path(src));
        t.renamed(PathNodes.ROOT, "unknown", PathNodes.ROOT, "dst"); // a name the table never held replaces dst
        assertNull(t.path(dst));
        assertNull(t.path(child), "below the replaced directory");
    }

    @Test
    void concurrentLookupsOfOneNameShareOneNodeAndCountEveryReference() throws Exception {
        PathNodes t = new PathNodes();
        ExecutorService pool = Executors.newFixedThreadPool(4);
        ConcurrentHashMap<Long, Boolean> ids = new ConcurrentHashMap<>();
        List<Future<?>> fs = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            fs.add(pool.submit(() -> {
                for (int k = 0; k < 1000; k++) {
                    ids.put(t.lookup(PathNodes.ROOT, "n" + (k % 10)), true);
                }
            }));
        }
        for (Future<?> f : fs) {
            f.get(30, TimeUnit.SECONDS);
        }
        pool.shutdown();
        assertEquals(10, ids.size());
        assertEquals(10, t.size());
        for (long id : ids.keySet()) {
            t.forget(id, 399);
            assertNotNull(t.path(id), "one reference left of 400");
            t.forget(id, 1);
            assertNull(t.path(id));
        }
        assertEquals(0, t.size());
    }
}
