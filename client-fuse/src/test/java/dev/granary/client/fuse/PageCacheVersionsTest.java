package dev.granary.client.fuse;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The keep_cache decision of {@link PageCacheVersions}; the kernel side is TwoClientsFuseTest's. */
class PageCacheVersionsTest {

    @Test
    void pagesAreKeptOnlyOnceTheOpenThatDroppedThemForThisVersionHasReturned() {
        PageCacheVersions v = new PageCacheVersions();
        assertFalse(v.keep(7, 100, 5, 1), "first open of the node: the kernel drops whatever it holds");
        assertFalse(v.keep(7, 100, 5, 2), "a concurrent open of the same version before handle 1's open returned: drops too");
        v.opened(2);
        assertFalse(v.keep(7, 100, 5, 3), "handle 2 did not make the version held: handle 1's drop is what counts");
        v.opened(1);
        assertTrue(v.keep(7, 100, 5, 4), "handle 1's open returned: its drop is done, version 5 is held");
        v.opened(4);
        assertTrue(v.keep(7, 100, 5, 5), "still held");
        assertFalse(v.keep(7, 100, 6, 6), "a newer version: dropped");
        assertFalse(v.keep(7, 100, 6, 7));
        v.opened(6);
        assertTrue(v.keep(7, 100, 6, 8));
        assertFalse(v.keep(7, 100, 5, 9), "an older version: any other version drops them");
        v.opened(9);
        assertFalse(v.keep(8, 100, 5, 10), "another kernel node of the file has pages of its own");
        assertFalse(v.keep(7, 101, 5, 11), "a node id reused for another inode starts unknown");
        v.opened(9);
        assertTrue(v.keep(7, 100, 5, 12), "a second request on a handle changes nothing");
    }

    @Test
    void aNewerVersionOpenedBeforeTheOlderOpenReturnedIsNotTakenAsHeldByTheOlderOne() {
        PageCacheVersions v = new PageCacheVersions();
        assertFalse(v.keep(1, 2, 10, 1));
        assertFalse(v.keep(1, 2, 11, 2), "another client's change seen by the next open");
        v.opened(1); // handle 1's drop was for version 10, not 11
        assertFalse(v.keep(1, 2, 11, 3));
        v.opened(2);
        assertTrue(v.keep(1, 2, 11, 4));
    }
}
