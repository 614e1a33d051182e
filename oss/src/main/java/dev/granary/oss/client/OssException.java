package dev.granary.oss.client;

import java.io.IOException;

/**
 * A failed OSS call (other than a missing block, which is {@link java.io.FileNotFoundException}),
 * with the gRPC status code name the OSS answered (e.g. {@code UNAVAILABLE},
 * {@code INVALID_ARGUMENT}, {@code PERMISSION_DENIED}) for callers mapping it to an errno.
 */
public final class OssException extends IOException {
    private final String code;

    /** @param code gRPC status code name; {@code message} is one line naming the OST and block */
    public OssException(String code, String message, Throwable cause) {
        super(message, cause);
        this.code = code;
    }

    /** The gRPC status code name, e.g. {@code UNAVAILABLE}. */
    public String code() {
        return code;
    }
}
