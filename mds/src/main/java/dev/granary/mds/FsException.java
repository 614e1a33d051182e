package dev.granary.mds;

import dev.granary.mds.proto.Status;

/**
 * A filesystem error carrying a POSIX errno ({@link Status}); the one exception type the client
 * throws for every failed namespace or data operation. The FUSE adapter returns {@code -errno()}.
 */
public class FsException extends RuntimeException {
    private final Status status;

    public FsException(Status status, String message) {
        super(status.name() + (message == null || message.isEmpty() ? "" : ": " + message));
        this.status = status;
    }

    public FsException(Status status, String message, Throwable cause) {
        this(status, message);
        initCause(cause);
    }

    /** The errno name. */
    public Status status() {
        return status;
    }

    /** The positive Linux errno number (e.g. 2 for ENOENT). */
    public int errno() {
        return status.getNumber();
    }
}
