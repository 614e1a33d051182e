package dev.granary.raft;

import com.sun.nio.file.ExtendedOpenOption;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.rocksdb.BlockBasedTableConfig;
import org.rocksdb.BloomFilter;
import org.rocksdb.BuiltinComparator;
import org.rocksdb.Checkpoint;
import org.rocksdb.ColumnFamilyDescriptor;
import org.rocksdb.ColumnFamilyHandle;
import org.rocksdb.ColumnFamilyOptions;
import org.rocksdb.DBOptions;
import org.rocksdb.LRUCache;
import org.rocksdb.Options;
import org.rocksdb.PerfContext;
import org.rocksdb.PerfLevel;
import org.rocksdb.ReadOptions;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;
import org.rocksdb.RocksIterator;
import org.rocksdb.Slice;
import org.rocksdb.Snapshot;
import org.rocksdb.WriteBatchWithIndex;
import org.rocksdb.WriteOptions;

/**
 * The RocksDB database of one Raft peer: RocksDB's "default" column family (owned by the raft
 * module; it holds the last-applied term and log index under a reserved key) plus the column
 * families of the {@link KvApplier}. Keys are ordered by RocksDB's bytewise comparator.
 *
 * <p>Thread-safe. Reads ({@link #get}, {@link #seek}) may run concurrently with {@link #commit}.
 * After {@link #close()} every operation fails with {@link IllegalStateException}; iterators still
 * open are closed with the database.
 *
 * <p>Errors: unknown column family names raise {@link IllegalArgumentException}; RocksDB errors
 * raise {@link KvStoreException} carrying RocksDB's message.
 */
public final class RocksKv implements KvReader, AutoCloseable {
    /** Name of RocksDB's default column family (owned by the raft module; txns may not write it). */
    public static final String DEFAULT_CF = "default";

    /** Reserved key in {@link #DEFAULT_CF}: 16 bytes, big-endian term then log index. */
    static final byte[] LAST_APPLIED_KEY = "granary.raft.lastApplied".getBytes(StandardCharsets.UTF_8);

    /**
     * Prefix of reserved keys in {@link #DEFAULT_CF}: {@code prefix + call id} (a client id and
     * call id, see {@link Call}) holds the call's stamp (8 bytes, big-endian ns) and reply.
     */
    static final byte[] CALL_PREFIX = "granary.raft.call/".getBytes(StandardCharsets.UTF_8);
    /** Prefix of the expiry index of calls in {@link #DEFAULT_CF}: {@code prefix + stamp + call id}, empty value. */
    static final byte[] CALL_AT_PREFIX = "granary.raft.callAt/".getBytes(StandardCharsets.UTF_8);
    /** Expired calls deleted per commit at most (the rest go with later commits). */
    private static final int EXPIRED_CALLS_PER_COMMIT = 256;

    /**
     * A client call applied by a commit, remembered so that a retry of it is answered with
     * {@code reply} instead of being applied again.
     *
     * @param id the client's id and the call's id (any bytes unique per call)
     * @param stampNanos the leader's clock when the call was appended, ns; calls are forgotten by it
     * @param reply what the call answered
     */
    public record Call(byte[] id, long stampNanos, byte[] reply) {
        public Call {
            Objects.requireNonNull(id, "id");
            Objects.requireNonNull(reply, "reply");
        }
    }

    /** Block cache shared by all column families of one database, bytes. */
    private static final long BLOCK_CACHE_BYTES = 32L << 20;
    /** Filter policy of every database's SST files (immutable, shared, kept for the JVM's life). */
    private static final BloomFilter BLOOM;
    /** Memtable size per column family, bytes. */
    private static final long WRITE_BUFFER_BYTES = 16L << 20;

    static {
        RocksDB.loadLibrary();
        BLOOM = new BloomFilter(10);
    }

    private final Path dir;
    private final boolean syncCommits;
    private final boolean directFlush;
    private final DBOptions dbOptions;
    private final ColumnFamilyOptions cfOptions;
    private final LRUCache blockCache;
    private final WriteOptions writeOptions;
    private final RocksDB db;
    private final List<ColumnFamilyHandle> handles;
    private final Map<String, ColumnFamilyHandle> byName;
    private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
    private final Set<NativeResource> openResources = Collections.newSetFromMap(new IdentityHashMap<>());
    private volatile long lastAppliedTerm;
    private volatile long lastAppliedIndex;
    /** Where the next scan for expired calls starts (see {@link #forgetCalls}); null: at the start. */
    private byte[] forgetCursor;
    private boolean closed;

    private RocksKv(Path dir, boolean syncCommits, boolean directFlush, DBOptions dbOptions,
                    ColumnFamilyOptions cfOptions, LRUCache blockCache, RocksDB db,
                    List<ColumnFamilyHandle> handles, Map<String, ColumnFamilyHandle> byName) {
        this.dir = dir;
        this.syncCommits = syncCommits;
        this.directFlush = directFlush;
        this.dbOptions = dbOptions;
        this.cfOptions = cfOptions;
        this.blockCache = blockCache;
        this.writeOptions = new WriteOptions().setSync(syncCommits).setDisableWAL(!syncCommits);
        this.db = db;
        this.handles = handles;
        this.byName = byName;
        long[] termIndex = readLastApplied();
        this.lastAppliedTerm = termIndex[0];
        this.lastAppliedIndex = termIndex[1];
    }

    /**
     * Opens (creating if missing) a RocksDB at {@code dir} with RocksDB's default column family plus
     * the named column families. Commits skip RocksDB's write-ahead log: the Raft log is the
     * durable record, and a peer that crashed reopens its database at the last flush (memtables
     * are flushed together for all column families, {@code atomic_flush}, so it is one consistent
     * point with its last-applied index) and re-applies the Raft log after that index. Without the
     * WAL each applied entry costs one copy of its bytes less (small files written through FUSE:
     * ~16% more files/s in a quickstart; see {@link #open(Path, List, boolean)}).
     *
     * @throws IllegalArgumentException on a null/blank/duplicate name or one equal to "default"
     * @throws KvStoreException when RocksDB cannot open the database (message names {@code dir})
     */
    public static RocksKv open(Path dir, List<String> columnFamilies) {
        return open(dir, columnFamilies, false);
    }

    /**
     * Like {@link #open(Path, List)}; with {@code syncCommits} each {@link #commit} is written to
     * the WAL and fsynced instead (a database that must be durable on its own).
     * Column families present on disk but not named are opened too (and stay readable by name).
     */
    public static RocksKv open(Path dir, List<String> columnFamilies, boolean syncCommits) {
        Objects.requireNonNull(dir, "dir");
        Objects.requireNonNull(columnFamilies, "columnFamilies");
        Set<String> names = new LinkedHashSet<>();
        names.add(DEFAULT_CF);
        for (String cf : columnFamilies) {
            if (cf == null || cf.isBlank()) {
                throw new IllegalArgumentException("column family name must not be null or blank");
            }
            if (cf.equals(DEFAULT_CF)) {
                throw new IllegalArgumentException("column family \"default\" is reserved for the raft module");
            }
            if (!names.add(cf)) {
                throw new IllegalArgumentException("duplicate column family name: " + cf);
            }
        }
        try {
            Files.createDirectories(dir);
        } catch (IOException e) {
            throw new KvStoreException("cannot create RocksDB directory " + dir + ": " + e.getMessage(), e);
        }
        try (Options listOptions = new Options()) {
            for (byte[] existing : RocksDB.listColumnFamilies(listOptions, dir.toString())) {
                names.add(new String(existing, StandardCharsets.UTF_8));
            }
        } catch (RocksDBException e) {
            // No database yet: nothing to list.
        }

        // SST files written by flushes and compactions bypass the page cache where the file system
        // allows it (O_DIRECT). Small files' inline data passes through here once per peer, and
        // each flush copied it into the page cache once more. Measured in a quickstart (2,500
        // files of 100 KiB, 8 threads, alternating runs): 279-300 files/s against 235-245,
        // RocksDB's flush thread 0.7 against 2.3 CPU-s. Reads still go through the page cache.
        boolean directFlush = directIoSupported(dir);
        LRUCache cache = new LRUCache(BLOCK_CACHE_BYTES);
        BlockBasedTableConfig table = new BlockBasedTableConfig()
                .setBlockCache(cache)
                .setBlockSize(16 * 1024)
                // 10 bits per key (~1% false positives): a point read of an absent key, as every
                // applied entry's look for an earlier reply of its call is, skips SST files
                // without reading their index and data blocks
                .setFilterPolicy(BLOOM)
                .setCacheIndexAndFilterBlocks(true);
        ColumnFamilyOptions cfo = new ColumnFamilyOptions()
                .setComparator(BuiltinComparator.BYTEWISE_COMPARATOR)
                .setWriteBufferSize(WRITE_BUFFER_BYTES)
                // the same for the memtables (5% of their size): the look for an earlier reply
                // took 3.7% of a create's CPU with the keys in the memtable, 2.4% with this
                .setMemtablePrefixBloomSizeRatio(0.05)
                .setMemtableWholeKeyFiltering(true)
                .setMaxWriteBufferNumber(2)
                .setTableFormatConfig(table);
        DBOptions dbo = new DBOptions()
                .setCreateIfMissing(true)
                .setCreateMissingColumnFamilies(true)
                .setMaxBackgroundJobs(2)
                .setMaxOpenFiles(512)
                .setKeepLogFileNum(3)
                .setMaxTotalWalSize(64L << 20)
                .setUseDirectIoForFlushAndCompaction(directFlush)
                .setAtomicFlush(true); // without a WAL: every column family flushed at one point
        List<ColumnFamilyDescriptor> descriptors = new ArrayList<>();
        for (String name : names) {
            descriptors.add(new ColumnFamilyDescriptor(name.getBytes(StandardCharsets.UTF_8), cfo));
        }
        List<ColumnFamilyHandle> handles = new ArrayList<>();
        RocksDB db;
        try {
            db = RocksDB.open(dbo, dir.toString(), descriptors, handles);
        } catch (RocksDBException e) {
            cfo.close();
            dbo.close();
            cache.close();
            throw new KvStoreException("cannot open RocksDB at " + dir + ": " + e.getMessage(), e);
        }
        Map<String, ColumnFamilyHandle> byName = new LinkedHashMap<>();
        int i = 0;
        for (String name : names) {
            byName.put(name, handles.get(i++));
        }
        return new RocksKv(dir, syncCommits, directFlush, dbo, cfo, cache, db, handles, Map.copyOf(byName));
    }

    /**
     * Whether flushes and compactions write their SST files with {@code O_DIRECT} (bypassing the
     * page cache): true when the file system of {@link #dir()} accepted a direct write at open.
     */
    public boolean directFlush() {
        return directFlush;
    }

    /**
     * Whether the file system holding {@code dir} takes {@code O_DIRECT} writes: a probe file is
     * created there, one 4 KiB aligned block written through {@code O_DIRECT}, and deleted. False
     * on any refusal (tmpfs before Linux 6.6 and some overlay file systems answer {@code EINVAL}),
     * so a database there keeps buffered flushes instead of failing its first flush.
     *
     * @param dir an existing directory
     */
    static boolean directIoSupported(Path dir) {
        Path probe = dir.resolve(".direct-io-probe");
        try {
            try (FileChannel ch = FileChannel.open(probe, StandardOpenOption.CREATE,
                    StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING, ExtendedOpenOption.DIRECT)) {
                int block = 4096;
                ByteBuffer buf = ByteBuffer.allocateDirect(2 * block).alignedSlice(block).limit(block);
                ch.write(buf, 0);
            }
            return true;
        } catch (IOException | UnsupportedOperationException e) {
            return false;
        } finally {
            try {
                Files.deleteIfExists(probe);
            } catch (IOException e) {
                // A probe left behind is harmless: RocksDB ignores files it does not know.
            }
        }
    }

    /** The directory of this database. */
    public Path dir() {
        return dir;
    }

    /** Names of all open column families, "default" included. */
    public Set<String> columnFamilies() {
        return byName.keySet();
    }

    /** {@inheritDoc} Unknown {@code cf}: {@link IllegalArgumentException}. */
    @Override
    public byte[] get(String cf, byte[] key) {
        Objects.requireNonNull(key, "key");
        lock.readLock().lock();
        try {
            ensureOpen();
            return db.get(handle(cf), key);
        } catch (RocksDBException e) {
            throw rocksError("get from " + cf, e);
        } finally {
            lock.readLock().unlock();
        }
    }

    /** {@inheritDoc} Unknown {@code cf}: {@link IllegalArgumentException}. */
    @Override
    public KvIterator seek(String cf, byte[] from, byte[] until) {
        Objects.requireNonNull(from, "from");
        lock.readLock().lock();
        try {
            ensureOpen();
            Bound bound = new Bound(null, until);
            RocksIterator it = db.newIterator(handle(cf), bound.options);
            it.seek(from);
            return track(new Iter(it, null, bound));
        } finally {
            lock.readLock().unlock();
        }
    }

    /**
     * A read-only view pinned to the current state (a RocksDB snapshot): a series of reads through
     * it is consistent even while entries are applied. Close it when done.
     */
    public SnapshotReader snapshotReader() {
        lock.readLock().lock();
        try {
            ensureOpen();
            Snapshot snapshot = db.getSnapshot();
            return track(new SnapshotReader(snapshot));
        } finally {
            lock.readLock().unlock();
        }
    }

    /**
     * A new transaction: reads see the database plus the transaction's own writes
     * (WriteBatchWithIndex over the db). Not thread-safe; end it with {@link #commit} or {@link #abort}.
     */
    public KvTxn newTxn() {
        lock.readLock().lock();
        try {
            ensureOpen();
            return track(new Txn());
        } finally {
            lock.readLock().unlock();
        }
    }

    /**
     * Commits {@code txn} atomically together with the last-applied (term, index), fsynced when
     * opened with {@code syncCommits}. Closes the txn.
     *
     * @param term Raft term of the applied entry
     * @param logIndex Raft log index of the applied entry; must exceed {@link #lastAppliedIndex()}
     * @throws IllegalArgumentException if {@code txn} is not an open txn of this database or the
     *     index does not advance
     * @throws KvStoreException on a RocksDB write error
     */
    public void commit(KvTxn txn, long term, long logIndex) {
        commit(txn, term, logIndex, null, Long.MIN_VALUE);
    }

    /**
     * As {@link #commit(KvTxn, long, long)}, and in the same write batch remembers {@code call}
     * (when not null; see {@link #callReply}) and forgets calls stamped before
     * {@code forgetBeforeNanos} (a bounded number per commit, oldest first).
     */
    public void commit(KvTxn txn, long term, long logIndex, Call call, long forgetBeforeNanos) {
        Txn t = ownTxn(txn);
        lock.readLock().lock();
        try {
            ensureOpen();
            synchronized (this) {
                if (logIndex <= lastAppliedIndex) {
                    throw new IllegalArgumentException("log index " + logIndex
                            + " does not advance the last applied index " + lastAppliedIndex);
                }
                ColumnFamilyHandle meta = handle(DEFAULT_CF);
                t.batch.put(meta, LAST_APPLIED_KEY, encodeTermIndex(term, logIndex));
                byte[] forgotten = forgetCalls(t.batch, forgetBeforeNanos);
                byte[] callAt = null;
                if (call != null) {
                    byte[] stamp = ByteBuffer.allocate(8).putLong(call.stampNanos()).array();
                    callAt = concat(CALL_AT_PREFIX, stamp, call.id());
                    t.batch.put(meta, concat(CALL_PREFIX, call.id()), concat(stamp, call.reply()));
                    t.batch.put(meta, callAt, new byte[0]);
                }
                db.write(writeOptions, t.batch);
                if (forgotten != null) {
                    forgetCursor = forgotten;
                }
                if (callAt != null && forgetCursor != null && Arrays.compareUnsigned(callAt, forgetCursor) < 0) {
                    forgetCursor = null; // stamped before the cursor (a leader's clock went back): scan from the start
                }
                lastAppliedTerm = term;
                lastAppliedIndex = logIndex;
            }
        } catch (RocksDBException e) {
            throw rocksError("commit of log index " + logIndex, e);
        } finally {
            lock.readLock().unlock();
            release(t);
        }
    }

    /**
     * Records (term, index) as applied without other writes: for log entries that carry no
     * mutation (configuration changes, the leader's no-op entry).
     */
    public void markApplied(long term, long logIndex) {
        commit(newTxn(), term, logIndex);
    }

    /**
     * Adds to {@code batch} the deletion of calls stamped before {@code beforeNanos}, oldest first;
     * returns the last expiry-index key deleted, or null. The scan starts after the last key a
     * previous commit deleted (everything before it is gone on every peer alike), so it does not
     * step over the tombstones of all earlier deletions each time.
     */
    private byte[] forgetCalls(WriteBatchWithIndex batch, long beforeNanos) throws RocksDBException {
        if (beforeNanos == Long.MIN_VALUE) {
            return null;
        }
        ColumnFamilyHandle meta = handle(DEFAULT_CF);
        byte[] from = forgetCursor == null ? CALL_AT_PREFIX : forgetCursor;
        byte[] last = null;
        try (Slice upper = new Slice(concat(CALL_AT_PREFIX, ByteBuffer.allocate(8).putLong(beforeNanos).array()));
             ReadOptions ro = new ReadOptions().setIterateUpperBound(upper);
             RocksIterator it = db.newIterator(meta, ro)) {
            int n = 0;
            for (it.seek(from); it.isValid() && n < EXPIRED_CALLS_PER_COMMIT; it.next(), n++) {
                byte[] k = it.key();
                if (!startsWith(k, CALL_AT_PREFIX) || k.length < CALL_AT_PREFIX.length + 8) {
                    break;
                }
                batch.delete(meta, k);
                batch.delete(meta, concat(CALL_PREFIX, Arrays.copyOfRange(k, CALL_AT_PREFIX.length + 8, k.length)));
                last = k;
            }
        }
        return last;
    }

    /**
     * The reply of call {@code callId} if a commit remembered it and it is not forgotten yet
     * (see {@link #commit(KvTxn, long, long, Call, long)}), else null.
     */
    public byte[] callReply(byte[] callId) {
        lock.readLock().lock();
        try {
            byte[] v = ensureOpenDb().get(handle(DEFAULT_CF), concat(CALL_PREFIX, callId));
            return v == null ? null : Arrays.copyOfRange(v, 8, v.length);
        } catch (RocksDBException e) {
            throw rocksError("read of a remembered call", e);
        } finally {
            lock.readLock().unlock();
        }
    }

    private static byte[] concat(byte[]... parts) {
        int n = 0;
        for (byte[] p : parts) {
            n += p.length;
        }
        ByteBuffer b = ByteBuffer.allocate(n);
        for (byte[] p : parts) {
            b.put(p);
        }
        return b.array();
    }

    private static boolean startsWith(byte[] a, byte[] prefix) {
        return a.length >= prefix.length && Arrays.equals(a, 0, prefix.length, prefix, 0, prefix.length);
    }

    /** Discards {@code txn} without writing. Idempotent. */
    public void abort(KvTxn txn) {
        release(ownTxn(txn));
    }

    /**
     * Runs {@code reads} on the calling thread and returns how many deleted keys (tombstones)
     * RocksDB stepped over while it ran (its per-thread PerfContext counter
     * {@code internal_delete_skipped_count}). A diagnostic: it shows whether scans are bounded.
     */
    public long deletedKeysSkipped(Runnable reads) {
        PerfLevel before = db.getPerfLevel();
        db.setPerfLevel(PerfLevel.ENABLE_COUNT);
        try {
            PerfContext perf = db.getPerfContext();
            perf.reset();
            reads.run();
            return perf.getInternalDeleteSkippedCount();
        } finally {
            db.setPerfLevel(before);
        }
    }

    /** Raft log index of the last committed entry, or -1 when nothing was applied yet. */
    public long lastAppliedIndex() {
        return lastAppliedIndex;
    }

    /** Raft term of the last committed entry, or 0 when nothing was applied yet. */
    public long lastAppliedTerm() {
        return lastAppliedTerm;
    }

    /**
     * Writes a RocksDB checkpoint of the whole database into {@code target} (hard links to the SST
     * files plus a consistent copy of the rest); it opens as a database with the same contents.
     *
     * @throws IllegalArgumentException if {@code target} already exists
     * @throws KvStoreException on a RocksDB error
     */
    public void checkpoint(Path target) {
        Objects.requireNonNull(target, "target");
        if (Files.exists(target)) {
            throw new IllegalArgumentException("checkpoint target already exists: " + target);
        }
        lock.readLock().lock();
        try (Checkpoint cp = Checkpoint.create(ensureOpenDb())) {
            cp.createCheckpoint(target.toString());
        } catch (RocksDBException e) {
            throw rocksError("checkpoint into " + target, e);
        } finally {
            lock.readLock().unlock();
        }
    }

    /** Flushes memtables and closes the database; open iterators and txns are closed too. Idempotent. */
    @Override
    public void close() {
        lock.writeLock().lock();
        try {
            if (closed) {
                return;
            }
            closed = true;
            List<NativeResource> resources;
            synchronized (openResources) {
                resources = new ArrayList<>(openResources);
                openResources.clear();
            }
            for (NativeResource r : resources) {
                r.closeNative();
            }
            for (ColumnFamilyHandle h : handles) {
                h.close();
            }
            try {
                db.closeE();
            } catch (RocksDBException e) {
                throw rocksError("close", e);
            } finally {
                writeOptions.close();
                dbOptions.close();
                cfOptions.close();
                blockCache.close();
            }
        } finally {
            lock.writeLock().unlock();
        }
    }

    @Override
    public String toString() {
        return "RocksKv[" + dir + ", lastApplied=(" + lastAppliedTerm + "," + lastAppliedIndex + ")"
                + (syncCommits ? ", sync" : "") + "]";
    }

    // ---------------------------------------------------------------------------------------------

    static byte[] encodeTermIndex(long term, long index) {
        return ByteBuffer.allocate(16).putLong(term).putLong(index).array();
    }

    private long[] readLastApplied() {
        try {
            byte[] v = db.get(byName.get(DEFAULT_CF), LAST_APPLIED_KEY);
            if (v == null) {
                return new long[] {0, -1};
            }
            if (v.length != 16) {
                throw new KvStoreException("corrupt last-applied record in " + dir + ": " + v.length + " bytes");
            }
            ByteBuffer b = ByteBuffer.wrap(v);
            return new long[] {b.getLong(), b.getLong()};
        } catch (RocksDBException e) {
            throw rocksError("read of last-applied index", e);
        }
    }

    private ColumnFamilyHandle handle(String cf) {
        ColumnFamilyHandle h = cf == null ? null : byName.get(cf);
        if (h == null) {
            throw new IllegalArgumentException("unknown column family: " + cf + " (known: " + byName.keySet() + ")");
        }
        return h;
    }

    private ColumnFamilyHandle writableHandle(String cf) {
        if (DEFAULT_CF.equals(cf)) {
            throw new IllegalArgumentException("column family \"default\" is owned by the raft module: not writable");
        }
        return handle(cf);
    }

    private void ensureOpen() {
        if (closed) {
            throw new IllegalStateException("RocksKv at " + dir + " is closed");
        }
    }

    private RocksDB ensureOpenDb() {
        ensureOpen();
        return db;
    }

    private KvStoreException rocksError(String what, RocksDBException e) {
        return new KvStoreException("RocksDB " + what + " failed at " + dir + ": " + e.getMessage(), e);
    }

    /** A native object handed out to callers; closed with the database if still open. */
    private interface NativeResource {
        void closeNative();
    }

    private <T extends NativeResource> T track(T resource) {
        synchronized (openResources) {
            openResources.add(resource);
        }
        return resource;
    }

    private boolean untrack(NativeResource resource) {
        synchronized (openResources) {
            return openResources.remove(resource);
        }
    }

    private Txn ownTxn(KvTxn txn) {
        if (!(txn instanceof Txn t) || t.owner() != this) {
            throw new IllegalArgumentException("not a transaction of this RocksKv: " + txn);
        }
        return t;
    }

    /**
     * Closes a tracked native resource once (a transaction, iterator or snapshot reader), under the
     * read lock so it cannot race {@link #close()}, which closes whatever is still tracked.
     */
    private void release(NativeResource r) {
        lock.readLock().lock();
        try {
            if (untrack(r)) {
                r.closeNative();
            }
        } finally {
            lock.readLock().unlock();
        }
    }

    /** A transaction: WriteBatchWithIndex; reads through getFromBatchAndDB / newIteratorWithBase. */
    private final class Txn implements KvTxn, NativeResource {
        final WriteBatchWithIndex batch = new WriteBatchWithIndex(true);
        final ReadOptions readOptions = new ReadOptions();
        boolean done;

        RocksKv owner() {
            return RocksKv.this;
        }

        @Override
        public byte[] get(String cf, byte[] key) {
            Objects.requireNonNull(key, "key");
            lock.readLock().lock();
            try {
                checkLive();
                return batch.getFromBatchAndDB(db, handle(cf), readOptions, key);
            } catch (RocksDBException e) {
                throw rocksError("txn get from " + cf, e);
            } finally {
                lock.readLock().unlock();
            }
        }

        @Override
        public KvIterator seek(String cf, byte[] from, byte[] until) {
            Objects.requireNonNull(from, "from");
            lock.readLock().lock();
            try {
                checkLive();
                ColumnFamilyHandle h = handle(cf);
                Bound bound = new Bound(null, until);
                RocksIterator base = db.newIterator(h, bound.options);
                RocksIterator merged = batch.newIteratorWithBase(h, base, bound.options);
                merged.seek(from);
                return track(new Iter(merged, base, bound));
            } finally {
                lock.readLock().unlock();
            }
        }

        @Override
        public void put(String cf, byte[] key, byte[] value) {
            Objects.requireNonNull(key, "key");
            Objects.requireNonNull(value, "value");
            lock.readLock().lock();
            try {
                checkLive();
                batch.put(writableHandle(cf), key, value);
            } catch (RocksDBException e) {
                throw rocksError("txn put into " + cf, e);
            } finally {
                lock.readLock().unlock();
            }
        }

        @Override
        public void delete(String cf, byte[] key) {
            Objects.requireNonNull(key, "key");
            lock.readLock().lock();
            try {
                checkLive();
                batch.delete(writableHandle(cf), key);
            } catch (RocksDBException e) {
                throw rocksError("txn delete from " + cf, e);
            } finally {
                lock.readLock().unlock();
            }
        }

        private void checkLive() {
            ensureOpen();
            if (done) {
                throw new IllegalStateException("transaction already committed or aborted");
            }
        }

        @Override
        public void closeNative() {
            if (!done) {
                done = true;
                batch.close();
                readOptions.close();
            }
        }
    }

    /**
     * The read options of one iterator: the snapshot it reads (or none) and its exclusive upper
     * bound (or none). RocksDB keeps pointers to both, so they live until the iterator is closed.
     */
    private static final class Bound {
        final ReadOptions options = new ReadOptions();
        private final Slice until;

        Bound(Snapshot snapshot, byte[] until) {
            if (snapshot != null) {
                options.setSnapshot(snapshot);
            }
            this.until = until == null ? null : new Slice(until);
            if (this.until != null) {
                options.setIterateUpperBound(this.until);
            }
        }

        void close() {
            options.close();
            if (until != null) {
                until.close();
            }
        }
    }

    /** Iterator adapter; {@code base} is the db iterator under a batch iterator, closed with it. */
    private final class Iter implements KvIterator, NativeResource {
        private final RocksIterator it;
        private final RocksIterator base;
        private final Bound bound;
        private boolean itClosed;

        Iter(RocksIterator it, RocksIterator base, Bound bound) {
            this.it = it;
            this.base = base;
            this.bound = bound;
        }

        @Override
        public boolean valid() {
            lock.readLock().lock();
            try {
                return !itClosed && !closed && it.isValid();
            } finally {
                lock.readLock().unlock();
            }
        }

        @Override
        public byte[] key() {
            lock.readLock().lock();
            try {
                checkUsable();
                return it.key();
            } finally {
                lock.readLock().unlock();
            }
        }

        @Override
        public byte[] value() {
            lock.readLock().lock();
            try {
                checkUsable();
                return it.value();
            } finally {
                lock.readLock().unlock();
            }
        }

        @Override
        public void next() {
            lock.readLock().lock();
            try {
                checkUsable();
                it.next();
            } finally {
                lock.readLock().unlock();
            }
        }

        private void checkUsable() {
            ensureOpen();
            if (itClosed) {
                throw new IllegalStateException("iterator is closed");
            }
            if (!it.isValid()) {
                throw new IllegalStateException("iterator is not positioned on an entry");
            }
        }

        @Override
        public void close() {
            release(this);
        }

        @Override
        public void closeNative() {
            if (!itClosed) {
                itClosed = true;
                it.close();
                if (base != null) {
                    base.close();
                }
                bound.close();
            }
        }
    }

    /**
     * A consistent read-only view (RocksDB snapshot) of the database; close it when done.
     * Iterators opened through it must be closed before it.
     */
    public final class SnapshotReader implements KvReader, AutoCloseable, NativeResource {
        private final Snapshot snapshot;
        private final ReadOptions readOptions;
        private boolean released;

        private SnapshotReader(Snapshot snapshot) {
            this.snapshot = snapshot;
            this.readOptions = new ReadOptions().setSnapshot(snapshot);
        }

        /** {@inheritDoc} Unknown {@code cf}: {@link IllegalArgumentException}. */
        @Override
        public byte[] get(String cf, byte[] key) {
            Objects.requireNonNull(key, "key");
            lock.readLock().lock();
            try {
                checkLive();
                return db.get(handle(cf), readOptions, key);
            } catch (RocksDBException e) {
                throw rocksError("snapshot get from " + cf, e);
            } finally {
                lock.readLock().unlock();
            }
        }

        /** {@inheritDoc} Unknown {@code cf}: {@link IllegalArgumentException}. */
        @Override
        public KvIterator seek(String cf, byte[] from, byte[] until) {
            Objects.requireNonNull(from, "from");
            lock.readLock().lock();
            try {
                checkLive();
                Bound bound = new Bound(snapshot, until);
                RocksIterator it = db.newIterator(handle(cf), bound.options);
                it.seek(from);
                return track(new Iter(it, null, bound));
            } finally {
                lock.readLock().unlock();
            }
        }

        private void checkLive() {
            ensureOpen();
            if (released) {
                throw new IllegalStateException("snapshot reader is closed");
            }
        }

        /** Releases the RocksDB snapshot. Idempotent. */
        @Override
        public void close() {
            release(this);
        }

        /** Internal: releases the snapshot (use {@link #close()}). */
        @Override
        public void closeNative() {
            if (!released) {
                released = true;
                db.releaseSnapshot(snapshot);
                readOptions.close();
            }
        }
    }
}
