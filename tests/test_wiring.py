"""The sidecar's task wiring, in one process with Huey's immediate mode (no consumer, no sleeps): what
each task does with the others -- the sweep enqueues what changed and each task makes its view, a
session leased elsewhere gives its worker back and runs once its holder lets go."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import Sidecar, load_sample, session_variant, write_like_hermes
from timmy_compactor.config import load_config
from timmy_compactor.sidecar import lease
from timmy_compactor.sidecar.app import App, make_app


@pytest.fixture
def app(tmp_path: Path) -> App:
    car = Sidecar(tmp_path, "sqlite")
    built = make_app(load_config(car.config_path))
    built.huey.immediate = True  # tasks run in the caller, at once; the leases stay in the state dir's queue db
    return built


def sessions_dir(app: App) -> Path:
    return app.config.sessions_dir


def test_a_task_compacts_a_session_and_its_result_says_so(app: App) -> None:
    raw = sessions_dir(app) / "session_one.json"
    write_like_hermes(raw, session_variant(load_sample(), "one"))
    before = raw.read_bytes()
    result = app.compact_session(str(raw)).get()
    assert result["action"] == "written", result
    view = json.loads((sessions_dir(app) / "compacted_session_one.json").read_text())
    assert len(view["messages"]) < len(json.loads(before)["messages"])
    assert raw.read_bytes() == before  # the raw session is never written to


def test_the_sweep_enqueues_each_changed_session_once_and_each_gets_its_view(app: App) -> None:
    base = load_sample()
    for name in ("a", "b", "c"):
        write_like_hermes(sessions_dir(app) / f"session_{name}.json", session_variant(base, name))
    assert app.sweep_sessions().get() == 3
    assert {p.name for p in sessions_dir(app).glob("compacted_session_*.json")} == {
        "compacted_session_a.json",
        "compacted_session_b.json",
        "compacted_session_c.json",
    }
    assert app.sweep_sessions().get() == 0  # nothing changed since: nothing to do


def test_a_session_leased_elsewhere_returns_busy_and_runs_when_its_holder_lets_go(app: App) -> None:
    raw = sessions_dir(app) / "session_held.json"
    write_like_hermes(raw, session_variant(load_sample(), "held"))
    holder = lease.Leases(app.huey)
    held = holder.take("session:held", {"task": "compact_session", "arg": "another host"})
    assert held is not None
    try:
        assert app.compact_session(str(raw)).get()["action"] == "busy"
        assert app.compact_session(str(raw)).get()["action"] == "busy"
        assert not (sessions_dir(app) / "compacted_session_held.json").exists()
    finally:
        rerun = holder.release(held)
    assert rerun == {"task": "compact_session", "arg": str(raw)}  # one rerun, however many waited
    assert app.leases.take("session:held", {"task": "compact_session", "arg": str(raw)}) is not None


def test_an_immediate_mode_lease_store_lives_as_long_as_its_storage() -> None:
    """Leases of one in-memory huey share one store; a dropped huey takes its store with it (a test
    run makes hundreds of them)."""
    import gc
    import weakref

    from huey import MemoryHuey

    from timmy_compactor.sidecar import kv

    huey = MemoryHuey("wiring", immediate=True)
    ops = kv.ops_of(huey)
    assert ops.add("k", b"v", 10.0) and kv.ops_of(huey) is ops and kv.ops_of(huey).get("k") == b"v"
    assert kv.ops_of(MemoryHuey("other", immediate=True)).get("k") is None
    gone = weakref.ref(huey.storage)
    del huey, ops
    gc.collect()
    assert gone() is None
