package dev.granary.mds.namespace;

import static org.junit.jupiter.api.Assertions.*;

import dev.granary.mds.MdsTestBase;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Status;
import java.util.List;
import org.junit.jupiter.api.Test;

/** rename(2) / renameat2(2) matrix. */
class RenameTest extends MdsTestBase {

    @Test
    void fileWithinAndAcrossDirectories() {
        Attr a = mds.mkdir(ROOT, R, b("a"), 0755);
        Attr c = mds.mkdir(ROOT, R, b("c"), 0755);
        Attr f = mds.create(ROOT, a.getIno(), b("f"), 0644, true);
        mds.rename(ROOT, a.getIno(), b("f"), a.getIno(), b("g"), 0);
        assertErrno(Status.ENOENT, () -> mds.lookup(ROOT, a.getIno(), b("f")));
        assertEquals(f.getIno(), mds.lookup(ROOT, a.getIno(), b("g")).getIno());
        long cBefore = mds.getattr(ROOT, c.getIno()).getMtimeNs();
        mds.rename(ROOT, a.getIno(), b("g"), c.getIno(), b("h"), 0);
        Attr moved = mds.lookup(ROOT, c.getIno(), b("h"));
        assertEquals(f.getIno(), moved.getIno());
        assertTrue(moved.getCtimeNs() > f.getCtimeNs(), "ctime of the moved inode");
        Attr aAfter = mds.getattr(ROOT, a.getIno());
        Attr cAfter = mds.getattr(ROOT, c.getIno());
        assertTrue(cAfter.getMtimeNs() > cBefore);
        assertEquals(aAfter.getMtimeNs(), cAfter.getMtimeNs(), "both parents stamped with the same op time");
        assertEquals(List.of(), list(ROOT, a.getIno(), 10));
        assertErrno(Status.ENOENT, () -> mds.rename(ROOT, a.getIno(), b("zz"), c.getIno(), b("y"), 0));
    }

    @Test
    void fileOverFileFreesTheReplacedInode() {
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        Attr g = mds.create(ROOT, R, b("g"), 0644, true);
        long used = mds.statfs(ROOT).getUsedInodes();
        mds.rename(ROOT, R, b("f"), R, b("g"), 0);
        assertEquals(f.getIno(), mds.lookup(ROOT, R, b("g")).getIno());
        assertErrno(Status.ENOENT, () -> mds.getattr(ROOT, g.getIno()));
        assertEquals(used - 1, mds.statfs(ROOT).getUsedInodes());
        assertEquals(List.of("g"), list(ROOT, R, 10));
    }

    @Test
    void fileOverHardLinkedFileDropsOneLink() {
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        Attr g = mds.create(ROOT, R, b("g"), 0644, true);
        mds.link(ROOT, g.getIno(), R, b("g2"));
        mds.rename(ROOT, R, b("f"), R, b("g"), 0);
        assertEquals(1, mds.getattr(ROOT, g.getIno()).getNlink());
        assertEquals(f.getIno(), mds.lookup(ROOT, R, b("g")).getIno());
    }

    @Test
    void sameInodeIsANoOp() {
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        mds.link(ROOT, f.getIno(), R, b("f2"));
        mds.rename(ROOT, R, b("f"), R, b("f2"), 0);
        assertEquals(List.of("f", "f2"), list(ROOT, R, 10));
        assertEquals(2, mds.getattr(ROOT, f.getIno()).getNlink());
        mds.rename(ROOT, R, b("f"), R, b("f"), 0);
        assertEquals(List.of("f", "f2"), list(ROOT, R, 10));
    }

    @Test
    void directoryOverEmptyDirectoryAndNlink() {
        Attr a = mds.mkdir(ROOT, R, b("a"), 0755);
        Attr b2 = mds.mkdir(ROOT, R, b("b"), 0755);
        Attr x = mds.mkdir(ROOT, a.getIno(), b("x"), 0755);
        Attr y = mds.mkdir(ROOT, b2.getIno(), b("y"), 0755);
        assertEquals(3, mds.getattr(ROOT, a.getIno()).getNlink());
        assertEquals(3, mds.getattr(ROOT, b2.getIno()).getNlink());
        mds.rename(ROOT, a.getIno(), b("x"), b2.getIno(), b("y"), 0);
        assertEquals(2, mds.getattr(ROOT, a.getIno()).getNlink());
        assertEquals(3, mds.getattr(ROOT, b2.getIno()).getNlink(), "one subdir replaced by another");
        assertErrno(Status.ENOENT, () -> mds.getattr(ROOT, y.getIno()));
        assertEquals(x.getIno(), mds.lookup(ROOT, b2.getIno(), b("y")).getIno());
        assertEquals(b2.getIno(), mds.lookup(ROOT, x.getIno(), b("..")).getIno(), "parent link updated");
        // move into a fresh name in another parent
        mds.rename(ROOT, b2.getIno(), b("y"), a.getIno(), b("z"), 0);
        assertEquals(3, mds.getattr(ROOT, a.getIno()).getNlink());
        assertEquals(2, mds.getattr(ROOT, b2.getIno()).getNlink());
        assertEquals(4, mds.getattr(ROOT, R).getNlink());
    }

    @Test
    void typeAndEmptinessErrors() {
        Attr d = mds.mkdir(ROOT, R, b("d"), 0755);
        mds.mkdir(ROOT, R, b("full"), 0755);
        mds.create(ROOT, mds.lookup(ROOT, R, b("full")).getIno(), b("x"), 0644, true);
        mds.create(ROOT, R, b("f"), 0644, true);
        assertErrno(Status.ENOTEMPTY, () -> mds.rename(ROOT, R, b("d"), R, b("full"), 0));
        assertErrno(Status.ENOTDIR, () -> mds.rename(ROOT, R, b("d"), R, b("f"), 0));
        assertErrno(Status.EISDIR, () -> mds.rename(ROOT, R, b("f"), R, b("d"), 0));
        assertErrno(Status.EBUSY, () -> mds.rename(ROOT, R, b("."), R, b("q"), 0));
        assertErrno(Status.EBUSY, () -> mds.rename(ROOT, R, b("f"), R, b(".."), 0));
        assertErrno(Status.EINVAL, () -> mds.rename(ROOT, R, b("f"), R, b("q"), 3));
        assertErrno(Status.EINVAL, () -> mds.rename(ROOT, R, b("f"), R, b("q"), 8));
        assertErrno(Status.ENOTDIR, () -> mds.rename(ROOT, R, b("f"), mds.lookup(ROOT, R, b("f")).getIno(), b("q"), 0));
        // nothing changed
        assertEquals(List.of("d", "f", "full"), list(ROOT, R, 10));
        assertEquals(d.getIno(), mds.lookup(ROOT, R, b("d")).getIno());
    }

    @Test
    void directoryIntoItsOwnSubtree() {
        Attr a = mds.mkdir(ROOT, R, b("a"), 0755);
        Attr bb = mds.mkdir(ROOT, a.getIno(), b("b"), 0755);
        Attr c = mds.mkdir(ROOT, bb.getIno(), b("c"), 0755);
        assertErrno(Status.EINVAL, () -> mds.rename(ROOT, R, b("a"), c.getIno(), b("a2"), 0));
        assertErrno(Status.EINVAL, () -> mds.rename(ROOT, R, b("a"), a.getIno(), b("a2"), 0));
        // an ancestor as the target: it is not empty
        assertErrno(Status.ENOTEMPTY, () -> mds.rename(ROOT, bb.getIno(), b("c"), R, b("a"), 0));
        // moving up is fine
        mds.rename(ROOT, bb.getIno(), b("c"), R, b("c"), 0);
        assertEquals(R, mds.lookup(ROOT, c.getIno(), b("..")).getIno());
    }

    @Test
    void noReplace() {
        mds.create(ROOT, R, b("f"), 0644, true);
        mds.create(ROOT, R, b("g"), 0644, true);
        assertErrno(Status.EEXIST, () -> mds.rename(ROOT, R, b("f"), R, b("g"), MdsClient.RENAME_NOREPLACE));
        mds.rename(ROOT, R, b("f"), R, b("h"), MdsClient.RENAME_NOREPLACE);
        assertEquals(List.of("g", "h"), list(ROOT, R, 10));
    }

    @Test
    void exchange() {
        Attr a = mds.mkdir(ROOT, R, b("a"), 0755);
        Attr bdir = mds.mkdir(ROOT, R, b("b"), 0755);
        Attr f = mds.create(ROOT, a.getIno(), b("f"), 0644, true);
        Attr sub = mds.mkdir(ROOT, bdir.getIno(), b("sub"), 0755);
        mds.create(ROOT, sub.getIno(), b("inside"), 0644, true); // a non-empty dir may be exchanged
        mds.rename(ROOT, a.getIno(), b("f"), bdir.getIno(), b("sub"), MdsClient.RENAME_EXCHANGE);
        assertEquals(sub.getIno(), mds.lookup(ROOT, a.getIno(), b("f")).getIno());
        assertEquals(f.getIno(), mds.lookup(ROOT, bdir.getIno(), b("sub")).getIno());
        assertEquals(3, mds.getattr(ROOT, a.getIno()).getNlink(), "a gained a subdirectory");
        assertEquals(2, mds.getattr(ROOT, bdir.getIno()).getNlink(), "b lost one");
        assertEquals(a.getIno(), mds.lookup(ROOT, sub.getIno(), b("..")).getIno());
        assertErrno(Status.ENOENT, () -> mds.rename(ROOT, a.getIno(), b("f"), R, b("none"), MdsClient.RENAME_EXCHANGE));
        // exchanging a directory with an entry inside it would make a loop
        assertErrno(Status.EINVAL, () -> mds.rename(ROOT, R, b("a"), sub.getIno(), b("inside"), MdsClient.RENAME_EXCHANGE));
    }
}
