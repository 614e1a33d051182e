#!/usr/bin/env bash
# The side-by-side benchmark of issue 4, in one command and one run: Granary (quickstart: embedded
# S3Proxy, 3 MDS, 2 OSS, FUSE mount in one JVM), s3fs-fuse and rclone mount (each on its own bucket
# of that same S3Proxy) and a local directory on the same disk. Sequential write/read (cold, warm),
# 4 parallel readers, random 128 KiB reads, small files, metadata, a PyTorch DataLoader, the
# MLPerf-Storage-style accelerator utilisation, S3 requests per workload, peak RSS, and the no-op
# FUSE ceiling of Granary's binding. Prints a Markdown table and writes
# bench/results/compare-<date>-s<scale>.md and .png. A benchmark: it asserts nothing.
#   bench/compare.sh                      # full size (2 GiB files, 5,000 small files, 10,000 metadata ops)
#   BENCH_SCALE=0.01 bench/compare.sh     # CI smoke: a couple of minutes
# Environment: BENCH_SCALE (default 1.0), BENCH_WORK (scratch parent, default /var/tmp),
#   BENCH_KEEP=1 (keep the scratch folder), RCLONE_VFS_CACHE_MODE (default full), BENCH_TARGETS
#   (a subset of local,granary,s3fs,rclone), BENCH_REPEAT (timed repetitions per figure, median
#   reported; default 3, 1 below BENCH_SCALE=0.25).
# Needs root (FUSE mounts, drop_caches, iptables request counting); installs s3fs, rclone, fio,
# iptables, python3-matplotlib and libfuse3-3 with apt when missing. Unmounts and stops everything on exit.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [[ $(id -u) -ne 0 ]]; then
  echo "bench/compare.sh: run as root (FUSE mounts, drop_caches, iptables, apt-get)" >&2
  exit 1
fi

"$ROOT/scripts/install-prereqs.sh"   # fuse, libfuse2, python3-torch, python3-numpy
pkgs=()
command -v s3fs >/dev/null 2>&1 || pkgs+=(s3fs)
command -v rclone >/dev/null 2>&1 || pkgs+=(rclone)
command -v fio >/dev/null 2>&1 || pkgs+=(fio)
command -v iptables >/dev/null 2>&1 || pkgs+=(iptables)
/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1 || pkgs+=(python3-matplotlib)
# libfuse3 alone (not the fuse3 tools, which replace libfuse2's fuse package) for bench/fuse3/NoopFuse3.java
ldconfig -p 2>/dev/null | grep -q 'libfuse3\.so\.3 ' || pkgs+=(libfuse3-3)
if [[ ${#pkgs[@]} -gt 0 ]]; then
  echo "bench/compare.sh: installing ${pkgs[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null 2>&1 || true
  apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

# The first python that can import torch (Debian's python3-torch is for /usr/bin/python3).
PY=""
for p in ${BENCH_PYTHON:-} /usr/bin/python3 python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch, numpy' >/dev/null 2>&1; then PY="$p"; break; fi
done
[[ -n $PY ]] || { echo "bench/compare.sh: no python can import torch and numpy" >&2; exit 1; }

"$ROOT/granary" --version >/dev/null   # builds Granary when the sources are newer than the jar
# Granary runs as deployed: with its JVM's AOT cache (scripts/aot-cache.sh, a training run of about
# a minute after each build; the launcher uses it). BENCH_AOT=off measures without it.
# The launcher's rule (a cache newer than the build) decides; compare.py reports BENCH_GRANARY_AOT.
aot_cache="$ROOT/tools/target/granary.aot" aot_jar="$ROOT/tools/target/granary-tools-0.1.0-SNAPSHOT.jar"
export BENCH_GRANARY_AOT=off
if [[ "${BENCH_AOT:-on}" == off ]]; then
  export GRANARY_AOT=off
elif [[ ",${BENCH_TARGETS:-granary}," == *,granary,* ]]; then
  if [[ ! "$aot_cache" -nt "$aot_jar" ]]; then
    "$ROOT/scripts/aot-cache.sh" || echo "bench/compare.sh: no AOT cache; Granary runs without one" >&2
  fi
  [[ "$aot_cache" -nt "$aot_jar" ]] && BENCH_GRANARY_AOT=on
fi
source "$ROOT/scripts/java-home.sh"     # JAVA_HOME for bench/fuse3/NoopFuse3.java (a JDK 22+ runs it)

WORK=$(mktemp -d "${BENCH_WORK:-/var/tmp}/granary-compare.XXXXXX")
pypid=""

# Stops whatever compare.py recorded (pids, mounts, the iptables chain), even if it died.
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $pypid ]] && kill -0 "$pypid" 2>/dev/null; then
    kill -TERM "$pypid" 2>/dev/null || true
    for _ in $(seq 1 120); do kill -0 "$pypid" 2>/dev/null || break; sleep 1; done
    kill -KILL "$pypid" 2>/dev/null || true
  fi
  if [[ -s $WORK/pids ]]; then
    while read -r pid; do kill -TERM "$pid" 2>/dev/null || true; done <"$WORK/pids"
    for _ in $(seq 1 30); do
      alive=0
      while read -r pid; do kill -0 "$pid" 2>/dev/null && alive=1; done <"$WORK/pids"
      [[ $alive -eq 0 ]] && break
      sleep 1
    done
    while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done <"$WORK/pids"
  fi
  if [[ -s $WORK/mounts ]]; then
    while read -r m; do
      if awk -v m="$m" '$2 == m {found=1} END {exit !found}' /proc/mounts; then fusermount -u -z "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; fi
    done <"$WORK/mounts"
  fi
  if [[ -s $WORK/iptables ]]; then
    read -r chain port <"$WORK/iptables"
    iptables -w -D OUTPUT -o lo -p tcp --dport "$port" -j "$chain" 2>/dev/null || true
    iptables -w -F "$chain" 2>/dev/null || true
    iptables -w -X "$chain" 2>/dev/null || true
  fi
  if [[ ${BENCH_KEEP:-0} == 1 ]]; then
    echo "bench/compare.sh: kept $WORK" >&2
  else
    rm -rf --one-file-system "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$PY" "$ROOT/bench/compare.py" --work "$WORK" --python "$PY" "$@" &
pypid=$!
wait "$pypid"
