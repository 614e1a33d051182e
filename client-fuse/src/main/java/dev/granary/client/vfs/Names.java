package dev.granary.client.vfs;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CoderResult;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * Lossless conversion between file names as bytes (what POSIX, the kernel and the MDS store:
 * any byte but '/' and NUL) and the Java strings the client works with.
 *
 * <p>Bytes that are valid UTF-8 decode as UTF-8, so every UTF-8 name is the string it looks like.
 * Each byte that is not part of a valid UTF-8 sequence becomes the lone surrogate
 * {@code U+DC00 + byte} (0x80..0xFF → U+DC80..U+DCFF), and {@link #encode} turns those back into
 * the same bytes. This is Python's {@code surrogateescape} error handler (PEP 383), which
 * {@code os.listdir} uses for the same purpose.
 */
public final class Names {
    private static final char ESCAPE_BASE = 0xDC00;

    private Names() {
    }

    /** The string of a name's bytes; never fails (undecodable bytes are escaped). */
    public static String decode(byte[] bytes) {
        boolean ascii = true;
        for (byte b : bytes) {
            if (b < 0) {
                ascii = false;
                break;
            }
        }
        if (ascii) {
            return new String(bytes, StandardCharsets.ISO_8859_1);
        }
        CharsetDecoder dec = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT);
        ByteBuffer in = ByteBuffer.wrap(bytes);
        CharBuffer out = CharBuffer.allocate(bytes.length);
        while (true) {
            CoderResult r = dec.decode(in, out, true);
            if (r.isUnderflow()) {
                break;
            }
            if (r.isError()) {
                // escape one byte and go on at the next: the rest may be valid UTF-8 again
                out.put((char) (ESCAPE_BASE + (in.get() & 0xFF)));
                dec.reset();
            } else {
                throw new IllegalStateException("UTF-8 decode overflow"); // cannot happen: chars <= bytes
            }
        }
        dec.flush(out);
        return out.flip().toString();
    }

    /** The bytes of a name string: UTF-8, with escaped bytes (U+DC80..U+DCFF) restored as they were. */
    public static byte[] encode(String name) {
        boolean plain = true;
        for (int i = 0; i < name.length(); i++) {
            char ch = name.charAt(i);
            if (Character.isSurrogate(ch)) {
                plain = false;
                break;
            }
        }
        if (plain) {
            return name.getBytes(StandardCharsets.UTF_8);
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream(name.length() * 3);
        int i = 0;
        while (i < name.length()) {
            char ch = name.charAt(i);
            if (ch >= ESCAPE_BASE + 0x80 && ch <= ESCAPE_BASE + 0xFF) {
                out.write(ch - ESCAPE_BASE);
                i++;
            } else if (Character.isHighSurrogate(ch) && i + 1 < name.length() && Character.isLowSurrogate(name.charAt(i + 1))) {
                out.writeBytes(name.substring(i, i + 2).getBytes(StandardCharsets.UTF_8));
                i += 2;
            } else if (Character.isSurrogate(ch)) {
                out.write('?'); // a lone surrogate that no decode produced: no bytes stand for it
                i++;
            } else {
                out.writeBytes(String.valueOf(ch).getBytes(StandardCharsets.UTF_8));
                i++;
            }
        }
        return out.toByteArray();
    }

    /**
     * The bytes of a string that a native binding decoded with ISO-8859-1 (one char per byte, so
     * nothing was lost), as a name string ({@link #decode}). A binding that decoded them as UTF-8
     * already replaced undecodable bytes: such strings are returned as they are.
     */
    public static String fromNative(String s, boolean latin1) {
        if (!latin1) {
            return s;
        }
        for (int i = 0; i < s.length(); i++) {
            if (s.charAt(i) >= 0x80) {
                return decode(s.getBytes(StandardCharsets.ISO_8859_1));
            }
        }
        return s;
    }
}
