#!/usr/bin/env bash
# Benchmark: the quickstart dataset (MLPerf Storage shapes) written and read with a PyTorch
# DataLoader through a Granary mount, side by side with the same work on a local directory,
# in one run. Prints MiB/s and samples/s and the Granary/local ratios. A benchmark, not a test.
#   bench/dataset-read.sh                 # full size (8 x 28 MiB .npz + 2000 x 110 KiB records)
#   SCALE=0.25 WORKERS=4 bench/dataset-read.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCALE="${SCALE:-1}"
WORKERS="${WORKERS:-4}"
PY="${GRANARY_PYTHON:-/usr/bin/python3}"
DS="$ROOT/tools/src/main/resources/dev/granary/tools/dataset.py"
tmp=$(mktemp -d /tmp/granary-bench.XXXXXX)
trap 'fusermount -u -z "$tmp/mnt" 2>/dev/null || true; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/mnt" "$tmp/local"

echo "== local directory ($tmp/local)"
"$PY" "$DS" generate --root "$tmp/local/ds" --scale "$SCALE" | tee "$tmp/local-gen.txt" | grep -v GRANARY_RESULT
sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
"$PY" "$DS" read --root "$tmp/local/ds" --workers "$WORKERS" | tee "$tmp/local-read.txt" | grep -v GRANARY_RESULT

echo "== Granary quickstart (3 MDS, 2 OSS, embedded S3, FUSE) at $tmp/mnt"
"$ROOT/granary" quickstart --exit --data "$tmp/data" --mount "$tmp/mnt" --dataset-scale "$SCALE" \
  --workers "$WORKERS" --base-port "${BASE_PORT:-25000}" | tee "$tmp/granary.txt"

"$PY" - "$tmp" <<'PYEOF'
import json, re, sys
tmp = sys.argv[1]
def result(path, op):
    for line in open(path):
        if line.startswith("GRANARY_RESULT "):
            r = json.loads(line[15:])
            if r["op"] == op:
                return r
local_gen, local_read = result(f"{tmp}/local-gen.txt", "generate"), result(f"{tmp}/local-read.txt", "read")
g = open(f"{tmp}/granary.txt").read()
def grab(shape):
    m = re.search(rf"{shape}: (\d+) samples, ([\d.]+) MiB in ([\d.]+) s", g)
    return dict(samples=int(m.group(1)), mib=float(m.group(2)), s=float(m.group(3)))
w = re.search(r"wrote (\d+) files, ([\d.]+) MiB in ([\d.]+) s", g)
print("\n| figure | local dir | Granary | Granary / local |")
print("|---|---|---|---|")
lw = local_gen["bytes"] / 2**20 / local_gen["seconds"]
gw = float(w.group(2)) / float(w.group(3))
print(f"| dataset write through the mount, MiB/s | {lw:,.1f} | {gw:,.1f} | {gw / lw:.2f} |")
for shape, unit in (("unet3d", "MiB/s"), ("resnet50", "samples/s")):
    l = local_read["figures"][shape]
    x = grab(shape)
    lv = l["mib_per_s"] if unit == "MiB/s" else l["samples_per_s"]
    gv = x["mib"] / x["s"] if unit == "MiB/s" else x["samples"] / x["s"]
    print(f"| DataLoader read {shape}, {unit} | {lv:,.1f} | {gv:,.1f} | {gv / lv:.2f} |")
PYEOF
