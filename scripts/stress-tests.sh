#!/usr/bin/env bash
# Runs the README's test command again and again on a busy machine, to show
# that no test depends on timing or on a fixed port.
#
#   bash scripts/stress-tests.sh                 # 20 runs, each -count=1, beside two one-core CPU hogs
#   bash scripts/stress-tests.sh -runs 5         # fewer runs
#   bash scripts/stress-tests.sh -hogs 1         # beside one hog (-hogs 0, or -no-hog: none)
#   bash scripts/stress-tests.sh -two-clones     # two copies of the checkout, the command in both at once (with the hogs)
#   bash scripts/stress-tests.sh -runs 0 -two-clones   # only that
#
# A hog is a shell loop that keeps one core busy for the whole run; two of
# them on a two-core machine leave the tests what other work leaves them on
# a busy one. A run that fails keeps its log (the path is printed).
# Everything listens on loopback ports the tests choose free; the module
# proxy is used only if the module cache lacks something. Bounded in time: each run is stopped after
# -run-timeout (default 20m), and no run starts after -budget (default 8h).
# After each run that passed it lists the -slowest (default 5) packages with
# go test's time for each.
# The whole script holds the repository's port lock, like scripts/flood.sh,
# so that it never runs beside the harnesses (it would skew their figures,
# and they its); set STRESS_LOCK to use another lock file.
# Exit status: 0 when every run passed, 1 when one failed, 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

args=("$@")
runs=20 hogs=2 clones=0 run_timeout=20m budget=8h slowest=5
while [ $# -gt 0 ]; do
	case "$1" in
	-runs) runs=$2; shift ;;
	-hogs) hogs=$2; shift ;;
	-no-hog) hogs=0 ;;
	-two-clones) clones=1 ;;
	-run-timeout) run_timeout=$2; shift ;;
	-budget) budget=$2; shift ;;
	-slowest) slowest=$2; shift ;;
	-h | -help | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown flag $1 (-h for help)" >&2; exit 2 ;;
	esac
	shift
done

lock=${STRESS_LOCK:-/tmp/statusgate-ports.lock}
if [ -z "${STRESS_LOCKED:-}" ]; then
	echo "waiting for $lock"
	STRESS_LOCKED=1 exec flock "$lock" bash "$0" "${args[@]}"
fi

packages=(./... ./test/... ./cmd/statusgate-build/...)
logs=$(mktemp -d -t statusgate-stress.XXXXXX)
hog_pids=()
work=
cleanup() {
	for pid in "${hog_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	if [ -n "$work" ]; then rm -rf "$work"; fi
	rmdir "$logs" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

case "$hogs" in
'' | *[!0-9]*) echo "-hogs wants a number, got '$hogs'" >&2; exit 2 ;;
esac
for ((h = 0; h < hogs; h++)); do
	bash -c 'while :; do :; done' &
	hog_pids+=($!)
	echo "CPU hog: pid $! (one core)"
done

seconds() { # a duration such as 90s, 20m or 8h in seconds
	case "$1" in
	*h) echo $((${1%h} * 3600)) ;; *m) echo $((${1%m} * 60)) ;; *s) echo "${1%s}" ;; *) echo "$1" ;;
	esac
}
deadline=$(($(date +%s) + $(seconds "$budget")))
failed=0 passed=0 durations=()

# one_run DIR NAME: the test command in DIR, its output in $logs/NAME.log.
one_run() {
	local dir=$1 name=$2 start rc
	start=$(date +%s)
	rc=0
	(cd "$dir" && timeout "$run_timeout" go test -count=1 "${packages[@]}") >"$logs/$name.log" 2>&1 || rc=$?
	echo "$rc $(($(date +%s) - start))"
}

# packages_by_time LOG: go test's line of each package that ran tests, the
# slowest first (no package may come near go test's 10-minute timeout).
packages_by_time() {
	awk '$1 == "ok" && $3 ~ /s$/ { t = $3; sub(/s$/, "", t); printf "%8.1f s  %s\n", t, $2 }' "$1" | sort -rn
}

report() { # NAME RC SECONDS
	if [ "$2" = 0 ]; then
		echo "$1: ok in $3 s; the slowest packages:"
		packages_by_time "$logs/$1.log" | head -"$slowest" | sed 's/^/    /'
		rm -f "$logs/$1.log"
	else
		echo "$1: FAILED (exit $2) after $3 s; log: $logs/$1.log"
		grep -E -- '^(--- FAIL|FAIL|panic:)|_test\.go:[0-9]+:' "$logs/$1.log" | head -20 | sed 's/^/    /' || true
	fi
}

for ((i = 1; i <= runs; i++)); do
	if [ "$(date +%s)" -ge "$deadline" ]; then
		echo "budget $budget spent: $((i - 1)) of $runs runs done"
		break
	fi
	read -r rc secs < <(one_run "$root" "run-$i")
	report "run-$i" "$rc" "$secs"
	durations+=("$secs")
	if [ "$rc" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
if [ "${#durations[@]}" -gt 0 ]; then
	sorted=$(printf '%s\n' "${durations[@]}" | sort -n)
	echo "runs: $passed passed, $failed failed; seconds a run: min $(head -1 <<<"$sorted"), median $(sed -n "$(((${#durations[@]} + 1) / 2))p" <<<"$sorted"), max $(tail -1 <<<"$sorted")"
fi

if [ "$clones" = 1 ]; then
	# Two copies of the working tree as it is (uncommitted changes too),
	# without .git and built binaries.
	work=$(mktemp -d -t statusgate-clones.XXXXXX)
	for c in a b; do
		mkdir "$work/$c"
		tar -C "$root" --exclude=./.git --exclude=./caddy --exclude='*.test' -cf - . | tar -C "$work/$c" -xf -
	done
	echo "two clones at once: $work/a and $work/b"
	one_run "$work/a" clone-a >"$work/a.rc" &
	pa=$!
	one_run "$work/b" clone-b >"$work/b.rc" &
	pb=$!
	wait "$pa" "$pb" || true
	for c in a b; do
		read -r rc secs <"$work/$c.rc"
		report "clone-$c" "$rc" "$secs"
		if [ "$rc" != 0 ]; then failed=$((failed + 1)); fi
	done
fi

[ "$failed" = 0 ]
