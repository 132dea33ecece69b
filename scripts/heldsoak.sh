#!/usr/bin/env bash
# Keyed callers beside anonymous pollers of a 3 MB answer for ten minutes,
# with the demo backend (statusgate_sim, modded_items 20000) in a Caddy
# process of its own and the gateway in another: the keyed callers' share of
# 200s and both processes' memory over time (docs/backend-protection.md).
#
#   bash scripts/heldsoak.sh                  # 10 minutes: 4 keyed workers, 8 anonymous pollers
#   bash scripts/heldsoak.sh -duration 1m     # a shorter run
#   bash scripts/heldsoak.sh -h               # all flags
#
# Runs the harness in test/heldsoak (see its package comment) under the
# repository's port lock, so that it never runs beside the integration tests
# or another harness. Exit status: 0, 1 when a keyed request got anything but
# a whole 200 (or an anonymous one anything but 200, 429 or 503), 2 when the
# harness cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."
exec flock /tmp/statusgate-ports.lock go run ./test/heldsoak "$@"
