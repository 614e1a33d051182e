package dev.granary.mds.namespace;

import static org.junit.jupiter.api.Assertions.*;

import dev.granary.mds.MdsTestBase;
import dev.granary.mds.client.ReadDirPage;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.DirEntry;
import dev.granary.mds.proto.Status;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/** Paged readdir: byte order, the more flag, stability under concurrent inserts and deletes. */
class ReadDirTest extends MdsTestBase {

    @Test
    void pagesInByteOrderWithMoreFlag() {
        Attr d = mds.mkdir(ROOT, R, b("d"), 0755);
        List<String> names = new ArrayList<>();
        for (int i = 0; i < 25; i++) {
            names.add(String.format("f%02d", i));
            mds.create(ROOT, d.getIno(), b(names.get(i)), 0644, true);
        }
        mds.mkdir(ROOT, d.getIno(), b("f"), 0755); // a prefix of all others sorts first
        ReadDirPage p1 = mds.readdir(ROOT, d.getIno(), new byte[0], 10);
        assertEquals(10, p1.entries().size());
        assertTrue(p1.more());
        assertEquals("f", p1.entries().get(0).getName().toStringUtf8());
        assertEquals(S_IFDIR, p1.entries().get(0).getMode());
        assertEquals(S_IFREG, p1.entries().get(1).getMode());
        List<String> all = list(ROOT, d.getIno(), 10);
        List<String> expected = new ArrayList<>(names);
        expected.add(0, "f");
        assertEquals(expected, all);
        ReadDirPage exact = mds.readdir(ROOT, d.getIno(), b("f14"), 10);
        assertEquals(10, exact.entries().size());
        assertFalse(exact.more(), "exactly the last 10 entries: no more");
        assertEquals(List.of(), mds.readdir(ROOT, d.getIno(), b("zzz"), 10).entries());
        // byte order, not UTF-16 or signed order
        mds.create(ROOT, R, new byte[] {(byte) 0xC3}, 0644, true);
        mds.create(ROOT, R, b("z"), 0644, true);
        List<DirEntry> rootEntries = mds.readdir(ROOT, R, new byte[0], 10).entries();
        assertEquals(List.of("d", "z"), rootEntries.subList(0, 2).stream().map(e -> e.getName().toStringUtf8()).toList());
        assertEquals((byte) 0xC3, rootEntries.get(2).getName().byteAt(0));
    }

    @Test
    void stableUnderInsertsAndDeletesBetweenPages() {
        Attr d = mds.mkdir(ROOT, R, b("d"), 0755);
        Set<String> initial = new TreeSet<>();
        for (int i = 0; i < 60; i += 2) {
            String n = String.format("n%03d", i);
            initial.add(n);
            mds.create(ROOT, d.getIno(), b(n), 0644, true);
        }
        Set<String> deleted = new HashSet<>();
        List<String> seen = new ArrayList<>();
        byte[] after = new byte[0];
        int page = 0;
        while (true) {
            ReadDirPage p = mds.readdir(ROOT, d.getIno(), after, 7);
            for (DirEntry e : p.entries()) {
                seen.add(e.getName().toStringUtf8());
            }
            if (!p.more()) {
                break;
            }
            after = p.entries().get(p.entries().size() - 1).getName().toByteArray();
            // between pages: insert odd names before and after the cursor, delete some ahead and behind
            mds.create(ROOT, d.getIno(), b(String.format("n%03d", page * 8 + 1)), 0644, true);
            mds.create(ROOT, d.getIno(), b(String.format("n%03d", 59 - page * 2)), 0644, false);
            String victim = String.format("n%03d", 58 - page * 4);
            if (initial.contains(victim) && deleted.add(victim)) {
                mds.unlink(ROOT, d.getIno(), b(victim));
            }
            page++;
        }
        assertTrue(page >= 3, "several pages");
        assertEquals(seen.size(), new HashSet<>(seen).size(), "no entry twice: " + seen);
        for (String n : initial) {
            if (!deleted.contains(n)) {
                assertTrue(seen.contains(n), "entry present throughout was missed: " + n);
            }
        }
        List<String> sorted = new ArrayList<>(seen);
        sorted.sort(null);
        assertEquals(sorted, seen, "names ascend across pages");
    }

    @Test
    void errors() {
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        assertErrno(Status.ENOTDIR, () -> mds.readdir(ROOT, f.getIno(), new byte[0], 10));
        assertErrno(Status.ENOENT, () -> mds.readdir(ROOT, 999, new byte[0], 10));
        Attr priv = mds.mkdir(ROOT, R, b("priv"), 0700);
        assertErrno(Status.EACCES, () -> mds.readdir(ALICE, priv.getIno(), new byte[0], 10));
        assertEquals(2, mds.readdir(ROOT, R, new byte[0], 0).entries().size(), "limit 0: the default page");
    }
}
