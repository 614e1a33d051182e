#!/bin/bash
# Runs one of the MDS benchmarks in this folder (NAME.java) on one peer, without Raft, gRPC or FUSE.
# Usage: bench/mds/run.sh NAME [CHECKOUT] [FILES] [PASSES]; CHECKOUT defaults to this one (built
# first if needed). Compare two builds by running it on each in turn, a few times.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
NAME="$1"
ROOT="${2:-$(cd "$HERE/../.." && pwd)}"
export JAVA_HOME="${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}"
LIB="$ROOT/tools/target/lib"
[ -d "$LIB" ] || (cd "$ROOT" && ./mvnw -B -q -Dmaven.test.skip=true package)
exec "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED -Xmx1g -cp "$LIB/*" \
  "$HERE/$NAME.java" "${3:-10000}" "${4:-5}"
