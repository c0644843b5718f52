"""Recall (spec §2a): the refs a view shows are the refs `show` and `timmy_recall` accept, exactly."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.credential_table import KINDS, leaked, sample
from tests.support import DATA, assistant, call, corpus_files, tool, user
from timmy_compactor.cli import main
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.recall import RefError, lookup, parse_ref, search
from timmy_compactor.core.types import Settings
from timmy_compactor.sessions.rawlog import RawLog

LABEL = re.compile(r"#(\d+)(?:–#(\d+))?")


def sessions() -> list[Path]:
    return corpus_files()[:4] or sorted(DATA.glob("session_*.json"))


def test_refs_parse_and_out_of_range_is_a_clear_error() -> None:
    assert parse_ref("#12", 20) == range(12, 13)
    assert parse_ref("#3-#5", 20) == range(3, 6) == parse_ref("3–5", 20)
    with pytest.raises(RefError, match="no message #25"):
        parse_ref("#20-#25", 21)
    with pytest.raises(RefError, match="not a ref"):
        parse_ref("twelve", 20)


@pytest.mark.parametrize("path", sessions(), ids=lambda p: p.stem)
def test_every_ref_of_a_view_recalls_exactly_the_raw_messages_it_stands_for(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    raw = data["messages"]
    result = compact(raw, Settings(context_window=16_000), system_prompt=data.get("system_prompt"), force=True)
    assert result.compacted, result.report.failure
    checked = 0
    for message, sources in zip(result.messages, result.sources, strict=True):
        text = json.dumps(message.get("content"), ensure_ascii=False)
        for match in LABEL.finditer(text):
            first, last = int(match.group(1)), int(match.group(2) or match.group(1))
            if not (set(range(first, last + 1)) & set(sources)) or last - first > 20:
                continue  # a ref into another message (an index entry), or a long folded range
            answer = lookup(raw, match.group(0).replace("–", "-"), max_chars=10**9)
            assert [item["ref"] for item in answer.items] == [f"#{i}" for i in range(first, last + 1)]
            for item, i in zip(answer.items, range(first, last + 1), strict=True):
                assert item["message"]["role"] == raw[i]["role"]
                assert item["message"].get("tool_call_id") == raw[i].get("tool_call_id")
            checked += 1
    assert checked > 5


def test_show_by_ref_and_by_text_from_a_raw_file_and_from_its_view(tmp_path: Path, capsys: Any) -> None:
    raw = tmp_path / "session_s1.json"
    shutil.copy(sessions()[0], raw)
    assert main(["compact", str(raw), "--force"]) == 0
    view = tmp_path / "compacted_session_s1.json"
    assert view.exists()
    capsys.readouterr()
    document = json.loads(raw.read_text(encoding="utf-8"))
    for target in (raw, view):
        assert main(["show", str(target), "--ref", "#2", "--json", "--max-chars", "100000"]) == 0
        answer = json.loads(capsys.readouterr().out)
        assert answer["items"][0]["message"]["role"] == document["messages"][2]["role"]
    word = next(
        w for m in document["messages"][1:] for w in str(m.get("content") or "").split() if len(w) > 6 and w.isalpha()
    )
    assert main(["show", str(view), "--grep", word, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["items"] and all(word.lower() in item["line"].lower() for item in found["items"])
    assert main(["show", str(view), "--ref", "#99999"]) == 2
    assert "no message #99999" in capsys.readouterr().err


def test_answers_are_bounded_and_say_so() -> None:
    raw = [user("go")] + [tool(f"c{i}", "x" * 5_000) for i in range(5)]
    answer = lookup(raw, "#1-#5", max_chars=6_000)
    assert answer.truncated and answer.total == 5 and len(answer.to_json()) <= 6_500


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_recall_never_returns_a_credential_the_export_would_redact(kind: str) -> None:
    import random

    item = sample(kind, random.Random(5))
    raw = [
        user("deploy it"),
        assistant(
            [{"type": "text", "text": f"using {item.text}"}],
            call("c1", "terminal", command=f"echo {item.text}"),
            reasoning=f"the key is {item.text}",
            reasoning_content=f"so: {item.text}",
            reasoning_details=[{"type": "reasoning.text", "text": item.text}],
        ),
        tool("c1", json.dumps({"output": f"ok\n{item.text}\nError: done", "exit_code": 0})),
    ]
    by_ref = lookup(raw, "#1-#2").to_json()
    by_text = search(raw, "Error").to_json() + search(raw, "using").to_json()
    assert not leaked(item, by_ref) and not leaked(item, by_text)


def test_the_engine_log_keeps_refs_stable_across_compactions() -> None:
    """Hermes passes back what the engine returned plus what came after: refs are raw positions."""
    log = RawLog()
    raw = [user("start")]
    for i in range(120):
        raw.append(assistant(f"step {i}", call(f"c{i}", "terminal", command=f"cat /srv/f{i}.log")))
        raw.append(tool(f"c{i}", json.dumps({"output": f"line of f{i}\n" * 40, "exit_code": 0})))
    config = Settings(context_window=16_000)
    context = raw[:121]
    first = compact(log.absorb(context), config, force=True)
    log.answered(first.messages)
    context = first.messages + raw[121:]
    second = compact(log.absorb(context), config, force=True)
    assert log.messages == raw
    text = json.dumps(second.messages)
    assert "cat /srv/f70.log" in json.dumps(lookup(raw, "#141").as_dict())  # #141 is step 70's call
    assert "#141" in text or "folded" in text


def test_show_history_reads_rows_hermes_archived(tmp_path: Path, capsys: Any) -> None:
    """After Hermes compacted a session its live rows are the compacted list; --history reaches the rest."""
    import sqlite3

    from tests.support import make_state_db

    home = tmp_path / "hermes"
    (home / "sessions").mkdir(parents=True)
    early = [user("start the billing job"), assistant("running it now"), user("what did step one print?")]
    make_state_db(home / "state.db", "s9", early)
    db = sqlite3.connect(home / "state.db")
    db.execute("UPDATE messages SET active = 0, compacted = 1")
    db.execute("INSERT INTO messages (session_id, role, content) VALUES ('s9', 'user', 'start the billing job')")
    db.execute("INSERT INTO messages (session_id, role, content) VALUES ('s9', 'assistant', 'step one printed 42')")
    db.commit()
    db.close()
    config = tmp_path / "c.yaml"
    config.write_text(f"sessions:\n  dir: {home / 'sessions'}\n  hermes_home: {home}\n")
    assert main(["show", "s9", "--grep", "running it now", "--json", "--config", str(config)]) == 0
    assert json.loads(capsys.readouterr().out)["items"] == []  # the live rows no longer hold it
    assert main(["show", "s9", "--grep", "running it now", "--history", "--json", "--config", str(config)]) == 0
    assert [item["line"] for item in json.loads(capsys.readouterr().out)["items"]] == ["running it now"]
