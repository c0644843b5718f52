"""Hypothesis strategies for realistic Hermes sessions that remember what they promised.

Every path, URL, tool name and error line the generator puts where the engine promises to keep it
is recorded in `Generated.promises`, so property tests check the view against the generator's own
record instead of the engine's extraction.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

WORDS = ["alpha", "beta", "gamma", "config", "server", "module", "cache", "deploy", "test", "build"]
TOOLS = ["terminal", "read_file", "patch", "search_files", "write_file", "bash"]


@dataclass
class Generated:
    messages: list[dict[str, Any]]
    refs: set[str] = field(default_factory=set)  # paths/URLs in user/assistant text and tool args
    tool_names: set[str] = field(default_factory=set)
    error_lines: set[str] = field(default_factory=set)


word = st.sampled_from(WORDS)
path = st.builds(lambda a, b, ext: f"/home/dev/{a}/{b}.{ext}", word, word, st.sampled_from(["py", "yaml", "md"]))
url = st.builds(lambda a, n: f"https://example.org/{a}/{n}", word, st.integers(0, 999))


@st.composite
def prose(draw: Any, refs: set[str] | None) -> str:
    words = draw(st.lists(word, min_size=1, max_size=12))
    extra = draw(st.lists(st.one_of(path, url), max_size=2))
    if refs is not None:
        refs.update(extra)
    return " ".join(words + extra)


@st.composite
def tool_result(draw: Any, name: str, gen: Generated, serial: int) -> str:
    kind = draw(st.sampled_from(["ok_json", "ok_long", "fail_exit", "fail_traceback", "swe_ok", "swe_fail", "text"]))
    rng = random.Random(draw(st.integers(0, 2**32)))  # bulk text from one draw: shrinks well, generates fast
    lines = [" ".join(rng.choices(WORDS, k=rng.randint(1, 8))) for _ in range(draw(st.integers(1, 25)))]
    if kind == "ok_json":
        return json.dumps({"output": "\n".join(lines[:5]), "exit_code": 0, "error": None})
    if kind == "ok_long":
        return json.dumps({"content": "\n".join(f"{i}|{line}" for i, line in enumerate(lines * 5, 1))})
    if kind == "fail_exit":
        error = f"fatal: step {serial} failed hard"
        gen.error_lines.add(error)
        return json.dumps({"output": "\n".join([*lines, error, *lines]), "exit_code": 2, "error": None})
    if kind == "fail_traceback":
        error = f"ValueError: bad value {serial}"
        gen.error_lines.add(error)
        body = "\n".join(["Traceback (most recent call last):", '  File "x.py", line 3, in <module>', *lines, error])
        return json.dumps({"output": body, "exit_code": 1, "error": None})
    if kind == "swe_ok":
        return "<returncode>0</returncode>\n<output>\n" + "\n".join(lines) + "\n</output>"
    if kind == "swe_fail":
        error = f"ModuleNotFoundError: No module named 'mod{serial}'"
        gen.error_lines.add(error)
        return "<returncode>1</returncode>\n<output>\n" + "\n".join([*lines, error]) + "\n</output>"
    return "\n".join(lines)


@st.composite
def sessions(draw: Any, min_turns: int = 1, max_turns: int = 6, max_steps: int = 8) -> Generated:
    gen = Generated(messages=[])
    serial = 0
    for _ in range(draw(st.integers(min_turns, max_turns))):
        user: dict[str, Any] = {"role": "user", "content": draw(prose(gen.refs))}
        if draw(st.booleans()):
            user["timestamp"] = draw(st.floats(1e9, 2e9))
        gen.messages.append(user)
        for _ in range(draw(st.integers(0, max_steps))):
            serial += 1
            if draw(st.integers(0, 4)) == 0:  # a plain assistant message (runs of them happen)
                message: dict[str, Any] = {"role": "assistant", "content": draw(prose(gen.refs))}
                if draw(st.booleans()):
                    message["reasoning"] = "thinking about " + draw(prose(None))
                gen.messages.append(message)
                continue
            calls = []
            for k in range(draw(st.integers(1, 3))):
                name = draw(st.sampled_from(TOOLS))
                arg = draw(path)
                gen.refs.add(arg)
                gen.tool_names.add(name)
                calls.append(
                    {
                        "id": f"call_{serial}_{k}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps({"path": arg})},
                    }
                )
            text = draw(prose(gen.refs)) if draw(st.booleans()) else ""
            gen.messages.append(
                {"role": "assistant", "content": text, "tool_calls": calls, "finish_reason": "tool_calls"}
            )
            for call in calls:
                name = call["function"]["name"]
                result = {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "tool_name": name,
                    "content": draw(tool_result(name, gen, serial)),
                }
                gen.messages.append(result)
        if draw(st.booleans()):
            gen.messages.append({"role": "assistant", "content": draw(prose(gen.refs))})
    return gen
