"""`enqueue` (sidecar/targets.py, cli.py): by id or any path, state.db sessions, the recipe; non-sessions refused."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import Sidecar, load_sample, make_state_db, session_variant, wait_for, write_like_hermes
from tests.support_homes import write_default_config as write_config
from timmy_compactor.cli import main
from timmy_compactor.config import load_config

PYTHON = sys.executable
BIN = Path(sys.executable).parent / "timmy-compactor"


@pytest.fixture
def car(tmp_path: Path) -> Iterator[Sidecar]:
    car = Sidecar(tmp_path, "sqlite")
    sample = load_sample()
    for name in ("snap", "rel", "other"):
        write_like_hermes(car.sessions / f"session_{name}.json", session_variant(sample, name))
    make_state_db(car.root / "hermes" / "state.db", "dbonly", session_variant(sample, "dbonly")["messages"])
    yield car
    car.stop_all()


def enqueue(car: Sidecar, cwd: Path, *sessions: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN), "enqueue", *sessions], cwd=cwd, env=car.env, capture_output=True, text=True, timeout=60, check=False
    )


def results(car: Sidecar) -> list[str]:
    """The keys of the task results in the queue's storage, and the in-flight records of tasks (a task
    drops its own as it ends); the session leases and the once-a-period sweep marks live there too."""
    kept = ("timmy-compactor.lock.", "timmy-compactor.once.")
    return [k for k in queue(car).all_results() if not k.startswith(kept)]


def queue(car: Sidecar) -> Any:
    from timmy_compactor.sidecar.queue import make_huey

    return make_huey(load_config(car.config_path))


def test_enqueue_takes_ids_state_db_sessions_and_relative_paths_from_any_directory(car: Sidecar) -> None:
    elsewhere = car.root / "elsewhere"
    elsewhere.mkdir()
    done = enqueue(
        car,
        elsewhere,
        "snap",  # an id with a snapshot
        "dbonly",  # an id in state.db only (Hermes' default: no snapshots)
        "session_rel.json",  # a name: not here, so in the sessions dir
        "../hermes/sessions/session_other.json",  # a path relative to this directory
    )
    assert done.returncode == 0, done.stderr
    sessions = car.sessions.resolve()
    assert done.stdout.splitlines() == [
        f"enqueued snap ({sessions / 'session_snap.json'})",
        "enqueued dbonly (state.db session dbonly)",
        f"enqueued session_rel.json ({sessions / 'session_rel.json'})",
        f"enqueued ../hermes/sessions/session_other.json ({sessions / 'session_other.json'})",
    ]
    assert queue(car).pending_count() == 4
    car.start("consumer")
    views = [car.sessions / f"compacted_session_{n}.json" for n in ("snap", "dbonly", "rel", "other")]
    assert wait_for(lambda: all(v.exists() for v in views), timeout=60), car.log_text()
    assert json.loads(views[1].read_text())["timmy_compaction"]["source"] == "state.db"
    # the sidecar's own tasks leave no result behind in the queue's storage
    assert wait_for(lambda: queue(car).pending_count() == 0, timeout=30)
    assert wait_for(lambda: results(car) == [], timeout=10), results(car)  # (a task ends after its view)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nosuch", "nosuch: no session of that id: neither {sessions}/session_nosuch.json nor a session in state.db"),
        ("session_nosuch.json", "session_nosuch.json: no such session file"),
        ("compacted_session_snap.json", "not a session file"),
        ("/etc/passwd", "not a session file"),
    ],
)
def test_enqueue_refuses_what_names_no_session_and_enqueues_nothing(car: Sidecar, name: str, expected: str) -> None:
    write_like_hermes(car.sessions / "compacted_session_snap.json", load_sample())  # a view, by its name
    done = enqueue(car, car.root, "snap", name)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and expected.format(sessions=car.sessions) in done.stderr
    assert queue(car).pending_count() == 0


RECIPE = """
import json, sys
from timmy_compactor.tasks import enqueue
from tasks import compact_session
by_id = enqueue("snap")
by_db = enqueue("dbonly")
plain = compact_session(sys.argv[1])  # the plain huey call keeps its result too
outcomes = [r.get(blocking=True, timeout=60) for r in (by_id, by_db, plain)]
print(json.dumps([[o["action"], o["path"]] for o in outcomes]))
"""


def test_the_python_recipe_returns_a_result_handle_from_any_directory(car: Sidecar) -> None:
    car.start("consumer")
    # the start's sweep compacts these sessions too: let it finish, or a task of the recipe may find
    # its session leased by the sweep's (`busy`: the holder runs it again) instead of doing it itself
    views = [car.sessions / f"compacted_session_{n}.json" for n in ("snap", "dbonly", "other")]
    assert wait_for(lambda: all(v.exists() for v in views), timeout=60), car.log_text()
    assert wait_for(lambda: queue(car).pending_count() == 0 and results(car) == [], timeout=30)  # all ended
    elsewhere = car.root / "elsewhere"
    elsewhere.mkdir()
    raw = str(car.sessions.resolve() / "session_other.json")
    done = subprocess.run(
        [PYTHON, "-c", RECIPE, raw],
        cwd=elsewhere,
        env=car.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr + car.log_text()
    outcomes = json.loads(done.stdout.splitlines()[-1])
    assert outcomes == [  # each view is current already (the start's sweep made it): nothing to write
        ["unchanged", str(car.sessions.resolve() / "session_snap.json")],
        ["unchanged", "state.db#dbonly"],
        ["unchanged", raw],
    ]
    assert (car.sessions / "compacted_session_other.json").exists()
    assert wait_for(lambda: results(car) == [], timeout=10), results(car)  # read results are gone from the store


# ---------------------------------------------------------------- what is not a session file is refused


def pending(config_path: Path) -> int:
    from timmy_compactor.sidecar.app import make_app

    return int(make_app(load_config(config_path)).huey.pending_count())


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda root, sessions: Path("/etc/passwd"), "not a session file"),
        (lambda root, sessions: sessions / "session_missing.json", "no such session file"),
        (lambda root, sessions: sessions / "compacted_session_a.json", "not a session file"),
        (lambda root, sessions: root / "session_a.json", "outside the sessions directory"),
        (lambda root, sessions: sessions, "no such session file"),
    ],
    ids=["etc-passwd", "missing", "a-view", "outside", "a-directory"],
)
def test_enqueue_refuses_what_is_not_a_session_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Any, expected: str
) -> None:
    config, sessions = write_config(tmp_path)
    doc = session_variant(load_sample(), "a")
    write_like_hermes(sessions / "session_a.json", doc)
    write_like_hermes(sessions / "compacted_session_a.json", doc)
    write_like_hermes(tmp_path / "session_a.json", doc)
    good = sessions / "session_a.json"
    code = main(["enqueue", str(good), str(make(tmp_path, sessions)), "--config", str(config)])
    out, err = capsys.readouterr()
    assert code == 2
    assert expected in err and len(err.strip().splitlines()) == 1 and err.startswith("timmy-compactor: error:")
    assert "enqueued" not in out
    assert pending(config) == 0  # nothing enqueued, not even the good path before it


def test_enqueue_accepts_a_session_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, sessions = write_config(tmp_path)
    write_like_hermes(sessions / "session_a.json", session_variant(load_sample(), "a"))
    assert main(["enqueue", str(sessions / "session_a.json"), "--config", str(config)]) == 0
    assert "enqueued" in capsys.readouterr().out
    assert pending(config) == 1
