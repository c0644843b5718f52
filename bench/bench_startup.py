"""How long the CLI takes to start: `compact --help`, and `compact` of a small session (issue 23.5);
with `--sidecar N`, how soon a session written during a fresh sidecar's startup sweep of N sessions
gets its view (issue 32.6, target 5 s with N = 10^5).

Each command runs `--runs` times as a child process; the figures are medians of its wall time and of
its CPU time (user + system, from the child's rusage: steadier than wall time on a busy machine),
beside the same run's baseline, `python -c pass` with the same interpreter. It also names the heavy
modules each command imported (the queue, the logger, the watcher, the engine's rules).

    .venv/bin/python bench/bench_startup.py [--runs 21]
    .venv/bin/python bench/bench_startup.py --sidecar 100000 [--backends sqlite,redis]

`--sidecar N`: N small snapshot sessions (and one state.db session) are written, the sidecar.db is
empty (no records pre-filled: every session is new to the sidecar), then a real consumer (2 process
workers) and watcher start. Once the startup sweep has begun to fill the queue, one session is
written the way Hermes writes a snapshot (temp file + rename), and one is committed to state.db;
the figure is the time from each write to its view, with the queue's depth at that moment.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("huey", "redis", "structlog", "watchdog", "yaml", "msgspec", "timmy_compactor.core.pipeline")


def run_once(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}")
    return wall * 1000, (usage.ru_utime + usage.ru_stime) * 1000


def medians(cmd: list[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    run_once(cmd, env)  # warm the page cache
    walls, cpus = zip(*(run_once(cmd, env) for _ in range(runs)), strict=True)
    return statistics.median(walls), statistics.median(cpus)


def imported(args: list[str], env: dict[str, str]) -> list[str]:
    probe = (
        "import sys, runpy; sys.argv = ['timmy-compactor', *sys.argv[1:]]\n"
        "try:\n    runpy.run_module('timmy_compactor.cli', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        f"print('\\n' + ' '.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, env=env, check=False)
    return done.stderr.strip().splitlines()[-1].split() if done.stderr.strip() else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--sidecar", type=int, default=0, metavar="N", help="time a write during a startup sweep")
    parser.add_argument("--backends", default="sqlite,redis")
    args = parser.parse_args()
    if args.sidecar:
        from bench_live_first import live_first

        live_first(args.sidecar, args.backends.split(","))
        return
    exe = str(Path(sys.executable).with_name("timmy-compactor"))
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_CONFIG_HOME": tmp, "HOME": tmp}  # no user config: the defaults
        # as installed: bytecode cached (here in a temporary place), not compiled from source at each start
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        small = Path(tmp) / "session_small.json"
        turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
        small.write_text(json.dumps({"session_id": "small", "messages": turns * 2}))
        cases = {
            "python -c pass (baseline)": [sys.executable, "-c", "pass"],
            "compact --help": [exe, "compact", "--help"],
            "compact <4-message session>": [exe, "compact", str(small)],
            "  … with config/compaction.yaml": [
                exe,
                "compact",
                str(small),
                "--config",
                str(REPO / "config" / "compaction.yaml"),
            ],
        }
        base_wall = base_cpu = 0.0
        print(f"{'command':32} {'wall ms':>8} {'cpu ms':>8} {'cpu-base':>9}  heavy modules imported")
        for name, cmd in cases.items():
            wall, cpu = medians(cmd, env, args.runs)
            if not base_cpu:
                base_wall, base_cpu = wall, cpu
            heavy = "" if cmd[0] == sys.executable else " ".join(imported(cmd[1:], env)) or "none"
            print(f"{name:32} {wall:8.0f} {cpu:8.0f} {cpu - base_cpu:9.0f}  {heavy}")
        print(f"(medians of {args.runs}; load average {os.getloadavg()[0]:.2f}; baseline wall {base_wall:.0f} ms)")


if __name__ == "__main__":
    main()
