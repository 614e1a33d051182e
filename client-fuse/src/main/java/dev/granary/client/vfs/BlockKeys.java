package dev.granary.client.vfs;

import java.security.SecureRandom;
import java.util.HexFormat;

/**
 * Names of data blocks inside an OST. Format:
 * {@code <inode as 16 lower-case hex digits>/<stripe index in decimal>-<128-bit random as 32 hex digits>},
 * e.g. {@code 00000000000000a3/7-5f0c...e1}. Every flush of a stripe writes a new block under a
 * fresh key (blocks are immutable, DESIGN.md); the inode prefix groups a file's blocks for
 * {@code fsck}/GC listings; 128 random bits make a collision between clients negligible without
 * asking the MDS for ids.
 */
public final class BlockKeys {
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final HexFormat HEX = HexFormat.of();

    private BlockKeys() {}

    /** A fresh, unique block key for stripe {@code stripeIndex} of inode {@code ino}. */
    public static String newKey(long ino, long stripeIndex) {
        byte[] r = new byte[16];
        RANDOM.nextBytes(r);
        return String.format("%016x/%d-%s", ino, stripeIndex, HEX.formatHex(r));
    }

    /**
     * A fresh, unique key for a pack (a block of several small files, {@link PackWriter}):
     * {@code pack/<first file's inode as 16 hex digits>-<128-bit random as 32 hex digits>}.
     */
    public static String newPackKey(long firstIno) {
        byte[] r = new byte[16];
        RANDOM.nextBytes(r);
        return String.format("%s%016x-%s", dev.granary.oss.BlockIo.PACK_KEY_PREFIX, firstIno, HEX.formatHex(r));
    }

    /** The inode encoded in {@code key}, or -1 when the key does not follow the format. */
    public static long inodeOf(String key) {
        int slash = key.indexOf('/');
        if (slash != 16) {
            return -1;
        }
        try {
            return Long.parseUnsignedLong(key.substring(0, 16), 16);
        } catch (NumberFormatException e) {
            return -1;
        }
    }
}
