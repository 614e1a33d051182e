package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.mds.FsException;
import dev.granary.mds.client.MdsClient;
import dev.granary.mds.proto.Attr;
import dev.granary.mds.proto.Caller;
import dev.granary.mds.proto.Status;
import dev.granary.tools.cluster.Nodes;
import dev.granary.tools.config.GranaryConfig;
import dev.granary.tools.prereq.Prerequisites;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiConsumer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Many entries, made quickly through the MDS API ({@link MdsClient} calls from many threads, as
 * many clients would), seen through a real FUSE mount: a large directory listed with readdir
 * while another thread adds and removes entries in it, and the hard-link limit (EMLINK).
 *
 * <p>The directory has {@value #DEFAULT_ENTRIES} entries in CI. For the full-size run (1,000,000
 * entries; populating takes several minutes) set the system property
 * {@code granary.bigdir.entries} or the environment variable {@code GRANARY_BIGDIR_ENTRIES}.
 */
class LargeDirectoryFuseTest {
    static final String PY = "/usr/bin/python3";
    static final int DEFAULT_ENTRIES = 20_000;
    static final Caller ROOT = Nodes.ROOT;
    static final int S_IFREG = 0100000;

    @TempDir
    static Path tmp;
    static MiniCluster cluster;
    static Path mnt;
    /** Namespace clients (each its own Raft client), shared by the worker threads. */
    static final List<MdsClient> clients = new ArrayList<>();

    @BeforeAll
    static void start() throws Exception {
        MiniCluster.assumeFuseDevice();
        Assumptions.assumeTrue(Files.isExecutable(Path.of(PY)), "SKIPPED: no " + PY);
        Prerequisites.ensureFuse();
        // One MDS peer (dev mode): the namespace logic and the FUSE path are the same, and bulk
        // creation is not slowed by three peers fsyncing one shared disk.
        GranaryConfig cfg = MiniCluster.configFor(tmp.resolve("cluster"));
        cfg.mds = new ArrayList<>(cfg.mds.subList(0, 1));
        cluster = MiniCluster.start(cfg);
        mnt = tmp.resolve("mnt");
        cluster.mount(mnt);
        for (int i = 0; i < 8; i++) {
            clients.add(Nodes.mdsClient(cluster.cluster().config()));
        }
    }

    @AfterAll
    static void stop() {
        clients.forEach(MdsClient::close);
        if (cluster != null) cluster.close();
    }

    /** Entries of the large directory: the system property, else the environment variable, else the CI size. */
    static int entries() {
        String v = System.getProperty("granary.bigdir.entries", System.getenv("GRANARY_BIGDIR_ENTRIES"));
        return v == null || v.isBlank() ? DEFAULT_ENTRIES : Integer.parseInt(v.trim().replace("_", ""));
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /**
     * Runs {@code op(client, i)} for i in [0, n) on 64 threads over the namespace clients;
     * returns the elapsed milliseconds. The first failure fails the call.
     */
    static long parallel(int n, BiConsumer<MdsClient, Integer> op) throws Exception {
        int threads = 64;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        AtomicInteger next = new AtomicInteger();
        long t0 = System.nanoTime();
        try {
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                MdsClient c = clients.get(t % clients.size());
                fs.add(pool.submit(() -> {
                    for (int i; (i = next.getAndIncrement()) < n; ) {
                        op.accept(c, i);
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
        return (System.nanoTime() - t0) / 1_000_000;
    }

    /**
     * Lists the directory through FUSE with readdir (os.scandir: getdents64 in 32 KiB pages),
     * several passes, writing one name per line; prints "pass N: COUNT names in S s" per pass.
     */
    static final String LISTER = String.join("\n",
            "import os, sys, time",
            "d, passes, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]",
            "for p in range(passes):",
            "    t = time.time()",
            "    with open(out + '.%d' % p, 'w') as f, os.scandir(d) as it:",
            "        n = 0",
            "        for e in it:",
            "            f.write(e.name + '\\n'); n += 1",
            "    print('pass %d: %d names in %.2f s' % (p, n, time.time() - t), flush=True)", "");

    /**
     * A directory of N stable entries is listed through the mount, three times, while another
     * thread keeps creating and removing other entries whose names sort between the stable ones.
     * Each listing must hold every stable entry exactly once, no name twice, and nothing but
     * stable names and churn names; churn must really have happened during each listing.
     */
    @Test
    void readdirOfALargeDirectoryUnderChurnSeesEveryStableEntryOnce() throws Exception {
        int n = entries();
        long dirIno = clients.get(0).mkdir(ROOT, MdsClient.ROOT_INO, utf8("big"), 0755).getIno();
        long ms = parallel(n, (c, i) -> c.create(ROOT, dirIno, utf8(String.format("f%07d-s", i)), S_IFREG | 0644, true));
        System.out.printf("large directory: %,d entries created through the MDS API in %.1f s (%,.0f creates/s)%n",
                n, ms / 1000.0, n * 1000.0 / Math.max(1, ms));

        // Churn: names "f%07d-c..." sort right before stable entry i ("c" < "s"), all over the directory.
        AtomicBoolean stopChurn = new AtomicBoolean();
        AtomicLong churnOps = new AtomicLong();
        ExecutorService churnPool = Executors.newFixedThreadPool(4);
        List<Future<?>> churn = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            MdsClient c = clients.get(t);
            int seed = t;
            churn.add(churnPool.submit(() -> {
                java.util.Random r = new java.util.Random(seed);
                List<byte[]> live = new ArrayList<>();
                while (!stopChurn.get()) {
                    if (live.size() < 50 || r.nextBoolean()) {
                        byte[] name = utf8(String.format("f%07d-c%d-%d", r.nextInt(n), seed, churnOps.get()));
                        c.create(ROOT, dirIno, name, S_IFREG | 0644, true);
                        live.add(name);
                    } else {
                        c.unlink(ROOT, dirIno, live.remove(r.nextInt(live.size())));
                    }
                    churnOps.incrementAndGet();
                }
                return null;
            }));
        }
        String out;
        long before;
        long after;
        try {
            Thread.sleep(300);
            Files.writeString(tmp.resolve("lister.py"), LISTER);
            before = churnOps.get();
            Process lister = new ProcessBuilder(PY, "lister.py", mnt.resolve("big").toString(), "3", tmp.resolve("names").toString())
                    .directory(tmp.toFile()).redirectErrorStream(true).start();
            out = new String(lister.getInputStream().readAllBytes(), StandardCharsets.UTF_8); // until it exits
            assertTrue(lister.waitFor(60, java.util.concurrent.TimeUnit.SECONDS), "lister did not exit");
            assertEquals(0, lister.exitValue(), out);
            after = churnOps.get();
        } finally {
            stopChurn.set(true);
            for (Future<?> f : churn) {
                f.get();
            }
            churnPool.shutdownNow();
        }
        System.out.print("large directory under churn:\n" + out);
        System.out.printf("large directory: %,d creates and unlinks by the churn threads during the 3 listings%n", after - before);
        assertTrue(after - before >= 30, "churn ran during the listings: " + (after - before) + " operations");
        for (int p = 0; p < 3; p++) {
            List<String> names = Files.readAllLines(tmp.resolve("names." + p));
            Set<String> seen = new HashSet<>();
            List<String> twice = new ArrayList<>();
            int stable = 0;
            List<String> foreign = new ArrayList<>();
            for (String name : names) {
                if (!seen.add(name)) twice.add(name);
                if (name.matches("f\\d{7}-s")) stable++;
                else if (!name.matches("f\\d{7}-c\\d+-\\d+")) foreign.add(name);
            }
            assertEquals(List.of(), twice.subList(0, Math.min(10, twice.size())), "pass " + p + ": names seen twice (" + twice.size() + ")");
            assertEquals(List.of(), foreign.subList(0, Math.min(10, foreign.size())), "pass " + p + ": names that were never created");
            assertEquals(n, stable, "pass " + p + ": stable entries seen (each exactly once)");
            List<String> sorted = new ArrayList<>(names);
            sorted.sort(null);
            assertEquals(sorted, names, "pass " + p + ": names in byte order");
        }
    }

    /**
     * A regular file can have at most Namespace.LINK_MAX (65,000) names: the links up to the
     * limit are made through the MDS API, the last one and the one past it through the mount
     * (link(2): ok, then EMLINK); st_nlink shows 65000; after an unlink a link works again.
     */
    @Test
    void linkPastTheLinkLimitFailsWithEmlink() throws Exception {
        int linkMax = 65_000;
        Path dir = Files.createDirectory(mnt.resolve("links"));
        Path f = Files.writeString(dir.resolve("f"), "one inode, many names");
        Attr a = clients.get(0).lookup(ROOT, clients.get(0).lookup(ROOT, MdsClient.ROOT_INO, utf8("links")).getIno(), utf8("f"));
        long dirIno = clients.get(0).lookup(ROOT, MdsClient.ROOT_INO, utf8("links")).getIno();
        int viaApi = linkMax - 2; // nlink 1 + these = 64,999
        long ms = parallel(viaApi, (c, i) -> c.link(ROOT, a.getIno(), dirIno, utf8("l" + i)));
        System.out.printf("links: %,d made through the MDS API in %.1f s%n", viaApi, ms / 1000.0);
        String script = String.join("\n",
                "import errno, os, sys",
                "d = sys.argv[1]",
                "def link(name):",
                "    try:",
                "        os.link(d + '/f', d + '/' + name); return 'ok'",
                "    except OSError as e:",
                "        return errno.errorcode[e.errno]",
                "print('link 65000:', link('last'))",
                "print('nlink:', os.stat(d + '/f').st_nlink)",
                "print('link 65001:', link('one-too-many'))",
                "os.unlink(d + '/l0')",
                "print('after an unlink, nlink:', os.stat(d + '/f').st_nlink)",
                "print('link again:', link('again'))",
                // 2 of 2 full CI runs on 2026-12-06 showed 64999 here: a statahead page of this
                // directory (thousands of names of f) put back f's attributes from before the
                // link (StatAheadTest#aChangeBetweenTheFetchsReadOfTheCacheAndItsWriteIsKept)
                "print('nlink:', os.stat(d + '/f').st_nlink)", "");
        Files.writeString(tmp.resolve("emlink.py"), script);
        String out = Shell.ok(tmp, PY + " emlink.py '" + dir + "'");
        System.out.print("links:\n" + out);
        assertEquals(List.of("link 65000: ok", "nlink: 65000", "link 65001: EMLINK", "after an unlink, nlink: 64999",
                "link again: ok", "nlink: 65000"), out.lines().toList());
        FsException e = org.junit.jupiter.api.Assertions.assertThrows(FsException.class,
                () -> clients.get(0).link(ROOT, a.getIno(), dirIno, utf8("api-too-many")));
        assertEquals(Status.EMLINK, e.status());
        assertEquals("one inode, many names", Files.readString(f));
    }
}
