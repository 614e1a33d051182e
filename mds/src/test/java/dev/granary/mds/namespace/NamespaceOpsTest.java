package dev.granary.mds.namespace;

import static org.junit.jupiter.api.Assertions.*;

import dev.granary.mds.MdsTestBase;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.*;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Success paths and errnos of the namespace operations, through MdsClient on a real RocksDB. */
class NamespaceOpsTest extends MdsTestBase {

    @Test
    void rootExistsOnEmptyDbAndAfterFirstWrite() {
        Attr before = mds.getattr(ROOT, R);
        assertEquals(S_IFDIR | 0755, before.getMode());
        assertEquals(0, before.getUid());
        assertEquals(2, before.getNlink());
        assertEquals(0, before.getAtimeNs());
        assertEquals(4L << 20, before.getLayout().getStripeSize());
        mds.mkdir(ROOT, R, b("d"), 0755);
        Attr after = mds.getattr(ROOT, R);
        assertEquals(S_IFDIR | 0755, after.getMode());
        assertEquals(3, after.getNlink());
        assertTrue(after.getCtimeNs() > 0);
    }

    @Test
    void createLookupGetattr() {
        Attr pub = mds.mkdir(ROOT, R, b("pub"), 0777);
        Attr f = mds.create(ALICE, pub.getIno(), b("f"), 0644, true);
        assertEquals(S_IFREG | 0644, f.getMode());
        assertEquals(1000, f.getUid());
        assertEquals(1000, f.getGid());
        assertEquals(1, f.getNlink());
        assertEquals(0, f.getSize());
        assertEquals(2, pub.getIno(), "first allocated inode after root");
        assertEquals(3, f.getIno());
        assertEquals(f, mds.lookup(ALICE, pub.getIno(), b("f")));
        assertEquals(f, mds.getattr(ALICE, f.getIno()));
        assertErrno(Status.ENOENT, () -> mds.lookup(ALICE, pub.getIno(), b("nope")));
        assertErrno(Status.ENOENT, () -> mds.getattr(ALICE, 999));
        assertErrno(Status.ENOTDIR, () -> mds.lookup(ALICE, f.getIno(), b("x")));
        assertEquals(R, mds.lookup(ALICE, R, b(".")).getIno());
        assertEquals(R, mds.lookup(ALICE, R, b("..")).getIno());
        assertEquals(pub.getIno(), mds.lookup(ALICE, pub.getIno(), b(".")).getIno());
        assertEquals(R, mds.lookup(ALICE, pub.getIno(), b("..")).getIno());
    }

    @Test
    void createExclusiveAndNonExclusive() {
        Attr f = mds.create(ROOT, R, b("f"), 0600, true);
        assertErrno(Status.EEXIST, () -> mds.create(ROOT, R, b("f"), 0600, true));
        Attr again = mds.create(ROOT, R, b("f"), 0777, false);
        assertEquals(f.getIno(), again.getIno());
        assertEquals(S_IFREG | 0600, again.getMode(), "non-exclusive create returns the existing file unchanged");
        mds.mkdir(ROOT, R, b("d"), 0755);
        assertErrno(Status.EISDIR, () -> mds.create(ROOT, R, b("d"), 0644, false));
        assertErrno(Status.EEXIST, () -> mds.create(ROOT, R, b("d"), 0644, true));
        assertErrno(Status.EINVAL, () -> mds.create(ROOT, R, b("dir"), S_IFDIR | 0755, true));
        Attr pub = mds.mkdir(ROOT, R, b("pub"), 0777);
        assertErrno(Status.EPERM, () -> mds.create(ALICE, pub.getIno(), b("dev"), 0020000 | 0600, true));
        Attr fifo = mds.create(ALICE, pub.getIno(), b("fifo"), 0010000 | 0600, true);
        assertEquals(0010000 | 0600, fifo.getMode());
    }

    /**
     * Deferred creates: a client reserves inode numbers (alloc_inodes) and creates under one of
     * them; a number not handed out, or naming a live inode, is EINVAL; replace unlinks an
     * existing file of the name first, never a directory (EISDIR).
     */
    @Test
    void createUnderAReservedInodeNumberAndReplace() {
        long first = mds.allocInodes(ROOT, 16);
        assertEquals(first + 16, mds.create(ROOT, R, b("after"), 0644, true).getIno(), "the MDS skips the reserved range");
        dev.granary.mds.proto.MdsResponse made = mds.batchWrite(java.util.List.of(
                mds.createRequest(ROOT, R, b("mine"), S_IFREG | 0640, first + 3, true))).get(0);
        assertEquals(Status.OK, made.getStatus(), made.getMessage());
        assertEquals(first + 3, made.getAttr().getIno());
        assertEquals(first + 3, mds.lookup(ROOT, R, b("mine")).getIno());
        assertEquals(S_IFREG | 0640, mds.getattr(ROOT, first + 3).getMode());
        java.util.function.BiFunction<String, Long, Status> create = (name, ino) -> mds.batchWrite(java.util.List.of(
                mds.createRequest(ROOT, R, b(name), S_IFREG | 0644, ino, true))).get(0).getStatus();
        assertEquals(Status.EINVAL, create.apply("x", first + 3), "a live inode's number");
        assertEquals(Status.EINVAL, create.apply("x", first + 17), "the MDS's own last number");
        assertEquals(Status.EINVAL, create.apply("x", first + 1000), "a number not handed out yet");
        assertEquals(Status.EINVAL, create.apply("x", R), "the root's");
        assertEquals(Status.EINVAL, create.apply("x", -1L), "2^64 - 1");
        assertErrno(Status.ENOENT, () -> mds.lookup(ROOT, R, b("x")));

        assertEquals(Status.OK, create.apply("mine", first + 4), "replaces the file named mine");
        assertEquals(first + 4, mds.lookup(ROOT, R, b("mine")).getIno());
        assertErrno(Status.ENOENT, () -> mds.getattr(ROOT, first + 3));
        mds.mkdir(ROOT, R, b("d"), 0755);
        assertEquals(Status.EISDIR, create.apply("d", first + 5));
        assertEquals(S_IFDIR | 0755, mds.lookup(ROOT, R, b("d")).getMode());
        assertErrno(Status.EINVAL, () -> mds.allocInodes(ROOT, 0));
        assertErrno(Status.EINVAL, () -> mds.allocInodes(ROOT, 65537));
    }

    @Test
    void createInRootByNonRootIsEacces() {
        assertErrno(Status.EACCES, () -> mds.create(ALICE, R, b("f"), 0644, true));
    }

    @Test
    void mkdirAndNlink() {
        Attr d = mds.mkdir(ROOT, R, b("d"), 0750);
        assertEquals(S_IFDIR | 0750, d.getMode());
        assertEquals(2, d.getNlink());
        mds.mkdir(ROOT, d.getIno(), b("s1"), 0755);
        mds.mkdir(ROOT, d.getIno(), b("s2"), 0755);
        mds.create(ROOT, d.getIno(), b("f"), 0644, true);
        assertEquals(4, mds.getattr(ROOT, d.getIno()).getNlink(), "2 + two subdirectories");
        assertErrno(Status.EEXIST, () -> mds.mkdir(ROOT, R, b("d"), 0755));
        assertErrno(Status.EEXIST, () -> mds.mkdir(ROOT, R, b("."), 0755));
        assertErrno(Status.EEXIST, () -> mds.mkdir(ROOT, R, b(".."), 0755));
        assertErrno(Status.ENOENT, () -> mds.mkdir(ROOT, 12345, b("x"), 0755));
        Attr f = mds.lookup(ROOT, d.getIno(), b("f"));
        assertErrno(Status.ENOTDIR, () -> mds.mkdir(ROOT, f.getIno(), b("x"), 0755));
        assertEquals(R, mds.lookup(ROOT, d.getIno(), b("..")).getIno());
    }

    @Test
    void nameValidation() {
        byte[] max = new byte[255];
        java.util.Arrays.fill(max, (byte) 'a');
        byte[] tooLong = new byte[256];
        java.util.Arrays.fill(tooLong, (byte) 'a');
        mds.create(ROOT, R, max, 0644, true);
        assertArrayEquals(max, mds.readdir(ROOT, R, new byte[0], 10).entries().get(0).getName().toByteArray());
        assertErrno(Status.ENAMETOOLONG, () -> mds.create(ROOT, R, tooLong, 0644, true));
        assertErrno(Status.ENAMETOOLONG, () -> mds.lookup(ROOT, R, tooLong));
        assertErrno(Status.EINVAL, () -> mds.create(ROOT, R, b("a/b"), 0644, true));
        assertErrno(Status.EINVAL, () -> mds.create(ROOT, R, new byte[] {'a', 0, 'b'}, 0644, true));
        assertErrno(Status.EINVAL, () -> mds.create(ROOT, R, new byte[0], 0644, true));
        byte[] latin1 = {(byte) 0xff, (byte) 0xfe, (byte) 0x80, 'x'}; // not UTF-8: fine
        Attr f = mds.create(ROOT, R, latin1, 0644, true);
        assertEquals(f.getIno(), mds.lookup(ROOT, R, latin1).getIno());
        // a multi-byte UTF-8 name is counted in bytes: 128 * 2 bytes = 256 > 255
        assertErrno(Status.ENAMETOOLONG, () -> mds.mkdir(ROOT, R, b("é".repeat(128)), 0755));
        mds.mkdir(ROOT, R, b("é".repeat(127)), 0755);
    }

    @Test
    void unlinkAndRmdir() {
        Attr d = mds.mkdir(ROOT, R, b("d"), 0755);
        Attr f = mds.create(ROOT, d.getIno(), b("f"), 0644, true);
        assertErrno(Status.ENOTEMPTY, () -> mds.rmdir(ROOT, R, b("d")));
        assertErrno(Status.ENOTDIR, () -> mds.rmdir(ROOT, d.getIno(), b("f")));
        assertErrno(Status.EISDIR, () -> mds.unlink(ROOT, R, b("d")));
        assertErrno(Status.ENOENT, () -> mds.unlink(ROOT, R, b("nope")));
        assertErrno(Status.ENOENT, () -> mds.rmdir(ROOT, R, b("nope")));
        assertErrno(Status.EINVAL, () -> mds.rmdir(ROOT, R, b(".")));
        assertErrno(Status.ENOTEMPTY, () -> mds.rmdir(ROOT, R, b("..")));
        long used = mds.statfs(ROOT).getUsedInodes();
        mds.unlink(ROOT, d.getIno(), b("f"));
        assertErrno(Status.ENOENT, () -> mds.getattr(ROOT, f.getIno()));
        assertEquals(used - 1, mds.statfs(ROOT).getUsedInodes());
        mds.rmdir(ROOT, R, b("d"));
        assertErrno(Status.ENOENT, () -> mds.getattr(ROOT, d.getIno()));
        assertEquals(2, mds.getattr(ROOT, R).getNlink());
        assertEquals(List.of(), list(ROOT, R, 10));
    }

    @Test
    void unlinkUpdatesParentTimes() {
        mds.create(ROOT, R, b("f"), 0644, true);
        long before = mds.getattr(ROOT, R).getMtimeNs();
        mds.unlink(ROOT, R, b("f"));
        Attr root = mds.getattr(ROOT, R);
        assertTrue(root.getMtimeNs() > before);
        assertEquals(root.getMtimeNs(), root.getCtimeNs());
    }

    @Test
    void symlinkAndReadlink() {
        Attr l = mds.symlink(ROOT, R, b("l"), b("../target/x"));
        assertEquals(S_IFLNK | 0777, l.getMode());
        assertEquals(11, l.getSize());
        assertArrayEquals(b("../target/x"), mds.readlink(ROOT, l.getIno()));
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        assertErrno(Status.EINVAL, () -> mds.readlink(ROOT, f.getIno()));
        assertErrno(Status.EEXIST, () -> mds.symlink(ROOT, R, b("f"), b("x")));
        assertErrno(Status.ENOENT, () -> mds.symlink(ROOT, R, b("e"), new byte[0]));
        assertErrno(Status.ENAMETOOLONG, () -> mds.symlink(ROOT, R, b("e"), new byte[4096]));
        assertEquals(S_IFLNK, mds.readdir(ROOT, R, new byte[0], 10).entries().get(1).getMode());
    }

    @Test
    void hardLinks() {
        Attr d = mds.mkdir(ROOT, R, b("d"), 0755);
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        Attr l = mds.link(ROOT, f.getIno(), d.getIno(), b("g"));
        assertEquals(2, l.getNlink());
        assertTrue(l.getCtimeNs() > f.getCtimeNs());
        assertEquals(f.getIno(), mds.lookup(ROOT, d.getIno(), b("g")).getIno());
        assertErrno(Status.EPERM, () -> mds.link(ROOT, d.getIno(), R, b("dl")));
        assertErrno(Status.EEXIST, () -> mds.link(ROOT, f.getIno(), R, b("d")));
        assertErrno(Status.ENOENT, () -> mds.link(ROOT, 777, R, b("x")));
        mds.unlink(ROOT, R, b("f"));
        assertEquals(1, mds.getattr(ROOT, f.getIno()).getNlink());
        mds.unlink(ROOT, d.getIno(), b("g"));
        assertErrno(Status.ENOENT, () -> mds.getattr(ROOT, f.getIno()));
    }

    @Test
    void setattrModeOwnerTimesSize() {
        Attr d = mds.mkdir(ROOT, R, b("home"), 0777);
        Attr f = mds.create(ALICE, d.getIno(), b("f"), 0644, true);
        Attr m = mds.setattr(ALICE, SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(MdsClient.SETATTR_MODE)
                .setMode(S_IFDIR | 06755).build());
        assertEquals(S_IFREG | 06755, m.getMode(), "type bits kept, permission + suid/sgid set");
        // chgrp to a supplementary group by the owner: allowed; clears suid and (group-exec) sgid
        Attr g = mds.setattr(ALICE, SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(MdsClient.SETATTR_GID).setGid(50).build());
        assertEquals(50, g.getGid());
        assertEquals(S_IFREG | 0755, g.getMode());
        assertErrno(Status.EPERM, () -> mds.setattr(ALICE, SetAttrRequest.newBuilder().setIno(f.getIno())
                .setValid(MdsClient.SETATTR_GID).setGid(7).build()));
        assertErrno(Status.EPERM, () -> mds.setattr(ALICE, SetAttrRequest.newBuilder().setIno(f.getIno())
                .setValid(MdsClient.SETATTR_UID).setUid(1001).build()));
        Attr o = mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(f.getIno())
                .setValid(MdsClient.SETATTR_UID | MdsClient.SETATTR_GID).setUid(1001).setGid(1001).build());
        assertEquals(1001, o.getUid());
        assertEquals(1001, o.getGid());
        Attr t = mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(f.getIno())
                .setValid(MdsClient.SETATTR_ATIME | MdsClient.SETATTR_MTIME).setAtimeNs(111).setMtimeNs(222).build());
        assertEquals(111, t.getAtimeNs());
        assertEquals(222, t.getMtimeNs());
        assertTrue(t.getCtimeNs() > o.getCtimeNs());
        Attr now = mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(f.getIno())
                .setValid(MdsClient.SETATTR_ATIME | MdsClient.SETATTR_ATIME_NOW | MdsClient.SETATTR_MTIME | MdsClient.SETATTR_MTIME_NOW).build());
        assertEquals(now.getCtimeNs(), now.getMtimeNs());
        assertEquals(now.getCtimeNs(), now.getAtimeNs());
        Attr s = mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(MdsClient.SETATTR_SIZE).setSize(10_000).build());
        assertEquals(10_000, s.getSize());
        assertEquals(20, s.getBlocks(), "ceil(10000/512)");
        assertErrno(Status.EISDIR, () -> mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(d.getIno())
                .setValid(MdsClient.SETATTR_SIZE).setSize(1).build()));
        assertErrno(Status.EINVAL, () -> mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(1 << 9).build()));
        assertErrno(Status.ENOENT, () -> mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(4242).setValid(1).build()));
    }

    @Test
    void statfsCountsInodesAndBytes() {
        StatFsReply s0 = mds.statfs(ROOT);
        assertEquals(1, s0.getUsedInodes());
        assertEquals(4096, s0.getBlockSize());
        assertEquals((1L << 50) / 4096, s0.getTotalBlocks());
        Attr f = mds.create(ROOT, R, b("f"), 0644, true);
        mds.mkdir(ROOT, R, b("d"), 0755);
        mds.setattr(ROOT, SetAttrRequest.newBuilder().setIno(f.getIno()).setValid(MdsClient.SETATTR_SIZE).setSize(8192).build());
        StatFsReply s1 = mds.statfs(ROOT);
        assertEquals(3, s1.getUsedInodes());
        assertEquals(8192, s1.getUsedBytes());
        assertEquals(s1.getTotalBlocks() - 2, s1.getFreeBlocks());
        assertEquals(s1.getTotalInodes() - 3, s1.getFreeInodes());
        mds.unlink(ROOT, R, b("f"));
        assertEquals(0, mds.statfs(ROOT).getUsedBytes());
    }

    @Test
    void ostAndOssRegistry() {
        registerOsts(2);
        mds.registerOst(ROOT, OstInfo.newBuilder().setIndex(1).setEndpoint("http://other").setBucket("bb").build());
        List<OstInfo> osts = mds.listOsts(ROOT);
        assertEquals(2, osts.size());
        assertEquals("http://other", osts.get(1).getEndpoint());
        assertErrno(Status.EPERM, () -> mds.registerOst(ALICE, OstInfo.newBuilder().setIndex(5).setEndpoint("e").setBucket("b").build()));
        assertErrno(Status.EINVAL, () -> mds.registerOst(ROOT, OstInfo.newBuilder().setIndex(5).build()));
        mds.registerOss(ROOT, "127.0.0.1:7001");
        mds.registerOss(ROOT, "127.0.0.1:7001");
        mds.registerOss(ROOT, "127.0.0.1:7000");
        assertEquals(List.of("127.0.0.1:7000", "127.0.0.1:7001"),
                mds.listOss(ROOT).stream().map(OssInfo::getAddress).toList());
        assertErrno(Status.EINVAL, () -> mds.registerOss(ROOT, ""));
    }

    @Test
    void failedMutationWritesNothing() {
        mds.create(ROOT, R, b("f"), 0644, true);
        long usedBefore = mds.statfs(ROOT).getUsedInodes();
        Attr rootBefore = mds.getattr(ROOT, R);
        // fails after the name checks; must not allocate an inode number or touch the parent
        assertErrno(Status.EEXIST, () -> mds.create(ROOT, R, b("f"), 0644, true));
        assertEquals(rootBefore, mds.getattr(ROOT, R));
        assertEquals(usedBefore, mds.statfs(ROOT).getUsedInodes());
        Attr g = mds.create(ROOT, R, b("g"), 0644, true);
        assertEquals(3, g.getIno(), "the failed create allocated no inode number");
    }

    @Test
    void mutationSentAsReadIsRejected() {
        MdsRequest req = MdsRequest.newBuilder().setCaller(ROOT)
                .setMkdir(MkdirRequest.newBuilder().setParent(R).setName(bs("x")).setMode(0755)).build();
        assertEquals(Status.EINVAL, transport.read(req).getStatus());
        assertEquals(Status.EINVAL, transport.write(MdsRequest.newBuilder().setCaller(ROOT).build()).getStatus());
        // a read sent as a write is answered
        assertEquals(Status.OK, transport.write(MdsRequest.newBuilder().setCaller(ROOT)
                .setGetattr(GetAttrRequest.newBuilder().setIno(R)).build()).getStatus());
    }

    /**
     * A directory with 2^32 - 17 links (forged in the database: four billion mkdirs do not fit a
     * test) takes one more subdirectory, then mkdir fails with EMLINK and changes nothing.
     */
    @Test
    void mkdirFailsWithEmlinkAtTheDirectoryLinkLimit() {
        Attr d = mds.mkdir(ROOT, R, b("full"), 0755);
        dev.granary.raft.RocksKv kv = transport.kv();
        long epoch = dev.granary.mds.schema.MdsSchema.currentEpoch(kv);
        var rec = dev.granary.mds.schema.MdsSchema.getInode(kv, d.getIno(), epoch);
        dev.granary.raft.KvTxn t = kv.newTxn();
        dev.granary.mds.schema.MdsSchema.putInode(t, d.getIno(), epoch, rec.toBuilder().setNlink((int) 0xFFFF_FFEFL).build());
        kv.commit(t, 1, kv.lastAppliedIndex() + 1);
        try (var forged = new dev.granary.mds.client.LocalMdsTransport(kv, false, () -> clock.addAndGet(1000));
             MdsClient m = new MdsClient(forged)) {
            m.mkdir(ROOT, d.getIno(), b("last"), 0755);
            assertEquals(0xFFFF_FFF0L, Integer.toUnsignedLong(m.getattr(ROOT, d.getIno()).getNlink()));
            assertErrno(Status.EMLINK, () -> m.mkdir(ROOT, d.getIno(), b("one-too-many"), 0755));
            assertErrno(Status.ENOENT, () -> m.lookup(ROOT, d.getIno(), b("one-too-many")));
            assertEquals(0xFFFF_FFF0L, Integer.toUnsignedLong(m.getattr(ROOT, d.getIno()).getNlink()));
            m.create(ROOT, d.getIno(), b("files-still-fit"), 0644, true);
        }
    }
}
