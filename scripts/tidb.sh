#!/usr/bin/env bash
# TiDB for the tests: builds tidb-server once into a cache directory outside
# the repository, and starts it on 127.0.0.1.
#
#   scripts/tidb.sh build            build the binary if it is not cached yet; print its path
#   scripts/tidb.sh start [PORT]     start a server on 127.0.0.1:PORT (default 4000) unless one
#                                    answers there already; builds first if needed
#   scripts/tidb.sh stop [PORT]      stop the server this script started on PORT
#   scripts/tidb.sh path             print where the binary is (or would be)
#
# The first build downloads TiDB from the Go module proxy (about 2 min) and
# compiles it (about 21 min on 2 cores, 2.4 GB peak memory); the binary
# (about 244 MB) is then reused from the cache by every later run. The cache
# is $NAMEDLOCK_TIDB_CACHE, default /root/.cache/namedlock-tidb when run as
# root and ~/.cache/namedlock-tidb otherwise. Concurrent builds are
# serialised by a lock file in the cache. The server is TiDB's in-memory
# store (unistore, single process): root without a password, database test,
# status port PORT+6080 (10080 for 4000), log and pid file in the cache.
# A server started by start keeps running until stop (or a reboot).
set -euo pipefail

# The TiDB version the Go module proxy serves (the root module refuses most
# versions; this pseudo-version is served), and its separate parser module.
TIDB_VERSION=v1.1.0-beta.0.20251126154744-e4e814fdc0af
PARSER_VERSION=v0.0.0-20251126154744-e4e814fdc0af

if [ -n "${NAMEDLOCK_TIDB_CACHE:-}" ]; then
  CACHE="$NAMEDLOCK_TIDB_CACHE"
elif [ "$(id -u)" = 0 ]; then
  CACHE=/root/.cache/namedlock-tidb
else
  CACHE="$HOME/.cache/namedlock-tidb"
fi
BIN="$CACHE/tidb-server"
export PATH="/usr/local/go/bin:$PATH"

log() { echo "tidb.sh: $*" >&2; }

# answers PORT: whether a MySQL-protocol server answers on 127.0.0.1:PORT.
answers() {
  mysql -h127.0.0.1 -P"$1" -uroot --connect-timeout=2 -N -e 'SELECT 1' >/dev/null 2>&1
}

build() {
  mkdir -p "$CACHE"
  if [ -x "$BIN" ]; then
    echo "$BIN"
    return
  fi
  exec 9>"$CACHE/build.lock"
  if ! flock -n 9; then
    log "another build holds $CACHE/build.lock; waiting for it"
    flock 9
  fi
  if [ -x "$BIN" ]; then
    echo "$BIN"
    return
  fi
  log "building tidb-server into $CACHE: about 2 min of download and 21 min of compiling on 2 cores (once; cached)"
  local start dir pdir src
  start=$(date +%s)
  dir=$(cd /tmp && go mod download -json "github.com/pingcap/tidb@$TIDB_VERSION" |
    python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])')
  pdir=$(cd /tmp && go mod download -json "github.com/pingcap/tidb/pkg/parser@$PARSER_VERSION" |
    python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])')
  # Module cache files are read-only; the root module's replace directive
  # expects the parser module at pkg/parser.
  src="$CACHE/src"
  rm -rf "$src"
  cp -r "$dir" "$src"
  chmod -R u+w "$src"
  rm -rf "$src/pkg/parser"
  cp -r "$pdir" "$src/pkg/parser"
  chmod -R u+w "$src/pkg/parser"
  (cd "$src" && GOFLAGS=-mod=mod nice -n 10 go build -o "$BIN.tmp" ./cmd/tidb-server)
  mv "$BIN.tmp" "$BIN"
  log "built $BIN in $(( $(date +%s) - start )) s"
  echo "$BIN"
}

start() {
  local port="${1:-4000}"
  local status=$((port + 6080))
  if answers "$port"; then
    log "a server answers on 127.0.0.1:$port already: $(mysql -h127.0.0.1 -P"$port" -uroot -N -e 'SELECT VERSION()')"
    return
  fi
  build >/dev/null
  local pidfile="$CACHE/tidb-$port.pid" logfile="$CACHE/tidb-$port.log"
  log "starting $BIN on 127.0.0.1:$port (status $status, log $logfile)"
  # -path "": unistore in memory (the default path is a directory in /tmp).
  # Run from the cache: the server writes tidb-slow.log to its directory.
  cd "$CACHE"
  setsid "$BIN" -store unistore -path "" -host 127.0.0.1 -P "$port" \
    -status "$status" -status-host 127.0.0.1 --log-file "$logfile" \
    </dev/null >>"$CACHE/tidb-$port.stderr" 2>&1 9>&- &
  echo $! >"$pidfile"
  for _ in $(seq 1 120); do
    if answers "$port"; then
      mysql -h127.0.0.1 -P"$port" -uroot -e 'CREATE DATABASE IF NOT EXISTS test'
      log "ready: $(mysql -h127.0.0.1 -P"$port" -uroot -N -e 'SELECT VERSION()')"
      return
    fi
    if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
      log "tidb-server exited; see $logfile and $CACHE/tidb-$port.stderr"
      exit 1
    fi
    sleep 0.5
  done
  log "tidb-server did not answer on 127.0.0.1:$port within 60 s; see $logfile"
  exit 1
}

stop() {
  local port="${1:-4000}"
  local pidfile="$CACHE/tidb-$port.pid"
  if [ ! -f "$pidfile" ]; then
    log "no server started by this script on port $port"
    return
  fi
  local pid
  pid=$(cat "$pidfile")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 1 40); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
  fi
  rm -f "$pidfile"
  log "stopped the server on port $port (pid $pid)"
}

case "${1:-}" in
  build) build ;;
  start) start "${2:-4000}" ;;
  stop) stop "${2:-4000}" ;;
  path) echo "$BIN" ;;
  *)
    echo "usage: $0 build | start [PORT] | stop [PORT] | path" >&2
    exit 2
    ;;
esac
