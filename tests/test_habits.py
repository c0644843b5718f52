"""A user's habits (issue 24): the consumer script's flags, the CLI's help and `config`, `show`'s
bound, `hermes enable/disable` leaving a home as it found it, export records a trainer reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO, load_sample, start_consumer_script, stop_consumer_script, wait_for, write_like_hermes

SCRIPT = REPO / "huey_consumer.sh"
VENV = Path(sys.executable).parent.parent


def write_config(root: Path, **huey: Any) -> tuple[Path, Path]:
    sessions = root / "hermes" / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    path = root / "compaction.yaml"
    path.write_text(
        json.dumps(
            {
                "model": {"context_window": 20_000},
                "sessions": {"dir": str(sessions), "hermes_home": str(root / "hermes")},
                "huey": {"state_dir": str(root / "state"), "debounce_ms": 50, **huey},
                "logging": {"format": "json", "level": "info"},
            }
        )
    )
    return path, sessions


def script_env(config: Path | None = None, venv: Path = VENV, **extra: str) -> dict[str, str]:
    env = {**os.environ, "TIMMY_VENV": str(venv), "PYTHONUNBUFFERED": "1", **extra}
    for name in ("TIMMY_WORKERS", "TIMMY_LOG_LEVEL", "TIMMY_NO_WATCHER", "HERMES_HOME"):
        if name not in extra:
            env.pop(name, None)
    if config is not None:
        env["TIMMY_COMPACTOR_CONFIG"] = str(config)
    return env


def run_script(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False
    )


# ---------------------------------------------------------------- huey_consumer.sh (item 1)


def test_consumer_script_help_starts_nothing(tmp_path: Path) -> None:
    venv = tmp_path / "no-venv"  # a first run would create it: --help must not
    for flag in ("--help", "-h"):
        done = run_script(flag, env=script_env(venv=venv))
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("Usage: ./huey_consumer.sh ")
        for words in ("-w, --workers N", "-v, --verbose", "-q, --quiet", "TIMMY_LOG_LEVEL", "TIMMY_WORKERS"):
            assert words in done.stdout
        assert done.stderr == ""
    assert not venv.exists()


@pytest.mark.parametrize(
    ("args", "extra", "message"),
    [
        (["--bogus"], {}, "unknown argument '--bogus'"),
        (["-x"], {}, "unknown argument '-x'"),
        (["start"], {}, "unknown argument 'start'"),
        (["-w"], {}, "-w needs a number of workers"),
        (["-w", "zero"], {}, "the number of workers must be a positive integer, got 'zero'"),
        (["--workers=0"], {}, "the number of workers must be a positive integer, got '0'"),
        ([], {"TIMMY_WORKERS": "-3"}, "the number of workers must be a positive integer, got '-3'"),
        ([], {"TIMMY_LOG_LEVEL": "loud"}, "TIMMY_LOG_LEVEL must be debug, info, warning or error, got 'loud'"),
    ],
    ids=["long", "short", "positional", "w-without-n", "w-not-a-number", "workers-zero", "env-workers", "env-level"],
)
def test_consumer_script_refuses_a_bad_argument_in_one_line(
    tmp_path: Path, args: list[str], extra: dict[str, str], message: str
) -> None:
    venv = tmp_path / "no-venv"
    done = run_script(*args, env=script_env(venv=venv, **extra))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == f"huey_consumer.sh: error: {message} (see ./huey_consumer.sh --help)\n"
    assert not venv.exists()


def start_script(root: Path, config: Path, name: str, *args: str, **extra: str) -> tuple[Any, Path]:
    log = root / f"{name}.log"
    return start_consumer_script(log, script_env(config, **extra), *args), log


stop_script = stop_consumer_script


def json_lines(log: Path) -> list[dict[str, Any]]:
    lines = []
    for line in log.read_text().splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    return [line for line in lines if isinstance(line, dict)]


def enqueue(config: Path, path: Path) -> None:
    done = subprocess.run(
        [str(VENV / "bin" / "timmy-compactor"), "enqueue", str(path), "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_consumer_script_verbose_and_workers_reach_huey(tmp_path: Path) -> None:
    """`-v -w 1`: huey starts one worker (the config says 3) and debug lines are logged, ours and huey's."""
    config, sessions = write_config(tmp_path, workers=3)
    proc, log = start_script(tmp_path, config, "verbose", "-v", "-w", "1")
    try:
        assert wait_for(lambda: "with 1 process" in log.read_text() or "1 x process" in log.read_text(), 60), (
            log.read_text()[-3000:]
        )
        raw = sessions / "session_habits.json"
        write_like_hermes(raw, load_sample())
        enqueue(config, raw)  # the watcher may not be watching yet; the queue is
        view = sessions / "compacted_session_habits.json"
        assert wait_for(view.exists, timeout=60), log.read_text()[-3000:]
        enqueue(config, raw)  # the view is current: said at debug level only
        assert wait_for(lambda: any(e["event"] == "view_current" for e in json_lines(log)), timeout=60), (
            log.read_text()[-3000:]
        )
        levels = {e.get("level") for e in json_lines(log)}
        assert {"debug", "info"} <= levels
        assert any(e.get("logger", "").startswith("huey") and e.get("level") == "debug" for e in json_lines(log))
    finally:
        assert stop_script(proc) == 0, log.read_text()[-3000:]


def test_consumer_script_quiet_logs_only_warnings_and_errors(tmp_path: Path) -> None:
    """`-q` (and TIMMY_LOG_LEVEL=warning): a compaction leaves no info line, ours or huey's."""
    from timmy_compactor.sidecar.running import running

    for name, args, extra in (("quiet", ["-q"], {}), ("env", [], {"TIMMY_LOG_LEVEL": "WARNING"})):
        root = tmp_path / name
        config, sessions = write_config(root)
        proc, log = start_script(root, config, name, *args, **extra)
        try:
            assert wait_for(lambda root=root: running(root / "state") is not None, timeout=60), log.read_text()
            write_like_hermes(sessions / "session_habits.json", load_sample())
            enqueue(config, sessions / "session_habits.json")  # the watcher may not be watching yet
            view = sessions / "compacted_session_habits.json"
            assert wait_for(view.exists, timeout=60), log.read_text()[-3000:]
        finally:
            assert stop_script(proc) == 0, log.read_text()[-3000:]
        lines = json_lines(log)
        assert {e.get("level") for e in lines} <= {"warning", "error"}, log.read_text()[-3000:]
        assert "Executing" not in log.read_text() and "view_written" not in log.read_text()


# ---------------------------------------------------------------- show --max-chars (item 6)


def bounded_session() -> list[dict[str, Any]]:
    from tests.support import assistant, call, tool, user

    return [
        user("short question about ./app.py"),  # 94 characters as JSON: the item alone exceeds 100
        assistant("looking", call("c1", "terminal", command="cat " + "/srv/a" * 80)),
        tool("c1", "line of output é\n" * 300),
        user("ü" * 40),
    ]


@pytest.mark.parametrize("ref", ["#0", "#1", "#2", "#0-#3", "#3"])
def test_recall_answers_hold_their_bound_exactly(ref: str) -> None:
    import re

    from tests.test_habits import bounded_session as make
    from timmy_compactor.core.recall import lookup, search
    from timmy_compactor.show import _render_item

    raw = make()
    for max_chars in [*range(1, 400, 7), 500, 1_000, 5_000, 20_000]:
        for render in (None, _render_item):
            answer = lookup(raw, ref, max_chars=max_chars, render=render)
            if render is None:  # the JSON envelope of an empty answer is the least there is
                assert len(answer.to_json()) <= max(max_chars, len(answer.to_json()) if not answer.items else 0)
            else:
                assert sum(len(render(i)) for i in answer.items) <= max_chars, (ref, max_chars)
            text = answer.to_json()
            counts = [int(n.replace(",", "")) for n in re.findall(r"cut: (-?[\d,]+) more chars", text)]
            assert all(n > 0 for n in counts), text
            whole = lookup(raw, ref, max_chars=10**9)
            assert answer.truncated == (answer.items != whole.items)
        found = search(raw, "output", max_chars=max_chars)
        empty = len(found.to_json()) if not found.items else 0
        assert len(found.to_json()) <= max(max_chars, empty) and found.total == 300
        assert found.truncated == (len(found.items) < 300)


def test_show_max_chars_bounds_what_it_prints(tmp_path: Path) -> None:
    """Through the console script: `show --max-chars 100` on a short message prints no more than 100
    characters before its one-line notice, and never a negative count."""
    import re

    raw = tmp_path / "session_short.json"
    raw.write_text(json.dumps({"session_id": "short", "messages": bounded_session()}))
    bin_ = VENV / "bin" / "timmy-compactor"
    for max_chars in ("100", "250", "400", "2000"):
        for mode in ([], ["--json"]):
            for what in (["--ref", "#0"], ["--ref", "#1-#2"], ["--grep", "output"]):
                done = subprocess.run(
                    [str(bin_), "show", str(raw), *what, "--max-chars", max_chars, *mode],
                    capture_output=True,
                    text=True,
                    check=False,
                    timeout=60,
                )
                assert done.returncode == 0, done.stderr
                out = done.stdout
                assert not re.search(r"-\d+ more chars", out), out
                if mode:
                    assert len(out.rstrip("\n")) <= int(max_chars), out
                else:
                    body, cut, notice = out.rpartition("[answer cut at --max-chars ")
                    if cut:
                        assert notice.endswith("narrow the ref or raise --max-chars]\n"), out
                        assert len(body) <= int(max_chars), out
                    else:
                        assert len(out) <= int(max_chars), out
    done = subprocess.run(
        [str(bin_), "show", str(raw), "--ref", "#0", "--max-chars", "-6"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2 and "--max-chars: expected a positive integer, got '-6'" in done.stderr


# ---------------------------------------------------------------- hermes enable / disable / status (item 7)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The console script, as a user runs it."""
    return subprocess.run(
        [str(VENV / "bin" / "timmy-compactor"), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env=env,
    )


def test_hermes_status_names_our_enable_command(tmp_path: Path) -> None:
    pytest.importorskip("hermes_cli")
    home = tmp_path / "hermes"
    home.mkdir()
    done = cli("hermes", "status", "--hermes-home", str(home))
    assert done.returncode == 1, done.stderr
    assert "NOT active" in done.stdout
    assert "timmy-compactor hermes enable" in done.stdout and "hermes plugins enable" not in done.stdout
    done = cli("hermes", "status", "--hermes-home", str(home), "--json")
    status = json.loads(done.stdout)
    assert status["hint"] == "to activate it: timmy-compactor hermes enable"
    assert "hermes plugins enable" not in done.stdout
    assert sorted(p.name for p in home.iterdir()) == []  # status creates nothing


def test_hermes_enable_then_disable_leaves_a_home_as_it_was(tmp_path: Path) -> None:
    """No config.yaml before: none after (not `{}`), no record, no backup; a disable with nothing
    enabled writes nothing, backups included."""
    pytest.importorskip("ruamel.yaml")
    from tests.support import listing

    home = tmp_path / "hermes"
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    before = listing(home)
    done = cli("hermes", "enable", "--hermes-home", str(home))
    assert done.returncode in (0, 1), done.stderr  # 1: hermes-agent missing, status says so
    assert "engine: timmy" in (home / "config.yaml").read_text()
    done = cli("hermes", "disable", "--hermes-home", str(home))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("disabled the timmy context engine: removed ")
    assert listing(home) == before

    for _ in range(2):  # nothing enabled: no write, no backup
        done = cli("hermes", "disable", "--hermes-home", str(home))
        assert done.returncode == 0 and "already disabled, nothing changed" in done.stdout
        assert listing(home) == before

    users = "# mine\nmodel:\n  default: qwen  # local\n"
    (home / "config.yaml").write_text(users)
    before = listing(home)
    for _ in range(2):
        assert cli("hermes", "disable", "--hermes-home", str(home)).returncode == 0
        assert listing(home) == before  # no sections added, no backup

    cli("hermes", "enable", "--hermes-home", str(home))
    assert cli("hermes", "disable", "--hermes-home", str(home)).returncode == 0
    assert (home / "config.yaml").read_text() == users
    backups = sorted(p.name for p in home.glob("config.yaml.timmy-backup-*"))
    assert 1 <= len(backups) <= 2  # enable's and disable's (one name when both fall in one second)


# ---------------------------------------------------------------- export records (item 9)

TRAINER_KEYS = {"role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content"}


def export_config(root: Path) -> tuple[Path, Path]:
    """Redaction off, so that records compare with the raw messages."""
    config, sessions = write_config(root)
    config.write_text(json.dumps(json.loads(config.read_text()) | {"export": {"redact_credentials": False}}))
    return config, sessions


def conversations(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "conversations.jsonl").read_text().splitlines()]


def test_export_records_keep_only_what_a_trainer_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config, sessions = export_config(tmp_path)
    sample = load_sample("session_sample.json")
    billing = load_sample("session_20261122_billing_debug.json")
    raw_keys = {k for doc in (sample, billing) for m in doc["messages"] for k in m}
    assert {"_db_persisted", "timestamp", "finish_reason", "reasoning"} <= raw_keys  # what Hermes writes
    write_like_hermes(sessions / "session_sample.json", sample)
    write_like_hermes(sessions / "session_billing.json", billing)
    out = tmp_path / "out"
    done = cli("export", "--out", str(out), "--config", str(config))
    assert done.returncode == 0, done.stderr
    records = {r["session_key"]: r for r in conversations(out)}
    for key, doc in (("sample", sample), ("billing", billing)):
        messages = records[key]["messages"]
        assert len(messages) == len(doc["messages"])
        for message, raw in zip(messages, doc["messages"], strict=True):
            assert set(message) <= TRAINER_KEYS and {"role", "content"} <= set(message)
            assert (message["role"], message["content"]) == (raw["role"], raw.get("content"))
            for call, raw_call in zip(message.get("tool_calls") or [], raw.get("tool_calls") or [], strict=True):
                assert call == {k: raw_call[k] for k in ("id", "type", "function")}
            assert message.get("tool_call_id") == raw.get("tool_call_id")
            if raw.get("reasoning_content"):
                assert message["reasoning_content"] == raw["reasoning_content"]
    pairs = [json.loads(line) for line in (out / "dpo_pairs.jsonl").read_text().splitlines()]
    assert pairs
    for pair in pairs:
        for message in [*pair["prompt"], *pair["chosen"], *pair["rejected"], pair["correction"]]:
            assert set(message) <= TRAINER_KEYS

    # what `datasets` makes of it: the union of the messages' keys, nothing of Hermes' bookkeeping
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    datasets = pytest.importorskip("datasets")
    rows = datasets.load_dataset(
        "json", data_files=str(out / "conversations.jsonl"), split="train", cache_dir=str(tmp_path / "hf-cache")
    )
    unified = {key for row in rows for message in row["messages"] for key in message}
    assert {"role", "content", "tool_calls", "tool_call_id"} <= unified <= TRAINER_KEYS


def test_a_session_with_an_integer_beyond_64_bits_is_exported_and_the_export_says_so(tmp_path: Path) -> None:
    config, sessions = export_config(tmp_path)
    doc = load_sample("session_sample.json")
    big = 2**80 + 1
    doc["messages"][0]["content"] = [{"type": "text", "text": "the id below"}, {"type": "id", "n": big}]
    doc["messages"][1]["timestamp"] = 2**70  # bookkeeping: dropped, nothing to say
    write_like_hermes(sessions / "session_big.json", doc)
    assert str(big) in (sessions / "session_big.json").read_text()  # written as an integer
    out = tmp_path / "out"
    done = cli("export", "--out", str(out), "--config", str(config), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["exported"] == 1 and summary["failed"] == []
    reason = "1 integer(s) beyond 64 bits exported as strings, in messages[0] (see integers_as_strings)"
    assert summary["noted"] == [{"file": str(sessions / "session_big.json"), "reason": reason}]
    assert done.stderr == f"timmy-compactor export: note: {sessions / 'session_big.json'}: {reason}\n"
    (record,) = conversations(out)
    assert record["messages"][0]["content"][1] == {"type": "id", "n": str(big)}
    assert record["integers_as_strings"] == ["messages[0].content[1].n"]
    assert "the id below" not in done.stderr  # the note names places, never content

    # a session without one says nothing and carries no such key
    write_like_hermes(sessions / "session_big.json", load_sample("session_sample.json"))
    done = cli("export", "--out", str(out), "--config", str(config))
    assert done.returncode == 0 and done.stderr == ""
    (record,) = conversations(out)
    assert "integers_as_strings" not in record


# ---------------------------------------------------------------- the CLI: config, --config, help (item 2)


def test_config_prints_the_configuration_in_effect_as_yaml(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "compaction.yaml"
    path.write_text(
        "huey:\n  workers: 5\n  redis_url: redis://:s3cret-pw@cache.local:6379/1\nlogging:\n  level: warning\n"
    )
    env = script_env(path, TIMMY_STATE_DIR=str(tmp_path / "state"))
    done = cli("config", env=env)
    assert done.returncode == 0, done.stderr
    assert "s3cret-pw" not in done.stdout and "redis://:***@cache.local:6379/1" in done.stdout
    assert done.stdout.startswith(f"# timmy-compactor configuration in effect; source: {path}\n")
    assert "# overridden by the environment: TIMMY_STATE_DIR\n" in done.stdout
    shown = yaml.safe_load(done.stdout)
    assert shown["huey"]["workers"] == 5 and shown["huey"]["state_dir"] == str(tmp_path / "state")
    assert shown["logging"] == {"format": "auto", "level": "warning"}
    assert shown["compaction"]["trigger_threshold"] == 0.6  # the defaults of what the file leaves out
    assert set(shown) == {"compaction", "model", "sessions", "huey", "export", "logging"}
    again = tmp_path / "again.yaml"  # what it prints is a config file that gives the same configuration
    again.write_text(done.stdout)
    assert yaml.safe_load(cli("config", "--config", str(again), env=env).stdout) == shown

    done = cli("config", "--json", env=env)
    data = json.loads(done.stdout)
    assert data["huey"]["redis_url"] == "redis://:***@cache.local:6379/1" and data["source"] == str(path)
    assert cli("config", "--get", "huey.redis_url", env=env).stdout == "redis://:***@cache.local:6379/1\n"
    assert cli("config", "--check", env=env).stdout == f"config OK: {path}\n"
    done = cli("config", env=script_env(path, TIMMY_LOG_LEVEL="chatty"))
    assert done.returncode == 2
    assert done.stderr == (
        "timmy-compactor: error: TIMMY_LOG_LEVEL: expected one of debug, info, warning, error, got 'chatty'\n"
    )


def test_config_flag_before_or_after_the_verb(tmp_path: Path) -> None:
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text("huey:\n  workers: 5\n")
    second.write_text("huey:\n  workers: 7\n")
    env = script_env()
    env.pop("TIMMY_COMPACTOR_CONFIG", None)
    assert cli("--config", str(first), "config", "--get", "huey.workers", env=env).stdout == "5\n"
    assert cli("config", "--config", str(first), "--get", "huey.workers", env=env).stdout == "5\n"
    assert cli("--config", str(first), "config", "--config", str(second), "--get", "huey.workers", env=env).stdout == (
        "7\n"  # the one nearer the verb's options wins
    )
    config, _ = write_config(tmp_path / "home")
    done = cli("--config", str(config), "status", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sessions_dir"] == str(tmp_path / "home" / "hermes" / "sessions")


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
