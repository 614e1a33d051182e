package dev.granary.mds.namespace;

import static org.junit.jupiter.api.Assertions.*;

import dev.granary.mds.MdsTestBase;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Status;
import java.util.List;
import org.junit.jupiter.api.Test;

/** setxattr / getxattr / listxattr / removexattr. */
class XattrTest extends MdsTestBase {

    @Test
    void setGetListRemove() {
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        mds.setxattr(ROOT, f.getIno(), b("user.b"), b("2"), 0);
        mds.setxattr(ROOT, f.getIno(), b("user.a"), new byte[0], 0);
        mds.setxattr(ROOT, f.getIno(), b("trusted.t"), b("t"), 0);
        assertArrayEquals(b("2"), mds.getxattr(ROOT, f.getIno(), b("user.b")));
        assertArrayEquals(new byte[0], mds.getxattr(ROOT, f.getIno(), b("user.a")));
        assertEquals(List.of(bs("trusted.t"), bs("user.a"), bs("user.b")), mds.listxattr(ROOT, f.getIno()));
        assertEquals(List.of(bs("user.a"), bs("user.b")), mds.listxattr(ALICE, f.getIno()), "trusted.* hidden");
        assertErrno(Status.ENODATA, () -> mds.getxattr(ALICE, f.getIno(), b("trusted.t")));
        assertTrue(mds.getattr(ROOT, f.getIno()).getCtimeNs() > f.getCtimeNs());

        assertErrno(Status.EEXIST, () -> mds.setxattr(ROOT, f.getIno(), b("user.b"), b("x"), MdsClient.XATTR_CREATE));
        assertErrno(Status.ENODATA, () -> mds.setxattr(ROOT, f.getIno(), b("user.c"), b("x"), MdsClient.XATTR_REPLACE));
        mds.setxattr(ROOT, f.getIno(), b("user.b"), b("3"), MdsClient.XATTR_REPLACE);
        assertArrayEquals(b("3"), mds.getxattr(ROOT, f.getIno(), b("user.b")));
        assertErrno(Status.EINVAL, () -> mds.setxattr(ROOT, f.getIno(), b("user.b"), b("x"), 3));

        mds.removexattr(ROOT, f.getIno(), b("user.b"));
        assertErrno(Status.ENODATA, () -> mds.getxattr(ROOT, f.getIno(), b("user.b")));
        assertErrno(Status.ENODATA, () -> mds.removexattr(ROOT, f.getIno(), b("user.b")));
        assertEquals(List.of(bs("trusted.t"), bs("user.a")), mds.listxattr(ROOT, f.getIno()));
        assertErrno(Status.ENOENT, () -> mds.getxattr(ROOT, 999, b("user.a")));
    }

    /**
     * Attributes carry the inode's xattr count (clients answer "no such xattr" from it for an
     * inode without any): 0 for every new inode, +1 per new name, unchanged by a replace or a
     * refused set, -1 per removal; in create, lookup, getattr and readdir-plus replies alike.
     */
    @Test
    void attributesCountTheXattrs() {
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        Attr d = mds.mkdir(ROOT, R, b("d"), 0755);
        Attr l = mds.symlink(ROOT, R, b("l"), b("f"));
        for (Attr a : List.of(f, d, l, mds.getattr(ROOT, R))) {
            assertTrue(a.hasXattrCount(), "inode " + a.getIno());
            assertEquals(0, a.getXattrCount(), "inode " + a.getIno());
        }
        mds.setxattr(ROOT, f.getIno(), b("user.a"), b("1"), 0);
        assertEquals(1, mds.getattr(ROOT, f.getIno()).getXattrCount());
        mds.setxattr(ROOT, f.getIno(), b("user.a"), b("2"), MdsClient.XATTR_REPLACE);
        mds.setxattr(ROOT, f.getIno(), b("user.a"), b("3"), 0);
        assertErrno(Status.EEXIST, () -> mds.setxattr(ROOT, f.getIno(), b("user.a"), b("x"), MdsClient.XATTR_CREATE));
        assertErrno(Status.ENODATA, () -> mds.setxattr(ROOT, f.getIno(), b("user.z"), b("x"), MdsClient.XATTR_REPLACE));
        assertEquals(1, mds.getattr(ROOT, f.getIno()).getXattrCount(), "a replace or a refused set adds none");
        mds.setxattr(ROOT, f.getIno(), b("trusted.t"), b("t"), 0);
        mds.setxattr(ROOT, d.getIno(), b("user.d"), b("d"), 0);
        assertEquals(2, mds.lookup(ROOT, R, b("f")).getXattrCount(), "trusted.* counts too");
        java.util.Map<Long, Integer> listed = new java.util.HashMap<>();
        for (var e : mds.readdirPlus(ROOT, R, new byte[0], 100).entries()) {
            listed.put(e.getAttr().getIno(), e.getAttr().getXattrCount());
        }
        assertEquals(java.util.Map.of(f.getIno(), 2, d.getIno(), 1, l.getIno(), 0), listed);
        mds.removexattr(ROOT, f.getIno(), b("user.a"));
        assertErrno(Status.ENODATA, () -> mds.removexattr(ROOT, f.getIno(), b("user.a")));
        assertEquals(1, mds.getattr(ROOT, f.getIno()).getXattrCount());
        mds.removexattr(ROOT, f.getIno(), b("trusted.t"));
        assertEquals(0, mds.getattr(ROOT, f.getIno()).getXattrCount());
    }

    @Test
    void limitsAndNamespaces() {
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        mds.setxattr(ROOT, f.getIno(), b("user.max"), new byte[65536], 0);
        assertEquals(65536, mds.getxattr(ROOT, f.getIno(), b("user.max")).length);
        assertErrno(Status.E2BIG, () -> mds.setxattr(ROOT, f.getIno(), b("user.big"), new byte[65537], 0));
        assertErrno(Status.ERANGE, () -> mds.setxattr(ROOT, f.getIno(), b("user." + "x".repeat(251)), b("v"), 0));
        mds.setxattr(ROOT, f.getIno(), b("user." + "x".repeat(250)), b("v"), 0);
        assertErrno(Status.ERANGE, () -> mds.setxattr(ROOT, f.getIno(), new byte[0], b("v"), 0));
        assertErrno(Status.ENOTSUP, () -> mds.setxattr(ROOT, f.getIno(), b("other.x"), b("v"), 0));
        assertErrno(Status.ENOTSUP, () -> mds.setxattr(ROOT, f.getIno(), b("system.posix_acl_access"), b("v"), 0));
        assertErrno(Status.EPERM, () -> mds.setxattr(ALICE, f.getIno(), b("trusted.x"), b("v"), 0));
        assertErrno(Status.EACCES, () -> mds.setxattr(ALICE, f.getIno(), b("user.x"), b("v"), 0));
        Attr l = mds.symlink(ROOT, R, b("l"), b("f"));
        assertErrno(Status.EPERM, () -> mds.setxattr(ROOT, l.getIno(), b("user.x"), b("v"), 0));
    }

    @Test
    void unlinkRemovesXattrs() {
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        mds.setxattr(ROOT, f.getIno(), b("user.a"), b("1"), 0);
        mds.unlink(ROOT, R, b("f"));
        assertErrno(Status.ENOENT, () -> mds.listxattr(ROOT, f.getIno()));
        assertEquals(0, countKeys("xattrs"), "xattr versions removed with the inode at epoch 1");
        assertEquals(0, countKeys("inodes") - 1, "only the root inode is left");
    }

    private int countKeys(String cf) {
        int n = 0;
        try (var it = transport.kv().seek(cf, new byte[0])) {
            for (; it.valid(); it.next()) {
                n++;
            }
        }
        return n;
    }

}
