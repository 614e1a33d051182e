package dev.granary.client.vfs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.DirEntry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * {@link DataAhead} over the real namespace (local MDS): what it holds stays within half of the
 * read-window budget, a map that ages out unopened stops its directory, and everything held is
 * given back to the budget.
 */
class DataAheadTest extends LocalClusterTestBase {
    static final Caller ROOT = GranaryVfs.caller(0, 0);
    static final int O_CREAT = 0100, O_WRONLY = 01, O_TRUNC = 01000;

    /** Makes directory {@code dir} with {@code n} files f000... of {@code size} bytes from {@code new Random(i)}; returns its inode. */
    private long writeFiles(String dir, int n, int size) {
        try (GranaryVfs vfs = new GranaryVfs(cluster.mds, cluster.blockIo, ClientConfig.defaults())) {
            vfs.mkdir(ROOT, dir, 0755);
            for (int i = 0; i < n; i++) {
                byte[] b = new byte[size];
                new Random(i).nextBytes(b);
                long fh = vfs.create(ROOT, String.format("%s/f%03d", dir, i), 0644, O_CREAT | O_WRONLY | O_TRUNC);
                vfs.write(ROOT, fh, 0, b, b.length);
                vfs.release(ROOT, fh);
            }
            return vfs.getattr(ROOT, dir).getIno();
        }
    }

    /** The attributes of directory {@code dirIno}'s entries, as statahead lists them (name order). */
    private List<Attr> listed(long dirIno) {
        List<Attr> attrs = new ArrayList<>();
        for (DirEntry e : cluster.mds.readdirPlus(ROOT, dirIno, new byte[0], 1000).entries()) {
            attrs.add(e.getAttr());
        }
        return attrs;
    }

    @Test
    void heldMapsStayWithinHalfTheBudgetAndAStaleDirectoryStops() throws Exception {
        int n = 120, size = 20 * 1024;
        long dirIno = writeFiles("/da", n, size);
        List<Attr> attrs = listed(dirIno);
        assertEquals(n, attrs.size());

        ReadaheadBudget budget = new ReadaheadBudget(1L << 20); // data-ahead may hold 512 KiB: 25 files
        DataAhead ahead = new DataAhead(cluster.mds, budget, 256 << 10, Duration.ofSeconds(2)); // long enough for a loaded CI machine to take one map first
        try {
            ahead.offer(ROOT, dirIno, attrs);
            Thread.sleep(200);
            assertEquals(0, ahead.counters()[0], "no fetch before the directory's files are opened");
            assertNull(ahead.take(dirIno, attrs.get(0).getIno()));
            assertNull(ahead.take(dirIno, attrs.get(1).getIno())); // the second open starts it
            long deadline = System.nanoTime() + 5_000_000_000L;
            while (ahead.counters()[0] < 25 && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertEquals(25, ahead.counters()[0], "as many files as half the budget holds");
            assertEquals(25L * size, budget.stats().heldBytes());

            MdsClient.FileMap m = ahead.take(dirIno, attrs.get(2).getIno());
            assertNotNull(m);
            byte[] want = new byte[size];
            new Random(2).nextBytes(want);
            assertArrayEquals(want, m.extents().get(0).getInlineData().toByteArray());
            assertNull(ahead.take(dirIno, attrs.get(2).getIno()), "a map is handed over once");

            // nobody opens the rest: the held maps age out, the directory stops, nothing more is fetched
            deadline = System.nanoTime() + 5_000_000_000L;
            while (ahead.counters()[2] == 0 && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertTrue(ahead.counters()[2] > 0, "maps aged out");
            Thread.sleep(1500);
            long fetched = ahead.counters()[0];
            assertTrue(fetched < 30, "the directory stopped after its maps aged out: " + fetched + " fetched");
            assertEquals(0, budget.stats().heldBytes(), "every aged map gave its bytes back");
        } finally {
            ahead.close();
        }
        assertEquals(0, budget.stats().heldBytes());
    }

    /**
     * Files the kernel's page cache holds as listed are not fetched; the pages that skipped them
     * are kept, a bounded number however often the directory is listed again (each listing
     * brought another copy, kept until a miss), and once an open finds the pages gone the files
     * not opened since their listing are fetched after all.
     */
    @Test
    void filesHeldInThePageCacheAreSkippedUntilTheirPagesAreFoundGone() throws Exception {
        int n = 60, size = 10 * 1024;
        long dirIno = writeFiles("/held", n, size);
        List<Attr> attrs = listed(dirIno);
        ReadaheadBudget budget = new ReadaheadBudget(64L << 20);
        DataAhead ahead = new DataAhead(cluster.mds, budget, 256 << 10, Duration.ofSeconds(30));
        java.util.concurrent.atomic.AtomicBoolean inPageCache = new java.util.concurrent.atomic.AtomicBoolean(true);
        ahead.pagesHeld((dir, a) -> inPageCache.get());
        try {
            ahead.offer(ROOT, dirIno, attrs);
            assertNull(ahead.take(dirIno, attrs.get(0).getIno()));
            assertNull(ahead.take(dirIno, attrs.get(1).getIno())); // started
            for (int i = 0; i < 20; i++) { // the directory listed again and again (statahead, 1 s apart in a mount)
                ahead.offer(ROOT, dirIno, attrs);
            }
            long deadline = System.nanoTime() + 5_000_000_000L;
            while (ahead.skippedPages(dirIno) < DataAhead.MAX_SKIPPED_PAGES && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            Thread.sleep(200);
            assertEquals(0, ahead.counters()[0], "nothing fetched while the page cache holds the files");
            assertEquals(DataAhead.MAX_SKIPPED_PAGES, ahead.skippedPages(dirIno), "21 listings, the newest kept");

            assertNull(ahead.take(dirIno, attrs.get(3).getIno())); // opened after every listing
            inPageCache.set(false);
            ahead.pagesMissed(dirIno);
            deadline = System.nanoTime() + 5_000_000_000L;
            while (ahead.counters()[0] < n - 1 && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            Thread.sleep(200);
            assertEquals(n - 1, ahead.counters()[0], "every file but the one opened since the listings");
            assertEquals(0, ahead.skippedPages(dirIno));
            assertNull(ahead.take(dirIno, attrs.get(3).getIno()));
            assertNotNull(ahead.take(dirIno, attrs.get(0).getIno()), "opened before the newer listings: fetched");
        } finally {
            ahead.close();
        }
        assertEquals(0, budget.stats().heldBytes());
    }
}
