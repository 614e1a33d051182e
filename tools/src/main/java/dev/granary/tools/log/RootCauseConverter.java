package dev.granary.tools.log;

import ch.qos.logback.classic.pattern.ClassicConverter;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.classic.spi.IThrowableProxy;

/**
 * Logback conversion word {@code %cause}: for an event that carries an exception, {@code " (cause:
 * CLASS: MESSAGE)"} of its root cause (the innermost one, the error itself rather than the
 * wrappers), on the same line; nothing otherwise. The console keeps one line per event without
 * stack traces, yet says why: "applying log entry (2, 7364) failed; stopping this peer" showed
 * no reason there, and the file that had the stack was gone. The stack stays in granary.log.
 */
public final class RootCauseConverter extends ClassicConverter {
    @Override
    public String convert(ILoggingEvent event) {
        IThrowableProxy t = event.getThrowableProxy();
        if (t == null) {
            return "";
        }
        for (int depth = 0; t.getCause() != null && depth < 64; depth++) {
            t = t.getCause();
        }
        String name = t.getClassName();
        String simple = name.substring(name.lastIndexOf('.') + 1);
        String message = t.getMessage() == null ? "" : ": " + t.getMessage().replace('\n', ' ');
        return " (cause: " + simple + message + ")";
    }
}
