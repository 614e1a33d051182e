#!/bin/bash
# CPU per entry of MDS metadata reads (readdir, readdir plus, lookup) on one peer, without Raft,
# gRPC or FUSE. Usage: bench/mds/read-cost.sh [CHECKOUT] [FILES] [PASSES]; CHECKOUT defaults to
# this one (built first if needed). Compare two builds by running it on each in turn, a few times.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${1:-$(cd "$HERE/../.." && pwd)}"
export JAVA_HOME="${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}"
LIB="$ROOT/tools/target/lib"
[ -d "$LIB" ] || (cd "$ROOT" && ./mvnw -B -q -Dmaven.test.skip=true package)
exec "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED -Xmx1g -cp "$LIB/*" \
  "$HERE/MdsReadCost.java" "${2:-10000}" "${3:-5}"
