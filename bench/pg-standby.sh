#!/usr/bin/env bash
# A PostgreSQL primary with a synchronous streaming standby, for the bench's `postgres standby`
# rows (STEPJOURNAL_PG_STANDBY_URL): every commit waits until the standby flushed it.
#
#   bench/pg-standby.sh start DIR [PRIMARY_PORT [STANDBY_PORT]]   # prints the URL to export
#   bench/pg-standby.sh stop DIR
#
# Both clusters live under DIR (created; removed by `stop`), on 127.0.0.1, ports 5441 and 5442 by
# default, trust authentication on loopback. Run as root, the servers run as the `postgres` user.
set -euo pipefail

usage() {
  echo "usage: $0 start DIR [PRIMARY_PORT [STANDBY_PORT]] | stop DIR" >&2
  exit 2
}

bin="$(pg_config --bindir 2>/dev/null || true)"
if [ ! -x "$bin/initdb" ]; then
  bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
fi
[ -x "$bin/initdb" ] || { echo "$0: PostgreSQL's server binaries (initdb) are not installed" >&2; exit 1; }

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cmd="${1:-}"
dir="${2:-}"
[ -n "$cmd" ] && [ -n "$dir" ] || usage

case "$cmd" in
  start)
    primary_port="${3:-5441}"
    standby_port="${4:-5442}"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    as_pg "$bin/initdb" -D "$dir/primary" -A trust -U postgres >/dev/null
    cat >>"$dir/primary/postgresql.conf" <<EOF
port = $primary_port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
wal_level = replica
max_wal_senders = 4
synchronous_commit = on
synchronous_standby_names = '*'
EOF
    as_pg "$bin/pg_ctl" -D "$dir/primary" -l "$dir/primary.log" -w start >/dev/null
    as_pg "$bin/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres -D "$dir/standby" \
      -R -X stream -c fast
    cat >>"$dir/standby/postgresql.conf" <<EOF
port = $standby_port
hot_standby = on
EOF
    as_pg "$bin/pg_ctl" -D "$dir/standby" -l "$dir/standby.log" -w start >/dev/null
    # Wait until the primary sees its standby streaming as synchronous.
    for _ in $(seq 1 300); do
      state="$(as_pg "$bin/psql" -h 127.0.0.1 -p "$primary_port" -U postgres -tAc \
        "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'" 2>/dev/null || true)"
      [ "$state" = sync ] && break
      sleep 0.1
    done
    [ "$state" = sync ] || { echo "$0: the standby is not streaming synchronously" >&2; exit 1; }
    # Its commit waits for the standby, as every commit of the primary does.
    as_pg "$bin/createdb" -h 127.0.0.1 -p "$primary_port" -U postgres test
    echo "postgres://postgres@127.0.0.1:$primary_port/test"
    ;;
  stop)
    for c in standby primary; do
      if [ -f "$dir/$c/postmaster.pid" ]; then
        as_pg "$bin/pg_ctl" -D "$dir/$c" -m fast -w stop >/dev/null || true
      fi
    done
    rm -rf "$dir"
    ;;
  *) usage ;;
esac
