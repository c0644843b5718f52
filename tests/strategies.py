"""Hypothesis strategies for realistic Hermes sessions that remember what they promised.

A generated session looks like what hermes-agent 0.19 writes (see ../shared/spec/hermes-format.md):
users (text, or parts with images), assistants with text holding paths and URLs, `<think>` blocks,
`reasoning` fields and the extra keys real files carry, parallel tool calls whose results may come
back in any order, and tool results as Hermes' JSON strings (terminal `{"output", "exit_code",
"error"}`, read_file `{"content": "1|..."}`, patch `{"success", "diff"}`, search_files matches),
mini-swe-agent `<returncode>N</returncode><output>` blocks, plain Tracebacks, long outputs, single
enormous lines, `<persisted-output>` blocks and image parts. Now and then a call never got its
result (an interrupted run), a result has no call, a result comes twice, or a system message sits
between the turns.

Everything the engine promises to keep is recorded by the generator itself, so the property tests
check the view against this record and never against the engine's own extraction:

- `refs`: every path and URL put into user/assistant text or tool-call arguments;
- `tool_names`: every tool called;
- `error_lines`: every error line of a failed result that is answered by its call (rule 2 keeps
  lines of a cut region that start like an error; the outputs here hold at most a handful);
- `first_errors`: the key error line of every failed result (spec §2a: the first line that starts
  like an error, or the exception line closing a traceback), orphans included;
- `failed_ids` / `ok_ids`: call ids by outcome (failed calls are never collapsed);
- `persisted`: files named by `<persisted-output>` blocks.

Bulk text (output lines) comes from a `random.Random` seeded by one draw: it generates fast and
still shrinks to a small seed. Filler words never read like an error, so the generator knows
exactly which lines are error lines.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "config",
    "server",
    "module",
    "cache",
    "deploy",
    "build",
    "upstream",
    "worker",
    "ready",
    "café",
    "naïve",
    "größe",
    "日本語",
    "🙂",
]
"""Filler: none of these reads like an error (no `error`, `fail`, `not found`, ... inside)."""

TOOLS = ["terminal", "read_file", "patch", "search_files", "write_file", "bash", "web_extract", "mcp_github_issue"]
SEGMENTS = ["src", "app", "billing", "webapp", "config", "tests", "logs", "docs", "lib", "data"]
FILES = ["main", "settings", "invoice", "server", "notes", "run", "test_api", "README"]
EXTS = ["py", "yaml", "md", "json", "sh", "log", "txt"]
HOSTS = ["docs.python.org", "example.org", "127.0.0.1:8080", "api.github.com", "localhost:5173"]


@dataclass
class Generated:
    messages: list[dict[str, Any]]
    system_prompt: str | None = None
    refs: set[str] = field(default_factory=set)
    tool_names: set[str] = field(default_factory=set)
    error_lines: set[str] = field(default_factory=set)
    first_errors: set[str] = field(default_factory=set)
    errors_by_call: dict[str, list[str]] = field(default_factory=dict)  # failed call id -> its error lines
    failed_ids: set[str] = field(default_factory=set)
    ok_ids: set[str] = field(default_factory=set)
    persisted: set[str] = field(default_factory=set)
    orphan_results: int = 0  # results without a call (and results written twice)
    interrupted_calls: int = 0  # calls that never got their result
    late_systems: int = 0  # system messages between the turns

    @property
    def repairs(self) -> int:
        """Raw defects whose repair may cost a few tokens: each becomes an assistant note."""
        return self.orphan_results + self.late_systems


# --- references -----------------------------------------------------------------------------


def make_path(rng: random.Random) -> str:
    a, b = rng.choice(SEGMENTS), rng.choice(SEGMENTS)
    name = f"{rng.choice(FILES)}.{rng.choice(EXTS)}"
    forms = [f"/home/dev/{a}/{b}/{name}", f"/etc/{a}/{name}", f"{a}/{name}", f"~/{name}", f"~/{a}/{name}"]
    return rng.choice([*forms, f"./{name}", f"../{a}/{name}"])


def make_url(rng: random.Random) -> str:
    host, a = rng.choice(HOSTS), rng.choice(SEGMENTS)
    return rng.choice([f"https://{host}/{a}/{rng.randint(0, 999)}", f"http://{host}/v1/{a}?page=2&q=x"])


def make_ref(rng: random.Random) -> str:
    return make_path(rng) if rng.random() < 0.6 else make_url(rng)


# How a reference sits in prose: bare, in backticks, quoted, in parentheses, after `=`, before `:`.
WRAPS = ["{}", "`{}`", '"{}"', "({})", "--config={}", "{}:", "'{}'"]


def make_prose(rng: random.Random, refs: set[str] | None, max_refs: int = 2) -> str:
    """A sentence of filler words with up to `max_refs` paths/URLs, recorded in `refs`."""
    words = rng.choices(WORDS, k=rng.randint(1, 10))
    for _ in range(rng.randint(0, max_refs)):
        item = make_ref(rng)
        if refs is not None:
            refs.add(item)
        words.insert(rng.randint(0, len(words)), rng.choice(WRAPS).format(item))
    return " ".join(words)


def seeded(draw: Any) -> random.Random:
    """Bulk content from one draw: fast to generate, and it still shrinks (to a small seed)."""
    return random.Random(draw(st.integers(0, 2**32 - 1)))


@st.composite
def prose(draw: Any, refs: set[str] | None, max_refs: int = 2) -> str:
    return make_prose(seeded(draw), refs, max_refs)


# --- tool calls -----------------------------------------------------------------------------


@st.composite
def tool_call(draw: Any, gen: Generated, call_id: str) -> dict[str, Any]:
    name = draw(st.sampled_from(TOOLS))
    rng = seeded(draw)
    gen.tool_names.add(name)
    target = make_path(rng)
    if name != "web_extract":
        gen.refs.add(target)
    if name in ("terminal", "bash"):
        extra = rng.choice(["", " | head -n 50", " && curl -s {url}", " 2>&1 | tail -n 60"])
        if "{url}" in extra:
            link = make_url(rng)
            gen.refs.add(link)
            extra = extra.format(url=link)
        args: dict[str, Any] = {"command": f"cat {target}{extra}"}
        if rng.random() < 0.5:
            args["timeout"] = rng.randint(1, 600)
    elif name == "read_file":
        args = {"path": target, "offset": rng.randint(1, 900), "limit": 200}
    elif name in ("patch", "write_file"):
        body = "\n".join(f"    value_{k} = {k}  # {rng.choice(WORDS)}" for k in range(rng.randint(1, 40)))
        args = {"path": target, "old_string": "pass", "new_string": body} if name == "patch" else {"path": target}
        if name == "write_file":
            args["content"] = body
    elif name == "web_extract":
        links = [make_url(rng) for _ in range(rng.randint(1, 3))]
        gen.refs.update(links)
        args = {"urls": links}
    else:
        args = {"pattern": rng.choice(WORDS), "path": target, "target": "content"}
    call: dict[str, Any] = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=rng.random() < 0.5)},
    }
    if rng.random() < 0.5:  # real 0.19 files carry these besides `id`
        call["call_id"] = call_id
        call["response_item_id"] = "fc_" + call_id
    return call


# --- tool results ---------------------------------------------------------------------------

ERROR_TEMPLATES = [
    "fatal: step {n} failed hard",
    "ls: cannot access '/srv/data{n}': No such file or directory",
    "/usr/bin/bash: line 3: tool{n}: command not found",
    "E   AssertionError: expected {n} got {m}",
    "ModuleNotFoundError: No module named 'mod{n}'",
    "ERROR: build {n} broke",
    "PermissionError: [Errno 13] Permission denied: '/root/f{n}'",
    "FAILED tests/test_m{n}.py::test_case - KeyError: 'port{n}'",
]


_POOL_RNG = random.Random(0)
FILLER_POOL = [" ".join(_POOL_RNG.choices(WORDS, k=_POOL_RNG.randint(1, 9))) for _ in range(4096)]


def filler_lines(rng: random.Random, count: int, numbered: bool = False) -> list[str]:
    lines = rng.choices(FILLER_POOL, k=count)
    return [f"{i}|{line}" for i, line in enumerate(lines, 1)] if numbered else lines


def error_line(rng: random.Random, serial: int) -> str:
    return rng.choice(ERROR_TEMPLATES).format(n=serial, m=serial + 1)


OK_KINDS = ["term", "read", "patch", "search", "swe", "text", "huge_line", "persisted", "image", "empty", "mentions"]
FAIL_KINDS = ["exit", "exit_silent", "error_field", "patch", "swe", "traceback", "traceback_json", "http", "huge_line"]


@st.composite
def tool_result(draw: Any, gen: Generated, call_id: str, serial: int, *, orphan: bool = False) -> Any:
    """The content of a tool result; records its facts in `gen` (orphans promise their first error line)."""
    failed = draw(st.integers(0, 3)) == 0
    rng = seeded(draw)
    size = rng.choice([1, 3, 8, 20, 60, 250])
    if orphan:
        # an orphan keeps only its first error line (it becomes a one-line note): give it at most one
        if failed:
            error = error_line(rng, serial)
            gen.first_errors.add(error)
            return json.dumps({"output": error, "exit_code": 1, "error": None})
        return json.dumps({"output": "\n".join(filler_lines(rng, size)), "exit_code": 0, "error": None})
    if not failed:
        gen.ok_ids.add(call_id)
        return ok_result(draw(st.sampled_from(OK_KINDS)), rng, size, call_id, gen)
    gen.failed_ids.add(call_id)
    kind = draw(st.sampled_from(FAIL_KINDS))
    errors = [error_line(rng, serial * 10 + k) for k in range(rng.randint(1, 3))]
    lines = filler_lines(rng, size)
    for error in errors:  # error lines anywhere, also in the region a truncation cuts
        lines.insert(rng.randint(0, len(lines)), error)
    ordered = [line for line in lines if line in errors]

    def promise(*found: str) -> None:
        gen.errors_by_call[call_id] = list(found)
        gen.error_lines.update(found)
        gen.first_errors.add(found[0])

    if kind == "exit":
        promise(*ordered)
        separators = rng.choice([(", ", ": "), (",", ":")])  # other tools write compact JSON
        body = {"output": "\n".join(lines), "exit_code": rng.choice([1, 2, 127]), "error": None}
        return json.dumps(body, separators=separators)
    if kind == "exit_silent":  # `diff -u` exits 1 and prints nothing that reads like an error
        return json.dumps({"output": "\n".join(filler_lines(rng, size)), "exit_code": 1, "error": None})
    if kind == "error_field":
        error = f"Error: File not found: {rng.choice(SEGMENTS)}/{serial}.yml"
        promise(error)
        return json.dumps(
            {"content": "", "total_lines": 0, "error": error, "similar_files": [f"{rng.choice(SEGMENTS)}/x.yaml"]}
        )
    if kind == "patch":
        error = f"Error: could not find a match for old_string in patch {serial}"
        promise(error)
        return json.dumps({"success": False, "error": error})
    if kind == "swe":
        promise(*ordered)
        return f"<returncode>{rng.choice([1, 2, 124])}</returncode>\n<output>\n" + "\n".join(lines) + "\n</output>"
    if kind in ("traceback", "traceback_json"):
        final = f"ValueError: bad value {serial}"
        body = [
            "Traceback (most recent call last):",
            '  File "/home/dev/app/main.py", line 63, in <module>',
            "    sys.exit(main())",
            *filler_lines(rng, size),
            final,
        ]
        promise(final)  # the line that says what failed; the header alone never is a key line
        text = "\n".join(body)
        return text if kind == "traceback" else json.dumps({"output": text, "exit_code": 1, "error": None})
    if kind == "http":
        return json.dumps({"status_code": rng.choice([404, 500, 503]), "body": " ".join(rng.choices(WORDS, k=5))})
    # huge_line: one enormous line of data, then the error
    error = errors[0]
    promise(error)
    blob = rng.randbytes(rng.randint(2_500, 20_000)).hex()
    return json.dumps({"output": f"{blob}\n{error}", "exit_code": 1, "error": None})


def ok_result(kind: str, rng: random.Random, size: int, call_id: str, gen: Generated) -> Any:
    lines = filler_lines(rng, size)
    if kind == "term":
        return json.dumps({"output": "\n".join(lines), "exit_code": 0, "error": None}, ensure_ascii=rng.random() < 0.5)
    if kind == "read":
        return json.dumps(
            {"content": "\n".join(filler_lines(rng, size, numbered=True)), "total_lines": size, "truncated": False}
        )
    if kind == "patch":
        diff = "--- a/app/x.py\n+++ b/app/x.py\n@@ -1,3 +1,3 @@\n" + "\n".join(f"+{line}" for line in lines)
        return json.dumps({"success": True, "diff": diff})
    if kind == "search":  # many small leaves, maybe written compact
        matches = [{"path": f"src/{rng.choice(FILES)}.py", "line": k, "content": line} for k, line in enumerate(lines)]
        separators = rng.choice([(", ", ": "), (",", ":")])
        return json.dumps({"total_count": len(matches), "matches": matches}, separators=separators)
    if kind == "swe":
        return "<returncode>0</returncode>\n<output>\n" + "\n".join(lines) + "\n</output>"
    if kind == "huge_line":
        blob = rng.randbytes(rng.randint(2_500, 20_000)).hex()
        return json.dumps({"output": blob, "exit_code": 0, "error": None})
    if kind == "persisted":
        target = f"/tmp/hermes-results/{call_id}.txt"
        gen.persisted.add(target)
        preview = "\n".join(lines[:20])
        return (
            "<persisted-output>\nThis tool result was too large (51,397 characters, 50.2 KB).\n"
            f"Full output saved to: {target}\nUse the read_file tool with offset and limit to access "
            f"specific sections of this output.\n\nPreview (first 1500 chars):\n{preview}\n</persisted-output>"
        )
    if kind == "image":
        return [
            {"type": "text", "text": "\n".join(lines)},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "iVBORw0KGgo" * 8}},
        ]
    if kind == "empty":
        return rng.choice(["", json.dumps({"output": "", "exit_code": 0, "error": None})])
    # a succeeded command whose output talks about errors (not at the start): still a success
    lines.insert(rng.randint(1, len(lines)), "3 lines mention error handling; none failed")
    return json.dumps({"output": "\n".join(lines), "exit_code": 0, "error": None})


# --- messages -------------------------------------------------------------------------------

IMAGE_PART = {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + "/9j/4AAQ" * 10}}


@st.composite
def user_message(draw: Any, gen: Generated) -> dict[str, Any]:
    rng = seeded(draw)
    text = make_prose(rng, gen.refs)
    content: Any = text
    if rng.random() < 0.1:
        content = [{"type": "text", "text": text}, IMAGE_PART]
    message: dict[str, Any] = {"role": "user", "content": content}
    if rng.random() < 0.5:
        message["timestamp"] = round(rng.uniform(1.7e9, 1.8e9), 6)
        message["_db_persisted"] = True
    return message


@st.composite
def assistant_text(draw: Any, gen: Generated) -> dict[str, Any]:
    rng = seeded(draw)
    text = make_prose(rng, gen.refs, max_refs=3)
    if rng.random() < 0.15:
        text = f"<think>\n{make_prose(rng, gen.refs)}\n</think>\n{text}"
    if rng.random() < 0.12:  # a line that reads like an error in the assistant's own words
        text += f"\nThe run said: KeyError: 'k{len(gen.messages)}'"
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if rng.random() < 0.1:
        message["content"] = [{"type": "text", "text": text}]
    if rng.random() < 0.5:
        message["reasoning"] = "thinking about " + make_prose(rng, None)
    if rng.random() < 0.25:
        message["reasoning_content"] = "more thoughts"
    message["finish_reason"] = "stop"
    return message


@st.composite
def tool_step(draw: Any, gen: Generated, serial: int) -> list[dict[str, Any]]:
    """One assistant message with 1-3 parallel calls and their results (maybe reordered)."""
    calls = [draw(tool_call(gen, f"call_{serial}_{k}")) for k in range(draw(st.integers(1, 3)))]
    rng = seeded(draw)
    content = rng.choice(["", None, "text"])
    message: dict[str, Any] = {
        "role": "assistant",
        "content": make_prose(rng, gen.refs) if content == "text" else content,
        "tool_calls": calls,
        "finish_reason": "tool_calls",
    }
    if rng.random() < 0.5:
        message["reasoning"] = make_prose(rng, None)
    answered = list(calls)
    if rng.random() < 0.08:  # interrupted: the last call never got its result
        answered.pop()
        gen.interrupted_calls += 1
    results = []
    for call in answered:
        name = call["function"]["name"]
        result: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": call["id"],
            "content": draw(tool_result(gen, call["id"], serial)),
        }
        if rng.random() < 0.5:
            result["name"] = name
        result["tool_name"] = name
        results.append(result)
    if len(results) > 1 and rng.random() < 0.5:
        results.reverse()  # parallel results come back in any order
    if results and rng.random() < 0.04:  # the same result written twice
        results.append(dict(results[-1]))
        gen.orphan_results += 1
    return [message, *results]


@st.composite
def orphan_result(draw: Any, gen: Generated, serial: int) -> dict[str, Any]:
    gen.orphan_results += 1
    return {
        "role": "tool",
        "tool_call_id": f"ghost_{serial}",
        "tool_name": draw(st.sampled_from(TOOLS)),
        "content": draw(tool_result(gen, f"ghost_{serial}", serial, orphan=True)),
    }


SYSTEM_PROMPT = (
    "You are Hermes Agent, an intelligent AI assistant.\n# SOUL.md\nBe direct.\n"
    "## Skills\n- github: work with issues\n- terminal: run commands\n"
    "# Tool use\nCall tools in parallel when you can. Files live under /home/dev/work.\n"
)


@st.composite
def sessions(
    draw: Any,
    min_turns: int = 1,
    max_turns: int = 6,
    max_steps: int = 8,
    anomalies: bool = True,
) -> Generated:
    """A realistic session. `anomalies`: orphans, duplicates and late system messages may appear."""
    gen = Generated(messages=[])
    bare = draw(st.booleans())  # a bare message list with its system prompt as the first message
    prompt = draw(st.sampled_from([SYSTEM_PROMPT, "Be brief."]))
    if bare:
        gen.messages.append({"role": "system", "content": prompt})
    else:
        gen.system_prompt = prompt
    serial = 0
    for _ in range(draw(st.integers(min_turns, max_turns))):
        gen.messages.append(draw(user_message(gen)))
        for _ in range(draw(st.integers(0, max_steps))):
            serial += 1
            choice = draw(st.integers(0, 19))
            if choice < 4:  # plain assistant text (runs of them happen)
                gen.messages.append(draw(assistant_text(gen)))
            elif anomalies and choice == 4 and draw(st.booleans()):
                gen.messages.append(draw(orphan_result(gen, serial)))
            elif anomalies and choice == 5 and bare and draw(st.booleans()):
                gen.messages.append({"role": "system", "content": f"Reminder {serial}: keep edits small."})
                gen.late_systems += 1
            else:
                gen.messages.extend(draw(tool_step(gen, serial)))
        if draw(st.booleans()):
            gen.messages.append(draw(assistant_text(gen)))
    return gen


@st.composite
def agent_run(draw: Any, min_steps: int = 20, max_steps: int = 120) -> Generated:
    """One task statement followed by many tool steps (a mini-swe-agent style run, one turn)."""
    gen = Generated(messages=[], system_prompt=SYSTEM_PROMPT)
    gen.messages.append({"role": "user", "content": draw(prose(gen.refs))})
    for serial in range(1, draw(st.integers(min_steps, max_steps)) + 1):
        gen.messages.extend(draw(tool_step(gen, serial)))
    gen.messages.append(draw(assistant_text(gen)))
    return gen


def settings_strategy() -> Any:
    """Engine settings worth exploring (the window is drawn separately by the tests)."""
    from timmy_compactor.core.types import Settings

    return st.builds(
        Settings,
        protect_last_n_turns=st.sampled_from([0, 1, 2, 5]),
        min_tail_steps=st.sampled_from([0, 1, 3, 6]),
        max_tool_output_chars=st.sampled_from([50, 200, 500, 2000]),
        keep_tool_summary=st.booleans(),
        drop_system_after_turn=st.sampled_from([0, 1, 3]),
        collapse_consecutive_assistant=st.booleans(),
        max_tail_ratio=st.sampled_from([0.05, 0.25, 0.5]),
        context_window=st.sampled_from([4_000, 12_000, 65_536]),
    )
