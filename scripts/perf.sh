#!/usr/bin/env bash
# Side-by-side benchmark of statusgate against a plain Caddy reverse_proxy.
#
#   bash scripts/perf.sh                      # full run, about 4 minutes
#   bash scripts/perf.sh -rounds 2 -duration 1s -scenarios 1,3   # quick smoke run
#   bash scripts/perf.sh -h                   # all flags
#
# Builds ./cmd/caddy into test/perf/.cache once (reused while newer than the
# sources), then runs the harness in test/perf (see its package comment).
# Exit status: 0 (targets are reported, not enforced), 1 on a correctness
# failure, 2 when the harness cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."
export STATUSGATE_PERF_CMD="bash scripts/perf.sh${*:+ $*}"
exec go run ./test/perf "$@"
