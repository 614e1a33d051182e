package dev.granary.client.fuse;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The bookkeeping of {@link NodeVersions}: which node id the kernel gets, and how long it is kept. */
class NodeVersionsTest {
    @Test
    void aNameKeepsItsNodeWhileItHoldsTheSameFileAndGetsANewOneForAnotherFile() {
        NodeVersions v = new NodeVersions();
        assertEquals(7, v.onEntry(7, 100), "first sight: libfuse's own id");
        assertEquals(7, v.onEntry(7, 100), "same file again: same node");
        assertEquals(100, v.inoOf(7));
        long second = v.onEntry(7, 101); // another client replaced the file behind the name
        assertTrue(second >= NodeVersions.FIRST_VIRTUAL, "a virtual id: " + second);
        assertEquals(101, v.inoOf(second));
        assertEquals(100, v.inoOf(7), "the kernel's node of the old file still shows the old file");
        assertEquals(7, v.toLibfuse(second), "requests on it go to libfuse's node of the name");
        assertEquals(7, v.toLibfuse(7));
        assertEquals(second, v.onEntry(7, 101), "the new file again: its node");
        long third = v.onEntry(7, 102);
        assertNotEquals(second, third);
        assertEquals(-1, v.inoOf(8), "an untracked node");
        assertEquals(8, v.toLibfuse(8), "ids libfuse gave pass through");
    }

    @Test
    void everyNameAndVersionNodeOfAnInodeIsFoundUntilForgotten() {
        NodeVersions v = new NodeVersions();
        v.onEntry(7, 100); // name f
        v.onEntry(8, 100); // name g, a hard link of f: libfuse2 gives it its own node
        v.onEntry(9, 200);
        long replaced = v.onEntry(9, 100); // name h now holds inode 100 too (another client's rename)
        assertArrayEquals(new long[] {7, 8, replaced}, java.util.Arrays.stream(v.nodesShowing(100)).sorted().toArray());
        assertArrayEquals(new long[] {9}, v.nodesShowing(200), "the node kept for the old file behind h");
        v.forget(8, 1);
        assertArrayEquals(new long[] {7, replaced}, java.util.Arrays.stream(v.nodesShowing(100)).sorted().toArray());
        assertArrayEquals(new long[0], v.nodesShowing(300));
    }

    @Test
    void aNodeLivesUntilTheKernelForgetsEveryLookupOfIt() {
        NodeVersions v = new NodeVersions();
        v.onEntry(7, 100);
        long second = v.onEntry(7, 101);
        v.onEntry(7, 101); // two lookups of the new node
        assertEquals(7, v.forget(second, 1));
        assertEquals(101, v.inoOf(second), "one lookup left");
        assertEquals(7, v.forget(second, 1));
        assertEquals(-1, v.inoOf(second), "forgotten");
        assertEquals(-1, v.toLibfuse(second), "an unknown virtual id is never passed to libfuse");
        assertEquals(-1, v.forget(second, 1));
        assertEquals(1, v.size(), "libfuse's id for the old file is still held");
        assertEquals(7, v.onEntry(7, 100), "the name holds the old file again: the node the kernel still has");
        long fourth = v.onEntry(7, 103);
        assertTrue(fourth >= NodeVersions.FIRST_VIRTUAL);
        assertEquals(7, v.forget(7, 2));
        assertEquals(7, v.forget(fourth, 1));
        assertEquals(0, v.size(), "nothing left once the kernel forgot everything");
        assertEquals(7, v.onEntry(7, 104), "a fresh start gives libfuse's id again");
        assertEquals(42, v.forget(42, 1), "a forget of an untracked node passes through");
    }
}
