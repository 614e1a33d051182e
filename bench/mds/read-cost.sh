#!/bin/bash
# CPU per entry of MDS metadata reads (readdir, readdir plus, lookup) on one peer, without Raft,
# gRPC or FUSE. Usage: bench/mds/read-cost.sh [CHECKOUT] [FILES] [PASSES] (see run.sh).
exec "$(dirname "$0")/run.sh" MdsReadCost "$@"
