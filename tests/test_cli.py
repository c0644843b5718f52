"""cli.py: the CLI contract of the core verbs (compact, stats, restore), --help and --version."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import CORPUS, corpus_files, listing, make_state_db, tool_session, write_session
from tests.support_homes import cli, sidecar_config
from tests.support_homes import write_config_of as write_config
from timmy_compactor.cli import main
from timmy_compactor.compactor import restore_file
from timmy_compactor.core.tokens import request_tokens
from timmy_compactor.sessions.statedb import StateDB
from timmy_compactor.sidecar import work
from timmy_compactor.sidecar.records import Records

REPORT_KEYS = (
    "tokens_before",
    "tokens_after",
    "messages_before",
    "messages_after",
    "rules",
    "verified",
    "elapsed_ms",
    "triggered",
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def hermes_doc(messages: list[dict], session_id: str = "20261122_101500_abc123") -> dict:
    return {
        "session_id": session_id,
        "model": "hermes-4-14b",
        "base_url": "http://127.0.0.1:8080/v1",
        "platform": "cli",
        "system_prompt": "You are Hermes. " * 50,
        "tools": [{"type": "function", "function": {"name": "terminal", "description": "Run", "parameters": {}}}],
        "message_count": len(messages),
        "messages": messages,
    }


@pytest.fixture
def raw(tmp_path: Path) -> Path:
    """A session at ~79 % of the default 65,536-token window (above the 60 % trigger)."""
    return write_session(tmp_path / "session_abc123.json", hermes_doc(tool_session(130, output_lines=60)))


@pytest.fixture
def small_window(tmp_path: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text("model:\n  context_window: 16000\n")
    return path


@pytest.fixture
def big_window(tmp_path: Path) -> Path:
    path = tmp_path / "big.yaml"
    path.write_text("model:\n  context_window: 1000000\n")
    return path


def test_compact_writes_the_view_next_to_the_raw_and_reports_json(
    capsys: pytest.CaptureFixture[str], raw: Path
) -> None:
    before = raw.read_bytes()
    code, out, err = run(capsys, "compact", str(raw), "--json")
    assert code == 0 and err == ""
    report = json.loads(out)
    assert all(key in report for key in REPORT_KEYS)
    assert report["triggered"] is True and report["verified"] is True and report["action"] == "written"
    assert 0 < report["tokens_after"] < report["tokens_before"]
    assert report["messages_after"] < report["messages_before"] == len(json.loads(before)["messages"])
    assert report["rules"]["fold_steps"] > 0 and report["elapsed_ms"] >= 0
    view = raw.with_name("compacted_session_abc123.json")
    assert report["view"] == str(view) and view.exists()
    assert raw.read_bytes() == before
    assert sorted(p.name for p in raw.parent.iterdir()) == ["compacted_session_abc123.json", "session_abc123.json"]
    doc = json.loads(view.read_text())
    assert doc["message_count"] == len(doc["messages"]) == report["messages_after"]
    assert doc["timmy_compaction"]["raw_sha256"] == hashlib.sha256(before).hexdigest()


def test_tokens_are_counted_like_hermes_request_estimate(capsys: pytest.CaptureFixture[str], raw: Path) -> None:
    doc = json.loads(raw.read_text())
    code, out, _ = run(capsys, "compact", str(raw), "--json")
    report = json.loads(out)
    assert code == 0 and report["tokens_before"] == request_tokens(doc["messages"], doc["system_prompt"], doc["tools"])
    view = json.loads(raw.with_name("compacted_session_abc123.json").read_text())
    assert report["tokens_after"] == request_tokens(view["messages"], view["system_prompt"], view["tools"])


@pytest.mark.parametrize("mode", [0o600, 0o644])
def test_the_view_has_the_raw_files_mode(capsys: pytest.CaptureFixture[str], raw: Path, mode: int) -> None:
    raw.chmod(mode)
    assert run(capsys, "compact", str(raw))[0] == 0
    assert raw.with_name("compacted_session_abc123.json").stat().st_mode & 0o777 == mode


def test_human_report(capsys: pytest.CaptureFixture[str], raw: Path) -> None:
    code, out, _ = run(capsys, "compact", str(raw))
    first, rules, view = out.splitlines()
    assert code == 0 and first.startswith("session_abc123.json: ") and " tokens (-" in first and "verified" in first
    # the fold alone (its index lists the files of the calls, not the paths of the agent's prose)
    assert rules.startswith("  rules: ") and "fold_steps" in rules
    assert view == f"  view: {raw.with_name('compacted_session_abc123.json')}"


def test_below_threshold_no_view_and_a_stale_one_is_removed(
    capsys: pytest.CaptureFixture[str], raw: Path, big_window: Path
) -> None:
    assert run(capsys, "compact", str(raw))[0] == 0
    view = raw.with_name("compacted_session_abc123.json")
    assert view.exists()
    code, out, _ = run(capsys, "compact", str(raw), "--json", "--config", str(big_window))
    report = json.loads(out)
    assert code == 0 and report["triggered"] is False and report["action"] == "removed_stale"
    assert not view.exists()
    code, out, _ = run(capsys, "compact", str(raw), "--config", str(big_window))
    assert code == 0 and "below the 60% threshold; no view written" in out
    assert sorted(p.name for p in raw.parent.iterdir()) == ["big.yaml", "session_abc123.json"]


def test_force_compacts_below_the_threshold(capsys: pytest.CaptureFixture[str], raw: Path, big_window: Path) -> None:
    code, out, _ = run(capsys, "compact", str(raw), "--json", "--force", "--config", str(big_window))
    report = json.loads(out)
    assert code == 0 and report["triggered"] and report["verified"] and report["usage_before"] < 0.6
    # in so big a window the whole session is the tail: nothing to cut, and no view as large as the raw
    written = report["tokens_after"] < report["tokens_before"]
    assert report["action"] == ("written" if written else "nothing_to_cut")
    assert raw.with_name("compacted_session_abc123.json").exists() == written


def test_out_path_writes_only_there(capsys: pytest.CaptureFixture[str], raw: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "v.json"
    target.parent.mkdir()
    code, out, _ = run(capsys, "compact", str(raw), "--out", str(target), "--json")
    assert code == 0 and json.loads(out)["view"] == str(target)
    assert json.loads(target.read_text())["timmy_compaction"]["raw_file"] == raw.name
    assert not raw.with_name("compacted_session_abc123.json").exists()
    assert target.stat().st_mode & 0o777 == 0o600


def test_out_dash_prints_the_view_and_reports_on_stderr(capsys: pytest.CaptureFixture[str], raw: Path) -> None:
    before = listing(raw.parent)
    code, out, err = run(capsys, "compact", str(raw), "--out", "-", "--json")
    assert code == 0
    view = json.loads(out)
    assert view["timmy_compaction"]["raw_sha256"] == hashlib.sha256(raw.read_bytes()).hexdigest()
    report = json.loads(err)
    assert report["verified"] is True and report["action"] == "printed"
    assert report["messages_after"] == len(view["messages"])
    assert listing(raw.parent) == before


def test_out_dash_below_threshold_prints_no_view(
    capsys: pytest.CaptureFixture[str], raw: Path, big_window: Path
) -> None:
    code, out, err = run(capsys, "compact", str(raw), "--out", "-", "--json", "--config", str(big_window))
    assert code == 0 and out == "" and json.loads(err)["triggered"] is False


def test_out_may_not_be_the_raw_file(capsys: pytest.CaptureFixture[str], raw: Path) -> None:
    before = raw.read_bytes()
    code, out, err = run(capsys, "compact", str(raw), "--out", str(raw))
    assert code == 2 and out == "" and "refusing to overwrite the raw session" in err and err.count("\n") == 1
    assert raw.read_bytes() == before


def test_a_view_cannot_be_compacted_again(capsys: pytest.CaptureFixture[str], raw: Path) -> None:
    run(capsys, "compact", str(raw))
    view = raw.with_name("compacted_session_abc123.json")
    before = listing(raw.parent)
    code, out, err = run(capsys, "compact", str(view), "--force")
    assert code == 2 and out == "" and "is a compacted view" in err and str(view) in err
    assert listing(raw.parent) == before


def test_stats(capsys: pytest.CaptureFixture[str], raw: Path, small_window: Path) -> None:
    doc = json.loads(raw.read_text())
    tokens = request_tokens(doc["messages"], doc["system_prompt"], doc["tools"])
    code, out, _ = run(capsys, "stats", str(raw), "--json")
    data = json.loads(out)
    assert code == 0
    assert data["tokens"] == tokens and data["context_window"] == 65_536
    assert data["usage"] == round(tokens / 65_536, 4) and data["pressure_level"] == 75
    assert data["messages"] == len(doc["messages"]) and data["user_turns"] == 4
    assert data["session_id"] == "20261122_101500_abc123" and data["above_threshold"] is True
    code, out, _ = run(capsys, "stats", str(raw), "--json", "--config", str(small_window))
    assert json.loads(out)["context_window"] == 16_000 and json.loads(out)["pressure_level"] == 95
    code, out, _ = run(capsys, "stats", str(raw))
    assert out.startswith(f"session_abc123.json: {tokens:,} tokens of 65,536") and "above the 60% threshold" in out
    assert not raw.with_name("compacted_session_abc123.json").exists()


def test_restore_gives_back_the_raw_messages(capsys: pytest.CaptureFixture[str], raw: Path, tmp_path: Path) -> None:
    run(capsys, "compact", str(raw))
    view = raw.with_name("compacted_session_abc123.json")
    code, out, _ = run(capsys, "restore", str(view))
    assert code == 0 and json.loads(out) == json.loads(raw.read_text())
    target = tmp_path / "restored.json"
    code, out, err = run(capsys, "restore", str(view), "--out", str(target))
    assert code == 0 and out == "" and "restored" in err
    assert json.loads(target.read_text())["messages"] == json.loads(raw.read_text())["messages"]


def test_restore_fails_once_the_raw_changed(capsys: pytest.CaptureFixture[str], raw: Path) -> None:
    run(capsys, "compact", str(raw))
    view = raw.with_name("compacted_session_abc123.json")
    doc = json.loads(raw.read_text())
    doc["messages"][-1]["content"] += " (edited)"
    write_session(raw, doc)
    code, out, err = run(capsys, "restore", str(view))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert str(raw) in err and "raw file changed since the view was made" in err
    raw.unlink()
    code, out, err = run(capsys, "restore", str(view))
    assert code == 2 and out == "" and "no such file" in err


def test_restore_of_something_that_is_not_a_view(capsys: pytest.CaptureFixture[str], raw: Path) -> None:
    code, out, err = run(capsys, "restore", str(raw))
    assert code == 2 and out == "" and "not a timmy-compactor view" in err


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.stem)
def test_every_corpus_session_compacts_and_verifies_with_force(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, path: Path
) -> None:
    raw = tmp_path / path.name
    shutil.copy(path, raw)
    code, out, _ = run(capsys, "compact", str(raw), "--force", "--json")
    report = json.loads(out)
    assert code == 0 and report["verified"] is True, report["reason"]
    assert report["tokens_after"] < report["tokens_before"]
    view = tmp_path / f"compacted_{path.name}"
    code, restored, _ = run(capsys, "restore", str(view))
    assert code == 0 and json.loads(restored) == json.loads(path.read_text(encoding="utf-8"))


def test_corpus_is_present_when_shared_is() -> None:
    assert len(corpus_files()) == (8 if CORPUS.is_dir() else 2)  # else the two runs under tests/data/corpus


def test_python_dash_m_entry_point(raw: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("TIMMY_COMPACTOR_CONFIG", "HERMES_HOME")}
    env["HOME"] = str(raw.parent)
    proc = subprocess.run(
        [sys.executable, "-m", "timmy_compactor.cli", "compact", str(raw), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["verified"] is True
    assert raw.with_name("compacted_session_abc123.json").exists()


def test_same_input_same_view_bytes_across_processes(raw: Path, tmp_path: Path) -> None:
    """Deterministic down to the bytes, whatever the hash seed of the process."""
    outputs = []
    for seed in ("1", "2"):
        env = {k: v for k, v in os.environ.items() if k not in ("TIMMY_COMPACTOR_CONFIG", "HERMES_HOME")}
        env |= {"HOME": str(tmp_path), "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, "-m", "timmy_compactor.cli", "compact", str(raw), "--out", "-"],
            capture_output=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1] and len(outputs[0]) > 1_000


QUEUE_MODULES = ("huey", "redis", "structlog", "watchdog")
# Prints, as its last line, which of QUEUE_MODULES the process imported (also after --help's SystemExit).
_IMPORTED = f"""
import atexit, sys
atexit.register(lambda: print(sorted({{m.split(".")[0] for m in sys.modules}} & {set(QUEUE_MODULES)!r})))
from timmy_compactor.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize(
    "argv", [["compact", "--help"], ["compact", "RAW"], ["--config", "CONFIG", "compact", "RAW", "--json"]]
)
def test_a_core_verb_does_not_import_the_queue(argv: list[str], tmp_path: Path) -> None:
    """`compact` of a small session (and its --help) loads none of the sidecar's modules: huey, redis,
    structlog, watchdog. (What that saves at start-up is measured by hand, not here.)"""
    small = write_session(tmp_path / "session_small.json", hermes_doc([{"role": "user", "content": "hi"}]))
    config = tmp_path / "c.yaml"
    config.write_text("compaction:\n  enabled: true\n")
    argv = [{"RAW": str(small), "CONFIG": str(config)}.get(word, word) for word in argv]
    env = {k: v for k, v in os.environ.items() if k not in ("TIMMY_COMPACTOR_CONFIG", "HERMES_HOME")}
    env["HOME"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORTED, *argv], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout


def test_the_verb_is_found_past_the_options_before_it() -> None:
    from timmy_compactor.cli import CORE_VERBS, chosen_verb

    assert chosen_verb(["--config", "x.yaml", "compact", "RAW"]) == "compact"
    assert chosen_verb(["--config=x.yaml", "stats", "RAW"]) == "stats"
    assert chosen_verb(["watch"]) == "watch" and "watch" not in CORE_VERBS
    assert chosen_verb(["--version"]) is None and chosen_verb([]) is None


# ---------------------------------------------------------------- restore reads state.db from sessions.hermes_home


def test_restore_reads_state_db_from_the_configured_hermes_home(tmp_path: Path) -> None:
    """The sessions dir is not `<hermes_home>/sessions` here: guessing the view's grandparent fails."""
    sessions, home = tmp_path / "snapshots", tmp_path / "elsewhere" / "hermes"
    sessions.mkdir()
    home.mkdir(parents=True)
    messages = tool_session(12)
    make_state_db(home / "state.db", "s1", messages)
    config = sidecar_config(tmp_path, sessions, home)
    result = work.process("s1", config, Records(config.state_dir))
    assert result.action == "written", result
    view = sessions / "compacted_session_s1.json"
    restored, _ = restore_file(view, config)
    assert restored["messages"] == StateDB(home / "state.db").live("s1").messages
    assert [m["content"] for m in restored["messages"]] == [m["content"] for m in messages]
    assert main(["restore", str(view), "--config", str(write_config(tmp_path, config))]) == 0


# ---------------------------------------------------------------- --version and --help


def test_help_speaks_of_the_product_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    from timmy_compactor import __version__

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"timmy-compactor {__version__}"
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "seed" not in text.lower()
    assert "eval-ledger" in text


def test_help_describes_every_argument_and_the_top_level_lists_paths_env_and_exit_codes() -> None:
    import argparse

    from timmy_compactor.cli import build_parser

    done = cli("--help")
    assert done.returncode == 0
    for words in (
        "--config F",
        "~/.timmy/timmy-config/compaction.yaml",
        "TIMMY_COMPACTOR_CONFIG",
        "TIMMY_LOG_LEVEL",
        "TIMMY_REDIS_URL",
        "HERMES_HOME",
        "exit status:",
        "130  interrupted",
        "~/.local/state/timmy-compactor",
    ):
        assert words in done.stdout, words
    parser = build_parser()
    (verbs,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    missing = [
        f"{name} {action.option_strings or action.dest}"
        for name, sub in verbs.choices.items()
        for action in sub._actions
        if not action.help and not isinstance(action, argparse._HelpAction)
    ]
    assert missing == []
