package dev.granary.client.fuse;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.mds.proto.Attr;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class KernelAttrsTest {
    private static Attr attr(long ino, long size) {
        return Attr.newBuilder().setIno(ino).setSize(size).setMode(0100644).setNlink(1).build();
    }

    @Test
    void knownOnlyWhileEveryReplyCarriedTheSameAttributes() throws InterruptedException {
        KernelAttrs k = new KernelAttrs(Duration.ofMillis(100)); // window: 2 x 100 ms + 1 s
        assertFalse(k.holds(attr(7, 10)), "nothing replied yet: the open must invalidate");
        k.replied(attr(7, 10));
        k.replied(attr(7, 10));
        assertTrue(k.holds(attr(7, 10)));
        assertFalse(k.holds(attr(7, 11)), "other fresh attributes: the kernel holds older ones");
        assertFalse(k.holds(attr(8, 10)), "another inode");

        k.replied(attr(7, 11)); // two different replies within the window: either may be in the kernel
        assertFalse(k.holds(attr(7, 11)));
        assertFalse(k.holds(attr(7, 10)));
        repeatFor(k, attr(7, 11), 1300); // the kernel asks again now and then; past the window only 11 can be left
        assertTrue(k.holds(attr(7, 11)));

        k.forget(7); // written through this kernel: it set the size itself
        assertFalse(k.holds(attr(7, 11)));
        k.replied(attr(7, 12));
        assertFalse(k.holds(attr(7, 12)), "still within the window of the write");
        repeatFor(k, attr(7, 12), 1300);
        assertTrue(k.holds(attr(7, 12)));
    }

    @Test
    void mayHoldOnlyWithinTheWindowOfAReplyTheKernelCouldKeep() throws InterruptedException {
        KernelAttrs k = new KernelAttrs(Duration.ofMillis(100)); // window: 1.2 s
        Attr one = attr(7, 10);
        Attr three = one.toBuilder().setNlink(3).build();
        assertFalse(k.mayHold(7), "nothing replied");
        k.replied(three);
        assertFalse(k.mayHold(7), "a file with three names: the reply told the kernel to keep nothing");
        k.replied(one);
        k.replied(three);
        k.forget(7);
        assertTrue(k.mayHold(7), "the one-name reply may still be in the kernel, after later replies and a write");
        Thread.sleep(1300);
        k.replied(three);
        assertFalse(k.mayHold(7), "past the window of the one-name reply");
        Attr dir = Attr.newBuilder().setIno(9).setMode(040755).setNlink(5).build();
        k.replied(dir);
        assertTrue(k.mayHold(9), "directories are cached whatever their nlink");
    }

    /** Replies {@code a} every 50 ms for {@code ms} milliseconds. */
    private static void repeatFor(KernelAttrs k, Attr a, long ms) throws InterruptedException {
        long end = System.nanoTime() + ms * 1_000_000;
        while (System.nanoTime() < end) {
            k.replied(a);
            Thread.sleep(50);
        }
    }
}
