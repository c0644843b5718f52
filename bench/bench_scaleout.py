"""Several consumers on one Redis while a dead host holds a live session's lease (issue 21.7).

    .venv/bin/python bench/bench_scaleout.py [--consumers 2] [--workers 2] [--sessions 60] [--lease 10] [--baseline]

Starts `--consumers` real `huey_consumer tasks.huey` (each its own state dir, one sessions folder,
one redis-server on a free port). A consumer of another host died holding session `hot`: its lease
and in-flight record are in Redis, nothing renews them. Five tasks for `hot` are enqueued (five
writes), then `--sessions` other sessions are written and enqueued one after the other. Reported:
write-to-view p50/p95/max of the other sessions (a locked session must not hold their workers), and
when `hot`'s view appears (within about one lease: a survivor runs the dead host's in-flight session).
`--baseline`: the same load with no dead host, to compare.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.support import RedisServer, Sidecar, load_sample, session_variant, wait_for, write_like_hermes  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sessions", type=int, default=60)
    parser.add_argument("--lease", type=float, default=10.0)
    parser.add_argument("--baseline", action="store_true", help="no dead host: the same load for comparison")
    args = parser.parse_args()
    import os

    os.environ["TIMMY_LEASE_SECONDS"] = str(args.lease)
    from timmy_compactor.config import load_config
    from timmy_compactor.sidecar import lease
    from timmy_compactor.sidecar.app import make_app

    root = Path(tempfile.mkdtemp(prefix="timmy-scaleout-"))
    redis = RedisServer(root)
    redis.start()
    cars = [Sidecar(root / f"c{k}", "redis", redis.url) for k in range(args.consumers)]
    for car in cars[1:]:
        car.config_path.write_text(cars[0].config_path.read_text().replace(str(cars[0].state), str(car.state)))
    for car in cars:
        car.env["TIMMY_LEASE_SECONDS"] = str(args.lease)
    sessions = cars[0].sessions
    try:
        app = make_app(load_config(cars[0].config_path))
        base = load_sample()
        hot = sessions / "session_hot.json"
        write_like_hermes(hot, session_variant(base, "hot"))
        for car in cars:
            car.start("consumer", args.workers)
        assert wait_for(lambda: all("consumer started" in c.log_text().lower() for c in cars), timeout=60)
        dead = lease.Leases(app.huey)
        dead.host = "lost-host"
        if not args.baseline:
            held = dead.take("session:hot", {"task": "compact_session", "arg": str(hot)})
            assert held is not None
            held.stop()  # its host is gone
        started = time.monotonic()
        for _ in range(5):
            app.compact_session(str(hot))
        written: dict[Path, float] = {}
        for k in range(args.sessions):
            raw = sessions / f"session_s{k}.json"
            write_like_hermes(raw, session_variant(base, f"s{k}"))
            app.compact_session(str(raw))
            written[sessions / f"compacted_session_s{k}.json"] = time.monotonic()
        latency: dict[Path, float] = {}
        hot_view, hot_at = sessions / "compacted_session_hot.json", None
        deadline = time.monotonic() + 10 * args.lease + 60
        while (len(latency) < len(written) or hot_at is None) and time.monotonic() < deadline:
            for view, at in written.items():
                if view not in latency and view.exists():
                    latency[view] = time.monotonic() - at
            if hot_at is None and hot_view.exists():
                hot_at = time.monotonic() - started
            time.sleep(0.005)
        ms = sorted(v * 1000 for v in latency.values())
        p95 = ms[max(0, int(len(ms) * 0.95) - 1)] if ms else float("nan")
        print(f"{args.consumers} consumers x {args.workers} workers, lease {args.lease:g} s")
        print(
            f"other sessions: {len(ms)}/{len(written)} views, write->view p50 {statistics.median(ms):.0f} ms, "
            f"p95 {p95:.0f} ms, max {ms[-1]:.0f} ms"
        )
        print(f"hot session held by a dead host: view after {hot_at:.1f} s" if hot_at else "hot session: no view")
        logs = "".join(c.logs["consumer"].read_text() for c in cars)
        print(
            f"busy (worker given back): {logs.count('session_busy_elsewhere')}, "
            f"in-flight re-runs: {logs.count('inflight_session_rerun')}, tracebacks: {logs.count('Traceback')}"
        )
    finally:
        for car in cars:
            car.stop_all()
        redis.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
