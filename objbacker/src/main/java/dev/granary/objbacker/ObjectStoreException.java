package dev.granary.objbacker;

/** A failure of an object store request after retries; {@link #kind()} says which kind. */
public class ObjectStoreException extends RuntimeException {
    /** What went wrong, coarse enough for callers to map to an errno or a CLI message. */
    public enum Kind { NOT_FOUND, ACCESS_DENIED, NO_SUCH_BUCKET, UNREACHABLE, INVALID, OTHER }

    private final Kind kind;

    public ObjectStoreException(Kind kind, String message, Throwable cause) {
        super(message, cause);
        this.kind = kind;
    }

    public Kind kind() {
        return kind;
    }
}
