"""Deterministic generator of realistic Hermes sessions of a given size (for benchmarks)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from timmy_compactor.core.tokens import request_tokens

SYSTEM_PROMPT = "You are Hermes Agent, an intelligent AI assistant.\n" + "# Tools\nUse tools carefully.\n" * 40
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool. " * 20,
            "parameters": {"type": "object", "properties": {"arg": {"type": "string"}}},
        },
    }
    for name in ("terminal", "read_file", "patch", "search_files", "write_file")
]
# Filler words for generated output; failures and their error lines are injected explicitly below.
WORDS = [
    "the",
    "server",
    "config",
    "module",
    "request",
    "handler",
    "upstream",
    "cache",
    "value",
    "queue",
    "path",
    "test",
    "build",
    "deploy",
]


def _line(rng: random.Random, width: int = 80) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(width // 7))


def _tool_step(rng: random.Random, step: int) -> list[dict[str, Any]]:
    call_id = f"call_{step:05d}"
    kind = rng.random()
    path = f"/home/dev/project/src/module_{rng.randrange(40)}.py"
    if kind < 0.4:  # long shell output
        lines = rng.randrange(5, 400)
        output = "\n".join(_line(rng) for _ in range(lines))
        failed = rng.random() < 0.15
        if failed:
            output += '\nTraceback (most recent call last):\n  File "x.py", line 3\nValueError: bad value'
        name, args = "terminal", {"command": f"python -m pytest {path} -x"}
        result = json.dumps({"output": output, "exit_code": 1 if failed else 0, "error": None})
    elif kind < 0.75:  # file read
        lines = rng.randrange(10, 300)
        content = "\n".join(f"{i + 1}|{_line(rng, 60)}" for i in range(lines))
        name, args = "read_file", {"path": path}
        result = json.dumps({"content": content, "total_lines": lines, "truncated": False})
    elif kind < 0.9:
        name, args = "patch", {"path": path, "old_string": _line(rng, 40), "new_string": _line(rng, 40)}
        result = json.dumps(
            {"success": True, "diff": f"--- a{path}\n+++ b{path}\n@@ -1 +1 @@\n-{_line(rng)}\n+{_line(rng)}"}
        )
    else:
        name, args = "search_files", {"pattern": rng.choice(WORDS), "path": "/home/dev/project"}
        result = json.dumps({"total_count": 0, "error": "No such file or directory: /home/dev/project/missing"})
    return [
        {
            "role": "assistant",
            "content": f"Step {step}: checking {path}.",
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "tool_name": name, "content": result},
    ]


def make_session(target_tokens: int, seed: int = 0) -> dict[str, Any]:
    """A Hermes session snapshot of about `target_tokens` estimated tokens (system + tools + messages)."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = []
    step = 0
    while True:
        if step % 12 == 0:
            messages.append(
                {
                    "role": "user",
                    "content": f"Turn {step // 12}: fix the bug in "
                    f"/home/dev/project/src/module_{rng.randrange(40)}.py, see https://example.org/issue/{step}",
                }
            )
        messages.extend(_tool_step(rng, step))
        if step % 12 == 11:
            messages.append({"role": "assistant", "content": "Done with this part. " + _line(rng)})
        step += 1
        if step % 8 == 0 and request_tokens(messages, SYSTEM_PROMPT, TOOLS) >= target_tokens:
            break
    return {
        "session_id": f"bench_{target_tokens}_{seed}",
        "model": "hermes-4-14b",
        "base_url": "http://127.0.0.1:8080/v1",
        "platform": "cli",
        "session_start": "2026-11-22T00:00:00",
        "last_updated": "2026-11-22T01:00:00",
        "system_prompt": SYSTEM_PROMPT,
        "tools": TOOLS,
        "message_count": len(messages),
        "messages": messages,
    }


def session_files(inputs: list[Path]) -> list[Path]:
    """The session files named, and the `session_*.json` files of the folders named, in order."""
    found: list[Path] = []
    for item in inputs:
        found += sorted(item.glob("session_*.json")) if item.is_dir() else [item]
    return found
