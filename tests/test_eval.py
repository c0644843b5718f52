"""compare/: the evaluation (an independent promise checker that catches bad views, the report, its verbs)."""

from __future__ import annotations

import ast
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import (
    assistant,
    call,
    corpus_dir,
    corpus_files,
    import_graph,
    load_sample,
    pending_session,
    reachable,
    tool,
    user,
)
from timmy_compactor.cli import main
from timmy_compactor.compare.promises import check
from timmy_compactor.core.pairs import orphans

ENGINE_INTERNALS = (
    "timmy_compactor.core.verify",
    "timmy_compactor.core.facts",
    "timmy_compactor.core.rules",
    "timmy_compactor.core.lines",
    "timmy_compactor.core",
)
# The checker has its own extraction of paths and URLs; it may use the redaction, which only defines how a
# fact the index redacted is written (`credential_ref:…`, `[REDACTED_IP]`; its patterns live by family in
# `secrets_by_context`, `secrets_by_command`, `secrets_by_format` and `secrets_by_shape`, the reference in
# `credential_refs`, text escaped twice read one level down in `escapes`), and the one key-error-line
# reader (spec §2a: one reader serves the engine and the checker), with the text helpers it reads through;
# and the orphan count (`core.pairs`), which the sidecar's status shares and the engine's verification does not use.
ALLOWED = (
    "timmy_compactor.core.redact",
    "timmy_compactor.core.credential_refs",
    "timmy_compactor.core.secrets_by_context",
    "timmy_compactor.core.secrets_by_shape",
    "timmy_compactor.core.secrets_by_command",
    "timmy_compactor.core.secrets_by_format",
    "timmy_compactor.core.escapes",
    "timmy_compactor.core.keylines",
    "timmy_compactor.core.depth",  # the nesting bound `text.decode_json` reads JSON within
    "timmy_compactor.core.text",
    "timmy_compactor.core.pairs",
    "timmy_compactor.core.types",  # the one `Message` alias: a type, no logic
)


def test_the_checker_shares_no_code_with_the_engine_verification() -> None:
    source = Path(__file__).resolve().parents[1] / "timmy_compactor" / "compare" / "promises.py"
    imported = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in getattr(node, "names", [])
    ]
    assert not [m for m in imported if m and m.startswith(ENGINE_INTERNALS) and m not in ALLOWED], imported
    # not through another module of ours either (imports inside functions count too)
    graph = import_graph()
    through = sorted(
        m
        for m in reachable(graph, "timmy_compactor.compare.promises")
        if m.startswith(ENGINE_INTERNALS) and m not in ALLOWED
    )
    assert not through, through


@pytest.fixture
def raw() -> list[dict[str, Any]]:
    return load_sample()["messages"]


def test_the_raw_session_keeps_every_promise(raw: list[dict[str, Any]]) -> None:
    verdict = check(raw, raw)
    assert verdict.all_kept and verdict.tool_names[1] > 5 and verdict.refs[1] > 10 and verdict.error_lines[1] >= 3


def test_a_dropped_user_message_is_caught(raw: list[dict[str, Any]]) -> None:
    view = [m for m in raw if m.get("content") != raw[0]["content"]]
    assert not check(raw, view).users_verbatim


def small() -> list[dict[str, Any]]:
    call = {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "make"}'}}
    failure = json.dumps({"output": "Traceback (most recent call last):\nKeyError: 'port'", "exit_code": 1})
    return [
        {"role": "user", "content": "build /srv/app/main.py please"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": failure},
        {"role": "assistant", "content": "It failed."},
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "done"},
    ]


def test_a_lost_error_line_is_caught() -> None:
    raw = small()
    view = copy.deepcopy(raw)
    view[2]["content"] = json.dumps({"output": "(gone)", "exit_code": 1})
    verdict = check(raw, view)
    assert verdict.error_lines == (0, 1)
    assert any("error_line lost" in item for item in verdict.lost)


def test_a_lost_path_and_a_changed_tail_are_caught() -> None:
    raw = small()
    view = copy.deepcopy(raw)
    view[0]["content"] = "build the app please"
    view[-1]["content"] = "changed"
    verdict = check(raw, view)
    assert verdict.refs == (0, 1) and not verdict.tail_verbatim and not verdict.users_verbatim


def test_orphans_are_caught(raw: list[dict[str, Any]]) -> None:
    lonely_result = [m for m in raw if not (m["role"] == "assistant" and m.get("tool_calls"))]
    assert check(raw, lonely_result).orphans > 0
    lonely_call = [m for m in raw if m["role"] != "tool"]
    assert check(raw, lonely_call).orphans > 0


@pytest.mark.slow
def test_eval_on_the_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = corpus_dir()
    code = main(["eval", str(corpus), "--out", str(tmp_path), "--json", "--window", "32000", "--checkpoints", "4"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    table = {row["strategy"]: row for row in data["summary"]}
    assert {"rules", "ledger", "clear_tool_uses", "swe_last5", "hot_tail_only"} <= set(table)
    rules = table["rules"]
    n = len(corpus_files())
    assert rules["sessions"] == n and rules["sessions_all_kept"] == n and rules["promises_kept"] == 1.0
    assert rules["mean_token_cut"] > 0.3
    assert table["hot_tail_only"]["promises_kept"] < 1.0
    for name in ("report.json", "report.md", "report.html", "cut_vs_promises.png", "cut_per_session.png"):
        assert (tmp_path / name).stat().st_size > 100, name
    assert (tmp_path / "cut_vs_promises.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<table>" in (tmp_path / "report.html").read_text()


# ---------------------------------------------------------------- a call awaiting its result


def test_the_eval_does_not_count_a_call_awaiting_its_result() -> None:
    raw = pending_session()
    assert orphans(raw) == 0
    verdict = check(raw, raw)
    assert verdict.orphans == 0 and verdict.all_kept
    both = [*raw[:-1], assistant("", call("cy", "terminal", command="ls"), call("cz", "read_file", path="x"))]
    assert orphans([*both, tool("cy", "ok")]) == 0  # one of two results written so far
    assert orphans([*raw, user("stop")]) == 1  # a call the conversation moved on from is one


# ---------------------------------------------------------------- the eval verbs


def test_eval_ledger_help_says_what_it_checks(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["eval-ledger", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "seed" not in text.lower()
    for what in ("ledger strategy", "superseded facts", "obligations", "hot tail", "baseline"):
        assert what in text


def test_eval_without_the_eval_extra_prints_the_table_and_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from tests.support import sample_path

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    out = tmp_path / "report"
    args = ["eval", str(sample_path("session_sample.json")), "--strategies", "rules", "--checkpoints", "2"]
    assert main([*args, "--out", str(out)]) == 0
    stdout, stderr = capsys.readouterr()
    assert "| `rules` |" in stdout
    assert stderr.strip().splitlines() == [
        "timmy-compactor eval: no plots: matplotlib is missing (pip install 'timmy-compactor[eval]')"
    ]
    assert (out / "report.html").exists() and not list(out.glob("*.png"))


def test_a_lost_last_step_is_said_in_the_singular() -> None:
    """Issue 33 item 8: no "1 steps" anywhere (here the checker's verdict at tail_steps=1)."""
    raw = [user("go"), assistant("", call("c1", "terminal", command="ls")), tool("c1", "a b"), assistant("done")]
    view = [*raw[:-1], assistant("changed")]
    assert "the last step is not byte-identical" in check(raw, view, tail_steps=1).lost
    assert "the last 2 steps are not byte-identical" in check(raw, view, tail_steps=2).lost
