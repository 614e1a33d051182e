package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.joran.JoranConfigurator;
import ch.qos.logback.classic.spi.LoggingEvent;
import dev.granary.tools.log.RootCauseConverter;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The CLI's console log (tools' logback.xml): one line per event, with the root cause of an error. */
class ConsoleLogTest {

    @Test
    void theCauseIsTheInnermostExceptionOnTheSameLine() {
        RootCauseConverter c = new RootCauseConverter();
        Logger logger = new LoggerContext().getLogger("x");
        LoggingEvent plain = new LoggingEvent("x", logger, Level.WARN, "plain", null, null);
        assertEquals("", c.convert(plain));
        Exception chain = new IllegalStateException("apply of log entry (2, 7364) failed",
                new RuntimeException("wrapper", new IOException("No space left on device\non /data")));
        LoggingEvent failed = new LoggingEvent("x", logger, Level.ERROR, "stopping", chain, null);
        assertEquals(" (cause: IOException: No space left on device on /data)", c.convert(failed));
        LoggingEvent noMessage = new LoggingEvent("x", logger, Level.ERROR, "oom", new OutOfMemoryError(), null);
        assertEquals(" (cause: OutOfMemoryError)", c.convert(noMessage));
    }

    /** The shipped configuration: an ERROR with an exception is one console line ending with its cause, no stack. */
    @TempDir
    Path logDir;

    @Test
    void theShippedConsolePatternShowsTheCauseWithoutAStack() throws Exception {
        LoggerContext ctx = new LoggerContext();
        ctx.setMDCAdapter(new ch.qos.logback.classic.util.LogbackMDCAdapter());
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream saved = System.err;
        String savedDir = System.setProperty("granary.log.dir", logDir.toString()); // its FILE appender writes there
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        try (InputStream xml = RootCauseConverter.class.getResourceAsStream("/logback.xml")) {
            JoranConfigurator j = new JoranConfigurator();
            j.setContext(ctx);
            j.doConfigure(xml);
            ctx.getLogger("dev.granary.raft.KvStateMachine").error("mds2: applying log entry (2, 7364) failed; stopping this peer",
                    new IllegalStateException("apply failed", new IOException("disk full")));
        } finally {
            System.setErr(saved);
            ctx.stop();
            if (savedDir == null) {
                System.clearProperty("granary.log.dir");
            } else {
                System.setProperty("granary.log.dir", savedDir);
            }
        }
        String out = err.toString(StandardCharsets.UTF_8);
        assertTrue(out.endsWith("ERROR d.g.r.KvStateMachine - mds2: applying log entry (2, 7364) failed; stopping this peer"
                + " (cause: IOException: disk full)\n"), out);
        assertEquals(1, out.lines().count(), out);
    }
}
