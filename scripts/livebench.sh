#!/usr/bin/env bash
# Live streams against polling: N viewers of /status on one gateway in front
# of the simulated server (test/livebench has what it measures).
#
#   bash scripts/livebench.sh                          # 10,000 viewers, about 3 minutes
#   bash scripts/livebench.sh -viewers 1000 -snapshots 2   # a quick run
#
# Builds ./cmd/caddy into test/perf/.cache once (reused while newer than the
# sources), as scripts/perf.sh does.
set -euo pipefail
cd "$(dirname "$0")/../test"
exec go run ./livebench "$@"
