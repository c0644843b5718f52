"""sessions/names.py: THE naming rule, any id made one safe file name, paths kept inside their folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import (
    Sidecar,
    add_db_session,
    load_sample,
    make_state_db,
    session_variant,
    tool_session,
    write_like_hermes,
)
from tests.support_homes import sidecar_config
from timmy_compactor.export import export_sessions
from timmy_compactor.sessions.names import file_id, is_session_name, session_id_of, session_name
from timmy_compactor.sidecar import folder, sweep, work
from timmy_compactor.sidecar.records import Records
from timmy_compactor.sidecar.watcher import Debouncer, SessionEventHandler


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("session_abc.json", True),
        ("session_.json", False),
        ("compacted_session_abc.json", False),
        (".session_abc_x1y2.tmp", False),
        ("session_abc.json.tmp", False),
        ("sessions.json", False),
        ("request_dump_1.json", False),
        ("session_abc.jsonl", False),
    ],
)
def test_the_naming_rule(name: str, expected: bool) -> None:
    assert is_session_name(name) is expected


def test_ids_and_names_round_trip() -> None:
    assert session_id_of(Path("/x/session_20261122_ab.c.json")) == "20261122_ab.c"
    assert session_name("20261122_ab") == "session_20261122_ab.json"
    assert session_id_of(session_name("20261122_ab")) == "20261122_ab"
    # issue 21: an id that is not plain gets the name Hermes' snapshot writer gives it (names.file_id)
    assert session_name("20261122_ab.c") == "session_20261122_ab_c_8e7cba72c9e1.json"
    assert session_id_of("chat.json") == "chat"  # any other file: its stem


def test_session_dot_json_without_an_id_is_no_session_anywhere(tmp_path: Path) -> None:
    sessions = tmp_path / "hermes" / "sessions"
    sessions.mkdir(parents=True)
    write_like_hermes(sessions / "session_.json", session_variant(load_sample(), "empty-id"))
    write_like_hermes(sessions / "session_ok.json", session_variant(load_sample(), "ok"))
    config = sidecar_config(tmp_path, sessions, tmp_path / "hermes")
    records = Records(config.state_dir)
    # the sidecar
    assert work.process_path(sessions / "session_.json", config, records).action == "refused"
    assert [p.name for p in folder.session_files(sessions)] == ["session_ok.json"]
    assert sweep.sweep_sources(config, records).stale == ["ok"]
    # the watcher
    touched: list[str] = []
    debouncer = Debouncer(0.01, touched.append)
    handler = SessionEventHandler(debouncer)

    class Moved:
        is_directory = False
        event_type = "moved"

        def __init__(self, dest: Path) -> None:
            self.dest_path = str(dest)

    handler.on_any_event(Moved(sessions / "session_.json"))  # type: ignore[arg-type]
    handler.on_any_event(Moved(sessions / "session_ok.json"))  # type: ignore[arg-type]
    assert debouncer.pending() == 1
    # the export
    summary = export_sessions(sessions, tmp_path / "out")
    assert (summary.seen, summary.exported) == (1, 1)
    # the evaluation
    from timmy_compactor.compare.cli import _session_paths

    assert [p.name for p in _session_paths([str(sessions)], sessions)] == ["session_ok.json"]


# ---------------------------------------------------------------- ids from state.db: one safe name, in the folder


HOSTILE = ("x/../../../escaped", "y/../../escaped2", "..", "a\x00b", "z" * 300, "c:\\win\\path", "%2e%2e")


def test_file_id_keeps_hermes_ids_and_turns_any_other_into_one_safe_component() -> None:
    for normal in ("20260425_143012_a1b2c3", "0f8fad5b-d9cb-469f-a165-70867728950e", "s1", "cron_job-7"):
        assert file_id(normal) == normal  # existing views keep their names
    seen = set()
    for bad in HOSTILE:
        name = file_id(bad)
        assert "/" not in name and "\\" not in name and "\x00" not in name and ".." not in name, name
        assert 0 < len(name) <= 109 and name not in (".", "..")
        seen.add(name)
    assert len(seen) == len(HOSTILE), "two ids must not share a name"
    assert file_id("a b") != file_id("a_b") and file_id("a.b") != file_id("a_b")
    from timmy_compactor.sessions.names import UnsafeIdError

    for refused in ("", "   ", "q" * 1_001, None, b"bytes"):
        with pytest.raises(UnsafeIdError):
            file_id(refused)


def test_file_id_is_the_name_hermes_gives_the_snapshot() -> None:
    """A state.db session's view must sit beside the snapshot Hermes writes for it."""
    run_agent = pytest.importorskip("run_agent", reason="hermes-agent is not installed")
    for session_id in (*HOSTILE, "20260425_143012_a1b2c3", "a.b", "_x_", "üñí", "a%2F"):
        assert file_id(session_id) == run_agent._safe_session_filename_component(session_id), session_id


def test_a_hostile_id_never_writes_outside_the_sessions_folder(tmp_path: Path) -> None:
    """The issue's attack: a directory (or a symlink) named `session_<x>` in the sessions folder and an
    id `x/../../../escaped` wrote a full view into HOME. Every view must land in the sessions folder."""
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (car.sessions / "session_x").mkdir()
    (car.sessions / "session_y").symlink_to(outside, target_is_directory=True)
    path = car.root / "hermes" / "state.db"
    make_state_db(path, "x/../../../escaped", tool_session(40))
    add_db_session(path, "y/../escaped2", tool_session(40))
    add_db_session(path, "s1", tool_session(40))
    everything_before = {p for p in tmp_path.rglob("*") if car.sessions not in p.parents}
    run = car.cli("sweep", "--now", "--json")
    assert json.loads(run.stdout) == {"sessions": 3, "written": 3}, run.stderr
    assert {p for p in tmp_path.rglob("*") if car.sessions not in p.parents} - everything_before <= {
        p for p in tmp_path.rglob("*") if car.state in p.parents or p == car.state or p.name.endswith(".log")
    }, "a file was written outside the sessions and state folders"
    assert list(outside.iterdir()) == [] and list((car.sessions / "session_x").iterdir()) == []
    names = sorted(p.name for p in car.sessions.glob("compacted_*"))
    assert names == sorted(
        f"compacted_session_{file_id(i)}.json" for i in ("x/../../../escaped", "y/../escaped2", "s1")
    )
    again = car.cli("sweep", "--now", "--json")  # the views are known: none is an orphan, none redone
    assert json.loads(again.stdout) == {"sessions": 0}, again.stderr
    assert sorted(p.name for p in car.sessions.glob("compacted_*")) == names
    show = car.cli("show", "x/../../../escaped", "--ref", "0")  # recall by the real id finds its rows
    assert show.returncode == 0 and "fix the bug in /srv/app/main.py" in show.stdout, show.stderr


def test_inside_refuses_paths_that_leave_their_folder(tmp_path: Path) -> None:
    from timmy_compactor.sessions.names import OutsideFolderError, inside
    from timmy_compactor.sessions.rawstore import RawStore

    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "session_x").mkdir()
    (folder / "link").symlink_to(tmp_path, target_is_directory=True)
    assert inside(folder / "compacted_session_a.json", folder) == folder.resolve() / "compacted_session_a.json"
    for escaping in (folder / "session_x" / ".." / ".." / "escaped.json", folder / "link" / "v.json", folder / ".."):
        with pytest.raises(OutsideFolderError):
            inside(escaping, folder)
    store = RawStore(tmp_path / "engine")
    for session_id in HOSTILE:
        assert store.directory(session_id).parent == (tmp_path / "engine").resolve()
