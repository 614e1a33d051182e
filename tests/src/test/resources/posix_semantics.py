# POSIX calls for PosixSemanticsTest: `python3 posix_semantics.py SCENARIO DIR` runs one scenario
# in DIR (a fresh directory, on a Granary mount or on a local filesystem) and prints one line per
# step: "label: ok [value]" or "label: ERRNO_NAME". The test runs a scenario in both places and
# compares the outputs line by line, so errno names must match exactly.
import ctypes
import errno
import fcntl
import hashlib
import mmap
import os
import random
import select
import stat
import subprocess
import sys
import time

LIBC = ctypes.CDLL(None, use_errno=True)
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
AT_FDCWD = -100


def t(label, fn, *args):
    try:
        r = fn(*args)
        print(label + ': ok' + ('' if r is None else ' ' + str(r)), flush=True)
    except OSError as e:
        print(label + ': ' + errno.errorcode.get(e.errno, str(e.errno)), flush=True)


def check(rc):
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def sha(b):
    return hashlib.sha256(b).hexdigest()[:16]


def data(n, seed):
    return random.Random(seed).randbytes(n)


def readall(p):
    with open(p, 'rb') as f:
        return f.read()


def write(p, b, mode=0o644):
    fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, mode)
    try:
        view = memoryview(b)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def create(p, mode=0o644):
    os.close(os.open(p, os.O_CREAT | os.O_WRONLY, mode))


def j(d, *names):
    return os.path.join(d, *names)


# ------------------------------------------------------------------ open, names

def s_open(d):
    p = j(d, 'f')
    fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    os.write(fd, b'hello world')
    os.close(fd)
    t('O_CREAT|O_EXCL of an existing file', os.open, p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    t('O_CREAT|O_EXCL of an existing directory', os.open, d, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    t('O_CREAT without O_EXCL of an existing file keeps it', lambda: (create(p), readall(p))[1])
    t('open of an empty path', os.open, '', os.O_RDONLY)

    def poll_ready():
        fd = os.open(p, os.O_RDWR)
        try:
            r, w, _ = select.select([fd], [fd], [], 0)
            return len(r), len(w)
        finally:
            os.close(fd)
    t('select/poll of a regular file (ready to read and write)', poll_ready)

    def trunc():
        fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
        size_after_open = os.fstat(fd).st_size
        os.write(fd, b'abc')
        os.close(fd)
        return size_after_open, readall(p)
    t('O_TRUNC', trunc)

    def append():
        fd = os.open(p, os.O_WRONLY | os.O_APPEND)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, b'XY')  # O_APPEND: to the end whatever the offset
        pos = os.lseek(fd, 0, os.SEEK_CUR)
        os.close(fd)
        fd = os.open(p, os.O_WRONLY | os.O_APPEND)
        os.write(fd, data(300000, 1))  # grows past the inline limit
        os.write(fd, b'END')
        os.close(fd)
        b = readall(p)
        return pos, len(b), b[:6], b[-3:], sha(b)
    t('O_APPEND', append)

    def rdwr():
        fd = os.open(p, os.O_RDWR)
        os.pwrite(fd, b'MID', 100000)
        got = os.pread(fd, 7, 99998)
        os.close(fd)
        return got
    t('O_RDWR pwrite then pread on one handle', rdwr)
    t('open of a missing file', os.open, j(d, 'nope'), os.O_RDONLY)
    t('open of a directory for writing', os.open, d, os.O_WRONLY)
    t('open below a file', os.open, j(p, 'x'), os.O_RDONLY)
    t('O_DIRECTORY open of a file', os.open, p, os.O_RDONLY | os.O_DIRECTORY)

    def read_dir():
        fd = os.open(d, os.O_RDONLY)
        try:
            return os.read(fd, 10)
        finally:
            os.close(fd)
    t('read(2) of a directory', read_dir)
    t('create a 255-byte name', create, j(d, 'n' * 255))
    t('create a 256-byte name', create, j(d, 'n' * 256))
    t('create a 255-byte UTF-8 name (127 x e-acute + a)', create, j(d, '\u00e9' * 127 + 'a'))
    t('create a 256-byte UTF-8 name (128 x e-acute)', create, j(d, '\u00e9' * 128))
    t('mkdir of a 256-byte name', os.mkdir, j(d, 'm' * 256))
    t('stat of a 256-byte name', os.stat, j(d, 'm' * 256))
    t('listdir names', lambda: sorted(len(n.encode()) for n in os.listdir(d)))
    t('mkdir .', os.mkdir, j(d, '.'))
    t('mkdir ..', os.mkdir, j(d, '..'))
    t('mkdir of an existing file', os.mkdir, p)
    t('mkdir with a missing parent', os.mkdir, j(d, 'nope', 'x'))
    t('mkdir below a file', os.mkdir, j(p, 'x'))
    s = os.stat(p)
    t('stat of the file', lambda: (stat.filemode(s.st_mode), s.st_size, s.st_nlink, s.st_uid, s.st_gid))
    t('fsync and fdatasync', lambda: [f(fd) for fd in [os.open(p, os.O_WRONLY)] for f in (os.fsync, os.fdatasync, os.close)] and None)


# ------------------------------------------------------------------ sparse files, truncate

def s_sparse(d):
    stripe = 65536
    p = j(d, 'sparse')
    fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
    os.pwrite(fd, b'A' * 10, 0)
    os.pwrite(fd, b'C' * 10, 60000)  # a hole inside stripe 0
    os.pwrite(fd, b'B' * 10, 5 * stripe + 5)  # stripes 1..4 are holes; above the inline limit
    os.close(fd)
    b = readall(p)
    t('size', lambda: os.stat(p).st_size)
    t('content', lambda: (len(b), sha(b), b[:10], b[60000:60010], b[-10:]))
    t('holes read as zeros', lambda: (b[10:60000] == bytes(59990), b[60010:5 * stripe + 5] == bytes(5 * stripe + 5 - 60010)))
    fd = os.open(p, os.O_RDONLY)
    t('pread across a stripe boundary in a hole', lambda: os.pread(fd, 20, stripe - 10) == bytes(20))
    t('pread from hole into data', lambda: os.pread(fd, 10, 5 * stripe) + b'|')
    t('pread at EOF', lambda: os.pread(fd, 10, len(b)))
    t('pread past EOF', lambda: os.pread(fd, 10, len(b) + 1000))
    os.close(fd)
    q = j(d, 'grown')
    fd = os.open(q, os.O_CREAT | os.O_RDWR, 0o644)
    os.ftruncate(fd, 3 * stripe + 1)  # a file that is all hole
    os.pwrite(fd, b'Z', 2 * stripe)
    os.close(fd)
    c = readall(q)
    t('ftruncate up then one byte in the middle', lambda: (len(c), c.count(0), c[2 * stripe:2 * stripe + 1]))
    big = j(d, 'big-hole')
    fd = os.open(big, os.O_CREAT | os.O_WRONLY, 0o644)
    os.pwrite(fd, b'tail', 8 * 1024 * 1024)
    os.close(fd)
    t('8 MiB hole then 4 bytes', lambda: (lambda x: (len(x), x[:8 * 1024 * 1024] == bytes(8 * 1024 * 1024), x[-4:]))(readall(big)))


def s_truncate(d):
    stripe = 65536
    p = j(d, 't')
    b = data(5 * stripe + 123, 2)  # above the inline limit: blocks in S3
    write(p, b)
    t('truncate(2) down inside the last stripe', lambda: (os.truncate(p, 300000), os.stat(p).st_size, readall(p) == b[:300000])[1:])
    t('truncate(2) down across a stripe boundary', lambda: (os.truncate(p, stripe + 100), os.stat(p).st_size)[1])
    t('truncate(2) up again', lambda: (os.truncate(p, 6 * stripe), os.stat(p).st_size)[1])
    c = readall(p)
    t('kept bytes and zeros after down then up', lambda: (len(c), c[:stripe + 100] == b[:stripe + 100], c[stripe + 100:] == bytes(len(c) - stripe - 100)))
    t('truncate(2) down to exactly one stripe', lambda: (os.truncate(p, stripe), readall(p) == b[:stripe])[1])
    fd = os.open(p, os.O_RDWR)
    os.ftruncate(fd, 2 * stripe + 1)
    t('ftruncate up', lambda: (os.fstat(fd).st_size, os.pread(fd, stripe + 1, stripe) == bytes(stripe + 1)))
    os.pwrite(fd, b'Q' * 100000, 100000)  # dirty data of this handle, then truncated under it
    os.ftruncate(fd, 150000)
    t('ftruncate with dirty data', lambda: (os.fstat(fd).st_size, sha(os.pread(fd, 200000, 0))))
    os.close(fd)
    c = readall(p)
    t('after close', lambda: (len(c), sha(c), c[100000:150000] == b'Q' * 50000))
    t('truncate(2) to 0', lambda: (os.truncate(p, 0), os.stat(p).st_size, readall(p))[1:])
    t('truncate(2) of a directory', os.truncate, d, 0)
    t('truncate(2) of a missing file', os.truncate, j(d, 'nope'), 0)
    t('truncate(2) to a negative size', os.truncate, p, -1)
    fd = os.open(p, os.O_RDONLY)
    t('ftruncate of a read-only descriptor', os.ftruncate, fd, 10)
    os.close(fd)


# ------------------------------------------------------------------ rename, unlink, rmdir, mknod

def s_rename(d):
    for n in ('a', 'a/sub', 'e', 'n', 'p1', 'p1/s', 'p2'):
        os.mkdir(j(d, n))
    write(j(d, 'n', 'x'), b'x')
    write(j(d, 'f1'), b'one')
    write(j(d, 'f2'), b'two')
    t('rename a directory onto a non-empty directory', os.rename, j(d, 'a'), j(d, 'n'))
    t('rename a file onto a directory', os.rename, j(d, 'f1'), j(d, 'e'))
    t('rename a directory onto a file', os.rename, j(d, 'e'), j(d, 'f1'))
    t('rename a directory into its own subtree', os.rename, j(d, 'a'), j(d, 'a', 'sub', 'a2'))
    t('rename a directory onto its own child', os.rename, j(d, 'a'), j(d, 'a', 'sub'))
    t('rename of a missing name', os.rename, j(d, 'nope'), j(d, 'x'))
    t('rename into a missing directory', os.rename, j(d, 'f1'), j(d, 'nope', 'x'))
    t('rename below a file', os.rename, j(d, 'f1'), j(d, 'f2', 'x'))
    t('rename of .', os.rename, j(d, 'e', '.'), j(d, 'dot'))
    t('rename onto ..', os.rename, j(d, 'f1'), j(d, 'e', '..'))
    t('rename a file replaces a file', lambda: (os.rename(j(d, 'f1'), j(d, 'f2')), readall(j(d, 'f2')), os.path.exists(j(d, 'f1')))[1:])
    t('rename a directory replaces an empty directory', lambda: (os.rename(j(d, 'a'), j(d, 'e')), sorted(os.listdir(j(d, 'e'))), os.path.exists(j(d, 'a')))[1:])
    t('rename a file onto itself', lambda: (os.rename(j(d, 'f2'), j(d, 'f2')), readall(j(d, 'f2')))[1])
    os.link(j(d, 'f2'), j(d, 'f3'))
    t('rename onto another hard link of the same file keeps both', lambda: (os.rename(j(d, 'f2'), j(d, 'f3')), sorted(n for n in os.listdir(d) if n.startswith('f')))[1])
    t('nlink of p1 and p2 before a directory moves', lambda: (os.stat(j(d, 'p1')).st_nlink, os.stat(j(d, 'p2')).st_nlink))
    t('rename a directory across parents', os.rename, j(d, 'p1', 's'), j(d, 'p2', 's'))
    t('nlink of p1 and p2 after', lambda: (os.stat(j(d, 'p1')).st_nlink, os.stat(j(d, 'p2')).st_nlink))
    t('rename a file across parents', lambda: (os.rename(j(d, 'n', 'x'), j(d, 'p1', 'y')), os.listdir(j(d, 'n')), readall(j(d, 'p1', 'y')))[1:])
    t('listing', lambda: sorted(os.listdir(d)))
    t('nlink of the directory', lambda: os.stat(d).st_nlink)


def s_remove(d):
    os.mkdir(j(d, 'dir'))
    os.mkdir(j(d, 'full'))
    write(j(d, 'full', 'x'), b'x')
    write(j(d, 'f'), b'f')
    t('unlink of a directory', os.unlink, j(d, 'dir'))
    t('unlink of a missing name', os.unlink, j(d, 'nope'))
    t('unlink below a file', os.unlink, j(d, 'f', 'x'))
    t('rmdir of a file', os.rmdir, j(d, 'f'))
    t('rmdir of a non-empty directory', os.rmdir, j(d, 'full'))
    t('rmdir of a missing name', os.rmdir, j(d, 'nope'))
    t('rmdir of .', os.rmdir, j(d, 'dir', '.'))
    t('rmdir of ..', os.rmdir, j(d, 'dir', '..'))
    t('unlink then stat', lambda: (os.unlink(j(d, 'f')), os.path.exists(j(d, 'f')))[1])
    t('rmdir then stat', lambda: (os.rmdir(j(d, 'dir')), os.path.exists(j(d, 'dir')))[1])
    t('mknod of a regular file', lambda: (os.mknod(j(d, 'reg'), 0o600 | stat.S_IFREG), stat.filemode(os.stat(j(d, 'reg')).st_mode))[1])
    t('listing', lambda: sorted(os.listdir(d)))


# ------------------------------------------------------------------ symlinks

def s_symlink(d):
    os.mkdir(j(d, 'sub'))
    write(j(d, 'sub', 'file'), b'through the link')
    os.symlink('l2', j(d, 'l1'))
    os.symlink('l1', j(d, 'l2'))
    os.symlink('self', j(d, 'self'))
    t('open of a symlink loop', os.open, j(d, 'l1'), os.O_RDONLY)
    t('stat of a symlink loop', os.stat, j(d, 'l1'))
    t('open of a self link', os.open, j(d, 'self'), os.O_RDONLY)
    t('path through a loop', os.stat, j(d, 'l1', 'x'))
    t('lstat of a loop link', lambda: (stat.S_ISLNK(os.lstat(j(d, 'l1')).st_mode), os.lstat(j(d, 'l1')).st_size))
    os.symlink('sub', j(d, 'ls'))
    t('read through a directory symlink', lambda: readall(j(d, 'ls', 'file')))
    t('readlink', os.readlink, j(d, 'ls'))
    t('symlink onto an existing name', os.symlink, 'x', j(d, 'ls'))
    t('readlink of a file', os.readlink, j(d, 'sub', 'file'))
    t('readlink of a directory', os.readlink, j(d, 'sub'))
    t('readlink of a missing name', os.readlink, j(d, 'nope'))
    target = 'x/' * 2047 + 'y'  # 4095 bytes
    t('symlink with a 4095-byte target', lambda: (os.symlink(target, j(d, 'long')), os.readlink(j(d, 'long')) == target, os.lstat(j(d, 'long')).st_size)[1:])
    t('symlink with a 4096-byte target', os.symlink, target + 'z', j(d, 'toolong'))
    os.symlink('dangling-target', j(d, 'dangling'))
    t('stat of a dangling symlink', os.stat, j(d, 'dangling'))
    t('O_CREAT through a dangling symlink creates the target', lambda: (create(j(d, 'dangling')), os.path.exists(j(d, 'dangling-target')))[1])
    t('O_NOFOLLOW open of a symlink', os.open, j(d, 'ls'), os.O_RDONLY | os.O_NOFOLLOW)
    t('unlink of a symlink keeps the target', lambda: (os.unlink(j(d, 'ls')), os.path.isdir(j(d, 'sub')))[1])


# ------------------------------------------------------------------ times

class Timespec(ctypes.Structure):
    _fields_ = [('tv_sec', ctypes.c_long), ('tv_nsec', ctypes.c_long)]


def utimensat(path, atime, mtime):
    ts = (Timespec * 2)(atime, mtime)
    check(LIBC.utimensat(AT_FDCWD, path.encode(), ts, 0))


def s_times(d):
    p = j(d, 'f')
    write(p, b'x' * 100)

    def times():
        s = os.stat(p)
        return s.st_atime_ns, s.st_mtime_ns
    t('os.utime with ns', lambda: (os.utime(p, ns=(1600000000123456789, 1500000000987654321)), times())[1])
    a, m = times()
    t('UTIME_OMIT both', lambda: (utimensat(p, Timespec(0, UTIME_OMIT), Timespec(0, UTIME_OMIT)), times() == (a, m))[1])
    t('explicit both with utimensat', lambda: (utimensat(p, Timespec(1300000000, 7), Timespec(1200000000, 9)), times())[1])
    before = time.time_ns()
    os.utime(p)
    a, m = times()
    t('os.utime now', lambda: (abs(a - before) < 10 ** 10, abs(m - before) < 10 ** 10))
    c0 = os.stat(p).st_ctime_ns
    os.utime(p, ns=(1000000000, 1000000000))
    t('utime sets ctime to now', lambda: (os.stat(p).st_ctime_ns >= c0, abs(os.stat(p).st_ctime_ns - time.time_ns()) < 10 ** 10))
    write(p, b'y' * 10)
    t('a write sets mtime to now', lambda: abs(os.stat(p).st_mtime_ns - time.time_ns()) < 10 ** 10)
    os.mkdir(j(d, 'dir'))
    os.utime(j(d, 'dir'), ns=(1000000000, 1000000000))
    create(j(d, 'dir', 'x'))
    t('a create sets the parent mtime to now', lambda: abs(os.stat(j(d, 'dir')).st_mtime_ns - time.time_ns()) < 10 ** 10)
    t('utimensat of a missing file', utimensat, j(d, 'nope'), Timespec(0, UTIME_NOW), Timespec(0, UTIME_NOW))


def s_times_omit(d):
    p = j(d, 'f')
    write(p, b'x' * 100)

    def times():
        s = os.stat(p)
        return s.st_atime_ns, s.st_mtime_ns
    os.utime(p, ns=(1600000000123456789, 1500000000987654321))
    t('UTIME_OMIT atime, explicit mtime', lambda: (utimensat(p, Timespec(0, UTIME_OMIT), Timespec(1400000000, 5)), times())[1])
    before = time.time_ns()
    utimensat(p, Timespec(0, UTIME_NOW), Timespec(0, UTIME_OMIT))
    a, m = times()
    t('UTIME_NOW atime, UTIME_OMIT mtime', lambda: (abs(a - before) < 10 ** 10, m))
    r = subprocess.run(['touch', '-m', '-d', '2021-02-03 04:05:06.25 UTC', p], capture_output=True, text=True)
    t('touch -m (atime unchanged)', lambda: (r.returncode, r.stderr, times()[0] == a, times()[1]))
    r = subprocess.run(['touch', '-a', '-d', '2019-01-01 00:00:00.5 UTC', p], capture_output=True, text=True)
    t('touch -a', lambda: (r.returncode, r.stderr, times()))


# ------------------------------------------------------------------ nlink, hard links

def s_own_changes(d):
    """A stat right after this client's own change shows it, though the kernel cached the attributes a stat before fetched."""
    f = j(d, 'f')
    write(f, b'a' * 100)
    m0 = os.stat(f).st_mtime_ns
    time.sleep(0.05)
    with open(f, 'ab') as h:
        h.write(b'b' * 10)
        h.flush()
        s = os.stat(f)  # the kernel fetches and caches attributes here
        t('size while open', lambda: s.st_size)
        t('mtime while open, before close: the write set it', lambda: s.st_mtime_ns > m0)
    t('size and mtime after append and close', lambda: (os.stat(f).st_size, os.stat(f).st_mtime_ns > m0))
    t('mtime after close is the one the open file showed', lambda: os.stat(f).st_mtime_ns == s.st_mtime_ns)
    m1 = os.stat(f).st_mtime_ns
    time.sleep(0.05)
    fd = os.open(f, os.O_WRONLY)
    os.pwrite(fd, b'c', 5)
    os.fstat(fd)
    os.fsync(fd)
    t('mtime after pwrite and fsync, still open', lambda: os.stat(f).st_mtime_ns > m1)
    os.close(fd)
    os.truncate(f, 7)
    t('size after truncate', lambda: os.stat(f).st_size)
    os.chmod(f, 0o600)
    t('mode after chmod', lambda: oct(os.stat(f).st_mode & 0o777))
    os.utime(f, (1000, 2000))
    t('mtime after utime', lambda: os.stat(f).st_mtime)


def s_nlink(d):
    os.mkdir(j(d, 'x'))
    t('nlink of a new directory', lambda: os.stat(j(d, 'x')).st_nlink)
    t('nlink of the parent after mkdir', lambda: os.stat(d).st_nlink)
    for n in ('y', 'z', 'w'):
        os.mkdir(j(d, 'x', n))
    create(j(d, 'x', 'file'))
    t('nlink after 3 subdirectories and a file', lambda: os.stat(j(d, 'x')).st_nlink)
    os.rmdir(j(d, 'x', 'z'))
    t('nlink after rmdir', lambda: os.stat(j(d, 'x')).st_nlink)
    os.mkdir(j(d, 'd1'))
    os.mkdir(j(d, 'd2'))
    write(j(d, 'd1', 'f'), b'data')
    t('link across directories', lambda: (os.link(j(d, 'd1', 'f'), j(d, 'd2', 'g')), os.stat(j(d, 'd2', 'g')).st_nlink, readall(j(d, 'd2', 'g')))[1:])
    t('a third name', lambda: (os.link(j(d, 'd2', 'g'), j(d, 'x', 'h')), os.stat(j(d, 'x', 'h')).st_nlink)[1])
    t('same inode', lambda: len({os.stat(j(d, *n)).st_ino for n in (('d1', 'f'), ('d2', 'g'), ('x', 'h'))}))
    t('link of a directory', os.link, j(d, 'd1'), j(d, 'dl'))
    t('link onto an existing name', os.link, j(d, 'd1', 'f'), j(d, 'd2', 'g'))
    t('link of a missing file', os.link, j(d, 'nope'), j(d, 'nl'))
    t('link into a missing directory', os.link, j(d, 'd1', 'f'), j(d, 'nope', 'nl'))
    t('unlink two names, the third still reads', lambda: (os.unlink(j(d, 'd1', 'f')), os.unlink(j(d, 'd2', 'g')), readall(j(d, 'x', 'h')))[2])
    t('stat of the last name after its data changed through it', lambda: (write(j(d, 'x', 'h'), b'changed'), os.stat(j(d, 'x', 'h')).st_size, readall(j(d, 'x', 'h')))[1:])
    t('nlink of the parent after all', lambda: os.stat(d).st_nlink)


def s_link_write(d):
    os.mkdir(j(d, 'd1'))
    os.mkdir(j(d, 'd2'))
    write(j(d, 'd1', 'f'), b'data')
    os.link(j(d, 'd1', 'f'), j(d, 'd2', 'g'))
    t('read through the first name', lambda: readall(j(d, 'd1', 'f')))
    t('stat of the first name', lambda: os.stat(j(d, 'd1', 'f')).st_size)
    t('O_TRUNC write through the second name, read through the first', lambda: (write(j(d, 'd2', 'g'), b'new bytes'), readall(j(d, 'd1', 'f')))[1])
    os.link(j(d, 'd2', 'g'), j(d, 'd2', 'h'))
    t('stat of all three names', lambda: [os.stat(j(d, *n)).st_size for n in (('d1', 'f'), ('d2', 'g'), ('d2', 'h'))])
    t('O_TRUNC write through the third name, read through the first', lambda: (write(j(d, 'd2', 'h'), b'longer new bytes'), readall(j(d, 'd1', 'f')))[1])


def s_blksize(d):
    write(j(d, 'f'), b'x' * 10)
    t('st_blksize', lambda: os.stat(j(d, 'f')).st_blksize)


# ------------------------------------------------------------------ ownership and permissions

def mode(p):
    """Permission bits of p (with set-user-ID, set-group-ID, sticky) in octal."""
    return oct(os.stat(p).st_mode & 0o7777)


def write_once(p, flags, at=1, b=b'y'):
    """One write(2) of b at offset `at` (at the end with O_APPEND) through a descriptor opened with flags."""
    fd = os.open(p, flags)
    try:
        os.pwrite(fd, b, at) if not flags & os.O_APPEND else os.write(fd, b)
    finally:
        os.close(fd)


def s_perm_root(d):
    os.chmod(d, 0o755)
    write(j(d, 'rootonly'), b'secret', 0o600)
    write(j(d, 'shared'), b'shared', 0o644)
    write(j(d, 'open'), b'open', 0o666)
    os.chmod(j(d, 'open'), 0o666)
    write(j(d, 'userfile'), b'user', 0o644)
    os.mkdir(j(d, 'ro'), 0o755)
    write(j(d, 'ro', 'existing'), b'e')
    os.mkdir(j(d, 'sticky'))
    os.chmod(j(d, 'sticky'), 0o1777)
    write(j(d, 'sticky', 'rootfile'), b'r', 0o666)
    os.chmod(j(d, 'sticky', 'rootfile'), 0o666)

    t('chown to 1000:1000', lambda: (os.chown(j(d, 'userfile'), 1000, 1000), os.stat(j(d, 'userfile')).st_uid, os.stat(j(d, 'userfile')).st_gid)[1:])
    t('chmod 6755', lambda: (os.chmod(j(d, 'userfile'), 0o6755), mode(j(d, 'userfile')))[1])
    t('chown by root clears suid and sgid', lambda: (os.chown(j(d, 'userfile'), 1000, 1001), mode(j(d, 'userfile')), os.stat(j(d, 'userfile')).st_gid)[1:])
    t('chmod 2644 then chown keeps sgid without group exec', lambda: (os.chmod(j(d, 'userfile'), 0o2644), os.chown(j(d, 'userfile'), 1000, 1000), mode(j(d, 'userfile')))[2])
    os.chmod(j(d, 'userfile'), 0o644)
    write(j(d, 'othergrp'), b'o', 0o644)
    os.chown(j(d, 'othergrp'), 1000, 1001)
    t('chmod of a directory keeps sticky', lambda: mode(j(d, 'sticky')))
    t('chmod of a missing file', os.chmod, j(d, 'nope'), 0o644)
    t('chown -1 -1 leaves both', lambda: (os.chown(j(d, 'shared'), -1, -1), os.stat(j(d, 'shared')).st_uid, os.stat(j(d, 'shared')).st_gid)[1:])
    t('lchown of a symlink', lambda: (os.symlink('shared', j(d, 'sl')), os.lchown(j(d, 'sl'), 1000, 1000), os.lstat(j(d, 'sl')).st_uid, os.stat(j(d, 'sl')).st_uid)[2:])
    os.mkdir(j(d, 'sgid'))
    os.chown(j(d, 'sgid'), 0, 1000)
    os.chmod(j(d, 'sgid'), 0o2775)
    os.mkdir(j(d, 'sgid', 'child'))
    create(j(d, 'sgid', 'file'))
    t('mkdir in a setgid directory', lambda: (os.stat(j(d, 'sgid', 'child')).st_gid, mode(j(d, 'sgid', 'child'))[-4:-3]))
    t('create in a setgid directory', lambda: os.stat(j(d, 'sgid', 'file')).st_gid)
    t('root reads a 0600 file of its own', lambda: readall(j(d, 'rootonly')))
    os.chown(j(d, 'ro', 'existing'), 1000, 1000)
    os.chmod(j(d, 'ro', 'existing'), 0o000)
    t('root reads a mode 000 file of uid 1000', lambda: readall(j(d, 'ro', 'existing')))
    # for s_perm_user: a write by another uid clears set-user-ID (and set-group-ID of a group-
    # executable file) whatever the open mode (Granary serves write-only and O_APPEND descriptors
    # with direct_io)
    for name, m in (('suid_w', 0o6755), ('suid_a', 0o6755), ('suid_rw', 0o4755), ('sgid_noexec', 0o2664)):
        write(j(d, name), b'x', 0o644)
        os.chown(j(d, name), 1000, 1000)
        os.chmod(j(d, name), m)
    write(j(d, 'suid_root'), b'x', 0o644)
    os.chmod(j(d, 'suid_root'), 0o4755)
    t('a write by root keeps set-user-ID', lambda: (write_once(j(d, 'suid_root'), os.O_WRONLY), mode(j(d, 'suid_root')))[1])


def s_perm_user(d):
    """Run as uid 1000, gid 1000, no supplementary groups, after s_perm_root."""
    t('whoami', lambda: (os.getuid(), os.getgid(), os.getgroups()))

    t('a write-only write clears set-user-ID and set-group-ID', lambda: (write_once(j(d, 'suid_w'), os.O_WRONLY), mode(j(d, 'suid_w')), readall(j(d, 'suid_w')))[1:])
    t('an append clears set-user-ID and set-group-ID', lambda: (write_once(j(d, 'suid_a'), os.O_WRONLY | os.O_APPEND), mode(j(d, 'suid_a')), readall(j(d, 'suid_a')))[1:])
    t('a read-write write clears set-user-ID', lambda: (write_once(j(d, 'suid_rw'), os.O_RDWR), mode(j(d, 'suid_rw')))[1])
    t('a write keeps set-group-ID of a file without group execute', lambda: (write_once(j(d, 'sgid_noexec'), os.O_WRONLY), mode(j(d, 'sgid_noexec')))[1])
    t('read a 0600 root file', readall, j(d, 'rootonly'))
    t('read a 0644 root file', readall, j(d, 'shared'))
    t('open a 0644 root file for writing', os.open, j(d, 'shared'), os.O_WRONLY)
    t('O_TRUNC a 0644 root file', os.open, j(d, 'shared'), os.O_WRONLY | os.O_TRUNC)
    t('truncate(2) a 0644 root file', os.truncate, j(d, 'shared'), 0)
    t('write a 0666 root file', lambda: (write(j(d, 'open'), b'changed'), readall(j(d, 'open')))[1])
    t('access R_OK, W_OK of a 0644 root file', lambda: (os.access(j(d, 'shared'), os.R_OK), os.access(j(d, 'shared'), os.W_OK)))
    t('access of a 0600 root file', lambda: (os.access(j(d, 'rootonly'), os.R_OK), os.access(j(d, 'rootonly'), os.F_OK)))
    t('create in a 0755 root directory', create, j(d, 'ro', 'new'))
    t('mkdir in a 0755 root directory', os.mkdir, j(d, 'ro', 'newdir'))
    t('unlink in a 0755 root directory', os.unlink, j(d, 'ro', 'existing'))
    t('rename out of a 0755 root directory', os.rename, j(d, 'ro', 'existing'), j(d, 'sticky', 'moved'))
    t('read a mode 000 file of its own', readall, j(d, 'ro', 'existing'))
    t('chmod a root file', os.chmod, j(d, 'shared'), 0o666)
    t('chown a root file', os.chown, j(d, 'shared'), 1000, 1000)
    t('chown its own file to root', os.chown, j(d, 'userfile'), 0, -1)
    t('chgrp its own file to a group it is not in', os.chown, j(d, 'userfile'), -1, 0)
    t('chgrp its own file to its group', lambda: (os.chown(j(d, 'userfile'), -1, 1000), os.stat(j(d, 'userfile')).st_gid)[1])
    t('chmod its own file', lambda: (os.chmod(j(d, 'userfile'), 0o640), oct(os.stat(j(d, 'userfile')).st_mode & 0o7777))[1])
    t('non-root chmod g+s of its file in a group it is not in', lambda: (os.chmod(j(d, 'othergrp'), 0o2640), oct(os.stat(j(d, 'othergrp')).st_mode & 0o7777))[1])
    t('non-root chmod g+s of its file in its group', lambda: (os.chmod(j(d, 'userfile'), 0o2640), oct(os.stat(j(d, 'userfile')).st_mode & 0o7777))[1])
    t('explicit times on a 0666 root file', lambda: os.utime(j(d, 'open'), ns=(1, 1)))
    t('explicit times on its own file', lambda: (os.utime(j(d, 'userfile'), ns=(5, 7)), os.stat(j(d, 'userfile')).st_mtime_ns)[1])
    t('sticky: unlink a root file', os.unlink, j(d, 'sticky', 'rootfile'))
    t('sticky: rename a root file', os.rename, j(d, 'sticky', 'rootfile'), j(d, 'sticky', 'mine'))
    t('sticky: rename onto a root file', lambda: (create(j(d, 'sticky', 'own')), os.rename(j(d, 'sticky', 'own'), j(d, 'sticky', 'rootfile')))[1])
    t('sticky: write a 0666 root file', lambda: (write(j(d, 'sticky', 'rootfile'), b'w'), readall(j(d, 'sticky', 'rootfile')))[1])
    t('sticky: create and unlink its own file', lambda: (create(j(d, 'sticky', 'own2')), os.unlink(j(d, 'sticky', 'own2')), os.path.exists(j(d, 'sticky', 'own2')))[2])
    t('setxattr user.* on a 0644 root file', os.setxattr, j(d, 'shared'), 'user.u', b'1')
    t('setxattr user.* on its own file', lambda: (os.setxattr(j(d, 'userfile'), 'user.u', b'1'), os.getxattr(j(d, 'userfile'), 'user.u'))[1])
    t('getxattr on a 0600 root file', os.getxattr, j(d, 'rootonly'), 'user.u')
    t('listdir of a 0755 root directory', lambda: sorted(os.listdir(j(d, 'ro'))))


def s_layout_user(d):
    """Granary only, as uid 1000 after s_perm_root and s_perm_user: the granary.layout xattr."""
    e = j(d, 'sticky', 'empty')
    t('get granary.layout of a root directory', lambda: b'stripe_size=' in os.getxattr(j(d, 'ro'), 'granary.layout'))
    t('set granary.layout of a root directory', os.setxattr, j(d, 'ro'), 'granary.layout', b'stripe_size=65536')
    t('set granary.layout of its own file with data', os.setxattr, j(d, 'userfile'), 'granary.layout', b'stripe_size=65536')
    t('set granary.layout of its own empty file', lambda: (create(e), os.setxattr(e, 'granary.layout', b'stripe_size=131072'), b'stripe_size=131072 ' in os.getxattr(e, 'granary.layout'))[2])
    t('set a bad granary.layout', os.setxattr, e, 'granary.layout', b'stripe_size=1000')


def s_utime_user(d):
    """As uid 1000 after s_perm_root: UTIME_NOW needs write permission, not ownership."""
    t('UTIME_NOW on a 0666 root file', lambda: os.utime(j(d, 'open')))
    t('UTIME_NOW on a 0644 root file', os.utime, j(d, 'shared'))



# ------------------------------------------------------------------ execute permission, search

SCRIPT = b'#!/bin/sh\necho ran\n'


def run_file(p):
    """execve(2) of p (a script or a binary): (exit status, stdout) or the errno of execve."""
    r = subprocess.run([p], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return r.returncode, r.stdout.decode().strip()


def access_errno(p, mode):
    """access(2) of p: ok, or the errno name (os.access only answers True/False)."""
    check(LIBC.access(p.encode(), mode))


def s_exec_root(d):
    """As root: files with and without execute bits, and directories without search permission."""
    os.chmod(d, 0o755)
    files = [('x755', 0o755, 0, 0), ('x744', 0o744, 0, 0), ('x750_g1000', 0o750, 0, 1000),
             ('x750_g1001', 0o750, 0, 1001), ('x750_g1002', 0o750, 0, 1002), ('x707_g1000', 0o707, 0, 1000),
             ('x070_own', 0o070, 1000, 1000), ('x700_own', 0o700, 1000, 1000), ('nox', 0o644, 0, 0),
             ('x100_of_1000', 0o100, 1000, 1000), ('x001', 0o001, 0, 0)]
    for name, mode, uid, gid in files:
        write(j(d, name), SCRIPT)
        os.chown(j(d, name), uid, gid)
        os.chmod(j(d, name), mode)
    with open('/bin/true', 'rb') as f:
        write(j(d, 'true711'), f.read())
    os.chmod(j(d, 'true711'), 0o711)
    for sub, mode in (('d700', 0o700), ('d711', 0o711), ('d744', 0o744), ('d000', 0o000)):
        os.mkdir(j(d, sub))
        write(j(d, sub, 'f'), b'data')
        write(j(d, sub, 'x755'), SCRIPT)
        os.chmod(j(d, sub, 'x755'), 0o755)
        os.mkdir(j(d, sub, 'inner'), 0o755)
        write(j(d, sub, 'inner', 'g'), b'deep')
        os.chmod(j(d, sub), mode)
    t('root: access X_OK of a 0644 file', access_errno, j(d, 'nox'), os.X_OK)
    t('root: execve of a 0644 file', run_file, j(d, 'nox'))
    t('root: access R_OK|W_OK of a 0644 file', access_errno, j(d, 'nox'), os.R_OK | os.W_OK)
    t('root: access X_OK of a 0100 file of uid 1000', access_errno, j(d, 'x100_of_1000'), os.X_OK)
    t('root: execve of a 0100 file of uid 1000', run_file, j(d, 'x100_of_1000'))
    t('root: access X_OK of a 0001 file', access_errno, j(d, 'x001'), os.X_OK)
    t('root: execve of a 0744 file', run_file, j(d, 'x744'))
    t('root: execve of a 0711 binary', run_file, j(d, 'true711'))
    t('root: access X_OK of a 0000 directory', access_errno, j(d, 'd000'), os.X_OK)
    t('root: stat and read in a 0000 directory', lambda: (os.stat(j(d, 'd000', 'f')).st_size, readall(j(d, 'd000', 'inner', 'g'))))
    t('root: listdir of a 0000 directory', lambda: sorted(os.listdir(j(d, 'd000'))))


def s_exec_user(d):
    """As uid 1000, gid 1000, supplementary group 1001, after s_exec_root."""
    t('whoami', lambda: (os.getuid(), os.getgid(), os.getgroups()))
    for name in ('x755', 'x744', 'x750_g1000', 'x750_g1001', 'x750_g1002', 'x707_g1000', 'x070_own', 'x700_own', 'nox',
                 'x100_of_1000', 'x001'):
        t('access X_OK of ' + name, access_errno, j(d, name), os.X_OK)
        t('execve of ' + name, run_file, j(d, name))
    t('read a 0711 binary', readall, j(d, 'true711'))
    t('access R_OK of a 0711 binary', access_errno, j(d, 'true711'), os.R_OK)
    t('execve of a 0711 binary (execute without read)', run_file, j(d, 'true711'))
    for sub in ('d700', 'd711', 'd744', 'd000'):
        t('access X_OK of ' + sub, access_errno, j(d, sub), os.X_OK)
        t('stat of ' + sub + '/f', lambda: os.stat(j(d, sub, 'f')).st_size)
        t('read ' + sub + '/f', readall, j(d, sub, 'f'))
        t('access F_OK of ' + sub + '/f', access_errno, j(d, sub, 'f'), os.F_OK)
        t('read ' + sub + '/inner/g (two components)', readall, j(d, sub, 'inner', 'g'))
        t('execve of ' + sub + '/x755', run_file, j(d, sub, 'x755'))
        t('listdir of ' + sub, lambda: sorted(os.listdir(j(d, sub))))
        t('create in ' + sub, create, j(d, sub, 'new'))
        t('chdir into ' + sub, os.chdir, j(d, sub))


# ------------------------------------------------------------------ xattrs

def s_xattr(d):
    p = j(d, 'f')
    write(p, b'x')
    os.mkdir(j(d, 'dir'))
    t('getxattr of an absent name', os.getxattr, p, 'user.a')
    t('setxattr', os.setxattr, p, 'user.a', b'1')
    t('getxattr', os.getxattr, p, 'user.a')
    t('XATTR_CREATE of an existing name', os.setxattr, p, 'user.a', b'2', os.XATTR_CREATE)
    t('XATTR_REPLACE of an absent name', os.setxattr, p, 'user.b', b'2', os.XATTR_REPLACE)
    t('XATTR_REPLACE of an existing name', lambda: (os.setxattr(p, 'user.a', b'22', os.XATTR_REPLACE), os.getxattr(p, 'user.a'))[1])
    t('XATTR_CREATE of an absent name', lambda: (os.setxattr(p, 'user.b', b'', os.XATTR_CREATE), os.getxattr(p, 'user.b'))[1])
    t('binary value', lambda: (os.setxattr(p, 'user.bin', bytes(range(256))), os.getxattr(p, 'user.bin') == bytes(range(256)))[1])
    t('listxattr', lambda: sorted(os.listxattr(p)))
    t('removexattr', lambda: (os.removexattr(p, 'user.a'), sorted(os.listxattr(p)))[1])
    t('removexattr of an absent name', os.removexattr, p, 'user.a')
    t('255-byte name', lambda: (os.setxattr(p, 'user.' + 'n' * 250, b'v'), os.getxattr(p, 'user.' + 'n' * 250))[1])
    t('256-byte name', os.setxattr, p, 'user.' + 'n' * 251, b'v')
    t('directory xattr', lambda: (os.setxattr(j(d, 'dir'), 'user.d', b'dv'), os.getxattr(j(d, 'dir'), 'user.d'), os.listxattr(j(d, 'dir')))[1:])
    t('xattr of a missing file', os.getxattr, j(d, 'nope'), 'user.a')
    t('unknown namespace', os.setxattr, p, 'bogus.a', b'1')
    buf = ctypes.create_string_buffer(1)
    os.setxattr(p, 'user.long', b'0123456789')
    t('getxattr into a small buffer', lambda: check(-1 if LIBC.getxattr(p.encode(), b'user.long', buf, ctypes.c_size_t(1)) < 0 else 0))
    t('getxattr size query', lambda: LIBC.getxattr(p.encode(), b'user.long', None, ctypes.c_size_t(0)))
    t('listxattr into a small buffer', lambda: check(-1 if LIBC.listxattr(p.encode(), buf, ctypes.c_size_t(1)) < 0 else 0))
    t('xattrs survive a rename', lambda: (os.rename(p, j(d, 'g')), os.getxattr(j(d, 'g'), 'user.long'))[1])
    # The kernel asks for security.capability before every write and removes it if present
    # (file_remove_privs); a file created here must still answer that question truly once it has one.
    cap = j(d, 'cap')
    write(cap, b'x')
    t('security.capability of a new file', os.getxattr, cap, 'security.capability')
    cap_v2 = bytes.fromhex('01000002' '00040000' '00000000' '00000000' '00000000')  # v2, effective, CAP_NET_BIND_SERVICE
    t('set security.capability', os.setxattr, cap, 'security.capability', cap_v2)
    t('get security.capability', lambda: os.getxattr(cap, 'security.capability') == cap_v2)
    t('a write removes security.capability', lambda: (write_once(cap, os.O_WRONLY | os.O_APPEND), os.getxattr(cap, 'security.capability'))[1])
    t('the write landed', readall, cap)
    os.setxattr(cap, 'security.capability', cap_v2)
    t('a write-only write removes security.capability', lambda: (write_once(cap, os.O_WRONLY, 2, b'z'), os.getxattr(cap, 'security.capability'))[1])
    t('the write-only write landed', readall, cap)


def s_xattr_limits(d):
    """Granary only: value sizes (local ext4 limits them to a block)."""
    p = j(d, 'f')
    write(p, b'x')
    t('64 KiB value', lambda: (os.setxattr(p, 'user.big', b'v' * 65536), len(os.getxattr(p, 'user.big')))[1])
    t('64 KiB + 1 value', os.setxattr, p, 'user.bigger', b'v' * 65537)
    t('system.posix_acl_access', os.setxattr, p, 'system.posix_acl_access', b'\x02\x00\x00\x00')
    t('granary.layout is not listed', lambda: sorted(os.listxattr(p)))


# ------------------------------------------------------------------ statfs, mmap, readdir, unsupported

def s_statfs(d):
    v = os.statvfs(d)
    t('f_blocks * f_frsize (1 PiB)', lambda: v.f_blocks * v.f_frsize)
    t('f_blocks >= f_bfree >= f_bavail', lambda: v.f_blocks >= v.f_bfree >= v.f_bavail)
    t('f_files >= f_ffree', lambda: (v.f_files >= v.f_ffree, v.f_ffree > 0))
    t('f_bsize, f_namemax', lambda: (v.f_bsize > 0, v.f_namemax))
    write(j(d, 'two-mib'), data(2 * 1024 * 1024, 3))
    for i in range(20):
        create(j(d, 'i%d' % i))
    w = os.statvfs(d)
    t('f_bfree drops by at least 2 MiB after writing 2 MiB', lambda: (v.f_bfree - w.f_bfree) * w.f_frsize >= 2 * 1024 * 1024)
    t('f_ffree drops by at least 21 after 21 creates', lambda: v.f_ffree - w.f_ffree >= 21)
    t('f_files - f_ffree grows by at least 21', lambda: (w.f_files - w.f_ffree) - (v.f_files - v.f_ffree) >= 21)


def s_mmap(d):
    b = data(3 * 1024 * 1024 + 17, 4)
    p = j(d, 'm')
    write(p, b)
    fd = os.open(p, os.O_RDONLY)
    m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    t('mmap read', lambda: (len(m), sha(m[:]), m[65530:65540] == b[65530:65540], m[-17:] == b[-17:]))
    m.close()
    m = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    m[0:4] = b'PRIV'
    t('private mapping changes stay private', lambda: (m[0:4], readall(p)[:4] == b[:4]))
    m.close()
    os.close(fd)
    try:
        import numpy as np
        a = np.memmap(p, dtype=np.uint8, mode='r')
        t('numpy.memmap', lambda: (a.shape[0], int(a[:1024 * 1024].sum()) == sum(b[:1024 * 1024]), bytes(a[-5:]) == b[-5:]))
        del a
    except ImportError:
        t('numpy.memmap', lambda: 'numpy missing')
    fd = os.open(p, os.O_RDWR)
    m = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    m[100:105] = b'HELLO'
    m[2 * 1024 * 1024:2 * 1024 * 1024 + 5] = b'WORLD'
    m.flush()
    m.close()
    os.close(fd)
    c = readall(p)
    t('shared writable mapping is written back', lambda: (len(c), c[100:105], c[2 * 1024 * 1024:2 * 1024 * 1024 + 5], c[:100] == b[:100], c[105:2 * 1024 * 1024] == b[105:2 * 1024 * 1024]))


def s_descriptors(d):
    """Several descriptors of one file in one process: a write lands in time order, whichever
    descriptor made it and whichever is closed or synced first (POSIX write(2))."""
    def two_writers(p, n):
        """A file of n dots; descriptor A writes 100 x 'c' at 0, then B 10 x 'd' at 0."""
        write(p, b'.' * n)
        a = os.open(p, os.O_RDWR)
        b = os.open(p, os.O_RDWR)
        os.pwrite(a, b'c' * 100, 0)
        os.pwrite(b, b'd' * 10, 0)
        return a, b
    for n in (100, 150 * 1024):
        p = j(d, 'two%d' % n)
        a, b = two_writers(p, n)
        os.close(b)
        os.close(a)
        c = readall(p)
        t('%d-byte file: the later write through B wins, B closed first' % n, lambda: (len(c), c[:12], c[95:105]))
    p = j(d, 'synced')
    a, b = two_writers(p, 100)
    os.fsync(b)
    t('read through B after fsync(B)', lambda: os.pread(b, 12, 0))
    r = os.open(p, os.O_RDONLY)
    t('a third descriptor reads both writes', lambda: os.pread(r, 12, 0))
    os.close(a)
    os.close(b)
    os.close(r)
    t('after both closes', lambda: readall(p)[:12])
    p = j(d, 'disjoint')
    write(p, b'.' * 1000)
    a = os.open(p, os.O_RDWR)
    b = os.open(p, os.O_RDWR)
    os.pwrite(a, b'A' * 10, 0)
    os.pwrite(a, b'A' * 10, 500)
    os.pwrite(b, b'B' * 10, 200)
    os.pwrite(a, b'a' * 5, 205)
    os.close(a)
    os.close(b)
    c = readall(p)
    t('disjoint writes in one stripe through two descriptors', lambda: (c[:12], c[198:212], c[498:512], sha(c)))
    # Four descriptors writing interleaved 16 KiB chunks (each stripe is written by all four in
    # turn), closed in reverse order.
    p = j(d, 'interleaved')
    fds = [os.open(p, os.O_CREAT | os.O_WRONLY, 0o644) for _ in range(4)]
    for i in range(64):
        os.pwrite(fds[i % 4], bytes([65 + i % 4]) * 16384, i * 16384)
    for fd in reversed(fds):
        os.close(fd)
    c = readall(p)
    t('four descriptors writing interleaved chunks', lambda: (len(c), c[16380:16388], sha(c)))
    # Four threads, each with its own descriptor, writing interleaved 4 KiB chunks of 16 MiB at
    # once (regression: stripes written by several handles lost bytes when their uploads raced).
    import threading
    p = j(d, 'threads')
    fds = [os.open(p, os.O_CREAT | os.O_WRONLY, 0o644) for _ in range(4)]

    def writer(w):
        for i in range(w, 4096, 4):
            os.pwrite(fds[w], bytes([65 + w]) * 4096, i * 4096)
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for fd in fds:
        os.close(fd)
    c = readall(p)
    t('four threads writing interleaved chunks through their own descriptors', lambda: (len(c), sha(c)))
    # Threads that close their own descriptor as soon as they are done, while the others still
    # write (regression: a commit that had not yet reached the other handles let them build a
    # stripe on the old block: whole blocks read back as zeros in up to half the runs).
    bad = 0
    for run in range(20):
        p = j(d, 'closing%d' % run)
        fds = [os.open(p, os.O_CREAT | os.O_RDWR, 0o644) for _ in range(4)]
        go = threading.Barrier(4)

        def closer(w):
            go.wait()
            for k in range(20):
                os.pwrite(fds[w], bytes([1 + w * 20 + k]) * 4096, (k * 4 + w) * 4096)
            os.close(fds[w])
        threads = [threading.Thread(target=closer, args=(w,)) for w in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        c = readall(p)
        want = b''.join(bytes([1 + (i % 4) * 20 + i // 4]) * 4096 for i in range(80))
        bad += c != want
    t('runs of four threads closing their descriptors while the others write, with a byte wrong', lambda: bad)
    # Random mix on 64 KiB stripes: pwrite, an O_APPEND descriptor, ftruncate, fsync, reads,
    # close and reopen, over three descriptors; each read's bytes and the final file are printed.
    rnd = random.Random(11)
    p = j(d, 'mix')
    write(p, data(100 * 1024, 12))
    fds = [os.open(p, os.O_RDWR) for _ in range(3)]
    app = os.open(p, os.O_WRONLY | os.O_APPEND)
    for step in range(300):
        op = rnd.random()
        i = rnd.randrange(3)
        if op < 0.45:
            off = rnd.randrange(0, 260 * 1024)
            buf = data(rnd.choice([1, 7, 4096, 30000, 65536, 90000]), step)
            os.pwrite(fds[i], buf, off)
        elif op < 0.55:
            os.write(app, data(rnd.choice([3, 5000, 70000]), step))
        elif op < 0.6:
            os.ftruncate(fds[i], rnd.randrange(0, 300 * 1024))
        elif op < 0.67:
            os.fsync(fds[i])
        elif op < 0.9:
            off = rnd.randrange(0, 300 * 1024)
            got = os.pread(fds[i], rnd.choice([10, 5000, 131072]), off)
            t('mix step %d: pread at %d through descriptor %d' % (step, off, i), lambda: (len(got), sha(got), os.fstat(fds[i]).st_size))
        else:
            os.close(fds[i])
            fds[i] = os.open(p, os.O_RDWR)
    for fd in fds + [app]:
        os.close(fd)
    c = readall(p)
    t('mix: the file after all closes', lambda: (len(c), sha(c)))


def s_fstat_size(d):
    """The size fstat shows while threads extend a file through their own descriptors only grows
    (regression: a stat looking at the handles while a write moved the stripe's buffer between
    two of them, or reading the attributes just before a commit emptied a handle, answered a
    smaller size, often 0, in a quarter to half of such runs)."""
    import threading
    shrinks = 0
    for run in range(20):
        p = j(d, 'watched%d' % run)
        write(p, b'')
        done = threading.Event()
        seen = []

        def watcher():
            fd = os.open(p, os.O_RDONLY)
            last = 0
            while not done.is_set():
                s = os.fstat(fd).st_size
                if s < last:
                    seen.append((last, s))
                last = max(last, s)
            os.close(fd)

        def extender(w):
            fd = os.open(p, os.O_WRONLY)
            for k in range(w, 64, 4):  # 64 KiB blocks in one 4 MiB stripe
                os.pwrite(fd, bytes([65 + w]) * 65536, k * 65536)
            os.close(fd)
        wt = threading.Thread(target=watcher)
        wt.start()
        threads = [threading.Thread(target=extender, args=(w,)) for w in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        done.set()
        wt.join()
        c = readall(p)
        shrinks += len(seen) + (c != b''.join(bytes([65 + k % 4]) * 65536 for k in range(64)))
    t('runs of four threads extending a file while a fifth fstats it, sizes that went down or bytes wrong', lambda: shrinks)


def s_mmap_append(d):
    """Stores through a shared mapping of an O_APPEND descriptor change bytes in place (O_APPEND
    moves write(2) only)."""
    p = j(d, 'log')
    write(p, b'0123456789abcdef' * 4)
    fd = os.open(p, os.O_RDWR | os.O_APPEND)
    os.write(fd, b'+tail')
    m = mmap.mmap(fd, 0)
    m[3:10] = b'MMAPWRT'
    m.flush()
    m.close()
    os.write(fd, b'+more')
    os.close(fd)
    c = readall(p)
    t('shared mapping of an O_APPEND descriptor', lambda: (len(c), c[:20], c[-12:]))


def s_link_unsaved(d):
    """A write through one name of a file, not yet closed, is read at once through its other name,
    whose kernel inode had the old bytes cached (helper-found: read the old bytes after keep_cache
    was decided per version)."""
    for size in (8192, 1 << 20):
        a, b = j(d, 'a%d' % size), j(d, 'b%d' % size)
        write(a, bytes(range(256)) * (size // 256))
        os.link(a, b)
        readall(b)
        readall(b)  # b's pages cached and kept
        fd = os.open(a, os.O_RDWR)
        os.pwrite(fd, b'X' * 16, 100)
        got = readall(b)
        os.close(fd)
        t('%d bytes: an unsaved write through one name, read through the other' % size, lambda: got[98:118])
        t('%d bytes: after its close' % size, lambda: readall(b)[98:118])


def s_readdir(d):
    n = 2000
    names = ['e%04d-%s' % (i, 'x' * (i % 40)) for i in range(n)]
    random.Random(5).shuffle(names)
    for name in names:
        os.mkdir(j(d, name))
    got = os.listdir(d)
    t('entries', lambda: (len(got), len(set(got)), set(got) == set(names)))
    t('scandir types', lambda: sum(1 for e in os.scandir(d) if e.is_dir(follow_symlinks=False)))
    t('nlink of the directory', lambda: os.stat(d).st_nlink)
    for name in names[:500]:
        os.rmdir(j(d, name))
    got = os.listdir(d)
    t('after removing 500', lambda: (len(got), set(got) == set(names[500:])))
    t('listdir of a file', lambda: (create(j(d, 'file')), os.listdir(j(d, 'file')))[1])


def s_byte_names(d):
    """Names are bytes: any byte but '/' and NUL, valid UTF-8 or not (POSIX), through every call."""
    b = os.fsencode(d)
    names = [b'latin1-caf\xe9', b'bad-\xff\xfe', b'mixed-\xc3\xa9-\x80-ok', b'\x01ctl\x7f', b'new\nline',
             b'lone-\xed\xa0\x80-surrogate', '\u65e5\u672c-utf8'.encode()]
    for i, n in enumerate(names):
        t('create %r' % n, write, os.path.join(b, n), bytes([i]) * (i + 1))
    t('listdir', lambda: sorted(os.listdir(b)))
    t('stat sizes', lambda: [os.stat(os.path.join(b, n)).st_size for n in names])
    t('read back', lambda: [readall(os.path.join(b, n)) for n in names])
    t('a 255-byte name of 0xff bytes', create, os.path.join(b, b'\xff' * 255))
    t('a 256-byte name of 0xff bytes', create, os.path.join(b, b'\xff' * 256))
    t('mkdir of a non-UTF-8 name', os.mkdir, os.path.join(b, b'dir-\xfe'))
    t('create inside it', write, os.path.join(b, b'dir-\xfe', b'in-\xfd'), b'inside')
    t('read through the path', readall, os.path.join(b, b'dir-\xfe', b'in-\xfd'))
    t('rename to another non-UTF-8 name', os.rename, os.path.join(b, b'bad-\xff\xfe'), os.path.join(b, b'dir-\xfe', b'moved-\xfc'))
    t('the old name is gone', os.stat, os.path.join(b, b'bad-\xff\xfe'))
    t('the new one reads', readall, os.path.join(b, b'dir-\xfe', b'moved-\xfc'))
    t('symlink with a non-UTF-8 target', os.symlink, b'dir-\xfe/in-\xfd', os.path.join(b, b'link-\xfb'))
    t('readlink', os.readlink, os.path.join(b, b'link-\xfb'))
    t('read through the link', readall, os.path.join(b, b'link-\xfb'))
    t('hard link of a non-UTF-8 name', os.link, os.path.join(b, b'latin1-caf\xe9'), os.path.join(b, b'dir-\xfe', b'hl-\xe9'))
    t('nlink', lambda: os.stat(os.path.join(b, b'latin1-caf\xe9')).st_nlink)
    t('names in the directory', lambda: sorted(os.listdir(os.path.join(b, b'dir-\xfe'))))
    t('the UTF-8 twin of a Latin-1 name is another name', os.stat, os.path.join(b, 'latin1-caf\u00e9'.encode()))
    for n in names + [b'\xff' * 255]:
        if os.path.lexists(os.path.join(b, n)):
            os.unlink(os.path.join(b, n))
    t('unlink all', lambda: sorted(os.listdir(b)))


class Dirent(ctypes.Structure):
    """struct dirent of glibc on x86_64 (readdir(3))."""
    _fields_ = [('d_ino', ctypes.c_uint64), ('d_off', ctypes.c_int64), ('d_reclen', ctypes.c_ushort),
                ('d_type', ctypes.c_ubyte), ('d_name', ctypes.c_char * 256)]


def dirents(d):
    """(name, d_type, d_ino) of every entry readdir(3) returns for d."""
    LIBC.opendir.restype = ctypes.c_void_p
    LIBC.opendir.argtypes = [ctypes.c_char_p]
    LIBC.readdir.restype = ctypes.POINTER(Dirent)
    LIBC.readdir.argtypes = [ctypes.c_void_p]
    LIBC.closedir.argtypes = [ctypes.c_void_p]
    h = LIBC.opendir(d.encode())
    out = []
    while True:
        e = LIBC.readdir(h)
        if not e:
            break
        out.append((e.contents.d_name.decode(), e.contents.d_type, e.contents.d_ino))
    LIBC.closedir(h)
    return out


def s_dirent_types(d):
    """d_type and d_ino of readdir(3): a file, a directory, a symlink, a hard link (FIFOs: EPERM on Granary)."""
    create(j(d, 'f'))
    os.mkdir(j(d, 'sub'))
    os.symlink('f', j(d, 'ln'))
    os.link(j(d, 'f'), j(d, 'hard'))
    names = {'DT_DIR': 4, 'DT_REG': 8, 'DT_LNK': 10}
    kind = {v: k for k, v in names.items()}
    got = sorted(dirents(d))
    t('types', lambda: [(n, kind.get(ty, ty)) for n, ty, _ in got if n not in ('.', '..')])
    t('d_ino is st_ino', lambda: all(ino == os.lstat(j(d, n)).st_ino for n, _, ino in got if n != '..'))
    t('scandir inode', lambda: sorted((e.name, e.inode() == e.stat(follow_symlinks=False).st_ino) for e in os.scandir(d)))


def s_listdir_order(d):
    """Granary only: readdir returns names in byte order."""
    got = os.listdir(d)
    t('byte order', lambda: got == sorted(got, key=lambda s: s.encode()))


def s_unsupported(d):
    """Granary only: calls documented as unsupported or different."""
    p = j(d, 'f')
    write(p, b'x' * 10)
    fd = os.open(p, os.O_RDWR)
    LIBC.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    t('fallocate', lambda: check(LIBC.fallocate(fd, 0, 0, 4096)))
    t('ioctl FS_IOC_GETFLAGS', lambda: fcntl.ioctl(fd, 0x80086601, b'\0' * 8) and None)
    os.close(fd)
    t('mkfifo', os.mkfifo, j(d, 'fifo'))
    t('mknod of a character device', os.mknod, j(d, 'dev'), 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    write(j(d, 'g'), b'g')
    t('renameat2 RENAME_NOREPLACE onto an existing name', lambda: check(LIBC.renameat2(AT_FDCWD, p.encode(), AT_FDCWD, j(d, 'g').encode(), 1)))
    t('renameat2 RENAME_NOREPLACE onto a new name', lambda: check(LIBC.renameat2(AT_FDCWD, p.encode(), AT_FDCWD, j(d, 'new').encode(), 1)))
    t('renameat2 RENAME_EXCHANGE', lambda: check(LIBC.renameat2(AT_FDCWD, p.encode(), AT_FDCWD, j(d, 'g').encode(), 2)))
    s = os.stat(p)
    t('st_blocks = ceil(size/512)', lambda: s.st_blocks)
    write(j(d, 'big'), b'', 0o644)
    fd = os.open(j(d, 'big'), os.O_WRONLY)
    os.pwrite(fd, b'x', 10 * 1024 * 1024)
    os.close(fd)
    t('st_blocks counts holes', lambda: os.stat(j(d, 'big')).st_blocks)
    a0 = os.stat(p).st_atime_ns
    readall(p)
    t('reads do not update atime', lambda: os.stat(p).st_atime_ns == a0)
    os.mkdir(j(d, 'held'))
    fd = os.open(j(d, 'held', 'f'), os.O_CREAT | os.O_RDWR, 0o644)
    os.unlink(j(d, 'held', 'f'))
    t('rmdir of a directory with an unlinked file still open', os.rmdir, j(d, 'held'))
    os.close(fd)

    def rmdir_once_released():
        for _ in range(200):  # the kernel sends RELEASE after close(2) returns
            try:
                return os.rmdir(j(d, 'held'))
            except OSError as e:
                if e.errno != errno.ENOTEMPTY:
                    raise
                time.sleep(0.01)
        return os.rmdir(j(d, 'held'))
    t('rmdir once that file is closed', rmdir_once_released)
    t('rmdir of the mount root', os.rmdir, sys.argv[3] if len(sys.argv) > 3 else d)


if __name__ == '__main__':
    globals()['s_' + sys.argv[1]](sys.argv[2])
