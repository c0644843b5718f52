"""The sidecar's task body on real files: path checks, thresholds, hash skips, errors, locks."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from pathlib import Path

import pytest
import structlog

from tests.support import load_sample, session_variant, write_like_hermes
from timmy_compactor.config import Config, HueySection, ModelSection, SessionsSection
from timmy_compactor.sessions.files import read_provenance, sha256_bytes
from timmy_compactor.sessions.names import session_id_of
from timmy_compactor.sidecar import dblook, folder, sweep
from timmy_compactor.sidecar import work as sidecar
from timmy_compactor.sidecar.records import Records
from timmy_compactor.sidecar.report import SessionStatus
from timmy_compactor.sidecar.status import session_status as status_of


def session_status(path: Path, config: Config) -> SessionStatus:
    """`status`' reading of one snapshot, found through the sources as `status` finds it."""
    sources = dblook.picker(config, dblook.look_at_state_db(config, quiet=True))
    ref, _ = sources.find(session_id_of(path))
    assert ref is not None
    return status_of(sources, ref, config)[0]


@pytest.fixture
def env(tmp_path: Path) -> tuple[Config, Records, Path]:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    config = Config(
        model=ModelSection(context_window=20_000),
        sessions=SessionsSection(dir=str(sessions), hermes_home=str(tmp_path)),
        huey=HueySection(state_dir=str(tmp_path / "state")),
    )
    return config, Records(config.state_dir), sessions


def test_writes_view_above_threshold_and_leaves_raw_alone(env: tuple[Config, Records, Path]) -> None:
    config, records, sessions = env
    raw = sessions / "session_a.json"
    write_like_hermes(raw, session_variant(load_sample(), "a"))
    before = raw.read_bytes()
    result = sidecar.process_path(raw, config, records)
    assert result.action == "written"
    assert raw.read_bytes() == before
    view = sessions / "compacted_session_a.json"
    _, meta = read_provenance(view)
    assert meta["raw_sha256"] == sha256_bytes(before)
    assert oct(view.stat().st_mode & 0o777) == oct(0o600)
    # same bytes again: nothing recomputed, the view file is not rewritten
    mtime = view.stat().st_mtime_ns
    with structlog.testing.capture_logs() as logs:
        again = sidecar.process_path(raw, config, records)
    assert again.action == "unchanged"
    assert view.stat().st_mtime_ns == mtime
    # said at info, and the result (what an enqueue's handle returns) says its view is verified
    assert [(e["event"], e["log_level"], e["view"]) for e in logs] == [("view_current", "info", str(view))]
    assert again.report is not None and again.report["verified"] is True and again.report["triggered"] is True


def test_below_threshold_removes_a_stale_view(env: tuple[Config, Records, Path]) -> None:
    config, records, sessions = env
    raw = sessions / "session_b.json"
    write_like_hermes(raw, session_variant(load_sample(), "b"))
    assert sidecar.process_path(raw, config, records).action == "written"
    big_window = dataclasses.replace(config, model=ModelSection(context_window=1_000_000))
    assert sidecar.process_path(raw, big_window, records).action == "removed_stale"
    assert not (sessions / "compacted_session_b.json").exists()


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("compacted_session_c.json", "not a session file"),
        (".session_c_abc.tmp", "not a session file"),
        ("sessions.json", "not a session file"),
        ("request_dump_1.json", "not a session file"),
    ],
)
def test_refuses_non_session_files(env: tuple[Config, Records, Path], name: str, why: str) -> None:
    config, records, sessions = env
    (sessions / name).write_text("{}")
    result = sidecar.process_path(sessions / name, config, records)
    assert result.action == "refused"
    assert why in (result.reason or "")


def test_refuses_symlink_out_of_the_sessions_dir(env: tuple[Config, Records, Path], tmp_path: Path) -> None:
    config, records, sessions = env
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    target = outside / "session_x.json"
    write_like_hermes(target, session_variant(load_sample(), "x"))
    (sessions / "session_x.json").symlink_to(target)
    result = sidecar.process_path(sessions / "session_x.json", config, records)
    assert result.action == "refused"
    assert "outside the sessions directory" in (result.reason or "")
    assert sorted(p.name for p in outside.iterdir()) == ["session_x.json"]
    assert not (sessions / "compacted_session_x.json").exists()
    assert folder.session_files(sessions) == []


def test_malformed_json_is_retried_while_fresh_then_logged_once_per_hash(env: tuple[Config, Records, Path]) -> None:
    config, records, sessions = env
    raw = sessions / "session_bad.json"
    raw.write_text('{"messages": [{"role": "user", "content": "hi"}')  # truncated
    with pytest.raises(sidecar.StillWritingError):
        sidecar.process_path(raw, config, records, final_attempt=False)
    with structlog.testing.capture_logs() as logs:
        first = sidecar.process_path(raw, config, records, final_attempt=True)
        second = sidecar.process_path(raw, config, records, final_attempt=True)
    assert first.action == "bad_input" and "invalid JSON" in (first.reason or "")
    assert second.action == "known_bad"
    assert [entry["event"] for entry in logs].count("session_unreadable") == 1
    assert records.last_errors()[0].name == str(raw)
    # the fixed file is compacted again
    write_like_hermes(raw, session_variant(load_sample(), "bad"))
    assert sidecar.process_path(raw, config, records).action == "written"


def test_deleted_raw_removes_its_view(env: tuple[Config, Records, Path]) -> None:
    config, records, sessions = env
    raw = sessions / "session_d.json"
    write_like_hermes(raw, session_variant(load_sample(), "d"))
    sidecar.process_path(raw, config, records)
    raw.unlink()
    assert sidecar.process_path(raw, config, records).action == "gone"
    assert list(sessions.iterdir()) == []


def test_stale_sessions_follow_changes_and_lost_views(env: tuple[Config, Records, Path]) -> None:
    config, records, sessions = env
    paths = []
    for i in range(3):
        raw = sessions / f"session_{i}.json"
        write_like_hermes(raw, session_variant(load_sample(), str(i)))
        paths.append(raw.resolve())
    assert sweep.sweep_sources(config, records).stale == ["0", "1", "2"]
    for raw in paths:
        sidecar.process_path(raw, config, records)
    assert sweep.sweep_sources(config, records).stale == []
    (sessions / "compacted_session_1.json").unlink()
    time.sleep(0.01)
    write_like_hermes(paths[2], session_variant(load_sample(), "2-more"))
    assert sweep.sweep_sources(config, records).stale == ["1", "2"]


def test_session_lock_serialises_workers(tmp_path: Path) -> None:
    inside = []
    overlaps = []

    def worker() -> None:
        with sidecar.session_lock(tmp_path, "same-session"):
            inside.append(1)
            if len(inside) > 1:
                overlaps.append(1)
            time.sleep(0.02)
            inside.pop()

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == []


def test_status_counts_views(env: tuple[Config, Records, Path]) -> None:
    config, records, sessions = env
    sample = load_sample()
    write_like_hermes(sessions / "session_fresh.json", session_variant(sample, "fresh"))
    write_like_hermes(sessions / "session_missing.json", session_variant(sample, "missing"))
    small = session_variant(sample, "small", n_messages=3) | {"tools": []}
    write_like_hermes(sessions / "session_small.json", small)
    sidecar.process_path(sessions / "session_fresh.json", config, records)
    states = {p.name: session_status(p, config).view for p in folder.session_files(sessions)}
    assert states == {"session_fresh.json": "fresh", "session_missing.json": "missing", "session_small.json": "none"}
    os.utime(sessions / "session_fresh.json")  # same bytes: still fresh (content hash, not mtime)
    write_like_hermes(sessions / "session_fresh.json", session_variant(sample, "fresh2"))
    assert session_status(sessions / "session_fresh.json", config).view == "stale"
    assert json.loads((sessions / "compacted_session_fresh.json").read_text())["timmy_compaction"]["raw_file"] == (
        "session_fresh.json"
    )


def test_sweep_now_rebuilds_views_deleted_after_a_no_op_recheck(
    env: tuple[Config, Records, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 17.2: the sweep trusts the files, not its records — a missing view is work, even when the
    last record of its session is a no-op re-check (`unchanged`)."""
    from timmy_compactor.cli import main

    config, records, sessions = env
    config_file = tmp_path / "compaction.yaml"
    config_file.write_text(
        json.dumps(
            {
                "model": {"context_window": 20_000},
                "sessions": {"dir": str(sessions), "hermes_home": str(tmp_path)},
                "huey": {"state_dir": str(tmp_path / "state")},
            }
        )
    )
    for i in range(2):
        write_like_hermes(sessions / f"session_{i}.json", session_variant(load_sample(), str(i)))
    assert main(["sweep", "--now", "--json", "--config", str(config_file)]) == 0
    assert json.loads(capsys.readouterr().out) == {"sessions": 2, "written": 2}
    for i in range(2):  # a no-op re-check, as `enqueue` would run: the records now say "unchanged"
        assert sidecar.process_path(sessions / f"session_{i}.json", config, records).action == "unchanged"
    for view in sessions.glob("compacted_session_*.json"):
        view.unlink()
    assert main(["sweep", "--now", "--json", "--config", str(config_file)]) == 0
    assert json.loads(capsys.readouterr().out) == {"sessions": 2, "written": 2}
    assert sorted(p.name for p in sessions.glob("compacted_*")) == [
        "compacted_session_0.json",
        "compacted_session_1.json",
    ]
    assert main(["sweep", "--now", "--json", "--config", str(config_file)]) == 0
    assert json.loads(capsys.readouterr().out) == {"sessions": 0}


def test_status_says_when_a_fresh_view_is_above_the_budget(env: tuple[Config, Records, Path]) -> None:
    """A view can be fresh and still above target_after (its last step alone exceeds the budget):
    `status` says so instead of a plain "fresh"."""
    config, records, sessions = env
    config = dataclasses.replace(config, model=ModelSection(context_window=65_536))
    sample = load_sample()
    # its first 63 messages: above the trigger, their view well within the budget (the whole sample's view
    # was 40 tokens under it, and an index that lists more of what was printed passes it)
    write_like_hermes(sessions / "session_fits.json", session_variant(sample, "fits", 63))
    huge = session_variant(sample, "huge")
    huge["messages"] += [
        {"role": "user", "content": "print the whole log"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "big", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "big", "content": "\n".join(f"line {k} of the log" for k in range(3_000))},
    ]
    write_like_hermes(sessions / "session_huge.json", huge)
    for name in ("fits", "huge"):
        assert sidecar.process_path(sessions / f"session_{name}.json", config, records).action == "written"
    fits, over = (session_status(sessions / f"session_{n}.json", config) for n in ("fits", "huge"))
    assert (fits.view, fits.above_budget) == ("fresh", False)
    assert (over.view, over.above_budget) == ("fresh", True)


def test_of_many_processes_noting_one_outage_at_once_exactly_one_changes_the_note(tmp_path: Path) -> None:
    """The one-line-per-outage rule (state.db unavailable) holds when several workers see the outage
    in the same instant: the compare and the change are one transaction."""
    from concurrent.futures import ThreadPoolExecutor

    records = Records(tmp_path / "state")
    records.note("probe", {"cause": None})
    start = threading.Barrier(8)

    def note(_: int) -> bool:
        mine = Records(tmp_path / "state")  # its own connection, as another process has
        start.wait()
        changed = mine.note_unless("probe", {"cause": "schema"}, lambda noted: (noted or {}).get("cause") == "schema")
        return changed is not None

    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(note, range(8))) == 1
    assert records.noted("probe") == {"cause": "schema"}
