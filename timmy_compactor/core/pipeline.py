"""compact(messages, settings) -> Result: partition, rules in priority order, verify.

Rules 5 (user messages verbatim) and 6 (the last turns untouched) are not steps here: they hold
because the rules only ever see the middle and skip user messages, and `verify` proves it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from timmy_compactor.core.accounting import Accounting
from timmy_compactor.core.draft import Draft, RuleCounts
from timmy_compactor.core.partition import Partition, partition
from timmy_compactor.core.rules import (
    collapse_assistant,
    collapse_tool_pairs,
    drop_system,
    media,
    redact_middle,
    sanitize_pairs,
    truncate_tool_output,
)
from timmy_compactor.core.tokens import (
    TextCounter,
    message_sizes,
)
from timmy_compactor.core.types import Entry, Message, Result, Settings
from timmy_compactor.core.verify import KNOWN_ROLES, verify

Rule = Callable[[Draft, Settings], tuple[Draft, RuleCounts]]

RULES: tuple[Rule, ...] = (
    collapse_tool_pairs.apply,  # 1. succeeded call + result -> one line
    truncate_tool_output.apply,  # 2. long outputs -> head + tail + error lines
    drop_system.apply,  # 3. system prompt -> one-line marker after turn N
    collapse_assistant.apply,  # 4. consecutive assistant messages -> the last one
    media.apply,  # images in the middle -> marker
    redact_middle.apply,  # optional: credentials in the middle -> credential_ref:<hash>
    sanitize_pairs.apply,  # no orphan tool call/result left behind
)


def compact(
    messages: Sequence[Message],
    settings: Settings,
    *,
    system_prompt: str | None = None,
    tools: Sequence[Any] | None = None,
    force: bool = False,
    counter: TextCounter | None = None,
) -> Result:
    """The compacted view of `messages`. Pure: the same input gives the same output."""
    if settings.strategy == "ledger":
        from timmy_compactor.core.semantic_ledger import compact_ledger

        return compact_ledger(
            messages, settings, system_prompt=system_prompt, tools=tools, force=force, counter=counter
        )
    acc = Accounting.start(messages, settings, system_prompt=system_prompt, tools=tools, force=force, counter=counter)
    unchanged, raw_sizes = acc.unchanged, acc.raw_sizes
    if not acc.triggered:
        return unchanged(verified=True)
    part = Partition(0, 0)
    try:
        bad = _input_problem(messages)
        if bad:
            return unchanged(verified=False, failure=bad)
        part = partition(messages, settings, counter, raw_sizes)
        draft = Draft.start(messages, part)
        counts: RuleCounts = {}
        for rule in RULES:
            draft, fired = rule(draft, settings)
            counts.update(fired)
        view = draft.entries()
        problems = verify(messages, view, part, draft.facts, redacted=settings.redact_credentials)
    except Exception as exc:  # noqa: BLE001 -- fail closed: a bug in a rule must never produce a view
        return unchanged(
            verified=False,
            failure=f"{type(exc).__name__}: {exc}",
            head_end=part.head_end,
            tail_start=part.tail_start,
        )
    if problems:
        return unchanged(
            verified=False,
            failure="; ".join(problems[:5]),
            head_end=part.head_end,
            tail_start=part.tail_start,
        )
    view_messages = [e.message for e in view]
    view_sizes = [
        raw_sizes[e.sources[0]] if e.message is messages[e.sources[0]] else message_sizes((e.message,), counter)[0]
        for e in view
    ]
    return acc.result(
        view_messages,
        tuple(e.sources for e in view),
        view_sizes,
        verified=True,
        rules=counts,
        head_end=part.head_end,
        tail_start=part.tail_start,
    )


def _input_problem(messages: Sequence[Message]) -> str | None:
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            return f"message {i} is a {type(m).__name__}, not a JSON object"
        if m.get("role") not in KNOWN_ROLES:
            return f"message {i} has unknown role {m.get('role')!r} (expected system, user, assistant or tool)"
    return None


def restore(sources: Sequence[Sequence[int]], raw: Sequence[Message]) -> list[Message]:
    """The raw messages a view stands for, in raw order (checks that it covers all of them)."""
    indices = sorted(i for group in sources for i in group)
    if indices != list(range(len(raw))):
        raise ValueError("the view's provenance does not cover the raw messages exactly once")
    return [raw[i] for i in indices]


__all__ = ["RULES", "Entry", "compact", "restore"]
