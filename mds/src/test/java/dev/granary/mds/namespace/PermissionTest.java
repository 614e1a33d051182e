package dev.granary.mds.namespace;

import static org.junit.jupiter.api.Assertions.*;

import dev.granary.mds.MdsTestBase;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.SetAttrRequest;
import dev.granary.mds.proto.Status;
import org.junit.jupiter.api.Test;

/** POSIX permission checks for non-root callers. */
class PermissionTest extends MdsTestBase {

    @Test
    void privateDirectoryOfAnotherUser() {
        Attr home = mds.mkdir(ROOT, R, b("home"), 0755);
        mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(home.getIno()).setValid(MdsClient.SETATTR_UID | MdsClient.SETATTR_GID)
                .setUid(1001).setGid(1001).build());
        Attr priv = mds.mkdir(BOB, home.getIno(), b("bob"), 0700);
        mds.create(BOB, priv.getIno(), b("secret"), 0600, true);
        assertErrno(Status.EACCES, () -> mds.lookup(ALICE, priv.getIno(), b("secret")));
        assertErrno(Status.EACCES, () -> mds.readdir(ALICE, priv.getIno(), new byte[0], 10));
        assertErrno(Status.EACCES, () -> mds.create(ALICE, priv.getIno(), b("x"), 0644, true));
        assertErrno(Status.EACCES, () -> mds.unlink(ALICE, priv.getIno(), b("secret")));
        assertErrno(Status.EACCES, () -> mds.mkdir(ALICE, home.getIno(), b("alice"), 0755));
        assertEquals(1, mds.readdir(BOB, priv.getIno(), new byte[0], 10).entries().size());
        // open(O_CREAT) of an existing file needs only search permission; a new name needs write
        Attr ro = mds.mkdir(ROOT, R, b("ro"), 0755);
        Attr existing = mds.create(ROOT, ro.getIno(), b("e"), 0644, true);
        assertEquals(existing.getIno(), mds.create(ALICE, ro.getIno(), b("e"), 0644, false).getIno());
        assertErrno(Status.EEXIST, () -> mds.mkdir(ALICE, ro.getIno(), b("e"), 0755));
        assertErrno(Status.EACCES, () -> mds.create(ALICE, ro.getIno(), b("new"), 0644, false));
        assertEquals(1, mds.readdir(ROOT, priv.getIno(), new byte[0], 10).entries().size(), "root bypasses");
        // search-only directory: lookup works, listing does not
        mds.setattr(BOB, SetAttrRequest.newBuilder().setIno(priv.getIno()).setValid(MdsClient.SETATTR_MODE).setMode(0711).build());
        assertEquals(S_IFREG | 0600, mds.lookup(ALICE, priv.getIno(), b("secret")).getMode());
        assertErrno(Status.EACCES, () -> mds.readdir(ALICE, priv.getIno(), new byte[0], 10));
        assertErrno(Status.EACCES, () -> mds.readdirPlus(ALICE, priv.getIno(), new byte[0], 10));
        // readdir plus carries each child's attributes as lookup returns them, and needs search
        // permission besides read: a read-only (r--) directory lists names but no attributes.
        var plus = mds.readdirPlus(BOB, priv.getIno(), new byte[0], 10).entries();
        assertEquals(1, plus.size());
        assertEquals(mds.lookup(BOB, priv.getIno(), b("secret")), plus.get(0).getAttr());
        assertFalse(mds.readdir(BOB, priv.getIno(), new byte[0], 10).entries().get(0).hasAttr(), "plain readdir: no attributes");
        mds.setattr(BOB, SetAttrRequest.newBuilder().setIno(priv.getIno()).setValid(MdsClient.SETATTR_MODE).setMode(0744).build());
        assertEquals(1, mds.readdir(ALICE, priv.getIno(), new byte[0], 10).entries().size());
        assertErrno(Status.EACCES, () -> mds.readdirPlus(ALICE, priv.getIno(), new byte[0], 10));
        // group permission through a supplementary group
        Attr shared = mds.mkdir(ROOT, R, b("shared"), 0770);
        mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(shared.getIno()).setValid(MdsClient.SETATTR_GID).setGid(50).build());
        mds.create(ALICE, shared.getIno(), b("ok"), 0644, true);
        assertErrno(Status.EACCES, () -> mds.create(BOB, shared.getIno(), b("no"), 0644, true));
    }

    @Test
    void stickyDirectory() {
        Attr tmpDir = mds.mkdir(ROOT, R, b("tmp"), 01777);
        assertEquals(S_IFDIR | 01777, tmpDir.getMode());
        mds.create(ALICE, tmpDir.getIno(), b("a"), 0666, true);
        mds.create(BOB, tmpDir.getIno(), b("b"), 0666, true);
        assertErrno(Status.EPERM, () -> mds.unlink(BOB, tmpDir.getIno(), b("a")));
        assertErrno(Status.EPERM, () -> mds.rename(BOB, tmpDir.getIno(), b("a"), tmpDir.getIno(), b("c"), 0));
        assertErrno(Status.EPERM, () -> mds.rename(BOB, tmpDir.getIno(), b("b"), tmpDir.getIno(), b("a"), 0));
        mds.unlink(ALICE, tmpDir.getIno(), b("a"));
        mds.unlink(ROOT, tmpDir.getIno(), b("b"));
        assertEquals(0, mds.readdir(ROOT, tmpDir.getIno(), new byte[0], 10).entries().size());
    }

    @Test
    void chmodChownUtimesRules() {
        Attr pub = mds.mkdir(ROOT, R, b("pub"), 0777);
        Attr f = mds.create(ALICE, pub.getIno(), b("f"), 0666, true);
        assertErrno(Status.EPERM, () -> mds.setattr(BOB, SetAttrRequest.newBuilder().setIno(f.getIno())
                .setValid(MdsClient.SETATTR_MODE).setMode(0777).build()));
        assertErrno(Status.EPERM, () -> mds.setattr(BOB, SetAttrRequest.newBuilder().setIno(f.getIno())
                .setValid(MdsClient.SETATTR_GID).setGid(1001).build()));
        assertErrno(Status.EPERM, () -> mds.setattr(BOB, SetAttrRequest.newBuilder().setIno(f.getIno())
                .setValid(MdsClient.SETATTR_MTIME).setMtimeNs(5).build()));
        // utimes(NULL) with write permission is allowed for a non-owner (file is 0666)
        Attr t = mds.setattr(BOB, SetAttrRequest.newBuilder().setIno(f.getIno())
                .setValid(MdsClient.SETATTR_MTIME | MdsClient.SETATTR_MTIME_NOW).build());
        assertEquals(t.getCtimeNs(), t.getMtimeNs());
        mds.setattr(ALICE, SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(MdsClient.SETATTR_MODE).setMode(0644).build());
        assertErrno(Status.EACCES, () -> mds.setattr(BOB, SetAttrRequest.newBuilder().setIno(f.getIno())
                .setValid(MdsClient.SETATTR_MTIME | MdsClient.SETATTR_MTIME_NOW).build()));
        assertErrno(Status.EACCES, () -> mds.setattr(BOB, SetAttrRequest.newBuilder().setIno(f.getIno())
                .setValid(MdsClient.SETATTR_SIZE).setSize(0).build()));
        // setgid by a non-member is dropped
        Attr m = mds.setattr(ALICE, SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(MdsClient.SETATTR_GID).setGid(50).build());
        assertEquals(50, m.getGid());
        Attr s = mds.setattr(ALICE, SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(MdsClient.SETATTR_MODE).setMode(02755).build());
        assertEquals(S_IFREG | 02755, s.getMode(), "ALICE is in group 50");
        mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(MdsClient.SETATTR_GID).setGid(7).build());
        Attr s2 = mds.setattr(ALICE, SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(MdsClient.SETATTR_MODE).setMode(02755).build());
        assertEquals(S_IFREG | 0755, s2.getMode(), "not in group 7: S_ISGID dropped");
    }

    @Test
    void setgidDirectoryInheritance() {
        Attr d = mds.mkdir(ROOT, R, b("proj"), 02777);
        assertEquals(S_IFDIR | 0777, d.getMode(), "mkdir ignores S_ISGID in its mode argument");
        mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(d.getIno()).setValid(MdsClient.SETATTR_GID | MdsClient.SETATTR_MODE)
                .setGid(50).setMode(02777).build());
        Attr f = mds.create(BOB, d.getIno(), b("f"), 0644, true);
        assertEquals(50, f.getGid());
        Attr sub = mds.mkdir(BOB, d.getIno(), b("sub"), 0755);
        assertEquals(50, sub.getGid());
        assertEquals(S_IFDIR | 02755, sub.getMode());
        Attr plain = mds.mkdir(ROOT, R, b("plain"), 0777);
        assertEquals(1001, mds.create(BOB, plain.getIno(), b("g"), 0644, true).getGid());
    }

    @Test
    void renameNeedsWriteOnBothParentsAndOnAMovedDirectory() {
        Attr mine = mds.mkdir(ALICE, mds.mkdir(ROOT, R, b("pub"), 0777).getIno(), b("mine"), 0755);
        Attr theirs = mds.mkdir(ROOT, R, b("theirs"), 0755);
        mds.create(ALICE, mine.getIno(), b("f"), 0644, true);
        assertErrno(Status.EACCES, () -> mds.rename(ALICE, mine.getIno(), b("f"), theirs.getIno(), b("f"), 0));
        Attr pub = mds.lookup(ROOT, R, b("pub"));
        Attr rootsDir = mds.mkdir(ROOT, pub.getIno(), b("rootdir"), 0755);
        Attr other = mds.mkdir(ROOT, pub.getIno(), b("other"), 0777);
        // moving someone else's directory to another parent needs write permission on it (its "..")
        assertErrno(Status.EACCES, () -> mds.rename(ALICE, pub.getIno(), b("rootdir"), other.getIno(), b("x"), 0));
        mds.rename(ALICE, pub.getIno(), b("rootdir"), pub.getIno(), b("renamed"), 0);
        assertEquals(rootsDir.getIno(), mds.lookup(ALICE, pub.getIno(), b("renamed")).getIno());
    }
}
