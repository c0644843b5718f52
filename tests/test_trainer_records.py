"""export/: the records a trainer reads (a trainer's keys only, integers beyond 64 bits, ids by their file_id)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import Sidecar, add_db_session, load_sample, make_state_db, tool_session, write_like_hermes
from tests.support_homes import cli, write_config
from timmy_compactor.sessions.names import file_id


def test_the_export_names_a_hostile_id_by_its_file_id(tmp_path: Path) -> None:
    from timmy_compactor.export import export_sessions

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    hostile = "x/../../../escaped\nFAKE log line"
    make_state_db(car.root / "hermes" / "state.db", hostile, tool_session(4))
    add_db_session(car.root / "hermes" / "state.db", "blob", [{"role": "user", "content": b"\x00\x01"}])
    summary = export_sessions(car.sessions, tmp_path / "out", hermes_home=car.root / "hermes", progress=False)
    assert summary.exported == 1 and [p.file for p in summary.failed] == ["state.db#blob"]
    (record,) = [json.loads(line) for line in (tmp_path / "out" / "conversations.jsonl").read_text().splitlines()]
    assert record["id"] == hostile  # the data keeps the real id
    assert record["source"]["file"] == f"state.db#{file_id(hostile)}"  # names never carry it raw


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
