package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.client.fuse.FuseMount;
import dev.granary.objbacker.EmbeddedS3;
import dev.granary.tools.cluster.MountPoints;
import dev.granary.tools.config.GranaryConfig;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Bad input to {@code granary quickstart} gets exactly one clear error line and a non-zero exit,
 * with nothing left mounted.
 */
class CliBadInputTest {
    @TempDir
    Path tmp;

    private record Outcome(int rc, List<String> errors, String transcript) {}

    private Outcome quickstart(Map<String, String> env, Path mnt, String... extra) throws Exception {
        List<String> args = new java.util.ArrayList<>(List.of("quickstart", "--exit", "--dataset", "none",
                "--data", tmp.resolve("data").toString(), "--mount", mnt.toString()));
        args.addAll(List.of(extra));
        try (GranaryProcess g = GranaryProcess.start(tmp, env, args.toArray(String[]::new))) {
            int rc = g.waitFor(180);
            return new Outcome(rc, g.errorLines(), g.transcript());
        }
    }

    private void assertOneClearLine(Outcome o, String expected, Path mnt) {
        assertEquals(1, o.rc(), o.transcript());
        assertEquals(1, o.errors().size(), "exactly one error line\n" + o.transcript());
        assertTrue(o.errors().get(0).contains(expected), "'" + expected + "' in: " + o.errors().get(0));
        assertFalse(o.transcript().contains("\tat "), "no stack trace\n" + o.transcript());
        assertNull(FuseMount.mountedFsType(mnt), "nothing left mounted at " + mnt);
    }

    @Test
    void cacheWithoutSubcommandOrWithAMissingConfig() throws Exception {
        try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), "cache")) {
            assertEquals(2, g.waitFor(60), g.transcript());
            assertTrue(g.transcript().contains("missing subcommand (try: granary cache drop --help)"), g.transcript());
        }
        Path missing = tmp.resolve("nowhere/granary.yaml");
        try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), "cache", "drop", "-c", missing.toString())) {
            int rc = g.waitFor(60);
            assertTrue(rc != 0, g.transcript());
            assertEquals(1, g.errorLines().size(), g.transcript());
            assertTrue(g.errorLines().get(0).contains(missing.toString()), g.transcript());
            assertFalse(g.transcript().contains("\tat "), "no stack trace\n" + g.transcript());
        }
    }

    @Test
    void mountPointMissing() throws Exception {
        Path mnt = tmp.resolve("no/such/dir");
        assertOneClearLine(quickstart(Map.of(), mnt, "--base-port", Integer.toString(MiniCluster.freeBase())), "does not exist", mnt);
    }

    @Test
    void mountPointNotEmpty() throws Exception {
        Path mnt = Files.createDirectories(tmp.resolve("mnt"));
        Files.writeString(mnt.resolve("precious.txt"), "keep me");
        assertOneClearLine(quickstart(Map.of(), mnt, "--base-port", Integer.toString(MiniCluster.freeBase())), "is not empty", mnt);
        assertEquals("keep me", Files.readString(mnt.resolve("precious.txt")));
    }

    /**
     * A mount point where a live Granary is mounted: refused, and the live mount keeps working.
     * Regression: quickstart detached any Granary FUSE mount it found there (stale or not) before
     * checking its ports, so a second quickstart cut the first one's mount from under its users.
     */
    @Test
    void mountPointWithALiveGranaryMountIsLeftAlone() throws Exception {
        try (MiniCluster other = MiniCluster.start(tmp.resolve("other"))) {
            Path mnt = tmp.resolve("live");
            other.mount(mnt);
            Files.writeString(mnt.resolve("kept.txt"), "still here");
            Outcome o = quickstart(Map.of(), mnt, "--base-port", Integer.toString(MiniCluster.freeBase()));
            assertEquals(1, o.rc(), o.transcript());
            assertEquals(1, o.errors().size(), "exactly one error line\n" + o.transcript());
            assertTrue(o.errors().get(0).contains("is already a mount point"), o.errors().get(0));
            assertEquals("still here", Files.readString(mnt.resolve("kept.txt")), "the live mount still serves its files");
        }
    }

    /**
     * A config whose cluster name is not the running cluster's: status and mount say that the MDS
     * peers answer but serve no cluster of that name, exit 1. Regression: "no MDS peer is
     * reachable (is the cluster running?)" while it was.
     */
    @Test
    void aWrongClusterNameIsNamedAsSuch() throws Exception {
        try (MiniCluster running = MiniCluster.start(tmp.resolve("named"))) {
            GranaryConfig c = running.cluster().config();
            String name = c.cluster;
            c.cluster = "not-" + name;
            Path conf = tmp.resolve("wrong-name.yaml");
            c.save(conf);
            c.cluster = name;
            Path mnt = Files.createDirectories(tmp.resolve("mnt-wrong-name"));
            for (String[] args : new String[][] {{"status"}, {"mount", "--mount", mnt.toString()}}) {
                List<String> cmd = new java.util.ArrayList<>(List.of(args));
                cmd.addAll(List.of("-c", conf.toString()));
                try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), cmd.toArray(new String[0]))) {
                    assertEquals(1, g.waitFor(60), g.transcript());
                    assertEquals(1, g.errorLines().size(), g.transcript());
                    assertTrue(g.errorLines().get(0).contains("answer, but serve no cluster named 'not-" + name + "'"), g.transcript());
                }
            }
            assertNull(FuseMount.mountedFsType(mnt), "nothing mounted at " + mnt);
        }
    }

    /**
     * A mount whose server was SIGKILLed is stale and cleaned up at once, even while the kernel still
     * answers a stat of its root from the attributes it cached (attr_timeout): the stat-based check
     * took it for a live mount for up to 1 s, and a quickstart restarted right after a kill refused
     * the mount point (seen in DurabilityTest).
     */
    @Test
    void aMountLeftBySigkillIsStaleAtOnceThoughTheKernelCachedItsRoot() throws Exception {
        MiniCluster.assumeFuseDevice();
        Path mnt = Files.createDirectories(tmp.resolve("killed"));
        try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), "noopfs", mnt.toString(), "--size", "1m")) {
            assertTrue(g.awaitLine("noopfs mounted at", 60), g.transcript());
            Files.readAttributes(mnt, "basic:isDirectory"); // the kernel caches the root's attributes
            g.kill();
        }
        assertTrue(FuseMount.mountedFsType(mnt) != null, "the killed server left its mount behind");
        MountPoints.prepare(mnt, false); // within attr_timeout (1 s) of the stat above
        assertEquals(null, FuseMount.mountedFsType(mnt), "the stale mount was detached");
    }

    /**
     * {@code granary noopfs --binding}: an unknown binding (or {@code --small-size}) is one clear
     * line; the /dev/fuse binding serves its file of zeros, empty files in /names and files of
     * {@code --small-size} zeros in /small, and, on SIGTERM, unmounts; the path layer serves /small too.
     */
    @Test
    void noopfsBindings() throws Exception {
        MiniCluster.assumeFuseDevice();
        Path mnt = Files.createDirectories(tmp.resolve("noop"));
        try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), "noopfs", mnt.toString(), "--binding", "libfuse9")) {
            assertOneClearLine(new Outcome(g.waitFor(60), g.errorLines(), g.transcript()), "expected jnr, direct or direct-path, got 'libfuse9'", mnt);
        }
        try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), "noopfs", mnt.toString(), "--small-size", "lots")) {
            assertOneClearLine(new Outcome(g.waitFor(60), g.errorLines(), g.transcript()), "--small-size: not a size: 'lots'", mnt);
        }
        try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), "noopfs", mnt.toString(), "--size", "3m", "--binding", "direct",
                "--small-size", "100000")) {
            assertTrue(g.awaitLine("noopfs mounted at", 60), g.transcript());
            assertEquals("fuse.granary-noop granary-noop", FuseMount.mountedFsType(mnt));
            byte[] zeros = Files.readAllBytes(mnt.resolve("zeros"));
            assertEquals(3 << 20, zeros.length);
            assertEquals(0, java.util.stream.IntStream.range(0, zeros.length).filter(i -> zeros[i] != 0).count(), "all zeros");
            assertTrue(Files.isRegularFile(mnt.resolve("names/any-name")));
            assertEquals(0, Files.size(mnt.resolve("names/any-name")));
            // every name in /small is a file of --small-size zeros (the small-file ceiling of bench/compare.py)
            for (String name : new String[] {"s000000", "s000001", "another"}) {
                byte[] small = Files.readAllBytes(mnt.resolve("small").resolve(name));
                assertEquals(100_000, small.length, name);
                assertEquals(0, java.util.stream.IntStream.range(0, small.length).filter(i -> small[i] != 0).count(), name + ": all zeros");
            }
            assertFalse(Files.exists(mnt.resolve("small/a/b")), "/small holds no directories");
            g.signal("TERM");
            int rc = g.waitFor(60);
            assertTrue(rc == 0 || rc == 128 + 15, "exit status " + rc + " (0, or the JVM's for SIGTERM)\n" + g.transcript());
            assertNull(FuseMount.mountedFsType(mnt), "unmounted at SIGTERM\n" + g.transcript());
        }
        // the path filesystem (jnr-fuse's, here through the /dev/fuse binding's path layer) serves /small too
        try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), "noopfs", mnt.toString(), "--size", "1m", "--binding", "direct-path",
                "--small-size", "4k")) {
            assertTrue(g.awaitLine("noopfs mounted at", 60), g.transcript());
            assertEquals(4096, Files.readAllBytes(mnt.resolve("small/s000007")).length);
            assertEquals(0, Files.readAllBytes(mnt.resolve("names/n1")).length);
            try (var listing = Files.list(mnt.resolve("small"))) {
                assertEquals(0, listing.count(), "/small lists no names");
            }
            g.signal("TERM");
            g.waitFor(60);
            assertNull(FuseMount.mountedFsType(mnt), "unmounted at SIGTERM\n" + g.transcript());
        }
    }

    @Test
    void portAlreadyInUse() throws Exception {
        Path mnt = Files.createDirectories(tmp.resolve("mnt"));
        int base = MiniCluster.freeBase();
        try (ServerSocket s = new ServerSocket()) {
            s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), base + 62));
            assertOneClearLine(quickstart(Map.of(), mnt, "--base-port", Integer.toString(base)), "port " + (base + 62), mnt);
        }
    }

    @Test
    void libfuseMissing() throws Exception {
        Path mnt = Files.createDirectories(tmp.resolve("mnt"));
        Outcome o = quickstart(Map.of("GRANARY_LIBFUSE", "/nonexistent/libfuse.so.2", "GRANARY_NO_INSTALL", "1"), mnt,
                "--base-port", Integer.toString(MiniCluster.freeBase()));
        assertOneClearLine(o, "libfuse2 is missing", mnt);
    }

    @Test
    void ossCacheLargerThanTheHeap() throws Exception {
        Path mnt = Files.createDirectories(tmp.resolve("mnt"));
        GranaryConfig c = GranaryConfig.localDefault(tmp.resolve("data"), mnt, MiniCluster.freeBase());
        c.ossCache = "64GiB";
        c.save(tmp.resolve("data/granary.yaml"));
        // An OSS server refuses to start; quickstart (one JVM for everything) shrinks the caches to fit.
        try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), "oss", "-c", tmp.resolve("data/granary.yaml").toString(), "--id", "oss1")) {
            assertEquals(1, g.waitFor(60), g.transcript());
            assertEquals(1, g.errorLines().size(), g.transcript());
            assertTrue(g.errorLines().get(0).contains("oss_cache 64GiB does not fit the Java heap"), g.transcript());
            assertFalse(g.transcript().contains("\tat "), "no stack trace\n" + g.transcript());
        }
    }

    /**
     * The launcher gives the JDK's common pool at least 4 threads, where Ratis' asynchronous client
     * completes every MDS reply; GRANARY_JAVA_OPTS still overrides it. Before, on a 2-core machine
     * the pool had 1 thread (cores - 1) and concurrent MDS reads waited for each other there.
     */
    @Test
    void theCommonPoolThatCompletesMdsRepliesHasAtLeastFourThreads() throws Exception {
        String prop = "java.util.concurrent.ForkJoinPool.common.parallelism";
        int jdkDefault = Runtime.getRuntime().availableProcessors() - 1;
        int effective = commonPoolParallelism(launcherProperties(""), prop, jdkDefault);
        assertEquals(Math.max(4, jdkDefault), effective, "common pool parallelism with the launcher's defaults");
        assertEquals(2, commonPoolParallelism(launcherProperties("-D" + prop + "=2"), prop, jdkDefault),
                "a parallelism in GRANARY_JAVA_OPTS wins");
    }

    /** The system properties the launcher's JVM starts with ({@code -XshowSettings:properties}), for `granary --version`. */
    private static String launcherProperties(String opts) throws Exception {
        return launcherVersion(opts + " -XshowSettings:properties");
    }

    /** The output of `granary --version` run through the launcher with {@code opts} as GRANARY_JAVA_OPTS; asserts it succeeded. */
    private static String launcherVersion(String opts) throws Exception {
        Path launcher = Path.of("..").toAbsolutePath().normalize().resolve("granary");
        assertTrue(Files.isExecutable(launcher), launcher + " is the launcher");
        ProcessBuilder pb = new ProcessBuilder("bash", launcher.toString(), "--version").redirectErrorStream(true);
        pb.environment().put("GRANARY_JAVA_OPTS", opts);
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes());
        assertTrue(p.waitFor(300, java.util.concurrent.TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), opts + ":\n" + out);
        assertTrue(out.contains("granary "), out);
        return out;
    }

    /** The common pool's parallelism the property listing sets, or {@code dflt} when it sets none. */
    private static int commonPoolParallelism(String properties, String prop, int dflt) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile(java.util.regex.Pattern.quote(prop) + " = (\\d+)").matcher(properties);
        return m.find() ? Integer.parseInt(m.group(1)) : dflt;
    }

    /**
     * The launcher's own heap flags (-Xms = -Xmx = a quarter of RAM, at most 3 GiB) give way to a
     * heap size in GRANARY_JAVA_OPTS, and one given alone fixes both. Regression: -Xmx300m alone
     * clashed with the launcher's -Xms3072m and the JVM refused to start ("Initial heap size set
     * to a larger value than the maximum heap size"), not a granary line.
     */
    @Test
    void aHeapSizeGivenAloneInGranaryJavaOptsFixesTheHeap() throws Exception {
        record Case(String opts, long initial, long max) {}
        long mib = 1 << 20;
        for (Case c : List.of(new Case("-Xmx320m", 320 * mib, 320 * mib), new Case("-Xms640m", 640 * mib, 640 * mib),
                new Case("-Xms320m -Xmx640m", 320 * mib, 640 * mib))) {
            String out = launcherVersion(c.opts + " -XX:+PrintFlagsFinal");
            assertEquals(c.initial, heapFlag(out, "InitialHeapSize"), c.opts);
            assertEquals(c.max, heapFlag(out, "MaxHeapSize"), c.opts);
        }
    }

    /** The value of a size_t flag in {@code -XX:+PrintFlagsFinal} output. */
    private static long heapFlag(String flags, String name) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("size_t " + name + " += (\\d+)").matcher(flags);
        assertTrue(m.find(), name + " in\n" + flags);
        return Long.parseLong(m.group(1));
    }

    /**
     * A client whose write buffers and read windows (client.max_dirty + client.max_readahead)
     * could take most of its heap refuses to mount, with one line that says what fits, before it
     * connects to anything: under load it would end in OutOfMemoryError and a wedged mount.
     */
    @Test
    void clientBuffersLargerThanTheHeap() throws Exception {
        Path mnt = Files.createDirectories(tmp.resolve("mnt"));
        GranaryConfig c = GranaryConfig.localDefault(tmp.resolve("data"), mnt, MiniCluster.freeBase());
        c.save(tmp.resolve("data/granary.yaml"));
        try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), List.of("-Xms512m", "-Xmx512m"),
                "mount", "-c", tmp.resolve("data/granary.yaml").toString())) {
            assertEquals(1, g.waitFor(60), g.transcript());
            assertEquals(1, g.errorLines().size(), g.transcript());
            String line = g.errorLines().get(0);
            assertTrue(line.startsWith("granary: client.max_dirty 256MiB + client.max_readahead 256MiB do not fit the Java heap ("), line);
            assertTrue(line.endsWith(" max; they may take 70% of it): lower them, or raise the heap, e.g. "
                    + "GRANARY_JAVA_OPTS='-Xms768m -Xmx768m'"), line);
            assertFalse(g.transcript().contains("\tat "), "no stack trace\n" + g.transcript());
        }
        assertNull(FuseMount.mountedFsType(mnt), "nothing mounted at " + mnt);
    }

    /**
     * Config files that are not configs: one line each naming the problem. Regression: Jackson's
     * own messages ("No content to map due to end-of-input", "Cannot deserialize value of type
     * `java.lang.String` from Array value"), and "not found" for a directory that exists.
     */
    @Test
    void configFilesThatAreNotConfigsGetPlainMessages() throws Exception {
        record Case(String text, String message) {}
        int i = 0;
        for (Case c : List.of(new Case("", "empty or not a YAML mapping"), new Case("# just a comment\n", "empty or not a YAML mapping"),
                new Case("cluster: [a, b]\n", "'cluster' has a value of the wrong kind"),
                new Case("client:\n  attr_timeout: [1s]\n", "'client.attr_timeout' has a value of the wrong kind"))) {
            Path f = tmp.resolve("c" + i++ + ".yaml");
            Files.writeString(f, c.text());
            dev.granary.tools.config.ConfigException e = org.junit.jupiter.api.Assertions.assertThrows(
                    dev.granary.tools.config.ConfigException.class, () -> GranaryConfig.load(f));
            assertTrue(e.getMessage().contains(c.message()) && !e.getMessage().contains("java."), e.getMessage());
        }
        Path dir = Files.createDirectories(tmp.resolve("a-dir"));
        dev.granary.tools.config.ConfigException e = org.junit.jupiter.api.Assertions.assertThrows(
                dev.granary.tools.config.ConfigException.class, () -> GranaryConfig.load(dir));
        assertTrue(e.getMessage().contains("is a directory"), e.getMessage());
        // Regression: /dev/null said "config file not found", and -c '' "config file  is a directory".
        e = org.junit.jupiter.api.Assertions.assertThrows(dev.granary.tools.config.ConfigException.class,
                () -> GranaryConfig.load(Path.of("/dev/null")));
        assertEquals("config file /dev/null is not a regular file (give a granary.yaml)", e.getMessage());
        e = org.junit.jupiter.api.Assertions.assertThrows(dev.granary.tools.config.ConfigException.class,
                () -> GranaryConfig.load(Path.of("")));
        assertEquals("config file name is empty (give -c a granary.yaml)", e.getMessage());
    }

    /** quickstart --data naming a regular file: one line, exit 1 (it was "internal error: java.nio.file.FileAlreadyExistsException", exit 70). */
    @Test
    void quickstartDataThatIsAFile() throws Exception {
        Path file = tmp.resolve("data");
        Files.writeString(file, "not a folder");
        Path mnt = Files.createDirectories(tmp.resolve("mnt"));
        assertOneClearLine(quickstart(Map.of(), mnt, "--base-port", Integer.toString(MiniCluster.freeBase())), "is not a directory", mnt);
        assertEquals("not a folder", Files.readString(file));
    }

    /**
     * status, cache drop and mount against a cluster that is not running: one line at once, exit
     * 1, nothing mounted. Regression: status and cache drop waited out the Raft client's retries
     * (60 s) and printed Ratis' exception; mount said "mounted" after 60 s, then answered every
     * call after 61 s with EIO.
     */
    @Test
    void statusCacheDropAndMountOfAClusterThatIsNotRunningFailAtOnce() throws Exception {
        Path conf = writeConfig("http://127.0.0.1:1", "k", "s");
        Path mnt = Files.createDirectories(tmp.resolve("mnt-no-mds"));
        for (String[] args : new String[][] {{"status"}, {"cache", "drop"}, {"mount", "--mount", mnt.toString()}}) {
            List<String> cmd = new java.util.ArrayList<>(List.of(args));
            cmd.addAll(List.of("-c", conf.toString()));
            long t0 = System.nanoTime();
            try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), cmd.toArray(new String[0]))) {
                assertEquals(1, g.waitFor(60), g.transcript());
                long s = (System.nanoTime() - t0) / 1_000_000_000L;
                assertTrue(s < 30, String.join(" ", args) + " took " + s + " s");
                assertEquals(1, g.errorLines().size(), g.transcript());
                assertTrue(g.errorLines().get(0).contains("no MDS peer is reachable"), g.transcript());
                assertFalse(g.transcript().contains("Ratis") || g.transcript().contains("\tat "), g.transcript());
            }
        }
        assertNull(FuseMount.mountedFsType(mnt), "nothing mounted at " + mnt);
    }

    /**
     * A key given twice in the config is one clear error naming it, not "the last one wins".
     * Regression: a setting appended under a key the file already had was silently ignored.
     */
    @Test
    void aConfigKeyGivenTwiceIsAnError() throws Exception {
        Path conf = writeConfig("http://127.0.0.1:1", "k", "s");
        String text = Files.readString(conf);
        Files.writeString(conf, text.replace("  statahead_max: 32768\n", "  statahead_max: 32768\n  statahead_max: 0\n"));
        dev.granary.tools.config.ConfigException e = org.junit.jupiter.api.Assertions.assertThrows(dev.granary.tools.config.ConfigException.class,
                () -> GranaryConfig.load(conf));
        assertTrue(e.getMessage().contains("statahead_max") && e.getMessage().contains("line"), e.getMessage());
        try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), "status", "-c", conf.toString())) {
            assertTrue(g.waitFor(60) != 0, g.transcript());
            assertEquals(1, g.errorLines().size(), g.transcript());
            assertTrue(g.errorLines().get(0).contains("statahead_max"), g.transcript());
        }
    }

    /**
     * Client settings out of range: a one-line error naming the file and the key, exit 1.
     * Regression: {@code max_dirty: "0"} and {@code readahead_stripes: -1} passed the config check
     * and ended in "internal error", exit 70, when the client was built.
     */
    @Test
    void clientSettingsOutOfRangeNameTheirKey() throws Exception {
        Path conf = writeConfig("http://127.0.0.1:1", "k", "s");
        String text = Files.readString(conf);
        record Case(String from, String to, String message) {}
        List<Case> cases = List.of(
                new Case("  max_dirty: \"256MiB\"\n", "  max_dirty: \"0\"\n", "client.max_dirty must be at least 1 byte"),
                new Case("  readahead_stripes: 4\n", "  readahead_stripes: -1\n", "client.readahead_stripes must be in [0, 256] stripes, got -1"),
                new Case("  readahead_stripes: 4\n", "  readahead_stripes: 257\n", "client.readahead_stripes must be in [0, 256] stripes, got 257"),
                new Case("  statahead_max: 32768\n", "  statahead_max: -1\n", "client.statahead_max must be in [0, 1000000]"),
                new Case("  inline_max: \"256KiB\"\n", "  inline_max: \"2MiB\"\n", "client.inline_max must be at most 1MiB"),
                new Case("  pack_max: \"0\"\n", "  pack_max: \"8MiB\"\n", "client.pack_max must be at most 4MiB"),
                new Case("  stripe_fill_reads: 0\n", "  stripe_fill_reads: 1\n", "client.stripe_fill_reads must be 0 (off) or in [2, 1024] reads, got 1"),
                new Case("  lock_lease: \"15s\"\n", "  lock_lease: \"0s\"\n", "client.lock_lease must be between 1s and 10m"),
                new Case("  fuse_binding: \"auto\"\n", "  fuse_binding: \"libfuse3\"\n", "client.fuse_binding must be auto, direct or jnr, got 'libfuse3'"));
        for (Case c : cases) {
            assertTrue(text.contains(c.from()), c.from() + " in\n" + text);
            Files.writeString(conf, text.replace(c.from(), c.to()));
            dev.granary.tools.config.ConfigException e = org.junit.jupiter.api.Assertions.assertThrows(
                    dev.granary.tools.config.ConfigException.class, () -> GranaryConfig.load(conf), c.to());
            assertTrue(e.getMessage().startsWith(conf + ": ") && e.getMessage().contains(c.message()), e.getMessage());
        }
        Files.writeString(conf, text.replace(cases.get(0).from(), cases.get(0).to()));
        Path mnt = Files.createDirectories(tmp.resolve("mnt-bad-client"));
        try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), "mount", "-c", conf.toString(), "--mount", mnt.toString())) {
            assertEquals(1, g.waitFor(60), g.transcript());
            assertEquals(1, g.errorLines().size(), g.transcript());
            assertTrue(g.errorLines().get(0).contains("client.max_dirty must be at least 1 byte"), g.transcript());
            assertFalse(g.transcript().contains("internal error") || g.transcript().contains("\tat "), g.transcript());
        }
    }

    /** A disk tier that cannot be created, or a size that is not one: one clear line each, exit 1, no stack trace. */
    @Test
    void ossDiskCacheInAFileOrWithABadSize() throws Exception {
        Path file = Files.write(tmp.resolve("not-a-folder"), new byte[1]);
        try (EmbeddedS3 s3 = EmbeddedS3.start(Files.createDirectories(tmp.resolve("s3")), 0, "k", "s")) {
            s3.createBucket("granary");
            Path conf = writeConfig(s3.endpoint().toString(), "k", "s");
            GranaryConfig c = GranaryConfig.load(conf);
            c.ossDiskCache = "1GiB";
            c.ossDiskCacheDir = file.toString();
            c.save(conf);
            try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), "oss", "-c", conf.toString(), "--id", "oss1")) {
                assertEquals(1, g.waitFor(60), g.transcript());
                assertEquals(1, g.errorLines().size(), g.transcript());
                assertTrue(g.errorLines().get(0).contains("cannot start OSS oss1")
                        && g.errorLines().get(0).contains("disk cache folder " + file.resolve("oss1") + " is not usable: Not a directory"), g.transcript());
                assertFalse(g.transcript().contains("\tat "), "no stack trace\n" + g.transcript());
            }
            c.ossDiskCache = "lots";
            c.save(conf);
            try (GranaryProcess g = GranaryProcess.start(tmp, Map.of(), "oss", "-c", conf.toString(), "--id", "oss1")) {
                assertEquals(1, g.waitFor(60), g.transcript());
                assertEquals(1, g.errorLines().size(), g.transcript());
                assertTrue(g.errorLines().get(0).contains("lots"), g.transcript());
                assertFalse(g.transcript().contains("\tat "), "no stack trace\n" + g.transcript());
            }
        }
    }

    private Path writeConfig(String endpoint, String access, String secret) throws Exception {
        GranaryConfig c = GranaryConfig.localDefault(tmp.resolve("data"), tmp.resolve("mnt"), MiniCluster.freeBase());
        c.s3.endpoint = endpoint;
        c.s3.accessKey = access;
        c.s3.secretKey = secret;
        c.save(tmp.resolve("data/granary.yaml"));
        return tmp.resolve("data/granary.yaml");
    }

    @Test
    void s3EndpointUnreachable() throws Exception {
        Path mnt = Files.createDirectories(tmp.resolve("mnt"));
        int closed;
        try (ServerSocket s = new ServerSocket(0)) {
            closed = s.getLocalPort();
        }
        writeConfig("http://127.0.0.1:" + closed, "k", "s");
        long t0 = System.nanoTime();
        Outcome o = quickstart(Map.of(), mnt);
        assertOneClearLine(o, "127.0.0.1:" + closed, mnt);
        assertTrue((System.nanoTime() - t0) / 1e9 < 120, "fails fast");
    }

    @Test
    void wrongCredentials() throws Exception {
        Path mnt = Files.createDirectories(tmp.resolve("mnt"));
        try (EmbeddedS3 s3 = EmbeddedS3.start(Files.createDirectories(tmp.resolve("s3")), 0, "right-key", "right-secret")) {
            s3.createBucket("granary");
            writeConfig(s3.endpoint().toString(), "wrong-key", "wrong-secret");
            Outcome o = quickstart(Map.of(), mnt);
            assertOneClearLine(o, "denied", mnt);
        }
    }
}
