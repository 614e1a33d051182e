package dev.granary.tools;

/**
 * An error caused by the user's input or machine (bad flag, port in use, missing library,
 * unreachable endpoint). The CLI prints its one-line message and exits non-zero, without a stack trace.
 */
public class UserError extends RuntimeException {
    public UserError(String message) {
        super(message);
    }

    public UserError(String message, Throwable cause) {
        super(message, cause);
    }
}
