package dev.granary.client.fuse.kernel;

import java.nio.ByteBuffer;
import ru.serce.jnrfuse.struct.FuseFileInfo;

/**
 * A path file system that writes a READ's bytes straight into the session thread's direct buffer,
 * which the reply then sends without a copy ({@link FuseReply#appendNative}). Through jnr-fuse's
 * {@code read(String, Pointer, ...)} a read-only source (inline bytes from the MDS) first had to
 * be copied into a Java array of its own: this way every source takes one copy.
 */
public interface ByteBufferReads {
    /**
     * FUSE READ: up to {@code size} bytes of the file at {@code offset} (bytes), written into
     * {@code dst} from index 0 (its position and limit are left as they are).
     *
     * @return bytes written (0 at or past the end of file), or a negative errno (as jnr-fuse's read)
     */
    int read(String path, ByteBuffer dst, int size, long offset, FuseFileInfo fi);
}
