package dev.granary.client.vfs;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.google.protobuf.ByteString;
import dev.granary.mds.FsException;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.client.NoEntryException;
import dev.granary.mds.client.ReadDirPage;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.DirEntry;
import dev.granary.mds.proto.Extent;
import dev.granary.mds.proto.LockInfo;
import dev.granary.mds.proto.LockKind;
import dev.granary.mds.proto.LockType;
import dev.granary.mds.proto.MdsRequest;
import dev.granary.mds.proto.MdsResponse;
import dev.granary.mds.proto.SetAttrRequest;
import dev.granary.mds.proto.StatFsReply;
import dev.granary.mds.proto.Status;
import dev.granary.mds.proto.StripeBase;
import dev.granary.oss.BlockIo;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongUnaryOperator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The POSIX core of the Granary client: path-based operations as the FUSE adapter needs them,
 * testable without a mount. Paths are '/'-separated strings relative to the mount root
 * ("/" is the root, inode 1), as jnr-fuse passes them; names are encoded to bytes as UTF-8.
 *
 * <p>Path resolution walks components from the root through a dentry cache (parent inode + name
 * → inode) and an attribute cache (inode → {@link Attr}), both Caffeine caches whose entries
 * live {@link ClientConfig#cacheTimeout()} (another client's change may stay invisible that
 * long, as NFS's actimeo); local mutations update or invalidate them at once. Negative lookups are
 * not cached. {@link #open} always fetches fresh attributes and extents (close-to-open).
 *
 * <p>Every call takes the caller's identity ({@link Caller}: uid, gid, supplementary gids), which
 * the MDS uses for POSIX permission checks; open/access/readdir checks are done here against the
 * inode's mode (root passes read/write always, and execute when any x bit is set).
 *
 * <p>Every failure is an {@link FsException} carrying an errno. Thread-safe.
 */
public final class GranaryVfs implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(GranaryVfs.class);

    /** open(2) flag bits (Linux x86-64/aarch64). */
    public static final int O_ACCMODE = 3, O_RDONLY = 0, O_WRONLY = 1, O_RDWR = 2, O_CREAT = 0100, O_EXCL = 0200,
            O_TRUNC = 01000, O_APPEND = 02000, O_DIRECT = 040000, O_DIRECTORY = 0200000;

    /** What {@link #open(Caller, String, int, LongUnaryOperator)}'s {@code pagesHeld} answers when the page cache holds no known version. */
    public static final long NO_PAGES = Long.MIN_VALUE;
    /**
     * Linux's {@code __FMODE_EXEC}: set in the open flags the kernel sends for the open of
     * execve(2) (and uselib), which needs execute permission instead of read permission.
     */
    public static final int FMODE_EXEC = 040;
    /** st_mode type bits (POSIX). */
    public static final int S_IFMT = 0170000, S_IFREG = 0100000, S_IFDIR = 0040000, S_IFLNK = 0120000;
    /** access(2) mask bits. */
    public static final int F_OK = 0, X_OK = 1, W_OK = 2, R_OK = 4;
    /** {@link #utimens} marker: set this time to the current time (utimensat's UTIME_NOW). */
    public static final long TIME_NOW = Long.MIN_VALUE;
    /** {@link #utimens} marker: leave this time unchanged (utimensat's UTIME_OMIT). */
    public static final long TIME_OMIT = Long.MIN_VALUE + 1;
    /** Largest name in bytes (POSIX NAME_MAX). */
    public static final int NAME_MAX = 255;

    private final MdsClient mds;
    private final BlockIo blockIo;
    private final ClientConfig config;
    private final DirtyBudget dirtyBudget;
    private final ReadaheadBudget readaheadBudget;
    private final ExecutorService ioExecutor;
    private final Cache<DentryKey, Long> dentries;
    private final Cache<Long, Attr> attrs;
    /**
     * Negative xattr cache: (inode, name) pairs the MDS answered ENODATA for, kept for the cache
     * timeout like attributes. The kernel asks for "security.capability" before every write(2)
     * to a FUSE file (file_remove_privs); without this each 128 KiB write cost an MDS round trip.
     */
    private final Cache<XattrKey, Boolean> absentXattrs;

    /**
     * Inodes this client set an xattr on lately (2 x the cache timeout + 1 s): attributes cached
     * before that setxattr still say "no xattrs", so for these the MDS is asked.
     */
    private final Cache<Long, Boolean> xattrsSetHere;

    private record XattrKey(long ino, String name) {}

    /**
     * Extent maps of small files fetched by a lookup, kept {@link ClientConfig#openAfterLookup()}
     * for the open that usually follows (the kernel sends LOOKUP then OPEN for one open(2)); an
     * open takes its entry once.
     */
    private final Cache<Long, LookupMap> lookupMaps;

    /** {@link #fileChanges} by inode; kept while used. */
    private final Cache<Long, Long> fileChangeCounts =
            Caffeine.newBuilder().executor(Runnable::run).expireAfterAccess(Duration.ofMinutes(10)).maximumSize(100_000).build();

    /**
     * The largest MDS ctime (ns) this client has seen for each regular file, from any answer: a
     * new handle whose map is older reads it again ({@link #openHandle}). Kept longer than the
     * attribute cache, so that the check holds when that one has expired.
     */
    private final Cache<Long, Long> newestCtimes =
            Caffeine.newBuilder().executor(Runnable::run).expireAfterAccess(Duration.ofMinutes(10)).maximumSize(100_000).build();

    /** An extent map fetched by a lookup at {@code atNanos} (System.nanoTime). */
    private record LookupMap(MdsClient.FileMap map, long atNanos) {}

    /** Bumped on each of this client's own namespace or attribute changes (see {@link StatAhead}). */
    private final AtomicLong localChanges = new AtomicLong();
    /** Hand-overs of stripe buffers between handles so far ({@link #handedOver}). */
    private final AtomicLong handOvers = new AtomicLong();
    private final StatAhead statAhead;
    /** Data-ahead of small files' maps after statahead, or null when off (no statahead, readahead or inline data). */
    private final DataAhead dataAhead;
    /** Unlinks sent to the MDS in the background ({@link ClientConfig#deferredUnlink()}), or null. */
    private final DeferredUnlinks deferred;
    /** Creates answered here and sent to the MDS later ({@link ClientConfig#deferredCreate()}), or null. */
    private final DeferredCreates creates;
    /** The directory leases this client holds ({@link ClientConfig#dirLease()}), or null. */
    private final DirLeases leases;
    /** Listings of the leased directories, which answer lookups of absent names there; null without leases. */
    private final LeasedListings leasedListings;
    /** Small-file packing ({@link ClientConfig#packMax()}), or null. */
    private final PackWriter packs;
    /**
     * Names the MDS just answered ENOENT for, with their directory's attributes (the kernel's
     * LOOKUP before a CREATE): a deferred create needs one, so the layout it gives the file is
     * the directory's as of that read, not one another client's setstripe outdated in the cache.
     * The value: when that read was sent (System.nanoTime), which a directory lease must predate
     * ({@link DirLeases#underLease}).
     */
    private final Cache<DentryKey, Long> absentNames;
    /**
     * Entries this client removed or renamed lately (unlink, rmdir; both names of a rename), which
     * statahead must not cache from a page the MDS read before the change. Kept for twice the cache
     * timeout plus 1 s, longer than any page fetch. These changes do not bump {@link #localChanges}:
     * that would throw away every page fetched during an {@code rm -r} or an {@code mv} loop in the
     * directory (each lookup then asked the MDS).
     */
    private final Cache<DentryKey, Boolean> recentlyChanged;
    private final AtomicLong nextHandle = new AtomicLong(1);
    /** Set when {@link #close} begins: handles it releases answer EIO afterwards, not EBADF. */
    private volatile boolean closing;
    private final Map<Long, OpenFile> files = new ConcurrentHashMap<>();
    private final Map<Long, Set<OpenFile>> filesByIno = new ConcurrentHashMap<>();
    private final Map<Long, DirHandle> dirs = new ConcurrentHashMap<>();

    /** A cached directory entry's key: parent inode number and name. */
    record DentryKey(long parent, String name) {}

    private record DirHandle(long ino, long parentIno) {}

    /** Random id of this client's session in the MDS: its advisory locks belong to it. */
    private final long session = new java.security.SecureRandom().nextLong();

    /** (inode, owner, kind) of locks this client holds: the lease is renewed while any is held. */
    private record LockKey(long ino, long owner, LockKind kind) {}

    private final Set<LockKey> heldLocks = ConcurrentHashMap.newKeySet();
    /**
     * Read-only handles whose close(2) sends no FLUSH ({@link #mayCloseWithoutFlush}), each with
     * the owners that took POSIX locks through it: RELEASE, not FLUSH, releases those.
     */
    private final ConcurrentHashMap<Long, Set<Long>> noFlushHandles = new ConcurrentHashMap<>();
    /**
     * Per POSIX lock owner of a file: the open handles it took locks through since its last
     * whole-file unlock. A handle closed without FLUSH releases its owners' locks at RELEASE only
     * when it was the last of them (else a child's exit that released a descriptor its parent
     * locked through and closed would release the parent's later locks: helper-found).
     */
    private final ConcurrentHashMap<LockKey, Set<Long>> lockHandles = new ConcurrentHashMap<>();
    /**
     * Owners that took POSIX locks through a handle closed without FLUSH, with the process that
     * took them: the kernel sends nothing when such a process exits while another process holds
     * the descriptor (a forked child), so the lease renewer releases the locks of processes gone.
     */
    private final ConcurrentHashMap<LockKey, LockerProcess> noFlushLockers = new ConcurrentHashMap<>();
    /** Times the lock lease was found run out while locks were held ({@link #lockLeaseLosses}). */
    private final AtomicLong leaseLosses = new AtomicLong();
    private final java.util.concurrent.atomic.AtomicBoolean renewerStarted = new java.util.concurrent.atomic.AtomicBoolean();
    private final java.util.concurrent.ScheduledExecutorService renewer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "granary-lock-lease");
        t.setDaemon(true);
        return t;
    });

    /**
     * One directory entry as readdir returns it: name, inode number, S_IFMT type bits, and the
     * name's bytes as the MDS stores them ({@link Names#encode} of {@code name}; not to be modified),
     * so a FUSE reply need not encode it again.
     */
    public record Entry(String name, long ino, int mode, byte[] nameBytes) {
        /** An entry whose name bytes are {@link Names#encode} of {@code name}. */
        public Entry(String name, long ino, int mode) {
            this(name, ino, mode, Names.encode(name));
        }

        /** The entry of a listing page's {@code e}: its name decoded ({@link Names#decode}), its type bits. */
        static Entry of(DirEntry e) {
            byte[] raw = e.getName().toByteArray();
            return new Entry(Names.decode(raw), e.getIno(), e.getMode() & S_IFMT, raw);
        }
    }

    /**
     * A client core over {@code mds} (namespace) and {@code blockIo} (block data on OSTs). Neither
     * is closed by {@link #close()}: the caller owns them.
     */
    public GranaryVfs(MdsClient mdsClient, BlockIo blockIo, ClientConfig config) {
        boolean deferCreates = config.deferredCreate() && !config.cacheTimeout().isZero();
        boolean leased = deferCreates && config.dirLease();
        this.leasedListings = leased ? new LeasedListings() : null;
        // this client's requests carry its session: its locks and directory leases
        this.mds = mdsClient.withSession(session, leasedListings);
        this.blockIo = blockIo;
        this.config = config;
        this.dirtyBudget = new DirtyBudget(config.maxDirtyBytes());
        this.readaheadBudget = new ReadaheadBudget(config.maxReadaheadBytes());
        AtomicInteger n = new AtomicInteger();
        this.ioExecutor = Executors.newFixedThreadPool(config.ioThreads(), r -> {
            Thread t = new Thread(r, "granary-vfs-io-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        // Every cache of the request path does its upkeep (expiry, eviction) on the calling thread
        // (executor(Runnable::run)), as the FUSE adapter's and the OSS client's do: Caffeine's
        // default hands it to ForkJoinPool.commonPool, a thread wake-up per write, which took 7% of
        // the CPU of a stat loop (perf; FUSE threads 16%) and stats ran 15.8-17.5k/s, 17-21k/s after.
        this.dentries = Caffeine.newBuilder().executor(Runnable::run).expireAfterWrite(config.cacheTimeout()).maximumSize(1_000_000).build();
        this.attrs = Caffeine.newBuilder().executor(Runnable::run).expireAfterWrite(config.cacheTimeout()).maximumSize(1_000_000).build();
        this.absentXattrs = Caffeine.newBuilder().executor(Runnable::run).expireAfterWrite(config.cacheTimeout()).maximumSize(1_000_000).build();
        this.xattrsSetHere = Caffeine.newBuilder().executor(Runnable::run).expireAfterWrite(config.cacheTimeout().multipliedBy(2).plusSeconds(1))
                .maximumSize(100_000).build();
        this.lookupMaps = Caffeine.newBuilder().executor(Runnable::run).expireAfterWrite(config.openAfterLookup()).maximumSize(10_000).build();
        this.recentlyChanged = Caffeine.newBuilder().executor(Runnable::run).expireAfterWrite(config.cacheTimeout().multipliedBy(2).plusSeconds(1))
                .maximumSize(1_000_000).build();
        // deferred unlinks: every qualifying one with client.deferred_unlink, else those in a
        // directory this client holds the lease of (no other client can see the name meanwhile)
        this.deferred = config.deferredUnlink() || leased ? new DeferredUnlinks(mds, new DeferredUnlinks.Outcome() {
            @Override
            public void removed(DeferredUnlinks.Unlink u, Attr parentAttr) {
                recentlyChanged.put(new DentryKey(u.parent(), u.name()), Boolean.TRUE); // from now on, for a full window
                Attr cached = attrs.getIfPresent(u.parent());
                if (parentAttr != null && (cached == null || cached.getCtimeNs() <= parentAttr.getCtimeNs())) {
                    attrs.put(u.parent(), parentAttr); // the MDS's times replace the local estimate
                }
            }

            @Override
            public void failed(DeferredUnlinks.Unlink u, FsException e) {
                forgetEntry(u.parent(), u.name(), u.ino()); // the entry is back: ask the MDS
            }
        }) : null;
        this.absentNames = Caffeine.newBuilder().executor(Runnable::run).expireAfterWrite(config.cacheTimeout()).maximumSize(100_000).build();
        this.creates = deferCreates
                ? new DeferredCreates(mds, config.cacheTimeout(), new DeferredCreates.Listener() {
                    @Override
                    public void created(DeferredCreates.Pending p, Attr a) {
                        attrs.asMap().computeIfPresent(p.ino(), (k, old) -> old == p.attr() ? a : old); // the MDS's times
                    }

                    @Override
                    public void failed(DeferredCreates.Pending p, FsException e) {
                        forgetEntry(p.parent(), p.name(), p.ino()); // the file was never made
                    }
                }) : null;
        this.leases = leased ? new DirLeases(mds, dir -> {
            creates.materializeDir(dir);
            deferred.awaitDir(dir);
        }, leasedListings) : null;
        this.packs = config.packMax() > 0 ? new PackWriter(mds, blockIo, ClientConfig.PACK_BYTES, this::sendPack) : null;
        this.statAhead = new StatAhead(mds, ioExecutor, config, dentries, attrs, localChanges::get,
                (dir, name) -> recentlyChanged.getIfPresent(new DentryKey(dir, name)) != null
                        || (deferred != null && deferred.pending(dir, name)));
        this.statAhead.onCompleteListing(listings::put); // a complete listing read with attributes
        this.dataAhead = config.dataAhead() && config.stataheadMax() > 0 && config.maxReadaheadBytes() > 0 && config.inlineMax() > 0
                ? new DataAhead(mds, readaheadBudget, config.inlineMax()) : null;
        if (dataAhead != null) {
            statAhead.onPage(dataAhead::offer);
        }
    }

    /**
     * A deferred change the MDS refused: what this client cached of the entry, its inode and its
     * directory goes, and statahead pages fetched meanwhile too.
     */
    private void forgetEntry(long parent, String name, long ino) {
        localChanges.incrementAndGet();
        dentries.invalidate(new DentryKey(parent, name));
        attrs.invalidate(parent);
        attrs.invalidate(ino);
    }

    /** A caller identity: uid, primary gid and supplementary gids. */
    public static Caller caller(int uid, int gid, int... gids) {
        Caller.Builder b = Caller.newBuilder().setUid(uid).setGid(gid);
        for (int g : gids) {
            b.addGids(g);
        }
        return b.build();
    }

    /** The configuration. */
    public ClientConfig config() {
        return config;
    }

    /** The pack writer ({@link ClientConfig#packMax()}), or null when packing is off. */
    PackWriter packWriter() {
        return packs;
    }

    /** Packs written and files committed in them so far (tests, diagnostics); zeros when packing is off. */
    long[] packCounters() {
        return packs == null ? new long[2] : packs.counters();
    }

    /**
     * Sends commit_pack {@code pack} after the still deferred creates of its files {@code inos}, in
     * one Raft entry; returns its answer.
     */
    private MdsResponse sendPack(List<Long> inos, MdsRequest pack) {
        if (creates != null) {
            MdsResponse r = creates.sendAllWith(inos, pack);
            if (r != null) {
                return r;
            }
        }
        return mds.batchWrite(List.of(pack)).get(0);
    }

    /**
     * The error to report for a failed commit of {@code ino}: the refusal of its deferred create,
     * when that is why the commit found no file (ENOENT), else {@code e}.
     */
    FsException commitFailed(long ino, FsException e) {
        if (e.status() == Status.ENOENT) {
            atMds(ino); // throws the create's refusal, if any
        }
        return e;
    }

    MdsClient mds() {
        return mds;
    }

    BlockIo blockIo() {
        return blockIo;
    }

    DirtyBudget dirtyBudget() {
        return dirtyBudget;
    }

    /** What the dirty-memory budget ({@code client.max_dirty}) handed out so far, peak included. */
    public DirtyBudget.Stats dirtyStats() {
        return dirtyBudget.stats();
    }

    ReadaheadBudget readaheadBudget() {
        return readaheadBudget;
    }

    /** What the read-window budget ({@code client.max_readahead}) handed out so far, peak included. */
    public ReadaheadBudget.Stats readaheadStats() {
        return readaheadBudget.stats();
    }

    ExecutorService ioExecutor() {
        return ioExecutor;
    }

    /** Now in nanoseconds since the Unix epoch. */
    static long nowNs() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    static String rootMessage(Throwable t) {
        Throwable c = t;
        while (c.getCause() != null && c.getCause() != c) {
            c = c.getCause();
        }
        return c.getClass().getSimpleName() + (c.getMessage() == null ? "" : ": " + c.getMessage());
    }

    // ------------------------------------------------------------------ path resolution

    private static List<String> components(String path) {
        if (path == null || path.isEmpty() || path.charAt(0) != '/') {
            throw new FsException(Status.EINVAL, "path must start with '/': " + path);
        }
        List<String> out = new ArrayList<>();
        for (String c : path.split("/")) {
            if (!c.isEmpty()) {
                out.add(c);
            }
        }
        return out;
    }

    private static byte[] nameBytes(String name) {
        if (name.indexOf('\0') >= 0) {
            throw new FsException(Status.EINVAL, "NUL in name");
        }
        byte[] b = Names.encode(name);
        if (b.length > NAME_MAX) {
            throw new FsException(Status.ENAMETOOLONG, "name longer than " + NAME_MAX + " bytes");
        }
        return b;
    }

    private Attr attrOf(Caller c, long ino) {
        Attr a = attrs.getIfPresent(ino);
        if (a == null) {
            atMds(ino);
            a = cacheFetched(mds.getattr(c, ino));
        }
        return a;
    }

    /**
     * Caches attributes read from the MDS and returns what the cache holds afterwards. For a
     * regular file, the later by ctime of them and the cached ones (the MDS's ctime of an inode
     * grows with each change, {@code Namespace.ctimeAfter}): a read answered after a commit of
     * this client was cached could otherwise bring back the size before it. A regular file's
     * cached attributes only ever come from the MDS (a deferred create's local ones are replaced
     * when the create is sent). A directory's may be local estimates stamped by this client's
     * clock, which need not agree with the MDS's: the MDS's answer replaces them.
     */
    private Attr cacheFetched(Attr fetched) {
        if (!isReg(fetched)) {
            attrs.put(fetched.getIno(), fetched);
            return fetched;
        }
        noteCtime(fetched);
        return attrs.asMap().merge(fetched.getIno(), fetched, GranaryVfs::laterByCtime);
    }

    /** Own commits and attribute changes of file {@code ino} so far on this client (for {@link #shareNewerMap}). */
    private long fileChanges(long ino) {
        Long n = fileChangeCounts.getIfPresent(ino);
        return n == null ? 0 : n;
    }

    private void fileChanged(long ino) {
        fileChangeCounts.asMap().merge(ino, 1L, Long::sum);
    }

    /**
     * Whether a handle of inode {@code ino} on this client holds writes not yet committed
     * (buffered, uploading or uploaded), through any name: an open through another name keeps
     * no kernel pages then (GranaryFuse).
     */
    public boolean holdsUncommittedWrites(long ino) {
        Set<OpenFile> open = filesByIno.get(ino);
        if (open == null) {
            return false;
        }
        boolean[] holds = {false};
        untilNoHandOver(() -> holds[0] = open.stream().anyMatch(OpenFile::hasUncommittedWrites)); // as withLocalWrites looks
        return holds[0];
    }

    /** Whether a handle of inode {@code ino} open on this client may write (opened O_WRONLY or O_RDWR). */
    public boolean hasWriteHandles(long ino) {
        Set<OpenFile> open = filesByIno.get(ino);
        return open != null && open.stream().anyMatch(f -> (f.flags() & O_ACCMODE) != O_RDONLY);
    }

    /** Records a regular file's MDS ctime in {@link #newestCtimes} (the largest seen wins). */
    private void noteCtime(Attr a) {
        if (isReg(a)) {
            newestCtimes.asMap().merge(a.getIno(), a.getCtimeNs(), Math::max);
        }
    }

    /** Of two MDS answers for one regular file, the later: the fresh one unless the old has a later ctime. */
    private static Attr laterByCtime(Attr old, Attr fresh) {
        return fresh.getCtimeNs() >= old.getCtimeNs() ? fresh : old;
    }

    private Attr lookupIn(Caller c, Attr dir, String name) {
        if (!isDir(dir)) {
            throw new FsException(Status.ENOTDIR, "not a directory: inode " + dir.getIno());
        }
        if (!permits(c, dir, X_OK)) {
            throw new FsException(Status.EACCES, "no search permission on directory inode " + dir.getIno());
        }
        DentryKey key = new DentryKey(dir.getIno(), name);
        Attr cached = cachedEntry(key);
        if (cached != null) {
            return cached;
        }
        if (creates != null) {
            Attr made = creates.pendingAttr(dir.getIno(), name);
            if (made != null) {
                return made; // created here, not yet at the MDS
            }
        }
        byte[] encoded = nameBytes(name); // ENAMETOOLONG before anything answers (helper-found: ENOENT from the listing)
        if (leasedListings != null && leases.withLease(dir.getIno(), lease -> leasedListings.absent(dir.getIno(), lease, name, dir))) {
            // the kernel's LOOKUP before a create in a directory this client holds the lease of:
            // absent from the listing read after the grant and untouched since, so absent now
            absentNames.put(key, System.nanoTime());
            throw new NoEntryException("no entry '" + name + "' in leased directory inode " + dir.getIno(), dir);
        }
        statAhead.awaitFetch(dir.getIno(), encoded);
        cached = cachedEntry(key);
        if (cached != null) {
            return cached;
        }
        if (deferred != null) {
            deferred.awaitName(dir.getIno(), name); // the MDS must not show the entry a pending unlink removes
        }
        Attr a;
        long sentNanos = System.nanoTime();
        try {
            if (config.openAfterLookup().isZero()) {
                a = mds.lookup(c, dir.getIno(), encoded);
            } else {
                MdsClient.FileMap m = mds.lookupWithMap(c, dir.getIno(), encoded);
                a = m.attr();
                if (m.extents() != null) {
                    lookupMaps.put(a.getIno(), new LookupMap(m, System.nanoTime()));
                }
            }
        } catch (NoEntryException e) {
            if (creates != null && e.parent().getIno() == dir.getIno()) {
                attrs.put(dir.getIno(), e.parent()); // fresh: a deferred create of the name takes its layout
                absentNames.put(key, sentNanos);
            }
            throw e;
        }
        dentries.put(key, a.getIno());
        if (recentlyChanged.getIfPresent(key) != null) {
            // This client removed or renamed the name while the MDS answered (a path walk of
            // getattr or open beside an unlink or rename: the kernel locks neither against the
            // other): the answer may be from before, and its entry must not outlive the change.
            // The change marks the name before it drops the entry, so checking after the put
            // sees every change that could have come first (as statahead's pages do).
            dentries.invalidate(key);
        }
        cacheFetched(a);
        statAhead.missed(c, dir.getIno(), name);
        return a;
    }

    private Attr cachedEntry(DentryKey key) {
        Long ino = dentries.getIfPresent(key);
        return ino == null ? null : attrs.getIfPresent(ino);
    }

    /** Small files' maps fetched ahead, those opens took, and those dropped unopened (tests, diagnostics; zeros when off). */
    public long[] dataAheadCounters() {
        return dataAhead == null ? new long[3] : dataAhead.counters();
    }

    private final LongAdder deferredMapOpens = new LongAdder();
    private final LongAdder deferredMapLoads = new LongAdder();

    /**
     * Opens that took no extent map because the kernel's page cache held the file as it is
     * ({@link #open(Caller, String, int, LongUnaryOperator)}), and the maps such handles read
     * later for a read the page cache did not answer (tests, diagnostics).
     */
    public long[] deferredMapCounters() {
        return new long[] {deferredMapOpens.sum(), deferredMapLoads.sum()};
    }

    /**
     * Tells this client which version (MDS ctime, ns) of each inode the kernel's page cache
     * holds through some node, or {@link #NO_PAGES} ({@code byIno}, from the FUSE layer):
     * data-ahead then skips files whose pages are held as they are.
     */
    public void pagesHeld(LongUnaryOperator byIno) {
        this.pagesHeldByIno = byIno;
        if (dataAhead != null) {
            dataAhead.pagesHeld((dirIno, a) -> !pagesMissedIn(dirIno) && byIno.applyAsLong(a.getIno()) == a.getCtimeNs());
        }
    }

    /** {@link #pagesHeld}'s answer by inode (data-ahead skips what it says is held), or null. */
    private volatile LongUnaryOperator pagesHeldByIno;

    /**
     * Directories where a handle opened without a map ({@link #open(Caller, String, int, LongUnaryOperator)})
     * found the kernel's pages gone (evicted, or {@code drop_caches}), with how many of their next
     * opens still take their maps ({@link #OPENS_AFTER_MISS} at each miss): an open that defers
     * would cost a second MDS round trip at its first read. Counted in opens, not time, so that
     * a reader that refilled the pages (the next epoch right after a cold one) defers again
     * within a few dozen files, and one that keeps missing pays one extra round trip in
     * {@link #OPENS_AFTER_MISS}. Data-ahead fetches a marked directory's files too.
     */
    private final Cache<Long, AtomicInteger> pagesMissedIn = Caffeine.newBuilder().executor(Runnable::run)
            .expireAfterWrite(Duration.ofSeconds(60)).maximumSize(10_000).build();

    /** Opens of a directory that take their maps after a deferred handle there missed the page cache. */
    static final int OPENS_AFTER_MISS = 64;

    /** Whether opens in directory {@code dirIno} take their maps now, after a miss there ({@link #pagesMissedIn}). */
    private boolean pagesMissedIn(long dirIno) {
        AtomicInteger left = pagesMissedIn.getIfPresent(dirIno);
        return left != null && left.get() > 0;
    }

    /** Marks directory {@code dirIno} as missed ({@link #pagesMissedIn}). */
    private void markPagesMissed(long dirIno) {
        pagesMissedIn.put(dirIno, new AtomicInteger(OPENS_AFTER_MISS));
    }

    /** A deferred handle of a file in directory {@code dirIno} read its map: the kernel did not hold the page it read ({@link OpenFile}). */
    void deferredMapLoaded(long dirIno) {
        deferredMapLoads.increment();
        markPagesMissed(dirIno);
        if (dataAhead != null) {
            dataAhead.pagesMissed(dirIno);
        }
    }

    /** Directory fetches statahead started, and the entries they cached (tests, diagnostics). */
    public long[] stataheadCounters() {
        return new long[] {statAhead.fetches(), statAhead.fetchedEntries()};
    }

    /**
     * Resolves {@code path} to the attributes of its inode (a final symlink is not followed).
     *
     * @throws FsException ENOENT, ENOTDIR (a middle component is not a directory), EACCES, ENAMETOOLONG
     */
    public Attr lookup(Caller c, String path) {
        List<String> comps = components(path);
        return walk(c, comps, comps.size());
    }

    /** The attributes of what the first {@code n} of {@code comps} lead to from the root. */
    private Attr walk(Caller c, List<String> comps, int n) {
        Attr cur = attrOf(c, MdsClient.ROOT_INO);
        for (int i = 0; i < n; i++) {
            cur = lookupIn(c, cur, comps.get(i));
        }
        return cur;
    }

    /** Parent directory attributes and last name of {@code path}; EEXIST-like EINVAL for the root. */
    private record ParentName(Attr parent, String name) {}

    private ParentName parentOf(Caller c, String path) {
        List<String> comps = components(path);
        if (comps.isEmpty()) {
            throw new FsException(Status.EBUSY, "the root directory cannot be the target of this operation");
        }
        Attr cur = walk(c, comps, comps.size() - 1);
        if (!isDir(cur)) {
            throw new FsException(Status.ENOTDIR, "not a directory: inode " + cur.getIno());
        }
        String name = comps.get(comps.size() - 1);
        nameBytes(name);
        if (deferred != null) {
            deferred.awaitName(cur.getIno(), name); // a change of this name follows its pending unlink
        }
        if (creates != null) {
            creates.materializeName(cur.getIno(), name); // a change of this name follows its deferred create
        }
        return new ParentName(cur, name);
    }

    /**
     * Before a request about inode {@code ino} goes to the MDS: a deferred create of it is sent
     * first (and waited for), so the MDS knows the inode.
     *
     * @throws FsException the MDS's refusal of that create
     */
    private void atMds(long ino) {
        if (creates != null) {
            creates.materialize(ino);
            if (leases != null && leases.holds(ino)) {
                creates.materializeDir(ino); // a change of a leased directory follows the creates made in it
            }
        }
    }

    /**
     * close-to-open at close(2): a file created here whose create is deferred reaches the MDS now,
     * unless its directory is leased here: then another client that opens it meanwhile waits for
     * the lease's recall, which sends the create first ({@link DirLeases}).
     */
    private void atMdsForClose(long ino) {
        if (creates != null && leases != null) {
            long dir = creates.pendingParent(ino);
            if (dir != 0 && leases.holds(dir)) {
                return;
            }
        }
        atMds(ino);
    }

    /**
     * Commits a handle's extents, size and mtime, on the condition of {@code bases} (see
     * {@link MdsClient#commitExtents(Caller, long, List, List, long, long, boolean)}); a file whose
     * create is still deferred here is created in the same Raft entry.
     *
     * @throws FsException the MDS's errno (of the create, or of the commit: EAGAIN when a stripe of
     *     {@code bases} changed)
     */
    Attr commitExtents(Caller c, long ino, List<Extent> extents, List<StripeBase> bases, long newSize, long mtimeNs,
                       boolean keepMtime) {
        if (creates != null && creates.isPending(ino)) {
            MdsResponse r = creates.sendWith(ino, mds.commitExtentsRequest(c, ino, extents, bases, newSize, mtimeNs, keepMtime));
            if (r != null) {
                return r.getAttr();
            }
        }
        atMds(ino); // a create of it sent meanwhile and refused: its errno, not the commit's ENOENT
        return mds.commitExtents(c, ino, extents, bases, newSize, mtimeNs, keepMtime);
    }

    private static boolean isDir(Attr a) {
        return (a.getMode() & S_IFMT) == S_IFDIR;
    }

    private static boolean isReg(Attr a) {
        return (a.getMode() & S_IFMT) == S_IFREG;
    }

    /** POSIX permission check of {@code mask} (R_OK|W_OK|X_OK) on {@code a} for caller {@code c}. */
    static boolean permits(Caller c, Attr a, int mask) {
        int mode = a.getMode();
        if (c.getUid() == 0) {
            return (mask & X_OK) == 0 || isDir(a) || (mode & 0111) != 0;
        }
        int bits;
        if (c.getUid() == a.getUid()) {
            bits = mode >> 6;
        } else if (c.getGid() == a.getGid() || c.getGidsList().contains(a.getGid())) {
            bits = mode >> 3;
        } else {
            bits = mode;
        }
        return (bits & mask & 7) == (mask & 7);
    }

    /**
     * Attributes with what local open handles have written but not yet committed: the size raised
     * to their end, and mtime and ctime to their last write (POSIX: a successful write() marks both
     * for update; the commit at flush, fsync or close sets that same mtime at the MDS).
     */
    private Attr withLocalWrites(Attr a) {
        Set<OpenFile> open = filesByIno.get(a.getIno());
        if (open == null) {
            return a;
        }
        // Every uncommitted byte counted once: the look is taken again after a hand-over (helper-
        // found: fstat showed 0 while four descriptors wrote); a commit that emptied a handle has
        // reached the attribute cache before the handle's lock is released, so the cache is read
        // after the handles.
        long[] local = new long[2]; // largest size, latest write time (ns) of the uncommitted writes
        untilNoHandOver(() -> {
            local[0] = 0;
            local[1] = 0;
            for (OpenFile f : open) {
                if (f.hasUncommittedWrites()) {
                    local[0] = Math.max(local[0], f.size());
                    local[1] = Math.max(local[1], f.uncommittedWriteNs());
                }
            }
        });
        long size = local[0];
        long writeNs = local[1];
        Attr cached = attrs.getIfPresent(a.getIno());
        if (cached != null && cached.getCtimeNs() > a.getCtimeNs()) {
            a = cached; // a commit answered since a was read
        }
        size = Math.max(size, a.getSize());
        boolean later = writeNs > a.getMtimeNs();
        if (size == a.getSize() && !later) {
            return a;
        }
        Attr.Builder b = a.toBuilder().setSize(size);
        if (later) {
            b.setMtimeNs(writeNs).setCtimeNs(Math.max(a.getCtimeNs(), writeNs));
        }
        return b.build();
    }

    /**
     * A handle of some file moved uncommitted stripe buffers to another ({@link OpenFile#handOverTo},
     * with both handles' locks held): {@link #withLocalWrites} looks at the handles again.
     */
    void handedOver() {
        handOvers.incrementAndGet();
    }

    /**
     * Runs {@code pass}, a look at an inode's handles one by one, again while a hand-over of
     * stripe buffers ({@link #handedOver}) overlapped it, at most 16 times: a buffer moved from a
     * handle not yet looked at to one already looked at is seen in neither.
     */
    private void untilNoHandOver(Runnable pass) {
        for (int looks = 0; looks < 16; looks++) {
            long moves = handOvers.get();
            pass.run();
            if (handOvers.get() == moves) {
                return;
            }
        }
    }

    /**
     * This client committed a change of {@code a}'s inode: its attributes as the MDS answered.
     * Commits of several handles run at once and their answers may arrive in any order: the
     * cache keeps the later one by ctime (the MDS sets ctime at each applied change), so an older
     * answer cannot bring back a smaller size (helper-found: fstat showed 0 after 3 MB written).
     */
    void attrCommitted(Attr a) {
        localChanges.incrementAndGet();
        fileChanged(a.getIno());
        lookupMaps.invalidate(a.getIno()); // own change: a map fetched before it is stale
        noteCtime(a);
        attrs.asMap().merge(a.getIno(), a, GranaryVfs::laterByCtime);
    }

    /**
     * Handle {@code from} committed {@code extents} and the MDS answered {@code committed} (the
     * inode's attributes after the commit): the other open handles of its inode take them as their
     * base, with the size and the commit's ctime (no older map may replace them since).
     */
    void extentsCommitted(OpenFile from, List<Extent> extents, Attr committed) {
        for (OpenFile f : filesByIno.getOrDefault(from.ino(), Set.of())) {
            if (f != from) {
                f.peerCommitted(extents, committed.getSize(), committed.getCtimeNs());
            }
        }
    }

    // ------------------------------------------------------------------ attributes

    /**
     * Attributes of {@code path} (from the cache when fresh), with this client's own uncommitted
     * writes: their size, mtime and ctime.
     *
     * @throws FsException ENOENT, ENOTDIR, EACCES
     */
    public Attr getattr(Caller c, String path) {
        return withLocalWrites(lookup(c, path));
    }

    /**
     * Attributes of the file behind handle {@code fh} (fgetattr); EBADF for an unknown handle.
     * When the MDS no longer has the inode (another client removed its last name, or replaced it
     * by rename), the attributes the open had, with this client's writes: the descriptor keeps
     * working to its end of file, where a read past the size the kernel has cached asks for them
     * (before, that read failed with ESTALE).
     */
    public Attr fgetattr(Caller c, long fh) {
        return attrOfOpen(c, file(fh));
    }

    /**
     * Attributes of inode {@code ino} when some handle of it is open on this client (what
     * {@code fstat} of such a handle answers, as {@link #fgetattr}), else null: the file behind a
     * descriptor whose name another client has since removed or given to another file.
     */
    public Attr getattrIfOpen(Caller c, long ino) {
        for (OpenFile f : filesByIno.getOrDefault(ino, Set.of())) {
            return attrOfOpen(c, f);
        }
        return null;
    }

    /** The attributes of open file {@code f}'s inode with this client's writes; those of its open when the MDS no longer has it. */
    private Attr attrOfOpen(Caller c, OpenFile f) {
        try {
            return withLocalWrites(attrOf(c, f.ino()));
        } catch (FsException e) {
            if (e.status() != Status.ENOENT) {
                throw e;
            }
            return withLocalWrites(f.openedAttr());
        }
    }

    /**
     * The attributes of handle {@code fh}'s file as its open fetched them from the MDS, with this
     * client's uncommitted writes: what a getattr answers right after that open. EBADF.
     */
    public Attr attrAtOpen(long fh) {
        return withLocalWrites(file(fh).openedAttr());
    }

    /** chmod: sets the permission bits (mode &amp; 07777). EPERM when not the owner (MDS). */
    public Attr chmod(Caller c, String path, int mode) {
        Attr a = lookup(c, path);
        return setattr(c, SetAttrRequest.newBuilder().setIno(a.getIno()).setValid(MdsClient.SETATTR_MODE).setMode(mode & 07777));
    }

    /** chown: uid or gid of -1 (or 0xFFFFFFFF) leaves it unchanged. EPERM (MDS rules). */
    public Attr chown(Caller c, String path, long uid, long gid) {
        Attr a = lookup(c, path);
        SetAttrRequest.Builder b = SetAttrRequest.newBuilder().setIno(a.getIno());
        int valid = 0;
        if (uid != -1 && uid != 0xFFFFFFFFL) {
            valid |= MdsClient.SETATTR_UID;
            b.setUid((int) uid);
        }
        if (gid != -1 && gid != 0xFFFFFFFFL) {
            valid |= MdsClient.SETATTR_GID;
            b.setGid((int) gid);
        }
        if (valid == 0) {
            return a;
        }
        return setattr(c, b.setValid(valid));
    }

    /**
     * Sets access and modification times in ns since the epoch; {@link #TIME_NOW} or
     * {@link #TIME_OMIT} per field (utimensat). EPERM/EACCES (MDS rules).
     */
    public Attr utimens(Caller c, String path, long atimeNs, long mtimeNs) {
        Attr a = lookup(c, path);
        SetAttrRequest.Builder b = SetAttrRequest.newBuilder().setIno(a.getIno());
        int valid = 0;
        if (atimeNs == TIME_NOW) {
            valid |= MdsClient.SETATTR_ATIME | MdsClient.SETATTR_ATIME_NOW;
        } else if (atimeNs != TIME_OMIT) {
            valid |= MdsClient.SETATTR_ATIME;
            b.setAtimeNs(atimeNs);
        }
        if (mtimeNs == TIME_NOW) {
            valid |= MdsClient.SETATTR_MTIME | MdsClient.SETATTR_MTIME_NOW;
        } else if (mtimeNs != TIME_OMIT) {
            valid |= MdsClient.SETATTR_MTIME;
            b.setMtimeNs(mtimeNs);
        }
        if (valid == 0) {
            return a;
        }
        return setattr(c, b.setValid(valid));
    }

    /**
     * truncate(2): sets the size of the regular file at {@code path}. Open handles of it in this
     * client are flushed first and see the new size afterwards.
     *
     * @throws FsException EISDIR, EINVAL (not a regular file or negative), EACCES, EIO
     */
    public Attr truncate(Caller c, String path, long size) {
        Attr a = lookup(c, path);
        if (isDir(a)) {
            throw new FsException(Status.EISDIR, path);
        }
        if (!isReg(a) || size < 0) {
            throw new FsException(Status.EINVAL, "truncate needs a regular file and a size >= 0");
        }
        return truncateIno(c, a.getIno(), size);
    }

    /** ftruncate(2) on handle {@code fh}: EBADF (unknown or read-only handle), EINVAL, EIO. */
    public Attr ftruncate(Caller c, long fh, long size) {
        OpenFile f = file(fh);
        if ((f.flags() & O_ACCMODE) == O_RDONLY) {
            throw new FsException(Status.EBADF, "file handle " + fh + " is open read-only");
        }
        if (size < 0) {
            throw new FsException(Status.EINVAL, "negative size");
        }
        return truncateIno(c, f.ino(), size);
    }

    private Attr truncateIno(Caller c, long ino, long size) {
        Set<OpenFile> open = filesByIno.getOrDefault(ino, Set.of());
        for (OpenFile f : open) {
            f.flush(); // dirty data first, so the new size cuts what was written before
        }
        Attr a = setSize(c, ino, size);
        for (OpenFile f : open) {
            f.reload(a);
        }
        return a;
    }

    Attr setSize(Caller c, long ino, long size) {
        return setattr(c, SetAttrRequest.newBuilder().setIno(ino).setValid(MdsClient.SETATTR_SIZE).setSize(size));
    }

    private Attr setattr(Caller c, SetAttrRequest.Builder b) {
        atMds(b.getIno());
        Attr a = mds.setattr(c, b.build());
        localChanges.incrementAndGet();
        fileChanged(a.getIno());
        lookupMaps.invalidate(a.getIno());
        if ((b.getValid() & MdsClient.SETATTR_MTIME) != 0) {
            // An explicit mtime outlives writes still buffered in open handles (cp -a sets times
            // with futimens before close): their commit must not overwrite it.
            for (OpenFile f : filesByIno.getOrDefault(a.getIno(), Set.of())) {
                f.mtimeSetExplicitly();
            }
        }
        attrs.put(a.getIno(), a);
        return a;
    }

    /**
     * access(2): F_OK checks existence; R_OK/W_OK/X_OK check the mode bits for the caller.
     *
     * @throws FsException ENOENT, EACCES
     */
    public void access(Caller c, String path, int mask) {
        Attr a = lookup(c, path);
        if (mask != F_OK && !permits(c, a, mask)) {
            throw new FsException(Status.EACCES, "access " + mask + " denied on " + path);
        }
    }

    // ------------------------------------------------------------------ namespace

    /** mkdir(2) with permission bits {@code mode &amp; 07777}: EEXIST, ENOENT, ENOTDIR, EACCES, ENAMETOOLONG. */
    public Attr mkdir(Caller c, String path, int mode) {
        ParentName pn = parentOf(c, path);
        Attr a = mds.mkdir(c, pn.parent.getIno(), nameBytes(pn.name), (mode & 07777) | S_IFDIR);
        entryAdded(pn, a);
        return a;
    }

    /** rmdir(2): ENOENT, ENOTDIR, ENOTEMPTY, EACCES, EBUSY (root). */
    public void rmdir(Caller c, String path) {
        ParentName pn = parentOf(c, path);
        Long child = dentries.getIfPresent(new DentryKey(pn.parent.getIno(), pn.name));
        if ((deferred != null && !deferred.isEmpty()) || (creates != null && !creates.isEmpty())) {
            long dir = child != null ? child : lookup(c, path).getIno();
            if (deferred != null) {
                deferred.awaitDir(dir); // its files' pending unlinks first
            }
            if (creates != null) {
                creates.materializeDir(dir); // and its deferred creates: the MDS must see it not empty
            }
        }
        removed(pn, child, mds.rmdir(c, pn.parent.getIno(), nameBytes(pn.name)));
    }

    /**
     * unlink(2): ENOENT, EISDIR, EACCES, EPERM (sticky directory). With
     * {@link ClientConfig#deferredUnlink()}, an entry whose attributes are cached here, a file with
     * one name and no handle open here, in a directory the caller may write and search and that is
     * not sticky, is removed here at once and at the MDS in the background ({@link DeferredUnlinks});
     * anything else (or anything unsure) goes to the MDS before returning.
     *
     * @return the file's attributes after the removal when it still has a name (nlink &gt; 0: a
     *         hard link's other names show the new nlink), else null
     */
    public Attr unlink(Caller c, String path) {
        ParentName pn = parentOf(c, path);
        DentryKey key = new DentryKey(pn.parent.getIno(), pn.name);
        Long child = dentries.getIfPresent(key);
        if (deferred != null && child != null) {
            Attr ca = attrs.getIfPresent(child);
            Attr p = pn.parent;
            // Only a file with one name and no handle open here: another name's nlink, or an open
            // handle's fstat, must show the removal at once (POSIX), which only the MDS can give.
            if (ca != null && !isDir(ca) && ca.getNlink() == 1 && !filesByIno.containsKey(child)
                    && permits(c, p, W_OK | X_OK) && ((p.getMode() & 01000) == 0 || c.getUid() == 0)) {
                if (config.deferredUnlink()) {
                    deferUnlink(c, key, p, pn.name, child, ca);
                    return null;
                }
                if (leases != null && leases.whileHeld(p.getIno(), () -> deferUnlink(c, key, p, pn.name, child, ca)) != null) {
                    return null;
                }
            }
        }
        Attr removed = removed(pn, child, mds.unlink(c, pn.parent.getIno(), nameBytes(pn.name)));
        if (leases != null) {
            leases.changedWithout(c, pn.parent.getIno());
        }
        return removed;
    }

    /** Queues the deferred unlink of {@code name} (inode {@code child}, attributes {@code ca}) in directory {@code p}; returns true. */
    private Boolean deferUnlink(Caller c, DentryKey key, Attr p, String name, long child, Attr ca) {
        deferred.offer(new DeferredUnlinks.Unlink(c, p.getIno(), name, child));
        forgetRemoved(key, child, ca);
        long now = System.currentTimeMillis() * 1_000_000L;
        Attr cached = attrs.getIfPresent(p.getIno());
        if (cached != null) { // POSIX: unlink marks the directory's mtime and ctime; the MDS's replace these
            attrs.put(p.getIno(), cached.toBuilder().setMtimeNs(Math.max(cached.getMtimeNs(), now))
                    .setCtimeNs(Math.max(cached.getCtimeNs(), now)).build());
        }
        return true;
    }

    /**
     * fsync(2) of a directory: waits for this client's deferred unlinks in it and returns the
     * first error one of them met since the last fsync (EIO, with the MDS's errno in the message);
     * every other namespace change is committed when its call returns.
     */
    public void fsyncdir(Caller c, String path) {
        Attr a = lookup(c, path);
        if (creates != null) {
            creates.materializeDir(a.getIno());
        }
        if (deferred == null) {
            return;
        }
        deferred.awaitDir(a.getIno());
        FsException e = deferred.takeError(a.getIno());
        if (e != null) {
            throw new FsException(Status.EIO, "a deferred unlink in " + path + " failed: " + e.status() + " " + e.getMessage());
        }
    }

    /**
     * rename(2)/renameat2 with {@link MdsClient#RENAME_NOREPLACE} / {@link MdsClient#RENAME_EXCHANGE}
     * flags: atomic in the MDS. ENOENT, EEXIST (NOREPLACE), ENOTEMPTY, EISDIR, ENOTDIR, EINVAL (into itself).
     *
     * @return the new attributes of the file that was at {@code to} when it still has a name (a
     *         hard link's other names show the new nlink; with RENAME_EXCHANGE, the file now at
     *         {@code from}), else null
     */
    public Attr rename(Caller c, String from, String to, int flags) {
        ParentName src = parentOf(c, from);
        ParentName dst = parentOf(c, to);
        DentryKey sk = new DentryKey(src.parent.getIno(), src.name);
        DentryKey dk = new DentryKey(dst.parent.getIno(), dst.name);
        Long s = dentries.getIfPresent(sk);
        Long d = dentries.getIfPresent(dk);
        MdsClient.Renamed r = mds.rename(c, src.parent.getIno(), nameBytes(src.name), dst.parent.getIno(), nameBytes(dst.name), flags);
        // Both names are skipped by statahead for a while (a page read before the rename has their
        // old entries); the inodes' new attributes from the MDS replace the cached ones, and pages
        // never replace cached attributes. Only without them is every page in flight dropped (the
        // generation moves before the attributes are dropped: see forgetRemoved).
        if (r.moved() == null) {
            localChanges.incrementAndGet();
        }
        recentlyChanged.put(sk, Boolean.TRUE);
        recentlyChanged.put(dk, Boolean.TRUE);
        dentries.invalidate(sk);
        dentries.invalidate(dk);
        // The directories' new attributes replace the cached ones (dropping them cost each `mv` in a
        // loop a lookup of the directory at the MDS, as for unlink); dropped when the MDS sent none.
        attrs.invalidate(src.parent.getIno());
        attrs.invalidate(dst.parent.getIno());
        for (Attr p : r.parents()) {
            attrs.put(p.getIno(), p);
        }
        if (s != null) {
            attrs.invalidate(s);
        }
        if (d != null) {
            attrs.invalidate(d);
        }
        if (r.moved() == null) {
            return null;
        }
        attrs.put(r.moved().getIno(), r.moved());
        dentries.put(dk, r.moved().getIno());
        if (r.replaced() != null) {
            attrs.put(r.replaced().getIno(), r.replaced());
            if ((flags & MdsClient.RENAME_EXCHANGE) != 0) {
                dentries.put(sk, r.replaced().getIno());
            }
            return r.replaced().getNlink() > 0 ? r.replaced() : null;
        }
        return null;
    }

    /** symlink(2): a link at {@code linkPath} pointing to {@code target}. EEXIST, ENOENT, EACCES, ENAMETOOLONG. */
    public Attr symlink(Caller c, String target, String linkPath) {
        ParentName pn = parentOf(c, linkPath);
        byte[] t = Names.encode(target);
        if (t.length == 0 || t.length > 4095) {
            throw new FsException(t.length == 0 ? Status.ENOENT : Status.ENAMETOOLONG, "symlink target length " + t.length);
        }
        Attr a = mds.symlink(c, pn.parent.getIno(), nameBytes(pn.name), t);
        entryAdded(pn, a);
        return a;
    }

    /** readlink(2): the target as UTF-8 text. EINVAL when not a symlink, ENOENT. */
    public String readlink(Caller c, String path) {
        Attr a = lookup(c, path);
        if ((a.getMode() & S_IFMT) != S_IFLNK) {
            throw new FsException(Status.EINVAL, "not a symbolic link: " + path);
        }
        return Names.decode(mds.readlink(c, a.getIno()));
    }

    /** link(2): a new name {@code newPath} for the inode at {@code existing}. EPERM (directory), EEXIST, EMLINK. */
    public Attr link(Caller c, String existing, String newPath) {
        Attr a = lookup(c, existing);
        ParentName pn = parentOf(c, newPath);
        atMds(a.getIno());
        Attr na = mds.link(c, a.getIno(), pn.parent.getIno(), nameBytes(pn.name));
        entryAdded(pn, na);
        return na;
    }

    /**
     * mknod(2): only regular files (S_IFREG or no type bits) are supported; devices, FIFOs and
     * sockets get EPERM ("the filesystem does not support the type of node", mknod(2)).
     */
    public Attr mknod(Caller c, String path, int mode, long rdev) {
        int type = mode & S_IFMT;
        if (type != 0 && type != S_IFREG) {
            throw new FsException(Status.EPERM, "only regular files can be created with mknod on Granary");
        }
        ParentName pn = parentOf(c, path);
        Attr a = mds.create(c, pn.parent.getIno(), nameBytes(pn.name), S_IFREG | (mode & 07777), true);
        entryAdded(pn, a);
        return a;
    }

    /** An existing entry was found (or made): caches its dentry and attributes. */
    private void added(ParentName pn, Attr a) {
        dentries.put(new DentryKey(pn.parent.getIno(), pn.name), a.getIno());
        noteCtime(a);
        attrs.put(a.getIno(), a);
    }

    /**
     * A new entry {@code a} was made in {@code pn.parent} (create, mknod, mkdir, symlink, link).
     * The MDS set the directory's mtime and ctime to the new entry's ctime (and raised its nlink
     * for a subdirectory): the cached directory attributes get exactly that, instead of being
     * dropped. Regression: dropping them cost a getattr of the directory on the next path
     * resolution, about 5 ms on the first write of every new file.
     */
    private void entryAdded(ParentName pn, Attr a) {
        localChanges.incrementAndGet();
        added(pn, a);
        Attr p = attrs.getIfPresent(pn.parent.getIno());
        if (p != null) {
            attrs.put(p.getIno(), p.toBuilder().setMtimeNs(a.getCtimeNs()).setCtimeNs(a.getCtimeNs())
                    .setNlink(p.getNlink() + (isDir(a) ? 1 : 0)).build());
        }
    }

    /**
     * An entry was removed from {@code pn.parent} (unlink, rmdir): its dentry goes; the child's
     * attributes become the ones the MDS answered with while it has a name left (a hard link's
     * other names show the new nlink at once, even when this client never cached the removed
     * name, as when its dentry expired between the kernel's LOOKUP and UNLINK) and are dropped
     * otherwise; the directory's attributes become {@code r.parent()} (mtime, ctime, nlink), or
     * are dropped when the MDS sent none. As for {@link #entryAdded}: dropping them cost the next
     * path resolution a lookup of the directory at the MDS (a Raft read per file of an {@code rm -r}).
     *
     * @return the child's attributes when it has a name left, else null
     */
    private Attr removed(ParentName pn, Long child, MdsClient.Removed r) {
        Attr left = r.removed();
        Attr kept = null;
        if (left != null && left.getNlink() > 0) {
            forgetRemoved(new DentryKey(pn.parent.getIno(), pn.name), left.getIno(), left);
            attrs.put(left.getIno(), left);
            kept = left;
        } else {
            Long ino = left != null ? Long.valueOf(left.getIno()) : child;
            forgetRemoved(new DentryKey(pn.parent.getIno(), pn.name), ino, ino == null ? null : attrs.getIfPresent(ino));
        }
        if (r.parent() != null) {
            attrs.put(r.parent().getIno(), r.parent());
        } else {
            attrs.invalidate(pn.parent.getIno());
        }
        return kept;
    }

    /**
     * Drops a removed entry and its inode's attributes from the caches and keeps statahead from
     * caching it again. An inode with other names (nlink &gt; 1: its nlink changed) bumps
     * {@link #localChanges} too, so a page fetched meanwhile cannot bring back its old attributes:
     * before the attributes are dropped, so a page that caches them after the drop always sees the
     * bump (bumped after, a page could cache them between the two and keep them).
     */
    private void forgetRemoved(DentryKey key, Long child, Attr childAttr) {
        if (child != null && (childAttr == null || childAttr.getNlink() > 1 || isDir(childAttr))) {
            localChanges.incrementAndGet();
        }
        recentlyChanged.put(key, Boolean.TRUE);
        dentries.invalidate(key);
        if (child != null) {
            attrs.invalidate(child);
        }
    }

    // ------------------------------------------------------------------ files

    /**
     * create(2)/open(O_CREAT): creates the regular file (exclusive with O_EXCL) or opens the
     * existing one, and returns a file handle.
     *
     * @throws FsException EEXIST (O_EXCL), EISDIR, EACCES, ENOENT (parent), ENAMETOOLONG
     */
    public long create(Caller c, String path, int mode, int flags) {
        long changes = localChanges.get(); // before any MDS read of the file: see openHandle
        if (creates != null && (flags & O_APPEND) == 0 && (flags & O_ACCMODE) != O_RDONLY) {
            Long fh = createDeferred(c, path, mode, flags);
            if (fh != null) {
                return fh;
            }
        }
        ParentName pn = parentOf(c, path);
        MdsClient.Created made = mds.createFile(c, pn.parent.getIno(), nameBytes(pn.name), S_IFREG | (mode & 07777), (flags & O_EXCL) != 0);
        Attr a = made.attr();
        List<Extent> extents = null;
        if (made.isNew()) {
            if (leases != null) {
                leases.changedWithout(c, pn.parent.getIno());
            }
            entryAdded(pn, a);
            // The create is this open's own change, and the new file's map is known: empty. Taken
            // as a change "during the open", it made the handle read the map again, one MDS read
            // per create; another thread's commit to the file meanwhile still shows in newestCtimes.
            changes = localChanges.get();
            extents = a.getSize() == 0 ? List.of() : null;
        } else {
            added(pn, a);
        }
        if (isDir(a)) {
            throw new FsException(Status.EISDIR, path);
        }
        if (!isReg(a)) {
            throw new FsException(Status.EINVAL, "not a regular file: " + path);
        }
        if ((flags & O_TRUNC) != 0 && a.getSize() > 0) {
            a = truncateIno(c, a.getIno(), 0);
            changes = localChanges.get(); // the open's own change (as the create above): the map is empty
            extents = List.of();
        }
        return openHandle(c, a, flags, extents, changes);
    }

    /**
     * The create of {@link ClientConfig#deferredCreate()}: answered here when the MDS has just
     * answered ENOENT for the name with its directory's attributes (the kernel's LOOKUP before
     * this CREATE), the directory is writable and searchable for the caller and not setgid, and
     * nothing is under the name here (no cached entry, no unlink of it pending); and either the
     * open truncates without {@code O_EXCL} (sent replacing whatever another client made under
     * the name meanwhile), or this client holds the directory's lease since before that read
     * (sent exclusive: under the lease no other client can make the name, {@link DirLeases}).
     * Returns the handle, or null when it does not qualify (the caller then creates at the MDS).
     */
    private Long createDeferred(Caller c, String path, int mode, int flags) {
        ParentName pn = parentOf(c, path);
        Attr dir = pn.parent;
        DentryKey key = new DentryKey(dir.getIno(), pn.name);
        Long absentSeen = absentNames.asMap().remove(key);
        boolean truncating = (flags & (O_EXCL | O_TRUNC)) == O_TRUNC;
        if (closing
                || absentSeen == null // no MDS read of the name (and its directory) just before
                || (!truncating && leases == null)
                || dentries.getIfPresent(key) != null
                || (dir.getMode() & 02000) != 0 // setgid directory: the MDS gives its group
                || !permits(c, dir, W_OK | X_OK)
                || (deferred != null && deferred.pending(dir.getIno(), pn.name))) {
            return null;
        }
        Attr a = leases == null ? null
                : leases.underLease(dir.getIno(), absentSeen, () -> creates.create(c, dir, pn.name, mode, nowNs(), true));
        if (a == null && truncating) {
            a = creates.create(c, dir, pn.name, mode, nowNs(), false);
            if (a != null && leases != null) {
                leases.changedWithout(c, dir.getIno());
            }
        }
        if (a == null) {
            return null;
        }
        entryAdded(pn, a);
        return openHandle(c, a, flags, List.of(), localChanges.get());
    }

    /**
     * Whether the background threads of directory leases and deferred creates are polling now (tests): an idle
     * client must not wake up, so each runs only while it has a lease or a create to look after.
     */
    boolean[] backgroundPolling() {
        return new boolean[] {leases != null && leases.polling(), creates != null && creates.sending()};
    }

    /** Directory leases taken, ended by a recall, and creates answered under one, so far (tests, diagnostics; zeros when off). */
    public long[] dirLeaseCounters() {
        return leases == null ? new long[3] : leases.counters();
    }

    /** The directory leases of this client, or null when off (tests). */
    DirLeases dirLeases() {
        return leases;
    }

    /** Listings of leased directories made, and lookups answered absent from them, so far (tests, diagnostics; zeros when off). */
    public long[] leasedListingCounters() {
        return leasedListings == null ? new long[2] : leasedListings.counters();
    }

    /**
     * open(2) of an existing regular file: checks permissions for the access mode (execute
     * permission, not read, for the open of execve(2): {@link #FMODE_EXEC}), handles O_TRUNC,
     * loads fresh attributes and the extent map (close-to-open), returns a handle.
     *
     * @throws FsException ENOENT, EISDIR (a directory), EACCES, ELOOP (a symlink), EINVAL (other types)
     */
    public long open(Caller c, String path, int flags) {
        return open(c, path, flags, null);
    }

    /**
     * {@link #open(Caller, String, int)} through a mount whose kernel may hold the file's pages:
     * {@code pagesHeld} answers, for an inode, the MDS ctime (ns) of the version of the file the
     * kernel's page cache holds for the node being opened, or {@link #NO_PAGES}. When a read-only
     * open (no {@code O_TRUNC}, {@code O_DIRECT} or {@code O_APPEND}) names a file that its name still holds at
     * that version, the MDS sends its attributes only, not its extent map or inline bytes: a
     * warm re-read of a small file costs no data transfer from the MDS, where it cost the whole
     * file's bytes again. The handle reads the map at its first read that the page cache does not
     * answer ({@code OpenFile#deferMap}). {@code pagesHeld} null: as without it.
     *
     * @throws FsException as {@link #open(Caller, String, int)}
     */
    public long open(Caller c, String path, int flags, LongUnaryOperator pagesHeld) {
        long changes = localChanges.get(); // before any MDS read of the file: see openHandle
        List<String> comps = components(path);
        Attr dir = walk(c, comps, Math.max(0, comps.size() - 1));
        Attr a = comps.isEmpty() ? dir : lookupIn(c, dir, comps.get(comps.size() - 1));
        List<Extent> extents = null;
        long deferDir = NO_DIR; // the directory of a file opened without its map
        atMds(a.getIno()); // a file created here whose create is deferred: the MDS gets it first
        if (isReg(a)) {
            // Fresh attributes and the extent map in one MDS read: close-to-open consistency.
            // A lookup of this file within openAfterLookup already read them for this open.
            LookupMap recent = lookupMaps.asMap().remove(a.getIno());
            // not O_DIRECT nor O_APPEND: the mount serves both with direct I/O, so every read misses
            boolean mayDefer = pagesHeld != null && (flags & O_ACCMODE) == O_RDONLY && (flags & (O_TRUNC | O_DIRECT | O_APPEND)) == 0;
            MdsClient.OpenMap o = recent != null && System.nanoTime() - recent.atNanos() <= config.openAfterLookup().toNanos()
                    ? new MdsClient.OpenMap(recent.map(), false) : comps.isEmpty() ? new MdsClient.OpenMap(mds.getFileMap(c, a.getIno()), false)
                    : mapOfName(c, dir, comps.get(comps.size() - 1), mayDefer ? pagesHeld : null);
            a = o.map().attr();
            extents = o.map().extents();
            deferDir = o.unchanged() && isReg(a) ? dir.getIno() : NO_DIR;
            if (!isReg(a)) {
                extents = null; // the name now holds a directory or a symlink: refused below
            }
        } else {
            a = mds.getattr(c, a.getIno());
        }
        cacheFetched(a); // a commit of another handle here may have answered meanwhile
        if (isDir(a)) {
            throw new FsException(Status.EISDIR, path);
        }
        if ((a.getMode() & S_IFMT) == S_IFLNK) {
            throw new FsException(Status.ELOOP, "open of a symbolic link: " + path);
        }
        if (!isReg(a)) {
            throw new FsException(Status.EINVAL, "not a regular file: " + path);
        }
        int acc = flags & O_ACCMODE;
        int mask = (acc == O_RDONLY ? R_OK : acc == O_WRONLY ? W_OK : R_OK | W_OK) | ((flags & O_TRUNC) != 0 ? W_OK : 0);
        if ((flags & FMODE_EXEC) != 0 && acc == O_RDONLY) {
            // execve(2): Linux needs x for the caller's class, and not r (an execute-only binary
            // runs); the kernel checked it too (default_permissions), this check is the MDS-side one
            mask = X_OK;
        }
        if (!permits(c, a, mask)) {
            throw new FsException(Status.EACCES, "open of " + path + " denied");
        }
        if ((flags & O_TRUNC) != 0 && acc != O_RDONLY) {
            a = truncateIno(c, a.getIno(), 0);
            // The open's own change, not one made during its read: the map is known empty, and
            // counting it made the handle read the map again from the MDS (one read per O_TRUNC open).
            changes = localChanges.get();
            extents = List.of();
        }
        return openHandle(c, a, flags, extents, changes, deferDir);
    }

    /**
     * The file that {@code name} in directory {@code dir} holds now, at the MDS, with its whole
     * extent map, from one read: open(2) revalidates its last name as NFS does (LOOKUP_OPEN), so a
     * name another client gave to another file (write-then-rename, {@code mv f f.prev; mv f.tmp f})
     * opens the new file, not the one this client's dentry cache still held (regression: for up
     * to attr_timeout). The cached entry is updated; dropped on ENOENT.
     *
     * @throws FsException ENOENT (the name is gone), ENOTDIR, EACCES
     */
    private MdsClient.OpenMap mapOfName(Caller c, Attr dir, String name, LongUnaryOperator pagesHeld) {
        DentryKey key = new DentryKey(dir.getIno(), name);
        MdsClient.OpenMap o;
        try {
            // a map fetched ahead for the inode this client expects here: the MDS sends it again
            // only if the name now holds another inode or the file changed (its ctime moved);
            // else the version the kernel's page cache holds of it: the MDS then sends no map
            Long expected = dentries.getIfPresent(key);
            MdsClient.FileMap ahead = dataAhead != null && expected != null ? dataAhead.take(dir.getIno(), expected) : null;
            AtomicInteger left = pagesMissedIn.getIfPresent(dir.getIno());
            boolean missedHere = left != null && left.getAndUpdate(x -> Math.max(0, x - 1)) > 0; // this open counts
            boolean askPages = ahead == null && expected != null && pagesHeld != null && !missedHere;
            long held = askPages ? pagesHeld.applyAsLong(expected) : NO_PAGES;
            LongUnaryOperator byIno = pagesHeldByIno;
            if (askPages && held == NO_PAGES && dataAhead != null && byIno != null && byIno.applyAsLong(expected) != NO_PAGES) {
                // data-ahead skipped files here as held, but this node holds no pages of them (the
                // kernel forgot the node and made another): as after a miss, it fetches them
                markPagesMissed(dir.getIno());
                dataAhead.pagesMissed(dir.getIno());
            }
            o = held != NO_PAGES ? mds.lookupForOpen(c, dir.getIno(), nameBytes(name), expected, held)
                    : new MdsClient.OpenMap(mds.lookupForOpen(c, dir.getIno(), nameBytes(name), ahead), false);
        } catch (FsException e) {
            if (e.status() == Status.ENOENT) {
                dentries.invalidate(key);
            }
            throw e;
        }
        Attr a = o.map().attr();
        dentries.put(key, a.getIno());
        if (o.unchanged()) {
            deferredMapOpens.increment();
        } else if (isReg(a) && o.map().extents() == null) {
            return new MdsClient.OpenMap(mds.getFileMap(c, a.getIno()), false); // an MDS without whole_map: the map of a file above one stripe
        }
        return o;
    }

    /**
     * Opens a handle; {@code extents} null: fetched from the MDS here (none when the file is
     * empty). {@code changesBefore}: {@code localChanges} before the open's first MDS read of the
     * file. A commit of another handle here that the MDS applied after that read and that
     * answered before this handle joined the inode's handles never reached it (commits tell the
     * handles then open): the handle then reads its size and map again, so that it does not
     * build a stripe on a block that is no longer the file's (helper-found: threads closing and
     * reopening their descriptors while others wrote lost whole chunks at the end).
     */
    private long openHandle(Caller c, Attr a, int flags, List<Extent> extents, long changesBefore) {
        return openHandle(c, a, flags, extents, changesBefore, NO_DIR);
    }

    /** No directory ({@link #openHandle(Caller, Attr, int, List, long, long)}'s {@code deferDir}). */
    private static final long NO_DIR = -1;

    /**
     * As {@link #openHandle(Caller, Attr, int, List, long)}; {@code deferDir} other than
     * {@link #NO_DIR}: the handle, of a file in that directory, holds no map until a read needs
     * it ({@code OpenFile#deferMap}).
     */
    private long openHandle(Caller c, Attr a, int flags, List<Extent> extents, long changesBefore, long deferDir) {
        boolean deferMap = deferDir != NO_DIR;
        if (deferMap) {
            extents = List.of();
        } else if (extents == null) {
            long stripe = a.getLayout().getStripeSize();
            long stripes = stripe <= 0 ? 0 : (a.getSize() + stripe - 1) / stripe;
            if (stripes > 0) {
                atMds(a.getIno());
            }
            extents = stripes == 0 ? List.of() : mds.getExtents(c, a.getIno(), 0, stripes);
        }
        if (closing) {
            throw new FsException(Status.EIO, "the Granary client is stopping (unmount)");
        }
        long fh = nextHandle.getAndIncrement();
        OpenFile f = new OpenFile(this, fh, a, flags, c, extents);
        if (deferMap) {
            f.deferMap(deferDir);
        }
        files.put(fh, f);
        // Added inside the map's compute, as release removes: added after computeIfAbsent returned, the
        // handle could land in a set that the release of the inode's last other handle (the kernel
        // sends RELEASE after close(2) returns) had just dropped, where no other handle sees it.
        filesByIno.compute(a.getIno(), (k, set) -> {
            Set<OpenFile> s = set != null ? set : ConcurrentHashMap.newKeySet();
            s.add(f);
            return s;
        });
        // A map older than a change this client has seen since (another open here read the file
        // after another client's close while this open's read was in flight): read it again, or
        // this handle's reads would fill the page cache with the file as it was before that
        // change, under attributes that already show it, and later opens would keep those pages.
        Long seen = newestCtimes.getIfPresent(a.getIno());
        if (localChanges.get() != changesBefore || (seen != null && f.mapCtimeNs() < seen)) {
            try {
                f.refreshMap(); // from here on every commit of this client reaches f
            } catch (FsException e) {
                LOG.debug("reading the map of inode {} again after open failed (the open's map stays): {}", a.getIno(), e.getMessage());
                return fh;
            }
        }
        shareNewerMap(f);
        return fh;
    }

    /**
     * Gives the map that the new handle {@code f} read from the MDS to the inode's other clean
     * handles on this client ({@link OpenFile#adoptNewerMap}): close-to-open drops the node's
     * page cache at this open, and an older descriptor must not fill it again with the file as
     * it was at its own open. Skipped for a handle when a commit of this client reached the
     * handles after {@code f}'s map was taken.
     */
    private void shareNewerMap(OpenFile f) {
        Set<OpenFile> peers = filesByIno.get(f.ino());
        if (peers == null || peers.size() < 2 || f.mapDeferred()) {
            return; // deferred: the open found the version the node's pages hold, which is nothing newer to share
        }
        long changes = fileChanges(f.ino());
        OpenFile.CommittedMap m = f.committedMap();
        for (OpenFile g : peers) {
            // only this file's own changes count (helper-found: with the changes of every file, a
            // write to another file while g's lock was held by a slow read made g keep its old
            // map, and its reads refilled the pages this open had dropped with the old bytes)
            if (g != f && g.adoptNewerMap(m, () -> fileChanges(f.ino()) == changes)) {
                LOG.debug("handle {} of inode {} took the map of the newer open {}", g.fh(), f.ino(), f.fh());
            }
        }
    }

    private OpenFile file(long fh) {
        OpenFile f = files.get(fh);
        if (f == null) {
            throw unknownHandle(fh);
        }
        return f;
    }

    /**
     * EBADF for a handle this client never gave out; EIO once {@link #close} began: the kernel's
     * handles stay valid until they are released, so a write racing with the unmount is an I/O
     * error (its data up to the last flush is committed), not a bad descriptor.
     */
    private FsException unknownHandle(long fh) {
        if (closing) {
            return new FsException(Status.EIO, "the Granary client is stopping (unmount): file handle " + fh + " was closed");
        }
        return new FsException(Status.EBADF, "unknown file handle " + fh);
    }

    /**
     * Drops this client's cached entry of the last name of {@code path} and the attributes of its
     * inode, so that the next lookup of the name asks the MDS: called when a call on the inode
     * the name led to found it gone (ENOENT), e.g. removed or replaced by another client within
     * the cache timeout. The directory is resolved as a lookup does (from the cache, else from the
     * MDS); does nothing when that fails (the name cannot be reached through this path anyway).
     * Regression: it walked only cached entries, so when the directory's entry expired during the
     * failed call (about 1 in 100 calls, a Raft round trip against a 1 s timeout), the file's
     * entry stayed, the kernel's retry found the same removed inode, and chmod, truncate or link
     * failed with ESTALE.
     */
    public void forgetName(Caller c, String path) {
        List<String> comps = components(path);
        if (comps.isEmpty()) {
            return;
        }
        long dir;
        try {
            Attr cur = attrOf(c, MdsClient.ROOT_INO);
            for (int i = 0; i < comps.size() - 1; i++) {
                cur = lookupIn(c, cur, comps.get(i));
            }
            dir = cur.getIno();
        } catch (FsException e) {
            return;
        }
        DentryKey k = new DentryKey(dir, comps.get(comps.size() - 1));
        Long ino = dentries.getIfPresent(k);
        dentries.invalidate(k);
        if (ino != null) {
            attrs.invalidate(ino);
        }
    }

    /** Whether a handle of inode {@code ino} is open on this client. */
    public boolean hasOpenHandles(long ino) {
        return filesByIno.containsKey(ino);
    }

    /** The open file behind handle {@code fh}; EBADF when unknown. */
    public OpenFile handle(long fh) {
        return file(fh);
    }

    /** read(2) of up to {@code length} bytes at {@code offset}; shorter at end of file. EBADF, EIO. */
    public byte[] read(Caller c, long fh, long offset, int length) {
        return withPeersCommitted(file(fh)).read(offset, length);
    }

    /**
     * {@code f}, after the writes other handles of its inode on this client hold uncommitted
     * have been committed (their flush hands the extents to {@code f}): POSIX requires a read to
     * see every write that returned before it, through whichever descriptor. Regression: a
     * second descriptor read an empty file while the first held "hello", and the kernel, taking
     * that short read for the end of file, then cut the first descriptor's reads short as well.
     * A failed commit is left to the writer, whose handle keeps the error; the read then sees
     * what was committed.
     */
    private OpenFile withPeersCommitted(OpenFile f) {
        Set<OpenFile> open = filesByIno.get(f.ino());
        if (open == null || open.size() < 2) {
            return f;
        }
        // again after a hand-over (helper-found: zeros read back after the writer's pwrite returned)
        untilNoHandOver(() -> {
            for (OpenFile o : open) {
                if (o != f && o.mustFlushForPeers()) {
                    try {
                        o.flush();
                    } catch (FsException e) {
                        LOG.debug("committing another handle's writes of inode {} before a read failed: {}", f.ino(), e.getMessage());
                    }
                }
            }
        });
        return f;
    }

    /**
     * read(2) as buffers to copy out in order (see {@link OpenFile#readBuffers}): the bytes of
     * {@link #read} without assembling them in one array first. EBADF, EIO.
     */
    public List<ByteBuffer> readBuffers(Caller c, long fh, long offset, int length) {
        return readBuffers(c, fh, offset, length, null);
    }

    /**
     * {@link #readBuffers(Caller, long, long, int)}; {@code fill} (may be null) is where a dense
     * random reader's whole-stripe fetch goes ({@link OpenFile#readBuffers(long, int, PageCacheFill)}).
     * EBADF, EIO.
     */
    public List<ByteBuffer> readBuffers(Caller c, long fh, long offset, int length, PageCacheFill fill) {
        return withPeersCommitted(file(fh)).readBuffers(offset, length, fill);
    }

    /** Whole stripes fetched for dense random readers (and stored in the page cache), and their bytes. */
    public record DenseReadStats(long fills, long bytes) {}

    /** What dense random reads fetched whole so far ({@link DenseRandomReads}). */
    public DenseReadStats denseReadStats() {
        return new DenseReadStats(denseReads.fills(), denseReads.fillBytes());
    }

    DenseRandomReads denseReads() {
        return denseReads;
    }

    private final DenseRandomReads denseReads = new DenseRandomReads();

    /** write(2) of {@code len} bytes of {@code data} at {@code offset}; returns {@code len}. EBADF, EIO, EFBIG. */
    public int write(Caller c, long fh, long offset, byte[] data, int len) {
        return write(c, fh, offset, data, len, false);
    }

    /**
     * write(2) as above; {@code writeback}: the kernel writes back pages of a shared mapping
     * (FUSE_WRITE_CACHE), which go at {@code offset} even on an O_APPEND handle (see
     * {@link OpenFile#write(long, byte[], int, boolean)}). EBADF, EIO, EFBIG.
     */
    public int write(Caller c, long fh, long offset, byte[] data, int len, boolean writeback) {
        OpenFile f = file(fh);
        if ((f.isAppend() || f.isWriteOnly()) && !writeback && f.firstWrite()) {
            removeCapabilityBeforeDirectWrite(f);
        }
        Set<OpenFile> open = filesByIno.get(f.ino());
        if (open == null) {
            return f.write(offset, data, len, writeback);
        }
        // Writes to one inode through its handles on this client go one at a time: "take the
        // other handles' stripes, then write" must not interleave with another writer's, or two
        // handles end up holding one stripe and their read-modify-write uploads race (helper-found:
        // threads writing through their own descriptors lost blocks in 17 of 40 runs).
        synchronized (open) {
            withPeersCommittedBefore(open, f, offset, len, writeback);
            return f.write(offset, data, len, writeback);
        }
    }

    /**
     * Before a write of {@code len} bytes at {@code offset} through {@code f} is buffered, the
     * other handles of its inode on this client ({@code open}) give up what they hold uncommitted
     * in the stripes it touches: their buffers of those stripes move to {@code f}
     * ({@link OpenFile#handOverTo}); stripes they are uploading or have not yet committed are
     * committed (all of it when {@code f} appends, and their queued appends always). Each handle
     * commits whole stripes, so without this the handle that commits last won over a write made
     * later through another descriptor: POSIX orders writes by time, whichever descriptor makes
     * them. Regression: after pwrite(A, 100 x 'c', 0) and pwrite(B, 10 x 'd', 0), closing B and
     * then A left 100 x 'c' instead of 10 x 'd' and 90 x 'c'. A failed commit stays with its
     * handle (which reports EIO); this write goes on.
     */
    private void withPeersCommittedBefore(Set<OpenFile> open, OpenFile f, long offset, int len, boolean writeback) {
        if (open.size() < 2) {
            return;
        }
        boolean appends = f.isAppend() && !writeback;
        long first = f.stripeOf(Math.max(0, offset));
        long last = f.stripeOf(Math.max(0, offset + Math.max(len, 1) - 1));
        for (OpenFile o : open) {
            if (o == f) {
                continue;
            }
            if (!appends && !o.isAppend() && o.handOverTo(f, first, last)) {
                continue; // f writes on top of o's earlier bytes; no commit needed
            }
            if (o.holdsUncommitted(first, last, appends)) {
                try {
                    o.flush();
                } catch (FsException e) {
                    LOG.debug("committing another handle's writes of inode {} before a write failed: {}", f.ino(), e.getMessage());
                }
            }
        }
    }

    /**
     * Commits what the other handles of {@code f}'s inode on this client hold uncommitted, after
     * {@code f}'s own flush: a handle may hold bytes written through another
     * ({@link OpenFile#handOverTo}), so close(2) and fsync(2) of any descriptor commit the
     * inode's writes on this client (fsync(2): "all modified in-core data of the file"),
     * O_APPEND handles' queued writes included, whichever kind {@code f} is.
     *
     * @throws FsException the first failure of another handle's commit (EIO), unless {@code quiet}
     */
    private void withPeersFlushed(OpenFile f, boolean quiet) {
        Set<OpenFile> open = filesByIno.get(f.ino());
        if (open == null || open.size() < 2) {
            return;
        }
        FsException first = null;
        for (OpenFile o : open) {
            // O_APPEND handles too: their queued bytes are modified data of the file (regression:
            // fsync of a plain descriptor left another descriptor's appends uncommitted)
            if (o != f && o.hasUncommittedWrites()) {
                try {
                    o.flush();
                } catch (FsException e) {
                    LOG.debug("committing another handle's writes of inode {} failed: {}", f.ino(), e.getMessage());
                    first = first == null ? e : first;
                }
            }
        }
        if (first != null && !quiet) {
            throw first;
        }
    }

    /** close(2)'s flush: uploads and commits the handle's writes; returns when committed. EIO. */
    public void flush(Caller c, long fh) {
        OpenFile f = file(fh);
        f.flush();
        withPeersFlushed(f, false);
        atMdsForClose(f.ino()); // close-to-open: a file created here exists at the MDS when close returns
    }

    /** fsync(2)/fdatasync(2): same as flush (data in S3 and extents committed). EIO. */
    public void fsync(Caller c, long fh, boolean datasync) {
        OpenFile f = file(fh);
        f.flush();
        withPeersFlushed(f, false);
        atMds(f.ino());
    }

    /** Releases handle {@code fh} after flushing it; the handle is gone even when the flush fails (EIO). */
    public void release(Caller c, long fh) {
        OpenFile f = files.remove(fh);
        if (f == null) {
            throw unknownHandle(fh);
        }
        try {
            if (f.flockOwner() != 0) { // flock(2): the lock goes with the last close of the open file
                try {
                    take(c, f.ino(), flockInfo(f.flockOwner(), LockType.UNLOCK), false);
                } catch (FsException e) {
                    LOG.warn("releasing the flock of inode {} at close failed (the lease releases it): {}", f.ino(), e.getMessage());
                }
            }
            releaseLocksOfNoFlushHandle(c, f);
            f.close();
            withPeersFlushed(f, true); // their own close or fsync reports their errors
            atMdsForClose(f.ino());
        } finally {
            filesByIno.computeIfPresent(f.ino(), (k, set) -> {
                set.remove(f);
                return set.isEmpty() ? null : set;
            });
        }
    }

    /** Starts uploads of every partial stripe of every handle (called when dirty memory is short). */
    void spillAll() {
        for (OpenFile f : files.values()) {
            f.spill();
        }
    }

    /** Number of open file handles (for tests and status). */
    public int openFileCount() {
        return files.size();
    }

    // ------------------------------------------------------------------ advisory locks

    /**
     * fcntl(F_GETLK): the first lock held in the MDS (by any client) that would stop
     * {@code owner} from taking {@code type} on {@code [start, end)} ({@code end} 0 = to the end
     * of the file), or null. EBADF, EINVAL.
     */
    public LockInfo getlk(Caller c, long fh, long owner, LockType type, long start, long end, int pid) {
        OpenFile f = file(fh);
        return lockCall(c, f.ino(), posixLock(owner, type, start, end, pid), true).conflict();
    }

    /**
     * fcntl(F_SETLK/F_SETLKW): takes (READ, WRITE) or releases (UNLOCK) a POSIX byte-range lock
     * held in the MDS, so that every client sees it (POSIX.1 advisory record locking).
     * {@code wait} (F_SETLKW) retries until granted (no deadlock detection: EDEADLK is never
     * returned).
     *
     * @throws FsException EAGAIN (held by another owner, without wait), EBADF (a read lock on a
     *     handle not open for reading, or a write lock on one not open for writing), EINTR
     */
    public void setlk(Caller c, long fh, long owner, LockType type, long start, long end, int pid, boolean wait) {
        OpenFile f = file(fh);
        int acc = f.flags() & O_ACCMODE;
        if ((type == LockType.READ && acc == O_WRONLY) || (type == LockType.WRITE && acc == O_RDONLY)) {
            throw new FsException(Status.EBADF, "a " + type + " lock needs the file open for " + (type == LockType.READ ? "reading" : "writing"));
        }
        if (type != LockType.UNLOCK) {
            // before the lock: a RELEASE racing it then releases it too
            LockKey key = new LockKey(f.ino(), owner, LockKind.POSIX);
            lockHandles.computeIfAbsent(key, k -> ConcurrentHashMap.newKeySet()).add(fh);
            Set<Long> owners = noFlushHandles.get(fh);
            if (owners != null) {
                owners.add(owner);
                LockerProcess p = LockerProcess.of(pid);
                if (p != null) {
                    noFlushLockers.put(key, p);
                }
            }
        }
        take(c, f.ino(), posixLock(owner, type, start, end, pid), wait);
    }

    /**
     * The process that took a lock, by its pid in this mount's pid namespace (as FUSE reports
     * it) and its start time (clock ticks after boot, {@code /proc/PID/stat} field 22), so that a
     * reused pid is not taken for it.
     */
    private record LockerProcess(int pid, long startTicks) {
        /** The process with {@code pid} now, or null when it cannot be told (pid 0: outside the namespace). */
        static LockerProcess of(int pid) {
            long start = pid > 0 ? startTicks(pid) : -1;
            return start < 0 ? null : new LockerProcess(pid, start);
        }

        /** False once the process has exited (gone, a zombie, or its pid reused); true when unsure. */
        boolean alive() {
            long now = startTicks(pid);
            return now == -1 || now == startTicks; // -1: /proc unreadable for another reason
        }

        /** Start time of {@code pid}; -2 when it is gone or a zombie; -1 when /proc cannot tell. */
        private static long startTicks(int pid) {
            try {
                String stat = java.nio.file.Files.readString(java.nio.file.Path.of("/proc", Integer.toString(pid), "stat"));
                String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
                return f[0].equals("Z") || f[0].equals("X") ? -2 : Long.parseLong(f[19]);
            } catch (java.nio.file.NoSuchFileException e) {
                return -2;
            } catch (java.io.IOException | RuntimeException e) {
                return -1;
            }
        }
    }

    /** Releases the POSIX locks of owners whose locking process is gone ({@link #noFlushLockers}); lease renewer. */
    private void releaseLocksOfExitedLockers() {
        for (Map.Entry<LockKey, LockerProcess> e : noFlushLockers.entrySet()) {
            if (!e.getValue().alive() && noFlushLockers.remove(e.getKey(), e.getValue())) {
                LockKey k = e.getKey();
                try {
                    take(caller(0, 0), k.ino(), posixLock(k.owner(), LockType.UNLOCK, 0, 0, 0), false);
                } catch (FsException ex) {
                    LOG.warn("releasing the POSIX locks of exited process {} on inode {} failed (the lease releases them): {}",
                            e.getValue().pid(), k.ino(), ex.getMessage());
                }
            }
        }
    }

    /**
     * Whether close(2) of handle {@code fh} may go without its FLUSH request ({@code FOPEN_NOFLUSH},
     * Linux 5.16+): the handle only reads (its close has nothing to commit), and no process holds a
     * POSIX lock of its file through this client. A FLUSH is what releases the closing process's
     * POSIX locks (close(2) drops them, POSIX); for this handle, RELEASE (its last close) releases
     * the locks taken through it instead. Each read-only open so costs one FUSE round trip less (a
     * small file read whole: LOOKUP, OPEN, IOCTL, READ, RELEASE). Marks the handle; call once,
     * right after its open.
     *
     * @throws FsException EBADF when {@code fh} is not open
     */
    public boolean mayCloseWithoutFlush(long fh) {
        OpenFile f = file(fh);
        if ((f.flags() & O_ACCMODE) != O_RDONLY || (f.flags() & O_TRUNC) != 0) {
            return false;
        }
        for (LockKey k : heldLocks) {
            if (k.ino() == f.ino() && k.kind() == LockKind.POSIX) {
                return false; // closing any descriptor of the file must release them (POSIX)
            }
        }
        noFlushHandles.put(fh, ConcurrentHashMap.newKeySet());
        return true;
    }

    /** Releases the POSIX locks taken through a handle opened without FLUSH at close ({@link #mayCloseWithoutFlush}). */
    private void releaseLocksOfNoFlushHandle(Caller c, OpenFile f) {
        Set<Long> owners = noFlushHandles.remove(f.fh());
        for (Map.Entry<LockKey, Set<Long>> e : lockHandles.entrySet()) {
            LockKey k = e.getKey();
            if (k.ino() != f.ino() || !e.getValue().remove(f.fh())) {
                continue;
            }
            // a lock owner that locked through no other open handle since its last unlock: the
            // close of this one would have released its locks (POSIX); one that did keeps them
            // until that handle's close (its FLUSH) or its exit
            if (owners != null && owners.contains(k.owner()) && e.getValue().isEmpty()) {
                try {
                    take(c, f.ino(), posixLock(k.owner(), LockType.UNLOCK, 0, 0, 0), false);
                } catch (FsException ex) {
                    LOG.warn("releasing the POSIX locks of inode {} at close failed (the lease releases them): {}", f.ino(), ex.getMessage());
                }
            }
            lockHandles.computeIfPresent(k, (kk, hs) -> hs.isEmpty() ? null : hs);
        }
    }

    /**
     * flock(2): takes a shared (READ) or exclusive (WRITE) whole-file lock, or releases it
     * (UNLOCK), held in the MDS for every client. {@code wait} (no LOCK_NB) retries until granted.
     *
     * @throws FsException EWOULDBLOCK/EAGAIN (held elsewhere, with LOCK_NB), EBADF, EINTR
     */
    public void flock(Caller c, long fh, long owner, LockType type, boolean wait) {
        OpenFile f = file(fh);
        take(c, f.ino(), flockInfo(owner, type), wait);
        f.flockOwner(type == LockType.UNLOCK ? 0 : owner);
    }

    /** This session's whole-file flock lock of {@code owner} (an open file). */
    private LockInfo flockInfo(long owner, LockType type) {
        return LockInfo.newBuilder().setKind(LockKind.FLOCK).setType(type).setSession(session).setOwner(owner).build();
    }

    private LockInfo posixLock(long owner, LockType type, long start, long end, int pid) {
        if (start < 0 || end < 0 || (end != 0 && end <= start)) {
            throw new FsException(Status.EINVAL, "bad lock range [" + start + ", " + end + ")");
        }
        return LockInfo.newBuilder().setKind(LockKind.POSIX).setType(type).setSession(session).setOwner(owner)
                .setStart(start).setEnd(end).setPid(pid).build();
    }

    private void take(Caller c, long ino, LockInfo l, boolean wait) {
        if (l.getType() == LockType.UNLOCK && !heldLocks.contains(new LockKey(ino, l.getOwner(), l.getKind()))) {
            // Nothing of this owner to release here: libfuse unlocks at every flush (close), which
            // must not cost a Raft write when no lock was ever taken.
            return;
        }
        long sleepMs = 2;
        for (;;) {
            MdsClient.LockReply r = lockCall(c, ino, l, false);
            if (r.granted()) {
                LockKey key = new LockKey(ino, l.getOwner(), l.getKind());
                if (l.getType() != LockType.UNLOCK) {
                    heldLocks.add(key);
                } else if (l.getKind() == LockKind.FLOCK || (l.getStart() == 0 && l.getEnd() == 0)) {
                    heldLocks.remove(key); // whole range released
                    lockHandles.remove(key);
                    noFlushLockers.remove(key);
                }
                return;
            }
            if (!wait) {
                throw new FsException(Status.EAGAIN, "lock held by another owner");
            }
            try {
                Thread.sleep(sleepMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new FsException(Status.EINTR, "interrupted while waiting for a lock");
            }
            sleepMs = Math.min(100, sleepMs * 2);
        }
    }

    private MdsClient.LockReply lockCall(Caller c, long ino, LockInfo l, boolean test) {
        ensureRenewer();
        atMds(ino);
        boolean holding = !heldLocks.isEmpty();
        MdsClient.LockReply r = mds.lock(c, ino, l, test, config.lockLease().toNanos());
        // A lease that ran out while this client held nothing (the renewer renews only while
        // locks are held) lost nothing: the call renews it. Regression: every first lock after
        // lock_lease without locks warned that held locks were released.
        if (r.leaseExpired() && holding) {
            leaseLost();
        }
        return r;
    }

    /** Counts and reports a lease found run out while this client held locks: the MDS released them. */
    private void leaseLost() {
        leaseLosses.incrementAndGet();
        LOG.warn("the lock lease of this client ran out before it was renewed: locks it held were released");
    }

    /** How many times this client found its lock lease run out while it held locks (which it then lost). */
    public long lockLeaseLosses() {
        return leaseLosses.get();
    }

    /** Starts the lease renewal of this client's session (once, at its first lock call). */
    private void ensureRenewer() {
        if (renewerStarted.compareAndSet(false, true)) {
            long period = Math.max(100, config.lockLease().toMillis() / 3);
            renewer.scheduleWithFixedDelay(() -> {
                if (heldLocks.isEmpty()) {
                    return;
                }
                releaseLocksOfExitedLockers();
                try {
                    if (mds.renewSession(caller(0, 0), session, config.lockLease().toNanos())) {
                        leaseLost();
                    }
                } catch (RuntimeException e) {
                    LOG.warn("renewing the lock lease failed (locks are released {} after the last renewal): {}",
                            config.lockLease(), e.getMessage());
                }
            }, period, period, TimeUnit.MILLISECONDS);
        }
    }

    /** This client's session id in the MDS (its advisory locks belong to it). */
    public long session() {
        return session;
    }

    // ------------------------------------------------------------------ directories

    /** opendir(3): a directory handle. ENOENT, ENOTDIR, EACCES (no read permission). */
    public long opendir(Caller c, String path) {
        Attr a = lookup(c, path);
        if (!isDir(a)) {
            throw new FsException(Status.ENOTDIR, path);
        }
        if (!permits(c, a, R_OK)) {
            throw new FsException(Status.EACCES, "no read permission on directory " + path);
        }
        long parent = MdsClient.ROOT_INO;
        List<String> comps = components(path);
        if (comps.size() > 1) {
            parent = lookup(c, "/" + String.join("/", comps.subList(0, comps.size() - 1))).getIno();
        }
        long dh = nextHandle.getAndIncrement();
        dirs.put(dh, new DirHandle(a.getIno(), parent));
        return dh;
    }

    /**
     * All entries of the directory behind {@code dh}: "." and ".." first, then the MDS's entries
     * in name byte order, fetched page by page ({@link ClientConfig#readdirPageSize()}) until
     * the MDS says no more follow. Names are decoded by {@link Names#decode} (bytes that are not
     * UTF-8 become lone surrogates, PEP 383, and encode back to the same bytes).
     *
     * @throws FsException EBADF (unknown handle), ENOENT (directory removed), EACCES
     */
    public List<Entry> readdir(Caller c, long dh) {
        DirHandle d = dirs.get(dh);
        if (d == null) {
            throw new FsException(Status.EBADF, "unknown directory handle " + dh);
        }
        if (deferred != null) {
            deferred.awaitDir(d.ino); // a listing shows none of the files this client removed
        }
        if (creates != null) {
            creates.materializeDir(d.ino); // and every file this client created
        }
        List<Entry> out = new ArrayList<>();
        out.add(new Entry(".", d.ino, S_IFDIR));
        out.add(new Entry("..", d.parentIno, S_IFDIR));
        // A complete listing kept from before (DirListings): the first page asks for one entry,
        // which brings the directory's ctime; the same ctime means no entry changed since.
        DirListings.Listing kept = listings.peek(d.ino);
        ReadDirPage p = mds.readdir(c, d.ino, new byte[0], kept != null ? 1 : config.readdirPageSize());
        if (kept != null && p.dir() != null && p.dir().getCtimeNs() == kept.ctimeNs()) {
            listings.hit();
            for (Entry e : kept.entries()) {
                if (deferred == null || !deferred.pending(d.ino, e.name())) {
                    out.add(e);
                }
            }
            return out;
        }
        long ctime = p.dir() != null ? p.dir().getCtimeNs() : Long.MIN_VALUE;
        boolean oneVersion = p.dir() != null; // every page carried the same ctime
        int pages = 1;
        List<Entry> all = new ArrayList<>();
        // The next page is asked for as soon as a page arrives, while this thread decodes and caches
        // the one it has: a large listing overlaps the MDS's scans with the client's work.
        while (true) {
            java.util.concurrent.CompletableFuture<ReadDirPage> next = null;
            if (p.more() && !p.entries().isEmpty()) {
                byte[] after = p.entries().get(p.entries().size() - 1).getName().toByteArray();
                int limit = grownPage(config.readdirPageSize(), pages);
                next = java.util.concurrent.CompletableFuture.supplyAsync(
                        () -> mds.readdir(c, d.ino, after, limit), ioExecutor);
            }
            // No dentry is cached from a listing: a lookup needs the attributes too, which a plain
            // listing lacks (statahead fetches both), and the inserts were a quarter of a large
            // listing's client CPU (profiled: os.listdir of 5,000 names).
            for (DirEntry e : p.entries()) {
                Entry entry = Entry.of(e);
                all.add(entry);
                if (deferred != null && deferred.pending(d.ino, entry.name())) {
                    continue; // removed here since the listing began
                }
                out.add(entry);
            }
            if (next == null) {
                break;
            }
            p = awaitPage(next);
            pages++;
            oneVersion &= p.dir() != null && p.dir().getCtimeNs() == ctime;
        }
        if (oneVersion) {
            listings.put(d.ino, ctime, all, pages);
        } else {
            listings.forget(d.ino);
        }
        return out;
    }

    /** The largest page a listing grows to, entries (a page of names stays well under gRPC's 4 MiB message limit). */
    static final int MAX_GROWN_PAGE = 8192;

    /**
     * Entries to ask for in a listing's page after {@code pages} pages of a directory that has
     * more: {@code pageSize} four times over per page so far, up to {@link #MAX_GROWN_PAGE} (or
     * {@code pageSize} when larger). A small directory still costs one page of {@code pageSize};
     * a large one fewer round trips (5,000 names: 2 instead of 5).
     */
    static int grownPage(int pageSize, int pages) {
        long grown = (long) pageSize << Math.min(2L * pages, 20);
        return (int) Math.max(pageSize, Math.min(grown, MAX_GROWN_PAGE));
    }

    /** Entries statahead fetches put into this client's caches so far (tests). */
    long statAheadFetchedEntries() {
        return statAhead.fetchedEntries();
    }

    /** Listings answered from complete listings kept from before ({@link DirListings}; tests, diagnostics). */
    public long listingHits() {
        return listings.hits();
    }

    private final DirListings listings = new DirListings();

    /** The page {@code f} fetches; its FsException (or runtime failure) as the caller's own. */
    private static ReadDirPage awaitPage(java.util.concurrent.CompletableFuture<ReadDirPage> f) {
        try {
            return f.join();
        } catch (java.util.concurrent.CompletionException e) {
            if (e.getCause() instanceof RuntimeException r) {
                throw r;
            }
            throw e;
        }
    }

    /** Path-based readdir: opendir + readdir + releasedir. */
    public List<Entry> readdir(Caller c, String path) {
        long dh = opendir(c, path);
        try {
            return readdir(c, dh);
        } finally {
            releasedir(c, dh);
        }
    }

    /** releasedir(3): forgets the directory handle; EBADF when unknown. */
    public void releasedir(Caller c, long dh) {
        if (dirs.remove(dh) == null) {
            throw new FsException(Status.EBADF, "unknown directory handle " + dh);
        }
    }

    // ------------------------------------------------------------------ filesystem, xattrs

    /** statfs(2) figures from the MDS; the files this client created and has not sent yet count as used inodes. */
    public StatFsReply statfs(Caller c) {
        StatFsReply r = mds.statfs(c);
        int pending = creates == null ? 0 : creates.size();
        if (pending == 0) {
            return r;
        }
        // the files this client answered but has not sent yet (deferred creates) count as used here
        return r.toBuilder().setUsedInodes(r.getUsedInodes() + pending)
                .setFreeInodes(Math.max(0, r.getFreeInodes() - pending)).build();
    }

    /** setxattr(2) with XATTR_CREATE / XATTR_REPLACE flags: EEXIST, ENODATA, ERANGE. */
    public void setxattr(Caller c, String path, String name, byte[] value, int flags) {
        Attr a = lookup(c, path);
        if (LayoutXattr.NAME.equals(name)) {
            setLayout(c, a, new String(value, StandardCharsets.US_ASCII));
            return;
        }
        byte[] n = xattrName(name);
        absentXattrs.invalidate(new XattrKey(a.getIno(), name));
        xattrsSetHere.put(a.getIno(), Boolean.TRUE);
        atMds(a.getIno());
        mds.setxattr(c, a.getIno(), n, value, flags);
    }

    /**
     * getxattr(2): the value; ENODATA when absent. An absent name is remembered for the cache
     * timeout (another client's setxattr may stay invisible that long, as its attribute changes).
     */
    public byte[] getxattr(Caller c, String path, String name) {
        Attr a = lookup(c, path);
        if (LayoutXattr.NAME.equals(name)) {
            atMds(a.getIno());
            Attr fresh = mds.getattr(c, a.getIno());
            if (!isReg(fresh) && !isDir(fresh)) {
                throw new FsException(Status.ENODATA, "only files and directories have a layout");
            }
            String value = LayoutXattr.format(fresh.getLayout());
            if (isReg(fresh) && fresh.getSize() > 0) {
                List<Extent> first = mds.getExtents(c, fresh.getIno(), 0, 1);
                if (!first.isEmpty() && first.get(0).getBlockKey().isEmpty() && first.get(0).getLength() > 0) {
                    value += " dom_size=" + first.get(0).getLength(); // data on MDS (inline)
                }
            }
            return value.getBytes(StandardCharsets.US_ASCII);
        }
        byte[] n = xattrName(name);
        if (name.startsWith("system.") && name.length() > "system.".length()) {
            // POSIX ACLs are not supported, so none exist: the MDS's answer for every system.*
            // name. ls -l asks for system.posix_acl_access on every file: no round trip for it.
            throw new FsException(Status.ENODATA, name);
        }
        XattrKey key = new XattrKey(a.getIno(), name);
        // The cached answers stand in for the MDS only where it would not refuse this caller:
        // reading needs read permission (user.*), trusted.* needs root (Linux xattr_permission).
        boolean mayAnswer = permits(c, a, R_OK) && (c.getUid() == 0 || !name.startsWith("trusted."));
        if (mayAnswer && (absentXattrs.getIfPresent(key) != null || hasNoXattrs(a))) {
            throw new FsException(Status.ENODATA, name);
        }
        try {
            atMds(a.getIno());
            return mds.getxattr(c, a.getIno(), n);
        } catch (FsException e) {
            if (e.status() == Status.ENODATA) {
                absentXattrs.put(key, Boolean.TRUE);
            }
            throw e;
        }
    }

    /** listxattr(2): the names (UTF-8). */
    public List<String> listxattr(Caller c, String path) {
        Attr a = lookup(c, path);
        List<String> out = new ArrayList<>();
        if (hasNoXattrs(a) && permits(c, a, R_OK)) {
            return out;
        }
        atMds(a.getIno());
        for (ByteString n : mds.listxattr(c, a.getIno())) {
            out.add(Names.decode(n.toByteArray()));
        }
        return out;
    }

    /**
     * Whether {@code a}'s inode has no xattrs as far as this client knows within the cache timeout:
     * the MDS counted none in attributes fetched within the timeout (a create's reply among them,
     * so the kernel's security.capability question before the first write of a new file costs no
     * round trip; another client's setxattr may stay invisible that long, as its attribute
     * changes) and this client set none since. {@code ls -l} and {@code ls --color} ask for
     * security.selinux and security.capability on every file: a dataset without xattrs answers
     * them with no round trip.
     */
    private boolean hasNoXattrs(Attr a) {
        return a.hasXattrCount() && a.getXattrCount() == 0 && xattrsSetHere.getIfPresent(a.getIno()) == null;
    }

    /** The identity of removals the kernel itself would make (file_remove_privs runs without permission checks). */
    private static final Caller KERNEL = Caller.newBuilder().setUid(0).setGid(0).build();

    /**
     * Before the first write through a handle the FUSE layer opens with {@code direct_io}
     * (write-only, and {@code O_APPEND}): removes the file's {@code security.capability}, as
     * Linux's file_remove_privs does at every write(2) of the page-cache path; its direct write
     * path leaves that removal to the filesystem (it still clears set-user-ID and set-group-ID
     * itself, through a SETATTR). Costs nothing for a file this client knows has no xattrs, else
     * one MDS write per handle (a capability set again while the handle stays open stays). For a
     * read-write {@code O_APPEND} handle that keeps the page cache, the kernel removed it already
     * and this finds nothing.
     */
    private void removeCapabilityBeforeDirectWrite(OpenFile f) {
        if (hasNoXattrs(f.openedAttr())) {
            return;
        }
        try {
            atMds(f.ino());
            mds.removexattr(KERNEL, f.ino(), xattrName("security.capability"));
        } catch (FsException e) {
            if (e.status() != Status.ENODATA) {
                throw e;
            }
        } finally {
            absentXattrs.invalidate(new XattrKey(f.ino(), "security.capability"));
        }
    }

    /** removexattr(2): ENODATA when absent. */
    public void removexattr(Caller c, String path, String name) {
        Attr a = lookup(c, path);
        byte[] n = xattrName(name);
        try {
            atMds(a.getIno());
            mds.removexattr(c, a.getIno(), n);
        } finally {
            absentXattrs.invalidate(new XattrKey(a.getIno(), name));
        }
    }

    /**
     * Sets the layout of a directory (the default for new files in it) or of an empty regular
     * file from a {@link LayoutXattr} value (Lustre's {@code lfs setstripe}). Owner or root.
     *
     * @throws FsException EINVAL (bad value), EPERM (not the owner), EBUSY (file has data)
     */
    private void setLayout(Caller c, Attr a, String value) {
        LayoutXattr.Request req = LayoutXattr.parse(value);
        atMds(a.getIno());
        Attr fresh = mds.getattr(c, a.getIno());
        List<Integer> osts = new ArrayList<>();
        if (req.firstOstOver(fresh.getLayout()) >= 0) {
            for (var o : mds.listOsts(c)) {
                osts.add(o.getIndex());
            }
            osts.sort(null);
        }
        mds.setLayout(c, a.getIno(), LayoutXattr.merge(req, fresh.getLayout(), osts));
        localChanges.incrementAndGet();
        attrs.invalidate(a.getIno());
    }

    private static byte[] xattrName(String name) {
        byte[] b = Names.encode(name);
        if (b.length == 0 || b.length > 255) {
            throw new FsException(b.length == 0 ? Status.EINVAL : Status.ERANGE, "xattr name length " + b.length);
        }
        return b;
    }

    /** Drops every cached dentry and attribute (e.g. after a known remote change). */
    public void invalidateCaches() {
        localChanges.incrementAndGet();
        dentries.invalidateAll();
        attrs.invalidateAll();
        absentXattrs.invalidateAll();
    }

    /**
     * Flushes and releases every open handle (errors are logged), then stops the io threads.
     * Does not close the MdsClient or BlockIo.
     */
    @Override
    public void close() {
        closing = true;
        for (Long fh : new ArrayList<>(files.keySet())) {
            try {
                release(null, fh);
            } catch (RuntimeException e) {
                LOG.warn("flush of file handle {} at close failed: {}", fh, e.getMessage());
            }
        }
        if (leases != null) {
            leases.close(); // ends the leases: their directories' creates are sent first
        }
        if (creates != null) {
            creates.close(); // sends the deferred creates
        }
        if (deferred != null) {
            deferred.close(); // sends the pending unlinks (waits up to 30 s)
        }
        if (dataAhead != null) {
            dataAhead.close();
        }
        dirs.clear();
        renewer.shutdownNow();
        if (renewerStarted.get()) {
            try {
                mds.renewSession(caller(0, 0), session, 0); // releases this client's locks now
            } catch (RuntimeException e) {
                LOG.warn("ending the lock session failed (its locks are released when the lease runs out): {}", e.getMessage());
            }
        }
        ioExecutor.shutdown();
        try {
            ioExecutor.awaitTermination(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
