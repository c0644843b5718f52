"""The strategies compared: ours and the peers' no-LLM ones, each `(messages, session, budget) -> view`.

- `rules`, `ledger`: this engine (forced, the session's configured window).
- `hermes_prepass`: Hermes' own cheap pre-pass (`ContextCompressor._prune_old_tool_results`), called
  from the installed hermes-agent (unavailable without it).
- `clear_tool_uses`: Anthropic-style context editing: keep the last 3 tool results, replace the
  content of older ones with a placeholder.
- `swe_last5`: SWE-agent-style: keep the last 5 observations, older ones become
  "Old environment output: (N lines omitted)".
- `trim_messages`: LangChain `trim_messages` (from langchain-core; unavailable without it) down to the
  token budget our `rules` view reaches for that session, strategy "last", chars/4 token counter.
- `hot_tail_only`: seed 003's baseline: the system prompt and the last 12 messages.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.tokens import request_tokens
from timmy_compactor.core.types import Message, Settings

Strategy = Callable[[list[Message], Settings, int], list[Message]]
PLACEHOLDER = "[tool result cleared]"


def _ours(strategy: str) -> Strategy:
    def run(messages: list[Message], settings: Settings, budget: int) -> list[Message]:
        return compact(messages, dataclasses.replace(settings, strategy=strategy), force=True).messages

    return run


def _tool_indices(messages: list[Message]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.get("role") == "tool"]


def clear_tool_uses(messages: list[Message], settings: Settings, budget: int, keep: int = 3) -> list[Message]:
    old = set(_tool_indices(messages)[:-keep] if keep else _tool_indices(messages))
    return [{**m, "content": PLACEHOLDER} if i in old else m for i, m in enumerate(messages)]


def swe_last5(messages: list[Message], settings: Settings, budget: int, keep: int = 5) -> list[Message]:
    old = set(_tool_indices(messages)[:-keep])
    out = []
    for i, message in enumerate(messages):
        if i in old:
            lines = len(str(message.get("content") or "").splitlines())
            out.append({**message, "content": f"Old environment output: ({lines} lines omitted)"})
        else:
            out.append(message)
    return out


def hot_tail_only(messages: list[Message], settings: Settings, budget: int, keep: int = 12) -> list[Message]:
    head = [m for m in messages[:1] if m.get("role") == "system"]
    tail = messages[-keep:]
    while tail and tail[0].get("role") == "tool":  # never start on an orphan result
        tail = tail[1:]
    return head + tail


def _hermes_prepass() -> Strategy | None:
    try:
        from agent.context_compressor import ContextCompressor
    except ImportError:
        return None

    def run(messages: list[Message], settings: Settings, budget: int) -> list[Message]:
        compressor = ContextCompressor.__new__(ContextCompressor)  # only the pure pre-pass is used
        pruned, _ = compressor._prune_old_tool_results(
            json.loads(json.dumps(messages)), protect_tail_count=6, protect_tail_tokens=settings.tail_budget_tokens
        )
        return list(pruned)

    return run


def _trim_messages() -> Strategy | None:
    try:
        from langchain_core.messages import convert_to_messages, convert_to_openai_messages, trim_messages
    except ImportError:
        return None

    def count(msgs: list[Any]) -> int:
        return sum(len(str(m.content)) + len(str(getattr(m, "tool_calls", "") or "")) for m in msgs) // 4

    def run(messages: list[Message], settings: Settings, budget: int) -> list[Message]:
        lc = convert_to_messages(
            [{k: v for k, v in m.items() if k in ("role", "content", "tool_calls", "tool_call_id")} for m in messages]
        )
        kept = trim_messages(
            lc,
            max_tokens=budget,
            strategy="last",
            token_counter=count,
            include_system=True,
            allow_partial=False,
            start_on="human",
        )
        kept_ids = {id(m) for m in kept}
        # map back to the original dicts (byte-identical where kept)
        return [orig for orig, m in zip(messages, lc, strict=True) if id(m) in kept_ids] or convert_to_openai_messages(
            kept
        )

    return run


def available() -> dict[str, Strategy | None]:
    return {
        "rules": _ours("rules"),
        "ledger": _ours("ledger"),
        "hermes_prepass": _hermes_prepass(),
        "clear_tool_uses": clear_tool_uses,
        "swe_last5": swe_last5,
        "trim_messages": _trim_messages(),
        "hot_tail_only": hot_tail_only,
    }


def message_tokens(messages: list[Message], system_prompt: str | None, tools: list[Any] | None) -> int:
    return request_tokens(messages, system_prompt, tools)
