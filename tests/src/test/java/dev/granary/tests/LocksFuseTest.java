package dev.granary.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.granary.client.fuse.GranaryFuse;
import dev.granary.tools.cluster.MountPoints;
import dev.granary.tools.config.GranaryConfig;
import dev.granary.tools.prereq.Prerequisites;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * fcntl and flock locks held in the MDS, seen through two mounts of one cluster (two clients),
 * and released when the client holding them dies (a mount process killed with SIGKILL).
 */
class LocksFuseTest {
    @TempDir
    static Path tmp;
    static MiniCluster cluster;
    static GranaryConfig cfg;
    static Path mntA;
    static Path mntB;

    @BeforeAll
    static void start() throws Exception {
        MiniCluster.assumeFuseDevice();
        Prerequisites.ensureFuse();
        cfg = MiniCluster.configFor(tmp.resolve("cluster"));
        cfg.client.lockLease = "3s";
        cluster = MiniCluster.start(cfg);
        mntA = tmp.resolve("a");
        mntB = tmp.resolve("b");
        // mount A closes read-only descriptors without FLUSH (opt-in): every test here runs with it
        System.setProperty(GranaryFuse.NOFLUSH_READ_ONLY_PROPERTY, "true");
        try {
            cluster.mount(mntA);
        } finally {
            System.clearProperty(GranaryFuse.NOFLUSH_READ_ONLY_PROPERTY);
        }
        cluster.mount(mntB);
    }

    @AfterAll
    static void stop() {
        if (cluster != null) cluster.close();
    }

    /** A process that takes a POSIX write lock on [0, 100) and an exclusive flock, says "held", waits for a line. */
    static final String HOLDER = String.join("\n",
            "import fcntl, os, sys",
            "fd = os.open(sys.argv[1], os.O_RDWR)",
            "fcntl.lockf(fd, fcntl.LOCK_EX, 100, 0)",
            "fl = os.open(sys.argv[1], os.O_RDONLY)",
            "fcntl.flock(fl, fcntl.LOCK_EX)",
            "print('held', flush=True)",
            "sys.stdin.readline()", "");

    static final String CONTENDER = String.join("\n",
            "import errno, fcntl, os, struct, subprocess, sys, threading, time",
            "a, b = sys.argv[1], sys.argv[2]  # one file, through mount A and through mount B",
            "with open(a, 'wb') as f: f.write(b'x' * 1000)",
            "holder = subprocess.Popen([sys.executable, 'holder.py', a], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)",
            "print(holder.stdout.readline().strip())",
            "fd = os.open(b, os.O_RDWR)",
            "try:",
            "    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 50); print('overlap granted')",
            "except OSError as e: print('overlap', errno.errorcode[e.errno])",
            "fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 200); print('disjoint granted')",
            "fmt = 'hhqqixxxx'  # struct flock on x86-64 / aarch64",
            "t, wh, st, ln, pid = struct.unpack(fmt, fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack(fmt, fcntl.F_WRLCK, 0, 0, 10, 0)))",
            "print('getlk', t == fcntl.F_WRLCK, st, ln, pid == holder.pid)",
            "t, wh, st, ln, pid = struct.unpack(fmt, fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack(fmt, fcntl.F_WRLCK, 0, 500, 10, 0)))",
            "print('getlk free', t == fcntl.F_UNLCK)",
            "fb = os.open(b, os.O_RDONLY)",
            "try:",
            "    fcntl.flock(fb, fcntl.LOCK_EX | fcntl.LOCK_NB); print('flock granted')",
            "except OSError as e: print('flock', errno.errorcode[e.errno])",
            "got = []",
            "th = threading.Thread(target=lambda: (fcntl.flock(fb, fcntl.LOCK_EX), got.append('flock after release')))",
            "th.start(); time.sleep(0.5)",
            "print('waiting', got)",
            "holder.stdin.write('go\\n'); holder.stdin.flush(); holder.wait()",
            "th.join(30); print(got)",
            "fcntl.lockf(fd, fcntl.LOCK_EX, 100, 0); print('blocking lockf granted')", "");

    @Test
    void locksTakenThroughOneMountAreSeenThroughTheOther() throws Exception {
        Files.writeString(tmp.resolve("holder.py"), HOLDER);
        Files.writeString(tmp.resolve("contender.py"), CONTENDER);
        String out = Shell.ok(tmp, "python3 contender.py " + mntA.resolve("locked.dat") + " " + mntB.resolve("locked.dat"));
        assertEquals(List.of("held", "overlap EAGAIN", "disjoint granted", "getlk True 0 100 True", "getlk free True",
                "flock EAGAIN", "waiting []", "['flock after release']", "blocking lockf granted"),
                out.lines().toList());
    }

    /**
     * With read-only descriptors closed without a FLUSH (mount A: {@code granary.fuse.noflushReadOnly},
     * FOPEN_NOFLUSH, one FUSE round trip less per small file read): a POSIX lock taken through one
     * still goes with its close, released at RELEASE, and a process that already holds a lock when
     * it opens and closes another descriptor of the file still loses it at that close (POSIX: any
     * close), at once. Another client (mount B) checks with F_SETLK. Before the RELEASE-time
     * unlock, the first lock stayed for as long as the client lived.
     */
    @Test
    void locksGoWithTheCloseOfAReadOnlyDescriptor() throws Exception {
        Path a = mntA.resolve("readers.dat");
        Files.writeString(a, "x".repeat(100));
        Files.writeString(tmp.resolve("ro_holder.py"), String.join("\n",
                "import fcntl, os, sys",
                "p, how = sys.argv[1], sys.argv[2]",
                "if how == 'through-it':",
                "    fd = os.open(p, os.O_RDONLY); fcntl.lockf(fd, fcntl.LOCK_SH, 100, 0)",
                "else:  # a lock through a read-write descriptor, then another descriptor opened read-only",
                "    keep = os.open(p, os.O_RDWR); fcntl.lockf(keep, fcntl.LOCK_EX, 100, 0); fd = os.open(p, os.O_RDONLY)",
                "print('locked', flush=True)",
                "sys.stdin.readline(); os.read(fd, 10); os.close(fd); print('closed', flush=True)",
                "sys.stdin.readline()", ""));
        Files.writeString(tmp.resolve("ro_contender.py"), String.join("\n",
                "import errno, fcntl, os, subprocess, sys, time",
                "a, b = sys.argv[1], sys.argv[2]",
                "def try_lock(fd):",
                "    try:",
                "        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 100, 0); fcntl.lockf(fd, fcntl.LOCK_UN, 100, 0); return True",
                "    except OSError as e:",
                "        if e.errno not in (errno.EAGAIN, errno.EACCES): raise",
                "        return False",
                "fd = os.open(b, os.O_RDWR)",
                "for how in ('through-it', 'held-before'):",
                "    h = subprocess.Popen([sys.executable, 'ro_holder.py', a, how], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)",
                "    h.stdout.readline()",
                "    print(how, 'held', not try_lock(fd))",
                "    h.stdin.write('close\\n'); h.stdin.flush(); h.stdout.readline()",
                "    at_once = try_lock(fd); t = time.time(); got = at_once",
                "    while not got and time.time() - t < 5: time.sleep(0.01); got = try_lock(fd)",
                "    print(how, 'free after the close', got, 'at once' if at_once else 'after RELEASE')",
                "    h.stdin.write('exit\\n'); h.stdin.flush(); h.wait()", ""));
        String out = Shell.ok(tmp, "python3 ro_contender.py " + a + " " + mntB.resolve("readers.dat"));
        List<String> lines = out.lines().toList();
        assertEquals(4, lines.size(), out);
        assertEquals("through-it held True", lines.get(0));
        assertTrue(lines.get(1).startsWith("through-it free after the close True"), out);
        assertEquals("held-before held True", lines.get(2));
        assertEquals("held-before free after the close True at once", lines.get(3));
    }

    /**
     * The two faults a helper found with fork(2) when read-only descriptors close without FLUSH
     * (mount A), checked from mount B: (1) a child that locks through an inherited read-only
     * descriptor and exits loses its lock although its parent keeps the descriptor open (the
     * kernel sends nothing; the lease renewer sees the process gone: before, the lock stayed until
     * the parent's close, 6 of 6 runs); (2) a parent that locked through a read-only descriptor,
     * closed it while a child kept a copy, and locked again through another descriptor keeps that
     * lock when the child's exit releases the first descriptor (before, the RELEASE unlocked the
     * parent's whole range, 5 of 5 runs).
     */
    @Test
    void forkedChildrenNeitherKeepNorDropTheirParentsLocks() throws Exception {
        Path a = mntA.resolve("forked.dat");
        Files.writeString(a, "x".repeat(100));
        Files.writeString(tmp.resolve("forked.py"), String.join("\n",
                "import errno, fcntl, os, sys, time",
                "a, b = sys.argv[1], sys.argv[2]",
                "fb = os.open(b, os.O_RDWR)",
                "def free():",
                "    try:",
                "        fcntl.lockf(fb, fcntl.LOCK_EX | fcntl.LOCK_NB, 0, 0); fcntl.lockf(fb, fcntl.LOCK_UN, 0, 0); return True",
                "    except OSError as e:",
                "        if e.errno not in (errno.EAGAIN, errno.EACCES): raise",
                "        return False",
                "def free_within(s):",
                "    t = time.time()",
                "    while time.time() - t < s:",
                "        if free(): return True",
                "        time.sleep(0.05)",
                "    return False",
                "fd = os.open(a, os.O_RDONLY)",
                "pid = os.fork()",
                "if pid == 0:",
                "    fcntl.lockf(fd, fcntl.LOCK_SH, 0, 0); os._exit(0)",
                "os.waitpid(pid, 0)",
                "print('dead child\\'s lock freed', free_within(8))",
                "os.close(fd)",
                "fd1 = os.open(a, os.O_RDONLY); fcntl.lockf(fd1, fcntl.LOCK_SH, 0, 0)",
                "r, w = os.pipe()",
                "pid = os.fork()",
                "if pid == 0:",
                "    os.read(r, 1); os._exit(0)",
                "os.close(fd1)",
                "fd2 = os.open(a, os.O_RDWR); fcntl.lockf(fd2, fcntl.LOCK_EX, 0, 0)",
                "os.write(w, b'x'); os.waitpid(pid, 0); time.sleep(1.5)",
                "print('parent\\'s later lock kept', not free())",
                "os.close(fd2)",
                "print('free after the parent\\'s close', free_within(5))", ""));
        String out = Shell.ok(tmp, "python3 forked.py " + a + " " + mntB.resolve("forked.dat"));
        assertEquals(List.of("dead child's lock freed True", "parent's later lock kept True", "free after the parent's close True"),
                out.lines().toList());
    }

    /**
     * Runs Python code that starts with {@code imports}, then holds a POSIX write lock and an
     * exclusive flock on a new file {@code name} of mount A (descriptors {@code fd}, {@code fl};
     * its path is {@code p}), then runs {@code rest}; returns what it printed.
     */
    private static String holdingBothLocks(String name, String imports, String rest) throws Exception {
        Path file = mntA.resolve(name);
        Files.writeString(file, "x");
        return Shell.ok(tmp, "python3 -c \"" + imports
                + "p = sys.argv[1]\n"
                + "fd = os.open(p, os.O_RDWR); fcntl.lockf(fd, fcntl.LOCK_EX)\n"
                + "fl = os.open(p, os.O_RDONLY); fcntl.flock(fl, fcntl.LOCK_EX)\n"
                + rest + "\" " + file);
    }

    /**
     * 40 processes blocked in F_SETLKW and flock(LOCK_EX) on one file, more than the mount's 32
     * serving threads: the mount still answers (a stat, the holder's unlock), and every waiter
     * gets the lock once the holder lets go. Regression: each blocked wait held a serving thread,
     * so with 32 waiters nothing was left to serve the unlock and the whole mount hung, its
     * callers unkillable in D state.
     */
    @Test
    void moreLockWaitersThanServingThreadsLeaveTheMountServing() throws Exception {
        String out = holdingBothLocks("crowded.dat", "import fcntl, os, subprocess, sys, time\n",
                "kids = []\n"
                + "for i in range(40):\n"
                + "    pid = os.fork()\n"
                + "    if pid == 0:\n"
                + "        f = os.open(p, os.O_RDWR)\n"
                + "        fcntl.lockf(f, fcntl.LOCK_EX) if i % 2 == 0 else fcntl.flock(f, fcntl.LOCK_EX)\n"
                + "        os._exit(0)\n"
                + "    kids.append(pid)\n"
                + "time.sleep(2)\n"
                + "print('stat rc', subprocess.run(['timeout', '30', 'stat', '-c', '%s', p], capture_output=True).returncode)\n"
                + "fcntl.lockf(fd, fcntl.LOCK_UN); fcntl.flock(fl, fcntl.LOCK_UN); print('unlocked')\n"
                + "done = sum(1 for k in kids if os.waitpid(k, 0)[1] == 0)\n"
                + "print('waiters done', done)");
        assertEquals(List.of("stat rc 0", "unlocked", "waiters done 40"), out.lines().toList());
    }

    /**
     * A signal ends a blocking lock wait (F_SETLKW, flock without LOCK_NB) as on a local file
     * system: the handler runs after about a second, not when the holder lets go, and the holder
     * keeps its locks. Regression: INTERRUPT was ignored, so a waiter could not be stopped (not by
     * Ctrl-C) until the lock was free.
     */
    @Test
    void aSignalEndsABlockingLockWait() throws Exception {
        String out = holdingBothLocks("waited.dat", "import fcntl, os, signal, sys, time\n",
                "pid = os.fork()\n"
                + "if pid == 0:\n"
                + "    def h(*a): raise TimeoutError()\n"
                + "    signal.signal(signal.SIGALRM, h)\n"
                + "    f = os.open(p, os.O_RDWR)\n"
                + "    for kind in ('fcntl', 'flock'):\n"
                + "        signal.alarm(1); t = time.time()\n"
                + "        try:\n"
                + "            fcntl.lockf(f, fcntl.LOCK_EX) if kind == 'fcntl' else fcntl.flock(f, fcntl.LOCK_EX)\n"
                + "            print(kind, 'granted', flush=True)\n"
                + "        except TimeoutError:\n"
                + "            print(kind, 'interrupted', time.time() - t < 5, flush=True)\n"
                + "    try:\n"
                + "        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB); print('still free')\n"
                + "    except OSError as e:\n"
                + "        print('holder keeps it', e.errno in (11, 13))\n"
                + "    os._exit(0)\n"
                + "t = time.time()\n"
                + "while os.waitpid(pid, os.WNOHANG)[0] == 0 and time.time() - t < 8: time.sleep(0.05)\n"
                + "print('waiter gone before the holder let go', time.time() - t < 8)\n"
                + "fcntl.lockf(fd, fcntl.LOCK_UN); fcntl.flock(fl, fcntl.LOCK_UN)\n"
                + "os.waitpid(pid, 0) if time.time() - t >= 8 else None");
        assertEquals(List.of("fcntl interrupted True", "flock interrupted True", "holder keeps it True", "waiter gone before the holder let go True"),
                out.lines().toList());
    }

    /** A client killed with SIGKILL cannot unlock: its locks go when its lease (3 s here) runs out. */
    @Test
    void locksOfAKilledClientAreReleasedWhenItsLeaseRunsOut() throws Exception {
        Path conf = tmp.resolve("granary.yaml");
        Path mntC = Files.createDirectories(tmp.resolve("c"));
        cfg.client.mount = mntC.toString();
        cfg.save(conf);
        GranaryProcess mount = GranaryProcess.start(tmp, Map.of(), "mount", "-c", conf.toString());
        Process holder = null;
        try {
            assertTrue(mount.awaitLine("granary mounted at", 120), mount.transcript());
            Files.writeString(tmp.resolve("holder.py"), HOLDER);
            Files.writeString(mntA.resolve("dead.dat"), "data");
            holder = new ProcessBuilder("python3", "holder.py", mntC.resolve("dead.dat").toString()).directory(tmp.toFile()).start();
            assertEquals("held", new java.io.BufferedReader(new java.io.InputStreamReader(holder.getInputStream())).readLine());
            String probe = "import errno, fcntl, os, sys, time\n"
                    + "fd = os.open(sys.argv[1], os.O_RDONLY); t0 = time.time()\n"
                    + "while True:\n"
                    + "    try:\n"
                    + "        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); break\n"
                    + "    except OSError as e:\n"
                    + "        if time.time() - t0 > 60: print('still locked after 60 s'); sys.exit(1)\n"
                    + "        time.sleep(0.1)\n"
                    + "print('released after %.1f s' % (time.time() - t0))\n";
            Files.writeString(tmp.resolve("probe.py"), probe);
            String before = Shell.ok(tmp, "python3 -c \"import fcntl, os, sys\n"
                    + "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
                    + "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); print('granted')\n"
                    + "except BlockingIOError: print('held elsewhere')\" " + mntA.resolve("dead.dat"));
            assertEquals("held elsewhere", before.trim());
            mount.kill(); // SIGKILL: the client cannot release anything
            holder.destroyForcibly();
            String after = Shell.ok(tmp, "python3 probe.py " + mntA.resolve("dead.dat")).trim();
            System.out.println("flock of a SIGKILLed client (lease 3 s): " + after);
            assertTrue(after.startsWith("released after"), after);
        } finally {
            if (holder != null) holder.destroyForcibly();
            mount.close();
            MountPoints.unmountLazy(mntC);
        }
    }
}
