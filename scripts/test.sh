#!/usr/bin/env bash
# The test command (README): installs what the tests need (as root: libfuse2, fuse,
# python3-torch, python3-numpy; a JDK 21+ when none is found), then runs every module's tests,
# including the real-FUSE end-to-end tests, with the Maven Wrapper.
# Extra arguments go to Maven, e.g.  scripts/test.sh -pl tests -Dtest=FuseEndToEndTest
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [[ $(id -u) -eq 0 ]]; then
  scripts/install-prereqs.sh
else
  echo "test.sh: not root: skipping package installs; FUSE tests need root and /dev/fuse" >&2
fi
source scripts/java-home.sh
echo "test.sh: JAVA_HOME=$JAVA_HOME" >&2
exec ./mvnw -B -ntp verify "$@"
