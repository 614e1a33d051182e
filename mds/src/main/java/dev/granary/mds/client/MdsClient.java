package dev.granary.mds.client;

import com.google.protobuf.ByteString;
import dev.granary.mds.FsException;
import dev.granary.mds.proto.*;
import java.util.ArrayList;
import java.util.List;

/**
 * Typed client of the MDS namespace: one method per operation. Every method throws
 * {@link FsException} carrying the errno the MDS answered (ENOENT, EEXIST, EACCES, ...).
 * Thread-safe when its transport is.
 */
public final class MdsClient implements AutoCloseable {
    /** Bits of {@link SetAttrRequest#getValid()}. */
    public static final int SETATTR_MODE = 1, SETATTR_UID = 2, SETATTR_GID = 4, SETATTR_SIZE = 8,
            SETATTR_ATIME = 16, SETATTR_MTIME = 32, SETATTR_ATIME_NOW = 64, SETATTR_MTIME_NOW = 128;
    /** Linux renameat2 flags. */
    public static final int RENAME_NOREPLACE = 1, RENAME_EXCHANGE = 2;
    /** setxattr flags (Linux). */
    public static final int XATTR_CREATE = 1, XATTR_REPLACE = 2;
    /** The root directory's inode number. */
    public static final long ROOT_INO = 1;

    /**
     * How long a request that another client's directory lease keeps out is sent again at most:
     * the longest lease ({@code Namespace.MAX_DIR_LEASE_NS}, 30 s) and 10 s more. A holder that
     * died keeps it out until its lease runs out; one that lives releases it when recalled.
     */
    static final long LEASED_BUDGET_NS = 40_000_000_000L;
    /** Longest pause between two sends of a request a directory lease keeps out, ms. */
    static final long LEASED_PAUSE_MAX_MS = 20;

    private final MdsTransport transport;
    /** The session id stamped on every request: a client's locks and directory leases belong to it (0: none). */
    private final long session;
    /** Told of every write this client sends, or null. */
    private final WriteObserver observer;
    private final java.util.concurrent.atomic.AtomicLong leaseRefusals = new java.util.concurrent.atomic.AtomicLong();

    /** A client without a session (its requests are kept out of every leased directory until recalled). */
    public MdsClient(MdsTransport transport) {
        this(transport, 0, null);
    }

    private MdsClient(MdsTransport transport, long session, WriteObserver observer) {
        this.transport = transport;
        this.session = session;
        this.observer = observer;
    }

    /**
     * Sees every write request a client sends to the MDS (each of a batch inside it, too): just
     * before it goes out, and once its call returned or failed. A client-side cache that must know
     * which of the client's own changes may be in flight uses it (the VFS's complete listings of
     * leased directories). Called on the sending thread; must not block or call the MDS.
     */
    public interface WriteObserver {
        /** {@code r} is about to be sent (before the MDS can have applied it). */
        void sending(MdsRequest r);

        /** The call that sent {@code r} returned or failed: the MDS applied it or never will. */
        void sent(MdsRequest r);
    }

    /**
     * A client over the same transport whose requests carry session {@code id} (a mount's random
     * id): the directory leases it takes are its own. Closing either closes the transport.
     */
    public MdsClient withSession(long id) {
        return new MdsClient(transport, id, observer);
    }

    /** Like {@link #withSession(long)}, with {@code observer} told of every write (null: none). */
    public MdsClient withSession(long id, WriteObserver observer) {
        return new MdsClient(transport, id, observer);
    }

    /** The session id stamped on requests (0: none). */
    public long session() {
        return session;
    }

    /** Answers LEASED (another client's directory lease) this client got and sent again so far (tests, diagnostics). */
    public long leaseRefusals() {
        return leaseRefusals.get();
    }

    private MdsRequest.Builder req(Caller c) {
        return MdsRequest.newBuilder().setCaller(c).setSession(session);
    }

    /**
     * Sends {@code r} (a write when {@code write}, else a read) until no directory lease of another
     * client keeps it out: on a LEASED answer, recalls that lease (once per lease: the answer says
     * whether it already was) and sends {@code r} again after a pause (1 ms doubling up to
     * {@value #LEASED_PAUSE_MAX_MS} ms). A batch is sent again whole (the MDS applied none of it).
     * A write is shown to the {@link WriteObserver}, if any, before it goes out and after its call.
     *
     * @throws FsException EIO when a lease still kept it out after {@link #LEASED_BUDGET_NS};
     *     EINTR when interrupted while waiting
     */
    private MdsResponse send(MdsRequest r, boolean write) {
        WriteObserver o = write ? observer : null;
        if (o == null) {
            return sendUntilNotLeased(r, write);
        }
        o.sending(r);
        try {
            return sendUntilNotLeased(r, true);
        } finally {
            o.sent(r);
        }
    }

    private MdsResponse sendUntilNotLeased(MdsRequest r, boolean write) {
        long deadline = 0;
        long pauseMs = 1;
        while (true) {
            MdsResponse resp = write ? transport.write(r) : transport.read(r);
            DirLease l = leasedBy(resp);
            if (l == null) {
                return resp;
            }
            leaseRefusals.incrementAndGet();
            long now = System.nanoTime();
            if (deadline == 0) {
                deadline = now + LEASED_BUDGET_NS;
            } else if (now - deadline > 0) {
                throw new FsException(Status.EIO, "directory inode " + Long.toUnsignedString(l.getDir())
                        + " stayed leased to another client for " + LEASED_BUDGET_NS / 1_000_000_000L + " s");
            }
            if (!l.getRecalled()) {
                transport.write(req(r.getCaller())
                        .setDirLease(DirLeaseRequest.newBuilder().setDir(l.getDir()).setAction(DirLeaseAction.RECALL)).build());
            }
            try {
                Thread.sleep(pauseMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new FsException(Status.EINTR, "interrupted while directory inode " + Long.toUnsignedString(l.getDir())
                        + " was leased to another client");
            }
            pauseMs = Math.min(LEASED_PAUSE_MAX_MS, pauseMs * 2);
        }
    }

    /** The lease that kept {@code r} (or a request of its batch) out, or null. */
    private static DirLease leasedBy(MdsResponse r) {
        if (r.getStatus() == Status.LEASED) {
            return r.getDirLease();
        }
        for (MdsResponse b : r.getBatchList()) {
            if (b.getStatus() == Status.LEASED) {
                return b.getDirLease();
            }
        }
        return null;
    }

    /** {@code r} when its status is OK; else its errno as an {@link FsException} (also for batch answers). */
    public static MdsResponse check(MdsResponse r) {
        if (r.getStatus() != Status.OK) {
            throw new FsException(r.getStatus(), r.getMessage());
        }
        return r;
    }

    private MdsResponse write(MdsRequest.Builder b) {
        return check(send(b.build(), true));
    }

    private MdsResponse read(MdsRequest.Builder b) {
        return check(send(b.build(), false));
    }

    private static ByteString bs(byte[] b) {
        return ByteString.copyFrom(b);
    }

    /**
     * Looks up {@code name} in directory {@code parent}: ENOENT ({@link NoEntryException} with the
     * directory's attributes when the directory exists), ENOTDIR, EACCES.
     */
    public Attr lookup(Caller c, long parent, byte[] name) {
        return lookupRead(req(c).setLookup(LookupRequest.newBuilder().setParent(parent).setName(bs(name)))).getAttr();
    }

    /**
     * Lookup that also returns the extent map of a regular file of at most one stripe, from the
     * same consistent read ({@code extents} null for other files). Errors as {@link #lookup}.
     */
    public FileMap lookupWithMap(Caller c, long parent, byte[] name) {
        MdsResponse r = lookupRead(req(c).setLookup(LookupRequest.newBuilder().setParent(parent).setName(bs(name)).setWithExtents(true)));
        return new FileMap(r.getAttr(), r.getHasExtents() ? r.getExtentsList() : null);
    }

    /**
     * Lookup for open(2): the attributes of {@code name} in {@code parent} and, for a regular file
     * of any size, its whole extent map, from one consistent read ({@code extents} null for other
     * files, and from an MDS that predates {@code whole_map} for files above one stripe). Errors
     * as {@link #lookup}.
     */
    public FileMap lookupForOpen(Caller c, long parent, byte[] name) {
        return lookupForOpen(c, parent, name, null);
    }

    /**
     * {@link #lookupForOpen(Caller, long, byte[])} for a client that holds {@code cached}, the map
     * of the inode it expects under {@code name} as fetched earlier ({@link #getFileMaps}): when
     * the name still holds that inode at the same ctime, the MDS sends only the attributes and
     * the answer carries {@code cached}'s extents (a small file's inline bytes are not read or
     * sent again); otherwise the current map, as without it. {@code cached} null: as without it.
     * Errors as {@link #lookup}.
     */
    public FileMap lookupForOpen(Caller c, long parent, byte[] name, FileMap cached) {
        boolean holds = cached != null && cached.extents() != null;
        OpenMap o = lookupForOpen(c, parent, name, holds ? cached.attr().getIno() : 0, holds ? cached.attr().getCtimeNs() : 0);
        return o.unchanged() ? new FileMap(o.map().attr(), cached.extents()) : o.map();
    }

    /**
     * The answer of {@link #lookupForOpen(Caller, long, byte[], long, long)}: {@code unchanged}
     * when the name holds the inode the caller named at the ctime it named, and then
     * {@code map.extents()} is null (the MDS sent the attributes only); otherwise the current map,
     * as {@link #lookupForOpen(Caller, long, byte[])} returns it.
     */
    public record OpenMap(FileMap map, boolean unchanged) {}

    /**
     * {@link #lookupForOpen(Caller, long, byte[])} for a client that holds the bytes of inode
     * {@code ino} as they were at MDS ctime {@code ctimeNs} (ns) somewhere else than a map (the
     * kernel's page cache): when the name still holds that inode at that ctime, the MDS reads and
     * sends only the attributes (no extent map, no inline bytes) and the answer is
     * {@code unchanged}. {@code ino} 0: as without it. Errors as {@link #lookup}.
     */
    public OpenMap lookupForOpen(Caller c, long parent, byte[] name, long ino, long ctimeNs) {
        LookupRequest.Builder q = LookupRequest.newBuilder().setParent(parent).setName(bs(name))
                .setWithExtents(true).setWholeMap(true);
        if (ino != 0) {
            q.setCachedIno(ino).setCachedCtimeNs(ctimeNs);
        }
        MdsResponse r = lookupRead(req(c).setLookup(q));
        if (r.getExtentsCached() && ino != 0 && r.getAttr().getIno() == ino && r.getAttr().getCtimeNs() == ctimeNs) {
            return new OpenMap(new FileMap(r.getAttr(), null), true);
        }
        return new OpenMap(new FileMap(r.getAttr(), r.getHasExtents() && !r.getExtentsCached() ? r.getExtentsList() : null), false);
    }

    /** A lookup's read: an ENOENT that carries the directory's attributes becomes a {@link NoEntryException}. */
    private MdsResponse lookupRead(MdsRequest.Builder b) {
        MdsResponse r = send(b.build(), false);
        if (r.getStatus() == Status.ENOENT && r.hasAttr()) {
            throw new NoEntryException(r.getMessage(), r.getAttr());
        }
        return check(r);
    }

    /** Attributes of inode {@code ino}: ENOENT. */
    public Attr getattr(Caller c, long ino) {
        return read(req(c).setGetattr(GetAttrRequest.newBuilder().setIno(ino))).getAttr();
    }

    /** chmod/chown/truncate/utimens in one operation: EPERM, EACCES, EISDIR (size of a dir), EINVAL. */
    public Attr setattr(Caller c, SetAttrRequest r) {
        return write(req(c).setSetattr(r)).getAttr();
    }

    /** Creates a regular file (or device/fifo by mode): EEXIST when exclusive, ENAMETOOLONG, EACCES. */
    public Attr create(Caller c, long parent, byte[] name, int mode, boolean exclusive) {
        return createFile(c, parent, name, mode, exclusive).attr();
    }

    /** A create's result: the file's attributes, and whether this call made the inode (false: it existed). */
    public record Created(Attr attr, boolean isNew) {}

    /** As {@link #create}, also telling whether a new inode was made. */
    public Created createFile(Caller c, long parent, byte[] name, int mode, boolean exclusive) {
        MdsResponse r = write(req(c).setCreate(CreateRequest.newBuilder().setParent(parent).setName(bs(name))
                .setMode(mode).setExclusive(exclusive)));
        return new Created(r.getAttr(), r.getCreated());
    }

    /**
     * The request of a deferred create, for {@link #batchWrite}: regular file {@code name} in
     * {@code parent} as inode {@code ino} (from {@link #allocInodes}); {@code replace}: an existing
     * non-directory entry of the name is unlinked first (O_TRUNC semantics; without it, an
     * existing name is answered with that file, created false).
     */
    public MdsRequest createRequest(Caller c, long parent, byte[] name, int mode, long ino, boolean replace) {
        return createRequest(c, parent, name, mode, ino, replace, false);
    }

    /** As {@link #createRequest(Caller, long, byte[], int, long, boolean)}; {@code exclusive}: an existing name is EEXIST. */
    public MdsRequest createRequest(Caller c, long parent, byte[] name, int mode, long ino, boolean replace, boolean exclusive) {
        return req(c).setCreate(CreateRequest.newBuilder().setParent(parent).setName(bs(name)).setMode(mode)
                .setIno(ino).setReplace(replace).setExclusive(exclusive)).build();
    }

    /**
     * Reserves {@code count} (1..65536) inode numbers for deferred creates; returns the first.
     *
     * @throws FsException EINVAL (count), EROFS, EIO (transport)
     */
    public long allocInodes(Caller c, int count) {
        return write(req(c).setAllocInodes(AllocInodesRequest.newBuilder().setCount(count))).getFirstIno();
    }

    /** Creates a directory: EEXIST, ENAMETOOLONG, EACCES. */
    public Attr mkdir(Caller c, long parent, byte[] name, int mode) {
        return write(req(c).setMkdir(MkdirRequest.newBuilder().setParent(parent).setName(bs(name)).setMode(mode))).getAttr();
    }

    /**
     * What an unlink or rmdir changed, as far as the MDS said: the directory's new attributes
     * (mtime, ctime, nlink; null if not sent), and the removed inode's ({@code removed}: its new
     * attributes while it still has a name, else its number with nlink 0; null if not sent).
     */
    public record Removed(Attr parent, Attr removed) {}

    /** Removes a non-directory entry: ENOENT, EISDIR, EACCES, EPERM (sticky). */
    public Removed unlink(Caller c, long parent, byte[] name) {
        return removed(write(req(c).setUnlink(UnlinkRequest.newBuilder().setParent(parent).setName(bs(name)))), parent);
    }

    /** What an unlink or rmdir answered with ({@link Removed}); parts the MDS did not send are null. */
    public static Removed removed(MdsResponse r, long parent) {
        return new Removed(parentAttr(r, parent), r.hasRemovedAttr() ? r.getRemovedAttr() : null);
    }

    /** The parent's attributes an unlink or rmdir answered with, or null (an MDS that sends none). */
    private static Attr parentAttr(MdsResponse r, long parent) {
        return r.hasAttr() && r.getAttr().getIno() == parent ? r.getAttr() : null;
    }

    /**
     * The request of an unlink that removes {@code name} only if it still names inode
     * {@code expectIno} (else ENOENT), for {@link #batchWrite}.
     */
    public MdsRequest unlinkRequest(Caller c, long parent, byte[] name, long expectIno) {
        return req(c).setUnlink(UnlinkRequest.newBuilder().setParent(parent).setName(bs(name)).setExpectIno(expectIno)).build();
    }

    /**
     * Sends {@code requests} (mutations) as one Raft entry, applied in order, each on its own;
     * returns one response per request, in order, each with its own status (not thrown).
     *
     * @throws dev.granary.mds.FsException only for the transport (EIO) or a malformed batch
     */
    public List<MdsResponse> batchWrite(List<MdsRequest> requests) {
        MdsRequest.Builder b = MdsRequest.newBuilder().setSession(session)
                .setBatchWrite(BatchWriteRequest.newBuilder().addAllRequests(requests));
        if (!requests.isEmpty()) {
            b.setCaller(requests.get(0).getCaller());
        }
        return write(b).getBatchList();
    }

    /**
     * Commits the files packed into block {@code blockKey} of OST {@code ost} ({@code blockLength}
     * bytes) in one Raft entry (mds.proto CommitPackRequest): each of {@code commits} is a
     * {@link #commitExtentsRequest} of one packed extent; returns one response per commit, in
     * order, each with its own status (EAGAIN when the file's stripe changed since its writer read
     * it, ENOENT when it was removed, ...). The MDS frees the block once no file refers to it.
     *
     * @throws FsException EINVAL when the request is malformed or the pack was committed before
     */
    public List<MdsResponse> commitPack(int ost, String blockKey, long blockLength, List<MdsRequest> commits) {
        return write(commitPackRequest(ost, blockKey, blockLength, commits).toBuilder()).getBatchList();
    }

    /** The request of {@link #commitPack}, for a {@link #batchWrite} (after the creates of its files). */
    public MdsRequest commitPackRequest(int ost, String blockKey, long blockLength, List<MdsRequest> commits) {
        return MdsRequest.newBuilder().setSession(session).setCaller(commits.get(0).getCaller())
                .setCommitPack(CommitPackRequest.newBuilder().setOst(ost).setBlockKey(blockKey).setBlockLength(blockLength)
                        .addAllCommits(commits)).build();
    }

    /** Removes an empty directory: ENOTEMPTY, ENOTDIR, ENOENT, EACCES. */
    public Removed rmdir(Caller c, long parent, byte[] name) {
        return removed(write(req(c).setRmdir(RmdirRequest.newBuilder().setParent(parent).setName(bs(name)))), parent);
    }

    /**
     * What a rename changed, as far as the MDS said: the directories' new attributes (source, then
     * destination when it is another one); the renamed inode's ({@code moved}, null if not sent);
     * the inode exchanged with or replaced, when it still has a name ({@code replaced}, else null).
     */
    public record Renamed(List<Attr> parents, Attr moved, Attr replaced) {}

    /**
     * Atomic rename (renameat2 flags): ENOTEMPTY, EISDIR, ENOTDIR, EINVAL, EEXIST (NOREPLACE).
     * Returns the new attributes of the directories and inodes involved ({@link Renamed}).
     */
    public Renamed rename(Caller c, long srcParent, byte[] srcName, long dstParent, byte[] dstName, int flags) {
        MdsResponse r = write(req(c).setRename(RenameRequest.newBuilder().setSrcParent(srcParent).setSrcName(bs(srcName))
                .setDstParent(dstParent).setDstName(bs(dstName)).setFlags(flags)));
        List<Attr> parents = new java.util.ArrayList<>(2);
        Attr src = parentAttr(r, srcParent);
        if (src != null) {
            parents.add(src);
        }
        if (r.hasDstParentAttr() && r.getDstParentAttr().getIno() == dstParent) {
            parents.add(r.getDstParentAttr());
        }
        return new Renamed(parents, r.hasMovedAttr() ? r.getMovedAttr() : null, r.hasReplacedAttr() ? r.getReplacedAttr() : null);
    }

    /** One page of entries of directory {@code ino} with names after {@code after} (empty: from the start). */
    public ReadDirPage readdir(Caller c, long ino, byte[] after, int limit) {
        MdsResponse r = read(req(c).setReaddir(ReadDirRequest.newBuilder().setIno(ino).setAfter(bs(after)).setLimit(limit)));
        return new ReadDirPage(r.getEntriesList(), r.getMore(), r.hasAttr() ? r.getAttr() : null);
    }

    /**
     * Like {@link #readdir}, each entry with the child's attributes ({@code DirEntry.attr}), as
     * lookups would return them: ENOENT, ENOTDIR, EACCES (needs read and search permission).
     */
    public ReadDirPage readdirPlus(Caller c, long ino, byte[] after, int limit) {
        MdsResponse r = read(req(c).setReaddir(ReadDirRequest.newBuilder().setIno(ino).setAfter(bs(after)).setLimit(limit).setPlus(true)));
        return new ReadDirPage(r.getEntriesList(), r.getMore(), r.hasAttr() ? r.getAttr() : null);
    }

    /** Creates a symbolic link to {@code target}: EEXIST, ENAMETOOLONG. */
    public Attr symlink(Caller c, long parent, byte[] name, byte[] target) {
        return write(req(c).setSymlink(SymlinkRequest.newBuilder().setParent(parent).setName(bs(name)).setTarget(bs(target)))).getAttr();
    }

    /** Target of symlink {@code ino}: EINVAL when not a symlink. */
    public byte[] readlink(Caller c, long ino) {
        return read(req(c).setReadlink(ReadlinkRequest.newBuilder().setIno(ino))).getValue().toByteArray();
    }

    /** Hard link: EPERM for directories, EEXIST, EMLINK. */
    public Attr link(Caller c, long ino, long newParent, byte[] newName) {
        return write(req(c).setLink(LinkRequest.newBuilder().setIno(ino).setNewParent(newParent).setNewName(bs(newName)))).getAttr();
    }

    /** Sets an xattr: EEXIST (XATTR_CREATE), ENODATA (XATTR_REPLACE), ERANGE (too large). */
    public void setxattr(Caller c, long ino, byte[] name, byte[] value, int flags) {
        write(req(c).setSetxattr(SetXattrRequest.newBuilder().setIno(ino).setName(bs(name)).setValue(bs(value)).setFlags(flags)));
    }

    /** Value of an xattr: ENODATA when absent. */
    public byte[] getxattr(Caller c, long ino, byte[] name) {
        return read(req(c).setGetxattr(GetXattrRequest.newBuilder().setIno(ino).setName(bs(name)))).getValue().toByteArray();
    }

    /** Names of all xattrs of {@code ino}. */
    public List<ByteString> listxattr(Caller c, long ino) {
        return read(req(c).setListxattr(ListXattrRequest.newBuilder().setIno(ino))).getNamesList();
    }

    /** Removes an xattr: ENODATA when absent. */
    public void removexattr(Caller c, long ino, byte[] name) {
        write(req(c).setRemovexattr(RemoveXattrRequest.newBuilder().setIno(ino).setName(bs(name))));
    }

    /** Filesystem usage figures. */
    public StatFsReply statfs(Caller c) {
        return read(req(c).setStatfs(StatFsRequest.getDefaultInstance())).getStatfs();
    }

    /** Sets the layout of a directory (default for new files) or of an empty file: EINVAL, ENOTEMPTY-like EBUSY. */
    public Layout setLayout(Caller c, long ino, Layout layout) {
        return write(req(c).setSetlayout(SetLayoutRequest.newBuilder().setIno(ino).setLayout(layout))).getLayout();
    }

    /** Commits written extents with the new size and mtime in one Raft operation; returns the new attributes. */
    public Attr commitExtents(Caller c, long ino, List<Extent> extents, long newSize, long mtimeNs) {
        return commitExtents(c, ino, extents, newSize, mtimeNs, false);
    }

    /**
     * As {@link #commitExtents(Caller, long, List, long, long)}; {@code keepMtime}: the mtime was set
     * explicitly after the last write (utimensat), so the commit leaves it alone.
     * {@code mtimeNs} is the time of the last write, ns (0: now).
     */
    public Attr commitExtents(Caller c, long ino, List<Extent> extents, long newSize, long mtimeNs, boolean keepMtime) {
        return commitExtents(c, ino, extents, List.of(), newSize, mtimeNs, keepMtime);
    }

    /**
     * As {@link #commitExtents(Caller, long, List, long, long, boolean)}, applied only while each
     * stripe of {@code bases} still has the extent the caller built its new block on (see
     * {@code CommitExtentsRequest.bases} in mds.proto).
     *
     * @throws FsException EAGAIN when one of those stripes changed meanwhile (nothing applied)
     */
    public Attr commitExtents(Caller c, long ino, List<Extent> extents, List<StripeBase> bases, long newSize, long mtimeNs,
                              boolean keepMtime) {
        return write(commitExtentsRequest(c, ino, extents, bases, newSize, mtimeNs, keepMtime).toBuilder()).getAttr();
    }

    /** The request of {@link #commitExtents(Caller, long, List, List, long, long, boolean)}, for {@link #batchWrite}. */
    public MdsRequest commitExtentsRequest(Caller c, long ino, List<Extent> extents, List<StripeBase> bases, long newSize,
                                           long mtimeNs, boolean keepMtime) {
        return req(c).setCommitExtents(CommitExtentsRequest.newBuilder().setIno(ino).addAllExtents(extents).addAllBases(bases)
                .setNewSize(newSize).setMtimeNs(mtimeNs).setKeepMtime(keepMtime)).build();
    }

    /**
     * Commits the extents of an O_APPEND write that the caller placed at {@code expectSize}, the
     * end of file it read (see {@code CommitExtentsRequest.append} in mds.proto): applied only
     * while the file still ends there and the stripe holding that end still has extent
     * {@code base} (null: none), so appended bytes never overwrite another client's.
     *
     * @throws FsException EAGAIN when the file changed meanwhile (nothing applied: read the new
     *     end and place the bytes again), or as {@link #commitExtents}
     */
    public Attr commitAppend(Caller c, long ino, List<Extent> extents, long expectSize, Extent base, long newSize,
                             long mtimeNs, boolean keepMtime) {
        CommitExtentsRequest.Builder q = CommitExtentsRequest.newBuilder().setIno(ino).addAllExtents(extents)
                .setNewSize(newSize).setMtimeNs(mtimeNs).setKeepMtime(keepMtime).setAppend(true).setExpectSize(expectSize);
        if (base != null) {
            q.setAppendBase(base);
        }
        return write(req(c).setCommitExtents(q)).getAttr();
    }

    /** Extents of {@code ino} with stripe index in {@code [fromStripe, toStripe)}, ascending. */
    public List<Extent> getExtents(Caller c, long ino, long fromStripe, long toStripe) {
        return read(req(c).setGetExtents(GetExtentsRequest.newBuilder().setIno(ino).setFromStripe(fromStripe).setToStripe(toStripe))).getExtentsList();
    }

    /** Attributes and extents of a file read together (one consistent MDS read). */
    public record FileMap(Attr attr, List<Extent> extents) {}

    /**
     * Fresh attributes and every extent of {@code ino} in one round trip (what open(2) needs for
     * close-to-open consistency): ENOENT, EISDIR.
     */
    public FileMap getFileMap(Caller c, long ino) {
        MdsResponse r = read(fileMapRequest(c, ino));
        return new FileMap(r.getAttr(), r.getExtentsList());
    }

    /** The read of {@code ino}'s attributes and every extent ({@link #getFileMap}, {@link #getFileMaps}). */
    private MdsRequest.Builder fileMapRequest(Caller c, long ino) {
        return req(c).setGetExtents(GetExtentsRequest.newBuilder().setIno(ino).setFromStripe(0).setToStripe(0));
    }

    /**
     * The attributes and whole extent maps of regular files {@code inos}, from one consistent MDS
     * read sent on its own ({@link MdsTransport#readBulk}: it may carry megabytes of inline bytes
     * and must not hold up other reads). One entry per inode, in order; null for an inode the
     * MDS refused (ENOENT: removed since, EISDIR, EINVAL, EACCES).
     *
     * @throws FsException EIO when the MDS cannot be reached or answers malformed
     */
    public List<FileMap> getFileMaps(Caller c, List<Long> inos) {
        if (inos.isEmpty()) {
            return List.of();
        }
        BatchReadRequest.Builder b = BatchReadRequest.newBuilder();
        for (long ino : inos) {
            b.addRequests(fileMapRequest(c, ino));
        }
        MdsResponse all = check(transport.readBulk(MdsRequest.newBuilder().setBatchRead(b).build()));
        if (all.getBatchCount() != inos.size()) {
            throw new FsException(Status.EIO, "MDS answered a batch of " + inos.size() + " reads with " + all.getBatchCount() + " responses");
        }
        List<FileMap> out = new ArrayList<>(inos.size());
        for (MdsResponse r : all.getBatchList()) {
            out.add(r.getStatus() == Status.OK ? new FileMap(r.getAttr(), r.getExtentsList()) : null);
        }
        return out;
    }

    /**
     * Fresh attributes and the extents of {@code ino} with stripe index in {@code [fromStripe,
     * toStripe)} (0: no upper bound), from one consistent MDS read: ENOENT, EISDIR.
     */
    public FileMap getFileMap(Caller c, long ino, long fromStripe, long toStripe) {
        MdsResponse r = read(req(c).setGetExtents(GetExtentsRequest.newBuilder().setIno(ino).setFromStripe(fromStripe).setToStripe(toStripe)));
        return new FileMap(r.getAttr(), r.getExtentsList());
    }

    /**
     * The answer to a lock request: {@code granted} (a take succeeded, or an unlock or test
     * ran), the conflicting lock (test, or a take that was refused; null when none) and whether
     * the session's lease had run out before this request (its older locks were lost).
     */
    public record LockReply(boolean granted, LockInfo conflict, boolean leaseExpired) {}

    /**
     * Takes, releases or tests an advisory lock on inode {@code ino} (one Raft operation), renewing
     * the session's lease to {@code leaseNs}. A conflicting take is not an error: it comes back
     * with {@code granted} false. ENOENT, EINVAL.
     */
    public LockReply lock(Caller c, long ino, LockInfo lock, boolean test, long leaseNs) {
        MdsResponse r = send(req(c).setLock(LockRequest.newBuilder().setIno(ino).setLock(lock)
                .setTest(test).setLeaseNs(leaseNs)).build(), true);
        if (r.getStatus() == Status.EAGAIN) {
            return new LockReply(false, r.getConflict(), r.getLeaseExpired());
        }
        check(r);
        return new LockReply(true, r.hasConflict() ? r.getConflict() : null, r.getLeaseExpired());
    }

    /** Renews session {@code id}'s lease ({@code leaseNs} 0 ends it, releasing its locks); true when it had expired. */
    public boolean renewSession(Caller c, long id, long leaseNs) {
        return write(req(c).setRenewSession(RenewSessionRequest.newBuilder().setSession(id).setLeaseNs(leaseNs))).getLeaseExpired();
    }

    /** Registers (or updates) an OST. */
    public void registerOst(Caller c, OstInfo ost) {
        write(req(c).setRegisterOst(RegisterOstRequest.newBuilder().setOst(ost)));
    }

    /** All registered OSTs by index. */
    public List<OstInfo> listOsts(Caller c) {
        return read(req(c).setListOsts(ListOstsRequest.getDefaultInstance())).getOstsList();
    }

    /** Registers an OSS gRPC address (idempotent). */
    public void registerOss(Caller c, String address) {
        write(req(c).setRegisterOss(RegisterOssRequest.newBuilder().setOss(OssInfo.newBuilder().setAddress(address))));
    }

    /** All registered OSS addresses. */
    public List<OssInfo> listOss(Caller c) {
        return read(req(c).setListOss(ListOssRequest.getDefaultInstance())).getOssesList();
    }

    /**
     * A page of the GC queue: blocks freed before {@code deadBeforeNs} (ns since the Unix epoch),
     * from sequence number {@code fromSeq} on, at most {@code limit} (see {@code GcListRequest});
     * {@code more}: the eligible prefix goes on. Root only (EPERM).
     */
    public GcPage gcList(Caller c, long fromSeq, int limit, long deadBeforeNs) {
        MdsResponse r = read(req(c).setGcList(dev.granary.mds.proto.GcListRequest.newBuilder()
                .setFromSeq(fromSeq).setLimit(limit).setDeadBeforeNs(deadBeforeNs)));
        return new GcPage(r.getGcList(), r.getMore());
    }

    /** A page of the GC queue ({@link #gcList}). */
    public record GcPage(List<dev.granary.mds.proto.GcBlock> blocks, boolean more) {}

    /** Drops the GC records {@code seqs}, whose blocks were deleted (one Raft write); returns how many were queued. Root only (EPERM). */
    public int gcDone(Caller c, List<Long> seqs) {
        return write(req(c).setGcDone(dev.granary.mds.proto.GcDoneRequest.newBuilder().addAllSeqs(seqs))).getGcDropped();
    }

    /** The answer to a directory lease acquire: {@code granted}, the lease as it stands, and the directory's attributes. */
    public record DirLeaseReply(boolean granted, DirLease lease, Attr dir) {}

    /**
     * Takes or renews this session's lease of directory {@code dir} for {@code leaseNs} (one Raft
     * write; rules in mds.proto {@code DirLeaseRequest}). Another session's lease, or this
     * session's once recalled, is not an error: it comes back with {@code granted} false.
     *
     * @throws FsException ENOENT, ENOTDIR, EACCES, EINVAL (no session set)
     */
    public DirLeaseReply acquireDirLease(Caller c, long dir, long leaseNs) {
        MdsResponse r = send(req(c).setDirLease(DirLeaseRequest.newBuilder().setDir(dir).setAction(DirLeaseAction.ACQUIRE)
                .setLeaseNs(leaseNs)).build(), true);
        if (r.getStatus() == Status.EAGAIN && r.hasDirLease()) {
            return new DirLeaseReply(false, r.getDirLease(), r.getAttr());
        }
        check(r);
        return new DirLeaseReply(!r.getDirLease().getRecalled(), r.getDirLease(), r.getAttr());
    }

    /** Ends this session's lease of directory {@code dir}, if it holds it (one Raft write). */
    public void releaseDirLease(Caller c, long dir) {
        write(req(c).setDirLease(DirLeaseRequest.newBuilder().setDir(dir).setAction(DirLeaseAction.RELEASE)));
    }

    /** Directory {@code dir}'s lease as it stands (one read; holder 0: none). */
    public DirLease dirLeaseStatus(Caller c, long dir) {
        return read(req(c).setDirLease(DirLeaseRequest.newBuilder().setDir(dir).setAction(DirLeaseAction.STATUS))).getDirLease();
    }

    @Override
    public void close() {
        transport.close();
    }
}
