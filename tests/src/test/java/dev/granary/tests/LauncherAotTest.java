package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The launcher's use of JDK 25's AOT cache (scripts/aot-cache.sh makes it from a training run; JEP
 * 483, 514, 515): a training run (GRANARY_AOT_OUTPUT) writes a cache, a cache newer than the build
 * is used, one older than the build or turned off (GRANARY_AOT=off) is not, and a damaged one costs
 * a warning on stderr and nothing else: the command's output and exit status stay the same.
 */
class LauncherAotTest {
    private static final Path LAUNCHER = Path.of("..").toAbsolutePath().normalize().resolve("granary");
    private static final Path JAR = LAUNCHER.getParent().resolve("tools/target/granary-tools-0.1.0-SNAPSHOT.jar");
    /** What the JVM logs (with -Xlog:aot=info) when it maps a cache. */
    private static final String OPENED = "Opened AOT cache";

    private record Run(int status, String stdout, String stderr) {}

    /** `granary --version` through the launcher with {@code env} added and the JVM's AOT log on stderr. */
    private static Run version(Map<String, String> env) throws Exception {
        ProcessBuilder pb = new ProcessBuilder("bash", LAUNCHER.toString(), "--version");
        pb.environment().remove("GRANARY_AOT");
        pb.environment().remove("GRANARY_AOT_CACHE");
        pb.environment().remove("GRANARY_AOT_OUTPUT");
        pb.environment().put("GRANARY_JAVA_OPTS", "-Xlog:aot=info:stderr");
        pb.environment().putAll(env);
        Path err = Files.createTempFile("launcher-aot", ".err");
        try {
            Process p = pb.redirectError(err.toFile()).start();
            String out = new String(p.getInputStream().readAllBytes());
            assertTrue(p.waitFor(300, TimeUnit.SECONDS), "the launcher ended");
            return new Run(p.exitValue(), out, Files.readString(err));
        } finally {
            Files.deleteIfExists(err);
        }
    }

    private static String versionLine() throws Exception {
        Run plain = version(Map.of("GRANARY_AOT", "off"));
        assertEquals(0, plain.status(), plain.stderr());
        assertTrue(plain.stdout().startsWith("granary "), plain.stdout());
        assertFalse(plain.stderr().contains(OPENED), "GRANARY_AOT=off: no cache\n" + plain.stderr());
        return plain.stdout();
    }

    @Test
    void aTrainedCacheIsUsedUntilTheNextBuildAndADamagedOneChangesNothing(@TempDir Path tmp) throws Exception {
        boolean jdk25 = launcherJdkAtLeast25();
        if (!jdk25) {
            System.out.println("SKIPPED: the launcher's JDK (scripts/java-home.sh) is older than 25: no AOT cache");
        }
        Assumptions.assumeTrue(jdk25, "SKIPPED: the launcher's JDK (scripts/java-home.sh) is older than 25: no AOT cache");
        String expected = versionLine();

        Path cache = tmp.resolve("granary.aot");
        Run training = version(Map.of("GRANARY_AOT_OUTPUT", cache.toString()));
        assertEquals(0, training.status(), training.stderr());
        assertEquals(expected, training.stdout().lines().filter(l -> l.startsWith("granary ")).findFirst().orElse("") + "\n",
                "the training run still runs the command");
        assertTrue(Files.size(cache) > 1 << 20, "the training run wrote a cache of " + Files.size(cache) + " bytes");

        Map<String, String> withCache = new HashMap<>(Map.of("GRANARY_AOT_CACHE", cache.toString()));
        Run used = version(withCache);
        assertEquals(0, used.status(), used.stderr());
        assertEquals(expected, used.stdout());
        assertTrue(used.stderr().contains(OPENED), "a cache newer than the build is used\n" + used.stderr());

        withCache.put("GRANARY_AOT", "off");
        Run off = version(withCache);
        assertEquals(expected, off.stdout());
        assertFalse(off.stderr().contains(OPENED), "GRANARY_AOT=off\n" + off.stderr());

        Files.setLastModifiedTime(cache, FileTime.fromMillis(Files.getLastModifiedTime(JAR).toMillis() - 60_000));
        Run stale = version(Map.of("GRANARY_AOT_CACHE", cache.toString()));
        assertEquals(expected, stale.stdout());
        assertFalse(stale.stderr().contains(OPENED), "a cache older than the build is not used\n" + stale.stderr());

        Path damaged = tmp.resolve("damaged.aot");
        byte[] bytes = Files.readAllBytes(cache);
        for (int i = 0; i < bytes.length; i += 4096) {
            bytes[i] ^= 0x5a;
        }
        Files.write(damaged, bytes);
        Run bad = version(Map.of("GRANARY_AOT_CACHE", damaged.toString()));
        assertEquals(0, bad.status(), bad.stderr());
        assertEquals(expected, bad.stdout(), "a damaged cache leaves the output alone; the JVM said on stderr:\n" + bad.stderr());
    }

    /** Whether the JDK the launcher picks (scripts/java-home.sh) is 25 or newer. */
    private static boolean launcherJdkAtLeast25() throws Exception {
        Path javaHome = LAUNCHER.getParent().resolve("scripts/java-home.sh");
        Process p = new ProcessBuilder("bash", "-c", "source '" + javaHome + "' && jdk_release_major \"$JAVA_HOME\"")
                .redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes()).trim();
        p.waitFor(60, TimeUnit.SECONDS);
        return out.matches("\\d+") && Integer.parseInt(out) >= 25;
    }
}
