"""The anchor index: one reference-only assistant message right after the head (spec §2a).

Each fold appends one chunk for the range it folded, so what an earlier compaction wrote is never
rewritten and the prompt cache breaks only where the new chunk starts. A chunk lists, deduplicated
in first-seen order and each with the raw indices it came from: paths and URLs, tools with call
counts, error lines, identifiers, and the fact sections (Active facts, Decisions, Obligations,
Superseded facts, Unresolved questions, Credential refs). Values an earlier chunk already lists are
not repeated. Every value is redacted before it is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from timmy_compactor.core.facts import RawFacts, text_of
from timmy_compactor.core.fold.anchors import anchors_of
from timmy_compactor.core.fold.ledger import extract
from timmy_compactor.core.lines import index_label
from timmy_compactor.core.redact import redact_text
from timmy_compactor.core.types import Message

INDEX_HEADER = "[ANCHOR INDEX — REFERENCE ONLY]"
INDEX_INTRO = (
    f"{INDEX_HEADER} Folded history, indexed without a model. #N is raw message N of this session; "
    "the full text of any #N stays in the session log."
)
FOLD_LINE = "[folded {label}: {steps} steps, see index]"
MAX_REFS_SHOWN = 5


def is_index(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == "assistant" and _starts_index(message.get("content"))


def _starts_index(content: Any) -> bool:
    return isinstance(content, str) and content.startswith(INDEX_HEADER)


def fold_line(indices: Sequence[int], steps: int) -> str:
    return FOLD_LINE.format(label=index_label(indices), steps=steps)


class _Section:
    """Values in first-seen order, each with the raw indices it came from."""

    def __init__(self, title: str, prior: str) -> None:
        self.title = title
        self.prior = prior
        self.values: dict[str, list[int]] = {}

    def add(self, value: str | None, index: int) -> None:
        if not value:
            return
        shown = redact_text(value)
        if shown in self.values:
            if index not in self.values[shown]:
                self.values[shown].append(index)
        elif f"- {shown} (" not in self.prior:
            self.values[shown] = [index]

    def lines(self) -> list[str]:
        out = []
        for value, indices in self.values.items():
            shown = indices[:MAX_REFS_SHOWN]
            more = f" +{len(indices) - len(shown)} more" if len(indices) > len(shown) else ""
            out.append(f"- {value} ({', '.join(f'#{i}' for i in shown)}{more})")
        return out


def render_chunk(
    facts: RawFacts,
    folded: Sequence[int],
    steps: int,
    prior: str = "",
    range_indices: Sequence[int] | None = None,
) -> str:
    """One chunk of the index for the raw messages `folded`; `prior` is the index text so far. The fact
    sections read every user and assistant message of `range_indices` (default: `folded`)."""
    paths = _Section("Paths and URLs", prior)
    errors = _Section("Error lines", prior)
    ids = _Section("Identifiers", prior)
    tools: dict[str, int] = {}
    for i in folded:
        anchors = anchors_of(facts, i)
        for ref in anchors.refs:
            paths.add(ref, i)
        for name in anchors.tools:
            tools[name] = tools.get(name, 0) + 1
        for line in anchors.errors():
            errors.add(line, i)
        for identifier in anchors.identifiers:
            ids.add(identifier, i)
    lines = [f"### {fold_line(folded, steps)[1:-1]}"]
    if tools:
        lines.append("## Tools")
        lines.append("- " + ", ".join(f"{name} ×{n}" for name, n in tools.items()))
    for section in (paths, errors, ids):
        if section.values:
            lines.append(f"## {section.title}")
            lines.extend(section.lines())
    lines.extend(_ledger_lines(facts, folded if range_indices is None else range_indices))
    return "\n".join(lines)


def _ledger_lines(facts: RawFacts, folded: Sequence[int]) -> list[str]:
    ledger = extract(facts.messages, folded, facts.cache("ledger"))
    active = [f"- {key}: {values[-1][0]} (#{values[-1][1]})" for key, values in ledger.facts.items()]
    superseded = [
        f"- {key}: {value} (#{index}) → superseded by {values[-1][0]} (#{values[-1][1]})"
        for key, values in ledger.facts.items()
        for value, index in values[:-1]
        if value != values[-1][0]
    ]
    sections = (
        ("Active facts", active),
        ("Decisions", [f"- {text} (#{i})" for text, i in ledger.decisions]),
        ("Obligations", [f"- {text} (#{i})" for text, i in ledger.obligations]),
        ("Superseded facts", superseded),
        ("Unresolved questions", [f"- {text} (#{i})" for text, i in ledger.questions]),
        ("Credential refs", [f"- {ref} (#{i})" for ref, i in ledger.credentials.items()]),
    )
    out: list[str] = []
    for title, items in sections:
        if items:
            out.append(f"## {title}")
            out.extend(items)
    return out


def index_message(chunks: Iterable[str], prior: Message | None = None) -> Message:
    """The index message: the earlier one with new chunks appended, or a new one."""
    if prior is not None:
        return {**prior, "content": "\n".join([text_of(prior.get("content")), *chunks])}
    return {"role": "assistant", "content": "\n".join([INDEX_INTRO, *chunks])}
