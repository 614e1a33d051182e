#!/usr/bin/env bash
# What this machine charges for a system call and for a hand-off between two threads: the unit
# costs behind every FUSE request, gRPC call and Raft write (README, "What bounds the targets").
# Usage: bench/syscost.sh [ROUNDS]   (installs gcc with apt-get when no C compiler is found)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CC="${CC:-}"
if [[ -z "$CC" ]]; then
  if command -v cc >/dev/null; then CC=cc
  elif command -v gcc >/dev/null; then CC=gcc
  else
    echo "syscost: installing gcc" >&2
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc >/dev/null
    CC=gcc
  fi
fi
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
"$CC" -O2 -pthread -o "$OUT/syscost" "$HERE/syscost.c"
"$OUT/syscost" "$@"
