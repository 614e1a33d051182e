package dev.granary.client.vfs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The written-byte ranges of a stripe: merging, coverage and the copy of written bytes only. */
class WrittenRangesTest {
    @Test
    void overlappingAndAdjacentRangesMergeAndDisjointOnesStaySeparate() {
        WrittenRanges r = new WrittenRanges();
        assertTrue(r.isEmpty());
        assertEquals(0, r.end());
        r.add(100, 200);
        r.add(300, 400);
        r.add(5, 5); // empty: ignored
        assertEquals("{100=200, 300=400}", r.toString());
        r.add(200, 250); // adjacent to the first
        r.add(150, 320); // overlaps both: one interval
        assertEquals("{100=400}", r.toString());
        r.add(0, 10);
        r.add(500, 600);
        assertEquals(3, r.intervals());
        r.add(0, 1000); // swallows all
        assertEquals("{0=1000}", r.toString());
        assertEquals(1000, r.end());
    }

    @Test
    void coversOnlyWhenTheWholePrefixIsWritten() {
        WrittenRanges r = new WrittenRanges();
        r.add(1, 64);
        assertFalse(r.covers(64));
        r.add(0, 1);
        assertTrue(r.covers(64));
        assertFalse(r.covers(65));
        WrittenRanges other = new WrittenRanges();
        other.add(64, 70);
        r.addAll(other);
        assertTrue(r.covers(70));
    }

    @Test
    void copyTakesOnlyTheWrittenBytes() {
        WrittenRanges r = new WrittenRanges();
        r.add(1, 3);
        r.add(5, 6);
        byte[] to = "abcdefg".getBytes();
        r.copy("0123456".getBytes(), to);
        assertArrayEquals("a12de5g".getBytes(), to);
    }
}
