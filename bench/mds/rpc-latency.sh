#!/bin/bash
# Latency of one MDS read end to end (Ratis client, gRPC, lease check, RocksDB, reply), single
# thread, back to back and paced, with context switches per call; see MdsRpcLatency.java.
# Usage: bench/mds/rpc-latency.sh CONFIG MOUNT [CALLS]   (a running cluster and a mount of it,
# e.g. a quickstart: bench/mds/rpc-latency.sh granary-data/granary.yaml /mnt/train)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
export JAVA_HOME="${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}"
LIB="$ROOT/tools/target/lib"
[ -d "$LIB" ] || (cd "$ROOT" && ./mvnw -B -q -Dmaven.test.skip=true package)
exec "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED -Xmx1g \
  -cp "$ROOT/tools/target/granary-tools-0.1.0-SNAPSHOT.jar:$LIB/*" "$HERE/MdsRpcLatency.java" "$@"
