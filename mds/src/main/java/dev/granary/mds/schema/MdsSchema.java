package dev.granary.mds.schema;

import com.google.protobuf.CodedInputStream;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.MessageLite;
import com.google.protobuf.Parser;
import dev.granary.mds.proto.Extent;
import dev.granary.mds.proto.OssInfo;
import dev.granary.mds.proto.OstInfo;
import dev.granary.mds.schema.proto.DentryRecord;
import dev.granary.mds.schema.proto.DirLeaseRecord;
import dev.granary.mds.schema.proto.GcRecord;
import dev.granary.mds.schema.proto.InodeRecord;
import dev.granary.mds.schema.proto.LockTableRecord;
import dev.granary.mds.schema.proto.PackRecord;
import dev.granary.mds.schema.proto.SessionRecord;
import dev.granary.mds.schema.proto.UsageRecord;
import dev.granary.raft.KvIterator;
import dev.granary.raft.KvReader;
import dev.granary.raft.KvTxn;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * THE schema of the MDS RocksDB: every column family and every key/value codec. Nobody builds
 * byte keys elsewhere. All integers in keys are big-endian (so byte order = numeric order for
 * unsigned values); {@code ~e} is the bitwise complement of the epoch, so the newest version of a
 * key sorts first.
 *
 * <table>
 * <caption>Column families and key formats</caption>
 * <tr><th>CF</th><th>key</th><th>value</th></tr>
 * <tr><td>{@code inodes}</td><td>ino(8) ~epoch(8)</td><td>version: {@link InodeRecord}</td></tr>
 * <tr><td>{@code dentries}</td><td>parent(8) name(1..255) 0x00 ~epoch(8)</td><td>version: {@link DentryRecord}</td></tr>
 * <tr><td>{@code xattrs}</td><td>ino(8) name(1..255) 0x00 ~epoch(8)</td><td>version: raw xattr value bytes</td></tr>
 * <tr><td>{@code extents}</td><td>ino(8) stripeIndex(8) ~epoch(8)</td><td>version: {@link Extent}</td></tr>
 * <tr><td>{@code meta}</td><td>"epoch"</td><td>current epoch, 8 bytes (absent: 1)</td></tr>
 * <tr><td>{@code meta}</td><td>"next_ino"</td><td>next inode number to allocate, 8 bytes (absent: 2; root = 1)</td></tr>
 * <tr><td>{@code meta}</td><td>"gc_seq"</td><td>next gc sequence number, 8 bytes (absent: 0)</td></tr>
 * <tr><td>{@code meta}</td><td>"usage"</td><td>{@link UsageRecord} (absent: 0 bytes, 1 inode = root)</td></tr>
 * <tr><td>{@code meta}</td><td>"ost/" index(4)</td><td>{@link OstInfo}</td></tr>
 * <tr><td>{@code meta}</td><td>"oss/" address(UTF-8)</td><td>{@link OssInfo}</td></tr>
 * <tr><td>{@code meta}</td><td>"pack/" ost(4) blockKey(UTF-8)</td><td>{@link PackRecord}: extents referring to a pack</td></tr>
 * <tr><td>{@code gc}</td><td>seq(8)</td><td>{@link GcRecord}: a freed block reference</td></tr>
 * </table>
 *
 * <p><b>Versions.</b> The four namespace families (inodes, dentries, xattrs, extents) are
 * multi-versioned: key = fields + {@code ~epoch}. A "version" value is one tag byte
 * ({@code 0} = tombstone, {@code 1} = live) then the payload. Reading at epoch E seeks to
 * fields + {@code ~E} and takes the first entry with the same fields: the newest version written
 * at or before E. Names never contain NUL, so the 0x00 terminator keeps "a" and its versions
 * before "a\x01..." and "ab". Writing a version at the current epoch overwrites a version of the
 * same epoch. Deleting at epoch E writes a tombstone at E when an older version exists (some
 * snapshot may see it); when no older version exists, the key of epoch E (if any) is simply
 * removed, since no reader at any epoch can see a difference and the current epoch is never a
 * snapshot's epoch. Range scans ({@link #scanDentries}, {@link #scanExtents},
 * {@link #scanXattrs}) yield the newest version at or before E of each key and skip tombstones.
 */
public final class MdsSchema {
    private MdsSchema() {}

    /** CF of inode versions. */
    public static final String INODES = "inodes";
    /** CF of directory entry versions. */
    public static final String DENTRIES = "dentries";
    /** CF of xattr versions. */
    public static final String XATTRS = "xattrs";
    /** CF of extent versions. */
    public static final String EXTENTS = "extents";
    /** CF of unversioned metadata: epoch, counters, OST and OSS tables. */
    public static final String META = "meta";
    /** CF of the GC queue: freed block references. */
    public static final String GC = "gc";
    /** All column families of the MDS, in declaration order. */
    public static final List<String> COLUMN_FAMILIES = List.of(INODES, DENTRIES, XATTRS, EXTENTS, META, GC);

    /** The root directory's inode number. */
    public static final long ROOT_INO = 1;
    /** The first epoch of a fresh filesystem. */
    public static final long FIRST_EPOCH = 1;

    private static final byte TOMBSTONE = 0;
    private static final byte LIVE = 1;
    private static final int EPOCH_LEN = 8;

    private static final byte[] META_EPOCH = ascii("epoch");
    private static final byte[] META_NEXT_INO = ascii("next_ino");
    private static final byte[] META_GC_SEQ = ascii("gc_seq");
    private static final byte[] META_USAGE = ascii("usage");
    private static final byte[] META_OST_PREFIX = ascii("ost/");
    private static final byte[] META_OSS_PREFIX = ascii("oss/");
    private static final byte[] META_LOCK_PREFIX = ascii("lock/");
    private static final byte[] META_SESSION_PREFIX = ascii("session/");
    private static final byte[] META_DIR_LEASE_PREFIX = ascii("dirlease/");
    private static final byte[] META_PACK_PREFIX = ascii("pack/");

    // ------------------------------------------------------------------ key building blocks

    private static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.US_ASCII);
    }

    private static byte[] be64(long v) {
        return ByteBuffer.allocate(8).putLong(v).array();
    }

    private static long be64(byte[] b, int off) {
        return ByteBuffer.wrap(b, off, 8).getLong();
    }

    private static byte[] concat(byte[]... parts) {
        int n = 0;
        for (byte[] p : parts) {
            n += p.length;
        }
        byte[] out = new byte[n];
        int o = 0;
        for (byte[] p : parts) {
            System.arraycopy(p, 0, out, o, p.length);
            o += p.length;
        }
        return out;
    }

    private static boolean startsWith(byte[] key, byte[] prefix) {
        return key.length >= prefix.length && Arrays.equals(key, 0, prefix.length, prefix, 0, prefix.length);
    }

    /** The full key of the version of {@code fields} written at {@code epoch}: fields + be64(~epoch). */
    static byte[] versionKey(byte[] fields, long epoch) {
        return concat(fields, be64(~epoch));
    }

    /** The epoch of a versioned key. */
    static long epochOf(byte[] key) {
        return ~be64(key, key.length - EPOCH_LEN);
    }

    private static byte[] fieldsOf(byte[] key) {
        return Arrays.copyOf(key, key.length - EPOCH_LEN);
    }

    static byte[] inodeFields(long ino) {
        return be64(ino);
    }

    static byte[] dentryPrefix(long parent) {
        return be64(parent);
    }

    static byte[] dentryFields(long parent, byte[] name) {
        return concat(be64(parent), name, new byte[] {0});
    }

    static byte[] xattrFields(long ino, byte[] name) {
        return concat(be64(ino), name, new byte[] {0});
    }

    static byte[] extentFields(long ino, long stripe) {
        return concat(be64(ino), be64(stripe));
    }

    // ------------------------------------------------------------------ versioned primitives

    /**
     * Payload of the newest version of {@code fields} at or before {@code epoch}; null if none or a
     * tombstone. A version written at {@code epoch} itself (every key changed since the last
     * snapshot, at the live epoch) is read with a point get, which RocksDB's bloom filters make
     * cheap; only when there is none, and an older epoch exists, does it seek for an older version.
     * A seek costs an iterator made and freed: it was ~10% of the CPU of applying a create.
     */
    static byte[] getVersioned(KvReader r, String cf, byte[] fields, long epoch) {
        byte[] v = getVersionValue(r, cf, fields, epoch);
        return v == null ? null : Arrays.copyOfRange(v, 1, v.length);
    }

    /**
     * As {@link #getVersioned}, but the stored value itself: its payload starts at index 1 (null
     * if none or a tombstone). Records are parsed from it in place ({@link #parseValue}): a small
     * file's inline bytes (100 KiB in an extent) are then not copied once more before their parse.
     */
    private static byte[] getVersionValue(KvReader r, String cf, byte[] fields, long epoch) {
        byte[] at = versionKey(fields, epoch);
        byte[] exact = r.get(cf, at);
        if (exact != null) {
            return live(exact, cf, at);
        }
        if (epoch <= FIRST_EPOCH) {
            return null; // no version is older than the first epoch (putVersioned refuses them)
        }
        try (KvIterator it = r.seek(cf, at, KvReader.prefixEnd(fields))) {
            if (!it.valid()) {
                return null;
            }
            byte[] key = it.key();
            if (key.length != fields.length + EPOCH_LEN || !startsWith(key, fields)) {
                return null;
            }
            return live(it.value(), cf, key);
        }
    }

    /** True when some version (live or tombstone) of {@code fields} exists at an epoch before {@code epoch}. */
    static boolean hasVersionBefore(KvReader r, String cf, byte[] fields, long epoch) {
        if (epoch <= FIRST_EPOCH) {
            return false; // putVersioned refuses versions before the first epoch
        }
        try (KvIterator it = r.seek(cf, versionKey(fields, epoch - 1), KvReader.prefixEnd(fields))) {
            if (!it.valid()) {
                return false;
            }
            byte[] key = it.key();
            return key.length == fields.length + EPOCH_LEN && startsWith(key, fields);
        }
    }

    static void putVersioned(KvTxn t, String cf, byte[] fields, long epoch, byte[] payload) {
        if (epoch < FIRST_EPOCH) {
            throw new IllegalArgumentException("a version before the first epoch: " + epoch);
        }
        byte[] v = new byte[payload.length + 1];
        v[0] = LIVE;
        System.arraycopy(payload, 0, v, 1, payload.length);
        t.put(cf, versionKey(fields, epoch), v);
    }

    static void deleteVersioned(KvTxn t, String cf, byte[] fields, long epoch) {
        if (hasVersionBefore(t, cf, fields, epoch)) {
            t.put(cf, versionKey(fields, epoch), new byte[] {TOMBSTONE});
        } else {
            t.delete(cf, versionKey(fields, epoch));
        }
    }

    /** The stored value {@code v} if it is a live version (payload from index 1), null if a tombstone. */
    private static byte[] live(byte[] v, String cf, byte[] key) {
        if (v.length == 0 || (v[0] != LIVE && v[0] != TOMBSTONE)) {
            throw new IllegalStateException("corrupt version value in CF " + cf + " at key " + hex(key));
        }
        return v[0] == TOMBSTONE ? null : v;
    }

    /** Receives one live version of a range scan (its stored value: payload from index 1); return false to stop. */
    @FunctionalInterface
    interface RawVisitor {
        boolean visit(byte[] fields, byte[] value);
    }

    /**
     * Visits, in key order, the newest version at or before {@code epoch} of every key whose
     * fields start with {@code prefix} and are {@code >= from} (from starts with prefix), skipping
     * newer versions, older versions and tombstones.
     */
    static void scanVersioned(KvReader r, String cf, byte[] prefix, byte[] from, long epoch, RawVisitor v) {
        try (KvIterator it = r.seek(cf, from, KvReader.prefixEnd(prefix))) {
            byte[] done = null; // fields whose visible version was already decided
            for (; it.valid(); it.next()) {
                byte[] key = it.key();
                if (!startsWith(key, prefix)) {
                    return;
                }
                if (key.length < prefix.length + EPOCH_LEN) {
                    throw new IllegalStateException("corrupt key in CF " + cf + ": " + hex(key));
                }
                if (Long.compareUnsigned(epochOf(key), epoch) > 0) {
                    continue; // newer than the read epoch
                }
                byte[] fields = fieldsOf(key);
                if (done != null && Arrays.equals(done, fields)) {
                    continue; // an older version of a key already decided
                }
                done = fields;
                byte[] p = live(it.value(), cf, key);
                if (p != null && !v.visit(fields, p)) {
                    return;
                }
            }
        }
    }

    // ------------------------------------------------------------------ typed codecs

    private static <T extends MessageLite> T parse(Parser<T> parser, byte[] b, String what) {
        try {
            return parser.parseFrom(b);
        } catch (InvalidProtocolBufferException e) {
            throw new IllegalStateException("corrupt " + what + " record: " + e.getMessage(), e);
        }
    }

    /**
     * Parses the payload of stored version value {@code v} (from index 1) without copying it
     * first; its bytes fields share {@code v} (aliasing), which nothing writes after the read that
     * returned it.
     */
    private static <T extends MessageLite> T parseValue(Parser<T> parser, byte[] v, String what) {
        try {
            CodedInputStream in = CodedInputStream.newInstance(v, 1, v.length - 1);
            in.enableAliasing(true);
            T t = parser.parseFrom(in);
            in.checkLastTagWas(0);
            return t;
        } catch (InvalidProtocolBufferException e) {
            throw new IllegalStateException("corrupt " + what + " record: " + e.getMessage(), e);
        }
    }

    /** The inode {@code ino} as of {@code epoch}, or null if it does not exist then. */
    public static InodeRecord getInode(KvReader r, long ino, long epoch) {
        byte[] v = getVersionValue(r, INODES, inodeFields(ino), epoch);
        return v == null ? null : parseValue(InodeRecord.parser(), v, "inode " + ino);
    }

    /** Writes the version of inode {@code ino} at {@code epoch}. */
    public static void putInode(KvTxn t, long ino, long epoch, InodeRecord rec) {
        putVersioned(t, INODES, inodeFields(ino), epoch, rec.toByteArray());
    }

    /** Deletes inode {@code ino} as of {@code epoch} (tombstone when older versions exist). */
    public static void deleteInode(KvTxn t, long ino, long epoch) {
        deleteVersioned(t, INODES, inodeFields(ino), epoch);
    }

    /** The entry {@code name} of directory {@code parent} as of {@code epoch}, or null. */
    public static DentryRecord getDentry(KvReader r, long parent, byte[] name, long epoch) {
        byte[] v = getVersionValue(r, DENTRIES, dentryFields(parent, name), epoch);
        return v == null ? null : parseValue(DentryRecord.parser(), v, "dentry");
    }

    /** Writes the entry {@code name} of {@code parent} at {@code epoch}. */
    public static void putDentry(KvTxn t, long parent, byte[] name, long epoch, DentryRecord rec) {
        putVersioned(t, DENTRIES, dentryFields(parent, name), epoch, rec.toByteArray());
    }

    /** Deletes the entry {@code name} of {@code parent} as of {@code epoch}. */
    public static void deleteDentry(KvTxn t, long parent, byte[] name, long epoch) {
        deleteVersioned(t, DENTRIES, dentryFields(parent, name), epoch);
    }

    /** Receives a directory entry of a scan; return false to stop. */
    @FunctionalInterface
    public interface DentryVisitor {
        boolean visit(byte[] name, DentryRecord rec);
    }

    /**
     * Visits the entries of {@code parent} visible at {@code epoch} whose names are strictly
     * greater than {@code after} (byte order; empty: from the first), in name order.
     */
    public static void scanDentries(KvReader r, long parent, byte[] after, long epoch, DentryVisitor v) {
        byte[] prefix = dentryPrefix(parent);
        // Keys of names > after start at parent + after + 0x01 (names never contain NUL).
        byte[] from = after.length == 0 ? prefix : concat(prefix, after, new byte[] {1});
        scanVersioned(r, DENTRIES, prefix, from, epoch, (fields, value) -> v.visit(
                Arrays.copyOfRange(fields, 8, fields.length - 1), parseValue(DentryRecord.parser(), value, "dentry")));
    }

    /** The value of xattr {@code name} of {@code ino} as of {@code epoch}, or null. */
    public static byte[] getXattr(KvReader r, long ino, byte[] name, long epoch) {
        return getVersioned(r, XATTRS, xattrFields(ino, name), epoch);
    }

    /** Writes xattr {@code name} of {@code ino} at {@code epoch}. */
    public static void putXattr(KvTxn t, long ino, byte[] name, long epoch, byte[] value) {
        putVersioned(t, XATTRS, xattrFields(ino, name), epoch, value);
    }

    /** Deletes xattr {@code name} of {@code ino} as of {@code epoch}. */
    public static void deleteXattr(KvTxn t, long ino, byte[] name, long epoch) {
        deleteVersioned(t, XATTRS, xattrFields(ino, name), epoch);
    }

    /** Receives an xattr of a scan; return false to stop. */
    @FunctionalInterface
    public interface XattrVisitor {
        boolean visit(byte[] name, byte[] value);
    }

    /** Visits the xattrs of {@code ino} visible at {@code epoch}, in name order. */
    public static void scanXattrs(KvReader r, long ino, long epoch, XattrVisitor v) {
        byte[] prefix = be64(ino);
        scanVersioned(r, XATTRS, prefix, prefix, epoch,
                (fields, value) -> v.visit(Arrays.copyOfRange(fields, 8, fields.length - 1), Arrays.copyOfRange(value, 1, value.length)));
    }

    /** The extent of stripe {@code stripe} of {@code ino} as of {@code epoch}, or null. */
    public static Extent getExtent(KvReader r, long ino, long stripe, long epoch) {
        byte[] v = getVersionValue(r, EXTENTS, extentFields(ino, stripe), epoch);
        return v == null ? null : parseValue(Extent.parser(), v, "extent");
    }

    /** Writes the extent of stripe {@code e.getStripeIndex()} of {@code ino} at {@code epoch}. */
    public static void putExtent(KvTxn t, long ino, long epoch, Extent e) {
        putVersioned(t, EXTENTS, extentFields(ino, e.getStripeIndex()), epoch, e.toByteArray());
    }

    /** Deletes the extent of stripe {@code stripe} of {@code ino} as of {@code epoch}. */
    public static void deleteExtent(KvTxn t, long ino, long stripe, long epoch) {
        deleteVersioned(t, EXTENTS, extentFields(ino, stripe), epoch);
    }

    /** Receives an extent of a scan; return false to stop. */
    @FunctionalInterface
    public interface ExtentVisitor {
        boolean visit(Extent e);
    }

    /**
     * Visits the extents of {@code ino} visible at {@code epoch} with stripe index in
     * {@code [fromStripe, toStripe)} (unsigned), ascending.
     */
    public static void scanExtents(KvReader r, long ino, long fromStripe, long toStripe, long epoch, ExtentVisitor v) {
        byte[] prefix = be64(ino);
        scanVersioned(r, EXTENTS, prefix, extentFields(ino, fromStripe), epoch, (fields, value) -> {
            long stripe = be64(fields, 8);
            if (Long.compareUnsigned(stripe, toStripe) >= 0) {
                return false;
            }
            return v.visit(parseValue(Extent.parser(), value, "extent"));
        });
    }

    // ------------------------------------------------------------------ meta

    private static long getLong(KvReader r, byte[] key, long dflt) {
        byte[] v = r.get(META, key);
        if (v == null) {
            return dflt;
        }
        if (v.length != 8) {
            throw new IllegalStateException("corrupt meta value under " + new String(key, StandardCharsets.US_ASCII));
        }
        return be64(v, 0);
    }

    /** The current (live) epoch: every namespace write is versioned with it. */
    public static long currentEpoch(KvReader r) {
        return getLong(r, META_EPOCH, FIRST_EPOCH);
    }

    /**
     * Sets the current epoch. Package-private: only a snapshot operation (later) and schema tests
     * advance it.
     */
    static void setCurrentEpoch(KvTxn t, long epoch) {
        if (epoch < FIRST_EPOCH) {
            throw new IllegalArgumentException("epoch must be >= 1: " + epoch);
        }
        t.put(META, META_EPOCH, be64(epoch));
    }

    /** Allocates the next inode number (deterministic: a counter in meta; root = 1, first file = 2). */
    public static long allocateIno(KvTxn t) {
        return allocateInos(t, 1);
    }

    /** Allocates {@code count} consecutive inode numbers (count >= 1); returns the first. */
    public static long allocateInos(KvTxn t, int count) {
        long ino = getLong(t, META_NEXT_INO, ROOT_INO + 1);
        t.put(META, META_NEXT_INO, be64(ino + count));
        return ino;
    }

    /** The next inode number the MDS will allocate: every number below it was handed out. */
    public static long nextIno(KvReader r) {
        return getLong(r, META_NEXT_INO, ROOT_INO + 1);
    }

    /** The usage counters. */
    public static UsageRecord getUsage(KvReader r) {
        byte[] v = r.get(META, META_USAGE);
        return v == null ? UsageRecord.newBuilder().setUsedInodes(1).build() : parse(UsageRecord.parser(), v, "usage");
    }

    /** Replaces the usage counters. */
    public static void putUsage(KvTxn t, UsageRecord u) {
        t.put(META, META_USAGE, u.toByteArray());
    }

    /** Registers or replaces OST {@code ost.getIndex()}. */
    public static void putOst(KvTxn t, OstInfo ost) {
        t.put(META, concat(META_OST_PREFIX, ByteBuffer.allocate(4).putInt(ost.getIndex()).array()), ost.toByteArray());
    }

    /** All registered OSTs, by index ascending (unsigned). */
    public static List<OstInfo> listOsts(KvReader r) {
        List<OstInfo> out = new ArrayList<>();
        try (KvIterator it = r.seek(META, META_OST_PREFIX, KvReader.prefixEnd(META_OST_PREFIX))) {
            for (; it.valid() && startsWith(it.key(), META_OST_PREFIX); it.next()) {
                out.add(parse(OstInfo.parser(), it.value(), "OST"));
            }
        }
        return out;
    }

    /** Registers an OSS (idempotent: keyed by address). */
    public static void putOss(KvTxn t, OssInfo oss) {
        t.put(META, concat(META_OSS_PREFIX, oss.getAddress().getBytes(StandardCharsets.UTF_8)), oss.toByteArray());
    }

    /** All registered OSSes, by address. */
    public static List<OssInfo> listOss(KvReader r) {
        List<OssInfo> out = new ArrayList<>();
        try (KvIterator it = r.seek(META, META_OSS_PREFIX, KvReader.prefixEnd(META_OSS_PREFIX))) {
            for (; it.valid() && startsWith(it.key(), META_OSS_PREFIX); it.next()) {
                out.add(parse(OssInfo.parser(), it.value(), "OSS"));
            }
        }
        return out;
    }

    // ------------------------------------------------------------------ locks and sessions

    /** The advisory locks of inode {@code ino} (empty when none). */
    public static LockTableRecord getLocks(KvReader r, long ino) {
        byte[] v = r.get(META, concat(META_LOCK_PREFIX, be64(ino)));
        return v == null ? LockTableRecord.getDefaultInstance() : parse(LockTableRecord.parser(), v, "lock table");
    }

    /** Replaces the advisory locks of inode {@code ino}; an empty table is deleted. */
    public static void putLocks(KvTxn t, long ino, LockTableRecord rec) {
        byte[] key = concat(META_LOCK_PREFIX, be64(ino));
        if (rec.getLocksCount() == 0) {
            t.delete(META, key);
        } else {
            t.put(META, key, rec.toByteArray());
        }
    }

    /** Session {@code id}, or null when unknown. */
    public static SessionRecord getSession(KvReader r, long id) {
        byte[] v = r.get(META, concat(META_SESSION_PREFIX, be64(id)));
        return v == null ? null : parse(SessionRecord.parser(), v, "session");
    }

    /** Stores session {@code id}. */
    public static void putSession(KvTxn t, long id, SessionRecord rec) {
        t.put(META, concat(META_SESSION_PREFIX, be64(id)), rec.toByteArray());
    }

    /** The lease record of directory {@code dir}, or null when none was taken (or it was released). */
    public static DirLeaseRecord getDirLease(KvReader r, long dir) {
        byte[] v = r.get(META, concat(META_DIR_LEASE_PREFIX, be64(dir)));
        return v == null ? null : parse(DirLeaseRecord.parser(), v, "directory lease");
    }

    /** Stores directory {@code dir}'s lease record. */
    public static void putDirLease(KvTxn t, long dir, DirLeaseRecord rec) {
        t.put(META, concat(META_DIR_LEASE_PREFIX, be64(dir)), rec.toByteArray());
    }

    /** Drops directory {@code dir}'s lease record (released, or the directory removed). */
    public static void deleteDirLease(KvTxn t, long dir) {
        t.delete(META, concat(META_DIR_LEASE_PREFIX, be64(dir)));
    }

    // ------------------------------------------------------------------ packs

    private static byte[] packKey(int ost, String blockKey) {
        return concat(META_PACK_PREFIX, ByteBuffer.allocate(4).putInt(ost).array(), blockKey.getBytes(StandardCharsets.UTF_8));
    }

    /** The record of pack {@code blockKey} on OST {@code ost}, or null when there is none (never committed, or freed). */
    public static PackRecord getPack(KvReader r, int ost, String blockKey) {
        byte[] v = r.get(META, packKey(ost, blockKey));
        return v == null ? null : parse(PackRecord.parser(), v, "pack");
    }

    /** Stores the record of pack {@code blockKey} on OST {@code ost}. */
    public static void putPack(KvTxn t, int ost, String blockKey, PackRecord rec) {
        t.put(META, packKey(ost, blockKey), rec.toByteArray());
    }

    /** Drops the record of pack {@code blockKey} on OST {@code ost} (its last reference went). */
    public static void deletePack(KvTxn t, int ost, String blockKey) {
        t.delete(META, packKey(ost, blockKey));
    }

    // ------------------------------------------------------------------ gc

    /** Appends a freed block reference to the GC queue under the next sequence number. */
    public static void appendGc(KvTxn t, GcRecord rec) {
        long seq = getLong(t, META_GC_SEQ, 0);
        t.put(META, META_GC_SEQ, be64(seq + 1));
        t.put(GC, be64(seq), rec.toByteArray());
    }

    /** A GC record with its sequence number (its key in CF {@code gc}). */
    public record QueuedGc(long seq, GcRecord rec) {}

    /**
     * The GC queue's records with sequence numbers of at least {@code fromSeq}, in sequence order,
     * while {@code take} accepts them: the first record it refuses ends the scan (not included).
     */
    public static void scanGc(KvReader r, long fromSeq, java.util.function.Predicate<QueuedGc> take) {
        try (KvIterator it = r.seek(GC, be64(fromSeq))) {
            for (; it.valid(); it.next()) {
                QueuedGc q = new QueuedGc(be64(it.key(), 0), parse(GcRecord.parser(), it.value(), "gc"));
                if (!take.test(q)) {
                    return;
                }
            }
        }
    }

    /** Removes GC record {@code seq}; returns whether it was queued. */
    public static boolean deleteGc(KvTxn t, long seq) {
        byte[] key = be64(seq);
        if (t.get(GC, key) == null) {
            return false;
        }
        t.delete(GC, key);
        return true;
    }

    /** The GC queue in sequence order (for the GC worker and tests). */
    public static List<GcRecord> listGc(KvReader r) {
        List<GcRecord> out = new ArrayList<>();
        try (KvIterator it = r.seek(GC, new byte[0])) {
            for (; it.valid(); it.next()) {
                out.add(parse(GcRecord.parser(), it.value(), "gc"));
            }
        }
        return out;
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) {
            sb.append(String.format("%02x", x & 0xff));
        }
        return sb.toString();
    }
}
