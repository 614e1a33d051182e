package dev.granary.oss.cache;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import dev.granary.objbacker.ObjectStore;
import dev.granary.objbacker.RequestCounters;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** BlockCache over an in-memory store: copies vs shared arrays, and the non-blocking hit path. */
class BlockCacheTest {
    /** Minimal in-memory store counting GETs. */
    private static final class MemStore implements ObjectStore {
        final Map<String, byte[]> objects = new HashMap<>();
        final RequestCounters counters = new RequestCounters();

        @Override
        public void put(String key, byte[] data) {
            objects.put(key, data.clone());
        }

        @Override
        public byte[] get(String key, long offset, int length) {
            counters.gets.incrementAndGet();
            byte[] d = objects.get(key);
            if (d == null) {
                throw new IllegalStateException("no such key " + key);
            }
            if (offset >= d.length) {
                return new byte[0];
            }
            return Arrays.copyOfRange(d, (int) offset, (int) Math.min(d.length, offset + length));
        }

        @Override
        public void delete(String key) {
            objects.remove(key);
        }

        @Override
        public ObjectInfo head(String key) {
            byte[] d = objects.get(key);
            return d == null ? null : new ObjectInfo(key, d.length);
        }

        @Override
        public List<ObjectInfo> list(String prefix) {
            return List.of();
        }

        @Override
        public RequestCounters counters() {
            return counters;
        }

        @Override
        public void close() {
        }
    }

    @Test
    void readIfCachedServesOnlyWholeCachedBlocksWithoutCallingTheStore() {
        MemStore store = new MemStore();
        byte[] block = {1, 2, 3, 4, 5};
        store.put("b", block);
        BlockCache cache = new BlockCache(1 << 20, 1024);

        assertNull(cache.readIfCached(0, "b", 0, 5, true), "not cached yet");
        assertEquals(0, store.counters.gets.get());

        assertArrayEquals(block, cache.read(0, store, "b", 0, 5)); // miss: one GET
        assertEquals(1, store.counters.gets.get());
        assertEquals(1, cache.misses());

        assertArrayEquals(new byte[] {2, 3}, cache.readIfCached(0, "b", 1, 2, true));
        assertArrayEquals(new byte[] {4, 5}, cache.readIfCached(0, "b", 3, 10, true)); // short at the end
        assertArrayEquals(new byte[0], cache.readIfCached(0, "b", 7, 2, true)); // past the end
        assertEquals(1, store.counters.gets.get(), "hits never call the store");
        assertEquals(3, cache.hits());

        assertNull(cache.readIfCached(1, "b", 0, 5, true), "other OST");
        assertNull(cache.readIfCached(0, "b", 1020, 10, true), "range past the largest cached block");
        cache.invalidate(0, "b");
        assertNull(cache.readIfCached(0, "b", 0, 5, true), "invalidated");
    }

    @Test
    void sharedReadsReturnTheCachedArrayPlainReadsACopy() {
        MemStore store = new MemStore();
        BlockCache cache = new BlockCache(1 << 20, 1024);
        byte[] block = {9, 8, 7};
        cache.put(0, "w", block); // write-through

        assertSame(block, cache.readShared(0, store, "w", 0, 3));
        assertSame(block, cache.readShared(0, store, "w", 0, 100));
        assertSame(block, cache.readIfCached(0, "w", 0, 3, false));
        assertNotSame(block, cache.readIfCached(0, "w", 0, 3, true));
        byte[] copy = cache.read(0, store, "w", 0, 3);
        assertNotSame(block, copy);
        copy[0] = 0; // a caller modifying its copy does not change the cache
        assertArrayEquals(new byte[] {9, 8, 7}, cache.read(0, store, "w", 0, 3));
        assertArrayEquals(new byte[] {8}, cache.readShared(0, store, "w", 1, 1));
        assertEquals(0, store.counters.gets.get());
    }

    @Test
    void disabledCacheNeverAnswersFromMemory() {
        MemStore store = new MemStore();
        store.put("b", new byte[] {1});
        BlockCache off = new BlockCache(0, 1024);
        off.put(0, "b", new byte[] {1});
        assertNull(off.readIfCached(0, "b", 0, 1, true));
        assertArrayEquals(new byte[] {1}, off.read(0, store, "b", 0, 1));
        assertEquals(1, store.counters.gets.get());
    }
}
