#!/usr/bin/env bash
# bench.sh runs the namedlock benchmarks against the test server (see
# internal/testdb: $MYSQL_TEST_DSN, else 127.0.0.1:3306, ...) and prints a
# markdown table of the ratios to their raw floors, and of the use-case
# benchmarks (a section that sells one unit of stock, against SELECT … FOR
# UPDATE and the raw GET_LOCK sequence), with the project's targets. The raw
# `go test -bench` output goes to standard error (and to $BENCH_OUT if set);
# the table to standard output. scripts/perf.sh runs it to regenerate
# docs/performance.md.
#
#   ./bench.sh                 # -benchtime=2s -count=5 (the flash sale: 10s)
#   ./bench.sh -short          # -benchtime=100x -count=1: proves they run (CI)
#   BENCHTIME=5s COUNT=3 BENCH='HotKey|TwoInstances' ./bench.sh
#   BENCH='UseCase' ./bench.sh                   # the use-case benchmarks only
#   BENCH='UseCaseFlashSale' BENCHTIME=30s ./bench.sh   # rounds deep enough for 256 callers
#   NAMEDLOCK_BENCH_HANDOFF=64,10ms ./bench.sh   # other handoff bounds
#   NAMEDLOCK_BENCH_CONTENDERS=fenced-dotx,forupdate,forupdate-plus1 BENCH='UseCaseHotKey' ./bench.sh
#                                                # only those use-case contenders
#   NAMEDLOCK_BENCH_VARIANT=256,50ms BENCH='UseCaseHotKey' ./bench.sh
#                                                # adds fenced-dotx-b and serial-dotx-b: the same on
#                                                # Lockers with other handoff bounds, paired
#
# Extra arguments go to `go test` (e.g. -cpuprofile cpu.out). Timing is never
# pass/fail: the exit status is go test's.
set -euo pipefail
cd "$(dirname "$0")"

benchtime=${BENCHTIME:-2s}
# The flash sale needs deeper rounds than the others for its instance shares
# to mean anything (256 callers; see BenchmarkUseCaseFlashSale): in a full
# run it gets its own, longer -benchtime (FLASH_BENCHTIME).
flashtime=${FLASH_BENCHTIME:-10s}
count=${COUNT:-5}
if [[ "${1:-}" == "-short" || -n "${BENCH_SHORT:-}" ]]; then
	[[ "${1:-}" == "-short" ]] && shift
	benchtime=100x
	flashtime=100x
	count=1
fi

out=${BENCH_OUT:-$(mktemp)}
[[ -n "${BENCH_OUT:-}" ]] || trap 'rm -f "$out"' EXIT
: >"$out"

# run runs one go test command, shown as one would type it (arguments with
# shell characters quoted), appending its output to $out.
shown=
run() {
	local line=
	for a in "$@"; do
		[[ "$a" =~ ^[A-Za-z0-9_./=,:+-]+$ ]] || a="'$a'"
		line+="${line:+ }$a"
	done
	echo "$line" >&2
	shown+="${shown:+; }$line"
	"$@" | tee -a "$out" >&2
}

if [[ -z "${BENCH:-}" ]]; then
	run go test -run '^$' -bench . -skip UseCaseFlashSale -benchtime "$benchtime" -count "$count" -benchmem "$@" ./namedlock/
	run go test -run '^$' -bench UseCaseFlashSale -benchtime "$flashtime" -count "$count" -benchmem "$@" ./namedlock/
else
	# The flash sale, when BENCH names it, gets FLASH_BENCHTIME, as in a full run.
	run go test -run '^$' -bench "$BENCH" -skip UseCaseFlashSale -benchtime "$benchtime" -count "$count" -benchmem "$@" ./namedlock/
	if [[ UseCaseFlashSale =~ $BENCH ]]; then
		run go test -run '^$' -bench UseCaseFlashSale -benchtime "$flashtime" -count "$count" -benchmem "$@" ./namedlock/
	fi
fi

echo "\`$shown\`${NAMEDLOCK_BENCH_HANDOFF:+ with NAMEDLOCK_BENCH_HANDOFF=$NAMEDLOCK_BENCH_HANDOFF}"
echo
go run ./internal/benchtable <"$out"
