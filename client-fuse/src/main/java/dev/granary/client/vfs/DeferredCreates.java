package dev.granary.client.vfs;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import dev.granary.mds.FsException;
import dev.granary.mds.Layouts;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.Layout;
import dev.granary.mds.proto.MdsRequest;
import dev.granary.mds.proto.MdsResponse;
import dev.granary.mds.proto.OstInfo;
import dev.granary.mds.proto.Status;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Creates this client answered itself and sends to the MDS later ({@link ClientConfig#deferredCreate()}),
 * after CephFS's asynchronous create with delegated inode numbers: the MDS reserves a range of
 * inode numbers for this client ({@code alloc_inodes}, {@value #INODE_BATCH} at a time), a create
 * takes the next one, builds the new file's attributes as the MDS would (owner, times, the layout
 * its directory's template gives, {@link Layouts#resolve}) and returns; the create request goes
 * out later, once, in one of three ways:
 * <ul>
 *   <li>with the file's first data commit (close, fsync), as one {@code batch_write}: create and
 *       commit in one Raft entry ({@link #sendWith});</li>
 *   <li>alone, when anything else needs the file at the MDS: an operation on its inode or name, a
 *       listing or removal of its directory ({@link #materialize}, {@link #materializeDir});</li>
 *   <li>in the background once it is {@code window} old, so other clients see the name within the
 *       same window as any other change (the cache timeout); {@link #LEASED_SEND_NS} old when it
 *       was answered under a directory lease.</li>
 * </ul>
 * Each request names its inode number and {@code replace}: a file another client made under that
 * name meanwhile is unlinked first (the create came from an O_TRUNC open). An error the MDS
 * answers (the directory is gone, permissions changed, EIO) is kept for that inode and thrown
 * by the next commit or close of it; the entry then disappears here ({@link Listener#failed}).
 */
final class DeferredCreates implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(DeferredCreates.class);
    /** Inode numbers reserved per alloc_inodes. */
    static final int INODE_BATCH = 1024;
    /**
     * A create answered under a directory lease (exclusive) is sent in the background this soon
     * after its answer, ns, not a cache timeout later: the sooner it is at the MDS, the longer a
     * stall of this client it survives before the lease runs out ({@link DirLeases#LEASE_NS}).
     * At a few thousand creates per second one batch_write still carries hundreds.
     */
    static final long LEASED_SEND_NS = 100_000_000L;
    /** Creates per batch_write at most (background sends). */
    static final int MAX_BATCH = 256;

    /**
     * One deferred create: regular file {@code name} in {@code parent} as inode {@code ino}, with
     * {@code attr}; {@code exclusive}: sent as an exclusive create (made under a directory lease,
     * {@link DirLeases}), else as one that replaces an entry of the name (an O_TRUNC open).
     */
    record Pending(Caller caller, long parent, String name, long ino, Attr attr, long bornNanos, boolean exclusive) {}

    /** Told (on the sending thread) how a create ended. */
    interface Listener {
        /** The MDS made the file: {@code attr} is its answer (MDS times). */
        void created(Pending p, Attr attr);

        /** The MDS refused the create with {@code e}: the file does not exist. */
        void failed(Pending p, FsException e);
    }

    private final MdsClient mds;
    private final Listener listener;
    private final Duration window;
    private final Object lock = new Object();
    private final Map<Long, Pending> byIno = new LinkedHashMap<>();
    private final Map<GranaryVfs.DentryKey, Long> byName = new HashMap<>();
    /** Creates being sent, by inode: completes (normally) once the MDS answered. */
    private final Map<Long, CompletableFuture<Void>> sending = new HashMap<>();
    /** Refusals, by inode, thrown by the next commit or close of that inode. */
    private final Cache<Long, FsException> refused = Caffeine.newBuilder().executor(Runnable::run).expireAfterWrite(Duration.ofMinutes(10))
            .maximumSize(100_000).build();
    private final Object poolLock = new Object();
    private long nextIno;
    private long endIno;
    private List<Integer> ostIndices = List.of();
    private final ScheduledExecutorService timer;
    private final long periodMs;
    /** The background sender while creates are pending, else null (an idle client does not wake up): guarded by {@code lock}. */
    private ScheduledFuture<?> sender;
    private volatile boolean closed;

    /** Deferred creates over {@code mds}, sent in the background once {@code window} old (&gt; 0). */
    DeferredCreates(MdsClient mds, Duration window, Listener listener) {
        this.mds = mds;
        this.window = window;
        this.listener = listener;
        this.timer = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "granary-deferred-create");
            t.setDaemon(true);
            return t;
        });
        this.periodMs = Math.min(LEASED_SEND_NS / 2_000_000L, Math.max(20, window.toMillis() / 4));
    }

    /** True while the background sender runs: only while creates are pending (tests). */
    boolean sending() {
        synchronized (lock) {
            return sender != null;
        }
    }

    /**
     * Answers the create of regular file {@code name} (mode bits {@code mode}, without the type) in
     * directory {@code dir} for caller {@code c} here: returns the new file's attributes, owned by
     * the caller with the caller's gid, times {@code nowNs}. The caller has checked that the name is
     * free as far as this client knows and that {@code c} may write the directory. Returns null,
     * deferring nothing, when the directory has no usable layout template or no OST is known.
     * {@code exclusive}: the create is sent exclusive (see {@link Pending}).
     *
     * @throws FsException EIO when no inode numbers can be reserved (the MDS unreachable)
     */
    Attr create(Caller c, Attr dir, String name, int mode, long nowNs, boolean exclusive) {
        if (!dir.hasLayout() || dir.getLayout().getStripeSize() <= 0) {
            return null;
        }
        long ino = takeIno(c);
        List<Integer> osts;
        synchronized (poolLock) {
            osts = ostIndices;
        }
        Layout layout = Layouts.resolve(dir.getLayout(), ino, osts);
        if (layout.getStripeCount() <= 0) {
            return null; // no OST registered yet: the MDS's create says what that means
        }
        Attr a = Attr.newBuilder().setIno(ino).setMode(GranaryVfs.S_IFREG | (mode & 07777)).setUid(c.getUid())
                .setGid(c.getGid()).setNlink(1).setSize(0).setAtimeNs(nowNs).setMtimeNs(nowNs).setCtimeNs(nowNs)
                .setBlocks(0).setLayout(layout).setXattrCount(0).build();
        Pending p = new Pending(c, dir.getIno(), name, ino, a, System.nanoTime(), exclusive);
        synchronized (lock) {
            byIno.put(ino, p);
            if (sender == null && !closed) {
                sender = timer.scheduleWithFixedDelay(this::sendOld, periodMs, periodMs, TimeUnit.MILLISECONDS);
            }
            byName.put(new GranaryVfs.DentryKey(dir.getIno(), name), ino);
        }
        return a;
    }

    /** The next reserved inode number; reserves {@value #INODE_BATCH} more (one Raft write) when none is left. */
    private long takeIno(Caller c) {
        synchronized (poolLock) {
            if (nextIno == endIno) {
                long first = mds.allocInodes(c, INODE_BATCH);
                List<Integer> idx = new ArrayList<>();
                for (OstInfo o : mds.listOsts(c)) {
                    idx.add(o.getIndex());
                }
                ostIndices = List.copyOf(idx);
                nextIno = first;
                endIno = first + INODE_BATCH;
            }
            return nextIno++;
        }
    }

    /** True when the create of inode {@code ino} has not reached the MDS yet (pending or in flight). */
    boolean isPending(long ino) {
        synchronized (lock) {
            return byIno.containsKey(ino);
        }
    }

    /** The directory of the file whose create of inode {@code ino} is deferred here, or 0 when none is. */
    long pendingParent(long ino) {
        synchronized (lock) {
            Pending p = byIno.get(ino);
            return p == null ? 0 : p.parent();
        }
    }

    /** The attributes of the file deferred under {@code name} in {@code parent}, or null. */
    Attr pendingAttr(long parent, String name) {
        synchronized (lock) {
            Long ino = byName.get(new GranaryVfs.DentryKey(parent, name));
            Pending p = ino == null ? null : byIno.get(ino);
            return p == null ? null : p.attr();
        }
    }

    /** Creates answered here that the MDS has not answered yet (pending or in flight). */
    int size() {
        synchronized (lock) {
            return byIno.size();
        }
    }

    /** True when no create waits (rmdir skips its directory's lookup then). */
    boolean isEmpty() {
        synchronized (lock) {
            return byIno.isEmpty();
        }
    }

    /**
     * Sends the create of {@code ino} now if it is deferred, and waits until the MDS answered (also
     * when another thread is sending it).
     *
     * @throws FsException the MDS's refusal of that create (once, then forgotten)
     */
    void materialize(long ino) {
        sendWith(ino, null);
    }

    /** Sends the deferred create of {@code name} in {@code parent}, if any, and waits; as {@link #materialize}. */
    void materializeName(long parent, String name) {
        Long ino;
        synchronized (lock) {
            ino = byName.get(new GranaryVfs.DentryKey(parent, name));
        }
        if (ino != null) {
            materialize(ino);
        }
    }

    /**
     * Sends every deferred create in directory {@code parent} (a listing or rmdir of it must see
     * them) in batches and waits; refusals are reported to the listener, not thrown here.
     */
    void materializeDir(long parent) {
        List<Long> inos = new ArrayList<>();
        synchronized (lock) {
            for (Pending p : byIno.values()) {
                if (p.parent() == parent) {
                    inos.add(p.ino());
                }
            }
        }
        if (!inos.isEmpty()) {
            sendAndWait(inos);
        }
    }

    /**
     * Sends the create of {@code ino}, when still deferred, together with {@code commit} (the first
     * data commit of that file; null: none) as one Raft entry, or waits for the thread sending it;
     * returns the commit's answer, or null when the create is not deferred here (the caller sends
     * the commit itself) or there is no commit.
     *
     * @throws FsException the create's refusal, or the commit's errno
     */
    MdsResponse sendWith(long ino, MdsRequest commit) {
        MdsResponse r = sendAllWith(List.of(ino), commit);
        throwRefusal(ino); // the create's own errno, not the commit's ENOENT that follows from it
        return r == null ? null : MdsClient.check(r);
    }

    /**
     * Sends the still deferred creates of {@code inos} and then {@code extra} as one Raft entry
     * (a pack's commit, which needs its files to exist), waiting for creates other threads are
     * sending; returns {@code extra}'s answer, or null when none of the creates was left to send
     * here (the caller sends {@code extra} itself). A refused create is kept for its file's
     * {@link #materialize}; its commit in {@code extra} then answers ENOENT.
     *
     * @throws FsException when the batch itself failed (every create of it is then refused too)
     */
    MdsResponse sendAllWith(List<Long> inos, MdsRequest extra) {
        List<Pending> mine = new ArrayList<>();
        CompletableFuture<Void> other = claim(inos, mine);
        if (other != null) {
            other.join(); // before extra: its commits need those files at the MDS
        }
        return mine.isEmpty() ? null : send(mine, extra);
    }

    private void throwRefusal(long ino) {
        FsException e = refused.asMap().remove(ino);
        if (e != null) {
            throw e; // thrown once: it left the map
        }
    }

    /**
     * Claims the still unsent creates among {@code inos} into {@code mine} (the caller sends them);
     * returns a future of one of the others already being sent, or null.
     */
    private CompletableFuture<Void> claim(List<Long> inos, List<Pending> mine) {
        CompletableFuture<Void> other = null;
        synchronized (lock) {
            for (long ino : inos) {
                CompletableFuture<Void> f = sending.get(ino);
                if (f != null) {
                    other = other == null ? f : CompletableFuture.allOf(other, f);
                    continue;
                }
                Pending p = byIno.get(ino);
                if (p != null) {
                    mine.add(p);
                    sending.put(ino, new CompletableFuture<>());
                }
            }
        }
        return other;
    }

    /** Claims and sends the creates of {@code inos} in batches of {@value #MAX_BATCH}, and waits for those others send. */
    private void sendAndWait(List<Long> inos) {
        List<Pending> mine = new ArrayList<>();
        CompletableFuture<Void> other = claim(inos, mine);
        for (int i = 0; i < mine.size(); i += MAX_BATCH) {
            send(mine.subList(i, Math.min(mine.size(), i + MAX_BATCH)), null);
        }
        if (other != null) {
            other.join();
        }
    }

    /**
     * Sends claimed creates {@code ps} (and {@code extra} after them, when not null) as one
     * batch_write; records each create's outcome; returns {@code extra}'s answer (or null).
     */
    private MdsResponse send(List<Pending> ps, MdsRequest extra) {
        List<MdsRequest> reqs = new ArrayList<>(ps.size() + 1);
        for (Pending p : ps) {
            reqs.add(mds.createRequest(p.caller(), p.parent(), Names.encode(p.name()), p.attr().getMode(), p.ino(),
                    !p.exclusive(), p.exclusive()));
        }
        if (extra != null) {
            reqs.add(extra);
        }
        List<MdsResponse> answers;
        try {
            answers = mds.batchWrite(reqs);
            if (answers.size() != reqs.size()) {
                throw new FsException(Status.EIO, "the MDS answered " + answers.size() + " of " + reqs.size() + " requests");
            }
        } catch (FsException e) {
            answers = null;
            for (Pending p : ps) {
                done(p, null, e);
            }
            throw e;
        } catch (RuntimeException e) {
            FsException fe = new FsException(Status.EIO, "deferred create failed: " + GranaryVfs.rootMessage(e), e);
            for (Pending p : ps) {
                done(p, null, fe);
            }
            throw fe;
        }
        for (int i = 0; i < ps.size(); i++) {
            MdsResponse r = answers.get(i);
            done(ps.get(i), r.getStatus() == Status.OK ? r.getAttr() : null,
                    r.getStatus() == Status.OK ? null : new FsException(r.getStatus(), "deferred create of '" + ps.get(i).name()
                            + "' refused: " + r.getMessage()));
        }
        return extra == null ? null : answers.get(answers.size() - 1);
    }

    /** Records one create's outcome: the listener first, then the entry leaves the maps and waiters wake. */
    private void done(Pending p, Attr made, FsException error) {
        try {
            if (error == null) {
                listener.created(p, made);
            } else {
                if (p.exclusive()) {
                    // answered under a directory lease, and the application was told it was made:
                    // the lease ran out first (this client stalled longer than the lease's margin)
                    LOG.error("{}; this client had answered it under the directory's lease, which ran out before the "
                            + "create reached the MDS (was this client stalled?): the file is lost", error.getMessage());
                } else {
                    LOG.warn("{}", error.getMessage());
                }
                refused.put(p.ino(), error);
                listener.failed(p, error);
            }
        } finally {
            CompletableFuture<Void> f;
            synchronized (lock) {
                byIno.remove(p.ino());
                byName.remove(new GranaryVfs.DentryKey(p.parent(), p.name()), p.ino());
                f = sending.remove(p.ino());
            }
            if (f != null) {
                f.complete(null);
            }
        }
    }

    /** Background: sends the creates older than the window ({@link #LEASED_SEND_NS} for those answered under a lease). */
    private void sendOld() {
        try {
            long now = System.nanoTime();
            long cutoff = now - window.toNanos();
            long leasedCutoff = now - LEASED_SEND_NS;
            List<Long> old = new ArrayList<>();
            synchronized (lock) {
                if (byIno.isEmpty() && sender != null) { // idle: a create that comes later starts it again
                    sender.cancel(false);
                    sender = null;
                    return;
                }
                for (Pending p : byIno.values()) {
                    if (p.bornNanos() - (p.exclusive() ? leasedCutoff : cutoff) <= 0) {
                        old.add(p.ino());
                    }
                }
            }
            if (!old.isEmpty()) {
                sendAndWait(old);
            }
        } catch (RuntimeException e) {
            LOG.warn("sending deferred creates failed: {}", GranaryVfs.rootMessage(e));
        }
    }

    /** Sends every deferred create (waits), then stops the background sender. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        timer.shutdownNow();
        List<Long> all;
        synchronized (lock) {
            all = new ArrayList<>(byIno.keySet());
        }
        try {
            sendAndWait(all);
        } catch (RuntimeException e) {
            LOG.warn("sending deferred creates at close failed: {}", GranaryVfs.rootMessage(e));
        }
    }
}
