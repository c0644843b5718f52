"""sessions/sources.py: where sessions come from; state.db wins over the snapshot of the same session."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import orjson
import pytest

from tests.support import Sidecar, add_db_session, make_state_db, tool_session
from timmy_compactor.compactor import recall_source
from timmy_compactor.config import load_config
from timmy_compactor.export import export_sessions
from timmy_compactor.sessions import sources
from timmy_compactor.sessions.files import Session, parse_session
from timmy_compactor.sessions.names import file_id
from timmy_compactor.sessions.sources import (
    SNAPSHOT,
    STATE_DB,
    Listing,
    Picker,
    Places,
    SessionRef,
)
from timmy_compactor.sessions.statedb import StateDB, StateDBError
from timmy_compactor.sidecar import dblook, sweep, work
from timmy_compactor.sidecar.records import Records


def snapshot(sessions: Path, key: str, n: int = 4) -> Path:
    path = sessions / f"session_{key}.json"
    path.write_text(json.dumps({"session_id": key, "messages": tool_session(n)}))
    return path


@pytest.fixture
def home(tmp_path: Path) -> Places:
    """state.db holds `both` and `dbonly`; the sessions folder the snapshots of `both` and `fileonly`."""
    hermes = tmp_path / "hermes"
    (hermes / "sessions").mkdir(parents=True)
    make_state_db(hermes / "state.db", "both", tool_session(6))
    add_db_session(hermes / "state.db", "dbonly", tool_session(3))
    snapshot(hermes / "sessions", "both", 2)  # frozen: fewer messages than its rows
    snapshot(hermes / "sessions", "fileonly")
    return Places(sessions_dir=hermes / "sessions", hermes_home=hermes)


def winners(picker: Picker) -> dict[str, str]:
    return {ref.session_id: ref.source for ref in picker.pick().sessions}


def test_state_db_wins_over_the_snapshot_of_the_same_session(home: Places) -> None:
    picker = Picker.of(home)
    picked = picker.pick()
    assert winners(picker) == {"both": STATE_DB, "dbonly": STATE_DB, "fileonly": SNAPSHOT}
    assert picked.known == {"both", "dbonly", "fileonly"} and not picked.unavailable
    for key, source in (("both", STATE_DB), ("dbonly", STATE_DB), ("fileonly", SNAPSHOT)):
        found, unavailable = picker.find(key)
        assert found is not None and found.source == source and not unavailable
    assert picker.find("nowhere") == (None, {})
    both = next(r for r in picked.sessions if r.session_id == "both")
    assert len(picker.read(both).messages) == len(tool_session(6))  # the rows, not the frozen snapshot


def test_a_snapshot_only_and_a_db_only_session_are_each_their_source_s(home: Places) -> None:
    picked = Picker.of(home).pick()
    (fileonly,) = picked.of(SNAPSHOT)
    assert fileonly.path == (home.sessions_dir / "session_fileonly.json").resolve()
    assert fileonly.mark == (fileonly.path.stat().st_mtime_ns, fileonly.path.stat().st_size)
    assert [r.session_id for r in picked.of(STATE_DB)] == ["both", "dbonly"]
    assert all(isinstance(r.mark, int) for r in picked.of(STATE_DB))


def test_without_state_db_the_snapshots_are_every_session(home: Places) -> None:
    assert home.hermes_home is not None
    (home.hermes_home / "state.db").unlink()
    picked = Picker.of(home).pick()
    assert {r.session_id: r.source for r in picked.sessions} == {"both": SNAPSHOT, "fileonly": SNAPSHOT}
    assert not picked.unavailable


def test_an_unavailable_state_db_leaves_the_snapshots_and_deletes_nothing(home: Places, tmp_path: Path) -> None:
    assert home.hermes_home is not None
    (home.hermes_home / "state.db").write_bytes(b"not a database" * 100)
    picker = Picker.of(home)
    picked = picker.pick()
    assert {r.session_id: r.source for r in picked.sessions} == {"both": SNAPSHOT, "fileonly": SNAPSHOT}
    assert isinstance(picked.unavailable[STATE_DB], StateDBError)  # its sessions: unknown, not deleted
    assert picked.unavailable[STATE_DB].cause == "corrupt"  # type: ignore[attr-defined]
    found, unavailable = picker.find("both")
    assert found is not None and found.source == SNAPSHOT and STATE_DB in unavailable
    # the sidecar: a view state.db stood behind stays while it cannot be read
    car = Sidecar(tmp_path / "car", "sqlite", window=8_000)
    make_state_db(car.root / "hermes" / "state.db", "s1", tool_session(40))
    config = load_config(car.config_path)
    records = Records(config.state_dir)
    assert work.process("s1", config, records).action == "written"
    (car.root / "hermes" / "state.db").write_bytes(b"not a database" * 100)
    look = dblook.look_at_state_db(config, records, quiet=True)
    picked = dblook.picker(config, look).pick()
    assert picked.sessions == () and set(picked.unavailable) == {STATE_DB}
    assert sweep.sweep_sources(config, records, look).removed == 0
    assert (car.sessions / "compacted_session_s1.json").exists()


def test_a_snapshot_named_by_its_file_id_loses_to_its_state_db_session(tmp_path: Path) -> None:
    hermes = tmp_path / "hermes"
    (hermes / "sessions").mkdir(parents=True)
    hostile = "x/../y"
    make_state_db(hermes / "state.db", hostile, tool_session(3))
    snapshot(hermes / "sessions", file_id(hostile))
    picker = Picker.of(Places(sessions_dir=hermes / "sessions", hermes_home=hermes))
    assert winners(picker) == {hostile: STATE_DB}
    found, _ = picker.find(file_id(hostile))
    assert found is not None and (found.source, found.session_id) == (STATE_DB, hostile)


def test_a_snapshot_event_lists_no_state_db_sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One event, one look: no GROUP BY over every session's messages, for a plain id or a hashed file id."""
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    hostile = "x/../z"
    make_state_db(car.root / "hermes" / "state.db", "s1", tool_session(40))
    add_db_session(car.root / "hermes" / "state.db", hostile, tool_session(40))
    config = load_config(car.config_path)
    records = Records(config.state_dir)
    listed: list[str] = []
    real = StateDB.high_water_marks

    def counted(self: StateDB) -> dict[str, int]:
        listed.append("GROUP BY")
        return real(self)

    monkeypatch.setattr(StateDB, "high_water_marks", counted)
    for key, db_id in (("s1", "s1"), (file_id(hostile), hostile)):
        result = work.process_path(snapshot(car.sessions, key, 2), config, records)
        assert (result.path, result.action) == (f"state.db#{file_id(db_id)}", "written")
    plain = work.process_path(snapshot(car.sessions, "fileonly", 2), config, records)
    assert plain.path.endswith("session_fileonly.json")
    assert listed == []


@dataclass
class MemorySource:
    """A third session source (a test double): sessions held in memory."""

    name: ClassVar[str] = "memory"
    held: ClassVar[dict[str, list[dict[str, object]]]] = {}

    @classmethod
    def open(cls, places: Places) -> MemorySource:
        return cls()

    def listing(self) -> Listing:
        return Listing(tuple(self._ref(key) for key in sorted(self.held)))

    def find(self, key: str) -> SessionRef | None:
        return self._ref(key) if key in self.held else None

    def _ref(self, key: str) -> SessionRef:
        return SessionRef(source=self.name, session_id=key, key=key, mark=len(self.held[key]))

    def read(self, ref: SessionRef) -> Session:
        return parse_session(Path(f"session_{ref.session_id}.json"), self.raw(ref))

    def history(self, ref: SessionRef) -> Session:
        return self.read(ref)

    def raw(self, ref: SessionRef) -> bytes:
        return orjson.dumps({"session_id": ref.session_id, "messages": self.held[ref.session_id]})


def test_a_third_source_is_one_class_and_one_registration(
    home: Places, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(MemorySource, "held", {"both": tool_session(1), "memonly": tool_session(2)})
    monkeypatch.setattr(sources, "SOURCES", [*sources.SOURCES, MemorySource])  # the one registration
    picker = Picker.of(home)
    assert winners(picker) == {"both": STATE_DB, "dbonly": STATE_DB, "fileonly": SNAPSHOT, "memonly": "memory"}
    found, _ = picker.find("memonly")
    assert found is not None and found.source == "memory"
    # the export and `show` read it through the picker, like any other
    summary = export_sessions(home.sessions_dir, tmp_path / "out", hermes_home=home.hermes_home, progress=False)
    assert summary.exported == 4, summary
    exported = [json.loads(line)["id"] for line in (tmp_path / "out" / "conversations.jsonl").read_text().splitlines()]
    assert sorted(exported) == ["both", "dbonly", "fileonly", "memonly"]
    car = Sidecar(tmp_path / "car", "sqlite")
    assert len(recall_source("memonly", load_config(car.config_path)).messages) == len(tool_session(2))
    # registered first, it wins over the others
    monkeypatch.setattr(sources, "SOURCES", [MemorySource, *sources.SOURCES[:-1]])
    assert winners(Picker.of(home))["both"] == "memory"


def test_an_unreadable_sessions_folder_is_an_unavailable_source(home: Places, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.scandir

    def refused(where: object = ".") -> object:
        if Path(os.fspath(where)).resolve() == home.sessions_dir.resolve():  # type: ignore[arg-type]
            raise PermissionError(13, "Permission denied")
        return real(where)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", refused)
    picked = Picker.of(home).pick()
    assert {r.session_id: r.source for r in picked.sessions} == {"both": STATE_DB, "dbonly": STATE_DB}
    assert isinstance(picked.unavailable[SNAPSHOT], sources.SessionsDirUnreadableError)
    assert "chmod u+rx" in str(picked.unavailable[SNAPSHOT])


def test_the_export_and_enqueue_follow_the_picker_for_an_id_no_file_name_holds(tmp_path: Path) -> None:
    """A state.db id that is not its own file id (`x/../y`): its snapshot `session_<file id>.json` is the
    same session, so the export leaves it out and `enqueue <file id>` names the state.db session."""
    from timmy_compactor.sidecar.targets import resolve_target

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    hostile = "x/../y"
    make_state_db(car.root / "hermes" / "state.db", hostile, tool_session(3))
    snapshot(car.sessions, file_id(hostile))
    summary = export_sessions(car.sessions, tmp_path / "out", hermes_home=car.root / "hermes", progress=False)
    assert (summary.seen, summary.exported) == (1, 1)
    (record,) = [json.loads(line) for line in (tmp_path / "out" / "conversations.jsonl").read_text().splitlines()]
    assert record["id"] == hostile and record["source"]["file"] == f"state.db#{file_id(hostile)}"
    (car.sessions / f"session_{file_id(hostile)}.json").unlink()
    target = resolve_target(file_id(hostile), load_config(car.config_path))
    assert (target.kind, target.value) == ("db", hostile)


# ---------------------------------------------------------------- a snapshot named by file_id


def test_a_snapshot_named_by_file_id_is_its_state_db_session(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    hostile = "x/../../../escaped"
    make_state_db(car.root / "hermes" / "state.db", hostile, tool_session(40))
    config = load_config(car.config_path)
    snapshot = car.sessions / f"session_{file_id(hostile)}.json"  # what Hermes writes for it
    snapshot.write_text(json.dumps({"session_id": hostile, "messages": tool_session(10)}))
    result = work.process_path(snapshot, config, Records(config.state_dir))
    assert (result.path, result.action) == (f"state.db#{file_id(hostile)}", "written")
