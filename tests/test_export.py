"""session_export: raw sessions only, incremental, idempotent, crash-safe, redacted; the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support import load_sample, session_variant, write_like_hermes
from timmy_compactor.cli import main
from timmy_compactor.config import Config, ExportSection, SessionsSection
from timmy_compactor.export import ExportError, export_lock, export_sessions, jsonl, run_export_task
from timmy_compactor.export import manifest as export_manifest
from timmy_compactor.export import run as export
from timmy_compactor.export.records import trainer_message
from timmy_compactor.sessions import snapshots

OUTPUTS = ("conversations.jsonl", "dpo_pairs.jsonl", "manifest.json")


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    directory = tmp_path / "sessions"
    directory.mkdir()
    sample = load_sample()
    for name in ("a", "b", "c"):
        write_like_hermes(directory / f"session_{name}.json", session_variant(sample, name))
    return directory


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def lines_by_session(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        out.setdefault(json.loads(line)["session_key"], []).append(line)
    return out


def snapshot(out: Path) -> dict[str, tuple[bytes, int]]:
    return {name: ((out / name).read_bytes(), (out / name).stat().st_mtime_ns) for name in OUTPUTS}


def jsonl_bytes(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in OUTPUTS[:2]}


def manifest(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "manifest.json").read_text())
    return data


def assert_valid(out: Path) -> None:
    """Every output file parses; one conversation record per session; the manifest is an object."""
    keys = [json.loads(line)["session_key"] for line in (out / "conversations.jsonl").read_text().splitlines()]
    assert keys == sorted(set(keys))
    for line in (out / "dpo_pairs.jsonl").read_text().splitlines():
        json.loads(line)
    assert isinstance(manifest(out)["sessions"], dict)


# ---------------------------------------------------------------- what is read


def test_views_temp_files_and_other_files_are_never_read(
    sessions: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    poison = load_sample()
    poison["session_id"] = "POISON"
    for message in poison["messages"]:
        if isinstance(message.get("content"), str):
            message["content"] = "POISON " + message["content"]
    others = (
        "compacted_session_a.json",
        "compacted_session_zz.json",
        ".session_a_x1y2.tmp",
        ".session_a_x1y2.json.tmp",
        "session_a.json.tmp",
        "sessions.json",
        "request_dump_1.json",
        "session_a.jsonl",
        "transcript.jsonl",
        "session_.json",
    )
    for name in others:
        (sessions / name).write_text(json.dumps(poison))
    (tmp_path / "outside.json").write_text(json.dumps(poison))
    (sessions / "session_link.json").symlink_to(tmp_path / "outside.json")
    (sessions / "session_view_link.json").symlink_to(sessions / "compacted_session_a.json")
    (sessions / "session_alias.json").symlink_to(sessions / "session_b.json")
    read: list[str] = []
    real_read = snapshots.read_snapshot_bytes

    def recording_read(path: Path) -> bytes:
        read.append(path.name)
        return real_read(path)

    monkeypatch.setattr(snapshots, "read_snapshot_bytes", recording_read)
    summary = export_sessions(sessions, tmp_path / "out")
    assert sorted(set(read)) == ["session_a.json", "session_b.json", "session_c.json"]
    assert (summary.seen, summary.exported) == (3, 3)
    refused = {Path(p.file).name: p.reason for p in summary.refused}
    assert set(refused) == {"session_link.json", "session_view_link.json", "session_alias.json"}
    assert "outside.json" in refused["session_link.json"] and "refused" in refused["session_link.json"]
    assert "session_b.json, which is exported under its own name" in refused["session_alias.json"]
    for name in OUTPUTS:
        assert "POISON" not in (tmp_path / "out" / name).read_text()


def test_conversation_records_carry_the_whole_raw_session(sessions: Path, tmp_path: Path) -> None:
    export_sessions(sessions, tmp_path / "out", redact=False)
    raw = json.loads((sessions / "session_a.json").read_text())
    record = next(r for r in records(tmp_path / "out" / "conversations.jsonl") if r["session_key"] == "a")
    # every message, tool calls and results, with the keys a trainer reads (Hermes' bookkeeping dropped)
    assert record["messages"] == [trainer_message(m) for m in raw["messages"]]
    assert any(m.get("tool_calls") for m in record["messages"]) and any(m["role"] == "tool" for m in record["messages"])
    for key in ("model", "base_url", "platform", "session_start", "last_updated", "system_prompt", "tools"):
        assert record[key] == raw[key]
    assert record["id"] == "a" and record["message_count"] == len(raw["messages"])
    data = (sessions / "session_a.json").read_bytes()
    assert record["source"] == {"file": "session_a.json", "sha256": export.sha256_bytes(data), "bytes": len(data)}
    assert manifest(tmp_path / "out")["sessions"]["a"]["sha256"] == record["source"]["sha256"]
    for name in OUTPUTS:
        assert (tmp_path / "out" / name).stat().st_mode & 0o777 == 0o600


def test_dpo_records_from_the_billing_sample(tmp_path: Path) -> None:
    directory = tmp_path / "sessions"
    directory.mkdir()
    billing = load_sample("session_20261122_billing_debug.json")
    write_like_hermes(directory / "session_billing.json", billing)
    summary = export_sessions(directory, tmp_path / "out")
    assert (summary.pairs, summary.pairs_total) == (1, 1)
    (pair,) = records(tmp_path / "out" / "dpo_pairs.jsonl")
    assert pair["rule"] == "thats_wrong" and pair["session_key"] == "billing"
    assert pair["session_id"] == billing["session_id"]
    assert pair["indices"] == {"prompt_end": 18, "rejected": [19], "correction": 20, "chosen": [23]}
    messages = [trainer_message(m) for m in billing["messages"]]
    assert pair["prompt"] == [{"role": "system", "content": billing["system_prompt"]}, *messages[:19]]
    assert pair["rejected"] == [messages[19]] and pair["chosen"] == [messages[23]]
    assert pair["correction"]["content"].startswith("No, that's wrong — read config/dev.yaml")
    assert pair["system"] == billing["system_prompt"] and pair["tools"] == billing["tools"]
    assert pair["source"]["file"] == "session_billing.json"


# ---------------------------------------------------------------- incremental and idempotent


def test_a_second_run_changes_nothing_and_an_edit_reexports_only_that_session(sessions: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = export_sessions(sessions, out)
    assert (first.exported, first.pairs, first.rebuilt) == (3, 3, True)
    before = snapshot(out)
    second = export_sessions(sessions, out)
    assert (second.exported, second.unchanged, second.bytes_written, second.rebuilt) == (0, 3, 0, False)
    assert (second.sessions_total, second.pairs_total) == (3, 3)
    assert snapshot(out) == before  # not even rewritten
    old = lines_by_session(out / "conversations.jsonl")
    old_manifest = manifest(out)["sessions"]
    write_like_hermes(sessions / "session_b.json", session_variant(load_sample(), "b-edited"))
    third = export_sessions(sessions, out)
    assert (third.exported, third.unchanged, third.pairs) == (1, 2, 1)
    new = lines_by_session(out / "conversations.jsonl")
    assert new["a"] == old["a"] and new["c"] == old["c"]
    assert len(new["b"]) == 1 and new["b"] != old["b"] and "[b-edited]" in new["b"][0]
    assert {k: len(v) for k, v in lines_by_session(out / "dpo_pairs.jsonl").items()} == {"a": 1, "b": 1, "c": 1}
    new_manifest = manifest(out)["sessions"]
    assert new_manifest["a"] == old_manifest["a"] and new_manifest["c"] == old_manifest["c"]
    assert new_manifest["b"]["sha256"] != old_manifest["b"]["sha256"]
    assert "pending" not in manifest(out)


def test_the_incremental_export_equals_a_fresh_full_one(sessions: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    export_sessions(sessions, out)
    write_like_hermes(sessions / "session_b.json", session_variant(load_sample(), "b2", n_messages=30))
    write_like_hermes(sessions / "session_0.json", session_variant(load_sample(), "zero"))  # sorts first
    write_like_hermes(sessions / "session_d.json", session_variant(load_sample(), "d"))
    write_like_hermes(sessions / "session_a-b.json", session_variant(load_sample(), "a-b"))  # name order != key order
    summary = export_sessions(sessions, out)
    assert (summary.exported, summary.unchanged) == (4, 2)
    export_sessions(sessions, tmp_path / "fresh")
    assert jsonl_bytes(out) == jsonl_bytes(tmp_path / "fresh")
    full = export_sessions(sessions, out, full=True)
    assert (full.exported, full.rebuilt, full.note) == (6, True, "full export requested")
    assert jsonl_bytes(out) == jsonl_bytes(tmp_path / "fresh")


def test_deleted_sessions_keep_their_records_until_full(sessions: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    export_sessions(sessions, out)
    (sessions / "session_a.json").unlink()
    write_like_hermes(sessions / "session_c.json", session_variant(load_sample(), "c2"))
    summary = export_sessions(sessions, out)
    assert (summary.seen, summary.exported, summary.sessions_total) == (2, 1, 3)
    assert sorted(lines_by_session(out / "conversations.jsonl")) == ["a", "b", "c"]
    export_sessions(sessions, out, full=True)
    assert sorted(lines_by_session(out / "conversations.jsonl")) == ["b", "c"]
    assert sorted(manifest(out)["sessions"]) == ["b", "c"]


def test_since_exports_only_recent_sessions(sessions: Path, tmp_path: Path) -> None:
    old = session_variant(load_sample(), "old")
    old["last_updated"] = "2020-01-01T00:00:00"
    write_like_hermes(sessions / "session_old.json", old)
    cutoff = datetime(2025, 1, 1, tzinfo=UTC)  # aware, while Hermes writes naive local times
    summary = export_sessions(sessions, tmp_path / "out", since=cutoff)
    assert (summary.exported, summary.skipped) == (3, 1)
    assert "old" not in lines_by_session(tmp_path / "out" / "conversations.jsonl")
    naive = export_sessions(sessions, tmp_path / "out", since=datetime(2025, 1, 1))
    assert (naive.exported, naive.skipped, naive.unchanged) == (0, 1, 3)
    later = export_sessions(sessions, tmp_path / "out")
    assert (later.exported, later.unchanged) == (1, 3)


def test_a_broken_session_is_reported_and_keeps_its_previous_records(sessions: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    export_sessions(sessions, out)
    before = jsonl_bytes(out)
    old_b = lines_by_session(out / "conversations.jsonl")["b"]
    (sessions / "session_b.json").write_text('{"session_id": "b", "messages": [')
    summary = export_sessions(sessions, out)
    (problem,) = summary.failed
    assert problem.file.endswith("session_b.json") and "invalid JSON" in problem.reason
    assert "previous records" in problem.reason
    assert summary.exported == 0 and jsonl_bytes(out) == before  # nothing else to do: nothing written
    write_like_hermes(sessions / "session_new.json", session_variant(load_sample(), "new"))
    summary = export_sessions(sessions, out)
    assert (summary.exported, len(summary.failed)) == (1, 1)
    assert lines_by_session(out / "conversations.jsonl")["b"] == old_b


# ---------------------------------------------------------------- crash safety


class CrashError(Exception):
    pass


def _crash_on_call(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, call: int) -> None:
    real = getattr(owner, name)
    calls = {"n": 0}

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == call:
            raise CrashError(f"{name} call {call}")
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)


CRASH_POINTS = {
    "while building records": (export, "pair_records", 2),
    "writing the pending manifest": (export_manifest, "atomic_write", 1),
    "between the two renames": (jsonl.Output, "commit", 2),
    "writing the final manifest": (export_manifest, "atomic_write", 2),
}


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_a_crash_leaves_a_valid_export_and_the_next_run_converges(
    point: str, sessions: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    export_sessions(sessions, out)
    before = jsonl_bytes(out)
    write_like_hermes(sessions / "session_a.json", session_variant(load_sample(), "a-new"))
    write_like_hermes(sessions / "session_c.json", session_variant(load_sample(), "c-new"))
    owner, name, call = CRASH_POINTS[point]
    with monkeypatch.context() as patch:
        _crash_on_call(patch, owner, name, call)
        with pytest.raises(CrashError):
            export_sessions(sessions, out)
    assert_valid(out)
    assert not list(out.glob(".*.tmp"))
    if point in ("while building records", "writing the pending manifest"):
        assert jsonl_bytes(out) == before and "pending" not in manifest(out)
    after = export_sessions(sessions, out)
    assert not after.failed and "pending" not in manifest(out)
    export_sessions(sessions, tmp_path / "fresh")
    assert jsonl_bytes(out) == jsonl_bytes(tmp_path / "fresh")
    assert {k: v["sha256"] for k, v in manifest(out)["sessions"].items()} == {
        k: v["sha256"] for k, v in manifest(tmp_path / "fresh")["sessions"].items()
    }


def test_a_session_reverted_after_a_crash_is_exported_again(
    sessions: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pending mark matters: after a crash between the renames the conversations file holds the
    new version while the manifest still has the old sha256; the raw file then goes back to the old
    content. Without the mark, the stale record would be taken as current forever."""
    out = tmp_path / "out"
    export_sessions(sessions, out)
    original = (sessions / "session_a.json").read_bytes()
    write_like_hermes(sessions / "session_a.json", session_variant(load_sample(), "a-new"))
    with monkeypatch.context() as patch:
        _crash_on_call(patch, jsonl.Output, "commit", 2)
        with pytest.raises(CrashError):
            export_sessions(sessions, out)
    assert "[a-new]" in lines_by_session(out / "conversations.jsonl")["a"][0]
    assert manifest(out)["pending"] == {"full": False, "keys": ["a"]}
    (sessions / "session_a.json").write_bytes(original)
    summary = export_sessions(sessions, out)
    assert summary.exported == 1
    assert "[a-new]" not in lines_by_session(out / "conversations.jsonl")["a"][0]


def test_a_crashed_full_export_is_finished_by_the_next_run(
    sessions: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    export_sessions(sessions, out)
    (sessions / "session_a.json").unlink()
    with monkeypatch.context() as patch:
        _crash_on_call(patch, jsonl.Output, "commit", 2)
        with pytest.raises(CrashError):
            export_sessions(sessions, out, full=True)
    assert_valid(out)
    summary = export_sessions(sessions, out)
    assert summary.rebuilt and summary.note == "finishing an interrupted full export"
    assert sorted(lines_by_session(out / "conversations.jsonl")) == ["b", "c"]
    assert sorted(lines_by_session(out / "dpo_pairs.jsonl")) == ["b", "c"]


KILLER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from timmy_compactor.export import export_sessions
    print("ready", flush=True)
    export_sessions(Path(sys.argv[1]), Path(sys.argv[2]))
    """
)


@pytest.mark.slow
def test_sigkill_at_any_moment_leaves_a_valid_export_that_converges(tmp_path: Path) -> None:
    directory, out = tmp_path / "sessions", tmp_path / "out"
    directory.mkdir()
    sample = load_sample()

    def rewrite_all(tag: str) -> None:
        for i in range(20):
            write_like_hermes(directory / f"session_{i:03d}.json", session_variant(sample, f"s{i}-{tag}"))

    rewrite_all("first")
    export_sessions(directory, out)
    started = time.perf_counter()
    rewrite_all("timing")
    export_sessions(directory, out)
    duration = time.perf_counter() - started
    interrupted = 0
    for k, fraction in enumerate((0.1, 0.3, 0.5, 0.7, 0.9)):
        rewrite_all(f"run{k}")
        before = jsonl_bytes(out)
        proc = subprocess.Popen([sys.executable, "-c", KILLER, str(directory), str(out)], stdout=subprocess.PIPE)
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        time.sleep(duration * fraction)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert_valid(out)
        interrupted += jsonl_bytes(out) == before or "pending" in manifest(out) or bool(list(out.glob(".*.tmp")))
    assert interrupted >= 1  # the kills did land inside exports
    export_sessions(directory, out)
    export_sessions(directory, tmp_path / "fresh")
    assert jsonl_bytes(out) == jsonl_bytes(tmp_path / "fresh") and "pending" not in manifest(out)


# ---------------------------------------------------------------- redaction


def test_credentials_are_redacted_everywhere_by_default(sessions: Path, tmp_path: Path) -> None:
    doc = session_variant(load_sample(), "secret")
    key, token, bearer = "sk-" + "Zq8x" * 8, "Ab3" * 12, "eyJ" + "hG9k" * 10
    doc["base_url"] = "http://10.1.2.3:8000/v1"
    doc["system_prompt"] += f"\nMemory: my api_key={key}"
    doc["tools"][0]["function"]["description"] += f" token: {token}"
    doc["messages"][1]["content"] = f"Using {key} against 10.1.2.3"
    call = doc["messages"][1]["tool_calls"][0]["function"]
    call["arguments"] = json.dumps({"command": f"curl -H 'Authorization: Bearer {bearer}' http://10.1.2.3/"})
    doc["messages"][-2]["content"] = f"No, that's wrong, use api_key={key}"  # lands in a DPO pair too
    write_like_hermes(sessions / "session_secret.json", doc)
    summary = export_sessions(sessions, tmp_path / "on")
    assert summary.pairs_total >= 3
    for name in OUTPUTS:
        text = (tmp_path / "on" / name).read_text()
        for secret in (key, token, bearer, "10.1.2.3"):
            assert secret not in text, (name, secret)
    conversations = (tmp_path / "on" / "conversations.jsonl").read_text()
    assert "credential_ref:" in conversations and "[REDACTED_IP]" in conversations
    assert manifest(tmp_path / "on")["redacted"] is True
    export_sessions(sessions, tmp_path / "off", redact=False)
    assert key in (tmp_path / "off" / "conversations.jsonl").read_text()


def test_turning_redaction_on_rebuilds_so_no_clear_text_survives(sessions: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    doc = session_variant(load_sample(), "gone")
    secret = "sk-" + "Zq8x" * 8
    doc["messages"][0]["content"] += f" api_key={secret}"
    write_like_hermes(sessions / "session_gone.json", doc)
    export_sessions(sessions, out, redact=False)
    (sessions / "session_gone.json").unlink()  # its records would otherwise be kept as they are
    summary = export_sessions(sessions, out, redact=True)
    assert summary.rebuilt and "redact" in (summary.note or "")
    for name in OUTPUTS:
        assert secret not in (out / name).read_text()


# ---------------------------------------------------------------- locking, errors, the task


def test_an_export_running_elsewhere_makes_this_one_skip(sessions: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / ".export.lock").touch()
    with export_lock(out) as acquired:
        assert acquired
        summary = export_sessions(sessions, out)
        assert summary.locked and summary.exported == 0 and "another export" in (summary.note or "")
        config = Config(sessions=SessionsSection(dir=str(sessions)), export=ExportSection(dir=str(out)))
        assert run_export_task(config).locked
        assert main(["export", "--config", str(write_config(tmp_path, sessions, out))]) == 1
    assert not (out / "conversations.jsonl").exists()
    assert export_sessions(sessions, out).exported == 3


def test_run_export_task_uses_the_config_and_reports_instead_of_raising(sessions: Path, tmp_path: Path) -> None:
    config = Config(
        sessions=SessionsSection(dir=str(sessions)),
        export=ExportSection(dir=str(tmp_path / "x"), redact_credentials=False),
    )
    summary = run_export_task(config)
    assert (summary.exported, summary.out_dir) == (3, str(tmp_path / "x"))
    assert manifest(tmp_path / "x")["redacted"] is False
    missing = Config(
        sessions=SessionsSection(dir=str(tmp_path / "nope")), export=ExportSection(dir=str(tmp_path / "x"))
    )
    summary = run_export_task(missing)
    (problem,) = summary.failed
    assert problem.file == str(tmp_path / "nope") and "sessions.dir" in problem.reason
    json.dumps(summary.as_dict())


def test_a_corrupt_manifest_or_jsonl_names_the_file_and_the_fix(sessions: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    export_sessions(sessions, out)
    (out / "manifest.json").write_text("{not json")
    with pytest.raises(ExportError, match=r"manifest\.json: unreadable manifest .*--full"):
        export_sessions(sessions, out)
    assert export_sessions(sessions, out, full=True).exported == 3
    lines = (out / "conversations.jsonl").read_text().splitlines()
    (out / "conversations.jsonl").write_text("\n".join(reversed(lines)) + "\n")
    write_like_hermes(sessions / "session_b.json", session_variant(load_sample(), "b2"))
    with pytest.raises(ExportError, match=r"conversations\.jsonl: line 2 is out of session order.*--full"):
        export_sessions(sessions, out)
    assert not list(out.glob(".*.tmp"))


def test_a_full_disk_is_an_error_that_leaves_the_export_as_it_was(
    sessions: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    export_sessions(sessions, out)
    before = snapshot(out)
    write_like_hermes(sessions / "session_b.json", session_variant(load_sample(), "b2"))

    def full_disk(self: Any, line: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(jsonl.Output, "write", full_disk)
    with pytest.raises(ExportError, match="No space left on device while writing the export; the previous export"):
        export_sessions(sessions, out)
    assert snapshot(out) == before and not list(out.glob(".*.tmp"))


def test_the_export_dir_must_not_be_the_sessions_dir(sessions: Path) -> None:
    with pytest.raises(ExportError, match="the export dir is the sessions dir"):
        export_sessions(sessions, sessions)


# ---------------------------------------------------------------- the command line


def write_config(tmp_path: Path, sessions: Path, out: Path) -> Path:
    config = tmp_path / "compaction.yaml"
    config.write_text(json.dumps({"sessions": {"dir": str(sessions)}, "export": {"dir": str(out)}}))
    return config


def test_cli_export_json_and_human(
    sessions: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path, sessions, tmp_path / "default-out")
    assert main(["export", "--config", str(config), "--json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert (data["exported"], data["pairs"], data["out_dir"]) == (3, 3, str(tmp_path / "default-out"))
    assert captured.err == ""  # stderr is not a terminal: no progress bar
    assert main(["export", "--config", str(config), "--out", str(tmp_path / "o2"), "--since", "2020-01-01"]) == 0
    human = capsys.readouterr().out
    assert "3 session(s) seen, 3 exported, 0 unchanged" in human and str(tmp_path / "o2") in human
    assert main(["export", "--config", str(config), "--full", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rebuilt"] is True


def test_cli_errors_name_the_file_and_what_to_do(
    sessions: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, sessions, tmp_path / "out")
    with pytest.raises(SystemExit) as exc:
        main(["export", "--config", str(config), "--since", "yesterday"])
    assert exc.value.code == 2 and "not an ISO 8601 time" in capsys.readouterr().err
    (sessions / "session_bad.json").write_text("[1, 2")
    assert main(["export", "--config", str(config)]) == 1
    err = capsys.readouterr().err
    assert "session_bad.json: invalid JSON" in err and "until it parses" in err
    missing = write_config(tmp_path, tmp_path / "no-sessions", tmp_path / "out")
    assert main(["export", "--config", str(missing)]) == 2
    assert "write_json_snapshots" in capsys.readouterr().err


def test_progress_bar_only_when_asked_or_on_a_terminal(
    sessions: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export_sessions(sessions, tmp_path / "quiet")
    assert capsys.readouterr().err == ""
    export_sessions(sessions, tmp_path / "bar", progress=True)
    assert "export" in capsys.readouterr().err


def test_the_export_loads_with_hf_datasets_in_trls_dpo_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 16.10: `load_dataset("json", …)` reads both files; the DPO records are TRL's conversational
    preference format (`prompt`, `chosen`, `rejected` as message lists, the system prompt first)."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    from datasets import load_dataset

    directory = tmp_path / "sessions"
    directory.mkdir()
    billing = load_sample("session_20261122_billing_debug.json")
    write_like_hermes(directory / "session_billing.json", billing)
    write_like_hermes(directory / "session_sample.json", load_sample("session_sample.json"))
    out = tmp_path / "out"
    export_sessions(directory, out)
    cache = str(tmp_path / "hf-cache")
    conversations = load_dataset("json", data_files=str(out / "conversations.jsonl"), split="train", cache_dir=cache)
    assert conversations.num_rows == 2
    assert {"messages", "system_prompt", "tools", "source"} <= set(conversations.features)
    pairs = load_dataset("json", data_files=str(out / "dpo_pairs.jsonl"), split="train", cache_dir=cache)
    assert pairs.num_rows == 2
    systems = {c["session_key"]: c["system_prompt"] for c in conversations}
    assert {"prompt", "chosen", "rejected", "rule", "indices", "source", "session_key"} <= set(pairs.features)
    for example in pairs:
        for key in ("prompt", "chosen", "rejected"):  # what trl.data_utils.is_conversational checks
            assert isinstance(example[key], list) and example[key], key
            assert all(isinstance(m, dict) and "role" in m and "content" in m for m in example[key]), key
        prompt = example["prompt"]
        system = systems[example["session_key"]]
        assert prompt[0] == {**{k: None for k in prompt[0]}, "role": "system", "content": system}
        assert all(m["role"] != "system" for m in prompt[1:])
        assert prompt[-1]["role"] == "user"
        assert {m["role"] for m in example["chosen"] + example["rejected"]} == {"assistant"}
        assert example["chosen"][0]["content"] != example["rejected"][0]["content"]
        if example["session_key"] == "billing":
            assert [m["content"] for m in prompt[1:]] == [m.get("content") for m in billing["messages"][:19]]


def test_a_broken_session_on_a_first_export_drops_no_previous_records(sessions: Path, tmp_path: Path) -> None:
    """Issue 33: a first export spoke of dropping "previous records" there were none of."""
    (sessions / "session_b.json").write_text('{"session_id": "b", "messages": [')
    (problem,) = export_sessions(sessions, tmp_path / "out").failed
    assert "previous records" not in problem.reason and "first export" in problem.reason
