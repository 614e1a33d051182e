package dev.granary.mds.schema;

import dev.granary.raft.KvIterator;
import dev.granary.raft.KvReader;
import dev.granary.raft.KvTxn;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Objects;
import java.util.TreeMap;

/**
 * A write buffer over a {@link KvReader}: puts and deletes stay in memory, reads (point and
 * range) see the base plus the buffered writes. The MDS applies each operation into one of these
 * and copies the writes into the Raft transaction ({@link #flushTo}) only when the operation
 * succeeds, so a user error (an errno reply) writes nothing, as {@code KvApplier} requires.
 *
 * <p>Not thread-safe. Do not write while an iterator from {@link #seek} is open: the iterator
 * sees the buffered writes as of its creation.
 */
public final class BufferedTxn implements KvTxn {
    /** Identity sentinel for a buffered delete. */
    private static final byte[] DELETED = new byte[0];

    private final KvReader base;
    private final Map<String, TreeMap<byte[], byte[]>> writes = new TreeMap<>();

    /** Creates an empty buffer over {@code base}. */
    public BufferedTxn(KvReader base) {
        this.base = Objects.requireNonNull(base, "base");
    }

    private TreeMap<byte[], byte[]> cf(String cf) {
        return writes.computeIfAbsent(cf, k -> new TreeMap<>(Arrays::compareUnsigned));
    }

    @Override
    public byte[] get(String cf, byte[] key) {
        TreeMap<byte[], byte[]> m = writes.get(cf);
        if (m != null) {
            byte[] v = m.get(key);
            if (v == DELETED) {
                return null;
            }
            if (v != null) {
                return v.clone();
            }
        }
        return base.get(cf, key);
    }

    @Override
    public KvIterator seek(String cf, byte[] from, byte[] until) {
        TreeMap<byte[], byte[]> m = writes.get(cf);
        List<Map.Entry<byte[], byte[]>> overlay = new ArrayList<>();
        if (m != null) {
            NavigableMap<byte[], byte[]> range = m.tailMap(from, true);
            if (until != null) {
                range = range.headMap(until, false);
            }
            for (Map.Entry<byte[], byte[]> e : range.entrySet()) {
                overlay.add(Map.entry(e.getKey(), e.getValue()));
            }
        }
        return new Merged(base.seek(cf, from, until), overlay);
    }

    @Override
    public void put(String cf, byte[] key, byte[] value) {
        Objects.requireNonNull(value, "value");
        cf(cf).put(key.clone(), value.clone());
    }

    @Override
    public void delete(String cf, byte[] key) {
        cf(cf).put(key.clone(), DELETED);
    }

    /** True when nothing was written. */
    public boolean isEmpty() {
        return writes.values().stream().allMatch(NavigableMap::isEmpty);
    }

    /** Number of buffered puts and deletes. */
    public int size() {
        return writes.values().stream().mapToInt(Map::size).sum();
    }

    /** Copies every buffered write into {@code target} (column families and keys in byte order). */
    public void flushTo(KvTxn target) {
        for (Map.Entry<String, TreeMap<byte[], byte[]>> cf : writes.entrySet()) {
            for (Map.Entry<byte[], byte[]> e : cf.getValue().entrySet()) {
                if (e.getValue() == DELETED) {
                    target.delete(cf.getKey(), e.getKey());
                } else {
                    target.put(cf.getKey(), e.getKey(), e.getValue());
                }
            }
        }
    }

    /** Merges the base iterator with the buffered entries; buffered entries shadow equal base keys. */
    private static final class Merged implements KvIterator {
        private final KvIterator base;
        private final List<Map.Entry<byte[], byte[]>> overlay;
        private int idx;
        private byte[] key;
        private byte[] value;

        Merged(KvIterator base, List<Map.Entry<byte[], byte[]>> overlay) {
            this.base = base;
            this.overlay = overlay;
            advance();
        }

        private void advance() {
            while (true) {
                byte[] bk = base.valid() ? base.key() : null;
                Map.Entry<byte[], byte[]> oe = idx < overlay.size() ? overlay.get(idx) : null;
                if (bk == null && oe == null) {
                    key = null;
                    value = null;
                    return;
                }
                int cmp = bk == null ? -1 : oe == null ? 1 : Arrays.compareUnsigned(oe.getKey(), bk);
                if (cmp <= 0) {
                    if (cmp == 0) {
                        base.next();
                    }
                    idx++;
                    if (oe.getValue() == DELETED) {
                        continue;
                    }
                    key = oe.getKey();
                    value = oe.getValue();
                    return;
                }
                key = bk;
                value = base.value();
                base.next();
                return;
            }
        }

        @Override
        public boolean valid() {
            return key != null;
        }

        @Override
        public byte[] key() {
            if (key == null) {
                throw new IllegalStateException("iterator is not positioned on an entry");
            }
            return key.clone();
        }

        @Override
        public byte[] value() {
            if (key == null) {
                throw new IllegalStateException("iterator is not positioned on an entry");
            }
            return value.clone();
        }

        @Override
        public void next() {
            if (key == null) {
                throw new IllegalStateException("iterator is not positioned on an entry");
            }
            advance();
        }

        @Override
        public void close() {
            base.close();
        }
    }
}
