"""Recovery after a Redis outage (issue 33 item 7): how long after Redis returns a session written
during the outage gets its view.

    PYTHONPATH=. .venv/bin/python bench/bench_outage.py [--rounds 3] [--down 20]

A real consumer and watcher (`Sidecar`) on one redis-server on a free port. Each round: Redis is
stopped, a session is written `--down`/2 s into the outage (the watcher cannot enqueue it: it waits in
its backlog, retried with back-off), Redis is started again after `--down` s, and the time from its
return to the session's view is measured. Printed: each round and the median. Run it with PYTHONPATH
at another copy of the package to compare (the consumer and watcher are started with that PYTHONPATH).
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
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--down", type=float, default=20.0, help="seconds Redis is away in each round")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="timmy-outage-"))
    redis = RedisServer(root)
    redis.start()
    car = Sidecar(root / "car", "redis", redis.url)
    base = load_sample()
    late: list[float] = []
    try:
        car.start("consumer")
        car.start("watcher")
        assert car.wait_watching(), car.log_text()
        for k in range(args.rounds):
            redis.stop()
            time.sleep(args.down / 2)
            write_like_hermes(car.sessions / f"session_out{k}.json", session_variant(base, f"out{k}"))
            time.sleep(args.down / 2)
            redis.start()
            back = time.monotonic()
            view = car.sessions / f"compacted_session_out{k}.json"
            assert wait_for(view.exists, timeout=120, interval=0.05), car.log_text()
            late.append(time.monotonic() - back)
            print(f"round {k + 1}: view {late[-1]:.2f} s after Redis returned", flush=True)
    finally:
        car.stop_all()
        redis.stop()
    print(f"median over {len(late)} rounds ({args.down:g} s outages): {statistics.median(late):.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
