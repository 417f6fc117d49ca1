#!/usr/bin/env bash
# MySQL for the tests: Oracle MySQL from Debian's unstable suite (sid), run in
# a private Debian root made once with debootstrap into a cache directory
# outside the repository, and started on 127.0.0.1 with MySQL's compiled-in
# defaults (--no-defaults: binary log on, sync_binlog=1,
# innodb_flush_log_at_trx_commit=1, skip_name_resolve=OFF).
#
#   scripts/mysql.sh build            make the private root if it is not cached yet; print its path
#   scripts/mysql.sh start [PORT]     start a server on 127.0.0.1:PORT (default 3307) unless one
#                                     answers there already; builds first if needed
#   scripts/mysql.sh stop [PORT]      stop the server this script started on PORT (by its pid,
#                                     once /proc shows that pid is still that port's mysqld)
#   scripts/mysql.sh version [PORT]   print SELECT VERSION() of the server on PORT
#   scripts/mysql.sh path             print where the root is (or would be)
#
# Runs as root (debootstrap, mount and chroot need it). The root is
# $NAMEDLOCK_MYSQL_CACHE, default /root/.cache/namedlock-mysql when run as root.
# Each port has its own data directory inside the root, initialised on first
# start (empty root password, database test). sid moves: the version is
# whatever sid serves on the day the root was made; if sid is broken that day,
# build fails loudly.
set -euo pipefail

if [ -n "${NAMEDLOCK_MYSQL_CACHE:-}" ]; then
  CACHE="$NAMEDLOCK_MYSQL_CACHE"
elif [ "$(id -u)" = 0 ]; then
  CACHE=/root/.cache/namedlock-mysql
else
  CACHE="$HOME/.cache/namedlock-mysql"
fi
ROOT="$CACHE/root"

log() { echo "mysql.sh: $*" >&2; }

answers() {
  mysql -h127.0.0.1 -P"$1" -uroot --connect-timeout=2 -N -e 'SELECT 1' >/dev/null 2>&1
}

need_root() {
  if [ "$(id -u)" != 0 ]; then
    log "must run as root (debootstrap, mount and chroot)"
    exit 1
  fi
}

build() {
  need_root
  if [ -x "$ROOT/usr/sbin/mysqld" ] && [ -f "$ROOT/.namedlock-complete" ]; then
    echo "$ROOT"
    return
  fi
  mkdir -p "$CACHE"
  # The lock is held on fd 9 until build returns; nothing started while it
  # is open may inherit it (a server would hold it for its whole life).
  exec 9>"$CACHE/build.lock"
  if ! flock -n 9; then
    log "another build holds $CACHE/build.lock; waiting for it"
    flock 9
  fi
  if [ -x "$ROOT/usr/sbin/mysqld" ] && [ -f "$ROOT/.namedlock-complete" ]; then
    exec 9>&-
    echo "$ROOT"
    return
  fi
  if ! command -v debootstrap >/dev/null; then
    log "installing debootstrap"
    apt-get install -y debootstrap >&2
  fi
  log "making a private Debian sid root with mysql-server-core in $ROOT (about 35 s, ~890 MB; once; cached)"
  local start
  start=$(date +%s)
  if mountpoint -q "$ROOT/proc" 2>/dev/null; then umount "$ROOT/proc"; fi
  rm -rf "$ROOT"
  if ! debootstrap --variant=minbase --include=mysql-server-core,mysql-client-core sid "$ROOT" >"$CACHE/debootstrap.log" 2>&1; then
    log "debootstrap of sid failed (sid may be broken today); see $CACHE/debootstrap.log"
    tail -20 "$CACHE/debootstrap.log" >&2
    exit 1
  fi
  mkdir -p "$ROOT/var/lib/mysql-files" "$ROOT/run/mysqld"
  touch "$ROOT/.namedlock-complete"
  log "made $ROOT in $(( $(date +%s) - start )) s: $(chroot "$ROOT" /usr/sbin/mysqld --version)"
  exec 9>&-
  echo "$ROOT"
}

start() {
  need_root
  local port="${1:-3307}"
  if answers "$port"; then
    log "a server answers on 127.0.0.1:$port already: $(version "$port")"
    return
  fi
  build >/dev/null
  mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
  mkdir -p "$ROOT/var/lib/mysql-files" "$ROOT/run/mysqld"
  local datadir="/var/lib/mysqltest$port"
  local pidfile="$CACHE/mysql-$port.pid" logfile="$CACHE/mysql-$port.log"
  if [ ! -d "$ROOT$datadir/mysql" ]; then
    rm -rf "$ROOT$datadir"
    log "initialising $datadir"
    chroot "$ROOT" /usr/sbin/mysqld --no-defaults --initialize-insecure \
      --datadir="$datadir" --user=root >>"$logfile" 2>&1
  fi
  log "starting mysqld on 127.0.0.1:$port (datadir $ROOT$datadir, log $logfile)"
  setsid chroot "$ROOT" /usr/sbin/mysqld --no-defaults --datadir="$datadir" --user=root \
    --port="$port" --bind-address=127.0.0.1 --socket="/run/mysqld/mysqld$port.sock" \
    --mysqlx=OFF --log-error="$datadir/error.log" </dev/null >>"$logfile" 2>&1 9>&- &
  echo $! >"$pidfile"
  for _ in $(seq 1 120); do
    if answers "$port"; then
      mysql -h127.0.0.1 -P"$port" -uroot -e 'CREATE DATABASE IF NOT EXISTS test'
      log "ready: $(version "$port")"
      return
    fi
    if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
      rm -f "$pidfile"
      log "mysqld exited; see $logfile and $ROOT$datadir/error.log"
      tail -20 "$ROOT$datadir/error.log" >&2 || true
      exit 1
    fi
    sleep 0.5
  done
  log "mysqld did not answer on 127.0.0.1:$port within 60 s; stopping it; see $ROOT$datadir/error.log"
  stop "$port"
  exit 1
}

stop() {
  local port="${1:-3307}"
  local pidfile="$CACHE/mysql-$port.pid"
  if [ ! -f "$pidfile" ]; then
    log "no server started by this script on port $port"
    return
  fi
  local pid
  pid=$(cat "$pidfile")
  # The pid is chroot's, which exec'd mysqld: the same process. Signal it
  # only if it still is the mysqld of this port (not a pid reused since).
  if tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- "mysqld .*--port=$port "; then
    kill "$pid"
    for _ in $(seq 1 240); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "mysqld (pid $pid) on port $port did not stop within 60 s; left running, pid file kept"
      exit 1
    fi
    log "stopped the server on port $port (pid $pid)"
  else
    log "the server this script started on port $port (pid $pid) is no longer running"
  fi
  rm -f "$pidfile"
  # Unmount /proc when no server of this root runs any more.
  if ! ls "$CACHE"/mysql-*.pid >/dev/null 2>&1 && mountpoint -q "$ROOT/proc"; then
    umount "$ROOT/proc" || true
  fi
}

version() {
  mysql -h127.0.0.1 -P"${1:-3307}" -uroot -N -e 'SELECT VERSION()'
}

PORT="${2:-3307}"
case "$PORT" in
  '' | *[!0-9]*) log "not a port: $PORT"; exit 2 ;;
esac

case "${1:-}" in
  build) build ;;
  start) start "$PORT" ;;
  stop) stop "$PORT" ;;
  version) version "$PORT" ;;
  path) echo "$ROOT" ;;
  *)
    echo "usage: $0 build | start [PORT] | stop [PORT] | version [PORT] | path" >&2
    exit 2
    ;;
esac
