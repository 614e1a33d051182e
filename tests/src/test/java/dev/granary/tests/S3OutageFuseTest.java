package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.objbacker.EmbeddedS3;
import dev.granary.tools.config.GranaryConfig;
import dev.granary.tools.prereq.Prerequisites;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * S3 unreachable under a running cluster (the S3 server stopped, then its port black-holed with
 * iptables): cold reads of striped files fail with EIO within the configured deadline (twice
 * {@code client.io_timeout}: the kernel retries a page once) instead of
 * hanging or returning zeros, write + fsync/close fail with EIO and nothing of that write is
 * ever committed, small (inline) files keep working, and once S3 is back the same reads
 * succeed with the committed bytes intact.
 *
 * <p>The test runs its own S3 server (S3Proxy) so that it can stop and restart it, with short
 * deadlines ({@code s3.max_attempts: 2}, {@code s3.request_timeout: 1s},
 * {@code client.io_timeout: 3s}) and no OSS read cache ({@code oss_cache: 0}: every block read is
 * an S3 GET, so every read is cold).
 */
class S3OutageFuseTest {
    static final String PY = "/usr/bin/python3";
    static final int STRIPE = 64 << 10;
    /** client.io_timeout of this test, seconds. */
    static final int IO_TIMEOUT_S = 3;

    @TempDir
    static Path tmp;
    static MiniCluster cluster;
    static EmbeddedS3 s3;
    static Path s3Dir;
    static int s3Port;
    static Path mntA;
    static Path mntB;

    /**
     * One file operation on the mount, printing what each call returned: {@code read PATH}
     * ("read ok BYTES SECONDS" or "read ERRNO SECONDS"), {@code write PATH SIZE OFFSET}
     * (pwrite, fsync, close: "write ok, fsync EIO, close EIO").
     */
    static final String IO = String.join("\n",
            "import errno, os, sys, time",
            "def name(e): return errno.errorcode.get(e.errno, str(e.errno))",
            "op, path = sys.argv[1], sys.argv[2]",
            "t = time.time()",
            "if op == 'read':",
            "    fd = os.open(path, os.O_RDONLY)",
            "    n = 0",
            "    try:",
            "        while True:",
            "            b = os.read(fd, 1 << 20)",
            "            if not b: break",
            "            n += len(b)",
            "        print('read ok %d %.2f' % (n, time.time() - t))",
            "    except OSError as e:",
            "        print('read %s %.2f' % (name(e), time.time() - t))",
            "    os.close(fd)",
            "else:",
            "    size, off = int(sys.argv[3]), int(sys.argv[4])",
            "    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)",
            "    out = []",
            "    for what, call in (('write', lambda: os.pwrite(fd, bytes([0x5a]) * size, off)), ('fsync', lambda: os.fsync(fd)), ('close', lambda: os.close(fd))):",
            "        try:",
            "            call(); out.append(what + ' ok')",
            "        except OSError as e:",
            "            out.append(what + ' ' + name(e))",
            "    print(', '.join(out))", "");

    @BeforeAll
    static void start() throws Exception {
        MiniCluster.assumeFuseDevice();
        Assumptions.assumeTrue(Files.isExecutable(Path.of(PY)), "SKIPPED: no " + PY);
        Prerequisites.ensureFuse();
        GranaryConfig cfg = MiniCluster.configFor(tmp.resolve("cluster"));
        s3Port = cfg.s3.embeddedPort; // free (MiniCluster.freeBase)
        s3Dir = Files.createDirectories(tmp.resolve("s3"));
        s3 = EmbeddedS3.start(s3Dir, s3Port, "ak", "sk");
        s3.createBucket("granary");
        cfg.s3.endpoint = s3.endpoint().toString();
        cfg.s3.accessKey = "ak";
        cfg.s3.secretKey = "sk";
        cfg.s3.maxAttempts = 2;
        cfg.s3.requestTimeout = "1s";
        cfg.client.ioTimeout = IO_TIMEOUT_S + "s";
        cfg.ossCache = "0";
        cluster = MiniCluster.start(cfg);
        mntA = tmp.resolve("a");
        mntB = tmp.resolve("b");
        cluster.mount(mntA);
        cluster.mount(mntB);
        Files.writeString(tmp.resolve("io.py"), IO);
    }

    @AfterAll
    static void stop() {
        if (cluster != null) cluster.close();
        if (s3 != null) s3.close();
    }

    static String io(String... args) throws Exception {
        return Shell.ok(tmp, PY + " io.py " + String.join(" ", args)).trim();
    }

    static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    /** Seconds printed at the end of a "read ..." line. */
    static double seconds(String line) {
        return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
    }

    @Test
    void readsAndWritesFailWithEioWhileS3IsDownAndCommittedDataIsIntactAfter() throws Exception {
        Path dirA = Files.createDirectory(mntA.resolve("data"));
        MiniCluster.setStripeSize(dirA, STRIPE);
        Path dirB = mntB.resolve("data");
        byte[] big = random(16 * STRIPE + 777, 1);     // 17 stripes on both OSTs
        byte[] old = random(5 * STRIPE, 2);            // committed before the outage, overwritten during it
        byte[] small = random(10_000, 3);              // inline: data on MDS
        Files.write(dirA.resolve("big"), big);
        Files.write(dirA.resolve("big2"), big);
        Files.write(dirA.resolve("old"), old);

        // 1. The S3 server stops: connections are refused.
        s3.close();
        s3 = null;
        String read = io("read", dirB.resolve("big").toString());
        System.out.println("S3 stopped: cold read of a striped file through the other mount: " + read);
        assertTrue(read.startsWith("read EIO "), read);
        assertTrue(seconds(read) <= IO_TIMEOUT_S + 2, "EIO only after " + read);

        String write = io("write", dirA.resolve("new").toString(), "" + (8 * STRIPE), "0");
        System.out.println("S3 stopped: 8 stripes into a new file: " + write);
        assertTrue(write.matches("write (ok|EIO), fsync EIO, close EIO"), write);
        String overwrite = io("write", dirA.resolve("old").toString(), "" + (2 * STRIPE), "" + STRIPE);
        System.out.println("S3 stopped: 2 stripes over a committed file: " + overwrite);
        assertTrue(overwrite.matches("write (ok|EIO), fsync EIO, close EIO"), overwrite);
        long t0 = System.nanoTime();
        Files.write(dirA.resolve("small"), small); // data on MDS: needs no S3
        System.out.printf("S3 stopped: a %d-byte (inline) file written and closed in %d ms%n", small.length, (System.nanoTime() - t0) / 1_000_000);
        assertArrayEquals(small, Files.readAllBytes(dirB.resolve("small")));

        // 2. S3 is back, but its port drops every packet (a black hole: connects hang).
        s3 = EmbeddedS3.start(s3Dir, s3Port, "ak", "sk");
        Shell.Result ipt = Shell.run(tmp, Map.of(), "iptables -w -I INPUT -i lo -p tcp --dport " + s3Port + " -j DROP");
        if (ipt.rc() != 0) {
            System.out.println("SKIPPED the black-hole part: iptables failed: " + ipt.err().trim());
        } else {
            try {
                String hung = io("read", dirB.resolve("big2").toString());
                System.out.println("S3 black-holed: cold read of a striped file: " + hung + " (client.io_timeout " + IO_TIMEOUT_S + " s)");
                assertTrue(hung.startsWith("read EIO "), hung);
                // Each FUSE read fails after client.io_timeout; the kernel reads a page whose
                // readahead failed once more before it returns EIO: 2 x io_timeout at most.
                assertTrue(seconds(hung) <= 2 * IO_TIMEOUT_S + 2, "EIO only after " + hung);
            } finally {
                Shell.ok(tmp, "iptables -w -D INPUT -i lo -p tcp --dport " + s3Port + " -j DROP");
            }
        }

        // 3. S3 reachable again: the same reads succeed and what was committed is intact.
        assertArrayEquals(big, Files.readAllBytes(dirB.resolve("big")), "striped file after S3 came back");
        assertArrayEquals(big, Files.readAllBytes(dirB.resolve("big2")), "striped file after S3 came back");
        assertArrayEquals(old, Files.readAllBytes(dirB.resolve("old")), "the failed overwrite left the committed bytes");
        assertEquals(0, Files.size(dirB.resolve("new")), "the failed write committed nothing");
        assertArrayEquals(small, Files.readAllBytes(dirB.resolve("small")));
        byte[] after = random(3 * STRIPE + 5, 4);
        Files.write(dirA.resolve("new"), after);
        assertArrayEquals(after, Files.readAllBytes(dirB.resolve("new")), "writes work again");
        System.out.println("S3 back: every committed file reads back intact; the failed writes left nothing");
    }
}
