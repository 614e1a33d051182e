#!/usr/bin/env bash
# Makes Granary's AOT cache, tools/target/granary.aot, which the launcher then passes to every JVM it
# starts (-XX:AOTCache): JDK 25's ahead-of-time cache (JEP 483: classes loaded and linked ahead of
# time; JEP 514: made in one training run; JEP 515: the training run's method profiles, so the JIT
# compiles hot methods from their first calls instead of profiling them again). Run it once after
# each build, on the machine (or image) that runs Granary; the launcher ignores a cache older than
# the build, and a JDK older than 25 ignores it too.
#
# The training run is a quickstart (`granary quickstart --dataset none`) on a private data folder,
# mount point and ports, through which this script writes, reads (cold and warm), lists, links,
# renames and removes files, big and small, the calls a training node and an admin make. About a
# minute; needs root and /dev/fuse, as the quickstart does.
#   scripts/aot-cache.sh            # writes tools/target/granary.aot
# Measured (quickstart, 2 cores): `granary cache drop` 3.9 s -> 2.4 s; quickstart to mounted
# about 11.5 s -> 8.5 s; a 1 GiB cold read reaches its steady rate after 3-4 reads instead of 8-12.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/java-home.sh"
CACHE="$ROOT/tools/target/granary.aot"

major=$(jdk_release_major "$JAVA_HOME")
if [[ $major -lt 25 ]]; then
  echo "aot-cache: needs JDK 25 or newer (JAVA_HOME=$JAVA_HOME is $major); nothing made" >&2
  exit 1
fi
if [[ $(id -u) -ne 0 || ! -e /dev/fuse ]]; then
  echo "aot-cache: the training run mounts Granary with FUSE: run it as root on a machine with /dev/fuse" >&2
  exit 1
fi

"$ROOT/granary" --version >/dev/null # builds first when the sources are newer than the build
tmp=$(mktemp -d "${TMPDIR:-/tmp}/granary-aot.XXXXXX")
mnt="$tmp/mnt"
mkdir -p "$mnt"
pid=""
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    sleep 2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  umount -l "$mnt" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

port=$((30000 + (RANDOM % 200) * 100))
echo "aot-cache: training run (quickstart on ports from $port, data in $tmp)..." >&2
GRANARY_AOT_OUTPUT="$tmp/granary.aot" "$ROOT/granary" quickstart --base-port "$port" --dataset none \
  --data "$tmp/data" --mount "$mnt" >"$tmp/quickstart.log" 2>&1 &
pid=$!
for _ in $(seq 180); do
  grep -q "Mounted at" "$tmp/quickstart.log" && break
  kill -0 "$pid" 2>/dev/null || { echo "aot-cache: the quickstart stopped:" >&2; tail -20 "$tmp/quickstart.log" >&2; exit 1; }
  sleep 1
done
grep -q "Mounted at" "$tmp/quickstart.log" || { echo "aot-cache: the quickstart did not mount in 180 s" >&2; exit 1; }

cold() {
  sync
  echo 3 > /proc/sys/vm/drop_caches
  GRANARY_AOT=off "$ROOT/granary" cache drop -c "$tmp/data/granary.yaml" >/dev/null
}
# Large files: written with fsync, read cold four times and warm once, 4 at once, at random.
dd if=/dev/urandom of="$mnt/big" bs=1M count=256 conv=fsync status=none
for _ in 1 2 3 4; do cold; dd if="$mnt/big" of=/dev/null bs=1M status=none; done
dd if="$mnt/big" of=/dev/null bs=1M status=none
for i in 1 2 3 4; do dd if=/dev/urandom of="$mnt/p$i" bs=1M count=32 conv=fsync status=none; done
cold
readers=()
for i in 1 2 3 4; do dd if="$mnt/p$i" of=/dev/null bs=1M status=none & readers+=($!); done
wait "${readers[@]}" # not a bare wait: the quickstart is a child too
# Small files and metadata: written, read, stat'ed, listed, linked, renamed, removed (8 threads).
python3 - "$mnt" <<'EOF'
import concurrent.futures, os, random, sys
root = sys.argv[1]
big = os.path.join(root, "big")
with open(big, "rb") as f:  # random 128 KiB reads
    size = os.fstat(f.fileno()).st_size
    for _ in range(400):
        os.pread(f.fileno(), 128 << 10, random.randrange(size >> 17) << 17)
data = os.urandom(100 << 10)
for r in range(3):
    d = os.path.join(root, f"small{r}")
    os.mkdir(d)
    names = [os.path.join(d, f"s{i:05d}") for i in range(600)]
    def write(p):
        with open(p, "wb") as f:
            f.write(data)
    def read(p):
        with open(p, "rb") as f:
            f.read()
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(write, names))
        list(ex.map(read, names))
    for p in names:
        os.stat(p)
    os.listdir(d)
    for i, p in enumerate(names[:100]):
        os.link(p, p + ".l")
        os.rename(p + ".l", p + ".m")
        os.symlink(os.path.basename(p), p + ".s")
        os.chmod(p, 0o600)
        os.truncate(p, 4096)
    meta = os.path.join(d, "meta")
    os.mkdir(meta)
    for i in range(2000):
        os.close(os.open(os.path.join(meta, f"m{i:05d}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    for i in range(2000):
        os.stat(os.path.join(meta, f"m{i:05d}"))
    os.listdir(meta)
    for n in os.listdir(meta):
        os.unlink(os.path.join(meta, n))
    os.rmdir(meta)
    for n in os.listdir(d):
        os.unlink(os.path.join(d, n))
    os.rmdir(d)
EOF

echo "aot-cache: stopping the training run (the JVM writes the cache as it exits)..." >&2
kill -TERM "$pid"
for _ in $(seq 120); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
if kill -0 "$pid" 2>/dev/null || [[ ! -s "$tmp/granary.aot" ]]; then
  echo "aot-cache: the training run wrote no cache:" >&2
  tail -20 "$tmp/quickstart.log" >&2
  exit 1
fi
pid=""
mv "$tmp/granary.aot" "$CACHE"
echo "aot-cache: wrote $CACHE ($(du -h "$CACHE" | cut -f1)); the launcher uses it until the next build" >&2
