package dev.granary.mds.schema;

import static org.junit.jupiter.api.Assertions.*;

import dev.granary.raft.KvIterator;
import dev.granary.raft.KvTxn;
import dev.granary.raft.RocksKv;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The write buffer: reads see base + buffer, scans merge, nothing reaches the db before flush. */
class BufferedTxnTest {
    @TempDir
    Path tmp;

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static List<String> scan(dev.granary.raft.KvReader r, String from) {
        List<String> out = new ArrayList<>();
        try (KvIterator it = r.seek("meta", b(from))) {
            for (; it.valid(); it.next()) {
                out.add(new String(it.key(), StandardCharsets.UTF_8) + "=" + new String(it.value(), StandardCharsets.UTF_8));
            }
        }
        return out;
    }

    @Test
    void mergesAndFlushes() {
        try (RocksKv kv = RocksKv.open(tmp, MdsSchema.COLUMN_FAMILIES)) {
            KvTxn t = kv.newTxn();
            for (String k : List.of("a", "c", "e", "g")) {
                t.put("meta", b(k), b(k.toUpperCase()));
            }
            kv.commit(t, 1, 1);

            BufferedTxn buf = new BufferedTxn(kv);
            buf.put("meta", b("b"), b("new"));
            buf.put("meta", b("c"), b("changed"));
            buf.delete("meta", b("e"));
            buf.put("meta", b("h"), b("H"));
            buf.delete("meta", b("zz"));
            assertEquals(List.of("a=A", "b=new", "c=changed", "g=G", "h=H"), scan(buf, ""));
            assertEquals(List.of("c=changed", "g=G", "h=H"), scan(buf, "bb"));
            assertNull(buf.get("meta", b("e")));
            assertEquals("changed", new String(buf.get("meta", b("c")), StandardCharsets.UTF_8));
            assertEquals("A", new String(buf.get("meta", b("a")), StandardCharsets.UTF_8));
            assertEquals(List.of("a=A", "c=C", "e=E", "g=G"), scan(kv, ""), "nothing written before flush");
            assertEquals(5, buf.size());

            KvTxn t2 = kv.newTxn();
            buf.flushTo(t2);
            kv.commit(t2, 1, 2);
            assertEquals(List.of("a=A", "b=new", "c=changed", "g=G", "h=H"), scan(kv, ""));
        }
    }
}
