package dev.granary.mds.server;

import com.google.protobuf.InvalidProtocolBufferException;
import dev.granary.mds.FsException;
import dev.granary.mds.namespace.Namespace;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.DirLease;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.CommitPackRequest;
import dev.granary.mds.proto.MdsRequest;
import dev.granary.mds.proto.MdsResponse;
import dev.granary.mds.proto.Status;
import dev.granary.mds.schema.BufferedTxn;
import dev.granary.mds.schema.MdsSchema;
import dev.granary.raft.KvApplier;
import dev.granary.raft.KvReader;
import dev.granary.raft.KvTxn;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The MDS as a {@link KvApplier}: decodes {@link MdsRequest}s and runs them on a
 * {@link Namespace}. {@link #prepare} stamps the leader's clock into {@code now_ns};
 * {@link #apply} runs mutations (and reads sent as mutations) into a {@link BufferedTxn} and
 * copies its writes into the Raft transaction only on success, so a user error (an errno reply)
 * writes nothing; {@link #query} answers reads at the current epoch. A malformed request is a
 * user error (EINVAL). Any other exception (a bug, corruption, a RocksDB failure) propagates:
 * the raft layer stops the peer rather than let it diverge.
 */
public final class MdsStateMachine implements KvApplier {
    private static final Logger log = LoggerFactory.getLogger(MdsStateMachine.class);

    /**
     * Whether the database applied to holds the root inode (it is never removed once made), so
     * that an entry need not look it up: the lookup (a versioned RocksDB seek) was 14% of the CPU
     * of applying a create, 4% of a quickstart's CPU in a create loop. Set when an entry finds
     * the root; cleared by {@link #databaseOpened}.
     */
    private volatile boolean rootKnown;

    /** Creates the state machine; all state is in the database. */
    public MdsStateMachine() {}

    /** The database was opened or replaced by a snapshot: its root is looked up again. */
    @Override
    public void databaseOpened() {
        rootKnown = false;
    }

    /** The MDS column families ({@link MdsSchema#COLUMN_FAMILIES}). */
    @Override
    public List<String> columnFamilies() {
        return MdsSchema.COLUMN_FAMILIES;
    }

    /** Stamps {@code now_ns} (leader clock, ns since the Unix epoch); malformed bytes pass unchanged. */
    @Override
    public byte[] prepare(byte[] request, long nowNanos) {
        try {
            return MdsRequest.parseFrom(request).toBuilder().setNowNs(nowNanos).build().toByteArray();
        } catch (InvalidProtocolBufferException e) {
            return request; // apply answers EINVAL
        }
    }

    /**
     * Applies one mutation, or a {@code batch_write} of them in order (each on its own: one that
     * fails writes nothing and the others go on; a batch inside it gets EINVAL); returns
     * MdsResponse bytes.
     */
    @Override
    public byte[] apply(long logIndex, byte[] request, KvTxn txn) {
        MdsRequest r;
        try {
            r = MdsRequest.parseFrom(request);
        } catch (InvalidProtocolBufferException e) {
            return error(Status.EINVAL, "malformed MdsRequest: " + e.getMessage());
        }
        if (r.getOpCase() == MdsRequest.OpCase.BATCH_WRITE) {
            MdsResponse.Builder out = MdsResponse.newBuilder().setStatus(Status.OK);
            MdsResponse leased = batchLeased(r, txn);
            if (leased != null) {
                // a directory lease keeps one of them out: none is applied (the later ones may
                // depend on it), and each is answered LEASED, to be sent again after the recall
                for (int i = 0; i < r.getBatchWrite().getRequestsCount(); i++) {
                    out.addBatch(leased);
                }
                return out.build().toByteArray();
            }
            for (MdsRequest one : r.getBatchWrite().getRequestsList()) {
                if (one.getOpCase() == MdsRequest.OpCase.BATCH_WRITE || one.getOpCase() == MdsRequest.OpCase.BATCH_READ) {
                    out.addBatch(errorResponse(Status.EINVAL, "a batch inside a batch_write"));
                    continue;
                }
                // Each on its own buffer over the entry's transaction: it sees the writes of the
                // ones before it, and one that fails writes nothing.
                MdsRequest stamped = one.toBuilder().setNowNs(r.getNowNs()).build();
                out.addBatch(one.getOpCase() == MdsRequest.OpCase.COMMIT_PACK
                        ? applyPack(logIndex, stamped, txn) : applyOne(logIndex, stamped, txn));
            }
            return out.build().toByteArray();
        }
        if (r.getOpCase() == MdsRequest.OpCase.COMMIT_PACK) {
            return applyPack(logIndex, r, txn).toByteArray();
        }
        return applyOne(logIndex, r, txn).toByteArray();
    }

    /**
     * Applies a commit_pack (mds.proto CommitPackRequest): each of its commits on its own, as in a
     * batch_write (answers in {@code batch}), then the pack's reference count, or its block to the
     * GC queue when no commit referred to it. The whole request is EINVAL, nothing applied, when the
     * pack was committed before, or a commit is not a plain commit_extents.
     */
    private MdsResponse applyPack(long logIndex, MdsRequest r, KvTxn txn) {
        var q = r.getCommitPack();
        if (q.getBlockKey().isEmpty() || q.getBlockLength() <= 0 || q.getCommitsCount() == 0) {
            return errorResponse(Status.EINVAL, "a commit_pack needs a block key, a length and commits");
        }
        for (MdsRequest one : q.getCommitsList()) {
            if (one.getOpCase() != MdsRequest.OpCase.COMMIT_EXTENTS || one.getCommitExtents().getAppend()) {
                return errorResponse(Status.EINVAL, "a commit_pack holds commit_extents only, not " + one.getOpCase());
            }
        }
        if (Namespace.live(new BufferedTxn(txn)).packExists(q.getOst(), q.getBlockKey())) {
            return errorResponse(Status.EINVAL, "pack " + q.getBlockKey() + " of OST " + q.getOst() + " was committed before");
        }
        MdsResponse.Builder out = MdsResponse.newBuilder().setStatus(Status.OK);
        long[] refs = {0};
        for (MdsRequest one : q.getCommitsList()) {
            out.addBatch(applyOne(logIndex, one.toBuilder().setNowNs(r.getNowNs()).build(), txn, q, refs));
        }
        BufferedTxn buf = new BufferedTxn(txn);
        Namespace.live(buf).finishPack(q.getOst(), q.getBlockKey(), q.getBlockLength(), refs[0],
                q.getCommits(0).getCommitExtents().getIno(), r.getNowNs());
        buf.flushTo(txn);
        return out.build();
    }

    /** The LEASED answer for the first request of batch_write {@code r} a directory lease keeps out, else null. */
    private static MdsResponse batchLeased(MdsRequest r, KvTxn txn) {
        Namespace ns = Namespace.live(new BufferedTxn(txn));
        for (MdsRequest one : r.getBatchWrite().getRequestsList()) {
            DirLease l = leaseAgainst(ns, one, r.getNowNs());
            if (l != null) {
                return leasedResponse(l);
            }
        }
        return null;
    }

    private MdsResponse applyOne(long logIndex, MdsRequest r, KvTxn txn) {
        return applyOne(logIndex, r, txn, null, null);
    }

    /**
     * Applies one mutation on its own buffer over the entry's transaction (one that fails writes
     * nothing). With {@code pack} set, {@code r} is one commit of that commit_pack: the namespace
     * accepts packed extents of that pack only, and the references a successful commit added to it
     * are counted into {@code packRefs[0]}.
     */
    private MdsResponse applyOne(long logIndex, MdsRequest r, KvTxn txn, CommitPackRequest pack, long[] packRefs) {
        BufferedTxn buf = new BufferedTxn(txn);
        try {
            Namespace ns = Namespace.live(buf);
            if (!rootKnown && ns.ensureRoot(r.getNowNs())) {
                rootKnown = true;
            }
            if (pack != null) {
                ns.inPack(pack.getOst(), pack.getBlockKey(), pack.getBlockLength());
            }
            MdsResponse resp = dispatch(ns, r, true, r.getNowNs());
            buf.flushTo(txn);
            if (pack != null) {
                packRefs[0] += ns.packRefsAdded();
            }
            return resp;
        } catch (FsException e) {
            if (log.isDebugEnabled()) {
                log.debug("log index {}: {} -> {}", logIndex, r.getOpCase(), e.getMessage());
            }
            return errorResponse(e.status(), message(e));
        }
    }

    /**
     * Answers a read-only request at the current epoch; a mutation sent here gets EINVAL. A
     * {@code batch_read} is answered with one response per request, in order, each with its own
     * status (one failing read does not fail the others); a batch inside a batch gets EINVAL.
     */
    @Override
    public byte[] query(byte[] request, KvReader reader) {
        MdsRequest r;
        try {
            r = MdsRequest.parseFrom(request);
        } catch (InvalidProtocolBufferException e) {
            return error(Status.EINVAL, "malformed MdsRequest: " + e.getMessage());
        }
        Namespace ns = Namespace.readOnly(reader);
        if (r.getOpCase() == MdsRequest.OpCase.BATCH_READ) {
            MdsResponse.Builder out = MdsResponse.newBuilder().setStatus(Status.OK);
            for (MdsRequest one : r.getBatchRead().getRequestsList()) {
                out.addBatch(queryOne(ns, one));
            }
            return out.build().toByteArray();
        }
        return queryOne(ns, r).toByteArray();
    }

    private static MdsResponse queryOne(Namespace ns, MdsRequest r) {
        try {
            if (r.getOpCase() == MdsRequest.OpCase.BATCH_READ) {
                throw new FsException(Status.EINVAL, "a batch_read inside a batch_read");
            }
            // a read is no log entry: directory leases run out by this peer's clock
            return dispatch(ns, r, false, System.currentTimeMillis() * 1_000_000L);
        } catch (FsException e) {
            return errorResponse(e.status(), message(e));
        }
    }

    private static String message(FsException e) {
        String m = e.getMessage();
        String prefix = e.status().name() + ": ";
        return m != null && m.startsWith(prefix) ? m.substring(prefix.length()) : (m == null ? "" : m);
    }

    private static byte[] error(Status s, String message) {
        return errorResponse(s, message).toByteArray();
    }

    private static MdsResponse errorResponse(Status s, String message) {
        return MdsResponse.newBuilder().setStatus(s).setMessage(message).build();
    }

    /**
     * The directory lease that keeps request {@code r} out at {@code now} (another session's, still
     * running, on a directory whose entries {@code r} reads or changes, or on the directory it
     * changes), or null. The rules: mds.proto {@code DirLeaseRequest}.
     */
    static DirLease leaseAgainst(Namespace ns, MdsRequest r, long now) {
        long s = r.getSession();
        long[] dirs = switch (r.getOpCase()) {
            case LOOKUP -> new long[] {r.getLookup().getParent()};
            case READDIR -> new long[] {r.getReaddir().getIno()};
            case CREATE -> new long[] {r.getCreate().getParent()};
            case MKDIR -> new long[] {r.getMkdir().getParent()};
            case SYMLINK -> new long[] {r.getSymlink().getParent()};
            case LINK -> new long[] {r.getLink().getNewParent()};
            case UNLINK -> new long[] {r.getUnlink().getParent()};
            case RMDIR -> new long[] {r.getRmdir().getParent(),
                    ns.childIno(r.getRmdir().getParent(), r.getRmdir().getName().toByteArray())};
            // and the directory a rename would replace: it must look empty to replace it, and under
            // another session's lease it can look empty while that session's creates are unsent
            // (helper-found: 5 of 5 runs lost the holder's last creates)
            case RENAME -> new long[] {r.getRename().getSrcParent(), r.getRename().getDstParent(),
                    ns.childIno(r.getRename().getDstParent(), r.getRename().getDstName().toByteArray())};
            case SETATTR -> new long[] {r.getSetattr().getIno()};
            case SETXATTR -> new long[] {r.getSetxattr().getIno()};
            case REMOVEXATTR -> new long[] {r.getRemovexattr().getIno()};
            case SETLAYOUT -> new long[] {r.getSetlayout().getIno()};
            default -> null;
        };
        if (dirs == null) {
            return null;
        }
        for (long d : dirs) {
            DirLease l = d == 0 ? null : ns.dirLeaseAgainst(d, s, now);
            if (l != null) {
                return l;
            }
        }
        return null;
    }

    private static MdsResponse leasedResponse(DirLease l) {
        return MdsResponse.newBuilder().setStatus(Status.LEASED).setDirLease(l)
                .setMessage("directory inode " + Long.toUnsignedString(l.getDir()) + " is leased to another client").build();
    }

    /** Answers {@code r} (a mutation only when {@code mutable}) at time {@code now} (ns since the Unix epoch). */
    private static MdsResponse dispatch(Namespace ns, MdsRequest r, boolean mutable, long now) {
        Caller c = r.getCaller();
        MdsResponse.Builder out = MdsResponse.newBuilder().setStatus(Status.OK);
        DirLease leased = leaseAgainst(ns, r, now);
        if (leased != null) {
            return leasedResponse(leased);
        }
        switch (r.getOpCase()) {
            // ---- reads
            case LOOKUP -> {
                Attr a;
                try {
                    a = ns.lookup(c, r.getLookup().getParent(), r.getLookup().getName().toByteArray());
                } catch (FsException e) {
                    Attr dir = e.status() == Status.ENOENT ? parentIfDir(ns, c, r.getLookup().getParent()) : null;
                    if (dir == null) {
                        throw e;
                    }
                    // An absent name answers with its directory's attributes from the same read: the
                    // client that creates it next (deferred create) takes the directory's layout from them.
                    return out.setStatus(Status.ENOENT).setMessage(message(e)).setAttr(dir).build();
                }
                out.setAttr(a);
                long stripe = a.getLayout().getStripeSize();
                if (r.getLookup().getWithExtents() && (a.getMode() & Namespace.S_IFMT) == Namespace.S_IFREG
                        && stripe > 0 && (a.getSize() <= stripe || r.getLookup().getWholeMap())) {
                    // a file of at most one stripe: its map is one extent at most (often inline bytes);
                    // whole_map: an open's lookup, which needs the map of any size
                    var q = r.getLookup();
                    if (q.getCachedIno() != 0 && q.getCachedIno() == a.getIno() && q.getCachedCtimeNs() == a.getCtimeNs()) {
                        // the client's map is this inode's at this ctime: nothing to read or send
                        out.setHasExtents(true).setExtentsCached(true);
                    } else {
                        out.addAllExtents(ns.getExtents(c, a.getIno(), 0, 0)).setHasExtents(true);
                    }
                }
            }
            case GETATTR -> out.setAttr(ns.getattr(c, r.getGetattr().getIno()));
            case READDIR -> {
                var q = r.getReaddir();
                Namespace.DirPage p = ns.readdir(c, q.getIno(), q.getAfter().toByteArray(), q.getLimit(), q.getPlus());
                // the directory's own attributes from the same snapshot: its ctime versions the
                // listing (every entry change moves it), so a client can tell that a listing it
                // holds is still the directory's (GranaryVfs.readdir)
                out.addAllEntries(p.entries()).setMore(p.more()).setAttr(ns.getattr(c, q.getIno()));
            }
            case READLINK -> out.setValue(com.google.protobuf.ByteString.copyFrom(ns.readlink(c, r.getReadlink().getIno())));
            case GETXATTR -> out.setValue(com.google.protobuf.ByteString.copyFrom(
                    ns.getxattr(c, r.getGetxattr().getIno(), r.getGetxattr().getName().toByteArray())));
            case LISTXATTR -> out.addAllNames(ns.listxattr(c, r.getListxattr().getIno()));
            case STATFS -> out.setStatfs(ns.statfs(c));
            case GET_EXTENTS -> {
                var q = r.getGetExtents();
                out.addAllExtents(ns.getExtents(c, q.getIno(), q.getFromStripe(), q.getToStripe()));
                // The attributes from the same consistent read: open() needs both (close-to-open).
                out.setAttr(ns.getattr(c, q.getIno()));
            }
            case LIST_OSTS -> out.addAllOsts(ns.listOsts(c));
            case LIST_OSS -> out.addAllOsses(ns.listOss(c));
            case GC_LIST -> {
                var q = r.getGcList();
                Namespace.GcPage p = ns.gcList(c, q.getFromSeq(), q.getLimit(), q.getDeadBeforeNs());
                out.addAllGc(p.blocks()).setMore(p.more());
            }
            case DIR_LEASE -> {
                var q = r.getDirLease();
                switch (q.getAction()) {
                    case STATUS -> out.setDirLease(ns.dirLease(q.getDir(), now));
                    case ACQUIRE, RELEASE, RECALL -> {
                        if (!mutable) {
                            throw new FsException(Status.EINVAL, "dir_lease " + q.getAction() + " is a mutation: send it as a write");
                        }
                        mutate(ns, r, c, now, out);
                    }
                    default -> throw new FsException(Status.EINVAL, "unknown dir_lease action " + q.getActionValue());
                }
            }
            case OP_NOT_SET -> throw new FsException(Status.EINVAL, "request without an operation");
            default -> {
                if (!mutable) {
                    throw new FsException(Status.EINVAL, r.getOpCase() + " is a mutation: send it as a write");
                }
                mutate(ns, r, c, now, out);
            }
        }
        return out.build();
    }

    /** The attributes of {@code ino} when it is a directory, else null (absent, or not a directory). */
    private static Attr parentIfDir(Namespace ns, Caller c, long ino) {
        try {
            Attr a = ns.getattr(c, ino);
            return (a.getMode() & Namespace.S_IFMT) == Namespace.S_IFDIR ? a : null;
        } catch (FsException e) {
            return null;
        }
    }

    private static void mutate(Namespace ns, MdsRequest r, Caller c, long now, MdsResponse.Builder out) {
        switch (r.getOpCase()) {
            case SETATTR -> out.setAttr(ns.setattr(c, r.getSetattr(), now));
            case CREATE -> {
                Namespace.CreateResult made = ns.createFile(c, r.getCreate(), now);
                out.setAttr(made.attr()).setCreated(made.created());
            }
            case MKDIR -> {
                var q = r.getMkdir();
                out.setAttr(ns.mkdir(c, q.getParent(), q.getName().toByteArray(), q.getMode(), now));
            }
            // Unlink, rmdir and rename answer with the parents' new attributes (mtime, ctime, nlink),
            // so a client keeps them cached instead of asking for them on its next path resolution.
            // They also answer with the removed inode's new attributes (nlink), which the client
            // caches for the file's other names even when it never looked up the removed one.
            case UNLINK -> {
                out.setRemovedAttr(ns.unlink(c, r.getUnlink().getParent(), r.getUnlink().getName().toByteArray(),
                        r.getUnlink().getExpectIno(), now));
                out.setAttr(ns.getattr(c, r.getUnlink().getParent()));
            }
            case RMDIR -> {
                out.setRemovedAttr(ns.rmdir(c, r.getRmdir().getParent(), r.getRmdir().getName().toByteArray(), now));
                out.setAttr(ns.getattr(c, r.getRmdir().getParent()));
            }
            case RENAME -> {
                Namespace.Renamed renamed = ns.rename(c, r.getRename(), now);
                out.setMovedAttr(renamed.moved());
                if (renamed.replaced() != null) {
                    out.setReplacedAttr(renamed.replaced());
                }
                out.setAttr(ns.getattr(c, r.getRename().getSrcParent()));
                if (r.getRename().getDstParent() != r.getRename().getSrcParent()) {
                    out.setDstParentAttr(ns.getattr(c, r.getRename().getDstParent()));
                }
            }
            case SYMLINK -> {
                var q = r.getSymlink();
                out.setAttr(ns.symlink(c, q.getParent(), q.getName().toByteArray(), q.getTarget().toByteArray(), now));
            }
            case LINK -> {
                var q = r.getLink();
                out.setAttr(ns.link(c, q.getIno(), q.getNewParent(), q.getNewName().toByteArray(), now));
            }
            case SETXATTR -> {
                var q = r.getSetxattr();
                ns.setxattr(c, q.getIno(), q.getName().toByteArray(), q.getValue().toByteArray(), q.getFlags(), now);
            }
            case REMOVEXATTR -> ns.removexattr(c, r.getRemovexattr().getIno(), r.getRemovexattr().getName().toByteArray(), now);
            case SETLAYOUT -> out.setLayout(ns.setLayout(c, r.getSetlayout().getIno(), r.getSetlayout().getLayout(), now));
            case LOCK -> {
                var q = r.getLock();
                Namespace.LockOutcome o = ns.lock(c, q.getIno(), q.getLock(), q.getTest(), q.getLeaseNs(), now);
                out.setLeaseExpired(o.leaseExpired());
                if (o.conflict() != null) {
                    out.setConflict(o.conflict());
                    if (!q.getTest()) {
                        out.setStatus(Status.EAGAIN).setMessage("lock held by another owner");
                    }
                }
            }
            case RENEW_SESSION -> out.setLeaseExpired(ns.renewSession(r.getRenewSession().getSession(),
                    r.getRenewSession().getLeaseNs(), now));
            case COMMIT_EXTENTS -> {
                var q = r.getCommitExtents();
                if (q.getAppend()) {
                    out.setAttr(ns.commitAppend(c, q.getIno(), q.getExtentsList(), q.getExpectSize(),
                            q.hasAppendBase() ? q.getAppendBase() : null, q.getNewSize(), q.getMtimeNs(), q.getKeepMtime(), now));
                } else {
                    out.setAttr(ns.commitExtents(c, q.getIno(), q.getExtentsList(), q.getBasesList(), q.getNewSize(), q.getMtimeNs(),
                            q.getKeepMtime(), now));
                }
            }
            case ALLOC_INODES -> out.setFirstIno(ns.allocInodes(r.getAllocInodes().getCount()));
            case REGISTER_OST -> ns.registerOst(c, r.getRegisterOst().getOst());
            case REGISTER_OSS -> ns.registerOss(c, r.getRegisterOss().getOss());
            case GC_DONE -> out.setGcDropped(ns.gcDone(c, r.getGcDone().getSeqsList()));
            case DIR_LEASE -> {
                var q = r.getDirLease();
                switch (q.getAction()) {
                    case ACQUIRE -> {
                        DirLease l = ns.acquireDirLease(c, q.getDir(), r.getSession(), q.getLeaseNs(), now);
                        out.setDirLease(l).setAttr(ns.getattr(c, q.getDir()));
                        if (l.getHolder() != r.getSession()) {
                            out.setStatus(Status.EAGAIN).setMessage("directory inode " + Long.toUnsignedString(q.getDir())
                                    + " is leased to another client");
                        }
                    }
                    case RELEASE -> ns.releaseDirLease(q.getDir(), r.getSession());
                    case RECALL -> out.setDirLease(ns.recallDirLease(q.getDir(), now));
                    default -> throw new FsException(Status.EINVAL, "dir_lease " + q.getAction() + " is a read");
                }
            }
            default -> throw new FsException(Status.ENOSYS, "operation " + r.getOpCase() + " is not supported");
        }
    }
}
