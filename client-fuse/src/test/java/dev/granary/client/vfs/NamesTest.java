package dev.granary.client.vfs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.nio.charset.StandardCharsets;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Names: bytes to names and back without loss (PEP 383 surrogateescape). */
class NamesTest {
    @Test
    void everyByteStringRoundTrips() {
        Random rnd = new Random(42);
        for (int i = 0; i < 20_000; i++) {
            byte[] b = new byte[1 + rnd.nextInt(40)];
            rnd.nextBytes(b);
            for (int k = 0; k < b.length; k++) {
                if (b[k] == 0 || b[k] == '/') {
                    b[k] = (byte) 0xC3; // a UTF-8 lead byte: makes both valid and broken sequences likely
                }
            }
            assertArrayEquals(b, Names.encode(Names.decode(b)), () -> java.util.HexFormat.of().formatHex(b));
        }
    }

    @Test
    void utf8NamesAreTheStringsTheyLookLike() {
        for (String s : new String[] {"plain", "caf\u00e9", "\u65e5\u672c", "emoji-\uD83D\uDE00", "new\nline"}) {
            byte[] b = s.getBytes(StandardCharsets.UTF_8);
            assertEquals(s, Names.decode(b));
            assertArrayEquals(b, Names.encode(s));
        }
    }

    @Test
    void undecodableBytesBecomeEscapesAndStayDistinct() {
        assertEquals("caf\uDCE9", Names.decode(new byte[] {'c', 'a', 'f', (byte) 0xE9}));
        assertEquals("\uDCFF\uDCFEok", Names.decode(new byte[] {(byte) 0xFF, (byte) 0xFE, 'o', 'k'}));
        // a truncated sequence followed by a valid one: only the broken byte is escaped
        assertEquals("\uDCC3\u00e9", Names.decode(new byte[] {(byte) 0xC3, (byte) 0xC3, (byte) 0xA9}));
        assertNotEquals(Names.decode("caf\u00e9".getBytes(StandardCharsets.UTF_8)), Names.decode(new byte[] {'c', 'a', 'f', (byte) 0xE9}));
    }

    @Test
    void pathsFromALatin1BindingAreDecodedAndUtf8BindingsAreLeftAlone() {
        String nativeLatin1 = new String(new byte[] {'/', 'd', (byte) 0xC3, (byte) 0xA9, '/', (byte) 0xFF}, StandardCharsets.ISO_8859_1);
        assertEquals("/d\u00e9/\uDCFF", Names.fromNative(nativeLatin1, true));
        assertEquals("/plain", Names.fromNative("/plain", true));
        assertEquals("/d\u00e9", Names.fromNative("/d\u00e9", false));
    }
}
