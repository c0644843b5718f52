"""The CLI contract and bad input: clear one-line errors, nothing written, raw never touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import load_sample
from timmy_compactor.cli import main
from timmy_compactor.config import Config, ConfigError, load_config, resolve_context_window


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def raw(tmp_path: Path) -> Path:
    path = tmp_path / "session_s1.json"
    path.write_text(json.dumps(load_sample(), indent=2), encoding="utf-8")
    path.chmod(0o600)
    return path


def test_compact_json_report_and_view_next_to_raw(capsys: pytest.CaptureFixture[str], raw: Path) -> None:
    before = raw.read_bytes()
    code, out, _ = run(capsys, "compact", str(raw), "--json")
    report = json.loads(out)
    assert code == 0
    for key in (
        "tokens_before",
        "tokens_after",
        "messages_before",
        "messages_after",
        "rules",
        "verified",
        "elapsed_ms",
        "triggered",
    ):
        assert key in report
    assert report["triggered"] and report["verified"] and report["tokens_after"] < report["tokens_before"]
    view = raw.with_name("compacted_session_s1.json")
    assert raw.read_bytes() == before
    assert oct(view.stat().st_mode & 0o777) == oct(0o600)
    doc, original = json.loads(view.read_text()), json.loads(before)
    assert set(doc) == set(original) | {"timmy_compaction"}
    for key in original.keys() - {"messages", "message_count"}:
        assert doc[key] == original[key], key
    assert doc["message_count"] == len(doc["messages"]) == report["messages_after"]


def test_below_threshold_writes_nothing_and_removes_a_stale_view(
    capsys: pytest.CaptureFixture[str], raw: Path, tmp_path: Path
) -> None:
    run(capsys, "compact", str(raw))
    config = tmp_path / "big.yaml"
    config.write_text("model:\n  context_window: 1000000\n")
    code, out, _ = run(capsys, "compact", str(raw), "--json", "--config", str(config))
    assert code == 0 and json.loads(out)["triggered"] is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.yaml", "session_s1.json"]


def test_out_dash_prints_the_view_and_report_goes_to_stderr(capsys: pytest.CaptureFixture[str], raw: Path) -> None:
    code, out, err = run(capsys, "compact", str(raw), "--out", "-", "--json")
    assert code == 0
    assert json.loads(out)["timmy_compaction"]["raw_sha256"]
    assert json.loads(err)["verified"] is True
    assert not raw.with_name("compacted_session_s1.json").exists()


def test_restore_round_trips_and_refuses_a_changed_raw(capsys: pytest.CaptureFixture[str], raw: Path) -> None:
    run(capsys, "compact", str(raw))
    view = raw.with_name("compacted_session_s1.json")
    code, out, _ = run(capsys, "restore", str(view))
    assert code == 0 and json.loads(out) == json.loads(raw.read_text())
    raw.write_text(raw.read_text().replace("debugging", "DEBUGGING", 1))
    code, out, err = run(capsys, "restore", str(view))
    assert code == 2 and "raw file changed" in err and out == ""


def test_stats(capsys: pytest.CaptureFixture[str], raw: Path) -> None:
    code, out, _ = run(capsys, "stats", str(raw), "--json")
    data = json.loads(out)
    assert code == 0 and data["context_window"] == 65_536 and data["pressure_level"] == 60
    assert data["tokens"] > 40_000 and data["above_threshold"] is True


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "file is empty"),
        (b'{"messages": [{"role": "user", "content": "hi"}', "invalid JSON at line 1"),
        (b'{"messages": [{"role": "user", "content": "caf\xe9"}]}', "not UTF-8"),
        (b"42", "expected a JSON object or array"),
        (b'{"messages": "nope"}', "'messages' is a str"),
        (b'{"session_id": "x"}', "no 'messages' list"),
        (b"[1, 2]", "message 0 is a int"),
    ],
)
def test_bad_input_gets_one_clear_line_and_no_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "session_bad.json"
    path.write_bytes(content)
    code, out, err = run(capsys, "compact", str(path), "--force")
    assert code == 2, err
    assert out == ""
    assert err.count("\n") == 1 and str(path) in err and problem in err
    assert [p.name for p in tmp_path.iterdir()] == ["session_bad.json"]
    assert path.read_bytes() == content


def test_unknown_role_fails_closed_with_the_reason(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "session_role.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "wizard", "content": "?"}]))
    code, out, _ = run(capsys, "compact", str(path), "--force", "--json")
    assert code == 1
    assert "unknown role 'wizard'" in json.loads(out)["reason"]
    assert [p.name for p in tmp_path.iterdir()] == ["session_role.json"]


def test_tool_result_without_call_and_huge_output_still_give_a_correct_view(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    huge = json.dumps({"output": "y" * 5_000_000, "exit_code": 0, "error": None})
    messages = [{"role": "user", "content": "go"}]
    messages += [{"role": "tool", "tool_call_id": "ghost", "content": "Error: lost"}]
    messages += [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "yes"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": huge},
    ]
    for i in range(6):
        messages += [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": "a" * 3000}]
    path = tmp_path / "session_odd.json"
    path.write_text(json.dumps(messages))
    code, out, _ = run(capsys, "compact", str(path), "--force", "--json")
    report = json.loads(out)
    assert code == 0 and report["verified"], report
    view = json.loads(path.with_name("compacted_session_odd.json").read_text())
    assert isinstance(view, list) and len(json.dumps(view)) < 100_000
    assert "Error: lost" in json.dumps(view)
    assert path.with_name("compacted_session_odd.meta.json").exists()


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    for text, key in [
        ("compaction:\n  bogus: 1\n", "compaction.bogus"),
        ("compaction:\n  trigger_threshold: high\n", "compaction.trigger_threshold"),
        ("huey:\n  backend: mysql\n", "huey.backend"),
    ]:
        bad.write_text(text)
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            load_config(bad, env={})


def test_config_lookup_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load_config(env={}).source == "built-in defaults"
    user = tmp_path / ".timmy" / "timmy-config" / "compaction.yaml"
    user.parent.mkdir(parents=True)
    user.write_text("compaction:\n  trigger_threshold: 0.7\n")
    assert load_config(env={}).compaction.trigger_threshold == 0.7
    env_file = tmp_path / "env.yaml"
    env_file.write_text("compaction:\n  trigger_threshold: 0.8\n")
    assert load_config(env={"TIMMY_COMPACTOR_CONFIG": str(env_file)}).compaction.trigger_threshold == 0.8
    flag = tmp_path / "flag.yaml"
    flag.write_text("compaction:\n  trigger_threshold: 0.9\n")
    assert load_config(flag, env={"TIMMY_COMPACTOR_CONFIG": str(env_file)}).compaction.trigger_threshold == 0.9


def test_repo_config_file_is_exactly_the_defaults() -> None:
    repo_config = Path(__file__).resolve().parents[1] / "config" / "compaction.yaml"
    loaded = load_config(repo_config, env={})
    assert loaded.compaction == Config().compaction and loaded.model == Config().model
    assert loaded.huey == Config().huey and loaded.export == Config().export


def test_context_window_resolution(tmp_path: Path) -> None:
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "context_length_cache.yaml").write_text('context_lengths:\n  "qwen-14b@http://127.0.0.1:8080/v1": 32768\n')

    def config(text: str) -> Config:
        path = tmp_path / "c.yaml"
        path.write_text(f"sessions:\n  hermes_home: {home}\n" + text)
        return load_config(path, env={})

    assert resolve_context_window(config(""), "unknown-model") == 65_536
    assert resolve_context_window(config(""), "qwen-14b", "http://127.0.0.1:8080/v1") == 32_768
    assert resolve_context_window(config("model:\n  context_window: 100000\n"), "qwen-14b") == 100_000
    table = "model:\n  context_window: 100000\n  context_windows: {qwen-14b: 50000}\n"
    assert resolve_context_window(config(table), "qwen-14b") == 50_000
    chain = "model:\n  context_windows: {big: 131072, small: 16384}\n  fallback_models: [small]\n"
    assert resolve_context_window(config(chain), "big") == 16_384
