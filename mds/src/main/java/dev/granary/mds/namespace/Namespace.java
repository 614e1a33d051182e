package dev.granary.mds.namespace;

import com.google.protobuf.ByteString;
import dev.granary.mds.Extents;
import dev.granary.mds.FsException;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.CreateRequest;
import dev.granary.mds.proto.DirEntry;
import dev.granary.mds.proto.DirLease;
import dev.granary.mds.proto.Extent;
import dev.granary.mds.proto.GcBlock;
import dev.granary.mds.proto.Layout;
import dev.granary.mds.proto.LockInfo;
import dev.granary.mds.proto.LockKind;
import dev.granary.mds.proto.LockType;
import dev.granary.mds.proto.OssInfo;
import dev.granary.mds.proto.OstInfo;
import dev.granary.mds.proto.RenameRequest;
import dev.granary.mds.proto.SetAttrRequest;
import dev.granary.mds.proto.StatFsReply;
import dev.granary.mds.proto.StripeBase;
import dev.granary.mds.proto.Status;
import dev.granary.mds.schema.BufferedTxn;
import dev.granary.mds.schema.MdsSchema;
import dev.granary.mds.schema.proto.DentryRecord;
import dev.granary.mds.schema.proto.DirLeaseRecord;
import dev.granary.mds.schema.proto.GcRecord;
import dev.granary.mds.schema.proto.InodeRecord;
import dev.granary.mds.schema.proto.LockTableRecord;
import dev.granary.mds.schema.proto.PackRecord;
import dev.granary.mds.schema.proto.SessionRecord;
import dev.granary.mds.schema.proto.UsageRecord;
import dev.granary.raft.KvReader;
import dev.granary.raft.KvTxn;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.UnaryOperator;

/**
 * The POSIX namespace, written once over the narrow {@link KvTxn}/{@link KvReader} layer and the
 * {@link MdsSchema}: one method per operation, doing the permission, name and type checks of
 * POSIX / Linux (rename(2), unlink(2), chown(2), setxattr(2), ...) and Lustre-style layouts.
 *
 * <p>Every failure is an {@link FsException} carrying the errno; a method that throws may have
 * buffered writes, so callers run mutations on a {@link BufferedTxn} and keep its writes only on
 * success ({@code MdsStateMachine} does). Mutations read and write the live tree at the current
 * epoch; read-only views may read any epoch ({@link #atEpoch}).
 *
 * <p>Deterministic: the result depends only on the arguments (including {@code now}, stamped by
 * the Raft leader) and the database. Times are ns since the Unix epoch; sizes are bytes.
 *
 * <p>Permissions follow POSIX with the caller's uid/gid/supplementary gids; uid 0 bypasses the
 * read/write/search bits (exec bits of regular files are not checked: the MDS never executes).
 * Data-path operations ({@link #commitExtents}, {@link #getExtents}) check no permission: POSIX
 * checks at open(2), which the client does with the attributes it looked up.
 */
public final class Namespace {
    /** File type mask and types (Linux {@code <sys/stat.h>}). */
    public static final int S_IFMT = 0170000, S_IFSOCK = 0140000, S_IFLNK = 0120000, S_IFREG = 0100000,
            S_IFBLK = 0060000, S_IFDIR = 0040000, S_IFCHR = 0020000, S_IFIFO = 0010000;
    /** Set-user-id, set-group-id, sticky bits. */
    public static final int S_ISUID = 04000, S_ISGID = 02000, S_ISVTX = 01000;
    /** Longest name (POSIX NAME_MAX), bytes. */
    public static final int NAME_MAX = 255;
    /** Longest symlink target (Linux PATH_MAX - 1), bytes. */
    public static final int SYMLINK_MAX = 4095;
    /** Largest xattr value (Linux XATTR_SIZE_MAX), bytes. */
    public static final int XATTR_SIZE_MAX = 65536;
    /** Largest link count of a non-directory (LINK_MAX of this filesystem). */
    public static final int LINK_MAX = 65000;
    /** Nominal capacity reported by statfs, bytes (1 PiB: object storage has no fixed size). */
    public static final long CAPACITY_BYTES = 1L << 50;
    /** Nominal inode capacity reported by statfs. */
    public static final long CAPACITY_INODES = 1L << 40;
    /** statfs block size, bytes. */
    public static final int STATFS_BLOCK = 4096;
    /** Default stripe size of the root directory, bytes (4 MiB). */
    public static final long DEFAULT_STRIPE_SIZE = 4L << 20;
    /** Stripe sizes must be multiples of this, bytes (64 KiB, as Lustre). */
    public static final long STRIPE_ALIGN = 64L << 10;
    /**
     * Largest stripe size, bytes: 64 MiB. Lustre allows 4 GiB, but a Granary stripe is written as
     * one block in one OSS call, buffered whole in the client, and read back in one reply: gRPC
     * messages are capped at 128 MiB, so a 128 MiB stripe could never be uploaded (its close
     * failed with EIO) and a 2 GiB one not even opened (EFBIG).
     */
    public static final long MAX_STRIPE_SIZE = 64L << 20;
    /**
     * Largest file whose data may live inline in its stripe-0 extent (data on MDS, as Lustre's
     * DoM): 1 MiB. The client picks its own, smaller threshold ({@code inline_max}).
     */
    public static final int INLINE_MAX = 1 << 20;
    /** Default page size of readdir when the request's limit is 0; also the largest page. */
    public static final int READDIR_DEFAULT_LIMIT = 1024, READDIR_MAX_LIMIT = 65536;

    private static final int SETATTR_MODE = 1, SETATTR_UID = 2, SETATTR_GID = 4, SETATTR_SIZE = 8,
            SETATTR_ATIME = 16, SETATTR_MTIME = 32, SETATTR_ATIME_NOW = 64, SETATTR_MTIME_NOW = 128;
    private static final int RENAME_NOREPLACE = 1, RENAME_EXCHANGE = 2;
    private static final int XATTR_CREATE = 1, XATTR_REPLACE = 2;
    private static final int R = 4, W = 2, X = 1;
    private static final long ROOT = MdsSchema.ROOT_INO;

    /** The root's default layout template: 4 MiB stripes over all OSTs. */
    public static final Layout DEFAULT_LAYOUT = Layout.newBuilder().setStripeSize(DEFAULT_STRIPE_SIZE).setStripeCount(0).build();

    private final KvTxn txn;
    private final long epoch;
    private final boolean writable;
    /** The pack whose commit_pack this namespace applies a commit of (see {@link #inPack}), else null. */
    private String packKey;
    private int packOst;
    private long packLength;
    /** Extents committed into {@link #packKey} by this namespace that refer to it anew. */
    private long packRefsAdded;

    private Namespace(KvTxn txn, long epoch, boolean writable) {
        this.txn = txn;
        this.epoch = epoch;
        this.writable = writable;
    }

    /** A writable namespace over {@code txn} at the current epoch. */
    public static Namespace live(KvTxn txn) {
        return new Namespace(txn, MdsSchema.currentEpoch(txn), true);
    }

    /** A read-only view of the live tree (current epoch); mutations fail with EROFS. */
    public static Namespace readOnly(KvReader reader) {
        return new Namespace(new BufferedTxn(reader), MdsSchema.currentEpoch(reader), false);
    }

    /** A read-only view of the tree as of {@code epoch} (a snapshot's epoch); mutations fail with EROFS. */
    public static Namespace atEpoch(KvReader reader, long epoch) {
        return new Namespace(new BufferedTxn(reader), epoch, false);
    }

    /** The epoch this namespace reads (and, when writable, writes). */
    public long epoch() {
        return epoch;
    }

    /** A directory page: entries in name byte order and whether more follow. */
    public record DirPage(List<DirEntry> entries, boolean more) {}

    // =============================================================================== helpers

    private static FsException err(Status s, String msg) {
        return new FsException(s, msg);
    }

    private void requireWritable() {
        if (!writable) {
            throw err(Status.EROFS, "read-only view of epoch " + epoch);
        }
    }

    private static boolean isDir(int mode) {
        return (mode & S_IFMT) == S_IFDIR;
    }

    private static boolean isReg(int mode) {
        return (mode & S_IFMT) == S_IFREG;
    }

    private static boolean isLnk(int mode) {
        return (mode & S_IFMT) == S_IFLNK;
    }

    private static String show(byte[] name) {
        return new String(name, StandardCharsets.UTF_8);
    }

    private static boolean isDot(byte[] n) {
        return n.length == 1 && n[0] == '.';
    }

    private static boolean isDotDot(byte[] n) {
        return n.length == 2 && n[0] == '.' && n[1] == '.';
    }

    /** Checks a name's syntax: EINVAL (empty, '/', NUL), ENAMETOOLONG (> 255 bytes). */
    private static void checkNameSyntax(byte[] name) {
        if (name.length == 0) {
            throw err(Status.EINVAL, "empty name");
        }
        if (name.length > NAME_MAX) {
            throw err(Status.ENAMETOOLONG, "name of " + name.length + " bytes exceeds " + NAME_MAX);
        }
        for (byte b : name) {
            if (b == '/' || b == 0) {
                throw err(Status.EINVAL, "name contains '/' or NUL");
            }
        }
    }

    /** A name for a new entry: syntax, and "." / ".." already exist (EEXIST, as mkdir(2)). */
    private static void checkNewName(byte[] name) {
        checkNameSyntax(name);
        if (isDot(name) || isDotDot(name)) {
            throw err(Status.EEXIST, "'" + show(name) + "' exists");
        }
    }

    private static boolean inGroup(Caller c, int gid) {
        if (c.getGid() == gid) {
            return true;
        }
        for (int g : c.getGidsList()) {
            if (g == gid) {
                return true;
            }
        }
        return false;
    }

    /** POSIX permission check of {@code mask} (R/W/X bits) against the owner/group/other class. */
    private static boolean permitted(Caller c, InodeRecord ino, int mask) {
        if (c.getUid() == 0) {
            return true;
        }
        int mode = ino.getMode();
        int bits;
        if (c.getUid() == ino.getUid()) {
            bits = (mode >> 6) & 7;
        } else if (inGroup(c, ino.getGid())) {
            bits = (mode >> 3) & 7;
        } else {
            bits = mode & 7;
        }
        return (bits & mask) == mask;
    }

    private static void access(Caller c, InodeRecord ino, int mask, String what) {
        if (!permitted(c, ino, mask)) {
            throw err(Status.EACCES, "permission denied: " + what);
        }
    }

    private static boolean isOwner(Caller c, InodeRecord ino) {
        return c.getUid() == 0 || c.getUid() == ino.getUid();
    }

    /** Sticky directory rule (unlink(2), rename(2)): EPERM unless owner of the entry or of the dir, or root. */
    private static void checkSticky(Caller c, InodeRecord dir, InodeRecord victim, byte[] name) {
        if ((dir.getMode() & S_ISVTX) != 0 && c.getUid() != 0
                && c.getUid() != dir.getUid() && c.getUid() != victim.getUid()) {
            throw err(Status.EPERM, "sticky directory: not the owner of '" + show(name) + "'");
        }
    }

    /** The root as the first applied entry will create it (used on an empty database). */
    private static InodeRecord initialRoot(long now) {
        return InodeRecord.newBuilder().setMode(S_IFDIR | 0755).setUid(0).setGid(0).setNlink(2).setXattrCount(0)
                .setAtimeNs(now).setMtimeNs(now).setCtimeNs(now).setLayout(DEFAULT_LAYOUT).setParent(ROOT).build();
    }

    /** The inode or null. On an empty database the root reads as created with all times 0. */
    private InodeRecord findInode(long ino) {
        InodeRecord r = MdsSchema.getInode(txn, ino, epoch);
        if (r == null && ino == ROOT) {
            return initialRoot(0);
        }
        return r;
    }

    private InodeRecord inode(long ino) {
        InodeRecord r = findInode(ino);
        if (r == null) {
            throw err(Status.ENOENT, "no inode " + Long.toUnsignedString(ino));
        }
        return r;
    }

    private InodeRecord dir(long ino) {
        InodeRecord r = inode(ino);
        if (!isDir(r.getMode())) {
            throw err(Status.ENOTDIR, "inode " + Long.toUnsignedString(ino) + " is not a directory");
        }
        return r;
    }

    private void putInode(long ino, InodeRecord r) {
        MdsSchema.putInode(txn, ino, epoch, r);
    }

    /**
     * The ctime (ns) of a change applied at {@code now} to an inode whose ctime was {@code old}:
     * {@code now}, or 1 ns after {@code old} when the leader stamped this entry no later (the
     * leader stamps entries before it orders them, and its clock may step back after a failover).
     * So an inode's ctime grows with every change, and a client that gets two answers for one
     * inode keeps the later by ctime (two commits of one file answered out of order).
     */
    static long ctimeAfter(long old, long now) {
        return Math.max(now, old + 1);
    }

    /** Reads the latest version of {@code ino}, applies {@code f} and writes it back. */
    private InodeRecord update(long ino, UnaryOperator<InodeRecord.Builder> f) {
        InodeRecord r = f.apply(inode(ino).toBuilder()).build();
        putInode(ino, r);
        return r;
    }

    private void touchDir(long dir, long now, int nlinkDelta) {
        update(dir, b -> b.setMtimeNs(now).setCtimeNs(ctimeAfter(b.getCtimeNs(), now)).setNlink(b.getNlink() + nlinkDelta));
    }

    private void addUsage(long bytes, long inodes) {
        UsageRecord u = MdsSchema.getUsage(txn);
        MdsSchema.putUsage(txn, u.toBuilder().setUsedBytes(u.getUsedBytes() + bytes)
                .setUsedInodes(u.getUsedInodes() + inodes).build());
    }

    /** The attributes of {@code ino} as {@code stat} reports them. */
    private static Attr attr(long ino, InodeRecord r) {
        Attr.Builder a = Attr.newBuilder().setIno(ino).setMode(r.getMode()).setUid(r.getUid()).setGid(r.getGid())
                .setNlink(r.getNlink()).setSize(r.getSize()).setAtimeNs(r.getAtimeNs()).setMtimeNs(r.getMtimeNs())
                .setCtimeNs(r.getCtimeNs()).setRdev(r.getRdev());
        if (isReg(r.getMode())) {
            // Simplification: st_blocks counts the whole size in 512-byte units; holes are not subtracted.
            a.setBlocks(Long.divideUnsigned(r.getSize(), 512) + (Long.remainderUnsigned(r.getSize(), 512) != 0 ? 1 : 0));
        }
        if (r.hasLayout()) {
            a.setLayout(r.getLayout());
        }
        if (r.hasXattrCount()) {
            a.setXattrCount(r.getXattrCount());
        }
        return a.build();
    }

    private DentryRecord dentry(long parent, byte[] name) {
        return MdsSchema.getDentry(txn, parent, name, epoch);
    }

    /** The inode number {@code name} in {@code parent} names, or 0 when none (no permission check). */
    public long childIno(long parent, byte[] name) {
        DentryRecord d = dentry(parent, name);
        return d == null ? 0 : d.getIno();
    }

    private boolean isEmptyDir(long ino) {
        boolean[] any = {false};
        MdsSchema.scanDentries(txn, ino, new byte[0], epoch, (n, d) -> {
            any[0] = true;
            return false;
        });
        return !any[0];
    }

    /** True when {@code ancestor} is {@code ino} or one of its ancestors (walks the parent links). */
    private boolean isSelfOrAncestor(long ancestor, long ino) {
        long cur = ino;
        for (int depth = 0; depth < 1_000_000; depth++) {
            if (cur == ancestor) {
                return true;
            }
            if (cur == ROOT) {
                return false;
            }
            cur = inode(cur).getParent();
        }
        throw new IllegalStateException("directory parent links form a cycle above inode " + ino);
    }

    /** Deletes an inode without links: tombstones, extents and xattrs, block references to gc, usage. */
    private void destroyInode(long ino, InodeRecord r, long now) {
        if (isReg(r.getMode())) {
            List<Extent> extents = new ArrayList<>();
            MdsSchema.scanExtents(txn, ino, 0, -1L, epoch, e -> extents.add(e));
            for (Extent e : extents) {
                freeBlock(ino, e, now);
                MdsSchema.deleteExtent(txn, ino, e.getStripeIndex(), epoch);
            }
        }
        List<byte[]> xattrs = new ArrayList<>();
        MdsSchema.scanXattrs(txn, ino, epoch, (n, v) -> xattrs.add(n));
        for (byte[] n : xattrs) {
            MdsSchema.deleteXattr(txn, ino, n, epoch);
        }
        MdsSchema.deleteInode(txn, ino, epoch);
        addUsage(isReg(r.getMode()) ? -r.getSize() : 0, -1);
    }

    /**
     * Queues the block of extent {@code e} of {@code ino} for deletion (GC queue), stamped {@code now} (ns);
     * for a packed extent, drops one reference of its pack and queues the pack when that was the last.
     */
    private void freeBlock(long ino, Extent e, long now) {
        if (e.getBlockKey().isEmpty()) {
            return; // inline data: no block to delete
        }
        if (e.getPacked()) {
            PackRecord p = MdsSchema.getPack(txn, e.getOst(), e.getBlockKey());
            if (p == null) {
                return; // cannot happen (every packed extent is counted); keeping the block loses nothing
            }
            if (p.getRefs() > 1) {
                MdsSchema.putPack(txn, e.getOst(), e.getBlockKey(), p.toBuilder().setRefs(p.getRefs() - 1).build());
                return;
            }
            MdsSchema.deletePack(txn, e.getOst(), e.getBlockKey());
        }
        MdsSchema.appendGc(txn, GcRecord.newBuilder().setOst(e.getOst()).setBlockKey(e.getBlockKey())
                .setBirthEpoch(e.getBirthEpoch()).setDeathEpoch(epoch).setIno(ino).setStripeIndex(e.getStripeIndex())
                .setDeathTimeNs(now).build());
    }

    /** Drops one link of a non-directory; deletes it when it was the last. */
    private void dropLink(long ino, long now) {
        InodeRecord r = inode(ino);
        if (r.getNlink() <= 1) {
            destroyInode(ino, r, now);
        } else {
            putInode(ino, r.toBuilder().setNlink(r.getNlink() - 1).setCtimeNs(ctimeAfter(r.getCtimeNs(), now)).build());
        }
    }

    // =============================================================================== root

    /**
     * Creates the root directory (inode 1, mode 0755 | S_IFDIR, uid 0, gid 0, default layout) if
     * it does not exist, with all times = {@code now}. Called at the start of an applied entry
     * until the root is found.
     *
     * @return true if the root existed already, false if this call made it
     */
    public boolean ensureRoot(long now) {
        requireWritable();
        if (MdsSchema.getInode(txn, ROOT, epoch) == null) {
            putInode(ROOT, initialRoot(now));
            return false;
        }
        return true;
    }

    // =============================================================================== reads

    /**
     * Looks up {@code name} in directory {@code parent} (POSIX path resolution, one component).
     * "." is the directory itself, ".." its parent (the root's is the root).
     *
     * @throws FsException ENOENT, ENOTDIR, EACCES (no search permission), ENAMETOOLONG, EINVAL
     */
    public Attr lookup(Caller c, long parent, byte[] name) {
        InodeRecord p = dir(parent);
        access(c, p, X, "search directory " + Long.toUnsignedString(parent));
        checkNameSyntax(name);
        if (isDot(name)) {
            return attr(parent, p);
        }
        if (isDotDot(name)) {
            long pp = parent == ROOT ? ROOT : p.getParent();
            return attr(pp, inode(pp));
        }
        DentryRecord d = dentry(parent, name);
        if (d == null) {
            throw err(Status.ENOENT, "no entry '" + show(name) + "'");
        }
        return attr(d.getIno(), inode(d.getIno()));
    }

    /** Attributes of inode {@code ino} (stat(2)). @throws FsException ENOENT */
    public Attr getattr(Caller c, long ino) {
        return attr(ino, inode(ino));
    }

    /**
     * One page of directory {@code ino}: entries with names strictly after {@code after} in byte
     * order, at most {@code limit} (0: {@value #READDIR_DEFAULT_LIMIT}; capped at
     * {@value #READDIR_MAX_LIMIT}). "." and ".." are not included. A key-ordered seek, so paging
     * is stable under concurrent inserts and deletes: no entry twice, none that existed
     * throughout is missed.
     *
     * @throws FsException ENOENT, ENOTDIR, EACCES (no read permission)
     */
    public DirPage readdir(Caller c, long ino, byte[] after, int limit) {
        return readdir(c, ino, after, limit, false);
    }

    /**
     * {@link #readdir(Caller, long, byte[], int)}; with {@code plus} each entry also carries the
     * child's attributes, as a lookup of it would return them (NFSv3 READDIRPLUS; the client's
     * statahead, after Lustre's). A child removed between the dentry and inode reads of this same
     * snapshot cannot happen: both come from one consistent view.
     *
     * @throws FsException ENOENT, ENOTDIR, EACCES (no read permission; with plus, also no search permission)
     */
    public DirPage readdir(Caller c, long ino, byte[] after, int limit, boolean plus) {
        InodeRecord d = dir(ino);
        access(c, d, plus ? R | X : R, "read directory " + Long.toUnsignedString(ino));
        int max = limit <= 0 ? READDIR_DEFAULT_LIMIT : Math.min(limit, READDIR_MAX_LIMIT);
        List<DirEntry> out = new ArrayList<>();
        boolean[] more = {false};
        MdsSchema.scanDentries(txn, ino, after, epoch, (name, rec) -> {
            if (out.size() == max) {
                more[0] = true;
                return false;
            }
            DirEntry.Builder e = DirEntry.newBuilder().setName(ByteString.copyFrom(name)).setIno(rec.getIno()).setMode(rec.getType());
            if (plus) {
                InodeRecord child = findInode(rec.getIno());
                if (child == null) {
                    return true; // a dangling dentry (never written by this MDS): lookup would say ENOENT
                }
                e.setAttr(attr(rec.getIno(), child));
            }
            out.add(e.build());
            return true;
        });
        return new DirPage(out, more[0]);
    }

    /** Target of symlink {@code ino} (readlink(2)). @throws FsException ENOENT, EINVAL (not a symlink) */
    public byte[] readlink(Caller c, long ino) {
        InodeRecord r = inode(ino);
        if (!isLnk(r.getMode())) {
            throw err(Status.EINVAL, "inode " + Long.toUnsignedString(ino) + " is not a symlink");
        }
        return r.getSymlinkTarget().toByteArray();
    }

    /**
     * Filesystem figures (statfs(2)): a nominal 1 PiB capacity minus the bytes of live files,
     * and inode counts from the usage counters.
     */
    public StatFsReply statfs(Caller c) {
        UsageRecord u = MdsSchema.getUsage(txn);
        long total = CAPACITY_BYTES / STATFS_BLOCK;
        long used = (u.getUsedBytes() + STATFS_BLOCK - 1) / STATFS_BLOCK;
        return StatFsReply.newBuilder().setBlockSize(STATFS_BLOCK).setTotalBlocks(total)
                .setFreeBlocks(Math.max(0, total - used)).setTotalInodes(CAPACITY_INODES)
                .setFreeInodes(Math.max(0, CAPACITY_INODES - u.getUsedInodes()))
                .setUsedBytes(u.getUsedBytes()).setUsedInodes(u.getUsedInodes()).build();
    }

    // =============================================================================== create

    private long parentGidAndMode(InodeRecord p, Caller c, int[] modeInOut, boolean directory) {
        int gid = c.getGid();
        if ((p.getMode() & S_ISGID) != 0) {
            gid = p.getGid();
            if (directory) {
                modeInOut[0] |= S_ISGID; // BSD group semantics: subdirectories inherit the setgid bit
            }
        }
        if (!directory && (modeInOut[0] & S_ISGID) != 0 && c.getUid() != 0 && !inGroup(c, gid)) {
            modeInOut[0] &= ~S_ISGID; // Linux inode_init_owner: no setgid file for a group one is not in
        }
        return gid;
    }

    /**
     * Checks the parent of a new entry: a directory, searchable, a valid new name. Write
     * permission is checked by {@link #checkWritableParent} after the existence check, as Linux
     * may_create does (an existing name gives EEXIST even in a read-only directory).
     */
    private InodeRecord newEntryParent(Caller c, long parent, byte[] name) {
        requireWritable();
        InodeRecord p = dir(parent);
        checkNewName(name);
        access(c, p, X, "search directory " + Long.toUnsignedString(parent));
        return p;
    }

    private static void checkWritableParent(Caller c, InodeRecord p, long parent) {
        access(c, p, W | X, "write directory " + Long.toUnsignedString(parent));
    }

    /**
     * Creates a regular file, FIFO, socket or device node (open(2) O_CREAT, mknod(2)). A new
     * regular file gets the parent's default layout resolved now (see {@link #setLayout}).
     * Non-exclusive create of an existing non-directory returns it unchanged.
     *
     * @throws FsException EEXIST (exclusive, or a directory with that name → EISDIR for non-exclusive),
     *     ENOENT, ENOTDIR, EACCES, EINVAL (bad type), EPERM (device node by non-root), ENAMETOOLONG
     */
    public Attr create(Caller c, CreateRequest r, long now) {
        return createFile(c, r, now).attr();
    }

    /** What {@link #createFile} did: the inode's attributes, and whether it was made now (false: it existed). */
    public record CreateResult(Attr attr, boolean created) {}

    /** As {@link #create}, also telling whether a new inode was made. */
    public CreateResult createFile(Caller c, CreateRequest r, long now) {
        InodeRecord p = newEntryParent(c, r.getParent(), r.getName().toByteArray());
        byte[] name = r.getName().toByteArray();
        DentryRecord existing = dentry(r.getParent(), name);
        if (existing != null && r.getReplace() && !r.getExclusive()) {
            if (isDir(inode(existing.getIno()).getMode())) {
                throw err(Status.EISDIR, "'" + show(name) + "' is a directory");
            }
            unlink(c, r.getParent(), name, existing.getIno(), now); // its checks: write permission, sticky
            existing = null;
        }
        if (existing != null) {
            if (r.getExclusive()) {
                throw err(Status.EEXIST, "'" + show(name) + "' exists");
            }
            InodeRecord e = inode(existing.getIno());
            if (isDir(e.getMode())) {
                throw err(Status.EISDIR, "'" + show(name) + "' is a directory");
            }
            return new CreateResult(attr(existing.getIno(), e), false);
        }
        checkWritableParent(c, p, r.getParent());
        int type = r.getMode() & S_IFMT;
        if (type == 0) {
            type = S_IFREG;
        }
        switch (type) {
            case S_IFREG, S_IFIFO, S_IFSOCK -> { }
            case S_IFCHR, S_IFBLK -> {
                if (c.getUid() != 0) {
                    throw err(Status.EPERM, "only root creates device nodes");
                }
            }
            default -> throw err(Status.EINVAL, "create cannot make file type 0" + Integer.toOctalString(type));
        }
        int[] mode = {r.getMode() & 07777};
        int gid = (int) parentGidAndMode(p, c, mode, false);
        long ino = r.getIno() != 0 ? checkClientIno(r.getIno()) : MdsSchema.allocateIno(txn);
        InodeRecord.Builder b = InodeRecord.newBuilder().setMode(type | mode[0]).setUid(c.getUid()).setGid(gid)
                .setNlink(1).setAtimeNs(now).setMtimeNs(now).setCtimeNs(now).setXattrCount(0);
        if (type == S_IFREG) {
            b.setLayout(resolveLayout(p.hasLayout() ? p.getLayout() : DEFAULT_LAYOUT, ino));
        } else if (type == S_IFCHR || type == S_IFBLK) {
            b.setRdev(r.getRdev());
        }
        InodeRecord rec = b.build();
        putInode(ino, rec);
        MdsSchema.putDentry(txn, r.getParent(), name, epoch, DentryRecord.newBuilder().setIno(ino).setType(type).build());
        touchDir(r.getParent(), now, 0);
        addUsage(0, 1);
        return new CreateResult(attr(ino, rec), true);
    }

    /**
     * Checks an inode number a client chose for a deferred create: one the MDS handed out
     * ({@link #allocInodes}, below the next number) that names no live inode; returns it.
     *
     * @throws FsException EINVAL otherwise
     */
    private long checkClientIno(long ino) {
        if (Long.compareUnsigned(ino, ROOT) <= 0 || Long.compareUnsigned(ino, MdsSchema.nextIno(txn)) >= 0) {
            throw err(Status.EINVAL, "inode number " + Long.toUnsignedString(ino) + " was not allocated");
        }
        if (MdsSchema.getInode(txn, ino, epoch) != null) {
            throw err(Status.EINVAL, "inode number " + Long.toUnsignedString(ino) + " is in use");
        }
        return ino;
    }

    /**
     * Reserves {@code count} inode numbers (1..65536) for a client's deferred creates, which name
     * one of them each in their {@code CreateRequest.ino}; returns the first. Numbers a client
     * never uses stay unused (the space is 64-bit).
     *
     * @throws FsException EINVAL (count), EROFS (a snapshot)
     */
    public long allocInodes(int count) {
        requireWritable();
        if (count < 1 || count > 65536) {
            throw err(Status.EINVAL, "inode count " + Integer.toUnsignedString(count) + " is not in 1..65536");
        }
        return MdsSchema.allocateInos(txn, count);
    }

    /**
     * Creates a directory (mkdir(2)): nlink 2, the parent's nlink + 1, the parent's default
     * layout copied; in a setgid directory the gid and the setgid bit are inherited.
     *
     * @throws FsException EEXIST, ENOENT, ENOTDIR, EACCES, ENAMETOOLONG, EINVAL, EMLINK
     */
    public Attr mkdir(Caller c, long parent, byte[] name, int modeBits, long now) {
        InodeRecord p = newEntryParent(c, parent, name);
        if (dentry(parent, name) != null) {
            throw err(Status.EEXIST, "'" + show(name) + "' exists");
        }
        checkWritableParent(c, p, parent);
        if (Integer.toUnsignedLong(p.getNlink()) >= 0xFFFF_FFF0L) {
            throw err(Status.EMLINK, "too many subdirectories");
        }
        int[] mode = {modeBits & 01777};
        int gid = (int) parentGidAndMode(p, c, mode, true);
        long ino = MdsSchema.allocateIno(txn);
        InodeRecord rec = InodeRecord.newBuilder().setMode(S_IFDIR | mode[0]).setUid(c.getUid()).setGid(gid)
                .setNlink(2).setAtimeNs(now).setMtimeNs(now).setCtimeNs(now).setXattrCount(0)
                .setLayout(p.hasLayout() ? p.getLayout() : DEFAULT_LAYOUT).setParent(parent).build();
        putInode(ino, rec);
        MdsSchema.putDentry(txn, parent, name, epoch, DentryRecord.newBuilder().setIno(ino).setType(S_IFDIR).build());
        touchDir(parent, now, 1);
        addUsage(0, 1);
        return attr(ino, rec);
    }

    /**
     * Creates a symbolic link (symlink(2)), mode 0777, size = target length.
     *
     * @throws FsException EEXIST, ENOENT (empty target), ENAMETOOLONG (name, or target > 4095 bytes),
     *     EINVAL (NUL in target), EACCES, ENOTDIR
     */
    public Attr symlink(Caller c, long parent, byte[] name, byte[] target, long now) {
        InodeRecord p = newEntryParent(c, parent, name);
        if (target.length == 0) {
            throw err(Status.ENOENT, "empty symlink target");
        }
        if (target.length > SYMLINK_MAX) {
            throw err(Status.ENAMETOOLONG, "symlink target of " + target.length + " bytes exceeds " + SYMLINK_MAX);
        }
        for (byte b : target) {
            if (b == 0) {
                throw err(Status.EINVAL, "symlink target contains NUL");
            }
        }
        if (dentry(parent, name) != null) {
            throw err(Status.EEXIST, "'" + show(name) + "' exists");
        }
        checkWritableParent(c, p, parent);
        int[] mode = {0777};
        int gid = (int) parentGidAndMode(p, c, mode, false);
        long ino = MdsSchema.allocateIno(txn);
        InodeRecord rec = InodeRecord.newBuilder().setMode(S_IFLNK | 0777).setUid(c.getUid()).setGid(gid)
                .setNlink(1).setSize(target.length).setAtimeNs(now).setMtimeNs(now).setCtimeNs(now).setXattrCount(0)
                .setSymlinkTarget(ByteString.copyFrom(target)).build();
        putInode(ino, rec);
        MdsSchema.putDentry(txn, parent, name, epoch, DentryRecord.newBuilder().setIno(ino).setType(S_IFLNK).build());
        touchDir(parent, now, 0);
        addUsage(0, 1);
        return attr(ino, rec);
    }

    /**
     * Creates a hard link {@code newParent/newName} to {@code ino} (link(2)): nlink + 1, ctime.
     *
     * @throws FsException EPERM (directory), EEXIST, EMLINK, ENOENT, ENOTDIR, EACCES, ENAMETOOLONG
     */
    public Attr link(Caller c, long ino, long newParent, byte[] newName, long now) {
        InodeRecord p = newEntryParent(c, newParent, newName);
        InodeRecord r = inode(ino);
        if (isDir(r.getMode())) {
            throw err(Status.EPERM, "hard link to a directory");
        }
        if (dentry(newParent, newName) != null) {
            throw err(Status.EEXIST, "'" + show(newName) + "' exists");
        }
        checkWritableParent(c, p, newParent);
        if (r.getNlink() >= LINK_MAX) {
            throw err(Status.EMLINK, "inode has " + LINK_MAX + " links");
        }
        InodeRecord rec = r.toBuilder().setNlink(r.getNlink() + 1).setCtimeNs(ctimeAfter(r.getCtimeNs(), now)).build();
        putInode(ino, rec);
        MdsSchema.putDentry(txn, newParent, newName, epoch,
                DentryRecord.newBuilder().setIno(ino).setType(r.getMode() & S_IFMT).build());
        touchDir(newParent, now, 0);
        return attr(ino, rec);
    }

    // =============================================================================== remove

    /**
     * Removes a non-directory entry (unlink(2)); the last link deletes the inode and sends its
     * blocks to the GC queue. Returns the removed inode's attributes after the call ({@link #removedAttr}).
     *
     * @throws FsException ENOENT, EISDIR (a directory, or "." / ".."), ENOTDIR, EACCES, EPERM (sticky)
     */
    public Attr unlink(Caller c, long parent, byte[] name, long now) {
        return unlink(c, parent, name, 0, now);
    }

    /**
     * {@link #unlink(Caller, long, byte[], long)} that removes the entry only if it names inode
     * {@code expectIno} ({@code 0}: any): ENOENT when it names another (a deferred unlink must not
     * remove a file that replaced the one its caller saw).
     */
    public Attr unlink(Caller c, long parent, byte[] name, long expectIno, long now) {
        requireWritable();
        InodeRecord p = dir(parent);
        checkNameSyntax(name);
        if (isDot(name) || isDotDot(name)) {
            throw err(Status.EISDIR, "cannot unlink '" + show(name) + "'");
        }
        access(c, p, W | X, "write directory " + Long.toUnsignedString(parent));
        DentryRecord d = dentry(parent, name);
        if (d == null) {
            throw err(Status.ENOENT, "no entry '" + show(name) + "'");
        }
        if (expectIno != 0 && d.getIno() != expectIno) {
            throw err(Status.ENOENT, "'" + show(name) + "' now names inode " + Long.toUnsignedString(d.getIno())
                    + ", not " + Long.toUnsignedString(expectIno));
        }
        InodeRecord victim = inode(d.getIno());
        if (isDir(victim.getMode())) {
            throw err(Status.EISDIR, "'" + show(name) + "' is a directory");
        }
        checkSticky(c, p, victim, name);
        MdsSchema.deleteDentry(txn, parent, name, epoch);
        dropLink(d.getIno(), now);
        touchDir(parent, now, 0);
        return removedAttr(d.getIno());
    }

    /**
     * The attributes of inode {@code ino} after an unlink or rmdir removed one of its names: its
     * new ones (nlink, ctime) while it still has a name, else only its number with nlink 0. A
     * client replaces what it cached of the inode with them, which it can do even when it never
     * cached the removed name (other names of a hard-linked file show the new nlink at once).
     */
    private Attr removedAttr(long ino) {
        InodeRecord left = findInode(ino);
        return left != null && left.getNlink() > 0 && !isDir(left.getMode())
                ? attr(ino, left) : Attr.newBuilder().setIno(ino).setNlink(0).build();
    }

    /**
     * Removes an empty directory (rmdir(2)); the parent's nlink - 1.
     *
     * @throws FsException ENOENT, ENOTDIR, ENOTEMPTY (also for ".."), EINVAL ("."), EBUSY (root),
     *     EACCES, EPERM (sticky)
     * @return the removed directory's number, with nlink 0 ({@link #removedAttr})
     */
    public Attr rmdir(Caller c, long parent, byte[] name, long now) {
        requireWritable();
        InodeRecord p = dir(parent);
        checkNameSyntax(name);
        if (isDot(name)) {
            throw err(Status.EINVAL, "cannot remove '.'");
        }
        if (isDotDot(name)) {
            throw err(Status.ENOTEMPTY, "cannot remove '..'");
        }
        access(c, p, W | X, "write directory " + Long.toUnsignedString(parent));
        DentryRecord d = dentry(parent, name);
        if (d == null) {
            throw err(Status.ENOENT, "no entry '" + show(name) + "'");
        }
        InodeRecord victim = inode(d.getIno());
        if (!isDir(victim.getMode())) {
            throw err(Status.ENOTDIR, "'" + show(name) + "' is not a directory");
        }
        if (d.getIno() == ROOT) {
            throw err(Status.EBUSY, "cannot remove the root directory");
        }
        checkSticky(c, p, victim, name);
        if (!isEmptyDir(d.getIno())) {
            throw err(Status.ENOTEMPTY, "directory '" + show(name) + "' is not empty");
        }
        MdsSchema.deleteDentry(txn, parent, name, epoch);
        destroyInode(d.getIno(), victim, now);
        MdsSchema.deleteDirLease(txn, d.getIno());
        touchDir(parent, now, -1);
        return removedAttr(d.getIno());
    }

    // =============================================================================== rename

    /**
     * Atomic rename (Linux renameat2(2)): replaces a non-directory by a non-directory or an empty
     * directory by a directory; RENAME_NOREPLACE fails with EEXIST if the target exists;
     * RENAME_EXCHANGE swaps two entries. Renaming onto a link of the same inode does nothing.
     * Updates mtime/ctime of both parents, ctime of the moved (and replaced) inode, the ".."
     * parent link and nlink of directories moved between parents. Returns the moved (and
     * replaced) inodes' new attributes ({@link Renamed}).
     *
     * @throws FsException ENOENT, ENOTDIR, EISDIR, ENOTEMPTY, EINVAL (bad flags, or a directory
     *     into its own subtree), EEXIST (NOREPLACE), EBUSY ("." or ".."), EACCES, EPERM (sticky)
     */
    public Renamed rename(Caller c, RenameRequest r, long now) {
        requireWritable();
        int flags = r.getFlags();
        if ((flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) != 0 || flags == (RENAME_NOREPLACE | RENAME_EXCHANGE)) {
            throw err(Status.EINVAL, "bad rename flags " + flags);
        }
        boolean noReplace = (flags & RENAME_NOREPLACE) != 0;
        boolean exchange = (flags & RENAME_EXCHANGE) != 0;
        long sp = r.getSrcParent(), dp = r.getDstParent();
        byte[] sn = r.getSrcName().toByteArray(), dn = r.getDstName().toByteArray();
        InodeRecord spRec = dir(sp);
        InodeRecord dpRec = dir(dp);
        checkNameSyntax(sn);
        checkNameSyntax(dn);
        if (isDot(sn) || isDotDot(sn)) {
            throw err(Status.EBUSY, "cannot rename '" + show(sn) + "'");
        }
        if (isDot(dn) || isDotDot(dn)) {
            throw err(noReplace ? Status.EEXIST : Status.EBUSY, "cannot rename onto '" + show(dn) + "'");
        }
        access(c, spRec, W | X, "write directory " + Long.toUnsignedString(sp));
        access(c, dpRec, W | X, "write directory " + Long.toUnsignedString(dp));
        DentryRecord se = dentry(sp, sn);
        if (se == null) {
            throw err(Status.ENOENT, "no entry '" + show(sn) + "'");
        }
        DentryRecord de = dentry(dp, dn);
        if (exchange && de == null) {
            throw err(Status.ENOENT, "no entry '" + show(dn) + "' to exchange with");
        }
        if (de != null && noReplace) {
            throw err(Status.EEXIST, "'" + show(dn) + "' exists");
        }
        if (de != null && de.getIno() == se.getIno()) {
            return new Renamed(getattr(c, se.getIno()), null); // rename(2): links to the same inode: do nothing
        }
        InodeRecord src = inode(se.getIno());
        InodeRecord dst = de == null ? null : inode(de.getIno());
        boolean srcDir = isDir(src.getMode());
        boolean dstDir = dst != null && isDir(dst.getMode());
        if (srcDir && sp != dp && isSelfOrAncestor(se.getIno(), dp)) {
            throw err(Status.EINVAL, "cannot move a directory into its own subtree");
        }
        if (exchange && dstDir && sp != dp && isSelfOrAncestor(de.getIno(), sp)) {
            throw err(Status.EINVAL, "cannot move a directory into its own subtree");
        }
        if (dst != null && !exchange) {
            if (srcDir && !dstDir) {
                throw err(Status.ENOTDIR, "'" + show(dn) + "' is not a directory");
            }
            if (!srcDir && dstDir) {
                throw err(Status.EISDIR, "'" + show(dn) + "' is a directory");
            }
            if (dstDir && !isEmptyDir(de.getIno())) {
                throw err(Status.ENOTEMPTY, "directory '" + show(dn) + "' is not empty");
            }
        }
        checkSticky(c, spRec, src, sn);
        if (dst != null) {
            checkSticky(c, dpRec, dst, dn);
        }
        if (sp != dp) {
            // Moving a directory rewrites its ".." entry: write permission on it (Linux vfs_rename).
            if (srcDir) {
                access(c, src, W, "write moved directory '" + show(sn) + "'");
            }
            if (exchange && dstDir) {
                access(c, dst, W, "write moved directory '" + show(dn) + "'");
            }
        }

        if (exchange) {
            MdsSchema.putDentry(txn, sp, sn, epoch, de);
            MdsSchema.putDentry(txn, dp, dn, epoch, se);
            int spDelta = 0, dpDelta = 0;
            if (sp != dp) {
                if (srcDir) {
                    spDelta--;
                    dpDelta++;
                }
                if (dstDir) {
                    dpDelta--;
                    spDelta++;
                }
            }
            long newSrcParent = dp, newDstParent = sp;
            update(se.getIno(), b -> srcDir ? b.setCtimeNs(ctimeAfter(b.getCtimeNs(), now)).setParent(newSrcParent) : b.setCtimeNs(ctimeAfter(b.getCtimeNs(), now)));
            update(de.getIno(), b -> dstDir ? b.setCtimeNs(ctimeAfter(b.getCtimeNs(), now)).setParent(newDstParent) : b.setCtimeNs(ctimeAfter(b.getCtimeNs(), now)));
            touchDir(sp, now, spDelta);
            if (dp != sp) {
                touchDir(dp, now, dpDelta);
            }
            return new Renamed(getattr(c, se.getIno()), getattr(c, de.getIno()));
        }

        int spDelta = 0, dpDelta = 0;
        if (dst != null) {
            if (dstDir) {
                MdsSchema.deleteDentry(txn, dp, dn, epoch); // rewritten below; keeps the order clear
                destroyInode(de.getIno(), dst, now);
                dpDelta--;
            } else {
                dropLink(de.getIno(), now);
            }
        }
        MdsSchema.deleteDentry(txn, sp, sn, epoch);
        MdsSchema.putDentry(txn, dp, dn, epoch, se);
        if (srcDir && sp != dp) {
            spDelta--;
            dpDelta++;
        }
        update(se.getIno(), b -> srcDir ? b.setCtimeNs(ctimeAfter(b.getCtimeNs(), now)).setParent(dp) : b.setCtimeNs(ctimeAfter(b.getCtimeNs(), now)));
        if (sp == dp) {
            touchDir(sp, now, spDelta + dpDelta);
        } else {
            touchDir(sp, now, spDelta);
            touchDir(dp, now, dpDelta);
        }
        InodeRecord left = dst == null || dstDir ? null : findInode(de.getIno());
        return new Renamed(getattr(c, se.getIno()), left == null ? null : attr(de.getIno(), left));
    }

    /**
     * What a rename changed besides the directories: the renamed inode's new attributes, and those
     * of the inode it exchanged with or replaced while that one still has a name (else null).
     * Clients cache both, so an entry read before the rename cannot bring back old ones.
     */
    public record Renamed(Attr moved, Attr replaced) {}

    // =============================================================================== setattr

    /**
     * chmod / chown / truncate / utimens in one operation (the SETATTR_* bits of {@code valid}).
     * <ul>
     * <li>mode: owner or root (EPERM); only the permission, suid, sgid and sticky bits change; a
     *     non-root caller outside the file's group loses S_ISGID (Linux setattr_copy).</li>
     * <li>uid: root only (EPERM); gid: root, or the owner to one of its groups (EPERM). On a
     *     non-directory chown clears S_ISUID, and S_ISGID when group-exec is set (Linux, for root
     *     too since 2.2.13, chown(2)).</li>
     * <li>size: regular files only (EISDIR for directories, EINVAL otherwise), write permission
     *     (EACCES); truncating down drops the extents past the new end (blocks to the GC queue)
     *     and clips the partial stripe's extent; a size change also sets mtime.</li>
     * <li>times: explicit values need owner or root (EPERM); *_NOW alone needs owner or write
     *     permission (EACCES), as utimensat(2).</li>
     * </ul>
     * ctime is set to {@code now}.
     *
     * @throws FsException ENOENT, EPERM, EACCES, EISDIR, EINVAL, EFBIG
     */
    public Attr setattr(Caller c, SetAttrRequest r, long now) {
        requireWritable();
        long ino = r.getIno();
        int v = r.getValid();
        if ((v & ~0xFF) != 0) {
            throw err(Status.EINVAL, "unknown setattr bits 0x" + Integer.toHexString(v));
        }
        InodeRecord cur = inode(ino);
        InodeRecord.Builder b = cur.toBuilder();
        if ((v & SETATTR_MODE) != 0) {
            if (!isOwner(c, cur)) {
                throw err(Status.EPERM, "chmod by a non-owner");
            }
            int m = r.getMode() & 07777;
            if (c.getUid() != 0 && !inGroup(c, cur.getGid())) {
                m &= ~S_ISGID;
            }
            b.setMode((cur.getMode() & S_IFMT) | m);
        }
        if ((v & (SETATTR_UID | SETATTR_GID)) != 0) {
            int newUid = (v & SETATTR_UID) != 0 ? r.getUid() : cur.getUid();
            int newGid = (v & SETATTR_GID) != 0 ? r.getGid() : cur.getGid();
            if (c.getUid() != 0) {
                if ((v & SETATTR_UID) != 0 && (newUid != cur.getUid() || c.getUid() != cur.getUid())) {
                    throw err(Status.EPERM, "only root changes the owner");
                }
                if ((v & SETATTR_GID) != 0 && (c.getUid() != cur.getUid()
                        || (newGid != cur.getGid() && !inGroup(c, newGid)))) {
                    throw err(Status.EPERM, "chgrp needs ownership and membership of group " + Integer.toUnsignedString(newGid));
                }
            }
            b.setUid(newUid).setGid(newGid);
            if (!isDir(cur.getMode())) {
                int m = b.getMode() & ~S_ISUID;
                if ((m & (S_ISGID | 0010)) == (S_ISGID | 0010)) {
                    m &= ~S_ISGID;
                }
                b.setMode(m);
            }
        }
        if ((v & SETATTR_SIZE) != 0) {
            if (isDir(cur.getMode())) {
                throw err(Status.EISDIR, "cannot truncate a directory");
            }
            if (!isReg(cur.getMode())) {
                throw err(Status.EINVAL, "truncate of a non-regular file");
            }
            if (!permitted(c, cur, W)) {
                throw err(Status.EACCES, "truncate needs write permission");
            }
            long size = r.getSize();
            if (size < 0) {
                throw err(Status.EFBIG, "size " + Long.toUnsignedString(size) + " exceeds the largest file size");
            }
            if (size != cur.getSize()) {
                truncate(ino, b, size, now);
                b.setMtimeNs(now);
            }
        }
        boolean setA = (v & (SETATTR_ATIME | SETATTR_ATIME_NOW)) != 0;
        boolean setM = (v & (SETATTR_MTIME | SETATTR_MTIME_NOW)) != 0;
        if (setA || setM) {
            boolean explicit = (setA && (v & SETATTR_ATIME_NOW) == 0) || (setM && (v & SETATTR_MTIME_NOW) == 0);
            if (explicit && !isOwner(c, cur)) {
                throw err(Status.EPERM, "setting explicit times needs ownership");
            }
            if (!explicit && !isOwner(c, cur) && !permitted(c, cur, W)) {
                throw err(Status.EACCES, "setting times to now needs ownership or write permission");
            }
            if (setA) {
                b.setAtimeNs((v & SETATTR_ATIME_NOW) != 0 ? now : r.getAtimeNs());
            }
            if (setM) {
                b.setMtimeNs((v & SETATTR_MTIME_NOW) != 0 ? now : r.getMtimeNs());
            }
        }
        b.setCtimeNs(ctimeAfter(cur.getCtimeNs(), now));
        InodeRecord rec = b.build();
        putInode(ino, rec);
        return attr(ino, rec);
    }

    /** Changes the size of regular file {@code ino} (record in {@code b}) to {@code size}. */
    private void truncate(long ino, InodeRecord.Builder b, long size, long now) {
        long old = b.getSize();
        long ss = b.getLayout().getStripeSize();
        if (Long.compareUnsigned(size, old) < 0 && ss > 0) {
            long keep = size / ss + (size % ss != 0 ? 1 : 0); // stripes [0, keep) keep data
            List<Extent> dropped = new ArrayList<>();
            MdsSchema.scanExtents(txn, ino, keep, -1L, epoch, e -> dropped.add(e));
            for (Extent e : dropped) {
                freeBlock(ino, e, now);
                MdsSchema.deleteExtent(txn, ino, e.getStripeIndex(), epoch);
            }
            long tail = size % ss;
            if (tail != 0) {
                Extent partial = MdsSchema.getExtent(txn, ino, size / ss, epoch);
                if (partial != null && partial.getLength() > tail) {
                    // Same block, fewer valid bytes: the block stays referenced, keeps its birth epoch.
                    // Inline data is cut too, so a later truncate up reads zeros (POSIX truncate).
                    Extent.Builder cut = partial.toBuilder().setLength(tail);
                    if (!partial.getInlineData().isEmpty()) {
                        cut.setInlineData(partial.getInlineData().substring(0, (int) tail));
                    }
                    MdsSchema.putExtent(txn, ino, epoch, cut.build());
                }
            }
        }
        addUsage(size - old, 0);
        b.setSize(size);
    }

    // =============================================================================== xattrs

    private enum XattrNs { USER, TRUSTED, SECURITY, SYSTEM }

    private static XattrNs checkXattrName(byte[] name) {
        if (name.length == 0 || name.length > NAME_MAX) {
            throw err(Status.ERANGE, "xattr name of " + name.length + " bytes (1.." + NAME_MAX + ")");
        }
        for (byte b : name) {
            if (b == 0) {
                throw err(Status.EINVAL, "xattr name contains NUL");
            }
        }
        String s = new String(name, StandardCharsets.ISO_8859_1);
        XattrNs ns;
        if (s.startsWith("user.")) {
            ns = XattrNs.USER;
        } else if (s.startsWith("trusted.")) {
            ns = XattrNs.TRUSTED;
        } else if (s.startsWith("security.")) {
            ns = XattrNs.SECURITY;
        } else if (s.startsWith("system.")) {
            ns = XattrNs.SYSTEM;
        } else {
            throw err(Status.ENOTSUP, "xattr namespace of '" + show(name) + "' is not supported");
        }
        int dot = s.indexOf('.');
        if (dot == s.length() - 1) {
            throw err(Status.EINVAL, "xattr name without a suffix: '" + show(name) + "'");
        }
        return ns;
    }

    /** Linux xattr_permission for writes. */
    private static void checkXattrWrite(Caller c, InodeRecord r, XattrNs ns) {
        switch (ns) {
            case SYSTEM -> throw err(Status.ENOTSUP, "system.* xattrs (POSIX ACLs) are not supported");
            case TRUSTED, SECURITY -> {
                if (c.getUid() != 0) {
                    throw err(Status.EPERM, "only root writes trusted.* and security.* xattrs");
                }
            }
            case USER -> {
                if (!isReg(r.getMode()) && !isDir(r.getMode())) {
                    throw err(Status.EPERM, "user.* xattrs only on regular files and directories");
                }
                if (isDir(r.getMode()) && (r.getMode() & S_ISVTX) != 0 && !isOwner(c, r)) {
                    throw err(Status.EPERM, "user.* xattrs of a sticky directory: owner only");
                }
                access(c, r, W, "write xattr");
            }
        }
    }

    /**
     * Sets xattr {@code name} (setxattr(2)); ctime = now.
     *
     * @throws FsException EEXIST (XATTR_CREATE and present), ENODATA (XATTR_REPLACE and absent),
     *     E2BIG (value over 64 KiB), ERANGE (name empty or over 255 bytes), ENOTSUP (namespace),
     *     EPERM, EACCES, EINVAL (flags), ENOENT
     */
    public void setxattr(Caller c, long ino, byte[] name, byte[] value, int flags, long now) {
        requireWritable();
        InodeRecord r = inode(ino);
        if ((flags & ~(XATTR_CREATE | XATTR_REPLACE)) != 0 || flags == (XATTR_CREATE | XATTR_REPLACE)) {
            throw err(Status.EINVAL, "bad xattr flags " + flags);
        }
        XattrNs ns = checkXattrName(name);
        if (value.length > XATTR_SIZE_MAX) {
            throw err(Status.E2BIG, "xattr value of " + value.length + " bytes exceeds " + XATTR_SIZE_MAX);
        }
        checkXattrWrite(c, r, ns);
        boolean exists = MdsSchema.getXattr(txn, ino, name, epoch) != null;
        if (exists && (flags & XATTR_CREATE) != 0) {
            throw err(Status.EEXIST, "xattr '" + show(name) + "' exists");
        }
        if (!exists && (flags & XATTR_REPLACE) != 0) {
            throw err(Status.ENODATA, "no xattr '" + show(name) + "'");
        }
        MdsSchema.putXattr(txn, ino, name, epoch, value);
        InodeRecord.Builder b = r.toBuilder().setCtimeNs(ctimeAfter(r.getCtimeNs(), now));
        if (!exists && r.hasXattrCount()) {
            b.setXattrCount(r.getXattrCount() + 1);
        }
        putInode(ino, b.build());
    }

    /**
     * Value of xattr {@code name} (getxattr(2)). The caller's buffer size (ERANGE) is the client's
     * business: the whole value is returned.
     *
     * @throws FsException ENODATA (absent; also trusted.* for non-root, system.*), ERANGE (bad name),
     *     ENOTSUP, EACCES (user.* without read permission), ENOENT
     */
    public byte[] getxattr(Caller c, long ino, byte[] name) {
        InodeRecord r = inode(ino);
        XattrNs ns = checkXattrName(name);
        if (ns == XattrNs.TRUSTED && c.getUid() != 0 || ns == XattrNs.SYSTEM) {
            throw err(Status.ENODATA, "no xattr '" + show(name) + "'");
        }
        if (ns == XattrNs.USER) {
            if (!isReg(r.getMode()) && !isDir(r.getMode())) {
                throw err(Status.ENODATA, "no xattr '" + show(name) + "'");
            }
            access(c, r, R, "read xattr");
        }
        byte[] v = MdsSchema.getXattr(txn, ino, name, epoch);
        if (v == null) {
            throw err(Status.ENODATA, "no xattr '" + show(name) + "'");
        }
        return v;
    }

    /** Names of the xattrs of {@code ino} in byte order (listxattr(2)); trusted.* hidden from non-root. @throws FsException ENOENT */
    public List<ByteString> listxattr(Caller c, long ino) {
        inode(ino);
        List<ByteString> out = new ArrayList<>();
        byte[] trusted = "trusted.".getBytes(StandardCharsets.US_ASCII);
        MdsSchema.scanXattrs(txn, ino, epoch, (n, v) -> {
            ByteString bs = ByteString.copyFrom(n);
            if (c.getUid() == 0 || !bs.startsWith(ByteString.copyFrom(trusted))) {
                out.add(bs);
            }
            return true;
        });
        return out;
    }

    /** Removes xattr {@code name} (removexattr(2)); ctime = now. @throws FsException ENODATA, ERANGE, ENOTSUP, EPERM, EACCES, ENOENT */
    public void removexattr(Caller c, long ino, byte[] name, long now) {
        requireWritable();
        InodeRecord r = inode(ino);
        XattrNs ns = checkXattrName(name);
        checkXattrWrite(c, r, ns);
        if (MdsSchema.getXattr(txn, ino, name, epoch) == null) {
            throw err(Status.ENODATA, "no xattr '" + show(name) + "'");
        }
        MdsSchema.deleteXattr(txn, ino, name, epoch);
        InodeRecord.Builder b = r.toBuilder().setCtimeNs(ctimeAfter(r.getCtimeNs(), now));
        if (r.hasXattrCount()) {
            b.setXattrCount(Math.max(0, r.getXattrCount() - 1));
        }
        putInode(ino, b.build());
    }

    // =============================================================================== layouts

    /**
     * Validates a requested layout and normalizes it into a template: stripe_size > 0, a multiple
     * of 64 KiB and at most 64 MiB ({@link #MAX_STRIPE_SIZE}); stripe_count 0 or -1 (0xFFFFFFFF) = all OSTs, else 1..#OSTs;
     * explicit OST indices: registered, distinct, as many as stripe_count. Stored count 0 = all.
     */
    private Layout validateLayout(Layout l) {
        long ss = l.getStripeSize();
        if (ss <= 0 || ss % STRIPE_ALIGN != 0 || ss > MAX_STRIPE_SIZE) {
            throw err(Status.EINVAL, "stripe_size " + Long.toUnsignedString(ss)
                    + " must be a positive multiple of 64 KiB up to 64 MiB");
        }
        Set<Integer> registered = new HashSet<>();
        for (OstInfo o : MdsSchema.listOsts(txn)) {
            registered.add(o.getIndex());
        }
        int count = l.getStripeCount();
        boolean all = count == 0 || count == -1;
        if (l.getOstsCount() > 0) {
            if (!all && count != l.getOstsCount()) {
                throw err(Status.EINVAL, "stripe_count " + count + " but " + l.getOstsCount() + " OSTs listed");
            }
            Set<Integer> seen = new HashSet<>();
            for (int o : l.getOstsList()) {
                if (!registered.contains(o)) {
                    throw err(Status.EINVAL, "OST " + Integer.toUnsignedString(o) + " is not registered");
                }
                if (!seen.add(o)) {
                    throw err(Status.EINVAL, "OST " + Integer.toUnsignedString(o) + " listed twice");
                }
            }
            return Layout.newBuilder().setStripeSize(ss).setStripeCount(l.getOstsCount()).addAllOsts(l.getOstsList()).build();
        }
        if (!all && (count < 1 || count > registered.size())) {
            throw err(Status.EINVAL, "stripe_count " + Integer.toUnsignedString(count) + " not in 1.."
                    + registered.size() + " (registered OSTs)");
        }
        return Layout.newBuilder().setStripeSize(ss).setStripeCount(all ? 0 : count).build();
    }

    /**
     * Resolves a layout template for new file {@code ino}: an explicit OST list is kept; otherwise
     * stripe_count OSTs (0: all registered) are taken in index order starting at position
     * {@code ino mod #OSTs}, so files spread over the OSTs. With no OST registered the layout
     * keeps stripe_count 0 and no OSTs (set one later with {@link #setLayout}).
     */
    private Layout resolveLayout(Layout template, long ino) {
        if (template.getOstsCount() > 0) {
            return template;
        }
        List<Integer> indices = new ArrayList<>();
        for (OstInfo o : MdsSchema.listOsts(txn)) {
            indices.add(o.getIndex());
        }
        return dev.granary.mds.Layouts.resolve(template, ino, indices);
    }

    /**
     * Sets the layout of a directory (the default for files created in it, and copied by new
     * subdirectories) or of a regular file without extents (resolved now, like a new file).
     * Owner or root only. Returns the stored layout (a directory's template keeps count 0 = all).
     *
     * @throws FsException EINVAL (bad layout, or not a directory/regular file), EBUSY (file has
     *     extents), EPERM (not the owner), ENOENT
     */
    public Layout setLayout(Caller c, long ino, Layout layout, long now) {
        requireWritable();
        InodeRecord r = inode(ino);
        if (!isOwner(c, r)) {
            throw err(Status.EPERM, "only the owner sets a layout");
        }
        Layout template = validateLayout(layout);
        Layout stored;
        if (isDir(r.getMode())) {
            stored = template;
        } else if (isReg(r.getMode())) {
            boolean[] any = {false};
            MdsSchema.scanExtents(txn, ino, 0, -1L, epoch, e -> {
                any[0] = true;
                return false;
            });
            if (any[0]) {
                throw err(Status.EBUSY, "file has data: its layout is fixed");
            }
            stored = resolveLayout(template, ino);
        } else {
            throw err(Status.EINVAL, "layouts apply to directories and regular files");
        }
        putInode(ino, r.toBuilder().setLayout(stored).setCtimeNs(ctimeAfter(r.getCtimeNs(), now)).build());
        return stored;
    }

    // =============================================================================== packs

    /**
     * Makes this namespace apply one commit of the commit_pack of block {@code blockKey} on OST
     * {@code ost} ({@code length} bytes): only then may a commit carry packed extents, and only of
     * that pack (mds.proto CommitPackRequest).
     */
    public void inPack(int ost, String blockKey, long length) {
        this.packOst = ost;
        this.packKey = blockKey;
        this.packLength = length;
    }

    /** How many extents the commits applied here made refer to the pack of {@link #inPack} anew. */
    public long packRefsAdded() {
        return packRefsAdded;
    }

    /**
     * Whether a pack record exists for block {@code blockKey} of OST {@code ost}: a commit_pack of
     * a block already committed as a pack is refused whole (EINVAL), since a pack's count must never
     * rise after its one commit_pack.
     */
    public boolean packExists(int ost, String blockKey) {
        return MdsSchema.getPack(txn, ost, blockKey) != null;
    }

    /**
     * Ends the commit_pack of block {@code blockKey} on OST {@code ost} ({@code length} bytes) whose
     * commits made {@code refs} extents refer to it: records the count, or, when none did (every
     * commit failed, say the files were removed meanwhile), queues the block for deletion at once.
     * {@code firstIno}: the first file's inode number, for diagnostics.
     */
    public void finishPack(int ost, String blockKey, long length, long refs, long firstIno, long now) {
        requireWritable();
        if (refs > 0) {
            MdsSchema.putPack(txn, ost, blockKey, PackRecord.newBuilder().setRefs(refs).setLength(length).setIno(firstIno).build());
        } else {
            MdsSchema.appendGc(txn, GcRecord.newBuilder().setOst(ost).setBlockKey(blockKey).setBirthEpoch(epoch)
                    .setDeathEpoch(epoch).setIno(firstIno).setStripeIndex(0).setDeathTimeNs(now).build());
        }
    }

    /** The number of extents referring to pack {@code blockKey} of OST {@code ost}, 0 when it has no record (tests). */
    public long packRefs(int ost, String blockKey) {
        PackRecord p = MdsSchema.getPack(txn, ost, blockKey);
        return p == null ? 0 : p.getRefs();
    }

    /** A packed extent is valid only inside the commit_pack of its pack, as stripe 0 within the block. */
    private void checkPacked(Extent e) {
        if (packKey == null) {
            throw err(Status.EINVAL, "a packed extent outside the commit_pack of its pack");
        }
        if (!e.getInlineData().isEmpty() || e.getStripeIndex() != 0 || e.getOst() != packOst || !e.getBlockKey().equals(packKey)) {
            throw err(Status.EINVAL, "a packed extent must be stripe 0 of the pack being committed (OST " + packOst + ", " + packKey + ")");
        }
        if (e.getBlockOffset() < 0 || e.getBlockOffset() > packLength || e.getLength() > packLength - e.getBlockOffset()) {
            throw err(Status.EINVAL, "packed extent [" + e.getBlockOffset() + ", +" + e.getLength() + ") past the pack's " + packLength + " bytes");
        }
    }

    // =============================================================================== extents

    /**
     * Commits extents written since open (one Raft operation): each replaces the extent of its
     * stripe at the current epoch (a replaced block goes to the GC queue unless it is the same
     * block), with birth_epoch = the current epoch; size = max(size, newSize); mtime = mtimeNs
     * (0: now); ctime = now. A non-root writer clears S_ISUID, and S_ISGID with group-exec (Linux
     * file_remove_privs). No permission check (checked at open, see the class comment).
     *
     * @throws FsException ENOENT, EISDIR, EINVAL (not a regular file, no layout, length 0 or over
     *     the stripe size, OST not the layout's OST for that stripe, duplicate stripe, extent past
     *     the end of the file, inline data not valid as {@link #checkInline} says), EFBIG
     */
    public Attr commitExtents(Caller c, long ino, List<Extent> extents, long newSize, long mtimeNs, long now) {
        return commitExtents(c, ino, extents, newSize, mtimeNs, false, now);
    }

    /**
     * As above. {@code mtimeNs} is the time of the last write (0: {@code now}); the mtime becomes it
     * and ctime becomes {@code now}, unless {@code keepMtime}: utimensat set the mtime (and ctime)
     * after the last write, so both stay (a local filesystem updates them at write(2), and a later
     * utimensat wins).
     */
    public Attr commitExtents(Caller c, long ino, List<Extent> extents, long newSize, long mtimeNs, boolean keepMtime, long now) {
        return commitExtents(c, ino, extents, List.of(), newSize, mtimeNs, keepMtime, now);
    }

    /**
     * As above, applied only if each stripe of {@code bases} still has the extent the client built
     * its new block on ({@link StripeBase#getBase()}, unset: none; birth epochs aside): the block
     * keeps bytes the client did not write, so committing it over a newer extent would undo
     * another writer's bytes (mds.proto, {@code CommitExtentsRequest.bases}).
     *
     * @throws FsException EAGAIN when a stripe of {@code bases} changed (nothing is applied: the
     *     client lays its written bytes over the newer extent and commits again), and the errors above
     */
    public Attr commitExtents(Caller c, long ino, List<Extent> extents, List<StripeBase> bases, long newSize, long mtimeNs,
                              boolean keepMtime, long now) {
        requireWritable();
        InodeRecord r = inode(ino);
        if (isDir(r.getMode())) {
            throw err(Status.EISDIR, "inode " + Long.toUnsignedString(ino) + " is a directory");
        }
        if (!isReg(r.getMode())) {
            throw err(Status.EINVAL, "inode " + Long.toUnsignedString(ino) + " is not a regular file");
        }
        // before the checks of the extents: one built on a base another client shortened may end past the size
        for (StripeBase b : bases) {
            Extent cur = MdsSchema.getExtent(txn, ino, b.getStripeIndex(), epoch);
            if (!Extents.sameData(cur, b.hasBase() ? b.getBase() : null)) {
                throw err(Status.EAGAIN, "stripe " + Long.toUnsignedString(b.getStripeIndex()) + " of inode "
                        + Long.toUnsignedString(ino) + " changed since the writer read it");
            }
        }
        if (newSize < 0) {
            throw err(Status.EFBIG, "size " + Long.toUnsignedString(newSize) + " exceeds the largest file size");
        }
        long size = Math.max(r.getSize(), newSize);
        Layout l = r.getLayout();
        long ss = l.getStripeSize();
        if (!extents.isEmpty() && (ss <= 0 || l.getOstsCount() == 0)) {
            throw err(Status.EINVAL, "file has no resolved layout (no OSTs registered at create?)");
        }
        Set<Long> seen = new HashSet<>();
        for (Extent e : extents) {
            long k = e.getStripeIndex();
            if (!seen.add(k)) {
                throw err(Status.EINVAL, "stripe " + Long.toUnsignedString(k) + " committed twice");
            }
            if (e.getLength() <= 0 || e.getLength() > ss) {
                throw err(Status.EINVAL, "extent length " + Long.toUnsignedString(e.getLength()) + " not in 1.." + ss);
            }
            if (e.getPacked()) {
                checkPacked(e);
            }
            if (!e.getInlineData().isEmpty()) {
                checkInline(e, ss);
            } else {
                if (e.getBlockKey().isEmpty()) {
                    throw err(Status.EINVAL, "extent without a block key");
                }
                if (e.getBlockOffset() < 0) {
                    throw err(Status.EINVAL, "negative block offset");
                }
                int want = l.getOsts((int) Long.remainderUnsigned(k, l.getOstsCount()));
                if (e.getOst() != want) {
                    throw err(Status.EINVAL, "stripe " + Long.toUnsignedString(k) + " belongs to OST " + want + ", not " + e.getOst());
                }
            }
            if (k < 0 || k > (Long.MAX_VALUE - e.getLength()) / ss || k * ss + e.getLength() > size) {
                throw err(Status.EINVAL, "extent of stripe " + Long.toUnsignedString(k) + " ends past the file size " + size);
            }
        }
        for (Extent e : extents) {
            Extent old = MdsSchema.getExtent(txn, ino, e.getStripeIndex(), epoch);
            boolean sameBlock = old != null && old.getOst() == e.getOst() && old.getBlockKey().equals(e.getBlockKey());
            if (old != null && !sameBlock) {
                freeBlock(ino, old, now);
            }
            if (e.getPacked() && !sameBlock) {
                packRefsAdded++;
            }
            MdsSchema.putExtent(txn, ino, epoch, e.toBuilder().setBirthEpoch(epoch).build());
        }
        long writeNs = mtimeNs != 0 ? mtimeNs : now;
        InodeRecord.Builder b = r.toBuilder().setSize(size);
        if (keepMtime) {
            // utimensat after the last write already set ctime to its (later) time: keep the
            // mtime, and the ctime still moves (by 1 ns at least): a change of the data must
            // change the ctime, which clients compare to tell a map they hold is current
            // (LookupRequest.cached_ctime_ns).
            b.setCtimeNs(Math.max(r.getCtimeNs() + 1, writeNs));
        } else {
            b.setMtimeNs(dataMtime(r.getMtimeNs(), writeNs, now)).setCtimeNs(ctimeAfter(r.getCtimeNs(), now));
        }
        if (c.getUid() != 0) {
            int m = b.getMode() & ~S_ISUID;
            if ((m & (S_ISGID | 0010)) == (S_ISGID | 0010)) {
                m &= ~S_ISGID;
            }
            b.setMode(m);
        }
        addUsage(size - r.getSize(), 0);
        InodeRecord rec = b.build();
        putInode(ino, rec);
        return attr(ino, rec);
    }

    /**
     * Commits the extents of an O_APPEND write placed at {@code expectSize} (one Raft operation):
     * as {@link #commitExtents}, but only while the file still ends at {@code expectSize} and, when
     * that end lies inside a stripe, that stripe's extent is still {@code base} (null: none) —
     * the client built its block for that stripe from {@code base}'s bytes before the end. So an
     * append lands at the end of file as of its commit, and concurrent appenders (other clients,
     * other handles) never overwrite each other.
     *
     * @throws FsException EAGAIN when the file changed since the client read its end (nothing is
     *     applied: the client reads the new end and places its bytes again), EINVAL when
     *     {@code newSize} is not past {@code expectSize}, and the errors of {@link #commitExtents}
     */
    public Attr commitAppend(Caller c, long ino, List<Extent> extents, long expectSize, Extent base, long newSize,
                             long mtimeNs, boolean keepMtime, long now) {
        requireWritable();
        InodeRecord r = inode(ino);
        if (!isReg(r.getMode())) {
            throw err(isDir(r.getMode()) ? Status.EISDIR : Status.EINVAL, "inode " + Long.toUnsignedString(ino) + " is not a regular file");
        }
        if (Long.compareUnsigned(newSize, expectSize) <= 0) {
            throw err(Status.EINVAL, "append commit of size " + Long.toUnsignedString(newSize) + " not past its start "
                    + Long.toUnsignedString(expectSize));
        }
        if (r.getSize() != expectSize) {
            throw err(Status.EAGAIN, "file ends at " + Long.toUnsignedString(r.getSize()) + ", not at "
                    + Long.toUnsignedString(expectSize) + ": appended to concurrently");
        }
        long ss = r.getLayout().getStripeSize();
        if (ss > 0 && expectSize % ss != 0) {
            Extent cur = MdsSchema.getExtent(txn, ino, expectSize / ss, epoch);
            if (!Extents.sameData(cur, base)) {
                throw err(Status.EAGAIN, "stripe " + expectSize / ss + " changed since the append read it");
            }
        }
        return commitExtents(c, ino, extents, newSize, mtimeNs, keepMtime, now);
    }

    /**
     * The mtime (ns) a data commit sets: the time of its last write ({@code writeNs}), moved just
     * past the file's mtime {@code prevNs} when not later than it, unless {@code prevNs} lies in
     * the future of {@code now} (set by utimensat: a local filesystem's write sets the present).
     * So every commit of new bytes changes the mtime, even one of writes older than another
     * handle's commit (a local filesystem's mtime is its last write's time, never an earlier
     * one). Close-to-open needs it: an open keeps the kernel's cached pages of the file when size
     * and mtime are unchanged (libfuse's {@code auto_cache}), and commits that repeated an mtime
     * (a handle's flush forced by another descriptor's commit, with no write of its own since)
     * left other clients reading old pages (3-32 stale opens per 40 s of a three-mount stress).
     */
    static long dataMtime(long prevNs, long writeNs, long now) {
        if (writeNs > prevNs || (prevNs > now && writeNs != prevNs)) {
            return writeNs;
        }
        return prevNs + 1;
    }


    /**
     * Checks an inline (data on MDS) extent: stripe 0 only, no block, length equal to the inline
     * bytes, at most {@link #INLINE_MAX} bytes and within the stripe. Like Lustre's DoM component,
     * it holds the file's first bytes; later stripes of a file that grew may live in blocks.
     *
     * @throws FsException EINVAL otherwise
     */
    private static void checkInline(Extent e, long stripeSize) {
        if (e.getStripeIndex() != 0 || !e.getBlockKey().isEmpty() || e.getBlockOffset() != 0) {
            throw err(Status.EINVAL, "inline data belongs to stripe 0 and has no block");
        }
        if (e.getLength() != e.getInlineData().size()) {
            throw err(Status.EINVAL, "inline extent length " + e.getLength() + " != " + e.getInlineData().size() + " inline bytes");
        }
        if (e.getLength() > Math.min(INLINE_MAX, stripeSize)) {
            throw err(Status.EINVAL, e.getLength() + " bytes are too many for inline data (max "
                    + Math.min(INLINE_MAX, stripeSize) + ")");
        }
    }

    /**
     * Extents of regular file {@code ino} with stripe index in {@code [fromStripe, toStripe)},
     * ascending; {@code toStripe} 0 means "to the end".
     *
     * @throws FsException ENOENT, EISDIR, EINVAL (not a regular file)
     */
    public List<Extent> getExtents(Caller c, long ino, long fromStripe, long toStripe) {
        InodeRecord r = inode(ino);
        if (isDir(r.getMode())) {
            throw err(Status.EISDIR, "inode " + Long.toUnsignedString(ino) + " is a directory");
        }
        if (!isReg(r.getMode())) {
            throw err(Status.EINVAL, "inode " + Long.toUnsignedString(ino) + " is not a regular file");
        }
        List<Extent> out = new ArrayList<>();
        MdsSchema.scanExtents(txn, ino, fromStripe, toStripe == 0 ? -1L : toStripe, epoch, out::add);
        return out;
    }

    // =============================================================================== locks

    /** Shortest and longest session lease a client may ask for. */
    public static final long MIN_LEASE_NS = 1_000_000_000L, MAX_LEASE_NS = 600_000_000_000L;

    /** What a lock request did: the conflicting lock (null: none) and whether the session had expired. */
    public record LockOutcome(LockInfo conflict, boolean leaseExpired) {}

    /**
     * An advisory lock request on inode {@code ino} ({@link Locks} has the rules): renews the
     * session's lease ({@code leaseNs} clamped to [1 s, 10 min]); drops the locks of sessions
     * whose lease ran out (their client died or unmounted); then takes or releases the lock, or
     * with {@code test} only reports the first conflict. A take that conflicts changes nothing
     * but the lease and returns the conflict (the caller answers EAGAIN). No permission check:
     * the client checked that the file is open for reading (read locks) or writing (write locks),
     * as fcntl(2) requires.
     *
     * @throws FsException ENOENT (no such inode), EINVAL (a POSIX range with end &lt;= start, a
     *     negative start, or an flock with a range)
     */
    public LockOutcome lock(Caller c, long ino, LockInfo want, boolean test, long leaseNs, long now) {
        requireWritable();
        inode(ino);
        if (want.getKind() == LockKind.POSIX) {
            if (want.getStart() < 0 || (want.getEnd() != 0 && Long.compareUnsigned(want.getEnd(), want.getStart()) <= 0)) {
                throw err(Status.EINVAL, "lock range [" + want.getStart() + ", " + want.getEnd() + ") is empty or negative");
            }
        } else if (want.getStart() != 0 || want.getEnd() != 0) {
            throw err(Status.EINVAL, "flock locks the whole file: no range");
        }
        boolean expired = renew(want.getSession(), leaseNs, now);
        java.util.Map<Long, Boolean> alive = new java.util.HashMap<>();
        List<LockInfo> live = new ArrayList<>();
        for (LockInfo l : MdsSchema.getLocks(txn, ino).getLocksList()) {
            if (alive.computeIfAbsent(l.getSession(), s -> s == want.getSession() ? !expired : sessionAlive(s, now))) {
                live.add(l);
            }
        }
        LockInfo conflict = null;
        if (test) {
            conflict = Locks.firstConflict(live, want.getType() == LockType.UNLOCK ? want.toBuilder().setType(LockType.WRITE).build() : want);
        } else if (want.getType() != LockType.UNLOCK) {
            conflict = Locks.firstConflict(live, want);
        }
        if (conflict == null && !test) {
            live = Locks.apply(live, want);
        }
        MdsSchema.putLocks(txn, ino, LockTableRecord.newBuilder().addAllLocks(live).build());
        return new LockOutcome(conflict, expired);
    }

    /**
     * Renews session {@code id} for {@code leaseNs} (clamped to [1 s, 10 min]; 0 ends it now, so
     * its locks stop counting at once). Returns true when the session had already expired (its
     * locks were lost, as an NFSv4 client whose lease ran out).
     */
    public boolean renewSession(long id, long leaseNs, long now) {
        requireWritable();
        return renew(id, leaseNs, now);
    }

    private boolean renew(long id, long leaseNs, long now) {
        SessionRecord old = MdsSchema.getSession(txn, id);
        boolean expired = old != null && old.getExpiresNs() < now;
        long expires = leaseNs == 0 ? now - 1 : now + Math.max(MIN_LEASE_NS, Math.min(MAX_LEASE_NS, leaseNs));
        MdsSchema.putSession(txn, id, SessionRecord.newBuilder().setExpiresNs(expires).build());
        return expired;
    }

    private boolean sessionAlive(long id, long now) {
        SessionRecord r = MdsSchema.getSession(txn, id);
        return r != null && r.getExpiresNs() >= now;
    }

    // =============================================================================== directory leases

    /** Shortest and longest directory lease a client may ask for (mds.proto DirLeaseRequest). */
    public static final long MIN_DIR_LEASE_NS = 100_000_000L, MAX_DIR_LEASE_NS = 30_000_000_000L;

    /**
     * Takes or renews the lease of directory {@code dir} for session {@code session}, for
     * {@code leaseNs} (clamped to [100 ms, 30 s]) from {@code now}. Another session's lease still
     * running is answered as it stands and left alone (the caller answers EAGAIN); a lease of this
     * session that was recalled is not renewed (its holder is to release it). Rules: mds.proto
     * {@code DirLeaseRequest}, after CephFS's directory capabilities for asynchronous creates.
     *
     * @throws FsException ENOENT, ENOTDIR, EACCES (no write and search permission on the
     *     directory: a lease keeps other clients out of it), EINVAL (session 0), EROFS
     */
    public DirLease acquireDirLease(Caller c, long dir, long session, long leaseNs, long now) {
        requireWritable();
        InodeRecord d = dir(dir);
        access(c, d, W | X, "write and search on directory inode " + Long.toUnsignedString(dir));
        if (session == 0) {
            throw err(Status.EINVAL, "a directory lease needs a session");
        }
        DirLeaseRecord old = MdsSchema.getDirLease(txn, dir);
        if (old != null && old.getExpiresNs() > now && (old.getHolder() != session || old.getRecalled())) {
            return toDirLease(dir, old);
        }
        long expires = now + Math.max(MIN_DIR_LEASE_NS, Math.min(MAX_DIR_LEASE_NS, leaseNs));
        DirLeaseRecord rec = DirLeaseRecord.newBuilder().setHolder(session).setExpiresNs(expires).build();
        MdsSchema.putDirLease(txn, dir, rec);
        return toDirLease(dir, rec);
    }

    /** Ends directory {@code dir}'s lease if {@code session} holds it (else changes nothing). EROFS. */
    public void releaseDirLease(long dir, long session) {
        requireWritable();
        DirLeaseRecord old = MdsSchema.getDirLease(txn, dir);
        if (old != null && old.getHolder() == session) {
            MdsSchema.deleteDirLease(txn, dir);
        }
    }

    /**
     * Asks the holder of directory {@code dir}'s lease to end it (marks it recalled; the holder
     * sees that in its next status read or renewal); returns the lease as it now stands (holder 0:
     * none running at {@code now}). EROFS.
     */
    public DirLease recallDirLease(long dir, long now) {
        requireWritable();
        DirLeaseRecord old = MdsSchema.getDirLease(txn, dir);
        if (old == null || old.getExpiresNs() <= now) {
            return DirLease.newBuilder().setDir(dir).build();
        }
        if (!old.getRecalled()) {
            old = old.toBuilder().setRecalled(true).build();
            MdsSchema.putDirLease(txn, dir, old);
        }
        return toDirLease(dir, old);
    }

    /** Directory {@code dir}'s lease running at {@code now} (holder 0: none). */
    public DirLease dirLease(long dir, long now) {
        DirLeaseRecord r = MdsSchema.getDirLease(txn, dir);
        return r == null || r.getExpiresNs() <= now ? DirLease.newBuilder().setDir(dir).build() : toDirLease(dir, r);
    }

    /**
     * The lease of directory {@code dir} that keeps session {@code session} out at {@code now}:
     * another session's, still running; null when there is none.
     */
    public DirLease dirLeaseAgainst(long dir, long session, long now) {
        DirLeaseRecord r = MdsSchema.getDirLease(txn, dir);
        return r == null || r.getExpiresNs() <= now || r.getHolder() == session ? null : toDirLease(dir, r);
    }

    private static DirLease toDirLease(long dir, DirLeaseRecord r) {
        return DirLease.newBuilder().setDir(dir).setHolder(r.getHolder()).setExpiresNs(r.getExpiresNs())
                .setRecalled(r.getRecalled()).build();
    }

    // =============================================================================== OST / OSS

    /**
     * Registers or updates an OST (root only): endpoint and bucket must be non-empty.
     *
     * @throws FsException EPERM (non-root), EINVAL
     */
    public void registerOst(Caller c, OstInfo ost) {
        requireWritable();
        if (c.getUid() != 0) {
            throw err(Status.EPERM, "only root registers OSTs");
        }
        if (ost.getEndpoint().isBlank() || ost.getBucket().isBlank()) {
            throw err(Status.EINVAL, "OST needs an endpoint and a bucket");
        }
        MdsSchema.putOst(txn, ost);
    }

    /** All registered OSTs by index. */
    public List<OstInfo> listOsts(Caller c) {
        return MdsSchema.listOsts(txn);
    }

    /** Registers an OSS gRPC address (root only, idempotent). @throws FsException EPERM, EINVAL (blank address) */
    public void registerOss(Caller c, OssInfo oss) {
        requireWritable();
        if (c.getUid() != 0) {
            throw err(Status.EPERM, "only root registers OSSes");
        }
        if (oss.getAddress().isBlank()) {
            throw err(Status.EINVAL, "OSS needs an address");
        }
        MdsSchema.putOss(txn, oss);
    }

    /** All registered OSSes by address. */
    public List<OssInfo> listOss(Caller c) {
        return MdsSchema.listOss(txn);
    }

    // =============================================================================== GC queue

    /** Most GC records one {@link #gcList} answers. */
    public static final int GC_LIST_MAX = 10_000;

    /** A page of the GC queue: its blocks, and whether the eligible prefix goes on past them. */
    public record GcPage(List<GcBlock> blocks, boolean more) {}

    /**
     * The GC queue's longest prefix, from sequence number {@code fromSeq} on, of blocks freed
     * before {@code deadBeforeNs} (ns since the Unix epoch), at most {@code limit} of them (0 or
     * more than {@link #GC_LIST_MAX}: that many). The queue is in the order blocks were freed, so
     * the prefix is what a grace period lets go. A block its stripe's live extent still references
     * comes with {@code still_referenced} (a safety net: a freed block is never referenced again).
     * Records without a death time (written before it was kept) count as dead long ago.
     *
     * @throws FsException EPERM (non-root)
     */
    public GcPage gcList(Caller c, long fromSeq, int limit, long deadBeforeNs) {
        if (c.getUid() != 0) {
            throw err(Status.EPERM, "only root reads the GC queue");
        }
        int max = limit <= 0 || limit > GC_LIST_MAX ? GC_LIST_MAX : limit;
        List<GcBlock> out = new ArrayList<>();
        boolean[] more = {false};
        MdsSchema.scanGc(txn, fromSeq, q -> {
            GcRecord g = q.rec();
            if (g.getDeathTimeNs() >= deadBeforeNs) {
                return false; // freed within the grace period: this and what follows stay
            }
            if (out.size() == max) {
                more[0] = true;
                return false;
            }
            Extent live = MdsSchema.getExtent(txn, g.getIno(), g.getStripeIndex(), epoch);
            boolean referenced = live != null && live.getOst() == g.getOst() && live.getBlockKey().equals(g.getBlockKey());
            out.add(GcBlock.newBuilder().setSeq(q.seq()).setOst(g.getOst()).setBlockKey(g.getBlockKey())
                    .setIno(g.getIno()).setStripeIndex(g.getStripeIndex()).setDeathTimeNs(g.getDeathTimeNs())
                    .setStillReferenced(referenced).build());
            return true;
        });
        return new GcPage(out, more[0]);
    }

    /**
     * Drops the GC records {@code seqs} (root only): their blocks are deleted. Numbers no longer
     * queued are skipped, so a retried request changes nothing. Returns the records dropped.
     *
     * @throws FsException EPERM (non-root)
     */
    public int gcDone(Caller c, List<Long> seqs) {
        requireWritable();
        if (c.getUid() != 0) {
            throw err(Status.EPERM, "only root drops GC records");
        }
        int n = 0;
        for (long seq : seqs) {
            if (MdsSchema.deleteGc(txn, seq)) {
                n++;
            }
        }
        return n;
    }
}
