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
