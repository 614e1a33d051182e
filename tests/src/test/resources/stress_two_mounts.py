#!/usr/bin/env python3
"""Stress of two mounts of one Granary against a model (helper-written, session 27): writers on
both mounts (pwrite, O_TRUNC, truncate, O_APPEND, two descriptors, mmap + msync, rename over),
long-lived readers, a `granary gc --grace 0s` loop (off with NOGC=1), each file re-read through
the other mount and a third one after every operation. Readers check only reads during which no operation on the file ran through their own mount (its
writes reach that mount's page cache before the model has them). Ops pwrite,truncate,twofd,mmap,append left
wrong bytes in the file until 2026-12-04 (an older descriptor refilled the page cache with replaced
bytes, and a shared-mapping store wrote them back: docs/SEMANTICS.md, mmap); 0 faults in 4 runs since.

usage: stress_two_mounts.py DIRNAME SECONDS NFILES [ops]
env: MNT1, MNT2, MNT3 (three mounts of one cluster; default /tmp/h1m, /tmp/h1m2, /tmp/h1m3),
     GRANARY (the launcher, default ./granary), CONF (its config, default /tmp/h1d/granary.yaml)"""
import os, sys, random, hashlib, time, mmap, subprocess, threading, errno, traceback

D = sys.argv[1]; SECS = float(sys.argv[2]); NF = int(sys.argv[3])
OPS = sys.argv[4].split(',') if len(sys.argv) > 4 else ['pwrite', 'otrunc', 'truncate', 'append', 'twofd', 'mmap', 'rename']
M1 = os.environ.get('MNT1', '/tmp/h1m'); M2 = os.environ.get('MNT2', '/tmp/h1m2'); M3 = os.environ.get('MNT3', '/tmp/h1m3')
GRANARY = os.environ.get('GRANARY', './granary'); CONF = os.environ.get('CONF', '/tmp/h1d/granary.yaml')
MA = M1 + '/' + D; MB = M2 + '/' + D
MOUNTS = [MA, MB]
PG = 4096
ZERO = hashlib.md5(bytes(PG)).digest()
lock = threading.Lock()
faults = []; errors = []; stats = {}
stop = time.time() + SECS

def log(*a):
    with lock:
        print(time.strftime('%H:%M:%S'), *a, flush=True)

def bump(k, n=1):
    with lock:
        stats[k] = stats.get(k, 0) + n

class F:
    def __init__(s, i):
        s.name = 'f%d' % i
        s.model = bytearray()
        s.hist = {}  # page offset -> set of md5
        s.recent = {}  # page offset -> the last 8 versions' bytes (to explain a fault)
        s.opcount = {}  # mount -> starts and ends of operations on this file through it
        s.mu = threading.Lock()
        s.ops = []
        s.last = ''
    def record(s):
        m = s.model
        h = s.hist
        for off in range(0, len(m) - PG + 1, PG):
            pg = bytes(m[off:off + PG])
            d = hashlib.md5(pg).digest()
            vs = h.setdefault(off, set())
            if d not in vs:
                vs.add(d)
                r = s.recent.setdefault(off, [])
                r.append(pg)
                del r[:-8]

files = [F(i) for i in range(NF)]

def rnd(n):
    return random.randbytes(n)

def readall(path):
    with open(path, 'rb', buffering=0) as f:
        out = bytearray()
        while True:
            b = f.read(1 << 20)
            if not b:
                return bytes(out)
            out += b

def first_diff(a, b):
    n = min(len(a), len(b))
    for i in range(0, n, PG):
        if a[i:i + PG] != b[i:i + PG]:
            for j in range(i, min(i + PG, n)):
                if a[j] != b[j]:
                    return j
    return n if len(a) != len(b) else -1

def describe(got, want):
    d = first_diff(got, want)
    # count wrong pages and whether they are zeros
    bad = 0; zeros = 0
    for i in range(0, max(len(got), len(want)), PG):
        g = got[i:i + PG]; w = want[i:i + PG]
        if g != w:
            bad += 1
            if g == bytes(len(g)):
                zeros += 1
    return 'len got %d want %d, first diff at %d, %d wrong pages (%d all-zero)' % (len(got), len(want), d, bad, zeros)

def verify(f, where):
    for m in (MOUNTS if where == 'both' else [where]):
        p = m + '/' + f.name
        want = bytes(f.model)
        try:
            got = readall(p)
        except OSError as e:
            errors.append((f.name, 'verify-read', m, str(e))); log('ERR verify read', p, e); bump('err')
            continue
        if got != want:
            time.sleep(2.5)
            got2 = readall(p)
            msg = '%s via %s: %s; after 2.5s: %s' % (f.name, m, describe(got, want), 'OK' if got2 == want else describe(got2, want))
            faults.append(msg); log('FAULT', msg)
            for o in f.ops[-6:]: log('   op', o)
            bad=[i for i in range(0,len(got2),PG) if got2[i:i+PG]!=want[i:i+PG]]
            log('   bad pages', bad[:3], '...', bad[-3:])
            if got2 != want:
                try:
                    g3 = readall(M3 + '/' + D + '/' + f.name)
                    log('   third mount:', 'OK(model)' if g3 == want else 'same as got2' if g3 == got2 else describe(g3, want))
                except OSError as e:
                    log('   third mount err', e)
            if got2 != want:
                f.model = bytearray(got2)  # resync to keep going
                f.record()
        else:
            bump('verify_ok')

def op_pwrite(f, m):
    p = m + '/' + f.name
    fd = os.open(p, os.O_RDWR)
    try:
        for _ in range(random.randint(1, 4)):
            size = len(f.model)
            off = random.randint(0, size + 100_000)
            n = random.randint(1, 200_000)
            data = rnd(n)
            os.pwrite(fd, data, off)
            f.last += ' pw(%d,%d)' % (off, n)
            if off > len(f.model):
                f.model += bytes(off - len(f.model))
            f.model[off:off + n] = data
            f.record()
            if random.random() < 0.3:
                os.fsync(fd)
    finally:
        os.close(fd)

def op_otrunc(f, m):
    p = m + '/' + f.name
    n = random.randint(270_000, 1_500_000)
    data = rnd(n)
    fd = os.open(p, os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o644)
    try:
        f.model = bytearray(); f.record()
        pos = 0
        while pos < n:
            k = min(n - pos, random.choice([4096, 65536, 131072, 300000]))
            os.write(fd, data[pos:pos + k]); pos += k
            f.model += data[pos - k:pos]
            f.record()
    finally:
        os.close(fd)

def op_truncate(f, m):
    p = m + '/' + f.name
    n = random.choice([random.randint(0, 2_000_000), random.randint(260_000, 600_000), (len(f.model) // 65536) * 65536])
    os.truncate(p, n)
    if n < len(f.model):
        del f.model[n:]
    else:
        f.model += bytes(n - len(f.model))
    f.record()

def op_append(f, m):
    p = m + '/' + f.name
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    try:
        for _ in range(random.randint(1, 3)):
            data = rnd(random.randint(1, 150_000))
            os.write(fd, data)
            f.model += data
            f.record()
    finally:
        os.close(fd)

def op_twofd(f, m):
    p = m + '/' + f.name
    fd1 = os.open(p, os.O_RDWR); fd2 = os.open(p, os.O_RDWR)
    try:
        size = max(len(f.model), 300_000)
        a = random.randint(0, size - 1); b = random.randint(0, size)
        lo, hi = min(a, b), max(a, b)
        mid = random.randint(lo, hi)
        d1 = rnd(mid - lo); d2 = rnd(hi - mid)
        os.pwrite(fd1, d1, lo)
        if lo + len(d1) > len(f.model):
            f.model += bytes(lo + len(d1) - len(f.model))
        f.model[lo:lo + len(d1)] = d1; f.record()
        os.pwrite(fd2, d2, mid)
        f.last = ' fd1(%d,%d) fd2(%d,%d)' % (lo, len(d1), mid, len(d2))
        if mid + len(d2) > len(f.model):
            f.model += bytes(mid + len(d2) - len(f.model))
        f.model[mid:mid + len(d2)] = d2; f.record()
        if random.random() < 0.5:
            os.close(fd1); fd1 = -1
    finally:
        if fd1 >= 0:
            os.close(fd1)
        os.close(fd2)

def op_mmap(f, m):
    p = m + '/' + f.name
    size = len(f.model)
    if size == 0:
        return op_otrunc(f, m)
    fd = os.open(p, os.O_RDWR)
    try:
        mm = mmap.mmap(fd, size)
        off = random.randint(0, size - 1); n = random.randint(1, min(200_000, size - off))
        data = rnd(n)
        mm[off:off + n] = data
        f.last = ' mm(%d,%d)' % (off, n)
        f.model[off:off + n] = data; f.record()
        mm.flush(); mm.close()
    finally:
        os.close(fd)

def op_rename(f, m):
    # write a new version to a temp name, rename over (replace-by-rename, as checkpoints do)
    p = m + '/' + f.name
    t = m + '/.' + f.name + '.tmp'
    n = random.randint(270_000, 1_200_000)
    data = rnd(n)
    with open(t, 'wb') as o:
        o.write(data)
    old = f.model
    f.model = bytearray(data); f.record()
    try:
        os.rename(t, p)
    except OSError:
        f.model = old
        raise

OPF = {'pwrite': op_pwrite, 'otrunc': op_otrunc, 'truncate': op_truncate, 'append': op_append,
       'twofd': op_twofd, 'mmap': op_mmap, 'rename': op_rename}

def writer(f):
    while time.time() < stop:
        m = random.choice(MOUNTS)
        op = random.choice(OPS)
        with f.mu:
            try:
                size0 = len(f.model)
                f.opcount[m] = f.opcount.get(m, 0) + 1  # odd while an operation runs through m
                try:
                    OPF[op](f, m)
                finally:
                    f.opcount[m] += 1
                f.ops.append('%s %s %s size %d->%d %s' % (time.strftime('%H:%M:%S'), op, m, size0, len(f.model), getattr(f, 'last', '')))
                f.last = ''
                bump('op_' + op)
            except OSError as e:
                errors.append((f.name, op, m, str(e))); log('ERR op', op, f.name, m, e); bump('err')
                # model uncertain: resync from the writer's mount
                try:
                    time.sleep(1)
                    f.model = bytearray(readall(m + '/' + f.name)); f.record()
                except OSError as e2:
                    log('ERR resync', e2)
                continue
            other = MB if m == MA else MA
            verify(f, other if random.random() < 0.7 else 'both')
        time.sleep(random.random() * 0.3)

def segments(page, versions):
    """The page as runs of bytes equal to one of versions (newest last: -1, -2, ...; 'z' zero, '?' none)."""
    out = []; j = 0
    while j < len(page):
        best = None
        for v in range(len(versions) - 1, -1, -1):
            k = j
            while k < len(page) and versions[v][k] == page[k]:
                k += 1
            if k - j >= 8 and (best is None or k > best[1]):
                best = (v - len(versions), k)
        if best is None:
            k = j
            while k < len(page) and page[k] == 0:
                k += 1
            best = ('z', k) if k - j >= 8 else ('?', j + 1)
        if out and out[-1][0] == best[0]:
            out[-1][2] = best[1]
        else:
            out.append([best[0], j, best[1]])
        j = best[1]
    return ' '.join('%s[%d,%d)' % (t, a, b) for t, a, b in out)

def reader(m, idx):
    rng = random.Random(idx)
    while time.time() < stop:
        f = rng.choice(files)
        p = m + '/' + f.name
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError as e:
            continue
        try:
            until = time.time() + rng.uniform(3, 12)
            while time.time() < until and time.time() < stop:
                off = rng.randrange(0, 2_200_000, PG)
                n = rng.choice([PG, 65536, 262144, 1 << 20])
                c0 = f.opcount.get(m, 0)
                try:
                    b = os.pread(fd, n, off)
                except OSError as e:
                    bump('reader_err_' + errno.errorcode.get(e.errno, str(e.errno)))
                    if e.errno in (errno.ESTALE, errno.EIO):
                        break
                    continue
                bump('reads')
                if c0 % 2 == 1 or f.opcount.get(m, 0) != c0:
                    # a write through this mount ran during the read: its bytes are in the mount's
                    # page cache at once (before the model records them), and a buffered read
                    # racing a write may see part of it (Linux, any filesystem): not checked
                    bump('reads_unchecked_same_mount_write')
                    b = b''
                for i in range(0, len(b) - PG + 1, PG):
                    h = hashlib.md5(b[i:i + PG]).digest()
                    if h == ZERO:
                        continue
                    s = f.hist.get(off + i)
                    if s is None or h not in s:
                        page = b[i:i + PG]
                        cur = bytes(f.model[off + i:off + i + PG]).ljust(PG, b'\0')
                        diff = [j for j in range(PG) if page[j] != cur[j]]
                        near = ('%d bytes differ from the current model, in [%d, %d); %d of them zero' % (
                            len(diff), diff[0], diff[-1] + 1, sum(1 for j in diff if page[j] == 0))) if diff else 'same as the current model'
                        msg = 'reader %s %s page at %d (read off %d n %d) matches no version (%s; as segments of the last versions: %s; last ops: %s)' % (
                            m, f.name, off + i, off, n, near, segments(page, f.recent.get(off + i, [])), ' | '.join(f.ops[-3:]))
                        faults.append(msg); log('FAULT', msg)
                        break
                time.sleep(rng.random() * 0.5)
        finally:
            os.close(fd)

GCLOG = []
def gcloop():
    env = dict(os.environ, JAVA_HOME='/usr/lib/jvm/temurin-25-jdk-amd64', GRANARY_JAVA_OPTS='-Xmx256m')
    while time.time() < stop:
        r = subprocess.run([GRANARY, 'gc', '-c', CONF, '--grace', '0s'],
                           capture_output=True, text=True, env=env)
        out = (r.stdout + r.stderr).strip().splitlines()
        GCLOG.append(out[-1] if out else '')
        try:
            n = int(out[-1].split(':')[1].split()[0])
            bump('gc_deleted', n)
        except Exception:
            log('gc output', out[-3:])
        bump('gc_passes')
        time.sleep(1)

def main():
    for m in MOUNTS:
        pass
    os.makedirs(MA, exist_ok=True)
    if not os.listdir(MA):
        subprocess.run([GRANARY, 'setstripe', '-S', '64K', MA], check=True,
                       env=dict(os.environ, JAVA_HOME='/usr/lib/jvm/temurin-25-jdk-amd64', GRANARY_JAVA_OPTS='-Xmx256m'))
    for f in files:
        op_otrunc(f, MA)
    time.sleep(1)
    for f in files:
        verify(f, 'both')
    ths = [threading.Thread(target=writer, args=(f,)) for f in files]
    ths += [threading.Thread(target=reader, args=(m, i)) for i, m in enumerate(MOUNTS)]
    if not os.environ.get('NOGC'): ths.append(threading.Thread(target=gcloop))
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    # final GC pass, then verify through both mounts
    subprocess.run([GRANARY, 'gc', '-c', CONF, '--grace', '0s'],
                   env=dict(os.environ, JAVA_HOME='/usr/lib/jvm/temurin-25-jdk-amd64', GRANARY_JAVA_OPTS='-Xmx256m'))
    for f in files:
        verify(f, 'both')
    with open('/tmp/stress-model-%s.txt' % D, 'w') as o:
        for f in files:
            o.write('%s %d %s\n' % (f.name, len(f.model), hashlib.sha256(f.model).hexdigest()))
    log('STATS', stats)
    log('ERRORS', len(errors), errors[:20])
    log('FAULTS', len(faults))
    for x in faults:
        print('  ', x)

main()
