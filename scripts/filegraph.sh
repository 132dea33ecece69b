#!/usr/bin/env bash
# Prints the cycles of the gateway package's file graph (internal/filegraph):
# the files that use each other's package-level names, with the names.
#
#   bash scripts/filegraph.sh                          # caddymodule
#   bash scripts/filegraph.sh ./caddymodule/internal/guard
#
# Exit status 0 when there is no cycle, 1 when there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then set -- ./caddymodule; fi
exec go run ./internal/filegraph/cmd/filegraph "$@"
