package dev.granary.client.fuse.kernel;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * The request a session thread is serving: a view of the bytes the kernel sent
 * ({@code struct fuse_in_header}, then the opcode's arguments). Reused by its thread for the next
 * request: do not keep it.
 */
public final class FuseRequest {
    final ByteBuffer in;

    FuseRequest(int capacity) {
        in = ByteBuffer.allocateDirect(capacity).order(ByteOrder.LITTLE_ENDIAN);
        pointer = FuseDevice.pointer(in);
    }

    /** The request's bytes as native memory (for code that reads the raw request). */
    public jnr.ffi.Pointer pointer() {
        return pointer;
    }

    final jnr.ffi.Pointer pointer;

    /** The request's length, bytes (header included). */
    public int length() {
        return in.getInt(FuseKernel.IN_LEN);
    }

    /**
     * The offset (after the in header) just past the NUL that ends the name starting at
     * {@code offset}: where a second name (SYMLINK's target, RENAME's new name) or the value
     * (SETXATTR) starts.
     */
    public int afterName(int offset) {
        int at = FuseKernel.IN_HEADER_BYTES + offset;
        int limit = length();
        while (at < limit && in.get(at) != 0) {
            at++;
        }
        return at + 1 - FuseKernel.IN_HEADER_BYTES;
    }

    /** The opcode ({@link FuseKernel#LOOKUP} ...). */
    public int opcode() {
        return in.getInt(FuseKernel.IN_OPCODE);
    }

    /** The kernel's id of this request. */
    public long unique() {
        return in.getLong(FuseKernel.IN_UNIQUE);
    }

    /** The node the request is about (the parent directory for LOOKUP, MKDIR, ...); 1 is the root. */
    public long nodeid() {
        return in.getLong(FuseKernel.IN_NODEID);
    }

    /** The calling process's fsuid. */
    public int uid() {
        return in.getInt(FuseKernel.IN_UID);
    }

    /** The calling process's fsgid. */
    public int gid() {
        return in.getInt(FuseKernel.IN_GID);
    }

    /** The calling process's thread group id (0 for requests the kernel makes itself). */
    public int pid() {
        return in.getInt(FuseKernel.IN_PID);
    }

    /** The 32-bit argument at {@code offset} bytes after the in header. */
    public int argInt(int offset) {
        return in.getInt(FuseKernel.IN_HEADER_BYTES + offset);
    }

    /** The 64-bit argument at {@code offset} bytes after the in header. */
    public long argLong(int offset) {
        return in.getLong(FuseKernel.IN_HEADER_BYTES + offset);
    }

    /**
     * The NUL-terminated name at {@code offset} bytes after the in header, one char per byte
     * (ISO-8859-1, so that any byte string a name may be survives the round trip, as Granary's
     * {@code Names} treat native names).
     */
    public String name(int offset) {
        int start = FuseKernel.IN_HEADER_BYTES + offset;
        int end = start;
        int limit = in.getInt(FuseKernel.IN_LEN);
        while (end < limit && in.get(end) != 0) {
            end++;
        }
        byte[] b = new byte[end - start];
        in.get(start, b);
        return new String(b, StandardCharsets.ISO_8859_1);
    }
}
