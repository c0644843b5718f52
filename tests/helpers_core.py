"""Small builders for hand-made sessions in the core tests, and helpers for the CLI tests."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from timmy_compactor.core.draft import Draft
from timmy_compactor.core.partition import Partition
from timmy_compactor.core.types import Message

SHARED = Path(__file__).resolve().parents[2] / "shared"
SAMPLES = SHARED / "samples"
CORPUS = SHARED / "corpus"
SAMPLE_NAMES = ("session_sample.json", "session_20261122_billing_debug.json", "session_sample_large.json")


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def user(content: Any = "go on") -> Message:
    return {"role": "user", "content": content}


def assistant(content: Any = "", *calls: dict[str, Any], **extra: Any) -> Message:
    message: Message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message | extra


def tool(call_id: str, content: Any, name: str = "terminal") -> Message:
    return {"role": "tool", "tool_call_id": call_id, "tool_name": name, "content": content}


def terminal(output: str, exit_code: int = 0, error: str | None = None) -> str:
    return json.dumps({"output": output, "exit_code": exit_code, "error": error})


def middle_draft(messages: list[Message], user_turns: int = 2) -> Draft:
    """A draft whose middle is all of `messages` (rules only ever see the middle)."""
    draft = Draft.start(messages, Partition(0, len(messages)))
    return Draft(head=(), middle=draft.middle, tail=(), user_turns=user_turns, facts=draft.facts)


def padding_turns(n: int, size: int = 3_000) -> list[Message]:
    """`n` plain question/answer turns of about `size` characters each (tail material)."""
    out: list[Message] = []
    for k in range(n):
        out += [user(f"question {k}"), assistant(f"answer {k} " + "x" * size)]
    return out


def sample_path(name: str) -> Path:
    """A real Hermes sample from ../shared/samples (or the copy in tests/data); skips when neither exists."""
    for path in (SAMPLES / name, Path(__file__).resolve().parent / "data" / name):
        if path.exists():
            return path
    pytest.skip(f"{SAMPLES / name} not available")


def corpus_files() -> list[Path]:
    return sorted(CORPUS.glob("session_*.json")) if CORPUS.is_dir() else []


def write_session(path: Path, document: Any, mode: int = 0o600) -> Path:
    """Write a session the way Hermes does (indent=2, raw UTF-8) with the given file mode."""
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False), encoding="utf-8")
    os.chmod(path, mode)
    return path


def listing(directory: Path) -> dict[str, bytes]:
    """Every file under `directory` (hidden temp files included) with its bytes."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def tool_session(steps: int, *, output_lines: int = 80, failing: tuple[int, ...] = ()) -> list[Message]:
    """One user turn of `steps` terminal calls (step k fails when k is in `failing`), then 3 short turns."""
    messages: list[Message] = [user("fix the bug in /srv/app/main.py, see https://example.org/issue/7")]
    for k in range(steps):
        messages.append(
            assistant(f"step {k}: looking at /srv/app/mod{k}.py", call(f"c{k}", "terminal", command=f"cat f{k}"))
        )
        lines = "\n".join(f"line {i} of file {k}" for i in range(output_lines))
        if k in failing:
            messages.append(tool(f"c{k}", terminal(lines + f"\nfatal: step {k} broke", exit_code=1)))
        else:
            messages.append(tool(f"c{k}", terminal(lines)))
    for k in range(3):
        messages += [user(f"and then {k}?"), assistant(f"done {k}")]
    return messages
