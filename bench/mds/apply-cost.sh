#!/bin/bash
# CPU per applied MDS entry (create, unlink) on one peer, without Raft, gRPC or FUSE.
# Usage: bench/mds/apply-cost.sh [CHECKOUT] [FILES] [PASSES] (see run.sh).
exec "$(dirname "$0")/run.sh" MdsApplyCost "$@"
