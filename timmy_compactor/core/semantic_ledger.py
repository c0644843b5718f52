"""The `ledger` strategy (seed 003): the cold history becomes one deterministic ledger block.

Output: the head (system prompt, first exchange) unchanged; one reference-only block titled
"Semantic RLE context ledger" with the sections Active facts, Decisions, Obligations, Superseded
facts, Unresolved questions, Credential refs and Retrieval notes; then the hot tail byte-for-byte.
The head and tail are what the rules strategy would keep untouched too, so "running the rules on what
it keeps" changes nothing there; the middle, which the rules would compact, is what the ledger
replaces.

Extraction reads user and assistant text of the cold middle (tool output is too noisy for facts;
its tool names and paths go to the retrieval notes), sentence by sentence:
- facts: "<key> is/are/= <value>" and "<key>: <value>" with a key of 1-3 words; a later value for
  the same key supersedes the earlier one (both kept, with their raw message index);
- decisions: "we decided", "decided to", "let's use", "let's go with", "go with", "decision:";
- obligations: "TODO", "remind me", "I need to", "we need to", "don't forget", "make sure", "must",
  and "надо", "нужно", "не забудь", "muss", "tengo que", "hay que", "il faut";
- unresolved questions: a user message with "?" that no assistant text answers before the next user
  message.
All cold text is redacted first (`redact_text`), so no secret from the cold history reaches the
ledger: credentials appear as `credential_ref:<hash>` and are listed under Credential refs.

Fail closed: an exception or a failed check returns the messages unchanged with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from timmy_compactor.core.accounting import Accounting
from timmy_compactor.core.facts import call_name, paths_and_urls, text_of, tool_calls
from timmy_compactor.core.lines import index_label
from timmy_compactor.core.partition import Partition, partition
from timmy_compactor.core.redact import REF_PREFIX, redact_text
from timmy_compactor.core.tokens import TextCounter
from timmy_compactor.core.types import Message, Result, Settings
from timmy_compactor.core.verify import KNOWN_ROLES, identical

TITLE = "Semantic RLE context ledger"
HEADER = f"[CONTEXT LEDGER — REFERENCE ONLY] {TITLE}"
SECTIONS = (
    "Active facts",
    "Decisions",
    "Obligations",
    "Superseded facts",
    "Unresolved questions",
    "Credential refs",
    "Retrieval notes",
)

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_FACT = re.compile(
    r"^\s*(?:(?:the|our|my|your)\s+)?(?P<key>[A-Za-z][\w-]*(?:\s+[A-Za-z][\w-]*){0,2})\s*(?:\bis\b|\bare\b|=|:)\s*"
    r"(?:now\s+|actually\s+)?(?P<value>[^\s].{0,79}?)\s*[.!]?\s*$",
    re.I,
)
_NOT_KEYS = frozenset(
    {"it", "this", "that", "there", "what", "which", "who", "here", "he", "she", "they", "we", "i", "you", "one"}
    | {"answer", "question", "problem", "issue", "note", "reason", "result", "thing", "idea", "plan", "goal"}
    | {"todo", "decision"}
)
_DECISION = re.compile(r"\b(?:we\s+decided|decided\s+to|let'?s\s+use|let'?s\s+go\s+with|go\s+with|decision:)", re.I)
_OBLIGATION = re.compile(
    r"\bTODO\b|\bremind\s+me\b|\bi\s+need\s+to\b|\bwe\s+need\s+to\b|\bdon'?t\s+forget\b|\bmake\s+sure\b|\bmust\b"
    r"|надо|нужно|не\s+забудь|\bmuss\b|\btengo\s+que\b|\bhay\s+que\b|\bil\s+faut\b",
    re.I,
)
_REF = re.compile(re.escape(REF_PREFIX) + r"[0-9a-f]{12}")


@dataclass
class Ledger:
    facts: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # key -> [(value, index)], oldest first
    decisions: list[tuple[str, int]] = field(default_factory=list)
    obligations: list[tuple[str, int]] = field(default_factory=list)
    questions: list[tuple[str, int]] = field(default_factory=list)
    credentials: dict[str, int] = field(default_factory=dict)  # ref -> first index
    tools: dict[str, int] = field(default_factory=dict)
    paths: list[str] = field(default_factory=list)


def extract(messages: Sequence[Message], indices: Sequence[int]) -> Ledger:
    """Build the ledger of `messages[i] for i in indices` (the cold middle)."""
    ledger = Ledger()
    pending_question: tuple[str, int] | None = None
    for i in indices:
        message = messages[i]
        role = message.get("role")
        for call in tool_calls(message):
            name = call_name(call)
            ledger.tools[name] = ledger.tools.get(name, 0) + 1
        if role not in ("user", "assistant"):
            continue
        text = redact_text(text_of(message.get("content")))
        for ref in _REF.findall(text):
            ledger.credentials.setdefault(ref, i)
        ledger.paths.extend(p for p in paths_and_urls(text) if p not in ledger.paths)
        if role == "assistant" and text.strip() and pending_question is not None:
            pending_question = None  # answered
        if role == "user":
            if pending_question is not None:
                ledger.questions.append(pending_question)
            pending_question = (" ".join(text.split())[:200], i) if "?" in text else None
        for sentence in (s.strip() for s in _SENTENCE.findall(text)):
            if not sentence:
                continue
            if _DECISION.search(sentence):
                ledger.decisions.append((sentence[:200], i))
            if _OBLIGATION.search(sentence):
                ledger.obligations.append((sentence[:200], i))
            match = _FACT.match(sentence)
            if match and not sentence.rstrip().endswith("?"):
                key = " ".join(match.group("key").lower().split())
                if key.split()[0] not in _NOT_KEYS and len(key) <= 40:
                    ledger.facts.setdefault(key, []).append((match.group("value").strip(" .!"), i))
    if pending_question is not None:
        ledger.questions.append(pending_question)
    return ledger


def render(ledger: Ledger, indices: Sequence[int]) -> str:
    lines = [f"{HEADER} (deterministic, no model involved; raw messages {index_label(indices)} are in the session log)"]

    def section(name: str, items: list[str]) -> None:
        lines.append(f"## {name}")
        lines.extend(items or ["- (none)"])

    active = [f"- {key}: {values[-1][0]} (#{values[-1][1]})" for key, values in ledger.facts.items()]
    superseded = [
        f"- {key}: {value} (#{index}) → superseded by {values[-1][0]} (#{values[-1][1]})"
        for key, values in ledger.facts.items()
        for value, index in values[:-1]
        if value != values[-1][0]
    ]
    section("Active facts", active)
    section("Decisions", [f"- {text} (#{i})" for text, i in ledger.decisions])
    section("Obligations", [f"- {text} (#{i})" for text, i in ledger.obligations])
    section("Superseded facts", superseded)
    section("Unresolved questions", [f"- {text} (#{i})" for text, i in ledger.questions])
    section("Credential refs", [f"- {ref} (first seen #{i})" for ref, i in ledger.credentials.items()])
    notes = [f"- compacted raw messages {index_label(indices)}; the full text stays in the raw session"]
    if ledger.tools:
        notes.append("- tools called: " + ", ".join(f"{name} ×{n}" for name, n in sorted(ledger.tools.items())))
    if ledger.paths:
        notes.append("- paths and URLs: " + " ".join(ledger.paths[:40]) + (" …" if len(ledger.paths) > 40 else ""))
    section("Retrieval notes", notes)
    return "\n".join(lines)


def _role(settings: Settings, previous: Message | None) -> str:
    role = settings.ledger_role
    if role == "system" and previous is not None:
        return "system"  # asked for explicitly; the seed's shape
    if previous is not None and previous.get("role") == role:
        return "assistant" if role == "user" else "user"  # keep roles alternating around the block
    return role


def compact_ledger(
    messages: Sequence[Message],
    settings: Settings,
    *,
    system_prompt: str | None = None,
    tools: Sequence[Any] | None = None,
    force: bool = False,
    counter: TextCounter | None = None,
) -> Result:
    acc = Accounting.start(messages, settings, system_prompt=system_prompt, tools=tools, force=force, counter=counter)
    unchanged = acc.unchanged
    if not acc.triggered:
        return unchanged(verified=True)
    part = Partition(0, 0)
    try:
        for i, m in enumerate(messages):
            if m.get("role") not in KNOWN_ROLES:
                return unchanged(verified=False, failure=f"message {i} has unknown role {m.get('role')!r}")
        part = partition(messages, settings, counter, acc.raw_sizes)
        cold = list(part.middle())
        if not cold:
            return unchanged(verified=True, head_end=part.head_end, tail_start=part.tail_start)
        ledger = extract(messages, cold)
        head = list(messages[: part.head_end])
        block = {"role": _role(settings, head[-1] if head else None), "content": render(ledger, cold)}
        view = [*head, block, *messages[part.tail_start :]]
        sources = (
            *((i,) for i in range(part.head_end)),
            tuple(cold),
            *((i,) for i in range(part.tail_start, len(messages))),
        )
        problems = verify_ledger(messages, view, part, block["content"])
    except Exception as exc:  # noqa: BLE001 -- fail closed: extraction errors return the original messages
        failure = f"{type(exc).__name__}: {exc}"
        return unchanged(verified=False, failure=failure, head_end=part.head_end, tail_start=part.tail_start)
    if problems:
        failure = "; ".join(problems[:5])
        return unchanged(verified=False, failure=failure, head_end=part.head_end, tail_start=part.tail_start)
    counts = {"ledger_facts": len(ledger.facts), "ledger_cold_messages": len(cold)}
    return acc.result(view, sources, verified=True, rules=counts, head_end=part.head_end, tail_start=part.tail_start)


def verify_ledger(raw: Sequence[Message], view: Sequence[Message], part: Partition, block: str) -> list[str]:
    """The ledger's promises: head and hot tail byte-identical, no raw secret of the cold history in
    the output, no orphan tool call or result, every cold message accounted for in the block."""
    problems = []
    head, tail = raw[: part.head_end], raw[part.tail_start :]
    if len(view) != len(head) + 1 + len(tail):
        return ["ledger view has the wrong shape"]
    if not all(identical(a, b) for a, b in zip(head, view[: len(head)], strict=True)):
        problems.append("head changed")
    if not all(identical(a, b) for a, b in zip(tail, view[len(head) + 1 :], strict=True)):
        problems.append("hot tail is not byte-identical")
    if redact_text(block) != block:  # anything credential- or IP-like left would be redacted again
        problems.append("a credential or IP address from the cold history leaked into the ledger")
    if index_label(part.middle()) not in block:
        problems.append("the ledger does not name the raw messages it stands for")
    open_ids: set[object] = set()
    for k, message in enumerate(view):
        if message.get("role") == "tool":
            if message.get("tool_call_id") not in open_ids:
                problems.append(f"view message {k} is a tool result without its call")
            continue
        open_ids = {c.get("id") for c in tool_calls(message)}
    return problems
