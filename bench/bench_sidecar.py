"""Benchmark the running sidecar: write-to-view latency, sweep throughput, idle CPU.

    .venv/bin/python bench/bench_sidecar.py [--writes 200] [--sweep 1000] [--backends sqlite,redis]

For each backend it starts a real `huey_consumer tasks.huey` and `timmy-compactor watch`, writes a
session the way Hermes does (temp file + os.replace) `--writes` times, `--gap` seconds apart (Hermes
writes a few times per turn, seconds apart), and measures the time from the replace to the
matching view on disk (p50/p95/max). With `--gap 0` writes come back to back and each waits for the
watcher's throttle window (`debounce_ms`). Then it drops `--sweep`
sessions of ~50k tokens into the directory with the watcher stopped and times `sweep` (enqueue)
until every view exists. Idle CPU: the consumer's CPU seconds over 10 s with nothing to do.
Redis needs `redis-server` on PATH (started on a free port).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.support import CONSUMER_FLAGS, RedisServer  # noqa: E402 -- the flags and server the tests use too

BIN = Path(sys.executable).parent
# ../shared when present (optional), else the copy shipped with the tests
SAMPLE = next(
    p
    for p in (
        Path(os.environ.get("TIMMY_SHARED", REPO.parent / "shared")) / "samples" / "session_sample.json",
        REPO / "tests" / "data" / "session_sample.json",
    )
    if p.exists()
)
# the sweep's session: a long corpus run from ../shared, else the one shipped with the tests
SWEEP_SESSION = next(
    p
    for p in (
        Path(os.environ.get("TIMMY_SHARED", REPO.parent / "shared")) / "corpus" / "session_django_14017.json",
        REPO / "tests" / "data" / "corpus" / "session_django_11099.json",
    )
    if p.exists()
)


def write_like_hermes(target: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}_", suffix=".tmp")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, target)


def view_sha(view: Path) -> str | None:
    try:
        return json.loads(view.read_bytes())["timmy_compaction"]["raw_sha256"]
    except (OSError, ValueError, KeyError):
        return None


def cpu_seconds(pid: int) -> float:
    """User+system CPU of a process and its children (the consumer's worker processes)."""
    total = 0.0
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    for p in pids:
        fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def run_backend(backend: str, writes: int, sweep_n: int, root: Path, gap: float) -> dict[str, float]:
    import hashlib

    sessions = root / "sessions"
    sessions.mkdir(parents=True)
    redis = None
    huey = {"backend": backend, "state_dir": str(root / "state")}
    if backend == "redis":
        redis = RedisServer(root)
        redis.start()
        huey["redis_url"] = redis.url
    config = root / "c.json"
    config.write_text(
        json.dumps(
            {
                "sessions": {"dir": str(sessions)},
                "model": {"context_window": 20000},
                "huey": huey,
                "logging": {"format": "json", "level": "warning"},
            }
        )
    )
    env = {**os.environ, "TIMMY_COMPACTOR_CONFIG": str(config)}
    consumer_cmd = [str(BIN / "huey_consumer"), "tasks.huey", *CONSUMER_FLAGS, "-q"]
    log = open(root / "sidecar.log", "ab")  # noqa: SIM115
    consumer = subprocess.Popen(consumer_cmd, cwd=REPO, env=env, stdout=log, stderr=log, start_new_session=True)
    watcher = subprocess.Popen(
        [str(BIN / "timmy-compactor"), "watch"], cwd=REPO, env=env, stdout=log, stderr=log, start_new_session=True
    )
    results: dict[str, float] = {}
    try:
        time.sleep(2)
        base = json.loads(SAMPLE.read_bytes())
        raw = sessions / "session_latency.json"
        view = sessions / "compacted_session_latency.json"
        latencies = []
        for i in range(writes):
            base["messages"][0]["content"] = f"write {i}: " + base["messages"][0]["content"][-200:]
            data = json.dumps(base, indent=2).encode()
            digest = hashlib.sha256(data).hexdigest()
            start = time.perf_counter()
            write_like_hermes(raw, data)
            while view_sha(view) != digest:
                time.sleep(0.001)
                if time.perf_counter() - start > 10:
                    raise RuntimeError(f"no view after 10 s (write {i})")
            latencies.append((time.perf_counter() - start) * 1000)
            time.sleep(gap)
        latencies.sort()
        results |= {
            "p50_ms": statistics.median(latencies),
            "p95_ms": latencies[int(0.95 * len(latencies)) - 1],
            "max_ms": latencies[-1],
        }
        time.sleep(1)
        before = cpu_seconds(consumer.pid)
        time.sleep(10)
        results["idle_cpu_pct"] = (cpu_seconds(consumer.pid) - before) / 10 * 100

        if sweep_n:
            os.killpg(watcher.pid, signal.SIGTERM)
            watcher.wait()
            big = json.loads(SWEEP_SESSION.read_bytes())
            for i in range(sweep_n):
                big["session_id"] = f"s{i}"
                big["messages"][0]["content"] = f"[{i}] " + big["messages"][0]["content"][-5000:]
                (sessions / f"session_s{i:04d}.json").write_text(json.dumps(big))
            start = time.perf_counter()
            subprocess.run([str(BIN / "timmy-compactor"), "sweep"], env=env, check=True, stdout=subprocess.DEVNULL)
            enqueued = time.perf_counter() - start
            views = [sessions / f"compacted_session_s{i:04d}.json" for i in range(sweep_n)]
            while not all(v.exists() for v in views):
                time.sleep(0.05)
                if time.perf_counter() - start > 300:
                    raise RuntimeError("sweep did not finish in 300 s")
            results |= {
                "sweep_s": time.perf_counter() - start,
                "sweep_enqueue_s": enqueued,
                "sweep_sessions_per_s": sweep_n / (time.perf_counter() - start),
            }
    finally:
        for proc in (watcher, consumer):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
                proc.wait(timeout=20)
        if redis is not None:
            redis.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--sweep", type=int, default=1000)
    parser.add_argument("--backends", default="sqlite,redis")
    parser.add_argument("--gap", type=float, default=0.3, help="seconds between writes")
    args = parser.parse_args()
    for backend in args.backends.split(","):
        if backend == "redis" and not shutil.which("redis-server"):
            print("redis: skipped (no redis-server)")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            r = run_backend(backend, args.writes, args.sweep, Path(tmp), args.gap)
        line = (
            f"{backend:6} latency over {args.writes} writes {args.gap:g} s apart: "
            f"p50 {r['p50_ms']:.0f} ms, p95 {r['p95_ms']:.0f} ms, max {r['max_ms']:.0f} ms; "
            f"idle consumer CPU {r['idle_cpu_pct']:.1f} %"
        )
        if "sweep_s" in r:
            line += (
                f"; sweep of {args.sweep} copies of {SWEEP_SESSION.name}: {r['sweep_s']:.1f} s "
                f"({r['sweep_sessions_per_s']:.0f}/s, enqueue {r['sweep_enqueue_s']:.1f} s)"
            )
        print(line, flush=True)


if __name__ == "__main__":
    main()
