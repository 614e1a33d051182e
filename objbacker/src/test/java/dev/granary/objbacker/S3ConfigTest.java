package dev.granary.objbacker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import org.junit.jupiter.api.Test;

class S3ConfigTest {
    private static final URI EP = URI.create("http://127.0.0.1:9000");

    @Test
    void defaultsAndPrefixNormalisation() {
        S3Config c = S3Config.of(EP, "bucket", "ost0", "a", "s");
        assertEquals("ost0/", c.prefix());
        assertEquals("us-east-1", c.region());
        assertEquals(64 * S3Config.MIB, c.multipartThreshold());
        assertEquals(32 * S3Config.MIB, c.partSize());
        assertEquals(6, c.maxAttempts());
        assertTrue(c.pathStyle());
        assertEquals("", S3Config.of(EP, "bucket", "", "a", "s").prefix());
        assertEquals("x/y/", S3Config.of(EP, "bucket", "/x/y/", "a", "s").prefix());
        assertFalse(c.toString().contains("=s,"), c.toString());
    }

    @Test
    void validation() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> S3Config.of(EP, "Bad_Bucket", "", "a", "s"));
        assertTrue(e.getMessage().contains("Bad_Bucket"));
        assertThrows(IllegalArgumentException.class, () -> S3Config.of(URI.create("ftp://x"), "bucket", "", "a", "s"));
        assertThrows(IllegalArgumentException.class, () -> S3Config.of(EP, "bucket", "", "", "s"));
        S3Config ok = S3Config.of(EP, "bucket", "", "a", "s");
        e = assertThrows(IllegalArgumentException.class, () -> ok.withMultipart(64 * S3Config.MIB, 129 * S3Config.MIB));
        assertTrue(e.getMessage().contains("part size"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> ok.withMultipart(64 * S3Config.MIB, 1024));
        assertThrows(IllegalArgumentException.class, () -> ok.withMaxAttempts(0));
        assertThrows(IllegalArgumentException.class, () -> ok.withListPageSize(1001));
    }
}
