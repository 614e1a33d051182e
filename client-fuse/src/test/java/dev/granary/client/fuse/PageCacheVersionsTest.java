package dev.granary.client.fuse;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The keep_cache decision of {@link PageCacheVersions}; the kernel side is TwoClientsFuseTest's. */
class PageCacheVersionsTest {

    @Test
    void pagesAreKeptOnlyOnceAnOpenThatDroppedThemForThisVersionHasReturned() {
        PageCacheVersions v = new PageCacheVersions();
        assertFalse(v.keep(7, 100, 5, 1), "first open of the node: the kernel drops whatever it holds");
        assertFalse(v.keep(7, 100, 5, 2), "a concurrent open of the same version before handle 1's open returned: drops too");
        v.opened(1);
        assertTrue(v.keep(7, 100, 5, 3), "handle 1's open returned: its drop is done, version 5 is held");
        v.opened(3);
        assertTrue(v.keep(7, 100, 5, 4), "still held");
        assertFalse(v.keep(7, 100, 6, 5), "a newer version: dropped");
        assertFalse(v.keep(7, 100, 6, 6));
        v.opened(6);
        assertTrue(v.keep(7, 100, 6, 7), "the second opener's drop counts as well");
        assertFalse(v.keep(7, 100, 5, 8), "an older version: any other version drops them");
        v.opened(8);
        assertFalse(v.keep(8, 100, 5, 9), "another kernel node of the file has pages of its own");
        assertFalse(v.keep(7, 101, 5, 10), "a node id reused for another inode starts unknown");
        v.opened(8);
        assertTrue(v.keep(7, 100, 5, 11), "a second request on a handle changes nothing");
    }

    /** Helper-found: a descriptor opened after a change that stays idle made every later open drop the pages. */
    @Test
    void anIdleFirstOpenerDoesNotMakeEveryLaterOpenDropThePages() {
        PageCacheVersions v = new PageCacheVersions();
        assertFalse(v.keep(1, 2, 10, 1)); // handle 1 never sends a request
        assertFalse(v.keep(1, 2, 10, 2));
        v.opened(2);
        assertTrue(v.keep(1, 2, 10, 3));
        assertTrue(v.keep(1, 2, 10, 4));
    }

    @Test
    void aDropForAnOlderVersionDoesNotMakeANewerOneHeld() {
        PageCacheVersions v = new PageCacheVersions();
        assertFalse(v.keep(1, 2, 10, 1));
        assertFalse(v.keep(1, 2, 11, 2), "another client's change seen by the next open");
        v.opened(1); // handle 1's drop was for version 10, not 11
        assertFalse(v.keep(1, 2, 11, 3));
        v.opened(2);
        assertTrue(v.keep(1, 2, 11, 4));
    }

    /** Helper-found: an open through a second name while the first held an unsaved write kept the second name's old pages. */
    @Test
    void anOpenWhileTheClientHoldsUnsavedWritesMakesTheNextOpenDropThePages() {
        PageCacheVersions v = new PageCacheVersions();
        assertFalse(v.keep(1, 2, 10, 1));
        v.opened(1);
        assertTrue(v.keep(1, 2, 10, 2));
        v.unsaved(1, 2); // that open kept no pages, and its reads may have filled them with the unsaved bytes
        assertFalse(v.keep(1, 2, 10, 3), "the version alone does not say what the pages hold now");
    }
}
