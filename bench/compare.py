#!/usr/bin/env python3
"""Side-by-side benchmark (issue 4): Granary vs s3fs-fuse vs rclone mount vs a local directory.

Run through bench/compare.sh (it installs the tools, builds Granary and cleans up on any exit).
One run, one embedded S3 server: `granary quickstart` (S3Proxy, 3 MDS, 2 OSS and the FUSE
mount in one JVM) serves bucket `granary` for Granary, and s3fs and rclone mount their own
buckets on the same S3Proxy. The local directory is on the same disk.

Every size scales with BENCH_SCALE (default 1.0). The workloads, per target, in this order:
  write      sequential write of 2 GiB in 1 MiB writes, fsync at the end (like dd conv=fsync)
  setup      4 files for the parallel readers, 5,000 small files of 100 KiB (8 writer
             threads, reported), the two AU datasets
  metadata   create, stat, readdir, unlink of 10,000 empty files (one thread)
  cold  ->   sequential read (dd bs=1M) cold, then warm (again)
  cold  ->   4 parallel dd readers on 4 files; cold -> fio random 128 KiB reads of half the
             file, then of 1/16 of it; cold -> small
             files read with 8 threads, then again at once (the next epoch, warm)
  cold  ->   PyTorch DataLoader over the small files; the MLPerf-Storage-style AU searches
Each timed step (AU searches aside) runs BENCH_REPEAT times (default 3; 1 below scale 0.25: the
CI smoke) and its figure is the median; each starts once the machine is quiet (wait_quiet).
"cold" = page cache dropped, and for the FUSE targets their own caches emptied: Granary's OSS
read caches dropped (`granary cache drop`, the processes keep running, as issue #4 defines a cold
read), s3fs remounted, rclone remounted with an emptied VFS cache.

Figures go to bench/results/compare-<date>-s<scale>.md (and .png); the Markdown is printed too.
"""
import argparse
import collections
import concurrent.futures
import ctypes
import datetime
import io
import json
import multiprocessing
import os
import platform
import queue
import random
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
import types
import urllib.request

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRANARY = os.path.join(ROOT, "granary")
METHODS = ("GET", "PUT", "HEAD", "POST", "DELETE")

# MLPerf-Storage-style training loops. The "compute time" of a batch is its bytes divided by the
# rate one simulated accelerator consumes; the rates are chosen for this 2-core machine so that
# a local disk sustains several accelerators and a FUSE-over-S3 mount one to a few.
UNET3D = dict(name="unet3d", batch=7, demand=128 * MIB, threads=4, ext=".npz")        # 1.53 s per batch of 7 x 28 MiB
RETINANET = dict(name="retinanet", batch=24, demand=150 * 320 * KIB, threads=4, ext=".bin")  # 0.16 s per batch of 24
RETINANET_BYTES = 320 * KIB
AU_TARGET = 0.90
AU_MAX_ACCELERATORS = 16
WARM_TOLERANCE = 0.10  # warm-up parts repeat until two rounds in a row are within 10% of each other


class Plan:
    """Every size of the run, from BENCH_SCALE."""

    def __init__(self, scale, repeat=None):
        self.scale = scale
        # timed repetitions of each figure (the median is reported): one sample of a step moved
        # 30-60% between runs of this shared 2-core machine (stat 10,612-25,222 ops/s, small
        # files read 588-901 files/s, Granary alone, 2026-12-06)
        self.repeat = repeat if repeat is not None else (3 if scale >= 0.25 else 1)
        self.seq_bytes = max(8, round(2048 * scale)) * MIB           # 2 GiB
        self.par_bytes = max(2, round(512 * scale)) * MIB            # each of the 4 parallel files
        self.small_count = max(40, round(5000 * scale))              # 100 KiB files
        self.small_bytes = 100 * KIB
        self.meta_count = max(100, round(10000 * scale))
        self.unet_count = max(14, round(56 * scale))
        self.unet_bytes = (28 if scale >= 0.25 else max(1, round(112 * scale))) * MIB
        self.retina_count = max(48, round(2400 * scale))
        self.retina_bytes = 320 * KIB
        self.au_steps = max(5, round(8 * scale))                     # batches per accelerator, first one warms up
        self.noop_bytes = max(256 * MIB, self.seq_bytes)
        self.warm_bytes = max(16, round(1024 * scale)) * MIB        # the untimed warm-up file
        self.warm_count = max(50, round(2000 * scale))               # and its small files
        self.warm_samples = max(48, round(800 * scale))              # and its 320 KiB files per round
        self.warm_cold_reads = 6 if scale >= 0.25 else 1             # at least this many cold reads of it
        self.warm_max_rounds = 10 if scale >= 0.25 else 2            # at most this many rounds of a warm-up part
        self.timeout = 600 + 3600 * scale                            # any one step, seconds

    def describe(self):
        return (f"sequential file {self.seq_bytes // MIB} MiB; 4 x {self.par_bytes // MIB} MiB for the parallel readers; "
                f"{self.small_count} x 100 KiB small files; {self.meta_count} files for metadata; "
                f"unet3d-like {self.unet_count} x {self.unet_bytes // MIB} MiB .npz; retinanet-like {self.retina_count} x 320 KiB; "
                f"{self.au_steps} batches per simulated accelerator; each timed figure the median of {self.repeat} repetition(s)")


# ---------------------------------------------------------------------------------------------
# Processes, mounts and caches. Everything started is recorded in the state folder so that
# compare.sh's trap can stop it even if this script dies.

class State:
    """The pids and mount points that compare.sh's exit trap must clean up."""

    def __init__(self, folder):
        self.folder = folder
        self.pids, self.mounts = set(), set()

    def _write(self, name, items):
        tmp = os.path.join(self.folder, name + ".tmp")
        with open(tmp, "w") as f:
            f.writelines(f"{x}\n" for x in sorted(items))
        os.replace(tmp, os.path.join(self.folder, name))

    def add_pid(self, pid):
        self.pids.add(pid)
        self._write("pids", self.pids)

    def drop_pid(self, pid):
        self.pids.discard(pid)
        self._write("pids", self.pids)

    def add_mount(self, path):
        self.mounts.add(path)
        self._write("mounts", self.mounts)


def jit_cpu_seconds(pid):
    """CPU seconds (user + system) that the JIT compiler threads of process `pid` have used so far
    (threads named "C1 CompilerThre..." / "C2 CompilerThre..." in /proc/PID/task/*/comm, HotSpot's
    names); None for no pid or a process that is not a HotSpot JVM."""
    if not pid:
        return None
    total, found = 0, False
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if "CompilerThre" not in f.read():
                    continue
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
            found = True
        except (OSError, IndexError, ValueError):
            continue  # the thread ended meanwhile
    return total / os.sysconf("SC_CLK_TCK") if found else None


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def cpu_busy(seconds):
    """Share of the machine's CPU time (all cores) that was not idle over the next `seconds`
    (/proc/stat; time waiting on disk counts as busy: a compaction or writeback still runs)."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v[:8]), v[3]  # user..steal; idle
    t0, i0 = sample()
    time.sleep(seconds)
    t1, i1 = sample()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


QUIET_BUSY = 0.10   # a step starts once the machine is at most this busy over one QUIET_SAMPLE
QUIET_SAMPLE = 0.5  # seconds
QUIET_MAX = 30.0    # seconds waited at most


def wait_quiet():
    """Writes back dirty pages (sync), then waits until the machine is quiet (at most QUIET_BUSY
    busy over QUIET_SAMPLE s), at most QUIET_MAX s; returns the seconds waited, the sync included.
    Work a step leaves running (compactions, uploads, JIT, writeback) then does not land in the
    next step's figure. The sync is for the writeback the kernel defers: the S3 server's files of a
    1 GiB write stay dirty for up to 30 s (vm.dirty_expire_centisecs) without any CPU to show, and
    their writeback landed in the next repetition (Granary's writes: 273, 95.7, 125 MiB/s in the
    run at ed54baa). Same rule for every target."""
    t0 = time.perf_counter()
    os.sync()
    while time.perf_counter() - t0 < QUIET_MAX:
        if cpu_busy(QUIET_SAMPLE) <= QUIET_BUSY:
            break
    return time.perf_counter() - t0


def drop_caches():
    """Writes dirty pages and drops the page cache, dentries and inodes."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def mount_type(path):
    """The filesystem type mounted exactly at path (topmost), or None."""
    found = None
    with open("/proc/mounts") as f:
        for line in f:
            fields = line.split()
            mp = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])
            if mp == path:
                found = fields[2]
    return found


def unmount(path):
    if mount_type(path):
        subprocess.run(["fusermount", "-u", "-z", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def check_unmounted(path):
    """Raises when something is still mounted at path (a new mount would hide behind or over it)."""
    if mount_type(path):
        raise RuntimeError(f"{path} is still mounted ({mount_type(path)})")


def peak_rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def env_without_ca():
    """The environment without AWS_CA_BUNDLE: rclone refuses to start with it against plain HTTP."""
    env = dict(os.environ)
    env.pop("AWS_CA_BUNDLE", None)
    return env


def free_port_block(ports_from_base):
    """A base port (27000, 27200, ...) whose derived ports are all free on 127.0.0.1."""
    for base in range(27000, 40000, 200):
        ok = True
        for p in ports_from_base(base):
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free block of ports between 27000 and 40000")


class Daemon:
    """A background process (own session) with its log file, stopped by SIGTERM then SIGKILL."""

    def __init__(self, state, cmd, logpath, env=None):
        self.state, self.logpath = state, logpath
        self.logfile = open(logpath, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self.logfile, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=env, start_new_session=True)
        state.add_pid(self.proc.pid)

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def log_tail(self, n=15):
        try:
            with open(self.logpath, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def wait_mounted(self, path, fstype, timeout=180):
        deadline = time.time() + timeout
        while time.time() < deadline:
            t = mount_type(path)
            if t and t.startswith(fstype):
                return
            if not self.alive():
                raise RuntimeError(f"{path}: process exited ({self.proc.returncode}) before mounting:\n{self.log_tail()}")
            time.sleep(0.1)
        raise RuntimeError(f"{path}: not mounted within {timeout} s:\n{self.log_tail()}")

    def stop(self, timeout=60, signum=signal.SIGTERM):
        if self.alive():
            self.proc.send_signal(signum)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.state.drop_pid(self.proc.pid)
        self.logfile.close()


# ---------------------------------------------------------------------------------------------
# Counting S3 requests at the server: an iptables chain on the loopback traffic to S3Proxy's
# port, one rule per (method, bucket) matching the request line "GET /bucket" near the start
# of a packet (path-style requests). Cheap (in the kernel), and the same for every client.

class S3Counter:
    """Per-bucket S3 request counts seen on the way to the S3 port, or unavailable (with why)."""

    def __init__(self, state, port, buckets):
        self.port, self.buckets = port, buckets
        self.chain = f"GRBENCH{os.getpid()}"
        self.reason = None
        try:
            self._ipt("-N", self.chain)
            with open(os.path.join(state.folder, "iptables"), "w") as f:
                f.write(f"{self.chain} {port}\n")
            self._ipt("-I", "OUTPUT", "-o", "lo", "-p", "tcp", "--dport", str(port), "-j", self.chain)
            for m in METHODS:
                for b in buckets:
                    self._ipt("-A", self.chain, "-m", "string", "--algo", "bm", "--to", "160",
                              "--string", f"{m} /{b}", "-m", "comment", "--comment", f"{m} {b}")
        except (OSError, subprocess.CalledProcessError) as e:
            self.reason = f"iptables string match unavailable ({e})"

    @staticmethod
    def _ipt(*args):
        return subprocess.run(["iptables", "-w", *args], check=True, capture_output=True, text=True).stdout

    def snapshot(self):
        """{(method, bucket): packets} so far, or None when counting is unavailable."""
        if self.reason:
            return None
        out = self._ipt("-L", self.chain, "-v", "-n", "-x")
        counts = {}
        for line in out.splitlines():
            m = re.match(r"\s*(\d+)\s+\d+.*/\* (\w+) (\S+) \*/", line)
            if m:
                counts[(m.group(2), m.group(3))] = int(m.group(1))
        return counts

    def close(self):
        if self.reason:
            return
        for args in (("-D", "OUTPUT", "-o", "lo", "-p", "tcp", "--dport", str(self.port), "-j", self.chain),
                     ("-F", self.chain), ("-X", self.chain)):
            try:
                self._ipt(*args)
            except subprocess.CalledProcessError:
                pass


# ---------------------------------------------------------------------------------------------
# The four targets.

class Target:
    """A place to run the workloads: its folder, bucket, serving process, and how to make it cold."""
    name = label = ""
    bucket = None
    daemon = None

    def __init__(self, work, state):
        self.work, self.state = work, state
        self.peak_rss = 0
        self.root = None
        self.uploads_seen = lambda: 0  # S3 PUT/POST/DELETE requests to this target's bucket so far

    def start(self):
        pass

    def stop(self):
        self.sample_rss()

    def settle(self, uploads_before=None):
        """Returns once data written so far is in the bucket (only rclone uploads after close), with
        the time.perf_counter() at which the last upload finished. uploads_before: the target's
        upload count (uploads_seen) before the data was written, when that data must cause at least
        one upload."""
        return time.perf_counter()

    def cold(self):
        self.settle()
        self.stop()
        drop_caches()
        self.start()
        drop_caches()

    def daemon_pid(self):
        """The pid of the process serving the mount while it runs, else None."""
        return self.daemon.pid if self.daemon and self.daemon.alive() else None

    def sample_rss(self):
        pid = self.daemon_pid()
        if pid:
            self.peak_rss = max(self.peak_rss, peak_rss_kib(pid))


class LocalTarget(Target):
    name, label = "local", "local dir"

    def __init__(self, work, state):
        super().__init__(work, state)
        self.root = os.path.join(work, "local")

    def start(self):
        os.makedirs(self.root, exist_ok=True)

    def cold(self):
        drop_caches()


class GranaryTarget(Target):
    """`granary quickstart --dataset none`: S3Proxy, 3 MDS, 2 OSS and the FUSE mount in one JVM."""
    name, label, bucket = "granary", "Granary", "granary"

    def __init__(self, work, state, base_port):
        super().__init__(work, state)
        self.data = os.path.join(work, "granary-data")
        self.root = os.path.join(work, "granary-mnt")
        self.base_port = base_port
        os.makedirs(self.root, exist_ok=True)
        state.add_mount(self.root)

    def start(self):
        if self.daemon and self.daemon.alive():
            return  # already serving (it is started first: its S3 server is everyone's)
        check_unmounted(self.root)
        self.daemon = Daemon(self.state, [GRANARY, "quickstart", "--dataset", "none", "--data", self.data,
                                          "--mount", self.root, "--base-port", str(self.base_port)],
                             os.path.join(self.work, "granary.log"))
        self.daemon.wait_mounted(self.root, "fuse.granary")

    def stop(self):
        if self.daemon:
            self.sample_rss()
            self.daemon.stop(timeout=90)
            unmount(self.root)

    def cold(self):
        """Empties the OSS read caches (granary cache drop) and the page cache; no restart."""
        self.settle()
        subprocess.run([GRANARY, "cache", "drop", "-c", os.path.join(self.data, "granary.yaml")], check=True,
                       stdout=subprocess.DEVNULL)
        drop_caches()
        self.sample_rss()

    def s3_config(self):
        """(port, access key, secret key) of the embedded S3 server, from the generated config."""
        text = open(os.path.join(self.data, "granary.yaml")).read()
        get = lambda k: re.search(rf'^\s*{k}:\s*"?([^"\n]+)"?', text, re.M).group(1)
        return int(get("embedded_port")), get("access_key"), get("secret_key")


class S3fsTarget(Target):
    name, label, bucket = "s3fs", "s3fs", "bench-s3fs"

    def __init__(self, work, state, s3):
        super().__init__(work, state)
        self.port, key, secret = s3
        self.root = os.path.join(work, "s3fs-mnt")
        self.passwd = os.path.join(work, "s3fs.passwd")
        with open(self.passwd, "w") as f:
            f.write(f"{key}:{secret}\n")
        os.chmod(self.passwd, 0o600)
        os.makedirs(self.root, exist_ok=True)
        state.add_mount(self.root)

    def start(self):
        check_unmounted(self.root)
        opts = f"passwd_file={self.passwd},use_path_request_style,url=http://127.0.0.1:{self.port},allow_other"
        self.daemon = Daemon(self.state, ["s3fs", self.bucket, self.root, "-f", "-o", opts],
                             os.path.join(self.work, "s3fs.log"), env=env_without_ca())
        self.daemon.wait_mounted(self.root, "fuse.s3fs", timeout=30)

    def stop(self):
        if self.daemon:
            self.sample_rss()
            unmount(self.root)
            self.daemon.stop(timeout=30)


class RcloneTarget(Target):
    name, label, bucket = "rclone", "rclone mount", "bench-rclone"

    def __init__(self, work, state, s3, rc_port, cache_mode):
        super().__init__(work, state)
        self.port, key, secret = s3
        self.rc_port, self.cache_mode = rc_port, cache_mode
        self.root = os.path.join(work, "rclone-mnt")
        self.cache = os.path.join(work, "rclone-cache")
        self.config = os.path.join(work, "rclone.conf")
        with open(self.config, "w") as f:
            f.write(f"[s3]\ntype = s3\nprovider = Other\naccess_key_id = {key}\nsecret_access_key = {secret}\n"
                    f"endpoint = http://127.0.0.1:{self.port}\nregion = us-east-1\nforce_path_style = true\n")
        os.makedirs(self.root, exist_ok=True)
        state.add_mount(self.root)

    def start(self):
        check_unmounted(self.root)
        cmd = ["rclone", "mount", f"s3:{self.bucket}", self.root, "--config", self.config,
               "--vfs-cache-mode", self.cache_mode, "--vfs-write-back", "0s", "--cache-dir", self.cache,
               "--allow-other", "--rc", "--rc-addr", f"127.0.0.1:{self.rc_port}", "--rc-no-auth"]
        self.daemon = Daemon(self.state, cmd, os.path.join(self.work, "rclone.log"), env=env_without_ca())
        self.daemon.wait_mounted(self.root, "fuse.rclone", timeout=30)

    def settle(self, uploads_before=None, timeout=1800, quiet=2.0):
        """Waits until rclone reports no upload queued or in progress and its bucket has seen no
        PUT/POST/DELETE for `quiet` seconds (a closed file reaches rclone's upload queue only when
        the kernel's asynchronous FUSE release arrives), and, with uploads_before, until the bucket
        has seen more uploads than that: on a busy machine the release (and so the upload) came
        more than `quiet` after close, and the sequential write was timed as in the bucket before its
        first PUT (692 MiB/s "until in the bucket", 2026-12-05). Returns when the last upload was seen."""
        start = last = time.perf_counter()
        if not (self.daemon and self.daemon.alive()):
            return start
        seen = self.uploads_seen()
        while True:
            req = urllib.request.Request(f"http://127.0.0.1:{self.rc_port}/vfs/stats", data=b"{}",
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as r:
                disk = json.load(r).get("diskCache", {})
            now_seen = self.uploads_seen()
            now = time.perf_counter()
            if disk.get("uploadsInProgress", 0) or disk.get("uploadsQueued", 0) or now_seen != seen:
                last, seen = now, now_seen
            if now - last >= quiet and (uploads_before is None or now_seen > uploads_before):
                return last
            if now - start > timeout:
                raise RuntimeError("rclone uploads did not finish")
            time.sleep(0.1)

    def stop(self):
        if self.daemon:
            self.sample_rss()
            unmount(self.root)
            self.daemon.stop(timeout=60)

    def cold(self):
        self.settle()
        self.stop()
        shutil.rmtree(self.cache, ignore_errors=True)
        drop_caches()
        self.start()
        drop_caches()


# ---------------------------------------------------------------------------------------------
# The workloads. Each returns {row: value}; a raised exception marks its rows "fails".

def random_chunk(n, seed):
    return bytearray(random.Random(seed).randbytes(n))


def write_file(path, size, chunk, fsync=True):
    """Writes size bytes in len(chunk) writes (each chunk stamped with its index), then fsync."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        done, i = 0, 0
        while done < size:
            struct.pack_into("<Q", chunk, 0, i)
            n = os.write(fd, memoryview(chunk)[:min(len(chunk), size - done)])
            done, i = done + n, i + 1
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def until_settled(round_fn, min_rounds, max_rounds, tolerance=WARM_TOLERANCE):
    """Runs round_fn (which returns a rate) until two rounds in a row are within `tolerance` of each
    other (relative to the larger), at least min_rounds and at most max_rounds times; returns the
    rates. A JIT-compiled filesystem speeds up over several rounds; one that is not settles at once."""
    rates = []
    while len(rates) < max_rounds:
        rates.append(round_fn())
        if len(rates) >= max(min_rounds, 2):
            a, b = rates[-2], rates[-1]
            if abs(a - b) <= tolerance * max(a, b):
                break
    return rates


def warm_up(target, plan):
    """Untimed, the same on every target: a file written with fsync and read cold (caches emptied
    before each read) until two reads in a row agree, and once warm, then read at random (128 KiB,
    cold) until two rounds agree, and small files written until two rounds agree, read (from caches, then cold until two
    rounds agree), stat'ed, listed and unlinked, then new files of 320 KiB each round read cold until two rounds agree,
    then the metadata phases in rounds until create,
    stat and unlink each agree with the round before (at most 6), so that each filesystem is measured as it runs on a
    node that has been up for a while (Granary's JVMs have compiled their hot paths; peers have
    their connections open). Everything it writes is removed. Returns the rate of every round
    (warm_rounds), which the report prints. Why rounds until settled: the JIT compiles the cold
    path over several GiB: in one quickstart, successive cold 1 GiB reads went 98, 174, 238, 241,
    286, 290, 306, 352, 345, 348, 358, 385 MiB/s; and rounds of 1,500 small files written went
    109, 207, 170, 273, 288 files/s (on 2026-12-05, 8 threads, C2 compiling 3 CPU-s in the first
    rounds), so one fixed round of 1,000 left the timed step inside the ramp."""
    d = os.path.join(target.root, "warmup")
    os.makedirs(d)
    big = os.path.join(d, "big")
    write_file(big, plan.warm_bytes, random_chunk(MIB, 9))
    rounds = {}

    def read_big():
        t0 = time.perf_counter()
        with open(big, "rb") as f:
            while f.read(MIB):
                pass
        return plan.warm_bytes / MIB / (time.perf_counter() - t0)

    def cold_read_big():
        target.cold()
        return read_big()
    rounds["sequential read cold, MiB/s"] = until_settled(cold_read_big, plan.warm_cold_reads, plan.warm_max_rounds)
    read_big()
    # Random 128 KiB reads, cold, as the random-read step makes them (4 threads, each over its own
    # quarter, half of its blocks), until two rounds agree: they take other paths than sequential
    # reads (partial blocks, direct ranged GETs). One quickstart, successive cold runs of the
    # random-read step: 493, 778, 833, 969 IOPS, the JIT compiling about 2 CPU-s per run; on
    # 2026-12-05, fio over 1 GiB files: 635, 832, 1,330, 1,413, 1,510 IOPS, where one round of the
    # warm-up left the timed step at 989 (s3fs 1,408).
    quarter = plan.warm_bytes // 4 // (128 * KIB)
    random_rounds = [0]

    def random_round():  # other blocks each round (caches are emptied anyway)
        target.cold()
        seed = random_rounds[0]
        random_rounds[0] += 1

        def random_reads(q):
            fd = os.open(big, os.O_RDONLY)
            try:
                for b in random.Random(1000 * seed + q).sample(range(quarter), quarter // 2):
                    os.pread(fd, 128 * KIB, (q * quarter + b) * 128 * KIB)
            finally:
                os.close(fd)
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(random_reads, range(4)))
        return 4 * (quarter // 2) / (time.perf_counter() - t0)
    rounds["random 128 KiB reads cold, IOPS"] = until_settled(random_round, 3, plan.warm_max_rounds)
    paths = [os.path.join(d, f"s{i:05d}") for i in range(plan.warm_count)]

    def write_round():  # into an empty folder each time; the last round's files stay for the reads below
        for p in paths:
            if os.path.exists(p):
                os.unlink(p)
        return write_many(paths, 100 * KIB, random_chunk(100 * KIB, 10), 8)
    rounds["small files written, files/s"] = until_settled(write_round, 2, plan.warm_max_rounds)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: (os.stat(p), open(p, "rb").read()), paths))

    # Read cold until two rounds agree, as the small-file step reads them (8 threads, caches
    # emptied): the reads above come from caches, and the cold path (for Granary, the MDS's inline
    # reads) was left to the timed step. One quickstart, successive cold reads of 5,000 files: 652,
    # 1,106, 1,370 files/s (again: 671, 1,000, 1,152).
    def cold_small_round():
        target.cold()
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda p: open(p, "rb").read(), paths))
        return len(paths) / (time.perf_counter() - t0)
    rounds["small files read cold, files/s"] = until_settled(cold_small_round, 3, plan.warm_max_rounds)
    for _ in range(3):
        if len(os.listdir(d)) != len(paths) + 1:
            raise RuntimeError("warm-up: readdir listed the wrong number of files")
    for p in paths + [big]:
        os.unlink(p)

    # Files of 320 KiB (the retinanet-like AU samples: above Granary's inline size), new ones each
    # round, written, then read whole cold with 16 threads, until two rounds agree: a first read of
    # such a file takes other paths than the small files above (for Granary, the OSS's locate, a
    # URL signed, a direct ranged GET), and the AU step compiled them while timed (Granary's JIT
    # 1.2 CPU-s in the retinanet-like AU step of the run at f0d8b94, 0.0-0.2 in the read steps).
    sample_chunk = random_chunk(320 * KIB, 11)
    sample_rounds = [0]

    def cold_sample_round():
        sd = os.path.join(d, f"samples{sample_rounds[0]}")
        sample_rounds[0] += 1
        os.mkdir(sd)
        names = [os.path.join(sd, f"x{i:05d}.bin") for i in range(plan.warm_samples)]
        write_many(names, 320 * KIB, sample_chunk, 8)
        target.cold()
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            got = sum(pool.map(read_sample, names))
        rate = len(names) / (time.perf_counter() - t0)
        if got != len(names) * 320 * KIB:
            raise RuntimeError(f"warm-up: read {got} bytes of {len(names)} files of 320 KiB")
        for p in names:
            os.unlink(p)
        os.rmdir(sd)
        return rate
    rounds["files of 320 KiB read cold, new ones each round, files/s"] = until_settled(cold_sample_round, 2, plan.warm_max_rounds)
    # The metadata phases as the timed steps run them (caches dropped before each), on other names
    # and as many files, in rounds until create, stat and unlink each agree with the round before:
    # a JVM compiles a path after thousands of calls. One round left Granary's stat path inside its
    # ramp (one quickstart, 2026-12-06, rounds of 5,000: stat 8,171, 11,295, 16,044, 19,188/s;
    # create 423, 723, 1,542, 1,658/s); and 3 listings of the small files left its readdir and stat
    # paths interpreted (readdir of 5,000 names 26-35 ms before, 8-9 ms once compiled).
    meta_rounds = {k: [] for k in ("create", "stat", "readdir", "unlink")}

    def meta_round():
        md = os.path.join(d, f"meta{len(meta_rounds['create'])}")
        os.mkdir(md)
        names = [os.path.join(md, f"w{i:06d}") for i in range(plan.meta_count)]
        for phase in meta_rounds:
            drop_caches()
            t0 = time.perf_counter()
            if phase == "create":
                for p in names:
                    os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            elif phase == "stat":
                for p in names:
                    os.stat(p)
            elif phase == "readdir":
                for _ in range(3):
                    if len(os.listdir(md)) != len(names):
                        raise RuntimeError("warm-up: readdir listed the wrong number of files")
            else:
                for p in names:
                    os.unlink(p)
                os.rmdir(md)
            meta_rounds[phase].append(len(names) * (3 if phase == "readdir" else 1) / (time.perf_counter() - t0))

    def settled(rates):
        a, b = rates[-2], rates[-1]
        return abs(a - b) <= WARM_TOLERANCE * max(a, b)
    while len(meta_rounds["create"]) < min(plan.warm_max_rounds, 6):  # a peer's round of creates can take 30 s
        meta_round()
        if len(meta_rounds["create"]) >= 2 and all(settled(meta_rounds[k]) for k in ("create", "stat", "unlink")):
            break
    for k, v in meta_rounds.items():
        rounds[f"metadata {k}, {'entries' if k == 'readdir' else 'ops'}/s"] = v
    os.rmdir(d)
    return {"warm_rounds": rounds}


def seq_write(target, plan):
    path = os.path.join(target.root, "seq.dat")
    uploads_before = target.uploads_seen()
    t0 = time.perf_counter()
    write_file(path, plan.seq_bytes, random_chunk(MIB, 1))
    t1 = time.perf_counter()
    t2 = max(t1, target.settle(uploads_before))
    mib = plan.seq_bytes / MIB
    return {"write": mib / (t1 - t0), "write_s3": None if target.name == "local" else mib / (t2 - t0)}


def write_many(paths, size, chunk, threads):
    """Writes one file per path (whole, no fsync) with a pool of threads; returns files/s."""
    def one(i_path):
        i, p = i_path
        buf = bytearray(chunk[:size])
        struct.pack_into("<Q", buf, 0, i)
        with open(p, "wb") as f:
            f.write(buf)
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, enumerate(paths)))
    return len(paths) / (time.perf_counter() - t0)


def npz_sample(nbytes):
    import numpy as np
    buf = io.BytesIO()
    np.savez(buf, x=np.random.default_rng(7).standard_normal(nbytes // 4, dtype=np.float32))
    return bytearray(buf.getvalue())


def setup_files(target, plan):
    """The files the read workloads need; reports the small-file write rate."""
    r = target.root
    chunk = random_chunk(MIB, 2)
    for i in range(4):
        write_file(os.path.join(r, f"par{i}.dat"), plan.par_bytes, chunk, fsync=False)
    os.makedirs(os.path.join(r, "small"))
    small = [os.path.join(r, "small", f"f{i:06d}") for i in range(plan.small_count)]
    rate = write_many(small, plan.small_bytes, random_chunk(plan.small_bytes, 3), 8)
    for spec, count, data in ((UNET3D, plan.unet_count, npz_sample(plan.unet_bytes)),
                              (RETINANET, plan.retina_count, random_chunk(plan.retina_bytes, 4))):
        d = os.path.join(r, spec["name"])
        os.makedirs(d)
        write_many([os.path.join(d, f"s{i:05d}{spec['ext']}") for i in range(count)], len(data), data, 4)
    return {"small_write": rate}


def small_write_again(target, plan, i):
    """Another repetition of the small-file write: as many files into a new folder (small-w{i}),
    removed after the timed writes; returns files/s."""
    d = os.path.join(target.root, f"small-w{i}")
    os.makedirs(d)
    rate = write_many([os.path.join(d, f"f{k:06d}") for k in range(plan.small_count)], plan.small_bytes,
                      random_chunk(plan.small_bytes, 3), 8)
    shutil.rmtree(d)
    return {"small_write": rate}


def metadata(target, plan, phase):
    """One metadata phase over plan.meta_count empty files in meta/: create, stat, readdir, unlink."""
    d = os.path.join(target.root, "meta")
    names = [os.path.join(d, f"m{i:06d}") for i in range(plan.meta_count)]
    if phase == "create":
        os.mkdir(d)
    t0 = time.perf_counter()
    if phase == "create":
        for p in names:
            os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        n = len(names)
    elif phase == "stat":
        for p in names:
            os.stat(p)
        n = len(names)
    elif phase == "readdir":
        n = len(os.listdir(d))
        if n != len(names):
            raise RuntimeError(f"readdir listed {n} of {len(names)} files")
    else:
        for p in names:
            os.unlink(p)
        os.rmdir(d)  # timed: it waits for removals a filesystem deferred (Granary's deferred unlinks)
        n = len(names)
    rate = n / (time.perf_counter() - t0)
    return {f"meta_{phase}": rate}


def dd_read(path, timeout):
    """Reads path with dd bs=1M; returns MiB/s."""
    size = os.path.getsize(path)
    t0 = time.perf_counter()
    subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=1M"], check=True, capture_output=True, timeout=timeout)
    return size / MIB / (time.perf_counter() - t0)


def resident_percent(path):
    """Share of path's pages in the kernel page cache (util-linux fincore, mincore(2)), or None if unknown."""
    try:
        p = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path],
                           capture_output=True, text=True, timeout=60)
        size = os.path.getsize(path)
        return 100.0 * int(p.stdout.split()[0]) / size if p.returncode == 0 and size > 0 else None
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def seq_read(target, plan, which):
    path = os.path.join(target.root, "seq.dat")
    # This VM's kernel runs DAMON with a pageout scheme that evicts page-cache pages it takes for
    # cold within seconds (a plain ext4 file loses them too): how much of the file the page cache
    # still holds when the warm read starts is recorded next to its figure.
    resident = resident_percent(path) if which == "warm" else None
    out = {f"read_{which}": dd_read(path, plan.timeout)}
    if resident is not None:
        out["warm_resident"] = resident
    return out


def parallel_read(target, plan):
    paths = [os.path.join(target.root, f"par{i}.dat") for i in range(4)]
    total = sum(os.path.getsize(p) for p in paths)
    t0 = time.perf_counter()
    procs = [subprocess.Popen(["dd", f"if={p}", "of=/dev/null", "bs=1M"], stderr=subprocess.PIPE) for p in paths]
    for p in procs:
        _, err = p.communicate(timeout=plan.timeout)
        if p.returncode != 0:
            raise RuntimeError(f"dd failed: {err.decode(errors='replace').strip()}")
    return {"par4": total / MIB / (time.perf_counter() - t0)}


def random_read(target, plan, work, share=2):
    """fio randread, 128 KiB, 4 jobs each over its own quarter of the sequential file (no repeats),
    each reading 1/share of its quarter's 128 KiB pieces: share 2 (half of the file, the row
    issue 4 names) or 16 (a sparse reader: 1/16 of the file, the same number of reads per stripe
    as a job reading one 128 KiB sample in 16 of a shard). Returns rand[share]_iops/_mib (no
    suffix for 2)."""
    path = os.path.join(target.root, "seq.dat")
    region = (os.path.getsize(path) // 4) // (128 * KIB) * (128 * KIB)
    out = os.path.join(work, f"fio-{target.name}.json")
    cmd = ["fio", "--name=randread", f"--filename={path}", "--rw=randread", "--bs=128k", "--ioengine=psync",
           "--numjobs=4", f"--size={region}", f"--offset_increment={region}",
           f"--io_size={max(region // share // (128 * KIB) * (128 * KIB), 128 * KIB)}",
           f"--runtime={max(5, round(60 * plan.scale))}", "--group_reporting", "--output-format=json", f"--output={out}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=plan.timeout)
    if p.returncode != 0:
        raise RuntimeError(f"fio: {(p.stderr or p.stdout).strip()[-300:]}")
    job = json.load(open(out))["jobs"][0]
    if job.get("error"):
        raise RuntimeError(f"fio error {job['error']}")
    key = "rand" if share == 2 else f"rand{share}"
    return {f"{key}_iops": job["read"]["iops"], f"{key}_mib": job["read"]["bw_bytes"] / MIB}


def read_whole(paths, size, what):
    """files/s reading each of paths whole (open, read, close) with 8 threads, as a DataLoader's
    workers read samples; RuntimeError unless every file held size bytes."""
    def one(p):
        with open(p, "rb") as f:
            return len(f.read())
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        got = sum(pool.map(one, paths))
    rate = len(paths) / (time.perf_counter() - t0)
    if got != len(paths) * size:
        raise RuntimeError(f"{what}: read {got} bytes, expected {len(paths) * size}")
    return rate


def small_read(target, plan, key="small_read"):
    """The small files read whole with 8 threads (read_whole), as figure {key: files/s}."""
    d = os.path.join(target.root, "small")
    paths = [os.path.join(d, n) for n in sorted(os.listdir(d))]
    return {key: read_whole(paths, plan.small_bytes, "small files")}


def dataloader(target, plan, python, info):
    p = subprocess.run([python, os.path.join(ROOT, "bench", "compare_loader.py"), os.path.join(target.root, "small"),
                        "--workers", "4"], capture_output=True, text=True, timeout=plan.timeout)
    if p.returncode != 0:
        raise RuntimeError(f"DataLoader: {p.stderr.strip()[-300:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    info["torch"] = r["torch"]
    return {"loader": r["samples_per_s"]}


# MLPerf-Storage-style accelerator utilisation.

def read_sample(path):
    """Reads one sample whole (no decoding), then drops it from the page cache (a dataset far
    larger than RAM, as MLPerf Storage requires, never comes from the page cache)."""
    with open(path, "rb") as f:
        n = len(f.read())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return n


def accelerator(files, spec, compute_s, steps, seed, results):
    """One simulated accelerator: reader threads prefetch up to 2 batches while the loop 'computes'
    (sleeps compute_s) per batch. AU = compute time / wall time, timed from the first batch."""
    rng = random.Random(seed)
    order = files[:]
    rng.shuffle(order)
    batches = queue.Queue(maxsize=2)
    pool = concurrent.futures.ThreadPoolExecutor(spec["threads"])

    def loader():
        try:
            for s in range(steps):
                names = [order[(s * spec["batch"] + j) % len(order)] for j in range(spec["batch"])]
                batches.put(sum(pool.map(read_sample, names)))
        except Exception as e:  # reported by the training loop
            batches.put(e)
    threading.Thread(target=loader, daemon=True).start()
    t_first = None
    try:
        for _ in range(steps):
            b = batches.get()
            if isinstance(b, Exception):
                raise b
            if t_first is None:
                t_first = time.perf_counter()
            time.sleep(compute_s)
        results.put(("ok", steps * compute_s / (time.perf_counter() - t_first)))
    except Exception as e:
        results.put(("error", repr(e)))
    finally:
        pool.shutdown(wait=False)


def au_run(files, spec, compute_s, steps, n, timeout):
    """Mean AU of n accelerators running together (separate processes)."""
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    procs = [ctx.Process(target=accelerator, args=(files, spec, compute_s, steps, 1000 * n + i, results)) for i in range(n)]
    for p in procs:
        p.start()
    got = []
    try:
        for _ in procs:
            got.append(results.get(timeout=timeout))
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
    errors = [m for kind, m in got if kind == "error"]
    if errors:
        raise RuntimeError(errors[0])
    return sum(au for _, au in got) / n


def au_search(target, plan, spec, nbytes):
    """Most accelerators with AU >= 90% among 1, 2, 4, 8, 16 (page cache dropped before each N)."""
    d = os.path.join(target.root, spec["name"])
    files = [os.path.join(d, n) for n in sorted(os.listdir(d))]
    compute_s = spec["batch"] * nbytes / spec["demand"]
    best, trail, n = 0, [], 1
    while n <= AU_MAX_ACCELERATORS:
        drop_caches()
        au = au_run(files, spec, compute_s, plan.au_steps, n, plan.timeout)
        trail.append(f"{n}: {au:.0%}")
        log(f"  {target.name} AU {spec['name']} with {n} accelerators: {au:.1%}")
        if au < AU_TARGET:
            break
        best, n = n, n * 2
    capped = best == AU_MAX_ACCELERATORS
    return {f"au_{spec['name']}": best, f"au_{spec['name']}_trail": ("≥" if capped else "") + f"{best} ({', '.join(trail)})"}


# ---------------------------------------------------------------------------------------------
# Running a target, the no-op FUSE ceiling, and the report.

ROWS = [  # id, label, unit
    ("write", "sequential write {seq}, 1 MiB writes + fsync", "MiB/s"),
    ("write_s3", "sequential write, until the data is in the bucket ¹", "MiB/s"),
    ("read_cold", "sequential read, cold (dd bs=1M)", "MiB/s"),
    ("read_warm", "sequential read, warm (read again)", "MiB/s"),
    ("par4", "4 parallel readers on 4 files, cold", "MiB/s"),
    ("rand_iops", "random 128 KiB reads of half the file (fio, 4 jobs), cold", "IOPS"),
    ("rand_mib", "random 128 KiB reads of half the file, cold", "MiB/s"),
    ("rand16_iops", "random 128 KiB reads of 1/16 of the file (fio, 4 jobs), cold", "IOPS"),
    ("small_write", "small files written ({small} x 100 KiB, 8 threads)", "files/s"),
    ("small_read", "small files read ({small} x 100 KiB, 8 threads), cold", "files/s"),
    ("small_read_warm", "small files read again right after (next epoch, warm)", "files/s"),
    ("meta_create", "metadata: create ({meta} empty files, 1 thread)", "ops/s"),
    ("meta_stat", "metadata: stat", "ops/s"),
    ("meta_readdir", "metadata: readdir", "entries/s"),
    ("meta_unlink", "metadata: unlink", "ops/s"),
    ("loader", "PyTorch DataLoader over the small files (4 workers), cold", "samples/s"),
    ("au_unet3d", "AU ≥ 90%: unet3d-like (batch 7 x {unet} MiB .npz) ²", "accelerators"),
    ("au_retinanet", "AU ≥ 90%: retinanet-like (batch 24 x 320 KiB) ²", "accelerators"),
    ("rss", "peak RSS of the process serving the mount ³", "MiB"),
    ("rss_client", "peak RSS of Granary's client alone (`granary mount`, reads again) ⁴", "MiB"),
]
NOOP_ROWS = [
    ("noop_cold", "FUSE ceiling: no-op jnr-fuse fs, Granary's options, dd read cold", "MiB/s"),
    ("noop_again", "FUSE ceiling: same, read again (Granary's options keep no page cache)", "MiB/s"),
    ("noop_cached", "FUSE ceiling: no-op fs with -o kernel_cache, read again (page cache)", "MiB/s"),
    ("noop_stat", "FUSE ceiling: no-op fs, stat of {meta} names (caches dropped, 3rd of 3 rounds)", "ops/s"),
    ("noopd_cold", "FUSE ceiling, Granary's /dev/fuse binding (kernel protocol from Java, no libfuse): dd read cold", "MiB/s"),
    ("noopd_again", "FUSE ceiling, /dev/fuse binding: read again (no page cache kept)", "MiB/s"),
    ("noopd_stat", "FUSE ceiling, /dev/fuse binding: stat of {meta} names (as above)", "ops/s"),
    ("noopd_small", "FUSE ceiling, /dev/fuse binding: {small} files of 100 KiB read with 8 threads (caches dropped, 3rd of 3 rounds)", "files/s"),
    ("noop3_cold", "FUSE ceiling, libfuse3 low-level via Java FFM (bench/fuse3): dd read cold", "MiB/s"),
    ("noop3_again", "FUSE ceiling, libfuse3 via FFM: read again (no page cache kept)", "MiB/s"),
    ("noop3_stat", "FUSE ceiling, libfuse3 via FFM: stat of {meta} names (as above)", "ops/s"),
]
REQUEST_WORKLOADS = [
    ("write", "sequential write (until in the bucket)"), ("setup", "setup: parallel-read files, small files, AU datasets"),
    ("meta_create", "metadata create"), ("meta_stat", "metadata stat"), ("meta_readdir", "metadata readdir"),
    ("meta_unlink", "metadata unlink"), ("read_cold", "sequential read cold"), ("read_warm", "sequential read warm"),
    ("par4", "4 parallel readers"), ("rand", "random 128 KiB reads"),
    ("rand16", "random 128 KiB reads of 1/16"), ("small_read", "small files read"),
    ("small_read_warm", "small files read again (warm)"),
    ("loader", "DataLoader"), ("au_unet3d", "AU search unet3d"), ("au_retinanet", "AU search retinanet"),
]


class Runner:
    """Runs the workloads on one target, recording figures, failures and S3 requests."""

    def __init__(self, plan, counter, state, python, work, info):
        self.plan, self.counter, self.state = plan, counter, state
        self.python, self.work, self.info = python, work, info
        self.figures = collections.defaultdict(dict)    # target -> row -> value ("fails" or number)
        self.requests = collections.defaultdict(dict)   # target -> workload -> {method: n}
        self.failures = []
        self.skipped = []  # steps not run here, with the reason (printed in the report)
        self.jit = collections.defaultdict(dict)        # target -> workload -> JIT compiler CPU-s in it
        self.quiet = collections.defaultdict(dict)      # target -> timed workload -> s waited for a quiet machine
        self.samples = collections.defaultdict(lambda: collections.defaultdict(list))  # target -> row -> each repetition's value

    def step(self, t, workload, rows, fn):
        if rows:  # a timed step: the previous step's background work must not land in its figure
            self.quiet[t.name][workload] = wait_quiet()
        before = self.counter.snapshot() if t.bucket else None
        jit_before = jit_cpu_seconds(t.daemon_pid())
        try:
            for k, v in fn().items():
                if self.figures[t.name].get(k) == "fails":
                    continue  # an earlier repetition failed: the figure stays failed
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    self.samples[t.name][k].append(v)
                    v = statistics.median(self.samples[t.name][k])
                self.figures[t.name][k] = v
        except Exception as e:
            msg = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            log(f"  {t.name}: {workload} FAILED: {msg}")
            self.failures.append(f"{t.label}, {workload}: {msg}")
            for r in rows:
                self.figures[t.name][r] = "fails"
        try:
            t.settle()
        except Exception as e:
            self.failures.append(f"{t.label}, {workload}: uploads did not settle: {e}")
        if before is not None:
            after = self.counter.snapshot()
            self.requests[t.name][workload] = {m: after.get((m, t.bucket), 0) - before.get((m, t.bucket), 0) for m in METHODS}
        jit_after = jit_cpu_seconds(t.daemon_pid())
        if jit_before is not None and jit_after is not None:
            self.jit[t.name][workload] = jit_after - jit_before
        shown = {r: self.figures[t.name].get(r) for r in rows}
        waited = self.quiet[t.name].get(workload)
        log(f"  {t.name}: {workload}: " + ", ".join(f"{k}={fmt(v)}" for k, v in shown.items())
            + (f" (after {waited:.1f} s waiting for a quiet machine)" if waited is not None else ""))

    def run(self, t):
        """All workloads on t, in order; a start or restart that fails marks the rest "fails"."""
        try:
            self._run(t)
        except Exception as e:
            msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
            log(f"  {t.name}: ABORTED: {msg}")
            self.failures.append(f"{t.label}: aborted: {msg}")
            for r, _, _ in ROWS:
                self.figures[t.name].setdefault(r, "fails")
        t.sample_rss()
        self.figures[t.name]["rss"] = t.peak_rss / KIB if t.peak_rss else None

    def _run(self, t):
        p, w = self.plan, self.work
        log(f"== {t.label} at {t.root}")
        t.start()
        self.step(t, "warm-up", [], lambda: warm_up(t, p))
        # Each timed figure is the median of plan.repeat repetitions (the AU searches excepted:
        # each is already a series of runs), every repetition prepared as the first.
        for _ in range(p.repeat):
            self.step(t, "write", ["write", "write_s3"], lambda: seq_write(t, p))
        self.step(t, "setup", ["small_write"], lambda: setup_files(t, p))
        for i in range(1, p.repeat):
            self.step(t, "small_write", ["small_write"], lambda: small_write_again(t, p, i))
        for _ in range(p.repeat):
            for phase in ("create", "stat", "readdir", "unlink"):
                drop_caches()
                self.step(t, f"meta_{phase}", [f"meta_{phase}"], lambda: metadata(t, p, phase))
        for _ in range(p.repeat):
            self.cold(t)
            self.step(t, "read_cold", ["read_cold"], lambda: seq_read(t, p, "cold"))
            self.step(t, "read_warm", ["read_warm"], lambda: seq_read(t, p, "warm"))
        for _ in range(p.repeat):
            self.cold(t)
            self.step(t, "par4", ["par4"], lambda: parallel_read(t, p))
            self.cold(t)
            self.step(t, "rand", ["rand_iops", "rand_mib"], lambda: random_read(t, p, w))
            self.cold(t)
            self.step(t, "rand16", ["rand16_iops"], lambda: random_read(t, p, w, 16))
            self.cold(t)
            self.step(t, "small_read", ["small_read"], lambda: small_read(t, p))
            # the next epoch: the same files again, with whatever the first read left cached
            self.step(t, "small_read_warm", ["small_read_warm"], lambda: small_read(t, p, "small_read_warm"))
        for _ in range(p.repeat):
            self.cold(t)
            self.step(t, "loader", ["loader"], lambda: dataloader(t, p, self.python, self.info))
        self.step(t, "au_unet3d", ["au_unet3d"], lambda: au_search(t, p, UNET3D, p.unet_bytes))
        self.step(t, "au_retinanet", ["au_retinanet"], lambda: au_search(t, p, RETINANET, p.retina_bytes))

    def cold(self, t):
        how = ", granary cache drop" if isinstance(t, GranaryTarget) else (", restart" if t.daemon else "")
        log(f"  {t.name}: making it cold (drop caches{how})")
        t0 = time.perf_counter()
        t.cold()
        log(f"  {t.name}: cold in {time.perf_counter() - t0:.1f} s")

    def client_rss(self, g):
        """Granary's client alone: a separate `granary mount` process (a GPU node's shape) on the
        running quickstart reads the sequential file cold and warm, the 4 parallel files and the
        small files again; its VmHWM is the rss_client row (the rss row's JVM also runs the servers)."""
        mnt = os.path.join(self.work, "granary-client-mnt")
        os.makedirs(mnt, exist_ok=True)
        self.state.add_mount(mnt)
        figs = self.figures["granary"]
        view = types.SimpleNamespace(root=mnt, name="granary-client")
        try:
            d = Daemon(self.state, [GRANARY, "mount", "-c", os.path.join(g.data, "granary.yaml"), "--mount", mnt],
                       os.path.join(self.work, "granary-client.log"))
            try:
                d.wait_mounted(mnt, "fuse.granary", timeout=120)
                g.cold()
                seq_read(view, self.plan, "cold")
                seq_read(view, self.plan, "warm")
                g.cold()
                parallel_read(view, self.plan)
                small_read(view, self.plan)
                figs["rss_client"] = peak_rss_kib(d.pid) / KIB
            finally:
                d.stop(timeout=60)
                unmount(mnt)
        except Exception as e:
            msg = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            self.failures.append(f"Granary's client alone (peak RSS): {msg}")
            figs["rss_client"] = "fails"
        log(f"  granary: client alone, peak RSS {fmt(figs.get('rss_client'))} MiB")

    def noop_ceiling(self):
        """dd read and stat of a no-op filesystem (granary noopfs) mounted with Granary's options: on
        jnr-fuse (Granary's non-root mounts), with kernel_cache, and on Granary's /dev/fuse binding (its mounts as root)."""
        mnt = os.path.join(self.work, "noop-mnt")
        os.makedirs(mnt, exist_ok=True)
        state = self.state
        state.add_mount(mnt)
        f = os.path.join(mnt, "zeros")
        figs = self.figures["granary"]
        for extra, rows in (([], ("noop_cold", "noop_again", "noop_stat")), (["--kernel-cache"], (None, "noop_cached")),
                            (["--binding", "direct"], ("noopd_cold", "noopd_again", "noopd_stat"))):
            try:
                d = Daemon(state, [GRANARY, "noopfs", mnt, "--size", f"{self.plan.noop_bytes // MIB}m",
                                   "--small-size", str(self.plan.small_bytes), *extra],
                           os.path.join(self.work, "noopfs.log"))
                try:
                    d.wait_mounted(mnt, "fuse.granary-noop", timeout=60)
                    drop_caches()
                    first = dd_read(f, self.plan.timeout)
                    second = dd_read(f, self.plan.timeout)
                    stat = noop_stat(os.path.join(mnt, "names"), self.plan.meta_count) if len(rows) == 3 else None
                    if "direct" in extra:
                        try:
                            figs["noopd_small"] = noop_small(os.path.join(mnt, "small"), self.plan.small_count, self.plan.small_bytes)
                        except Exception as e:
                            self.failures.append(f"no-op FUSE ceiling, small files: {e}")
                            figs["noopd_small"] = "fails"
                finally:
                    d.stop(timeout=30)
                    unmount(mnt)
                if rows[0]:
                    figs[rows[0]] = first
                figs[rows[1]] = second
                if len(rows) == 3:
                    figs[rows[2]] = stat
            except Exception as e:
                self.failures.append(f"no-op FUSE ceiling: {e}")
                for r in rows:
                    if r:
                        figs[r] = "fails"
        self.noop_ceiling_fuse3()
        log("  noop: " + ", ".join(f"{r}={fmt(figs.get(r))}" for r, _, _ in NOOP_ROWS))

    def noop_ceiling_fuse3(self):
        """The same reads and stats on bench/fuse3/NoopFuse3.java: libfuse3's low-level API through
        Java's FFM API, a third binding to set Granary's two against."""
        figs = self.figures["granary"]
        rows = ("noop3_cold", "noop3_again", "noop3_stat")
        java = os.path.join(os.environ.get("JAVA_HOME", "/nonexistent"), "bin", "java")
        why = fuse3_ffm_missing(java)
        if why:
            log(f"  no-op libfuse3 ceiling skipped: {why}")
            self.skipped.append(f"no-op libfuse3 (FFM) ceiling: {why}")
            return
        mnt = os.path.join(self.work, "noop3-mnt")
        os.makedirs(mnt, exist_ok=True)
        self.state.add_mount(mnt)
        try:
            d = Daemon(self.state, [java, "--enable-native-access=ALL-UNNAMED", os.path.join(ROOT, "bench", "fuse3", "NoopFuse3.java"),
                                    mnt, "--size", str(self.plan.noop_bytes)], os.path.join(self.work, "noopfuse3.log"))
            try:
                d.wait_mounted(mnt, "fuse.granary-noop3", timeout=120)
                f = os.path.join(mnt, "zeros")
                drop_caches()
                figs["noop3_cold"] = dd_read(f, self.plan.timeout)
                figs["noop3_again"] = dd_read(f, self.plan.timeout)
                figs["noop3_stat"] = noop_stat(os.path.join(mnt, "names"), self.plan.meta_count)
            finally:
                d.stop(timeout=30)
                unmount(mnt)
        except Exception as e:
            self.failures.append(f"no-op libfuse3 (FFM) ceiling: {e}")
            for r in rows:
                figs.setdefault(r, "fails")


def fuse3_ffm_missing(java):
    """Why bench/fuse3/NoopFuse3.java cannot run here (it needs libfuse3 and a JDK 22+ for FFM), or None."""
    try:
        ctypes.CDLL("libfuse3.so.3")
    except OSError:
        return "libfuse3.so.3 not found (Debian package libfuse3-3)"
    try:
        out = subprocess.run([java, "-XshowSettings:properties", "-version"], capture_output=True, text=True, timeout=60).stderr
    except OSError as e:
        return f"no java at {java}: {e}"
    m = re.search(r"java\.specification\.version = (\d+)", out)
    if not m or int(m.group(1)) < 22:
        return f"{java} is not a JDK 22+ (Java's FFM API)"
    return None


def noop_stat(names_dir, count):
    """stat/s over count names of the no-op fs (each is an empty file), page cache and dentries
    dropped before each of 3 rounds; the last round (the binding's JIT warmed as Granary's is by
    the time its metadata phases run)."""
    names = [os.path.join(names_dir, f"m{i:06d}") for i in range(count)]
    rate = None
    for _ in range(3):
        drop_caches()
        t0 = time.perf_counter()
        for p in names:
            os.stat(p)
        rate = count / (time.perf_counter() - t0)
    return rate


def noop_small(small_dir, count, size):
    """files/s reading count files of the no-op fs's /small whole, as the small-files step reads
    Granary's (8 threads, open + read + close each), page cache and dentries dropped before each
    of 3 rounds; the last round. The FUSE binding's ceiling for that step."""
    paths = [os.path.join(small_dir, f"s{i:06d}") for i in range(count)]
    rate = None
    for _ in range(3):
        drop_caches()
        rate = read_whole(paths, size, "no-op small files")
    return rate


def fmt(v):
    if v is None:
        return "n/a"
    if isinstance(v, str):
        return v
    if isinstance(v, int):
        return f"{v:,}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def ratio(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b:
        return f"{a / b:.2f}"
    if a == "fails" or b == "fails":
        return "–"
    return "n/a"


def report(runner, plan, targets, info, counter, elapsed):
    """The Markdown report: figures, ratios, S3 requests, notes."""
    names = [t.name for t in targets]
    labels = {t.name: t.label for t in targets}
    peers = [n for n in names if n != "granary"]
    fig = runner.figures
    subst = dict(seq=f"{plan.seq_bytes // MIB} MiB", small=f"{plan.small_count:,}", meta=f"{plan.meta_count:,}",
                 unet=plan.unet_bytes // MIB)
    out = [f"# Granary vs s3fs vs rclone mount vs local directory ({info['date']}, BENCH_SCALE={plan.scale:g})", "",
           f"One run of `bench/compare.sh` on {info['machine']}; all three FUSE targets on the same embedded "
           f"S3 server (S3Proxy inside the Granary quickstart JVM). Granary {info['commit']}, {info['aot']}; {info['versions']}. "
           f"Sizes: {plan.describe()}. Run time {elapsed / 60:.1f} min."
           + ("" if len(info["targets"]) == 4 else f" Only these targets were run (BENCH_TARGETS): {', '.join(info['targets'])}."), "",
           "| figure | unit | " + " | ".join(labels[n] for n in names) + " | "
           + " | ".join(f"Granary / {labels[n]}" for n in peers) + " |",
           "|---|---|" + "---:|" * (len(names) + len(peers))]
    for row, label, unit in ROWS:
        vals = {n: fig[n].get(row) for n in names}
        if row.startswith("au_"):
            cells = [fig[n].get(row + "_trail", fmt(vals[n])) if vals[n] != "fails" else "fails" for n in names]
        else:
            cells = [fmt(vals[n]) for n in names]
        out.append(f"| {label.format(**subst)} | {unit} | " + " | ".join(cells) + " | "
                   + " | ".join(ratio(vals["granary"], vals[p]) for p in peers) + " |")
    for row, label, unit in NOOP_ROWS:
        out.append(f"| {label.format(**subst)} | {unit} | " + " | ".join(fmt(fig["granary"].get(row)) if n == "granary" else "" for n in names)
                   + " |" + " |" * len(peers))
    g = fig["granary"]
    judge = []
    for row, what in (("noop_cached", "the no-op ceiling with page cache"), ("noop_again", "the no-op ceiling without page cache, its second read")):
        if isinstance(g.get("read_warm"), (int, float)) and isinstance(g.get(row), (int, float)):
            judge.append(f"{g['read_warm'] / g[row]:.0%} of {what}")
    if judge:
        out += ["", f"Granary's warm sequential read is {' and '.join(judge)}; the goal is ≥ 80% of the no-op ceiling."]

    repeated = [(row, label, unit) for row, label, unit in ROWS
                if any(len(runner.samples[n].get(row, [])) > 1 for n in names)]
    if repeated:
        out += ["", "## Repetitions", "",
                f"Each figure above is the median of {plan.repeat} timed repetitions (cold ones each after their own "
                "cache emptying); each repetition's figure, in order:", "",
                "| figure | unit | " + " | ".join(labels[n] for n in names) + " |", "|---|---|" + "---:|" * len(names)]
        for row, label, unit in repeated:
            out.append(f"| {label.format(**subst)} | {unit} | "
                       + " | ".join(", ".join(fmt(v) for v in runner.samples[n].get(row, [])) for n in names) + " |")

    out += ["", "## S3 requests per workload (counted at the S3 server)", ""]
    if counter.reason:
        out.append(f"n/a: {counter.reason}.")
    else:
        s3names = [n for n in names if n != "local"]
        out += ["| workload | " + " | ".join(f"{labels[n]} (GET/PUT/HEAD/POST/DELETE)" for n in s3names) + " |",
                "|---|" + "---:|" * len(s3names)]
        for w, label in REQUEST_WORKLOADS:
            cells = []
            for n in s3names:
                r = runner.requests[n].get(w)
                cells.append("n/a" if r is None else f"{sum(r.values()):,} ({'/'.join(str(r[m]) for m in METHODS)})")
            out.append(f"| {label} | " + " | ".join(cells) + " |")
        out += ["", "Counted in the kernel: an iptables rule per (method, bucket) on loopback packets to S3Proxy's port "
                "that start an HTTP request line `METHOD /bucket` (path-style). Each FUSE target has its own bucket, so "
                "the counts are per target; requests a workload causes after it returns (rclone's uploads) are waited for "
                "and counted in it. A repeated workload's counts are those of its last repetition. The local directory issues none."]

    warm = [(t, runner.figures.get(t.name, {}).get("warm_rounds")) for t in targets]
    warm = [(t, w) for t, w in warm if isinstance(w, dict) and w]
    if warm:
        out += ["", "## Warm-up rounds (untimed)", "",
                "Each part of the warm-up repeats until two rounds in a row are within "
                f"{WARM_TOLERANCE:.0%} of each other (at most {plan.warm_max_rounds} rounds); the rate of every round:", "",
                "| target | " + " | ".join(warm[0][1].keys()) + " |", "|---|" + "---|" * len(warm[0][1])]
        for t, w in warm:
            out.append(f"| {t.label} | " + " | ".join(", ".join(f"{r:,.0f}" for r in w.get(k, [])) for k in warm[0][1]) + " |")
    jit = runner.jit.get("granary")
    if jit:
        out += ["", "## Granary's JIT compiler CPU per step", "",
                "CPU seconds of the quickstart JVM's C1/C2 compiler threads during each step (the JVM also runs "
                "S3Proxy, the MDS peers and the OSSes): what the JIT still took from the 2 cores while a figure was measured.", "",
                "| " + " | ".join(jit.keys()) + " |", "|" + "---:|" * len(jit),
                "| " + " | ".join(f"{v:.1f}" for v in jit.values()) + " |"]

    quiet = [(t, runner.quiet.get(t.name)) for t in targets if runner.quiet.get(t.name)]
    if quiet:
        steps = list(quiet[0][1].keys())
        out += ["", "## Waits for a quiet machine", "",
                f"Before each timed step the run writes back dirty pages (`sync`: the kernel defers writeback up to 30 s, "
                f"so the S3 server's files of one repetition were written back during the next) and waits until the "
                f"machine's CPU is at most {QUIET_BUSY:.0%} busy over "
                f"{QUIET_SAMPLE:g} s (disk waits count as busy), at most {QUIET_MAX:g} s, so that work a step leaves "
                "running (compactions, uploads, writeback, the JIT) is not timed in the next one. Seconds waited, the sync included "
                f"({QUIET_MAX:g} = the machine never got quiet):", "",
                "| target | " + " | ".join(steps) + " |", "|---|" + "---:|" * len(steps)]
        for t, q in quiet:
            out.append(f"| {t.label} | " + " | ".join(f"{q[k]:.1f}" if k in q else "" for k in steps) + " |")

    out += ["", "## How it was measured", "",
            "- **cold**: `sync; echo 3 > /proc/sys/vm/drop_caches` and, for the FUSE targets, their own caches emptied: "
            "Granary's OSS read caches dropped with `granary cache drop` (the quickstart keeps running: the client holds "
            "no data cache besides the kernel's page cache), s3fs "
            "remounted, rclone remounted with its VFS cache folder emptied. Cold points: before each repetition of the sequential read, "
            "of the parallel, random and small-file reads and of the DataLoader, and before the AU searches. **warm**: the same file read again right after. Share of the file in the page cache "
            "when the warm read started (`fincore`): " + (", ".join(
                f"{t.label} {runner.figures[t.name]['warm_resident']:.0f}%" for t in targets
                if isinstance(runner.figures.get(t.name, {}).get("warm_resident"), (int, float))) or "not measured") + ". "
            "This VM's kernel runs DAMON with a `pageout` scheme (`/sys/kernel/mm/damon/admin/kdamonds/0`) that evicts "
            "page-cache pages it takes for cold within seconds of their first read, with memory free (a helper saw a "
            "plain ext4 file lose 7,528 pages in 40 s): each page missing at the warm read costs its filesystem a "
            "read (Granary: a FUSE READ and a ranged GET).",
            f"- **Warm-up** (untimed, the same on every target, right after it is mounted): a {plan.warm_bytes // MIB} MiB file "
            f"written with `fsync`, read cold (caches emptied before each read) at least {plan.warm_cold_reads} times and until two "
            "reads in a row are within 10% of each other, and once warm, "
            "then half of its 128 KiB blocks read at random, cold (4 threads, as the random-read step), at least 3 times "
            "(other blocks each time) and until two rounds agree, "
            f"{plan.warm_count} small files written (8 threads) in rounds, each into an empty folder, until two rounds agree, the last round's files read, read "
            "cold (8 threads, as the small-file step) at least 3 times and until two rounds agree, stat'ed, "
            f"listed (readdir, 3 times) and unlinked, {plan.warm_samples} new files of 320 KiB each round (as the retinanet-like "
            "AU samples) written and read whole cold with 16 threads until two rounds agree, and the metadata "
            f"phases on {plan.meta_count} other empty files (created, stat'ed, listed 3 times, unlinked; caches dropped before each "
            "phase, as in the timed steps) in rounds until create, stat and unlink each agree with the round before (at most 6). So each "
            "filesystem is measured as on a node that has been up for a while: Granary's JVM has compiled its hot paths "
            "(its JIT takes several GiB of cold reads to settle: the first GiB read right after start costs about 4x the CPU "
            "of the tenth; a listing of 5,000 names took 26-35 ms before its path was compiled, 8-9 ms after), "
            "peers have their connections open. "
            "Cold still means cold caches: the warm-up's files are deleted and every cache is emptied before the cold reads.",
            f"- **rclone mount** runs with `--vfs-cache-mode {info['rclone_mode']} --vfs-write-back 0s` "
            "(without a write cache it refuses read-write opens; `full` also caches what it reads, on disk). "
            "**s3fs** runs with `-o use_path_request_style,url=http://127.0.0.1:PORT,allow_other` and its defaults otherwise.",
            "- Sequential write: a 1 MiB random buffer written in 1 MiB `write()`s, then `fsync` (as `dd bs=1M conv=fsync`). "
            "Random reads: `fio --rw=randread --bs=128k --ioengine=psync --numjobs=4`, each job over its own quarter of the "
            "sequential file, half of it, no block twice; then again over 1/16 of it (a sparse reader: s3fs fetches large "
            "ranges of the file whatever the share read, Granary the bytes asked). Metadata: one thread, page cache (dentries, inodes) dropped "
            "before each of the four phases; readdir is one `os.listdir` of the whole folder; the unlink phase's time "
            "includes the `rmdir` of the emptied folder, which waits for removals still in flight (Granary's deferred unlinks).",
            f"- ² **AU** (MLPerf Storage style): each simulated accelerator is a process whose {UNET3D['threads']} reader threads "
            "read whole samples (then `POSIX_FADV_DONTNEED`, so nothing is served from the page cache, as with a dataset "
            "far larger than RAM) and prefetch up to 2 batches while the training loop sleeps a fixed compute time per batch. "
            f"Compute time per batch = batch bytes / per-accelerator demand: unet3d-like {UNET3D['demand'] / MIB:.0f} MiB/s "
            f"({UNET3D['batch']} x {plan.unet_bytes // MIB} MiB → {UNET3D['batch'] * plan.unet_bytes / UNET3D['demand']:.2f} s), "
            f"retinanet-like {RETINANET['demand'] / RETINANET_BYTES:.0f} samples/s "
            f"({RETINANET['batch']} x 320 KiB → {RETINANET['batch'] * plan.retina_bytes / RETINANET['demand']:.2f} s), chosen so that "
            f"on this 2-core machine a local disk sustains several accelerators. Each runs {plan.au_steps} batches; "
            "AU = compute time / wall time, timed from its first batch (the first load is warm-up); the figure is the mean over "
            f"the accelerators. N = 1, 2, 4, 8, 16 in turn (page cache dropped before each), stopping at the first N with AU < 90%; "
            "the table gives the largest N that held, then the AU of each N tried. The daemons' own caches (Granary's OSS cache, "
            "rclone's VFS cache) stay warm between N.",
            "- ¹ Granary's `fsync` returns once the data is in S3 and committed on a Raft majority, s3fs uploads on "
            "`fsync`/`close`; rclone acknowledges writes from its local cache and uploads afterwards, so this row waits "
            "until rclone reports no upload queued or in progress.",
            "- ³ Peak RSS is VmHWM of the process serving the mount (over its restarts). For Granary that one JVM also runs "
            "S3Proxy, 3 MDS Raft peers with RocksDB, and 2 OSS with their 512 MiB read caches, with the launcher's "
            "fixed heap (-Xms = -Xmx = a quarter of RAM, at most 3 GiB); s3fs and rclone "
            "are clients only (their S3 server is that same JVM).",
            "- ⁴ After every target has run, a second Granary client in its own process (`granary mount -c` the "
            "quickstart's config, as a GPU node mounts it, with the launcher's default heap) reads the sequential file "
            "cold and warm, the 4 parallel files and the small files again; the row is its VmHWM. s3fs and rclone have "
            "no such row: their rss row is already their client alone, over the whole run (writes included).",
            "- The jnr-fuse ceiling rows mount `granary noopfs`, a jnr-fuse file system that returns zeros (the binding of "
            "Granary's non-root mounts), with the same "
            "FUSE options as Granary's client (`FuseMount.options`), and read one file with `dd bs=1M`; its stat row "
            "stats as many names as the metadata phases (each an empty file, one thread, caches dropped before each "
            "of 3 rounds, the third reported): what the binding costs a lookup with no Granary work behind it.",
            "- The /dev/fuse binding rows do the same on `granary noopfs --binding direct`: the same no-op file system "
            "served by Granary's own binding (`client/fuse/kernel`: the FUSE kernel protocol read and written by Java threads "
            "on /dev/fuse, mounted with mount(2), no libfuse), with Granary's kernel options and 1 MiB requests: the binding "
            "Granary's mount uses as root (`client.fuse_binding: auto`), so the one of its figures in this table.",
            "- The libfuse3 ceiling rows do the same on `bench/fuse3/NoopFuse3.java`, a no-op file system on libfuse3's "
            "low-level (inode) API called through Java's FFM API (JDK 22+, run from source), with Granary's options where "
            "libfuse3 has them (max_read 1 MiB, 1 s attribute and entry timeouts, 32 serving threads, kernel readahead "
            "1 MiB) and no page cache kept across opens: the ceiling of a third binding, for comparison.",
            "- Figures move ±15–30% between runs on this shared 2-core machine: compare within one run."]
    if runner.failures:
        out += ["", "## Failures", ""] + [f"- {f}" for f in runner.failures]
    if runner.skipped:
        out += ["", "## Not run here", ""] + [f"- {f}" for f in runner.skipped]
    return "\n".join(out) + "\n"



def chart(runner, plan, targets, info, path):
    """A PNG: each figure relative to the local directory (log scale), one bar per FUSE target."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [(r, l, u) for r, l, u in ROWS if r not in ("rss", "rss_client")]
    fuse = [t for t in targets if t.name != "local"]
    colors = {"granary": "#2a7ab9", "s3fs": "#e08a2c", "rclone": "#5aa05a"}
    fig, ax = plt.subplots(figsize=(10, 0.55 * len(rows) + 1.8))
    h = 0.8 / len(fuse)
    subst = dict(seq=f"{plan.seq_bytes // MIB} MiB", small=f"{plan.small_count:,}", meta=f"{plan.meta_count:,}",
                 unet=plan.unet_bytes // MIB)
    def baseline(r):  # the local directory's figure; its write is the baseline for "until in the bucket"
        return runner.figures["local"].get("write" if r == "write_s3" else r)
    ratios = [runner.figures[t.name].get(r) / baseline(r) for t in fuse for r, _, _ in rows
              if isinstance(runner.figures[t.name].get(r), (int, float)) and runner.figures[t.name].get(r) > 0
              and isinstance(baseline(r), (int, float)) and baseline(r) > 0]
    lo, hi = min(ratios + [0.5]) / 3, max(ratios + [1.0]) * 3
    for i, t in enumerate(fuse):
        for j, (r, _, _) in enumerate(rows):
            v, local = runner.figures[t.name].get(r), baseline(r)
            y = j + (i - (len(fuse) - 1) / 2) * h
            if isinstance(v, (int, float)) and isinstance(local, (int, float)) and v > 0 and local > 0:
                ax.barh(y, v / local, height=h, color=colors.get(t.name), label=t.label if j == 0 else None)
                ax.text(v / local * 1.05, y, f"{v / local:.2g}", va="center", fontsize=6)
            else:
                ax.text(lo * 1.05, y, "fails" if v == "fails" else ("0" if v == 0 else "n/a"), va="center", fontsize=6)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([l.format(**subst).replace(" ¹", "").replace(" ²", "") + f" ({u})" for _, l, u in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("figure / local directory (log scale; 1 = local dir)")
    ax.set_title(f"Granary vs s3fs vs rclone mount, relative to a local directory\n{info['date']}, BENCH_SCALE={plan.scale:g}, "
                 f"same S3Proxy, 2-core machine", fontsize=9)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def versions():
    def first(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "?"
    s3fs = first(["s3fs", "--version"])
    m = re.search(r"V(\S+)", s3fs)
    return f"s3fs {m.group(1) if m else '?'}, {first(['rclone', 'version'])}, {first(['fio', '--version'])}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True, help="scratch folder (same disk as the local target); holds the state files")
    ap.add_argument("--results", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--python", default=sys.executable, help="a python that can import torch (DataLoader)")
    a = ap.parse_args()
    scale = float(os.environ.get("BENCH_SCALE", "1.0"))
    if not 0 < scale <= 10:
        sys.exit(f"compare.py: BENCH_SCALE must be in (0, 10], got {scale}")
    rclone_mode = os.environ.get("RCLONE_VFS_CACHE_MODE", "full")
    selected = os.environ.get("BENCH_TARGETS", "local,granary,s3fs,rclone").split(",")
    if not selected or any(n not in ("local", "granary", "s3fs", "rclone") for n in selected):
        sys.exit(f"compare.py: BENCH_TARGETS is a comma list of local,granary,s3fs,rclone, got {selected}")
    repeat = os.environ.get("BENCH_REPEAT")
    if repeat is not None and not (repeat.isdigit() and 1 <= int(repeat) <= 9):
        sys.exit(f"compare.py: BENCH_REPEAT must be a whole number in [1, 9], got {repeat}")
    plan = Plan(scale, int(repeat) if repeat else None)
    work = os.path.abspath(a.work)
    state = State(work)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.time()
    today = datetime.date.today().isoformat()
    commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
    with_aot = os.environ.get("BENCH_GRANARY_AOT") == "on"  # decided by compare.sh (the launcher's rule)
    info = dict(date=today, targets=selected, commit=commit or "?", versions=versions(), rclone_mode=rclone_mode,
                aot="its JVMs with the AOT cache of `scripts/aot-cache.sh` (JDK 25: classes and method profiles from a training run)"
                if with_aot else "its JVMs without an AOT cache",
                machine=f"{os.cpu_count()} cores, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / GIB:.0f} GiB, "
                        f"Linux {platform.release()}")
    log(f"BENCH_SCALE={scale:g}: {plan.describe()}")
    log(f"work folder {work}")

    base = free_port_block(lambda b: [b, b + 61, b + 62, b + 63, b + 71, b + 72, b + 90])
    granary = GranaryTarget(work, state, base)
    targets, counter = [], None
    try:
        log("starting Granary quickstart (it also serves S3 for s3fs and rclone)")
        granary.start()
        s3 = granary.s3_config()
        local = LocalTarget(work, state)
        s3fs = S3fsTarget(work, state, s3)
        rclone = RcloneTarget(work, state, s3, base + 90, rclone_mode)
        targets = [local, granary, s3fs, rclone]
        for b in (s3fs.bucket, rclone.bucket):
            subprocess.run(["rclone", "--config", rclone.config, "mkdir", f"s3:{b}"], check=True, env=env_without_ca(),
                           capture_output=True, timeout=60)
        counter = S3Counter(state, s3[0], [t.bucket for t in targets if t.bucket])
        if counter.reason:
            log(f"S3 request counts unavailable: {counter.reason}")
        for t in targets:
            if t.bucket and not counter.reason:
                t.uploads_seen = lambda b=t.bucket: sum(n for (m, bb), n in counter.snapshot().items()
                                                         if bb == b and m in ("PUT", "POST", "DELETE"))
        runner = Runner(plan, counter, state, a.python, work, info)
        for t in targets:
            if t.name not in selected:
                continue
            runner.run(t)
            if t is local:
                shutil.rmtree(local.root, ignore_errors=True)
            elif t is not granary:
                t.stop()
                shutil.rmtree(os.path.join(granary.data, "s3", t.bucket), ignore_errors=True)
                os.makedirs(os.path.join(granary.data, "s3", t.bucket), exist_ok=True)
                shutil.rmtree(os.path.join(work, "rclone-cache"), ignore_errors=True)
        if "granary" in selected:
            runner.client_rss(granary)
        granary.stop()
        if "granary" in selected:
            runner.noop_ceiling()
        elapsed = time.time() - started
        md = report(runner, plan, targets, info, counter, elapsed)
        os.makedirs(a.results, exist_ok=True)
        stem = os.path.join(a.results, f"compare-{today}-s{scale:g}")
        with open(stem + ".md", "w") as f:
            f.write(md)
        print("\n" + md)
        try:
            chart(runner, plan, targets, info, stem + ".png")
            log(f"wrote {stem}.md and {stem}.png")
        except ImportError as e:
            log(f"wrote {stem}.md; no chart ({e}: install python3-matplotlib)")
        log(f"done in {elapsed / 60:.1f} min")
    finally:
        for t in reversed(targets or [granary]):
            try:
                t.stop()
            except Exception as e:
                log(f"stopping {t.name}: {e}")
        if counter:
            counter.close()


if __name__ == "__main__":
    main()
