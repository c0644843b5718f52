"""A third session source is one class and one line in SOURCES: with no change under sidecar/, its
sessions get views, sweeps (changed, deleted) and the watcher's attention."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from tests.support import Sidecar, tool_session
from timmy_compactor.config import Config, load_config
from timmy_compactor.sessions import sources
from timmy_compactor.sessions.files import Session, parse_session
from timmy_compactor.sessions.source import Listing, Places, SessionRef, Watched
from timmy_compactor.sidecar import sweep, work
from timmy_compactor.sidecar.dblook import places
from timmy_compactor.sidecar.records import Records
from timmy_compactor.sidecar.watcher import changed


@dataclass
class AgentFolderSource:
    """Another agent's sessions: `<hermes home>/agent/<key>.chat`, each a session document."""

    name: ClassVar[str] = "agent"
    folder: Path
    sessions_dir: Path

    @classmethod
    def open(cls, places: Places) -> AgentFolderSource | None:
        assert places.hermes_home is not None
        folder = places.hermes_home / "agent"
        return cls(folder, places.sessions_dir) if folder.is_dir() else None

    @classmethod
    def watched(cls, places: Places) -> list[Watched]:
        assert places.hermes_home is not None
        key_of = lambda name: name.removesuffix(".chat") if name.endswith(".chat") else None  # noqa: E731
        return [
            Watched(source=cls.name, folder=places.hermes_home / "agent", events=frozenset({"closed"}), key_of=key_of)
        ]

    def listing(self) -> Listing:
        return Listing(tuple(self._ref(path) for path in sorted(self.folder.glob("*.chat"))))

    def find(self, key: str) -> SessionRef | None:
        path = self.folder / f"{key}.chat"
        return self._ref(path) if path.is_file() else None

    def _ref(self, path: Path) -> SessionRef:
        stat = path.stat()
        key = path.name.removesuffix(".chat")
        return SessionRef(source=self.name, session_id=key, key=key, mark=(stat.st_mtime_ns, stat.st_size), path=path)

    def read(self, ref: SessionRef) -> Session:
        # named as a snapshot of this key would be: its view lands where every view of the key does
        session = parse_session(self.sessions_dir / f"session_{ref.key}.json", self.raw(ref))
        return Session(**{**session.__dict__, "source": self.name})

    def history(self, ref: SessionRef) -> Session:
        return self.read(ref)

    def raw(self, ref: SessionRef) -> bytes:
        assert ref.path is not None
        return ref.path.read_bytes()


def _key_of_name(name: str) -> str | None:
    return name.removesuffix(".chat") if name.endswith(".chat") else None


def chat(folder: Path, key: str, steps: int) -> Path:
    path = folder / f"{key}.chat"
    path.write_text(json.dumps({"session_id": key, "messages": tool_session(steps)}))
    return path


@pytest.fixture
def agent_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Config, Path]:
    monkeypatch.setattr(sources, "SOURCES", [*sources.SOURCES, AgentFolderSource])  # the one registration
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    config = load_config(car.config_path)
    folder = config.hermes_home / "agent"
    folder.mkdir(parents=True)
    return config, folder


def test_a_third_source_gets_views_and_records(agent_home: tuple[Config, Path]) -> None:
    config, folder = agent_home
    chat(folder, "elsewhere", 40)
    records = Records(config.state_dir)
    result = work.process("elsewhere", config, records)
    assert result.action == "written", result
    view = config.sessions_dir / "compacted_session_elsewhere.json"
    assert view.exists()
    record = records.get("agent", "elsewhere")
    assert record is not None and record.action == "written"
    assert work.process("elsewhere", config, records).action == "unchanged"


def test_a_third_source_is_swept_changed_and_deleted(agent_home: tuple[Config, Path]) -> None:
    config, folder = agent_home
    records = Records(config.state_dir)
    path = chat(folder, "a", 40)
    chat(folder, "b", 40)
    assert sweep.sweep_sources(config, records).stale == ["a", "b"]  # new: never read
    for key in ("a", "b"):
        assert work.process(key, config, records).action == "written"
    assert sweep.sweep_sources(config, records).stale == []
    chat(folder, "b", 45)
    os.utime(folder / "b.chat", ns=(1, 1))  # a new mark, whatever the clock's resolution
    assert sweep.sweep_sources(config, records).stale == ["b"]
    path.unlink()  # deleted in the other agent: its view goes with it
    swept = sweep.sweep_sources(config, records)
    assert swept.removed == 1 and not (config.sessions_dir / "compacted_session_a.json").exists()
    assert records.get("agent", "a") is None


def test_the_watcher_watches_what_a_third_source_asks(agent_home: tuple[Config, Path]) -> None:
    config, folder = agent_home
    what = sources.watched(places(config))
    assert [(one.source, one.folder) for one in what][-1] == ("agent", folder)
    meaning = changed(what, str(folder / "x.chat"))
    assert meaning is not None and (meaning[0].source, meaning[1]) == ("agent", "x")
    assert changed(what, str(folder / "notes.txt")) is None
    snapshot = changed(what, str(config.sessions_dir / "session_y.json"))
    assert snapshot is not None and (snapshot[0].source, snapshot[1]) == ("file", "y")
    commit = changed(what, str(config.hermes_home / "state.db-wal"))
    assert commit is not None and (commit[0].source, commit[1]) == ("state.db", None)


def test_status_reports_a_third_source_and_names_a_state_db_session_as_such(agent_home: tuple[Config, Path]) -> None:
    from tests.support import make_state_db
    from timmy_compactor.sidecar import status

    config, folder = agent_home
    chat(folder, "elsewhere", 40)
    make_state_db(config.hermes_home / "state.db", "s1", tool_session(3))
    records = Records(config.state_dir)
    assert work.process("elsewhere", config, records).action == "written"
    report = status.gather(config)
    by_key = {s.key: s for s in report.sessions}
    assert (by_key["elsewhere"].source, by_key["elsewhere"].view) == ("agent", "fresh")
    assert by_key["elsewhere"].path == folder / "elsewhere.chat"
    assert (by_key["s1"].source, by_key["s1"].name, by_key["s1"].path) == ("state.db", "state.db#s1", None)
    data = report.as_json()
    assert data["sources"]["agent"]["sessions"] == 1 and data["sources"]["state_db"]["sessions"] == 1
    assert {e["path"] for e in data["per_session"]} == {str(folder / "elsewhere.chat"), "state.db#s1"}
    assert "session_s1.json" not in json.dumps(data)  # no invented file for a state.db session


def test_a_state_db_views_raw_file_names_its_source_and_still_restores(tmp_path: Path) -> None:
    from tests.support import make_state_db
    from timmy_compactor.compactor import recall_source, restore_file

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    config = load_config(car.config_path)
    make_state_db(config.hermes_home / "state.db", "s1", tool_session(40))
    assert work.process("s1", config, Records(config.state_dir)).action == "written"
    view = config.sessions_dir / "compacted_session_s1.json"
    assert json.loads(view.read_text())["timmy_compaction"]["raw_file"] == "state.db#s1"
    _, session = restore_file(view, config)
    assert len(session.messages) == len(tool_session(40))
    assert len(recall_source(str(view), config).messages) == len(tool_session(40))
