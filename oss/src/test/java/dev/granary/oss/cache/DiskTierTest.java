package dev.granary.oss.cache;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The read cache's local-disk tier under BlockCache, over an in-memory store that counts GETs (the
 * logic; OssServerClientTest runs it against S3Proxy): a dataset larger than memory read twice costs
 * S3 once, pieces survive a reopen, a damaged piece is detected and read from S3 again, and the
 * tier stays within its size.
 */
class DiskTierTest {
    private static final int KIB = 1024;
    private static final int CHUNK = 64 * KIB;
    private static final int BLOCK = 256 * KIB;

    @TempDir
    Path tmp;

    private static byte[] block(int n, int seed) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (i * 31 + seed * 7 + (i >> 9));
        }
        return b;
    }

    private static MemStore store(int blocks) {
        MemStore s = new MemStore();
        for (int i = 0; i < blocks; i++) {
            s.put("ino/" + i, block(BLOCK, i));
        }
        return s;
    }

    /** A memory tier that holds about 3 of the 256 KiB blocks. */
    private static BlockCache cache(DiskTier disk) {
        return new BlockCache(3L * BLOCK + 4 * KIB, 1 << 20, CHUNK, disk);
    }

    private static long files(Path dir) throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return s.count();
        }
    }

    @Test
    void aDatasetLargerThanMemoryIsReadFromS3OnceThenFromDisk() {
        MemStore s = store(12);
        try (DiskTier disk = DiskTier.open(tmp.resolve("d"), 64L << 20)) {
            BlockCache c = cache(disk);
            for (int round = 0; round < 3; round++) {
                for (int i = 0; i < 12; i++) {
                    assertArrayEquals(block(BLOCK, i), c.read(0, s, "ino/" + i, 0, BLOCK), "round " + round + " block " + i);
                }
                disk.flush(10_000);
            }
            assertEquals(12, s.counters.gets.get(), "each block fetched from S3 once, then served by memory or disk");
            assertTrue(disk.hits() >= 12, "disk hits " + disk.hits());
            // a small (random) read of a block that is on disk whole: from disk, no GET
            BlockCache fresh = cache(disk);
            assertArrayEquals(Arrays.copyOfRange(block(BLOCK, 5), 1000, 1100), fresh.read(0, s, "ino/5", 1000, 100));
            assertEquals(12, s.counters.gets.get());
        }
    }

    @Test
    void piecesSurviveAReopenAndLeftoverTemporaryFilesAreDeleted() throws IOException {
        MemStore s = store(2);
        s.put("tiny", block(1000, 9)); // shorter than a chunk: its chunk 0 is the whole block
        Path dir = tmp.resolve("d");
        try (DiskTier disk = DiskTier.open(dir, 64L << 20)) {
            BlockCache c = cache(disk);
            c.read(0, s, "ino/0", 0, BLOCK);
            c.read(0, s, "ino/1", 3 * CHUNK + 10, 100); // a small read: chunk 3 only
            c.read(0, s, "tiny", 10, 100);
            disk.flush(10_000);
        }
        assertEquals(3, s.counters.gets.get());
        Files.write(dir.resolve("0_ab_3.tmp-7"), new byte[100]); // a write cut by a crash
        try (DiskTier disk = DiskTier.open(dir, 64L << 20)) {
            assertFalse(Files.exists(dir.resolve("0_ab_3.tmp-7")));
            BlockCache c = cache(disk);
            assertArrayEquals(block(BLOCK, 0), c.read(0, s, "ino/0", 0, BLOCK));
            assertArrayEquals(Arrays.copyOfRange(block(BLOCK, 1), 3 * CHUNK + 500, 3 * CHUNK + 600), c.read(0, s, "ino/1", 3 * CHUNK + 500, 100));
            assertArrayEquals(Arrays.copyOfRange(block(1000, 9), 900, 1000), c.read(0, s, "tiny", 900, 4 * KIB));
            assertArrayEquals(new byte[0], c.read(0, s, "tiny", 2 * CHUNK, 100), "the whole flag came back: past the end without a GET");
            assertEquals(3, s.counters.gets.get(), "after the reopen: all from disk");
            assertEquals(3, disk.hits());
        }
    }

    @Test
    void aDamagedPieceIsDeletedAndTheBlockIsReadFromS3Again() throws IOException {
        MemStore s = store(1);
        Path dir = tmp.resolve("d");
        try (DiskTier disk = DiskTier.open(dir, 64L << 20)) {
            cache(disk).read(0, s, "ino/0", 0, BLOCK);
            disk.flush(10_000);
            Path piece;
            try (Stream<Path> f = Files.list(dir)) {
                piece = f.findFirst().orElseThrow();
            }
            byte[] bytes = Files.readAllBytes(piece);
            bytes[bytes.length / 2] ^= 1; // one bit flipped on disk
            Files.write(piece, bytes);

            assertArrayEquals(block(BLOCK, 0), cache(disk).read(0, s, "ino/0", 0, BLOCK), "the right bytes, from S3");
            assertEquals(2, s.counters.gets.get());
            assertEquals(1, disk.damaged());
            disk.flush(10_000);
            assertArrayEquals(block(BLOCK, 0), cache(disk).read(0, s, "ino/0", 0, BLOCK));
            assertEquals(2, s.counters.gets.get(), "rewritten after the GET, then read from disk");

            Files.write(piece, Arrays.copyOf(Files.readAllBytes(piece), 100)); // cut short
            assertArrayEquals(block(BLOCK, 0), cache(disk).read(0, s, "ino/0", 0, BLOCK));
            assertEquals(3, s.counters.gets.get());
            assertEquals(2, disk.damaged());
        }
    }

    @Test
    void theTierStaysWithinItsSizeAndDropsBlocksWithTheCache() throws IOException {
        MemStore s = store(12);
        Path dir = tmp.resolve("d");
        long max = 3L * (BLOCK + 16);
        try (DiskTier disk = DiskTier.open(dir, max)) {
            BlockCache c = cache(disk);
            for (int i = 0; i < 12; i++) {
                c.read(0, s, "ino/" + i, 0, BLOCK);
                disk.flush(10_000);
            }
            assertTrue(disk.weightedBytes() <= max, disk.weightedBytes() + " > " + max);
            assertTrue(files(dir) <= 3, files(dir) + " files");
            assertTrue(files(dir) >= 1);

            c.invalidateAll();
            assertEquals(0, files(dir), "cache drop empties the disk tier too");
            c.read(0, s, "ino/0", 0, BLOCK);
            disk.flush(10_000);
            assertEquals(1, files(dir));
            c.invalidate(0, "ino/0"); // the block was deleted (GC)
            assertEquals(0, files(dir));
        }
    }

    /**
     * A disk that refuses writes (here: the folder removed under the tier) costs one failed write
     * and one warning per pause, not one per piece; reads go on, and writes resume after the pause.
     */
    @Test
    void aFailedWritePausesTheWritesInsteadOfFailingOncePerPiece() throws IOException {
        Path dir = tmp.resolve("d");
        try (DiskTier disk = DiskTier.open(dir, 64L << 20)) {
            Files.delete(dir);
            for (int i = 0; i < 40; i++) {
                disk.putAsync(0, "ino/" + i, -1, block(4 * KIB, i), true);
                disk.flush(10_000); // one at a time: none is skipped for a full queue
            }
            assertEquals(1, disk.writeFailures(), "writes after the first failure wait for the pause to end");
            assertNull(disk.get(0, "ino/3", -1));
            Files.createDirectories(dir);
            disk.resumeWrites(); // as when the 30 s pause ends
            disk.putAsync(0, "ino/40", -1, block(4 * KIB, 40), true);
            disk.flush(10_000);
            DiskTier.Piece p = disk.get(0, "ino/40", -1);
            assertNotNull(p, "written once the pause is over");
            assertArrayEquals(block(4 * KIB, 40), p.data());
            assertEquals(1, disk.writeFailures());
        }
    }

    @Test
    void badSettingsAreClearErrors() throws IOException {
        assertThrows(IllegalArgumentException.class, () -> DiskTier.open(tmp.resolve("d"), 0));
        Path file = tmp.resolve("a-file");
        Files.write(file, new byte[1]);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> DiskTier.open(file.resolve("sub"), 1 << 20));
        assertEquals("disk cache folder " + file.resolve("sub") + " is not usable: Not a directory", e.getMessage());
    }
}
