#!/usr/bin/env python3
"""Appenders on two mounts of one Granary with a `tail -f` reader on each (TwoClientsFuseTest).

usage: append_tail.py FILE_VIA_MOUNT1 FILE_VIA_MOUNT2 RECORDS_PER_WRITER [rdwr|wronly]

With `rdwr`, the writers open O_RDWR | O_APPEND (Python's "a+"); else O_WRONLY | O_APPEND.

Five writer processes (0, 2, 4 on mount 1; 1, 3 on mount 2) append records of varying length
("w<id> <seq> <x * 0..120>\\n") with O_APPEND while a reader on each mount reads the file to its
end again and again. Then both mounts read the file: it must hold every record exactly once, no
NUL byte, no torn line. Prints one line per mount and RESULT OK or RESULT BAD (exit 1).
"""
import multiprocessing as mp
import os
import random
import sys
import time

WRITERS = 5


def writer(path, wid, n, go, access):
    rnd = random.Random(wid)
    time.sleep(max(0, go - time.time()))  # all writers start together
    fd = os.open(path, access | os.O_APPEND)
    for i in range(n):
        rec = ('w%d %06d %s\n' % (wid, i, 'x' * rnd.randint(0, 120))).encode()
        assert os.write(fd, rec) == len(rec)
    os.close(fd)


def tail(path, stop):
    with open(path, 'rb') as f:
        while not stop.is_set():
            if not f.read():
                time.sleep(0.0005)


def check(path, n, tag):
    b = open(path, 'rb').read()
    lines = b.split(b'\n')
    bad = [l for l in lines[:-1] if b'\0' in l or not l.startswith(b'w')]
    seen = {}
    for l in lines[:-1]:
        parts = l.split(b' ')
        if b'\0' not in l and len(parts) == 3:
            seen[(parts[0], parts[1])] = seen.get((parts[0], parts[1]), 0) + 1
    dup = sum(1 for v in seen.values() if v > 1)
    missing = WRITERS * n - len(seen)
    print('%s: %d bytes, %d NUL bytes, %d bad lines, %d records missing, %d duplicated, tail %r'
          % (tag, len(b), b.count(b'\0'), len(bad), missing, dup, lines[-1][:20]))
    for l in bad[:3]:
        print('  bad line:', l[:80])
    return b.count(b'\0') + len(bad) + missing + dup + len(lines[-1])


if __name__ == '__main__':
    p1, p2, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    access = os.O_RDWR if len(sys.argv) > 4 and sys.argv[4] == 'rdwr' else os.O_WRONLY
    stop = mp.Event()
    readers = [mp.Process(target=tail, args=(p, stop)) for p in (p1, p2)]
    for r in readers:
        r.start()
    go = time.time() + 1.0
    ws = [mp.Process(target=writer, args=(p1 if w % 2 == 0 else p2, w, n, go, access)) for w in range(WRITERS)]
    t0 = time.time()
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    print('writers took %.1f s' % (time.time() - t0))
    stop.set()
    for r in readers:
        r.join()
    failed = any(w.exitcode != 0 for w in ws) or check(p1, n, 'mount 1') + check(p2, n, 'mount 2') > 0
    print('RESULT', 'BAD' if failed else 'OK')
    sys.exit(1 if failed else 0)
