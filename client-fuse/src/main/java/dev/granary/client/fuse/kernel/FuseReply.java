package dev.granary.client.fuse.kernel;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import jnr.ffi.Pointer;

/**
 * The reply a session thread builds for its request: {@code struct fuse_out_header}, the payload
 * written into this reply's own buffer, then any number of parts that stay in native memory of
 * their own ({@link #appendNative}, sent by the same {@code writev(2)} without a copy). Reused by
 * its thread: do not keep it.
 */
public final class FuseReply {
    /** Parts of a reply at most (iovecs of one writev; Linux allows 1,024). */
    private static final int MAX_PARTS = 64;

    final ByteBuffer out;
    private final ByteBuffer iov;
    final Pointer iovPointer;
    private final long outAddress;
    private int parts;
    private long nativeBytes;

    FuseReply(int capacity) {
        out = ByteBuffer.allocateDirect(capacity).order(ByteOrder.LITTLE_ENDIAN);
        iov = ByteBuffer.allocateDirect(16 * (MAX_PARTS + 2)).order(ByteOrder.LITTLE_ENDIAN);
        iovPointer = FuseDevice.pointer(iov);
        outAddress = FuseDevice.pointer(out).address();
    }

    /** Starts an empty reply. */
    void reset() {
        out.clear().position(FuseKernel.OUT_HEADER_BYTES);
        parts = 0;
        nativeBytes = 0;
    }

    /** The payload so far, bytes (after the header; native parts included). */
    public long length() {
        return out.position() - FuseKernel.OUT_HEADER_BYTES + nativeBytes;
    }

    /** Room left in this reply's own buffer, bytes. */
    public int room() {
        return out.remaining();
    }

    /** Appends a 32-bit value to the payload. */
    public FuseReply putInt(int v) {
        out.putInt(v);
        return this;
    }

    /** Appends a 64-bit value to the payload. */
    public FuseReply putLong(long v) {
        out.putLong(v);
        return this;
    }

    /** Appends {@code len} bytes of {@code a} from {@code off} to the payload (copied). */
    public FuseReply put(byte[] a, int off, int len) {
        out.put(a, off, len);
        return this;
    }

    /**
     * Appends {@code len} bytes at native {@code address} as a part of their own, sent without a
     * copy; they must stay valid until the reply is sent (the op returned). After the payload
     * written into the reply's buffer, whatever the order of the calls.
     *
     * @throws IllegalStateException past {@value #MAX_PARTS} parts
     */
    public FuseReply appendNative(long address, long len) {
        if (parts == MAX_PARTS) {
            throw new IllegalStateException("more than " + MAX_PARTS + " native parts in one reply");
        }
        int at = 16 * (2 + parts);
        iov.putLong(at, address).putLong(at + 8, len);
        parts++;
        nativeBytes += len;
        return this;
    }

    /**
     * Appends {@code struct fuse_attr} (88 bytes). Times are ns since the epoch; {@code blocks}
     * are 512-byte units; {@code blksize} is the preferred I/O size in bytes.
     */
    public FuseReply attr(long ino, long size, long blocks, long atimeNs, long mtimeNs, long ctimeNs,
                          int mode, int nlink, int uid, int gid, int rdev, int blksize) {
        out.putLong(ino).putLong(size).putLong(blocks)
                .putLong(Math.floorDiv(atimeNs, 1_000_000_000L)).putLong(Math.floorDiv(mtimeNs, 1_000_000_000L))
                .putLong(Math.floorDiv(ctimeNs, 1_000_000_000L))
                .putInt((int) Math.floorMod(atimeNs, 1_000_000_000L)).putInt((int) Math.floorMod(mtimeNs, 1_000_000_000L))
                .putInt((int) Math.floorMod(ctimeNs, 1_000_000_000L))
                .putInt(mode).putInt(nlink).putInt(uid).putInt(gid).putInt(rdev).putInt(blksize).putInt(0);
        return this;
    }

    /**
     * Appends the head of {@code struct fuse_entry_out} (a LOOKUP, MKNOD, MKDIR, SYMLINK, LINK or
     * CREATE reply); the caller appends the node's {@link #attr} next.
     *
     * @param entryValidNs how long the kernel may keep the name's entry, ns
     * @param attrValidNs  how long it may keep the attributes, ns
     */
    public FuseReply entry(long nodeid, long generation, long entryValidNs, long attrValidNs) {
        out.putLong(nodeid).putLong(generation)
                .putLong(entryValidNs / 1_000_000_000L).putLong(attrValidNs / 1_000_000_000L)
                .putInt((int) (entryValidNs % 1_000_000_000L)).putInt((int) (attrValidNs % 1_000_000_000L));
        return this;
    }

    /** Appends the head of {@code struct fuse_attr_out} (a GETATTR or SETATTR reply); the {@link #attr} next. */
    public FuseReply attrOut(long attrValidNs) {
        out.putLong(attrValidNs / 1_000_000_000L).putInt((int) (attrValidNs % 1_000_000_000L)).putInt(0);
        return this;
    }

    /** Appends {@code struct fuse_open_out} (OPEN, OPENDIR): the handle and FOPEN_* flags. */
    public FuseReply open(long fh, int openFlags) {
        out.putLong(fh).putInt(openFlags).putInt(0);
        return this;
    }

    /**
     * Appends one {@code struct fuse_dirent} (READDIR) if it fits within {@code limit} bytes of
     * payload (the request's size): its name's bytes (ISO-8859-1 chars), padded to 8 bytes.
     *
     * @param nextOffset the offset the kernel passes back to continue after this entry
     * @return false (nothing appended) when it does not fit
     */
    public boolean dirent(long ino, long nextOffset, int type, String name, int limit) {
        int n = name.length();
        int size = (FuseKernel.DIRENT_HEADER_BYTES + n + 7) & ~7;
        if (length() + size > limit || out.remaining() < size) {
            return false;
        }
        out.putLong(ino).putLong(nextOffset).putInt(n).putInt(type);
        for (int i = 0; i < n; i++) {
            out.put((byte) name.charAt(i));
        }
        for (int i = FuseKernel.DIRENT_HEADER_BYTES + n; i < size; i++) {
            out.put((byte) 0);
        }
        return true;
    }

    /**
     * Fills the header for {@code unique} with {@code error} (0, or a negative errno: then no
     * payload is sent) and the iovecs: the header, the reply's own payload (possibly empty), then
     * the native parts; returns how many iovecs to write.
     */
    int seal(long unique, int error) {
        int own = error != 0 ? 0 : out.position() - FuseKernel.OUT_HEADER_BYTES;
        long total = FuseKernel.OUT_HEADER_BYTES + own + (error != 0 ? 0 : nativeBytes);
        out.putInt(FuseKernel.OUT_LEN, (int) total).putInt(FuseKernel.OUT_ERROR, error).putLong(FuseKernel.OUT_UNIQUE, unique);
        // libfuse's shape: the header, then the argument (this reply's own payload), then more parts
        iov.putLong(0, outAddress).putLong(8, FuseKernel.OUT_HEADER_BYTES);
        iov.putLong(16, outAddress + FuseKernel.OUT_HEADER_BYTES).putLong(24, own);
        return error != 0 ? 1 : 2 + parts;
    }
}
