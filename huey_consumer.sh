#!/usr/bin/env bash
# Start the timmy-compactor sidecar for one user on one machine: the Huey consumer (which also
# runs the periodic sweep) and the watchdog watcher on the sessions dir. Ctrl-C or SIGTERM stops
# both cleanly. First run creates ./.venv and installs the package; nothing else to set up.
#
#   ./huey_consumer.sh                    # embedded SQLite queue under $XDG_STATE_HOME/timmy-compactor
#   ./huey_consumer.sh -w 4 -q            # 4 workers, warnings and errors only
#   TIMMY_HUEY_BACKEND=redis TIMMY_REDIS_URL=redis://127.0.0.1:6379/0 ./huey_consumer.sh
#
# ./huey_consumer.sh --help lists the flags and environment variables.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: ./huey_consumer.sh [-w N] [-v | -q] [-h]

Start the timmy-compactor sidecar: `huey_consumer tasks.huey` (process workers; it also runs the
periodic sweep) and `timmy-compactor watch`. Ctrl-C or SIGTERM stops both; if either exits, the
other is stopped and the script exits non-zero.

Options:
  -w, --workers N   huey worker processes (default: $TIMMY_WORKERS, else the config's huey.workers)
  -v, --verbose     debug log lines (same as TIMMY_LOG_LEVEL=debug; huey_consumer -v)
  -q, --quiet       warnings and errors only (same as TIMMY_LOG_LEVEL=warning; huey_consumer -q)
  -h, --help        show this help and exit

Environment:
  TIMMY_COMPACTOR_CONFIG  config file (default $XDG_CONFIG_HOME/timmy-compactor/compaction.yaml, i.e.
                          ~/.config/…, else the old ~/.timmy/timmy-config/compaction.yaml, else built-in defaults)
  TIMMY_LOG_LEVEL         debug, info, warning or error (default: the config's logging.level)
  TIMMY_WORKERS           huey worker processes (-w wins)
  TIMMY_HUEY_BACKEND, TIMMY_REDIS_URL, TIMMY_STATE_DIR, TIMMY_SESSIONS_DIR, HERMES_HOME
                          override single config keys
  TIMMY_VENV              virtualenv to use or create (default ./.venv)
  TIMMY_NO_WATCHER=1      run the consumer only (e.g. the watcher runs in its own container)
  TIMMY_STOP_SECONDS      how long a stop waits for both processes (default 30)
  TIMMY_LEASE_SECONDS     a session's lease in the queue (default 10): a consumer that dies frees its
                          sessions within it, and another consumer runs its in-flight session again

Exit status: 0 when stopped by Ctrl-C/SIGTERM, 2 for a bad flag or config, else non-zero when
either process exited on its own.
USAGE
}

bad_usage() {
  echo "huey_consumer.sh: error: $1 (see ./huey_consumer.sh --help)" >&2
  exit 2
}

workers_flag=""
level_flag=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    -h | --help)
      usage
      exit 0
      ;;
    -w | --workers)
      [ "$#" -ge 2 ] || bad_usage "$1 needs a number of workers"
      workers_flag="$2"
      shift 2
      continue
      ;;
    --workers=*) workers_flag="${1#--workers=}" ;;
    -w[0-9]*) workers_flag="${1#-w}" ;;
    -v | --verbose) level_flag="debug" ;;
    -q | --quiet) level_flag="warning" ;;
    *) bad_usage "unknown argument '$1'" ;;
  esac
  shift
done
workers="${workers_flag:-${TIMMY_WORKERS:-}}"
if [ -n "$workers" ] && ! [[ "$workers" =~ ^[1-9][0-9]*$ ]]; then
  bad_usage "the number of workers must be a positive integer, got '$workers'"
fi
if [ -n "$level_flag" ]; then
  export TIMMY_LOG_LEVEL="$level_flag"
elif [ -n "${TIMMY_LOG_LEVEL:-}" ]; then
  export TIMMY_LOG_LEVEL="${TIMMY_LOG_LEVEL,,}"
fi
case "${TIMMY_LOG_LEVEL:-}" in
  "" | debug | info | warning | error) ;;
  *) bad_usage "TIMMY_LOG_LEVEL must be debug, info, warning or error, got '${TIMMY_LOG_LEVEL}'" ;;
esac

cd "$(dirname "$0")"
venv="${TIMMY_VENV:-.venv}"
if [ ! -x "$venv/bin/timmy-compactor" ] || [ ! -x "$venv/bin/huey_consumer" ]; then
  echo "setting up $venv ..." >&2
  # pip's and setuptools' chatter (an editable-install banner, index warnings) only when it fails
  setup_log="$(mktemp "${TMPDIR:-/tmp}/timmy-setup.XXXXXX")"
  if ! {
    python3 -m venv "$venv" && "$venv/bin/pip" install --quiet --upgrade pip && "$venv/bin/pip" install --quiet -e .
  } >"$setup_log" 2>&1; then
    cat "$setup_log" >&2
    rm -f "$setup_log"
    echo "huey_consumer.sh: error: setting up $venv failed (pip's output above)" >&2
    exit 1
  fi
  rm -f "$setup_log"
fi
# fail fast on a bad config, naming the key; else one log line naming the file, as the others are (JSON
# off a terminal)
"$venv/bin/timmy-compactor" config --check --as-log
export TIMMY_LEGACY_CONFIG_NOTED=1  # a config at its old place: the check above said so, once per start
# Fail fast in one line: a sidecar already running on this home (its watcher holds the lock), or a
# Redis that does not answer.
if [ "${TIMMY_NO_WATCHER:-0}" = "1" ]; then
  "$venv/bin/timmy-compactor" watch --check-backend
else
  "$venv/bin/timmy-compactor" watch --check
fi
[ -n "$workers" ] || workers="$("$venv/bin/timmy-compactor" config --get huey.workers)"
# huey's own lines follow the same level: -v for debug, -q for warning and error
level="${TIMMY_LOG_LEVEL:-$("$venv/bin/timmy-compactor" config --get logging.level)}"
huey_level=()
case "$level" in
  debug) huey_level=(--verbose) ;;
  warning | error) huey_level=(--quiet) ;;
esac

# Idle-latency settings: poll the SQLite queue every 50 ms without backing off (Huey's default
# backs off to 10 s when idle); with Redis the dequeue blocks (BRPOP) and wakes at once anyway.
# No --flush-locks: huey flushes only the locks it registered, never the per-session leases. Those
# of this host's dead processes (a killed consumer's) are cleared by each starting worker; another
# host's run out within one lease (TIMMY_LEASE_SECONDS, default 10 s) unless renewed. Process
# workers: compaction is CPU-bound Python, threads would share one core.
# Each child leads its own process group (setsid), so the consumer's workers and scheduler can be
# stopped with it even after the consumer itself was killed (-9) and they were orphaned. Each child
# also exits with this script (with_parent: SIGTERM from the kernel when the script dies, even by
# kill -9), so nothing is left running to hold the sidecar's lock and refuse a restart.
with_parent=("$venv/bin/python" -m timmy_compactor.sidecar.with_parent "$$")
setsid "${with_parent[@]}" "$venv/bin/huey_consumer" tasks.huey \
  --workers "$workers" --worker-type process \
  --delay 0.05 --max-delay 0.05 --backoff 1.0 ${huey_level[@]+"${huey_level[@]}"} &
consumer=$!
watcher=""
if [ "${TIMMY_NO_WATCHER:-0}" != "1" ]; then
  setsid "${with_parent[@]}" "$venv/bin/timmy-compactor" watch &
  watcher=$!
fi

alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

stop_all() {
  trap - INT TERM
  alive "$consumer" && kill -INT "$consumer" 2>/dev/null  # SIGINT: Huey finishes running tasks, then exits
  alive "$watcher" && kill -TERM "$watcher" 2>/dev/null
  local waited=0
  while { alive "$consumer" || alive "$watcher"; } && [ "$waited" -lt "${TIMMY_STOP_SECONDS:-30}0" ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  # whatever is left of either group: orphaned workers and scheduler of a killed consumer, or a
  # child that did not stop in time
  kill -KILL -- "-$consumer" 2>/dev/null || true
  [ -n "$watcher" ] && { kill -KILL -- "-$watcher" 2>/dev/null || true; }
  wait 2>/dev/null || true
}
trap 'stop_all; exit 0' INT TERM
# If either process dies, stop the other and report failure (never exit 0: nothing asked us to stop).
status=0
wait -n || status=$?
if ! alive "$consumer"; then
  who="the huey consumer (pid $consumer)"
else
  who="the watcher (pid $watcher)"
fi
echo "timmy-compactor: $who exited with status $status; stopping the sidecar" >&2
stop_all
[ "$status" -eq 0 ] && status=1
exit "$status"
