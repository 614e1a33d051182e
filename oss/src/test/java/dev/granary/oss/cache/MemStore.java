package dev.granary.oss.cache;

import dev.granary.objbacker.ObjectStore;
import dev.granary.objbacker.RequestCounters;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** Minimal in-memory object store counting GETs, for the cache tests (the logic above S3). */
final class MemStore implements ObjectStore {
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
