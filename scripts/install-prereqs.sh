#!/usr/bin/env bash
# Installs what Granary needs on a Debian/Ubuntu machine (run as root):
#   fuse + libfuse2   the FUSE mount (jnr-fuse loads libfuse.so.2; fusermount unmounts)
#   python3-torch, python3-numpy   the PyTorch DataLoader of quickstart and the benchmarks
#   a JDK 21+         only when none is found (Debian's openjdk-21/25 when the release has one)
#   git, tar, diff    used by the end-to-end tests
# Usage: scripts/install-prereqs.sh [--no-python]
set -euo pipefail
want_python=1
[[ "${1:-}" == "--no-python" ]] && want_python=0

if [[ $(id -u) -ne 0 ]]; then
  echo "install-prereqs: must run as root (apt-get); install these by hand instead: fuse libfuse2 python3-torch python3-numpy" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
pkgs=()
have_lib() { ldconfig -p 2>/dev/null | grep -q "$1"; }
have_lib 'libfuse.so.2' || pkgs+=(libfuse2)
# fuse (fusermount) and fuse3 (fusermount3) conflict on Debian: either one is enough.
command -v fusermount >/dev/null 2>&1 || command -v fusermount3 >/dev/null 2>&1 || pkgs+=(fuse)
command -v git >/dev/null 2>&1 || pkgs+=(git)
if [[ $want_python -eq 1 ]]; then
  /usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1 || pkgs+=(python3-torch python3-numpy)
fi
if [[ ${#pkgs[@]} -gt 0 ]]; then
  echo "install-prereqs: installing ${pkgs[*]}" >&2
  apt-get update -qq >/dev/null 2>&1 || true
  apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi
echo "install-prereqs: ok" >&2
