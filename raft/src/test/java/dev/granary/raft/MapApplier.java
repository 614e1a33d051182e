package dev.granary.raft;

import static java.nio.charset.StandardCharsets.UTF_8;

import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Test applier: a string map in column family "kv" plus the leader's prepare timestamp of each key
 * in "stamp". Requests are text: {@code put K V}, {@code get K}, {@code stamp K}, {@code count}.
 * With {@code failOnBoom}, applying {@code put boom ...} throws (to stop this peer). Applying a
 * key that starts with {@code slow} sleeps {@link #slowApplyMs} first (a leader that answers late).
 */
final class MapApplier implements KvApplier {
    private final boolean failOnBoom;
    /** How long applying a {@code slow*} key sleeps on this peer, ms (0: not at all). */
    volatile long slowApplyMs;
    /** Calls of {@link #prepare} on this peer: one per request the leader appends, none for a retry answered from the retry cache. */
    final AtomicInteger prepares = new AtomicInteger();

    MapApplier(boolean failOnBoom) {
        this.failOnBoom = failOnBoom;
    }

    @Override
    public List<String> columnFamilies() {
        return List.of("kv", "stamp");
    }

    @Override
    public byte[] prepare(byte[] request, long nowNanos) {
        prepares.incrementAndGet();
        String r = new String(request, UTF_8);
        if (r.startsWith("reject")) {
            throw new IllegalArgumentException("rejected by prepare: " + r);
        }
        return (r + "\n" + nowNanos).getBytes(UTF_8);
    }

    @Override
    public byte[] apply(long logIndex, byte[] request, KvTxn txn) {
        String[] lines = new String(request, UTF_8).split("\n");
        String[] p = lines[0].split(" ", 3);
        if (!p[0].equals("put") || p.length != 3) {
            return ("error: bad request " + lines[0]).getBytes(UTF_8);
        }
        if (failOnBoom && p[1].equals("boom")) {
            throw new IllegalStateException("injected apply failure at index " + logIndex);
        }
        if (p[1].startsWith("slow") && slowApplyMs > 0) {
            try {
                Thread.sleep(slowApplyMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        byte[] old = txn.get("kv", p[1].getBytes(UTF_8));
        txn.put("kv", p[1].getBytes(UTF_8), p[2].getBytes(UTF_8));
        txn.put("stamp", p[1].getBytes(UTF_8), lines[1].getBytes(UTF_8));
        return ("ok " + logIndex + (old == null ? " new" : " old")).getBytes(UTF_8);
    }

    @Override
    public byte[] query(byte[] request, KvReader reader) {
        String[] p = new String(request, UTF_8).split(" ", 2);
        switch (p[0]) {
            case "get", "stamp" -> {
                byte[] v = reader.get(p[0].equals("get") ? "kv" : "stamp", p[1].getBytes(UTF_8));
                return v == null ? new byte[0] : v;
            }
            case "count" -> {
                int n = 0;
                try (KvIterator it = reader.seek("kv", new byte[0])) {
                    for (; it.valid(); it.next()) {
                        n++;
                    }
                }
                return Integer.toString(n).getBytes(UTF_8);
            }
            default -> throw new IllegalArgumentException("unknown query " + p[0]);
        }
    }
}
