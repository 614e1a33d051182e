package dev.granary.oss;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.oss.cache.BlockCache;
import dev.granary.oss.client.OssClient;
import java.util.List;
import org.junit.jupiter.api.Test;

class OssConfigTest {
    @Test
    void defaultsAndValidation() {
        OssConfig c = OssConfig.defaults("127.0.0.1", 0);
        assertEquals(512L * 1024 * 1024, c.cacheMaxBytes());
        assertEquals(16 * 1024 * 1024, c.maxCachedBlockBytes());
        assertEquals(128 * 1024 * 1024, c.maxMessageBytes());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> OssConfig.defaults("h", 70000));
        assertTrue(e.getMessage().contains("70000"));
        assertThrows(IllegalArgumentException.class, () -> OssConfig.defaults(" ", 1));
        assertThrows(IllegalArgumentException.class, () -> c.withCache(-1, 0));
        assertThrows(IllegalArgumentException.class, () -> new OssConfig("h", 0, 1, 1, 0, 1 << 27, null, 0));
        assertThrows(IllegalArgumentException.class, () -> new BlockCache(-1, 1));
        assertThrows(IllegalArgumentException.class, () -> new OssClient(List.of("host:0")));
    }
}
