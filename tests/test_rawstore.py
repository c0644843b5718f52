"""The engine's raw log on disk: a resumed Hermes process finds the raw messages behind its refs."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import assistant, call, tool, user
from timmy_compactor.sessions.rawlog import RawLog
from timmy_compactor.sessions.rawstore import RAW_FILE, RETURNED_FILE, RawStore


def raw_messages(n: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = [user("start")]
    for i in range(n):
        out += [assistant(f"step {i}", call(f"c{i}", "terminal", command=f"cat /srv/f{i}")), tool(f"c{i}", f"out {i}")]
    return out


def test_a_saved_log_loads_in_a_new_store_with_what_was_returned(tmp_path: Path) -> None:
    log = RawLog()
    raw = raw_messages(10)
    log.absorb(raw)
    log.answered([raw[0], assistant("[folded #1–#20: 10 steps, see index]")])
    RawStore(tmp_path).save("s1", log)
    loaded = RawStore(tmp_path).load("s1")
    assert loaded is not None
    assert loaded.messages == raw and loaded.returned == log.returned
    assert oct((tmp_path / "s1").stat().st_mode & 0o777) == "0o700"
    assert oct((tmp_path / "s1" / RAW_FILE).stat().st_mode & 0o777) == "0o600"


def test_later_saves_append_only_the_new_messages(tmp_path: Path) -> None:
    store, log = RawStore(tmp_path), RawLog()
    raw = raw_messages(30)
    log.absorb(raw[:21])
    log.answered(raw[:3])
    store.save("s", log)
    first = (tmp_path / "s" / RAW_FILE).read_bytes()
    inode = (tmp_path / "s" / RAW_FILE).stat().st_ino
    log.absorb(raw[:3] + raw[21:])  # Hermes passes back what it got plus the new messages
    log.answered(raw[:3])
    store.save("s", log)
    after = (tmp_path / "s" / RAW_FILE).read_bytes()
    assert after.startswith(first) and len(after.splitlines()) == len(raw)
    assert (tmp_path / "s" / RAW_FILE).stat().st_ino == inode  # appended, not rewritten
    loaded = RawStore(tmp_path).load("s")
    assert loaded is not None and loaded.messages == raw


def test_lines_appended_before_a_crash_are_dropped_and_a_cut_line_is_ignored(tmp_path: Path) -> None:
    store, log = RawStore(tmp_path), RawLog()
    raw = raw_messages(5)
    log.absorb(raw)
    log.answered(raw[:2])
    store.save("s", log)
    with open(tmp_path / "s" / RAW_FILE, "ab") as handle:  # a later append whose answer never got written
        handle.write(json.dumps(user("never returned")).encode() + b"\n" + b'{"role": "tool", "cont')
    fresh = RawStore(tmp_path)
    loaded = fresh.load("s")
    assert loaded is not None and loaded.messages == raw
    loaded.absorb([*raw[:2], user("next")])
    fresh.save("s", loaded)
    lines = (tmp_path / "s" / RAW_FILE).read_bytes().splitlines()
    assert [json.loads(x) for x in lines] == [*raw, user("next")]


def test_files_that_do_not_agree_are_not_trusted(tmp_path: Path) -> None:
    store, log = RawStore(tmp_path), RawLog()
    log.absorb(raw_messages(5))
    store.save("s", log)
    lines = (tmp_path / "s" / RAW_FILE).read_bytes().splitlines()
    (tmp_path / "s" / RAW_FILE).write_bytes(b"\n".join(lines[:3]) + b"\n")  # fewer than it stands for
    assert RawStore(tmp_path).load("s") is None
    (tmp_path / "s" / RETURNED_FILE).write_text("{ cut")
    assert RawStore(tmp_path).load("s") is None
    (tmp_path / "s" / RETURNED_FILE).write_text("[1, 2]")  # JSON, but not what the store writes
    assert RawStore(tmp_path).load("s") is None
    assert RawStore(tmp_path).load("never-saved") is None


def test_a_session_id_never_names_a_path_outside_the_store(tmp_path: Path) -> None:
    store = RawStore(tmp_path / "store")
    for hostile in ("../../etc", "..", "a/b", "x" * 500, "\x00"):
        folder = store.directory(hostile)
        assert folder.parent == tmp_path / "store" and folder.name not in (".", "..")
    log = RawLog()
    log.absorb([user("hi")])
    store.save("../../escape", log)
    assert not (tmp_path / "escape").exists()
    loaded = store.load("../../escape")
    assert loaded is not None and loaded.messages == [user("hi")]


def test_a_rotated_session_id_takes_the_log_along(tmp_path: Path) -> None:
    store, log = RawStore(tmp_path), RawLog()
    log.absorb(raw_messages(3))
    store.save("old", log)
    store.move("old", "new")
    assert not (tmp_path / "old").exists()
    loaded = RawStore(tmp_path).load("new")
    assert loaded is not None and loaded.messages == raw_messages(3)


def test_prune_removes_only_sessions_untouched_for_the_keep_period(tmp_path: Path) -> None:
    store, log = RawStore(tmp_path), RawLog()
    log.absorb([user("hi")])
    for sid in ("stale", "fresh"):
        store.save(sid, log)
    old = time.time() - 40 * 86_400
    os.utime(tmp_path / "stale", (old, old))
    assert store.prune(keep_days=30) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh"]


def test_show_engine_reads_the_engines_raw_log_by_session_id(tmp_path: Path, capsys: object) -> None:
    from timmy_compactor.cli import main

    config = tmp_path / "compaction.yaml"
    config.write_text(json.dumps({"huey": {"state_dir": str(tmp_path / "state")}}))
    log = RawLog()
    raw = raw_messages(5)
    log.absorb(raw)
    RawStore(tmp_path / "state" / "hermes-engine").save("20261123_s1", log)
    assert main(["show", "20261123_s1", "--engine", "--ref", "#4", "--json", "--config", str(config)]) == 0
    answer = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    assert answer["items"] == [{"ref": "#4", "message": raw[4]}]
    assert main(["show", "no_such_session", "--engine", "--ref", "#1", "--config", str(config)]) == 2
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert err.count("\n") == 1 and "no raw log of the timmy engine" in err


def test_status_shows_how_many_raw_logs_the_engine_keeps_and_their_size(tmp_path: Path, capsys: object) -> None:
    from timmy_compactor.cli import main

    config = tmp_path / "compaction.yaml"
    config.write_text(
        json.dumps({"huey": {"state_dir": str(tmp_path / "state")}, "sessions": {"dir": str(tmp_path / "s")}})
    )
    log = RawLog()
    log.absorb(raw_messages(5))
    store = RawStore(tmp_path / "state" / "hermes-engine")
    for sid in ("a", "b"):
        store.save(sid, log)
    on_disk = sum(p.stat().st_size for p in (tmp_path / "state" / "hermes-engine").rglob("*") if p.is_file())
    assert main(["status", "--json", "--config", str(config)]) == 0
    shown = json.loads(capsys.readouterr().out)["hermes_engine_raw_logs"]  # type: ignore[attr-defined]
    assert shown["sessions"] == 2 and shown["bytes"] == on_disk > 0
    assert main(["status", "--config", str(config)]) == 0
    assert "timmy engine raw logs: 2 session(s)" in capsys.readouterr().out  # type: ignore[attr-defined]


@st.composite
def _histories(draw: st.DrawFn) -> list[tuple[int, int]]:
    """Compactions as Hermes drives them: (new messages since the last one, length of the list returned)."""
    return draw(st.lists(st.tuples(st.integers(1, 6), st.integers(1, 4)), min_size=1, max_size=8))


@given(history=_histories(), crash_after=st.integers(0, 8), torn=st.booleans())
def test_a_reloaded_log_is_the_log_as_last_saved_whatever_the_history(
    history: list[tuple[int, int]], crash_after: int, torn: bool
) -> None:
    """Any run of compactions, saved after each; a crash (optionally mid-append) after any of them:
    a new process loads exactly the raw messages and the answer of the last completed save."""
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        store, log = RawStore(root), RawLog()
        returned: list[dict[str, object]] = []
        counter = 0
        saved: tuple[list[dict[str, object]], list[dict[str, object]]] | None = None
        for step, (new, keep) in enumerate(history):
            fresh = [user(f"m{counter + k}") for k in range(new)]
            counter += new
            log.absorb(returned + fresh)
            returned = [assistant(f"summary {step}"), *log.messages[-keep:]]
            log.answered(returned)
            store.save("s", log)
            saved = (list(log.messages), list(returned))
            if step == crash_after:
                break
        if torn:  # an append that never got its answer written, cut mid-line
            with open(root / "s" / RAW_FILE, "ab") as handle:
                handle.write(b'{"role": "user", "content": "lost"}\n{"role": "us')
        loaded = RawStore(root).load("s")
        assert saved is not None and loaded is not None
        assert (loaded.messages, loaded.returned) == saved
        assert [m["content"] for m in loaded.messages] == [f"m{k}" for k in range(counter)]  # each raw once


def test_show_without_engine_says_when_the_engine_holds_the_refs(tmp_path: Path, capsys: object) -> None:
    from tests.support import make_state_db
    from timmy_compactor.cli import main

    hermes = tmp_path / "hermes"
    (hermes / "sessions").mkdir(parents=True)
    make_state_db(hermes / "state.db", "s1", raw_messages(3))
    config = tmp_path / "compaction.yaml"
    config.write_text(
        json.dumps(
            {
                "huey": {"state_dir": str(tmp_path / "state")},
                "sessions": {"dir": str(hermes / "sessions"), "hermes_home": str(hermes)},
            }
        )
    )
    argv = ["show", "s1", "--ref", "#1", "--config", str(config)]
    assert main(argv) == 0
    assert "--engine" not in capsys.readouterr().err  # type: ignore[attr-defined]
    log = RawLog()
    log.absorb(raw_messages(5))
    RawStore(tmp_path / "state" / "hermes-engine").save("s1", log)
    assert main(argv) == 0
    assert "read with --engine" in capsys.readouterr().err  # type: ignore[attr-defined]


def test_status_reports_the_prompt_cache_share_the_engine_saw(tmp_path: Path, capsys: object) -> None:
    """Issue 29: Hermes' usage dicts carry cache counters; the engine keeps them per session on disk and
    `status` reports the cache-read share over them (cache reads / the prompt tokens Hermes reported)."""
    pytest.importorskip("agent.context_engine")
    from timmy_compactor.cli import main
    from timmy_compactor.config import load_config
    from timmy_compactor.hermes.engine import TimmyContextEngine

    config = tmp_path / "compaction.yaml"
    config.write_text(
        json.dumps({"huey": {"state_dir": str(tmp_path / "state")}, "sessions": {"dir": str(tmp_path / "s")}})
    )
    for session, (read, prompt) in {"a": (6_000, 10_000), "b": (0, 10_000)}.items():
        engine = TimmyContextEngine(load_config(config, env={}))
        engine.on_session_start(session)
        engine.update_from_response({"prompt_tokens": prompt // 2, "cache_read_tokens": read // 2})
        engine.update_from_response({"prompt_tokens": prompt // 2, "cache_read_tokens": read // 2})
    assert main(["status", "--json", "--config", str(config)]) == 0
    shown = json.loads(capsys.readouterr().out)["hermes_engine_raw_logs"]  # type: ignore[attr-defined]
    assert shown["prompt_tokens"] == 20_000 and shown["cache_read_share"] == 0.3
    assert main(["status", "--config", str(config)]) == 0
    assert "prompt cache inside Hermes: 30% of 20,000 prompt tokens" in capsys.readouterr().out  # type: ignore[attr-defined]
