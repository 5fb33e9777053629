#!/usr/bin/env bash
# A private PostgreSQL cluster for the coffer-notify tests: initdb in a temp folder, loopback only, trust auth for
# the one user `coffer`, run as an unprivileged user (nobody when started as root), nothing installed or kept.
#   scripts/postgres.sh start   prints `COFFER_TEST_POSTGRES=127.0.0.1:PORT` and `COFFER_TEST_POSTGRES_DIR=DIR`
#   scripts/postgres.sh stop DIR
set -euo pipefail
bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
[ -x "$bin/initdb" ] || { echo "postgres.sh: no PostgreSQL (scripts/setup.sh installs postgresql)" >&2; exit 2; }
as_user() { if [ "$(id -u)" = 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi; }
case "${1:-}" in
start)
  dir="$(mktemp -d /tmp/coffer-postgres.XXXXXX)"
  chmod 0755 "$dir"
  [ "$(id -u)" = 0 ] && chown nobody "$dir"
  as_user "$bin/initdb" -D "$dir/data" -A trust -U coffer --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 2; }
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  as_user "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
    -o "-h 127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" start >/dev/null \
    || { cat "$dir/server.log" >&2; exit 2; }
  echo "COFFER_TEST_POSTGRES=127.0.0.1:$port"
  echo "COFFER_TEST_POSTGRES_DIR=$dir"
  ;;
stop)
  dir="${2:?usage: postgres.sh stop DIR}"
  as_user "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
  rm -rf "$dir"
  ;;
*) echo "usage: postgres.sh start | stop DIR" >&2; exit 2 ;;
esac
