#!/usr/bin/env bash
# perf.sh writes docs/performance.md. With no argument it regenerates the
# file from the raw benchmark output committed in docs/perf/ (no server
# needed). With `run`, it first runs ./bench.sh once per server given as
# LABEL=DSN (the label names the raw file, docs/perf/bench-LABEL.txt), each
# file stamped with the date, the Go version, the machine's cores and the
# command, and the load average when it began; the server's version is in
# the benchmark output. BENCH, BENCHTIME,
# COUNT and NAMEDLOCK_BENCH_* pass through to bench.sh.
#
#   scripts/perf.sh                                        # regenerate only
#   BENCH=UseCaseHotKey BENCHTIME=2s COUNT=3 scripts/perf.sh run \
#     mariadb='root@tcp(127.0.0.1:3306)/test' mysql='root@tcp(127.0.0.1:3307)/test'
#
# A run replaces every docs/perf/bench-*.txt, so the page never mixes runs.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == run ]]; then
	shift
	[[ $# -gt 0 ]] || { echo "usage: scripts/perf.sh run LABEL=DSN..." >&2; exit 2; }
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	for arg in "$@"; do
		label=${arg%%=*}
		dsn=${arg#*=}
		[[ "$label" =~ ^[a-z0-9-]+$ && "$dsn" != "$arg" ]] || { echo "perf.sh: want LABEL=DSN, got $arg" >&2; exit 2; }
		f="$tmp/bench-$label.txt"
		cmd="MYSQL_TEST_DSN='$dsn'"
		for v in BENCH BENCHTIME COUNT FLASH_BENCHTIME ${!NAMEDLOCK_BENCH_*}; do
			[[ -n "${!v:-}" ]] && cmd+=" $v=$(printf %q "${!v}")"
		done
		{
			echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
			echo "go: $(go env GOVERSION) $(go env GOOS)/$(go env GOARCH)"
			echo "cores: $(nproc)"
			echo "load: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)"
			echo "command: $cmd ./bench.sh"
		} >"$f"
		echo "perf.sh: $label: $cmd ./bench.sh" >&2
		if ! MYSQL_TEST_DSN="$dsn" BENCH_OUT="$f.raw" ./bench.sh >/dev/null; then
			kept=$(mktemp /tmp/perf-$label.XXXXXX)
			cp "$f.raw" "$kept"
			echo "perf.sh: $label: bench.sh failed; nothing in docs/ changed; its raw output is in $kept" >&2
			exit 1
		fi
		cat "$f.raw" >>"$f"
		rm -f "$f.raw"
	done
	rm -f docs/perf/bench-*.txt
	mkdir -p docs/perf
	cp "$tmp"/bench-*.txt docs/perf/
fi

go run ./internal/benchtable -doc -o docs/performance.md -readme README.md docs/perf/bench-*.txt
echo "perf.sh: wrote docs/performance.md" >&2
