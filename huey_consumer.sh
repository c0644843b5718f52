#!/usr/bin/env bash
# Start the timmy-compactor sidecar for one user on one machine: the Huey consumer (which also
# runs the periodic sweep) and the watchdog watcher on the sessions dir. Ctrl-C or SIGTERM stops
# both cleanly. First run creates ./.venv and installs the package; nothing else to set up.
#
#   ./huey_consumer.sh                    # embedded SQLite queue under ~/.local/state/timmy-compactor
#   TIMMY_HUEY_BACKEND=redis TIMMY_REDIS_URL=redis://127.0.0.1:6379/0 ./huey_consumer.sh
#
# Env: TIMMY_COMPACTOR_CONFIG (config file), TIMMY_WORKERS (default: the config's huey.workers), TIMMY_VENV (default ./.venv),
#      TIMMY_NO_WATCHER=1 (consumer only, e.g. when the watcher runs in its own container).
set -euo pipefail
cd "$(dirname "$0")"
venv="${TIMMY_VENV:-.venv}"
if [ ! -x "$venv/bin/timmy-compactor" ] || [ ! -x "$venv/bin/huey_consumer" ]; then
  echo "setting up $venv ..." >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet -e .
fi
"$venv/bin/timmy-compactor" config >&2  # fail fast on a bad config, naming the key
# Fail fast in one line: a sidecar already running on this home (its watcher holds the lock), or a
# Redis that does not answer.
if [ "${TIMMY_NO_WATCHER:-0}" = "1" ]; then
  "$venv/bin/timmy-compactor" watch --check-backend
else
  "$venv/bin/timmy-compactor" watch --check
fi
workers="${TIMMY_WORKERS:-$("$venv/bin/timmy-compactor" config --get huey.workers)}"

# Idle-latency settings: poll the SQLite queue every 50 ms without backing off (Huey's default
# backs off to 10 s when idle); with Redis the dequeue blocks (BRPOP) and wakes at once anyway.
# --flush-locks clears Huey task locks left by a killed consumer. Process workers: compaction is
# CPU-bound Python, threads would share one core.
"$venv/bin/huey_consumer" tasks.huey \
  --workers "$workers" --worker-type process \
  --delay 0.05 --max-delay 0.05 --backoff 1.0 --flush-locks &
consumer=$!
watcher=""
if [ "${TIMMY_NO_WATCHER:-0}" != "1" ]; then
  "$venv/bin/timmy-compactor" watch &
  watcher=$!
fi

stop() {
  trap - INT TERM
  kill -INT $consumer 2>/dev/null || true   # SIGINT: Huey finishes running tasks, then exits
  [ -n "$watcher" ] && kill -TERM "$watcher" 2>/dev/null || true
  wait
  exit 0
}
trap stop INT TERM
# If either process dies, stop the other and report failure.
wait -n
status=$?
echo "timmy-compactor: a sidecar process exited (status $status); stopping" >&2
trap - INT TERM
kill -INT $consumer 2>/dev/null || true
[ -n "$watcher" ] && kill -TERM "$watcher" 2>/dev/null || true
wait
exit "$status"
