#!/usr/bin/env bash
# What a burst of /api/v1/network callers costs the gateway, beside the same
# burst of /api/v1/status callers (docs/performance.md, "The network's
# document"), for this checkout and, with -base, another one side by side.
#
#   bash scripts/netbench.sh                                  # this checkout
#   bash scripts/netbench.sh -base ../statusgate-before       # and the code before
#   bash scripts/netbench.sh -h                               # all flags
#
# Runs the harness in test/netbench (see its package comment) under the
# repository's port lock, so that it never runs beside the integration tests
# or another harness.
set -euo pipefail
cd "$(dirname "$0")/.."
exec flock /tmp/statusgate-ports.lock go run ./test/netbench "$@"
