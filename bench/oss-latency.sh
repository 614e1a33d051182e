#!/usr/bin/env bash
# Benchmark: per-request latency (p50/p90) of S3ObjectStore put/get and of the OSS hop
# (OssClient -> gRPC -> OssServer -> BlockCache -> S3ObjectStore) on an embedded S3Proxy,
# single client thread, 110 KiB and 4 MiB blocks. Prints figures, asserts nothing.
#   bench/oss-latency.sh                       # builds objbacker+oss+tools first (offline)
#   NO_BUILD=1 N_SMALL=500 N_LARGE=40 bench/oss-latency.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JAVA_HOME="${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}"
if [ -z "${NO_BUILD:-}" ]; then
  (cd "$ROOT" && ./mvnw -B -q -o -pl tools -am package -DskipTests)
fi
# module classes first: tools/target/lib also holds (possibly older) granary jars
CP="$ROOT/oss/target/classes:$ROOT/objbacker/target/classes:$ROOT/tools/target/classes:$ROOT/tools/target/lib/*"
exec "$JAVA_HOME/bin/java" -Xmx2g -Dn.small="${N_SMALL:-300}" -Dn.large="${N_LARGE:-30}" -Dwarmup.rounds="${WARMUP_ROUNDS:-3}" \
  -cp "$CP" "$ROOT/bench/OssLatency.java"
