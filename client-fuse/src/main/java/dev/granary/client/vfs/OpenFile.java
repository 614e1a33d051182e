package dev.granary.client.vfs;

import com.google.protobuf.ByteString;
import dev.granary.mds.Extents;
import dev.granary.mds.FsException;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.Extent;
import dev.granary.mds.proto.Layout;
import dev.granary.mds.proto.MdsResponse;
import dev.granary.mds.proto.Status;
import dev.granary.mds.proto.StripeBase;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One open regular file (a FUSE file handle): its inode, layout, open flags, the extent map seen
 * at open, and its write buffers.
 *
 * <p><b>Reads.</b> {@code [off, off+len)} is clamped at the file size and split by stripe
 * (stripe k = bytes {@code [k*S, (k+1)*S)} on OST {@code osts[k % stripe_count]}); all stripes
 * are fetched in parallel through {@link dev.granary.oss.BlockIo}; a missing extent, or bytes past
 * an extent's length, read as zeros (sparse files). The handle's own unflushed writes are visible
 * (read your writes). A sequential reader (a read starting where the previous one ended) fetches
 * whole stripes and keeps up to {@link ClientConfig#readaheadStripes()} next stripes in flight;
 * random access fetches only the bytes asked for and starts no readahead.
 *
 * <p><b>Writes.</b> Each written stripe gets a buffer of up to S bytes (reserved from the
 * client-wide {@link DirtyBudget}); a completely written stripe is uploaded as a new immutable
 * block right away while the writer continues; partially written stripes are uploaded at
 * flush/fsync/release (or earlier when memory is short), after a read-modify-write when the
 * stripe had data outside the written range. When all uploads are done, one
 * {@code MdsClient.commitExtents} publishes the new extents with the size where the written
 * bytes end and the mtime. A stripe not written whole is committed on the condition that it still
 * has the extent its block was built on; if another writer changed it since, the handle lays the
 * bytes it wrote ({@link WrittenRanges}) over the live extent and commits again: a write changes
 * no byte it did not write (POSIX write(2); NFS sends only the written ranges).
 *
 * <p><b>Appends.</b> A handle opened with O_APPEND does not place its writes itself: each write
 * is queued whole, and queued writes are committed in order (when a chunk has queued, at flush,
 * fsync and release) at the end of the file as the MDS has it at commit time: read the end,
 * build the blocks of the stripes from there (the bytes before the end in its stripe are copied
 * from that stripe's extent), upload, and commit on the condition that the file still ends there
 * with that extent ({@code MdsClient.commitAppend}); when another client or handle appended first,
 * the blocks are dropped and the write is placed again at the new end. So appenders on any number
 * of clients never overwrite one another, and no write is split. A read on such a handle first
 * commits its queued writes and reloads the extent map.
 *
 * <p><b>Consistency.</b> Close-to-open: the extent map is loaded at open (so a fresh open sees
 * what another client closed) and updated after this handle's own commits and those of the
 * other handles of the same inode in this client.
 *
 * <p>Thread-safe: state is guarded by one lock, which is not held while waiting for reads.
 * Errors: {@link FsException} with EIO for block I/O failures (a failed upload makes the handle
 * fail every later write/flush with EIO: the data could not be saved), EBADF for writes on a
 * read-only handle.
 */
public final class OpenFile {
    private static final Logger LOG = LoggerFactory.getLogger(OpenFile.class);

    private final GranaryVfs vfs;
    private final long fh;
    private final long ino;
    private final int flags;
    private final Caller opener;
    private final Layout layout;
    private final long stripeSize;
    private final ReentrantLock lock = new ReentrantLock();
    /** Held through a whole commit of the stripe buffers, the other handles' update included (never while holding {@link #lock}). */
    private final ReentrantLock commitLock = new ReentrantLock();

    // All fields below are guarded by lock.
    private final Map<Long, Extent> committed = new HashMap<>();
    private final Map<Long, Extent> uploaded = new HashMap<>();
    private final Map<Long, Upload> uploading = new HashMap<>();
    private final Map<Long, StripeBuffer> dirty = new HashMap<>();
    private final Map<Long, Prefetch> window = new HashMap<>();
    /**
     * For each stripe in {@link #uploaded}: the extent its new block was built on and the bytes
     * of it this handle wrote (the condition of the commit, see {@link StripeWrite}); an upload
     * still running carries its own ({@link Upload}) until it is reaped.
     */
    private final Map<Long, StripeWrite> unsaved = new HashMap<>();
    private long size;
    private long writeSeq;
    private long committedSeq;
    private long lastWriteNs;
    /** utimensat set the mtime after the last write: the next commit must keep it. */
    private volatile boolean mtimeSetExplicitly;
    private FsException uploadError;
    /**
     * Where a sequential reader's next read starts (0 at open: a first read at offset 0 starts a
     * stream). A read within {@link #SEQUENTIAL_SLACK} of it still counts as sequential: the
     * kernel's readahead sends several reads at once and they may arrive out of order.
     */
    private long nextSequentialOffset = 0;
    private static final long SEQUENTIAL_SLACK = 256L << 10; // two 128 KiB FUSE reads in flight
    private boolean closed;

    /** O_APPEND handle: writes are queued and placed at the MDS's end of file at commit (class comment). */
    private final boolean append;
    /** Queued O_APPEND writes, whole, in order (guarded by lock). */
    private final List<byte[]> appendQueue = new ArrayList<>();
    private long appendQueued;
    private int appendReserved;
    /** Where the file ended at this handle's last look (a first guess for the next append's stripe). */
    private long appendEnd;
    /** Other clients' appends are not in the extent map: reload it before the next read. */
    private boolean appendMapStale;
    /** The append commits started so far, one after the other, on the io executor (never completes exceptionally). */
    private CompletableFuture<Void> appendChain = CompletableFuture.completedFuture(null);

    /**
     * A dirty stripe: bytes [lo, hi) written; when baseLoaded, the rest holds the old content up to
     * baseLen. The array grows on demand (doubling, up to the stripe size) so that a small file
     * does not cost a whole stripe of memory; bytes past its length are zeros.
     */
    private static final class StripeBuffer {
        private static final int INITIAL = 64 << 10;
        final int reserved;
        final int capacityMax;
        byte[] data;
        int lo = Integer.MAX_VALUE;
        int hi = 0;
        boolean baseLoaded;
        int baseLen;
        /** The extent whose bytes were loaded as the base (null: a hole); meaningful when baseLoaded. */
        Extent loadedFrom;
        /** The bytes written into this buffer (when not baseLoaded: exactly [lo, hi)). */
        final WrittenRanges written = new WrittenRanges();

        /** The extent whose bytes a block of this buffer holds around its writes: the loaded base, else {@code base} (the stripe's base now). */
        Extent builtOn(Extent base) {
            return baseLoaded ? loadedFrom : base;
        }

        StripeBuffer(int initial, int capacityMax, int reserved) {
            this.capacityMax = capacityMax;
            this.data = new byte[Math.min(capacityMax, Math.max(INITIAL, initial))];
            this.reserved = reserved;
        }

        /** Makes bytes [0, n) addressable. */
        void ensure(int n) {
            if (n > data.length) {
                data = Arrays.copyOf(data, (int) Math.min(capacityMax, Math.max(n, 2L * data.length)));
            }
        }

        /** Bytes [from, from+len) into dst at dstPos; past the array they are zeros (dst is fresh). */
        void copyOut(int from, byte[] dst, int dstPos, int len) {
            int n = Math.max(0, Math.min(len, data.length - from));
            System.arraycopy(data, from, dst, dstPos, n);
        }

        /** Bytes [0, n) as a new array of exactly n bytes (zeros past what was written). */
        byte[] prefix(int n) {
            return n == data.length ? data : Arrays.copyOf(data, n);
        }
    }

    /**
     * A block being uploaded for {@code stripe}: {@code builtOn} is the extent (null: none) whose
     * bytes it holds around {@code written}, the bytes of its buffer.
     */
    private record Upload(long stripe, CompletableFuture<Extent> future, Extent builtOn, WrittenRanges written) {}

    /**
     * The writes of one stripe on their way to a commit: {@code base} is the extent (null: none)
     * whose bytes the new block holds around {@code written}. Unless {@code written} covers the
     * whole stripe, the commit applies only while the stripe still has {@code base} at the MDS;
     * when another writer changed it meanwhile, {@code written} is laid over the newer extent and
     * the commit tried again ({@link #relayOnLiveBases}).
     */
    private static final class StripeWrite {
        Extent base;
        final WrittenRanges written = new WrittenRanges();

        StripeWrite(Extent base) {
            this.base = base;
        }
    }

    /** A stripe of the read window: its block, the bytes being fetched, and what it holds of the client's {@link ReadaheadBudget}. */
    private record Prefetch(String blockKey, CompletableFuture<ByteBuffer> data, long reserved) {}

    /** Drops stripe k from the read window and returns its bytes to the budget (lock held). */
    private void dropStripe(long k) {
        Prefetch p = window.remove(k);
        if (p != null) {
            vfs.readaheadBudget().release(p.reserved());
        }
    }

    /** Drops the window's stripes whose index {@code drop} accepts (lock held). */
    private void dropStripes(java.util.function.LongPredicate drop) {
        window.entrySet().removeIf(en -> {
            if (drop.test(en.getKey())) {
                vfs.readaheadBudget().release(en.getValue().reserved());
                return true;
            }
            return false;
        });
    }

    /** Empties the read window (lock held). */
    private void clearWindow() {
        dropStripes(k -> true);
    }

    private final Attr opened;

    OpenFile(GranaryVfs vfs, long fh, Attr attr, int flags, Caller opener, List<Extent> extents) {
        this.vfs = vfs;
        this.fh = fh;
        this.ino = attr.getIno();
        this.opened = attr;
        this.flags = flags;
        this.opener = opener;
        this.layout = attr.getLayout();
        if (layout.getStripeSize() <= 0 || layout.getStripeCount() <= 0 || layout.getOstsCount() < layout.getStripeCount()) {
            throw new FsException(Status.EIO, "inode " + ino + " has an invalid layout: " + layout.toString().replace('\n', ' '));
        }
        if (layout.getStripeSize() > Integer.MAX_VALUE - 64) {
            throw new FsException(Status.EFBIG, "stripe size " + layout.getStripeSize() + " bytes is above the client's 2 GiB limit");
        }
        this.stripeSize = layout.getStripeSize();
        this.size = attr.getSize();
        this.append = (flags & GranaryVfs.O_APPEND) != 0;
        this.appendEnd = attr.getSize();
        for (Extent e : extents) {
            committed.put(e.getStripeIndex(), e);
        }
        this.mapCtimeNs = attr.getCtimeNs();
        this.knownCtimeNs = mapCtimeNs;
    }

    /**
     * The MDS ctime (ns) of the last whole map this handle installed from the MDS (at open, or
     * {@link #installMap}); commits of this client do not raise it, since they bring only the
     * stripes they wrote.
     */
    private long mapCtimeNs;

    /**
     * The MDS ctime (ns) of the newest version of the file this handle's map holds bytes of: its
     * {@link #mapCtimeNs}, or a later commit of this client it took (its own, or another
     * handle's through {@link #peerCommitted}). {@link #adoptNewerMap} refuses a map no newer than
     * this: that map was read before the commit, and taking it would undo the commit here.
     * Regression: a reader's size fell back from 42,300 to 31,500 bytes when a later open shared
     * the map it had read before a peer's commit, and a read at 18,300 then hit the end of file
     * although the write there had returned ({@code GranaryVfsTest#aReadSeesEveryWrite...}, 1 run
     * in 150 under load).
     */
    private long knownCtimeNs;

    /**
     * True while this read-only handle holds no extent map yet: its open found the file unchanged
     * since the version the kernel's page cache holds, so the MDS sent the attributes only
     * ({@link #deferMap}); the map is read at the first read that reaches the client
     * ({@link #loadDeferredMap}). Guarded by {@link #lock}.
     */
    private boolean mapDeferred;

    /** The directory (inode) of the file a deferred handle was opened through. */
    private long deferredDir;

    /**
     * Marks this new handle (not yet given out) as holding no map: its reads that the kernel's
     * page cache does not answer read the map from the MDS first. For read-only handles whose
     * open found the file at the version those pages hold; {@code dirIno}: the directory it was
     * opened in (a read that needs the map tells the client the pages there are gone).
     */
    void deferMap(long dirIno) {
        lock.lock();
        try {
            mapDeferred = true;
            deferredDir = dirIno;
        } finally {
            lock.unlock();
        }
    }

    /** Whether this handle still waits for its extent map ({@link #deferMap}). */
    boolean mapDeferred() {
        lock.lock();
        try {
            return mapDeferred;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Reads the extent map a deferred handle ({@link #deferMap}) needs now (lock held), and
     * installs it when it is the file this handle opened: the same ctime, or a later commit of
     * this client that reached the handle, or a change of attributes only (mtime and size as at
     * the open, and no commit of this client since). Otherwise another client changed the file's
     * bytes after the open, and the pages the kernel still holds are the open's version: mixing
     * them with the newer bytes would tear the file, so the read fails instead.
     *
     * @throws FsException ESTALE when another client changed or removed (or replaced by rename)
     *     the file since the open (its open's bytes are no longer at the MDS), EIO (MDS)
     */
    private void loadDeferredMap() {
        if (!mapDeferred) {
            return;
        }
        MdsClient.FileMap m;
        try {
            m = vfs.mds().getFileMap(opener, ino);
        } catch (FsException e) {
            throw removedIfGone(e);
        }
        vfs.deferredMapLoaded(deferredDir);
        Attr now = m.attr();
        boolean same = now.getCtimeNs() == knownCtimeNs
                || (knownCtimeNs == mapCtimeNs && now.getSize() == opened.getSize()
                        && now.getMtimeNs() == opened.getMtimeNs()); // chmod, utimes of atime, xattrs, links
        if (!same) {
            throw new FsException(Status.ESTALE, "inode " + Long.toUnsignedString(ino) + " was changed by another client since"
                    + " this descriptor's open, and the kernel no longer holds the pages of the version it opened: open it again");
        }
        installMap(now, m.extents());
    }

    /** A handle's committed size and extent map, and the MDS ctime (ns) of the map it came from. */
    record CommittedMap(long size, Map<Long, Extent> byStripe, long ctimeNs) {}

    /**
     * The MDS ctime (ns) of the last whole extent map this handle installed: the version of the
     * file its reads serve (moved by another open's newer map, {@link #adoptNewerMap}; this
     * client's commits move {@link #knownCtimeNs} instead).
     */
    public long mapCtimeNs() {
        lock.lock();
        try {
            return mapCtimeNs;
        } finally {
            lock.unlock();
        }
    }

    /** This handle's committed size and map (a new handle's: what its open read from the MDS). */
    CommittedMap committedMap() {
        lock.lock();
        try {
            loadDeferredMap();
            return new CommittedMap(size, Map.copyOf(committed), mapCtimeNs);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Another open of this inode on this client read the file from the MDS, newer than this
     * handle's map: the handle takes that size and map, so that its reads (and the kernel's
     * readahead through it) fill the node's page cache, which every descriptor of the file on
     * this client shares, with the bytes the open saw. Before, a descriptor opened before another
     * client's change refilled the page cache with the old bytes after the open had dropped
     * them, every later open kept those pages (their size and mtime were the new file's), and a
     * store through a shared mapping wrote the old pages back whole. NFS clients behave the same
     * way: a revalidation at open drops the inode's pages for every descriptor. A handle holding
     * writes takes the new extents of the stripes it holds no bytes of (and, as a commit of a
     * peer handle does, the base of a buffered stripe whose old bytes it has not read yet), and
     * the size when larger; a handle with appends queued keeps its map (its commits place them
     * at the MDS's end and reload it). Not taken when the map is older than this handle's
     * ({@code m.ctimeNs}) or when {@code stillCurrent} says a commit of this client reached the
     * handles since {@code m} was read.
     *
     * @return true when the handle's map changed
     */
    boolean adoptNewerMap(CommittedMap m, BooleanSupplier stillCurrent) {
        lock.lock();
        try {
            if (closed || appendsPending() || m.ctimeNs() <= knownCtimeNs || !stillCurrent.getAsBoolean()) {
                return false;
            }
            mapCtimeNs = m.ctimeNs();
            knownCtimeNs = m.ctimeNs();
            if (m.size() == size && m.byStripe().equals(committed)) {
                return false; // the same file: keep the read window
            }
            if (nothingUncommitted()) {
                installMap(m.size(), m.byStripe().values(), m.ctimeNs());
                return true;
            }
            takeStripesNotHeld(m.byStripe(), m.size());
            return true;
        } finally {
            lock.unlock();
        }
    }

    /**
     * A handle holding writes takes the extents of {@code fresh} (stripe index -> extent of the
     * file as the MDS has it) for the stripes it holds no bytes of, and as the base of a buffered
     * stripe whose old bytes it has not read yet, and {@code newSize} when larger than its size
     * (lock held).
     */
    private void takeStripesNotHeld(Map<Long, Extent> fresh, long newSize) {
        Set<Long> stripes = new HashSet<>(committed.keySet());
        stripes.addAll(fresh.keySet());
        for (long k : stripes) {
            StripeBuffer buf = dirty.get(k);
            if (uploading.containsKey(k) || uploaded.containsKey(k) || (buf != null && buf.baseLoaded)) {
                continue; // its bytes are this handle's, on the base it read
            }
            Extent e = fresh.get(k);
            if (e == null) {
                committed.remove(k);
            } else {
                committed.put(k, e);
            }
            dropStripe(k);
        }
        size = Math.max(size, newSize);
    }

    /** Lock owner of the flock(2) lock this open file holds in the MDS (0: none). */
    private volatile long flockOwner;

    /** The flock owner this handle holds a lock for, 0 when none. */
    long flockOwner() {
        return flockOwner;
    }

    void flockOwner(long owner) {
        flockOwner = owner;
    }

    /** The FUSE file handle number. */
    public long fh() {
        return fh;
    }

    /** Records that the file's mtime was set explicitly (utimensat) after this handle's last write. */
    void mtimeSetExplicitly() {
        mtimeSetExplicitly = true;
    }

    /** The attributes the open (or create) of this handle had from the MDS. */
    Attr openedAttr() {
        return opened;
    }

    /** The inode number. */
    public long ino() {
        return ino;
    }

    /** The open(2) flags. */
    public int flags() {
        return flags;
    }

    /** The file's layout. */
    public Layout layout() {
        return layout;
    }

    /** The size in bytes as this handle sees it (including its own unflushed writes). */
    public long size() {
        lock.lock();
        try {
            return size;
        } finally {
            lock.unlock();
        }
    }

    /** True when anything was written through this handle since it was opened (committed or not). */
    public boolean hasWritten() {
        lock.lock();
        try {
            return writeSeq != 0;
        } finally {
            lock.unlock();
        }
    }

    /** True when this handle holds writes not yet committed to the MDS. */
    /**
     * When this handle last wrote data it has not committed yet (ns since the Unix epoch, the mtime
     * its commit will set), or 0: nothing uncommitted, or utimensat set the mtime since.
     */
    long uncommittedWriteNs() {
        lock.lock();
        try {
            return writeSeq != committedSeq && !mtimeSetExplicitly ? lastWriteNs : 0;
        } finally {
            lock.unlock();
        }
    }

    public boolean hasUncommittedWrites() {
        lock.lock();
        try {
            return writeSeq != committedSeq;
        } finally {
            lock.unlock();
        }
    }

    /**
     * True while a read or stat through another handle of the inode must wait for this one
     * ({@link #flush} does): it holds uncommitted writes, or a commit of it has reached the MDS
     * but not yet the other handles (their extent maps and sizes), or append commits are running.
     * Regression (helper-found): a read through another descriptor in that window, after the
     * writing thread's pwrite returned, read zeros or hit the end of file.
     */
    boolean mustFlushForPeers() {
        if (commitLock.isLocked()) {
            return true;
        }
        lock.lock();
        try {
            return writeSeq != committedSeq || !appendChain.isDone();
        } finally {
            lock.unlock();
        }
    }

    /**
     * True when this handle holds uncommitted bytes that a write of stripes {@code [first, last]}
     * through another handle of the inode must follow: bytes of those stripes (buffered, uploading
     * or uploaded), any bytes when {@code anyStripe}, or queued appends (they go at the end, which
     * the other write may move).
     */
    boolean holdsUncommitted(long first, long last, boolean anyStripe) {
        lock.lock();
        try {
            if (nothingUncommitted()) {
                return false;
            }
            if (anyStripe || appendsPending()) {
                return true;
            }
            return anyStripeIn(dirty, first, last) || anyStripeIn(uploading, first, last) || anyStripeIn(uploaded, first, last);
        } finally {
            lock.unlock();
        }
    }

    /** True when no write of this handle waits for a commit (lock held). */
    private boolean nothingUncommitted() {
        return writeSeq == committedSeq && dirty.isEmpty() && uploading.isEmpty() && uploaded.isEmpty();
    }

    /** True when O_APPEND writes are queued or their commits are running (lock held). */
    private boolean appendsPending() {
        return !appendQueue.isEmpty() || !appendChain.isDone();
    }

    /** True when {@code byStripe} has a stripe index in {@code [first, last]}. */
    private static boolean anyStripeIn(Map<Long, ?> byStripe, long first, long last) {
        for (long k : byStripe.keySet()) {
            if (k >= first && k <= last) {
                return true;
            }
        }
        return false;
    }

    /**
     * Moves this handle's buffered stripes in {@code [first, last]} to {@code to}, another handle
     * of the inode about to write there: it writes on top, so the bytes stay in time order without
     * a commit per alternation of the writers. Both handles' locks are held (this one's first), so
     * no reader sees the bytes in neither handle; the caller serializes the inode's writers, so two
     * hand-overs never take the locks in opposite orders. Returns true when this handle holds
     * nothing uncommitted in the range afterwards; false, moving nothing, when one of those stripes
     * is being uploaded or waits for its commit, or appends are queued: the caller then commits
     * this handle instead. A handle left with nothing uncommitted counts as committed: what it
     * wrote is now the taker's to commit.
     */
    boolean handOverTo(OpenFile to, long first, long last) {
        commitLock.lock(); // a commit of this handle in flight has reached the other handles first
        lock.lock();
        try {
            if (nothingUncommitted()) {
                return true;
            }
            if (appendsPending() || anyStripeIn(uploading, first, last) || anyStripeIn(uploaded, first, last)) {
                return false;
            }
            Map<Long, StripeBuffer> moved = new HashMap<>();
            Iterator<Map.Entry<Long, StripeBuffer>> it = dirty.entrySet().iterator();
            while (it.hasNext()) {
                Map.Entry<Long, StripeBuffer> en = it.next();
                if (en.getKey() >= first && en.getKey() <= last) {
                    moved.put(en.getKey(), en.getValue());
                    it.remove();
                }
            }
            if (moved.isEmpty()) {
                return true;
            }
            to.adopt(moved, size, lastWriteNs);
            if (dirty.isEmpty() && uploading.isEmpty() && uploaded.isEmpty()) {
                committedSeq = writeSeq;
            }
            vfs.handedOver(); // before the locks go: a stat that looked at both handles meanwhile looks again
            return true;
        } finally {
            lock.unlock();
            commitLock.unlock();
        }
    }

    /**
     * Takes over stripe buffers from another handle ({@link #handOverTo}, which holds that
     * handle's lock): they become this handle's uncommitted writes, committed at its flush or at
     * any flush of the inode's handles on this client ({@code GranaryVfs} flushes them together).
     * A buffer this handle already holds for a stripe is laid over the one handed over.
     */
    private void adopt(Map<Long, StripeBuffer> buffers, long giverSize, long giverWriteNs) {
        lock.lock();
        try {
            for (Map.Entry<Long, StripeBuffer> en : buffers.entrySet()) {
                long k = en.getKey();
                StripeBuffer in = en.getValue();
                StripeBuffer mine = dirty.get(k);
                if (mine != null && !mine.written.isEmpty()) {
                    WrittenRanges both = new WrittenRanges();
                    both.addAll(in.written);
                    both.addAll(mine.written);
                    if (!in.baseLoaded && both.intervals() > 1) {
                        loadBase(k, in); // the bytes between the two handles' writes are the old ones
                    }
                    in.ensure(mine.written.end());
                    mine.written.copy(mine.data, in.data); // only what this handle wrote, not its loaded base
                    in.written.addAll(mine.written);
                    in.lo = Math.min(in.lo, mine.lo);
                    in.hi = Math.max(in.hi, mine.hi);
                }
                if (mine != null) {
                    vfs.dirtyBudget().release(mine.reserved);
                }
                dirty.put(k, in);
                dropStripe(k);
            }
            size = Math.max(size, giverSize);
            lastWriteNs = Math.max(lastWriteNs, giverWriteNs);
            writeSeq++;
        } finally {
            lock.unlock();
        }
    }

    /** True on the first call for this handle only (its first write(2)). */
    boolean firstWrite() {
        return written.compareAndSet(false, true);
    }

    private final java.util.concurrent.atomic.AtomicBoolean written = new java.util.concurrent.atomic.AtomicBoolean();

    /** Whether this handle was opened write-only (O_WRONLY). */
    boolean isWriteOnly() {
        return (flags & GranaryVfs.O_ACCMODE) == GranaryVfs.O_WRONLY;
    }

    /** Whether this handle was opened with O_APPEND. */
    boolean isAppend() {
        return append;
    }

    /** The stripe index that file offset {@code offset} (bytes) falls in. */
    long stripeOf(long offset) {
        return offset / stripeSize;
    }

    private int ostOf(long stripe) {
        return layout.getOsts((int) (stripe % layout.getStripeCount()));
    }

    // ------------------------------------------------------------------ reads

    /**
     * Reads up to {@code length} bytes at {@code offset}; returns fewer at end of file, none past it.
     *
     * @throws FsException EINVAL for a negative offset/length, EIO when a block read fails
     */
    public byte[] read(long offset, int length) {
        List<ByteBuffer> parts = readBuffers(offset, length);
        int n = 0;
        for (ByteBuffer b : parts) {
            n += b.remaining();
        }
        byte[] out = new byte[n];
        int at = 0;
        for (ByteBuffer b : parts) {
            b.get(b.position(), out, at, b.remaining());
            at += b.remaining();
        }
        return out;
    }

    /**
     * Like {@link #read}, as buffers whose contents, in order, are the bytes read: slices of the
     * blocks as they came from the OSS (no copy; array-backed when the transport's are), zeros
     * for holes and short blocks, or one fresh array when the handle's own unflushed writes are
     * in the range. The FUSE layer copies each straight into the kernel's reply buffer. The
     * buffers may be shared with the readahead window and other readers: callers must not modify
     * them and must read them with absolute gets (their positions are where their bytes start).
     *
     * @throws FsException EINVAL for a negative offset/length, EIO when a block read fails
     */
    public List<ByteBuffer> readBuffers(long offset, int length) {
        return readBuffers(offset, length, null);
    }

    /**
     * Like {@link #readBuffers(long, int)}; {@code fill}, when not null, is where a random read of
     * a stripe random readers of this client read densely puts the rest of the stripe, which it
     * then fetches whole ({@link DenseRandomReads}, {@link ClientConfig#stripeFillReads()}). Only a
     * read-only handle fills.
     *
     * @throws FsException as {@link #readBuffers(long, int)}
     */
    public List<ByteBuffer> readBuffers(long offset, int length, PageCacheFill fill) {
        PageCacheFill f = (flags & GranaryVfs.O_ACCMODE) == GranaryVfs.O_RDONLY ? fill : null;
        try {
            return readBuffersOnce(offset, length, f);
        } catch (FsException e) {
            if (!missingBlock(e) || !reloadAfterMissingBlock()) {
                throw e;
            }
            return readBuffersOnce(offset, length, f); // once: the map read after the miss is the live one
        }
    }

    /** Whether {@code e} is a block read that found no block (the OSS answered NOT_FOUND). */
    private static boolean missingBlock(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof java.io.FileNotFoundException) {
                return true;
            }
        }
        return false;
    }

    /**
     * A block of this handle's extent map was not found: the file changed at another client (or
     * was removed there) and the block GC deleted the old block after its grace period. The
     * handle reads the live map and size from the MDS again, as an open would (close-to-open
     * allows it to see the newer file), and returns true: a handle with nothing of its own
     * uncommitted takes them whole, one holding writes for the stripes it holds no bytes of and
     * as the base of its buffered stripes (their writes then land on the newer file). One with
     * {@code O_APPEND} writes queued keeps its map (false: the call fails with EIO).
     *
     * @throws FsException ESTALE when the file no longer exists (removed by another client, as NFS)
     */
    private boolean reloadAfterMissingBlock() {
        lock.lock();
        try {
            if (appendsPending()) {
                return false;
            }
            MdsClient.FileMap m;
            try {
                m = vfs.mds().getFileMap(opener, ino);
            } catch (FsException e) {
                throw removedIfGone(e);
            }
            if (nothingUncommitted()) {
                installMap(m.attr(), m.extents());
            } else {
                takeStripesNotHeld(byStripe(m.extents()), m.attr().getSize());
            }
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** {@code extents} by stripe index. */
    private static Map<Long, Extent> byStripe(List<Extent> extents) {
        Map<Long, Extent> m = new HashMap<>();
        for (Extent e : extents) {
            m.put(e.getStripeIndex(), e);
        }
        return m;
    }

    /** ESTALE for an MDS ENOENT of this inode (removed by another client, as NFS); {@code e} otherwise. */
    private FsException removedIfGone(FsException e) {
        if (e.status() == Status.ENOENT) {
            return new FsException(Status.ESTALE, "inode " + Long.toUnsignedString(ino)
                    + " was removed by another client and its blocks deleted", e);
        }
        return e;
    }

    private List<ByteBuffer> readBuffersOnce(long offset, int length, PageCacheFill fill) {
        if (offset < 0 || length < 0) {
            throw new FsException(Status.EINVAL, "negative offset or length");
        }
        if (append) {
            syncAppendsForRead();
        }
        List<Piece> pieces = new ArrayList<>();
        byte[] out;
        int n;
        for (;;) {
            List<CompletableFuture<Extent>> wait = new ArrayList<>();
            lock.lock();
            try {
                checkOpen();
                reapUploads();
                if (offset >= size || length == 0) {
                    return List.of();
                }
                long first = offset / stripeSize;
                long last = (offset + Math.min(length, size - offset) - 1) / stripeSize;
                for (Upload u : uploading.values()) {
                    if (u.stripe >= first && u.stripe <= last) {
                        wait.add(u.future);
                    }
                }
                if (wait.isEmpty()) {
                    if (mapDeferred) {
                        loadDeferredMap(); // may change the size: look again
                        continue;
                    }
                    n = (int) Math.min(length, size - offset);
                    out = plan(offset, length, pieces, fill);
                    break;
                }
            } finally {
                lock.unlock();
            }
            try { // stripes being uploaded: wait, then read them from their new blocks
                CompletableFuture.allOf(wait.toArray(new CompletableFuture[0])).join();
            } catch (CompletionException e) {
                // recorded as uploadError by reapUploads on the next round
            }
        }
        if (out != null) { // own unflushed bytes in the range: assembled in one array
            for (Piece p : pieces) {
                ByteBuffer data = join(p.data, "read of inode " + ino);
                int avail = Math.max(0, Math.min(p.len, data.limit() - p.srcPos));
                if (avail > 0) {
                    data.get(p.srcPos, out, p.dstPos, avail); // absolute: the buffer may be shared; a short block reads as zeros
                }
                if (p.overlay != null) {
                    System.arraycopy(p.overlay, 0, out, p.overlayDst, p.overlay.length);
                }
            }
            return List.of(ByteBuffer.wrap(out));
        }
        // Only blocks: slices of them in order, zeros between (holes) and after short blocks.
        List<ByteBuffer> parts = new ArrayList<>(pieces.size() + 1);
        int at = 0;
        for (Piece p : pieces) {
            ByteBuffer data = join(p.data, "read of inode " + ino);
            addZeros(parts, p.dstPos - at);
            at = Math.max(at, p.dstPos);
            int avail = Math.max(0, Math.min(p.len, data.limit() - p.srcPos));
            if (avail > 0) {
                parts.add(data.slice(p.srcPos, avail)); // a view: the shared buffer's position is untouched
                at += avail;
            }
        }
        addZeros(parts, n - at);
        return parts;
    }

    /** Zeros the FUSE layer copies for holes; shared, never written. */
    private static final byte[] ZEROS = new byte[64 * 1024];

    private static void addZeros(List<ByteBuffer> parts, int count) {
        for (int left = count; left > 0; left -= ZEROS.length) {
            parts.add(ByteBuffer.wrap(ZEROS, 0, Math.min(left, ZEROS.length)).slice());
        }
    }

    /** One part of a read: bytes of a (future) block copied to the output, then own dirty bytes over them. */
    private record Piece(int dstPos, int len, CompletableFuture<ByteBuffer> data, int srcPos, byte[] overlay, int overlayDst) {}

    /**
     * Plans a read (lock held, no stripe of the range uploading): starts block reads and, when
     * this handle's own unflushed bytes are in the range, copies them into the array it returns;
     * returns null when the range is blocks and holes only (the caller slices the blocks).
     */
    private byte[] plan(long offset, int length, List<Piece> pieces, PageCacheFill fill) {
            int n = (int) Math.min(length, size - offset);
            long firstStripe = offset / stripeSize;
            long lastStripe = (offset + n - 1) / stripeSize;
            byte[] out = null;
            for (long k = firstStripe; k <= lastStripe && out == null; k++) {
                if (dirty.containsKey(k)) {
                    out = new byte[n];
                }
            }
            boolean sequential = nextSequentialOffset >= 0 && Math.abs(offset - nextSequentialOffset) <= SEQUENTIAL_SLACK;
            nextSequentialOffset = sequential ? Math.max(nextSequentialOffset, offset + n) : offset + n;
            long first = offset / stripeSize;
            long last = (offset + n - 1) / stripeSize;
            dropStripes(k -> k < first || k > last + vfs.config().readaheadStripes());
            for (long k = first; k <= last; k++) {
                long sStart = k * stripeSize;
                int a = (int) (Math.max(offset, sStart) - sStart);
                int b = (int) (Math.min(offset + n, sStart + stripeSize) - sStart);
                int dst = (int) (sStart + a - offset);
                StripeBuffer buf = dirty.get(k);
                if (buf != null && buf.baseLoaded) {
                    buf.copyOut(a, out, dst, b - a);
                    continue;
                }
                byte[] overlay = null;
                int ovDst = 0;
                if (buf != null) {
                    int lo = Math.max(a, buf.lo);
                    int hi = Math.min(b, buf.hi);
                    if (lo < hi) {
                        overlay = Arrays.copyOfRange(buf.data, lo, hi);
                        ovDst = (int) (sStart + lo - offset);
                    }
                }
                Extent e = baseExtent(k);
                if (e == null || e.getLength() <= a) {
                    if (overlay != null) {
                        System.arraycopy(overlay, 0, out, ovDst, overlay.length);
                    }
                    continue; // a hole: zeros
                }
                int end = (int) Math.min(b, e.getLength());
                Prefetch p = window.get(k);
                if (p != null && (!p.blockKey.equals(e.getBlockKey()) || p.data.isCompletedExceptionally())) {
                    dropStripe(k);
                    p = null;
                }
                if (p == null && sequential && buf == null) {
                    int len = (int) Math.min(e.getLength(), stripeSize);
                    vfs.readaheadBudget().reserve(len); // read now: counted, never refused
                    p = new Prefetch(e.getBlockKey(), readBlock(e, 0, len), len);
                    window.put(k, p);
                }
                if (p != null) {
                    pieces.add(new Piece(dst, end - a, p.data, a, overlay, ovDst));
                    continue;
                }
                CompletableFuture<ByteBuffer> whole = fill != null && !sequential && buf == null && out == null
                        ? wholeStripeForDenseReads(e, sStart, end, fill) : null;
                if (whole != null) {
                    pieces.add(new Piece(dst, end - a, whole, a, overlay, ovDst));
                } else {
                    pieces.add(new Piece(dst, end - a, readBlock(e, a, end - a), 0, overlay, ovDst));
                }
            }
            if (sequential) {
                startReadahead(last);
            }
            return out;
    }

    /**
     * For a random read, up to byte {@code readEnd} of the stripe, of the stripe of extent
     * {@code e} (starting at file offset {@code stripeStart}) by a read-only handle,
     * {@link DenseRandomReads}: the stripe's whole bytes when they are being fetched (for this
     * read, or for an earlier one of any handle of this client that asked for at least
     * {@code readEnd} bytes: another handle's view of the file may be shorter), the fetch then
     * stored in the page cache through {@code fill}; null when the read should fetch just its own
     * range (sparse reads so far, inline data, or {@code client.max_readahead} held by other
     * windows). Lock held.
     */
    private CompletableFuture<ByteBuffer> wholeStripeForDenseReads(Extent e, long stripeStart, int readEnd, PageCacheFill fill) {
        int threshold = vfs.config().stripeFillReads();
        if (!e.getInlineData().isEmpty() || threshold <= 0) {
            return null;
        }
        DenseRandomReads.Block b = vfs.denseReads().block(e.getBlockKey(), e.getBlockOffset());
        DenseRandomReads.Fetch running = b.fetching;
        if (running != null) {
            return running.length() >= readEnd ? running.data() : null;
        }
        if (b.reads.incrementAndGet() != threshold) {
            return null;
        }
        int len = (int) Math.min(Math.min(e.getLength(), stripeSize), size - stripeStart);
        if (len <= 0 || !vfs.readaheadBudget().tryReserve(len)) {
            return null;
        }
        CompletableFuture<ByteBuffer> whole = readBlock(e, 0, len);
        b.fetching = new DenseRandomReads.Fetch(whole, len);
        vfs.denseReads().filled(len);
        whole.handle((data, t) -> t == null ? fill.store(stripeStart, data) : CompletableFuture.<Void>completedFuture(null))
                .thenCompose(x -> x)
                .whenComplete((x, t) -> {
                    // the bytes are in the page cache now (or were left out): free them, and count
                    // again, so that a stripe the kernel evicted is fetched whole again after as
                    // many random reads reached this client as the first time
                    b.reads.set(0);
                    b.fetching = null;
                    vfs.readaheadBudget().release(len);
                });
        return whole;
    }

    /** Keeps the next readahead stripes after {@code last} in flight (lock held). */
    private void startReadahead(long last) {
        int n = vfs.config().readaheadStripes();
        for (long k = last + 1; k <= last + n; k++) {
            if (k * stripeSize >= size) {
                break;
            }
            if (window.containsKey(k) || dirty.containsKey(k) || uploading.containsKey(k)) {
                continue;
            }
            Extent e = baseExtent(k);
            if (e == null || e.getLength() == 0) {
                continue;
            }
            int len = (int) Math.min(e.getLength(), stripeSize);
            if (!vfs.readaheadBudget().tryReserve(len)) {
                break; // client.max_readahead is held by other windows: read ahead less, never run out of memory
            }
            CompletableFuture<ByteBuffer> f = readBlock(e, 0, len);
            f.exceptionally(t -> null); // a failed readahead is reported only if the stripe is read
            window.put(k, new Prefetch(e.getBlockKey(), f, len));
        }
    }

    /** The newest extent of stripe k known to this handle: uploaded-not-committed, else committed. */
    private Extent baseExtent(long k) {
        Extent e = uploaded.get(k);
        return e != null ? e : committed.get(k);
    }

    /**
     * Bytes [from, from+len) of the block of {@code e}, as a shared read-only view with position 0
     * and limit = bytes read ({@link dev.granary.oss.BlockIo#readView}'s shape; read it with absolute gets).
     */
    private CompletableFuture<ByteBuffer> readBlock(Extent e, int from, int len) {
        if (len <= 0) {
            return CompletableFuture.completedFuture(EMPTY);
        }
        if (!e.getInlineData().isEmpty()) { // data on MDS: the bytes came with the extent map
            int end = (int) Math.min((long) from + len, e.getLength());
            // slice(): position 0 as readView's, where the substring's buffer starts at its offset
            // in the extent's bytes (helper-found: reads of a small file through a handle with
            // unsaved writes, and mmap stores written back from them, got the file's first bytes)
            return CompletableFuture.completedFuture(from >= end ? EMPTY : e.getInlineData().substring(from, end).asReadOnlyByteBuffer().slice());
        }
        try {
            return vfs.blockIo().readView(e.getOst(), e.getBlockKey(), e.getBlockOffset() + from, len);
        } catch (RuntimeException ex) {
            return CompletableFuture.failedFuture(ex);
        }
    }

    /** Like {@link #readBlock}, copied into an array of its own (for read-modify-write). */
    private CompletableFuture<byte[]> readBlockBytes(Extent e, int from, int len) {
        return readBlock(e, from, len).thenApply(b -> {
            byte[] a = new byte[b.limit()];
            b.get(0, a);
            return a;
        });
    }

    private static final ByteBuffer EMPTY = ByteBuffer.allocate(0).asReadOnlyBuffer();

    // ------------------------------------------------------------------ writes

    /**
     * Writes {@code len} bytes of {@code data} at {@code offset} (opened with O_APPEND: queued, and
     * placed at the end of the file when committed; {@code offset} is ignored); returns the number
     * of bytes written (always {@code len}).
     *
     * @throws FsException EBADF (read-only handle), EINVAL, EFBIG, EIO (an earlier upload failed),
     *                     EINTR (interrupted while waiting for dirty memory)
     */
    public int write(long offset, byte[] data, int len) {
        return write(offset, data, len, false);
    }

    /**
     * write(2) as {@link #write(long, byte[], int)}; {@code writeback} marks bytes the kernel writes
     * back from its page cache (a {@code MAP_SHARED} mapping: FUSE's {@code FUSE_WRITE_CACHE}).
     * Those are changes in place, so they go at {@code offset} even on an O_APPEND handle (POSIX
     * write(2): O_APPEND moves the offset of write calls, not of stores through a mapping); there
     * they are committed before this returns, after the appends queued before them. Regression: a
     * 7-byte store through a mapping of an O_APPEND descriptor appended the whole page at the end.
     *
     * @throws FsException as {@link #write(long, byte[], int)}
     */
    public int write(long offset, byte[] data, int len, boolean writeback) {
        if ((flags & GranaryVfs.O_ACCMODE) == GranaryVfs.O_RDONLY) {
            throw new FsException(Status.EBADF, "file handle " + fh + " is open read-only");
        }
        if (offset < 0 || len < 0 || len > data.length) {
            throw new FsException(Status.EINVAL, "bad write offset/length");
        }
        if (!append) {
            return writeAt(offset, data, len, true);
        }
        if (!writeback) {
            return queueAppend(data, len);
        }
        syncAppendsForRead(); // the appends written before these bytes land first; the map is reloaded
        writeAt(offset, data, len, false);
        commitWrites(false);
        return len;
    }

    /**
     * Buffers {@code len} bytes at {@code offset} in the stripe buffers (uploading whole stripes
     * right away); {@code counted}: the write is one the next flush commits (false: the caller
     * commits it itself at once, so appends queued meanwhile stay uncommitted).
     */
    private int writeAt(long offset, byte[] data, int len, boolean counted) {
        lock.lock();
        try {
            checkOpen();
            reapUploads();
            if (offset + len < 0) {
                throw new FsException(Status.EFBIG, "write past the largest file offset");
            }
            int pos = 0;
            while (pos < len) {
                long fileOff = offset + pos;
                long k = fileOff / stripeSize;
                int in = (int) (fileOff % stripeSize);
                int n = (int) Math.min(len - pos, stripeSize - in);
                StripeBuffer buf = dirty.get(k);
                if (buf == null) {
                    awaitUpload(k);
                    int reserve = reserveDirty(stripeSize);
                    buf = new StripeBuffer(in + n, (int) stripeSize, reserve);
                    dirty.put(k, buf);
                } else if (!buf.baseLoaded && (in > buf.hi || in + n < buf.lo)) {
                    loadBase(k, buf); // disjoint write: bring the old bytes in between
                }
                buf.ensure(in + n);
                System.arraycopy(data, pos, buf.data, in, n);
                buf.written.add(in, in + n);
                buf.lo = Math.min(buf.lo, in);
                buf.hi = Math.max(buf.hi, in + n);
                dropStripe(k);
                size = Math.max(size, fileOff + n);
                if (buf.lo == 0 && buf.hi == stripeSize) {
                    dirty.remove(k);
                    startUpload(k, buf);
                }
                pos += n;
            }
            if (counted) {
                writeSeq++;
            }
            lastWriteNs = GranaryVfs.nowNs();
            mtimeSetExplicitly = false;
            return len;
        } finally {
            lock.unlock();
        }
    }

    /** Waits (lock held) for an in-flight upload of stripe k, so a new buffer's base is its block. */
    private void awaitUpload(long k) {
        Upload u = uploading.get(k);
        if (u != null) {
            try {
                u.future.join();
            } catch (CompletionException e) {
                // recorded below
            }
            reapUploads();
        }
    }

    /** Reads the old content of stripe k into the buffer outside its written range (lock held). */
    private void loadBase(long k, StripeBuffer buf) {
        loadBase(k, buf, true);
    }

    /** {@link #loadBase}; {@code retry}: on a deleted base block, read the live map and try once more. */
    private void loadBase(long k, StripeBuffer buf, boolean retry) {
        Extent e = baseExtent(k);
        int baseLen = 0;
        if (e != null && e.getLength() > 0) {
            long limit = Math.max(0, Math.min(size - k * stripeSize, stripeSize));
            int len = (int) Math.min(e.getLength(), limit);
            byte[] old;
            try {
                old = join(readBlockBytes(e, 0, len), "read-modify-write of inode " + ino);
            } catch (FsException x) {
                if (!retry || !missingBlock(x) || !reloadAfterMissingBlock()) {
                    throw x;
                }
                loadBase(k, buf, false); // once more on the live base (the lock is reentrant)
                return;
            }
            baseLen = Math.min(len, old.length);
            buf.ensure(baseLen);
            // keep written bytes: copy the old ones only outside [lo, hi)
            System.arraycopy(old, 0, buf.data, 0, Math.min(buf.lo, baseLen));
            if (buf.hi < baseLen) {
                System.arraycopy(old, buf.hi, buf.data, buf.hi, baseLen - buf.hi);
            }
        }
        buf.baseLen = baseLen;
        buf.baseLoaded = true;
        buf.loadedFrom = e;
    }

    /**
     * True when {@code buf} must be merged with the old bytes of its stripe ({@code base}, valid
     * up to {@code limit} bytes) before it can stand for the whole stripe: the old bytes are not
     * loaded yet and some lie outside the written range [lo, hi).
     */
    private static boolean needsOldBytes(StripeBuffer buf, Extent base, long limit) {
        return !buf.baseLoaded && base != null && base.getLength() > 0
                && (buf.lo > 0 || buf.hi < Math.min(base.getLength(), limit));
    }

    /**
     * Starts uploading stripe k from {@code buf} as a new block (lock held; buf already removed
     * from the dirty map). A partial stripe with old data outside its written range is merged
     * with the old block first (read-modify-write). The budget is released when the upload ends.
     */
    private void startUpload(long k, StripeBuffer buf) {
        Extent base = baseExtent(k);
        Extent builtOn = buf.builtOn(base);
        long stripeStart = k * stripeSize;
        long maxLen = Math.max(0, Math.min(size - stripeStart, stripeSize));
        boolean needOld = needsOldBytes(buf, base, maxLen);
        int ost = ostOf(k);
        // A base block the GC deleted (another client replaced the stripe more than gc.grace ago):
        // no old bytes now; the commit's condition on the base then fails and the written bytes
        // are laid over the live extent (relayOnLiveBases).
        CompletableFuture<byte[]> old = needOld
                ? readBlockBytes(base, 0, (int) Math.min(base.getLength(), maxLen))
                        .exceptionallyCompose(t -> missingBlock(t) ? CompletableFuture.completedFuture(null)
                                : CompletableFuture.failedFuture(t))
                : CompletableFuture.completedFuture(null);
        int fixedLen = buf.baseLoaded ? Math.max(buf.hi, buf.baseLen) : buf.hi;
        CompletableFuture<Extent> f = old.thenComposeAsync(oldData -> {
            int len = fixedLen;
            if (oldData != null) {
                int oldLen = oldData.length;
                buf.ensure(oldLen);
                System.arraycopy(oldData, 0, buf.data, 0, Math.min(buf.lo, oldLen));
                if (buf.hi < oldLen) {
                    System.arraycopy(oldData, buf.hi, buf.data, buf.hi, oldLen - buf.hi);
                }
                len = Math.max(buf.hi, oldLen);
            }
            len = (int) Math.min(len, Math.max(maxLen, buf.hi));
            byte[] block = buf.prefix(len);
            String key = BlockKeys.newKey(ino, k);
            long extentLen = len;
            return vfs.blockIo().write(ost, key, block).thenApply(v -> Extent.newBuilder()
                    .setStripeIndex(k).setOst(ost).setBlockKey(key).setBlockOffset(0).setLength(extentLen).build());
        }, vfs.ioExecutor());
        f.whenComplete((e, t) -> vfs.dirtyBudget().release(buf.reserved));
        uploading.put(k, new Upload(k, f, builtOn, buf.written));
    }

    /**
     * Stripe k's block built on {@code builtOn} with {@code written} reached {@link #uploaded}
     * (lock held): with no block of the stripe waiting for a commit, {@code builtOn} is the
     * condition of its commit; else the new block was built on that uncommitted block (a buffer
     * takes it as its base), so the condition stays that block's and the written ranges add up.
     */
    private void noteUploaded(long k, Extent builtOn, WrittenRanges written) {
        StripeWrite w = unsaved.get(k);
        if (w == null) {
            w = new StripeWrite(builtOn);
            unsaved.put(k, w);
        }
        w.written.addAll(written);
    }

    /** Moves finished uploads into the uploaded map; records the first failure (lock held). */
    /**
     * Moves finished uploads to {@code uploaded}; the first failure becomes {@code uploadError},
     * which is thrown now and by every later call (the handle stays failed). Caller holds the lock.
     *
     * @throws FsException EIO when an upload of this handle failed
     */
    private void reapUploads() {
        Iterator<Upload> it = uploading.values().iterator();
        while (it.hasNext()) {
            Upload u = it.next();
            if (!u.future.isDone()) {
                continue;
            }
            it.remove();
            try {
                uploaded.put(u.stripe, u.future.get());
                noteUploaded(u.stripe, u.builtOn, u.written);
            } catch (ExecutionException | InterruptedException | CompletionException e) {
                Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
                if (uploadError == null) {
                    uploadError = new FsException(Status.EIO, "upload of stripe " + u.stripe + " of inode " + ino
                            + " failed: " + GranaryVfs.rootMessage(cause), cause);
                    LOG.warn("{}", uploadError.getMessage());
                }
            }
        }
        if (uploadError != null) {
            throw uploadError;
        }
    }

    /** Starts uploads of all partial stripes without waiting; used when dirty memory runs short. */
    void spill() {
        if (!lock.tryLock()) {
            return;
        }
        try {
            if (append && !appendQueue.isEmpty()) {
                startAppendCommit();
            }
            for (Map.Entry<Long, StripeBuffer> en : dirty.entrySet()) {
                startUpload(en.getKey(), en.getValue());
            }
            dirty.clear();
        } finally {
            lock.unlock();
        }
    }

    // ------------------------------------------------------------------ flush / truncate / release

    /**
     * Uploads every buffered stripe, waits until all blocks are in S3, then commits the new
     * extents, size and mtime to the MDS in one operation. Returns only once committed.
     *
     * @throws FsException EIO when an upload failed (the handle stays failed), or the MDS's errno
     */
    public void flush() {
        if (append) {
            flushAppends();
            return;
        }
        commitWrites(true);
    }

    /**
     * The commit of {@link #flush} for the stripe buffers; {@code counted}: the commit covers the
     * handle's counted writes (false: only bytes buffered by an uncounted {@link #writeAt}).
     */
    private void commitWrites(boolean counted) {
        // One commit of this handle at a time, through to telling the other handles: a flush that
        // found nothing left to commit returned while another thread's commit of the same bytes
        // had not yet reached the other handles, and a writer there then built its stripe on the
        // old block (helper-found: whole blocks read back as zeros).
        commitLock.lock();
        try {
            commitWritesLocked(counted);
        } finally {
            commitLock.unlock();
        }
    }

    private void commitWritesLocked(boolean counted) {
        List<CompletableFuture<Extent>> wait = new ArrayList<>();
        long seq;
        lock.lock();
        try {
            if (closed) {
                return;
            }
            if (!stageInline()) {
                for (Map.Entry<Long, StripeBuffer> en : dirty.entrySet()) {
                    startUpload(en.getKey(), en.getValue());
                }
            }
            dirty.clear();
            for (Upload u : uploading.values()) {
                wait.add(u.future);
            }
            seq = writeSeq;
        } finally {
            lock.unlock();
        }
        try {
            CompletableFuture.allOf(wait.toArray(new CompletableFuture[0])).join();
        } catch (CompletionException e) {
            // reported through uploadError below
        }
        List<Extent> extents;
        Attr attr;
        lock.lock();
        try {
            reapUploads();
            if ((!counted || seq == committedSeq) && uploaded.isEmpty()) {
                return;
            }
            attr = commitUploaded();
            extents = new ArrayList<>(uploaded.values());
            committed.putAll(uploaded);
            for (long k : uploaded.keySet()) {
                unsaved.remove(k);
            }
            uploaded.clear();
            if (counted) {
                committedSeq = seq;
            }
            // the MDS's size, unless writes wait: another client may have cut the file since open
            size = dirty.isEmpty() && uploading.isEmpty() ? attr.getSize() : Math.max(size, attr.getSize());
            knownCtimeNs = Math.max(knownCtimeNs, attr.getCtimeNs());
            vfs.attrCommitted(attr);
        } finally {
            lock.unlock();
        }
        vfs.extentsCommitted(this, extents, attr); // outside our lock: it takes the other handles' locks
    }

    /**
     * Conflicting commits in a row after which a commit gives up (EIO): others keep changing the
     * same stripes. With the pauses between attempts (1 ms up to 50 ms, random) that is about half
     * a minute of losing every race. Regression: 64 attempts without a pause, and 8-12 writers of
     * one stripe on three mounts got 1-4 EIOs per minute (helper-found).
     */
    static final int MAX_COMMIT_ATTEMPTS = 1000;

    /**
     * Commits {@link #uploaded} (lock held; may be empty: then only mtime) with the size its written
     * bytes reach, on the condition that each stripe not written whole still has the extent its
     * block was built on. When another writer changed such a stripe meanwhile (EAGAIN), this
     * handle's written bytes are laid over the newer extent and the commit is tried again. So a
     * write changes no byte it did not write, and the size it sets is where its bytes end: another
     * client's truncate since this handle's open stays (POSIX write(2); NFS sends only written
     * ranges). Returns the MDS's attributes after the commit.
     *
     * @throws FsException the MDS's errno; ESTALE when the file was removed; EIO when a block read
     *     or upload of a retry fails, or after {@link #MAX_COMMIT_ATTEMPTS} conflicts in a row
     */
    private Attr commitUploaded() {
        for (int attempt = 1; ; attempt++) {
            List<Extent> extents = new ArrayList<>(uploaded.values());
            extents.sort((x, y) -> Long.compare(x.getStripeIndex(), y.getStripeIndex()));
            List<StripeBase> bases = new ArrayList<>();
            long end = 0;
            for (Extent e : extents) {
                long k = e.getStripeIndex();
                StripeWrite w = unsaved.get(k);
                if (w == null) { // cannot happen: every upload notes its writes
                    throw new IllegalStateException("stripe " + k + " of inode " + ino + " uploaded without its written ranges");
                }
                end = Math.max(end, k * stripeSize + w.written.end());
                if (!w.written.covers((int) stripeSize)) {
                    StripeBase.Builder b = StripeBase.newBuilder().setStripeIndex(k);
                    if (w.base != null) {
                        b.setBase(w.base);
                    }
                    bases.add(b.build());
                }
            }
            try {
                long mtime = lastWriteNs == 0 ? GranaryVfs.nowNs() : lastWriteNs;
                if (extents.size() == 1 && isPackCandidate(extents.get(0))) {
                    return commitPacked(extents.get(0), bases, end, mtime);
                }
                return vfs.commitExtents(opener, ino, extents, bases, end, mtime, mtimeSetExplicitly);
            } catch (FsException e) {
                if (e.status() != Status.EAGAIN || bases.isEmpty()) {
                    throw e;
                }
                if (attempt >= MAX_COMMIT_ATTEMPTS) {
                    FsException failed = new FsException(Status.EIO, "commit of inode " + ino + " conflicted with other writers "
                            + attempt + " times in a row", e);
                    LOG.warn("{}", failed.getMessage());
                    throw failed;
                }
                LOG.debug("commit of inode {}: {}; laying the written bytes over the newer extents", ino, e.getMessage());
                if (attempt > 1) {
                    // others won the last races too: step back a random while, so that one of the
                    // writers of the stripe gets through (as appenders do)
                    backOff(attempt, 50, "committing inode " + ino);
                }
                relayOnLiveBases();
            }
        }
    }

    /** Whether staged extent {@code e} goes into a pack: inline bytes above {@code inline_max} (see {@link #stageInline}). */
    private boolean isPackCandidate(Extent e) {
        return vfs.packWriter() != null && e.getStripeIndex() == 0 && !e.getInlineData().isEmpty()
                && e.getLength() > vfs.config().inlineMax();
    }

    /**
     * Commits staged stripe 0 {@code staged} (its bytes inline) through a pack (lock held): waits
     * until the pack holding its bytes is in S3 and this file's commit was answered. Afterwards
     * {@link #uploaded} holds the packed extent (readable; a relay after EAGAIN moves its bytes to a
     * block of their own). Returns the MDS's attributes.
     *
     * @throws FsException the commit's errno (EAGAIN when stripe 0 changed since it was read, ESTALE
     *     handling as the caller's), EIO when the pack's upload failed
     */
    private Attr commitPacked(Extent staged, List<StripeBase> bases, long end, long mtime) {
        byte[] bytes = staged.getInlineData().toByteArray();
        PackWriter.Done d = vfs.packWriter().commit(ostOf(0), ino, bytes, bytes.length,
                e -> vfs.mds().commitExtentsRequest(opener, ino, List.of(e), bases, end, mtime, mtimeSetExplicitly));
        uploaded.put(0L, d.extent());
        MdsResponse r = d.response();
        if (r.getStatus() != Status.OK) {
            throw vfs.commitFailed(ino, new FsException(r.getStatus(), r.getMessage()));
        }
        return r.getAttr();
    }

    /**
     * After a conflicting commit (lock held): reads the file's live extents and, for each stripe
     * of {@link #uploaded} whose block was built on an extent that is no longer the stripe's,
     * builds a new block of the live extent's bytes with this handle's written bytes laid over
     * them (read back from its own block), uploads it in place of the old one (which is deleted:
     * nothing refers to it), and makes the live extent the stripe's new base.
     *
     * @throws FsException ESTALE when the file was removed, EIO when a block read or upload fails
     */
    private void relayOnLiveBases() {
        MdsClient.FileMap m;
        try {
            m = vfs.mds().getFileMap(opener, ino);
        } catch (FsException e) {
            throw removedIfGone(e);
        }
        Map<Long, Extent> live = byStripe(m.extents());
        long liveSize = m.attr().getSize();
        List<Extent> replaced = new ArrayList<>();
        for (Map.Entry<Long, Extent> en : new ArrayList<>(uploaded.entrySet())) {
            long k = en.getKey();
            StripeWrite w = unsaved.get(k);
            Extent cur = live.get(k);
            Extent mine = en.getValue();
            // a packed extent whose commit failed is never sent again (a pack is committed once):
            // its bytes always move to a block of their own
            if (!mine.getPacked() && (w.written.covers((int) stripeSize) || Extents.sameData(cur, w.base))) {
                continue;
            }
            int end = w.written.end();
            byte[] ours = join(readBlockBytes(mine, 0, end), "re-read of the new block of stripe " + k + " of inode " + ino);
            byte[] block = new byte[0];
            long liveLen = cur == null ? 0 : Math.min(cur.getLength(), Math.max(0, liveSize - k * stripeSize));
            if (liveLen > 0) {
                block = join(readBlockBytes(cur, 0, (int) liveLen), "read of stripe " + k + " of inode " + ino);
            }
            block = Arrays.copyOf(block, Math.max(block.length, end));
            w.written.copy(Arrays.copyOf(ours, end), block);
            int ost = ostOf(k);
            String key = BlockKeys.newKey(ino, k);
            join(vfs.blockIo().write(ost, key, block), "upload of stripe " + k + " of inode " + ino);
            uploaded.put(k, Extent.newBuilder().setStripeIndex(k).setOst(ost).setBlockKey(key).setBlockOffset(0)
                    .setLength(block.length).build());
            replaced.add(mine);
            w.base = cur;
            if (cur != null) {
                committed.put(k, cur);
            } else {
                committed.remove(k);
            }
            dropStripe(k);
        }
        dropBlocks(replaced);
    }

    /**
     * Data on MDS (lock held): when the file is small ({@code size <= inline_max}, within stripe 0)
     * and its only new data is the stripe-0 buffer, that buffer (merged with the old bytes) becomes
     * an inline extent ready to commit, instead of a block upload. A file above {@code inline_max}
     * and at most {@code pack_max} is staged the same way (so reads meanwhile see its bytes) and
     * committed through a pack ({@link #isPackCandidate}, {@link PackWriter}). Returns false,
     * changing nothing, when the file does not qualify.
     */
    private boolean stageInline() {
        int max = Math.max(vfs.config().inlineMax(), vfs.config().packMax()); // packMax 0: no packing
        StripeBuffer buf = dirty.get(0L);
        if (max == 0 || buf == null || dirty.size() != 1 || !uploading.isEmpty() || !uploaded.isEmpty()
                || size == 0 || size > max || size > stripeSize) {
            return false;
        }
        Extent base = baseExtent(0);
        if (needsOldBytes(buf, base, size)) {
            loadBase(0, buf); // bytes outside the written range come from the old data
        }
        noteUploaded(0, buf.builtOn(base), buf.written);
        // the written and the old bytes; past them the file reads zeros up to its size (a hole or a
        // truncate up). Not the size seen at open: another client may have cut the file since, and
        // an extent past its end is refused (the close failed with EINVAL, losing the write).
        int n = buf.baseLoaded ? Math.max(buf.hi, buf.baseLen) : buf.hi;
        Extent inline = Extent.newBuilder().setStripeIndex(0).setLength(n)
                .setInlineData(ByteString.copyFrom(buf.prefix(n))).build();
        dirty.remove(0L);
        vfs.dirtyBudget().release(buf.reserved);
        uploaded.put(0L, inline);
        return true;
    }

    /**
     * Another handle of this client committed {@code extents} of this inode (new size
     * {@code newSize} bytes, at MDS ctime {@code ctimeNs}): they become this handle's base, so
     * its later read-modify-writes and reads of those stripes start from the newest bytes instead
     * of the blocks seen at open.
     */
    void peerCommitted(List<Extent> extents, long newSize, long ctimeNs) {
        lock.lock();
        try {
            for (Extent e : extents) {
                committed.put(e.getStripeIndex(), e);
                dropStripe(e.getStripeIndex());
            }
            size = Math.max(size, newSize);
            knownCtimeNs = Math.max(knownCtimeNs, ctimeNs);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Right after open, before any write: reads the file's size and whole extent map from the
     * MDS again (one read, the handle's lock held, so a commit of another handle reaching it
     * meanwhile waits and applies on top of the newer map).
     *
     * @throws FsException the MDS's errno (ENOENT when the file was removed since)
     */
    void refreshMap() {
        lock.lock();
        try {
            MdsClient.FileMap m = vfs.mds().getFileMap(opener, ino);
            installMap(m.attr(), m.extents()); // no write through this handle yet: the MDS's size is the file's
        } finally {
            lock.unlock();
        }
    }

    /** Reloads size and extents from the MDS after the file changed under this handle (truncate). */
    void reload(Attr attr) {
        lock.lock();
        try {
            long stripes = (attr.getSize() + stripeSize - 1) / stripeSize;
            installMap(attr, stripes == 0 ? List.of() : vfs.mds().getExtents(opener, ino, 0, stripes));
        } finally {
            lock.unlock();
        }
    }

    /** Makes {@code extents} and {@code attr}'s size this handle's committed state (lock held). */
    private void installMap(Attr attr, List<Extent> extents) {
        installMap(attr.getSize(), extents, attr.getCtimeNs());
    }

    /** Makes {@code extents} and {@code newSize} this handle's committed state, read at MDS ctime {@code ctimeNs} (lock held). */
    private void installMap(long newSize, Collection<Extent> extents, long ctimeNs) {
        mapDeferred = false;
        mapCtimeNs = ctimeNs;
        knownCtimeNs = ctimeNs;
        committed.clear();
        for (Extent e : extents) {
            committed.put(e.getStripeIndex(), e);
        }
        uploaded.clear();
        unsaved.clear();
        clearWindow();
        size = newSize;
        appendEnd = newSize;
        appendMapStale = false;
        nextSequentialOffset = 0;
    }

    /**
     * Flushes and closes the handle. Buffers are dropped even when the flush fails (the error is
     * then thrown: EIO).
     */
    void close() {
        try {
            flush();
        } finally {
            lock.lock();
            try {
                closed = true;
                for (StripeBuffer b : dirty.values()) {
                    vfs.dirtyBudget().release(b.reserved);
                }
                dirty.clear();
                unsaved.clear();
                clearWindow();
            } finally {
                lock.unlock();
            }
        }
    }

    // ------------------------------------------------------------------ O_APPEND

    /** Chunk of queued O_APPEND bytes after which a commit starts while the writer goes on. */
    private long appendChunk() {
        long chunk = Math.max(4 * stripeSize, 4L << 20);
        return Math.max(1, Math.min(chunk, vfs.config().maxDirtyBytes() / 4));
    }

    /**
     * Takes up to {@code bytes} of the client's dirty budget (clamped to what the budget can ever
     * give), waiting for uploads to free memory (backpressure); returns the bytes taken.
     *
     * @throws FsException EINTR when interrupted while waiting
     */
    private int reserveDirty(long bytes) {
        int reserve = vfs.dirtyBudget().clamp(bytes);
        try {
            vfs.dirtyBudget().acquire(reserve, vfs::spillAll);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new FsException(Status.EINTR, "interrupted while waiting for dirty memory");
        }
        return reserve;
    }

    /** write(2) on an O_APPEND handle: queues the bytes whole (see the class comment); returns {@code len}. */
    private int queueAppend(byte[] data, int len) {
        // The budget is taken without the lock: the append commits that free it need the lock.
        int reserve = reserveDirty(len);
        boolean queued = false;
        lock.lock();
        try {
            checkOpen();
            reapUploads();
            if (len == 0) {
                return 0;
            }
            if (size + len < 0) {
                throw new FsException(Status.EFBIG, "write past the largest file offset");
            }
            queued = true;
            appendQueue.add(Arrays.copyOf(data, len));
            appendQueued += len;
            appendReserved += reserve;
            size += len;
            writeSeq++;
            lastWriteNs = GranaryVfs.nowNs();
            mtimeSetExplicitly = false;
            if (appendQueued >= appendChunk()) {
                startAppendCommit();
            }
            return len;
        } finally {
            lock.unlock();
            if (!queued) {
                vfs.dirtyBudget().release(reserve);
            }
        }
    }

    /**
     * Starts committing the queued writes after the commits already started (lock held). The
     * stage never fails: an error becomes {@link #uploadError} (EIO), which the next write, flush
     * or close throws; the dirty budget is released either way.
     */
    private void startAppendCommit() {
        List<byte[]> chunk = new ArrayList<>(appendQueue);
        long n = appendQueued;
        int reserved = appendReserved;
        long seq = writeSeq;
        long mtimeNs = lastWriteNs;
        boolean keepMtime = mtimeSetExplicitly;
        appendQueue.clear();
        appendQueued = 0;
        appendReserved = 0;
        appendChain = appendChain.thenRunAsync(() -> {
            Runnable publish = null;
            try {
                lock.lock();
                boolean failed;
                try {
                    failed = uploadError != null;
                } finally {
                    lock.unlock();
                }
                if (!failed) {
                    publish = commitAppend(chunk, n, mtimeNs, keepMtime, seq);
                }
            } catch (RuntimeException e) {
                lock.lock();
                try {
                    if (uploadError == null) {
                        uploadError = e instanceof FsException fe && fe.status() != Status.EAGAIN ? fe
                                : new FsException(Status.EIO, "append to inode " + ino + " failed: " + GranaryVfs.rootMessage(e), e);
                        LOG.warn("{}", uploadError.getMessage());
                    }
                } finally {
                    lock.unlock();
                }
            } finally {
                vfs.dirtyBudget().release(reserved);
            }
            if (publish != null) {
                publish.run(); // after the release: it takes the locks of this inode's other handles
            }
        }, vfs.ioExecutor());
    }

    /** Commits every queued write and waits for all append commits; throws the first failure (EIO). */
    private void flushAppends() {
        CompletableFuture<Void> chain;
        lock.lock();
        try {
            if (closed) {
                return;
            }
            if (!appendQueue.isEmpty()) {
                startAppendCommit();
            }
            chain = appendChain;
        } finally {
            lock.unlock();
        }
        chain.join();
        lock.lock();
        try {
            if (uploadError != null) {
                throw uploadError;
            }
        } finally {
            lock.unlock();
        }
    }

    /** Before a read on an O_APPEND handle: commits queued writes, then reloads size and extent map. */
    private void syncAppendsForRead() {
        boolean needed;
        lock.lock();
        try {
            needed = !appendQueue.isEmpty() || appendMapStale || !appendChain.isDone();
        } finally {
            lock.unlock();
        }
        if (needed) {
            flushAppends();
            reload(vfs.mds().getattr(opener, ino));
        }
    }

    /**
     * Places {@code n} queued bytes ({@code chunk}, in order) at the end of the file as the MDS
     * has it, uploads the blocks and commits them on the condition that the end has not moved;
     * when it has (EAGAIN: another appender committed first), drops the blocks and places the
     * bytes again at the new end. Runs on the io executor, without the lock. Returns what tells
     * the client's caches and this inode's other handles about the commit, to run afterwards.
     */
    private Runnable commitAppend(List<byte[]> chunk, long n, long mtimeNs, boolean keepMtime, long seq) {
        byte[] data = new byte[Math.toIntExact(n)];
        int p = 0;
        for (byte[] b : chunk) {
            System.arraycopy(b, 0, data, p, b.length);
            p += b.length;
        }
        long guess;
        lock.lock();
        try {
            guess = appendEnd;
        } finally {
            lock.unlock();
        }
        for (int attempt = 1; ; attempt++) {
            long k = guess / stripeSize;
            MdsClient.FileMap m = vfs.mds().getFileMap(opener, ino, k, k + 1);
            long start = m.attr().getSize();
            if (start % stripeSize != 0 && start / stripeSize != k) {
                guess = start; // the end moved to another stripe since the guess: read that one
                continue;
            }
            Extent base = null;
            if (start % stripeSize != 0) {
                for (Extent e : m.extents()) {
                    if (e.getStripeIndex() == k) {
                        base = e;
                    }
                }
            }
            List<Extent> extents = placeAppend(data, start, base);
            try {
                Attr a = vfs.mds().commitAppend(opener, ino, extents, start, base, start + n,
                        mtimeNs == 0 ? GranaryVfs.nowNs() : mtimeNs, keepMtime);
                lock.lock();
                try {
                    for (Extent e : extents) {
                        committed.put(e.getStripeIndex(), e);
                        dropStripe(e.getStripeIndex());
                    }
                    appendEnd = a.getSize();
                    appendMapStale = true; // appends of others before ours are not in the map
                    committedSeq = Math.max(committedSeq, seq);
                    knownCtimeNs = Math.max(knownCtimeNs, a.getCtimeNs());
                } finally {
                    lock.unlock();
                }
                return () -> {
                    vfs.attrCommitted(a);
                    vfs.extentsCommitted(this, extents, a);
                };
            } catch (FsException e) {
                if (e.status() != Status.EAGAIN) {
                    throw e; // EIO may mean "applied, but the answer was lost": the blocks stay
                }
                dropBlocks(extents); // EAGAIN: nothing was applied, nothing refers to them
                if (attempt >= 10_000) {
                    throw new FsException(Status.EIO, "append to inode " + ino + " lost the race to other appenders "
                            + attempt + " times", e);
                }
                guess = start;
                backOff(attempt, 20, "appending");
            }
        }
    }

    /**
     * The extents of {@code data} placed at file offset {@code start}: one inline extent when the
     * file stays small (data on MDS), else one new block per stripe touched, uploaded (waits). The
     * first stripe's bytes before {@code start} are copied from {@code base} (null: zeros).
     *
     * @throws FsException EIO when a block read or upload fails
     */
    private List<Extent> placeAppend(byte[] data, long start, Extent base) {
        long end = start + data.length;
        int inlineMax = vfs.config().inlineMax();
        int headLen = (int) (start % stripeSize);
        byte[] head = new byte[0];
        if (headLen > 0 && base != null && base.getLength() > 0) {
            head = join(readBlockBytes(base, 0, (int) Math.min(headLen, base.getLength())), "read of the last stripe of inode " + ino);
        }
        if (inlineMax > 0 && end <= inlineMax && end <= stripeSize) {
            byte[] bytes = new byte[(int) end];
            System.arraycopy(head, 0, bytes, 0, Math.min(head.length, headLen));
            System.arraycopy(data, 0, bytes, (int) start, data.length);
            return List.of(Extent.newBuilder().setStripeIndex(0).setLength(end).setInlineData(ByteString.copyFrom(bytes)).build());
        }
        List<CompletableFuture<Extent>> uploads = new ArrayList<>();
        for (long k = start / stripeSize; k * stripeSize < end; k++) {
            long sStart = k * stripeSize;
            int from = (int) (Math.max(start, sStart) - sStart);
            int to = (int) (Math.min(end, sStart + stripeSize) - sStart);
            byte[] block = new byte[to];
            if (from > 0) {
                System.arraycopy(head, 0, block, 0, Math.min(head.length, from));
            }
            System.arraycopy(data, (int) (sStart + from - start), block, from, to - from);
            int ost = ostOf(k);
            String key = BlockKeys.newKey(ino, k);
            long stripe = k;
            uploads.add(vfs.blockIo().write(ost, key, block).thenApply(v -> Extent.newBuilder()
                    .setStripeIndex(stripe).setOst(ost).setBlockKey(key).setBlockOffset(0).setLength(to).build()));
        }
        List<Extent> out = new ArrayList<>();
        FsException failed = null;
        for (CompletableFuture<Extent> u : uploads) {
            try {
                out.add(join(u, "append upload of inode " + ino));
            } catch (FsException e) {
                failed = failed == null ? e : failed;
            }
        }
        if (failed != null) {
            dropBlocks(out);
            throw failed;
        }
        return out;
    }

    /**
     * After a lost race with another writer (conditional commit or append): sleeps a random
     * 1 .. 1+min(attempt, capMs) ms, so that one of the writers gets through.
     *
     * @throws FsException EINTR when interrupted ({@code doing} names the operation)
     */
    private static void backOff(int attempt, int capMs, String doing) {
        try {
            Thread.sleep(java.util.concurrent.ThreadLocalRandom.current().nextInt(1, 2 + Math.min(attempt, capMs)));
        } catch (InterruptedException ie) {
            Thread.currentThread().interrupt();
            throw new FsException(Status.EINTR, "interrupted while " + doing);
        }
    }

    /** Deletes blocks that were uploaded but will never be committed (best effort, not waited for). */
    private void dropBlocks(List<Extent> extents) {
        Map<Integer, List<String>> byOst = new HashMap<>();
        for (Extent e : extents) {
            // never a pack: other files' bytes are in it (the MDS frees it when none refers to it)
            if (e.getInlineData().isEmpty() && !e.getBlockKey().isEmpty() && !e.getPacked()) {
                byOst.computeIfAbsent(e.getOst(), o -> new ArrayList<>()).add(e.getBlockKey());
            }
        }
        for (Map.Entry<Integer, List<String>> en : byOst.entrySet()) {
            try {
                vfs.blockIo().delete(en.getKey(), en.getValue()).exceptionally(t -> {
                    LOG.debug("dropping unused append blocks {} failed: {}", en.getValue(), t.toString());
                    return null;
                });
            } catch (RuntimeException ex) {
                LOG.debug("dropping unused append blocks {} failed: {}", en.getValue(), ex.toString());
            }
        }
    }

    private void checkOpen() {
        if (closed) {
            throw new FsException(Status.EBADF, "file handle " + fh + " is closed");
        }
    }

    private static <T> T join(CompletableFuture<T> f, String what) {
        try {
            return f.join();
        } catch (CompletionException | java.util.concurrent.CancellationException e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            if (cause instanceof FsException fe) {
                throw fe;
            }
            throw new FsException(Status.EIO, what + " failed: " + GranaryVfs.rootMessage(cause), cause);
        }
    }
}
