"""session_export: raw sessions only, incremental, idempotent, crash-safe; DPO pairing rules."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, Sidecar, load_sample, session_variant, wait_for, write_like_hermes
from timmy_compactor import export
from timmy_compactor.dpo import correction_rule, mine_pairs
from timmy_compactor.export import export_sessions


@pytest.mark.parametrize(
    ("rule", "positive", "negative"),
    [
        ("negation", "No, that's wrong — read config/dev.yaml", "no worries, thanks"),
        ("negation", "nope. use the other file", "no problem at all"),
        ("thats_wrong", "Hmm, that is incorrect: the port is 8080", "that's right, thanks"),
        ("not_what_i_asked", "This is not what I asked for.", "exactly what I wanted"),
        ("actually", "Actually, use port 8080.", "actually, great job"),
        ("instead", "Use /etc/hosts instead.", "why not use /etc/hosts instead?"),
        ("try_again", "That didn't work, still failing", "works now, thanks"),
    ],
)
def test_each_rule_has_a_positive_and_a_negative(rule: str, positive: str, negative: str) -> None:
    assert correction_rule(positive, "fix the config") == rule
    assert correction_rule(negative, "fix the config") is None


def test_retry_of_the_same_request() -> None:
    assert correction_rule("Fix the failing test in app.py please", "fix the failing test in app.py, please") == "retry"
    assert correction_rule("Now deploy it", "fix the failing test in app.py, please") is None


def conversation(*turns: tuple[str, str]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for user, answer in turns:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    return messages


def test_pairs_need_an_accepted_answer() -> None:
    messages = conversation(("port?", "8000"), ("no, that's wrong", "8080"), ("thanks", "welcome"))
    (pair,) = mine_pairs(messages)
    assert (pair.rule, pair.prompt_end, pair.rejected, pair.correction, pair.chosen) == ("negation", 0, 1, 2, 3)
    corrected_twice = conversation(("port?", "8000"), ("no, wrong", "8081"), ("no, still wrong", "8080"))
    pairs = mine_pairs(corrected_twice)
    assert [(p.rejected, p.chosen) for p in pairs] == [(3, 5)]


def test_the_real_samples_yield_their_corrections() -> None:
    sample = load_sample()
    pairs = mine_pairs(sample["messages"])
    assert [p.rule for p in pairs] == ["negation"]
    assert "use /etc/hosts instead" in sample["messages"][pairs[0].correction]["content"]
    assert "/etc/hostname" in sample["messages"][pairs[0].rejected]["content"]


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    directory = tmp_path / "sessions"
    directory.mkdir()
    sample = load_sample()
    for name in ("a", "b", "c"):
        write_like_hermes(directory / f"session_{name}.json", session_variant(sample, name))
    return directory


def lines_by_session(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        out.setdefault(json.loads(line)["_session"], []).append(line)
    return out


def test_views_temp_files_and_others_are_never_read(sessions: Path, tmp_path: Path) -> None:
    poison = {"session_id": "POISON", "messages": [{"role": "user", "content": "POISON"}]}
    for name in ("compacted_session_a.json", ".session_a_x1y2.tmp", "sessions.json", "request_dump_1.json"):
        (sessions / name).write_text(json.dumps(poison))
    (tmp_path / "outside.json").write_text(json.dumps(poison))
    (sessions / "session_link.json").symlink_to(tmp_path / "outside.json")
    summary = export_sessions(sessions, tmp_path / "out")
    assert summary.seen == 3 and summary.exported == 3
    out = tmp_path / "out"
    assert "POISON" not in (out / "conversations.jsonl").read_text()
    assert "POISON" not in (out / "dpo_pairs.jsonl").read_text()


def test_incremental_idempotent_and_only_the_edited_session_changes(sessions: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = export_sessions(sessions, out)
    assert (first.exported, first.pairs) == (3, 3)
    snapshot = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.glob("*.json*")}
    second = export_sessions(sessions, out)
    assert (second.exported, second.unchanged) == (0, 3)
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.glob("*.json*")} == snapshot
    before = lines_by_session(out / "conversations.jsonl")
    edited = session_variant(load_sample(), "b-edited")
    write_like_hermes(sessions / "session_b.json", edited)
    third = export_sessions(sessions, out)
    assert (third.exported, third.unchanged) == (1, 2)
    after = lines_by_session(out / "conversations.jsonl")
    assert after["a"] == before["a"] and after["c"] == before["c"]
    assert after["b"] != before["b"] and len(after["b"]) == 1
    assert "[b-edited]" in after["b"][0]
    assert len(lines_by_session(out / "dpo_pairs.jsonl")["b"]) == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["sessions"]) == {"a", "b", "c"}


def test_a_crash_mid_export_leaves_valid_outputs_and_converges(
    sessions: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    export_sessions(sessions, out)
    old = {p.name: p.read_bytes() for p in out.glob("*.json*")}
    write_like_hermes(sessions / "session_a.json", session_variant(load_sample(), "a-new"))
    real_write = export.atomic_write
    calls = []

    def crash_on_manifest(target: Path, data: bytes, mode: int = 0o600) -> None:
        calls.append(target.name)
        if target.name == "manifest.json":
            raise OSError("disk full")
        real_write(target, data, mode)

    monkeypatch.setattr(export, "atomic_write", crash_on_manifest)
    with pytest.raises(OSError, match="disk full"):
        export_sessions(sessions, out)
    assert calls == ["conversations.jsonl", "dpo_pairs.jsonl", "manifest.json"]
    assert (out / "manifest.json").read_bytes() == old["manifest.json"]
    for name in ("conversations.jsonl", "dpo_pairs.jsonl"):
        for line in (out / name).read_text().splitlines():
            json.loads(line)
    assert not list(out.glob(".*.tmp"))
    monkeypatch.setattr(export, "atomic_write", real_write)
    export_sessions(sessions, out)
    convs = lines_by_session(out / "conversations.jsonl")
    assert sorted(convs) == ["a", "b", "c"] and all(len(v) == 1 for v in convs.values())
    assert "[a-new]" in convs["a"][0]


def test_credentials_are_redacted_by_default(sessions: Path, tmp_path: Path) -> None:
    doc = session_variant(load_sample(), "secret")
    secret = "sk-" + "Zq8" * 12
    doc["messages"][1]["content"] = f"Using api_key={secret} against 10.1.2.3"
    write_like_hermes(sessions / "session_secret.json", doc)
    export_sessions(sessions, tmp_path / "on")
    text = (tmp_path / "on" / "conversations.jsonl").read_text()
    assert secret not in text and "10.1.2.3" not in text and "credential_ref:" in text
    export_sessions(sessions, tmp_path / "off", redact=False)
    assert secret in (tmp_path / "off" / "conversations.jsonl").read_text()


@pytest.mark.slow
def test_through_the_real_huey_consumer(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite")
    config = json.loads(car.config_path.read_text())
    config["export"] = {"dir": str(tmp_path / "export")}
    car.config_path.write_text(json.dumps(config))
    sample = load_sample()
    for name in ("x", "y"):
        write_like_hermes(car.sessions / f"session_{name}.json", session_variant(sample, name))
    manifest = tmp_path / "export" / "manifest.json"

    def enqueue_export() -> None:
        subprocess.run(
            [sys.executable, "-c", "import tasks; tasks.session_export()"],
            cwd=REPO,
            env=car.env,
            check=True,
            capture_output=True,
        )

    try:
        car.start("consumer")
        enqueue_export()
        assert wait_for(manifest.exists, timeout=20), car.log_text()
        before = lines_by_session(tmp_path / "export" / "conversations.jsonl")
        first_manifest = manifest.read_bytes()
        write_like_hermes(car.sessions / "session_y.json", session_variant(sample, "y2"))
        time.sleep(0.05)
        enqueue_export()
        assert wait_for(lambda: manifest.read_bytes() != first_manifest, timeout=20), car.log_text()
        after = lines_by_session(tmp_path / "export" / "conversations.jsonl")
        assert after["x"] == before["x"]
        assert after["y"] != before["y"] and "[y2]" in after["y"][0]
    finally:
        car.stop_all()
