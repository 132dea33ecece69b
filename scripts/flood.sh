#!/usr/bin/env bash
# A flood against plain reverse_proxy and against statusgate, side by side,
# both in front of the capacity-modelled demo backend (statusgate_sim).
#
#   bash scripts/flood.sh              # smoke run: 30 pollers, 5 s a round, one round each
#   bash scripts/flood.sh -pollers 300 -duration 60s -rounds 3 -abuser-conns 32   # the full run
#   bash scripts/flood.sh -duration 20s -warmup 2s -stalled 64 -slow 64 -h2-streams 1000 -reloads 10   # the full run of the attackers
#   bash scripts/flood.sh -h           # all flags
#
# Runs the harness in test/flood (see its package comment) under the
# repository's port lock, so that it never runs beside the integration tests
# or another harness. Besides the flood, -stalled, -slow, -h2-streams and
# -reloads each add a kind of round: stalled or slow HTTP/1.1 readers of the
# largest public answer, stalled HTTP/2 streams of it, or reloads of the
# statusgate config during the flood. Exit status: 0 (targets are
# reported, not enforced), 1 when statusgate sent an anonymous caller a
# protected field or keyed bytes, 2 when the harness cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."
exec flock /tmp/statusgate-ports.lock go run ./test/flood "$@"
