"""The one-line forms that stand in for compacted content."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from timmy_compactor.core.depth import MAX_DEPTH, nesting_depth
from timmy_compactor.core.facts import call_arguments, call_name, paths_and_urls, persisted_output_paths
from timmy_compactor.core.keylines import KeyLine
from timmy_compactor.core.redact import redact_text
from timmy_compactor.core.text import readable, text_of

ARG_PREVIEW_CHARS = 80


def index_label(indices: Iterable[int]) -> str:
    """`#12`, `#12–#15` or `#3, #7–#8`: the raw message indices an element stands for."""
    if isinstance(indices, range) and indices.step == 1 and indices:  # a fold line's run: not sorted again
        return f"#{indices[0]}" if len(indices) == 1 else f"#{indices[0]}–#{indices[-1]}"
    ordered = sorted(set(indices))
    runs: list[tuple[int, int]] = []
    for i in ordered:
        if runs and runs[-1][1] == i - 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return ", ".join(f"#{a}" if a == b else f"#{a}–#{b}" for a, b in runs)


def shorten(text: str, limit: int = ARG_PREVIEW_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def call_preview(call: dict[str, Any]) -> str:
    """`terminal("make test")`: a tool call in one short line (its arguments previewed, never in full)."""
    return f"{call_name(call)}({_argument_preview(call_arguments(call))})"


def _argument_preview(arguments: str) -> str:
    try:
        decoded: Any = json.loads(arguments) if arguments.strip() else {}
    except (ValueError, RecursionError):
        return json.dumps(shorten(arguments), ensure_ascii=False)
    if nesting_depth(decoded) > MAX_DEPTH:  # previewed as text: the encoder recurses per level
        return json.dumps(shorten(arguments), ensure_ascii=False)
    if isinstance(decoded, dict):
        if len(decoded) == 1:
            (value,) = decoded.values()
            return _value_preview(value)
        return ", ".join(f"{k}={_value_preview(v, 40)}" for k, v in decoded.items())
    return _value_preview(decoded)


def _value_preview(value: Any, limit: int = ARG_PREVIEW_CHARS) -> str:
    if isinstance(value, str):
        return json.dumps(shorten(value, limit), ensure_ascii=False)
    return shorten(json.dumps(value, ensure_ascii=False), limit)


def with_refs(line_body: str, sources_text: str) -> str:
    """Append to `line_body` every path or URL of `sources_text` it does not already show."""
    missing = [ref for ref in paths_and_urls(sources_text) if ref not in line_body]
    return f"{line_body} (refs: {' '.join(missing)})" if missing else line_body


def tool_line(
    call: dict[str, Any],
    outcome: str,
    indices: Sequence[int],
    result: Any = None,
    key_lines: Sequence[KeyLine] = (),
    *,
    redact: bool = False,
) -> str:
    """`[tool: read_file("config.yaml") → ok, 347 chars, #12–#13]`; an output that printed an error
    (even with exit code 0) carries its key error lines: `→ ok, 88 chars, printed: Error: …, #4–#5]`."""
    arguments = redact_text(call_arguments(call)) if redact else call_arguments(call)
    call_text = with_refs(f"{call_name(call)}({_argument_preview(arguments)})", readable(arguments))
    details = [outcome]
    if result is not None:
        text = text_of(result)
        details.append(f"{len(text):,} chars")
        persisted = persisted_output_paths(result)
        if persisted:
            details.append("full output in " + " ".join(persisted))
    if key_lines:
        details.append("printed: " + " | ".join(str(line) for line in key_lines))
    details.append(index_label(indices))
    return f"[tool: {call_text} → {', '.join(details)}]"


def prepend(lines: Sequence[str], content: Any) -> Any:
    """Content with `lines` placed before it (string or list-of-parts content)."""
    block = "\n".join(lines)
    if not lines:
        return content
    if isinstance(content, list):
        return [{"type": "text", "text": block}, *content]
    text = text_of(content)
    return f"{block}\n{text}" if text else block


def append(content: Any, lines: Sequence[str]) -> Any:
    block = "\n".join(lines)
    if not lines:
        return content
    if isinstance(content, list):
        return [*content, {"type": "text", "text": block}]
    text = text_of(content)
    return f"{text}\n{block}" if text else block
