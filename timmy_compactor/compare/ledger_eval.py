"""`timmy-compactor eval-ledger`: twelve invariant checks on what the index keeps of a cold history.

A checked-in synthetic chat (`evaldata/ledger_smoke.json`) is compacted with `strategy: ledger` (the
whole cold history folded into the anchor index, user messages included) and
by the hot-tail-only baseline (system prompt + the same hot tail, nothing else), and twelve invariant
checks are run on each view. It proves what stays in model-visible context, not that a model uses it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable
from importlib import resources
from typing import Any

from timmy_compactor.core.fold.index import INDEX_HEADER
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.types import Message, Settings


def _section(text: str, name: str) -> str:
    start = text.find(f"## {name}")
    if start == -1:
        return ""
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def checks(corpus: dict[str, Any], view: list[Message], tail_start: int) -> dict[str, bool]:
    expect = corpus["expect"]
    raw = corpus["messages"]
    text = json.dumps(view, ensure_ascii=False)
    ledger = next((m["content"] for m in view if str(m.get("content")).startswith(INDEX_HEADER)), "")
    key, current = expect["current_fact"]
    _, old = expect["old_fact"]
    tail = raw[tail_start:]
    roles = [m["role"] for m in view]
    return {
        "current fact retained after supersession": f"{key}: {current}" in _section(ledger, "Active facts"),
        "old fact marked superseded": old in _section(ledger, "Superseded facts"),
        "old fact not presented as current": f"{key}: {old}" not in _section(ledger, "Active facts")
        and f"{key} is {old}" not in text.lower(),
        "old decision retained": expect["decision"] in _section(ledger, "Decisions"),
        "old obligation retained": expect["obligation"] in _section(ledger, "Obligations"),
        "non-English obligation retained": expect["multilingual_obligation"] in _section(ledger, "Obligations"),
        "old unresolved question retained": expect["question"] in _section(ledger, "Unresolved questions"),
        "cold fake token not in context": expect["fake_token"] not in text,
        "cold fake token kept as a credential ref": "credential_ref:" in _section(ledger, "Credential refs"),
        "cold IP address not in context": expect["ip"] not in text,
        "hot tail byte-for-byte": view[len(view) - len(tail) :] == tail,
        "no system message after the first position": "system" not in roles[1:],
    }


def run(corpus: dict[str, Any]) -> dict[str, Any]:
    settings = dataclasses.replace(Settings(strategy="ledger"), **corpus["settings"])
    messages = corpus["messages"]
    result = compact(messages, settings, system_prompt=corpus["system_prompt"], force=True)
    if not result.report.verified:
        raise RuntimeError(f"the ledger strategy failed closed on the smoke corpus: {result.report.failure}")
    tail_start = result.report.tail_start
    baseline = messages[tail_start:]  # hot tail only (the system prompt is outside the messages)
    out: dict[str, Any] = {}
    for name, view in (("hot_tail_only_baseline", baseline), ("semantic_ledger", result.messages)):
        passed = checks(corpus, view, tail_start)
        out[name] = {
            "passed": sum(passed.values()),
            "total": len(passed),
            "checks": passed,
            "messages": len(view),
            "chars": len(json.dumps(view, ensure_ascii=False)),
        }
    return out


def load_corpus() -> dict[str, Any]:
    data = resources.files("timmy_compactor").joinpath("evaldata/ledger_smoke.json").read_text(encoding="utf-8")
    corpus: dict[str, Any] = json.loads(data)
    return corpus


def cmd_eval_ledger(args: argparse.Namespace) -> int:
    results = run(load_corpus())
    if args.json:
        print(json.dumps(results, ensure_ascii=False))
    else:
        names = list(results)
        print(f"{'check':46}" + "".join(f"{n:>24}" for n in names))
        for check in results[names[0]]["checks"]:
            marks = "".join(f"{'pass' if results[n]['checks'][check] else 'FAIL':>24}" for n in names)
            print(f"{check:46}{marks}")
        print(f"{'total':46}" + "".join(f"{results[n]['passed']:>21}/{results[n]['total']:<2}" for n in names))
    return 0 if results["semantic_ledger"]["passed"] == results["semantic_ledger"]["total"] else 1


def register_cli(sub: Any, verb: Callable[[str, str], Any]) -> None:
    p = verb(
        "eval-ledger",
        "check what the ledger strategy keeps of a built-in chat's cold part (current and superseded facts, "
        "decisions, obligations, open questions, no secrets or IPs, the hot tail verbatim): 12 checks, "
        "against a hot-tail-only baseline",
    )
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.set_defaults(func=cmd_eval_ledger)
