"""Hermes as its users run it: real hermes-agent 0.19 with the toolsets its CLI sends, driven against
the scripted server (`tests/fake_llm.py`) by `tests/hermes_driver.py`, and the figures read back from
the requests that server received (never from what an engine says about itself).

Two scripts: the 14-turn conversation (three ~12k–17k-character `seq` outputs per turn) and one long
single turn (one user message whose tool outputs total ≥ 3× the window). Both print key error lines
the way real commands do: a Python traceback (exit 1), a command failing with a non-zero exit, `ERROR`
lines in a log printed by a command that exits 0, and a command Hermes' terminal tool times out. The
script keeps a record of each key error line it made a command print.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.fake_llm import FakeLLM, Reply, is_summary_request
from tests.support import REPO

WINDOW = 64_000
RECALL_TOOL = "timmy_recall"


# ------------------------------------------------------------------ running Hermes


def hermes_home(tmp: Path, base_url: str, timmy: bool, snapshots: bool = True, compression: bool = True) -> Path:
    """A Hermes home for the scripted model with a 64k window; `timmy`: the engine enabled as
    `timmy-compactor hermes enable` does; `compression=False`: Hermes never compacts."""
    from timmy_compactor.hermes.setup import apply

    home = tmp / "hermes"
    home.mkdir()
    config: dict[str, Any] = {
        "model": {
            "provider": "custom",
            "default": "scripted-coder-1",
            "base_url": base_url,
            "api_key": "sk-local-not-a-secret",
            "context_length": WINDOW,
        },
        "sessions": {"write_json_snapshots": snapshots},
        "agent": {"verify_on_stop": False},
    }
    if not compression:
        config["compression"] = {"enabled": False}
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    if timmy:
        changed, _ = apply(home, enable=True)
        assert changed
    return home


def run_hermes(
    home: Path,
    workdir: Path,
    llm: FakeLLM,
    session_id: str,
    turns: Sequence[str] | None = None,
    *,
    toolsets: tuple[str, ...] | str = ("terminal", "file"),
    resume: bool = False,
    max_iterations: int | None = None,
    retry: bool = False,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One Hermes process running `turns` (default: 6 turns of the conversation; see
    tests/hermes_driver.py); `toolsets="cli"`: the toolsets Hermes' CLI enables with this home's config
    (`context_engine` included once timmy is enabled)."""
    child = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    child |= {"HERMES_HOME": str(home), "HERMES_VERIFY_ON_STOP": "0", "HERMES_DRIVER_TOOLSETS": json.dumps(toolsets)}
    child |= {"TIMMY_STATE_DIR": str(home.parent / "timmy-state"), "HERMES_DRIVER_RESUME": "1" if resume else "0"}
    if max_iterations is not None:
        child["HERMES_DRIVER_MAX_ITERATIONS"] = str(max_iterations)
    child["HERMES_DRIVER_RETRY"] = "1" if retry else "0"
    child |= env or {}
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "tests" / "hermes_driver.py"),
            llm.base_url,
            session_id,
            str(workdir),
            json.dumps(list(turns) if turns is not None else conversation_turns(6)),
        ],
        env=child,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def orphans(messages: list[dict[str, Any]]) -> list[str]:
    """Tool calls without their results and results without their call (system messages left out)."""
    problems, open_ids = [], set()
    for k, m in enumerate(messages):
        if m.get("role") == "tool":
            if m.get("tool_call_id") not in open_ids:
                problems.append(f"tool result {k} without its call")
            open_ids.discard(m.get("tool_call_id"))
            continue
        if open_ids:
            problems.append(f"call(s) before message {k} without results")
        open_ids = {c["id"] for c in m.get("tool_calls") or []} if m.get("role") == "assistant" else set()
    if open_ids:
        problems.append("call(s) at the end without results")
    return problems


# ------------------------------------------------------------------ the scripts


@dataclass(frozen=True)
class KeyLine:
    where: str  # "turn 3, step 0" or "call 12"
    kind: str  # traceback, exit, log, timeout
    line: str  # the key error line, as the command prints it


def command(kind: str, n: int, tag: str) -> tuple[dict[str, Any], str | None]:
    """Terminal arguments printing 1…n (about 5 characters a number) and, but for `seq`, the key
    error line it prints. `tag` (letters and digits) makes each line unique in its session."""
    if kind == "seq":
        return {"command": f"seq 1 {n}"}, None
    if kind == "traceback":  # non-zero exit: Python's traceback closes the output
        code = f"for i in range(1, {n + 1}): print(i)\nraise ValueError('the ledger total is off in {tag}')"
        return {"command": f'python3 -c "{code}"'}, f"ValueError: the ledger total is off in {tag}"
    if kind == "exit":  # a failing command, exit 2
        path = f"/nonexistent-bench-{tag}"
        return {"command": f"seq 1 {n}; ls {path}"}, f"ls: cannot access '{path}': No such file or directory"
    if kind == "log":  # exit 0, an ERROR line in the middle of a log
        line = f"2024-05-01 12:00:00 ERROR pool exhausted in {tag}: 32 connections busy"
        awk = f'{{ if ($1 == {n // 2}) print "{line}"; else print }}'
        return {"command": f"seq 1 {n} | awk '{awk}'"}, line
    if kind == "timeout":  # Hermes' terminal tool kills it: exit 124, "[Command timed out after 1s]"
        return {"command": f"echo waiting for the lock of {tag}; sleep 5", "timeout": 1}, "[Command timed out after 1s]"
    raise ValueError(kind)


CONVERSATION_ERRORS = {
    (1, 1): "log",
    (3, 0): "traceback",
    (5, 2): "exit",
    (7, 1): "timeout",
    (9, 0): "log",
    (11, 2): "traceback",
    (13, 1): "exit",
}
LONG_ERRORS = {3: "traceback", 12: "log", 25: "exit", 38: "timeout", 50: "log", 57: "traceback"}
_TURN = re.compile(r"^Turn (\d+):")


def conversation_turns(turns: int) -> list[str]:
    return [f"Turn {k}: count to 2500 three times with seq and tell me the last number." for k in range(1, turns + 1)]


def long_turn(calls: int) -> list[str]:
    return [f"Turn 1: run the {calls} checks one after another, then tell me which failed."]


@dataclass
class Script:
    """The scripted model. It follows the conversation by what it is asked (a new `Turn k:` message
    starts turn k, a request ending in tool results is the next step), never by counting messages, so
    a compaction cannot make it repeat a step; a request ending in any other user message is one of
    Hermes' own (background review, …) and gets a short text."""

    long_calls: int = 0  # > 0: the long single turn, that many calls; else three steps per turn
    key_lines: list[KeyLine] = field(default_factory=list)
    turn: int = 0
    step: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        with self.lock:
            if last.get("role") == "user":
                match = _TURN.match(last.get("content") or "") if isinstance(last.get("content"), str) else None
                if not match:
                    return "Nothing to add."
                self.turn, self.step = int(match.group(1)), 0
            elif last.get("role") == "tool":
                self.step += 1
            return self.reply()

    def reply(self) -> Reply:
        turn, step = self.turn, self.step
        if self.long_calls:
            if step >= self.long_calls:
                return f"All {self.long_calls} checks ran; {len(LONG_ERRORS)} failed or printed errors."
            kind, tag, where = LONG_ERRORS.get(step, "seq"), f"c{step}", f"call {step}"
            n = 2500 + step
        else:
            if step >= 3:
                return f"Turn {turn} done: the last number was {2500 + 10 * turn + 2}."
            kind, tag, where = (
                CONVERSATION_ERRORS.get((turn, step), "seq"),
                f"t{turn}s{step}",
                f"turn {turn}, step {step}",
            )
            n = 2500 + 10 * turn + step
        args, line = command(kind, n, tag)
        if line is not None:
            self.key_lines.append(KeyLine(where, kind, line))
        return [("terminal", args)]


# ------------------------------------------------------------------ reading the requests


def is_conversation(body: dict[str, Any], users: Sequence[str]) -> bool:
    """A request of the conversation itself: tools offered, not a summary, ending in a tool result or
    one of the script's user messages (Hermes' own forks end in a prompt of their own)."""
    if not body.get("tools") or is_summary_request(body):
        return False
    last = body["messages"][-1]
    return last.get("role") == "tool" or (last.get("role") == "user" and last.get("content") in users)


def chunks(body: dict[str, Any]) -> list[str]:
    """A request as a model server reads it, in order: the tool schemas, then each message."""
    return [json.dumps(body.get("tools") or [], ensure_ascii=False)] + [
        json.dumps(m, ensure_ascii=False) for m in body.get("messages", [])
    ]


def common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    """Characters of the longest common prefix of two requests' `chunks`."""
    shared = 0
    for x, y in zip(a, b, strict=False):
        if x == y:
            shared += len(x)
            continue
        return shared + len(os.path.commonprefix([x, y]))  # noqa: RUF071 -- characters
    return shared


def hermes_tokens(body: dict[str, Any]) -> int:
    """Hermes' own estimate of the request (what its trigger and ours compare): system prompt,
    messages and tool schemas."""
    from timmy_compactor.core.tokens import request_tokens

    messages = body.get("messages", [])
    system = messages[0]["content"] if messages and messages[0].get("role") == "system" else None
    return request_tokens(messages[1:] if system is not None else messages, system, body.get("tools"))


def request_text(body: dict[str, Any]) -> str:
    """Every string the model reads in a request, tool outputs' JSON strings decoded too."""
    parts: list[str] = []
    for m in body.get("messages", []):
        content = m.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        if isinstance(content, str):
            parts.append(content)
            if m.get("role") == "tool":
                parts.extend(_json_strings(content))
        parts.extend(c.get("function", {}).get("arguments", "") for c in m.get("tool_calls") or [])
    return "\n".join(parts)


def _json_strings(text: str) -> list[str]:
    try:
        data = json.loads(text)
    except ValueError:
        return []
    return [v for v in data.values() if isinstance(v, str)] if isinstance(data, dict) else []


Step = tuple[str, ...]  # a tool-calling step: its call ids


@dataclass
class StepBook:
    """The tool-calling steps as they were first sent (each first shows up whole, at the end of the
    request after it ran), to tell whether a later request still holds the last 3 whole."""

    order: list[Step] = field(default_factory=list)
    calls: dict[Step, str] = field(default_factory=dict)  # the assistant message's tool_calls, as JSON
    results: dict[str, str] = field(default_factory=dict)  # tool_call_id → the result first sent

    def read(self, messages: list[dict[str, Any]]) -> None:
        for m in messages:
            if m.get("role") == "tool" and m.get("tool_call_id") not in self.results:
                self.results[m.get("tool_call_id")] = m.get("content")
            if m.get("role") == "assistant" and m.get("tool_calls"):
                step = tuple(c["id"] for c in m["tool_calls"])
                if step not in self.calls:
                    self.order.append(step)
                    self.calls[step] = _calls(m)

    def missing_chars(self, messages: list[dict[str, Any]], last: int = 3) -> int:
        """Characters of the last `last` steps' calls and results that `messages` does not hold whole
        (0: they are whole)."""
        calls = {tuple(c["id"] for c in m["tool_calls"]): _calls(m) for m in messages if m.get("tool_calls")}
        results = {m.get("tool_call_id"): m.get("content") for m in messages if m.get("role") == "tool"}
        missing = 0
        for step in self.order[-last:]:
            if calls.get(step) != self.calls[step]:
                missing += len(self.calls[step])
            for call_id in step:
                whole = self.results.get(call_id) or ""
                if results.get(call_id) != whole:
                    missing += max(len(whole) - len(str(results.get(call_id) or "")), 1)
        return missing


def _calls(message: dict[str, Any]) -> str:
    return json.dumps([[c["id"], c["function"]["name"], c["function"]["arguments"]] for c in message["tool_calls"]])


# ------------------------------------------------------------------ the figures of one arm


@dataclass(frozen=True)
class Prices:
    """Cache prices in units of an uncached input token, and a local model's speeds."""

    prefill_tps: float = 600.0
    decode_tps: float = 23.0
    read: float = 0.1
    write: float = 1.25


@dataclass
class ArmRun:
    """What one arm's scripted server received, and the few facts the figures need besides."""

    requests: list[dict[str, Any]]  # every request, in the order the server received them
    replies: dict[int, Reply]  # the server's reply to each (by index)
    users: list[str]  # the script's user messages
    key_lines: list[KeyLine]  # what the script made commands print
    trigger_tokens: int  # the arm's trigger (Hermes' count), for "would have fit under the trigger"
    recallable: Callable[[str], bool] | None = None  # timmy: is a line found by a recall query?
    window: int = WINDOW


def measure(run: ArmRun, prices: Prices) -> dict[str, Any]:
    conversation = [i for i, b in enumerate(run.requests) if is_conversation(b, run.users)]
    figures: dict[str, Any] = {
        "requests": len(conversation),
        "other_requests": sum(1 for b in run.requests if "messages" in b) - len(conversation),
        "summary_requests": sum(1 for b in run.requests if is_summary_request(b)),
    }
    figures |= cache_figures(run, conversation, prices)
    figures |= promise_figures(run, [run.requests[i] for i in conversation])
    return figures


def cache_figures(run: ArmRun, conversation: list[int], prices: Prices) -> dict[str, Any]:
    """A request of the conversation reuses its common prefix with the conversation's request before
    it; any other request (summary, title, Hermes' background review, which run beside the conversation
    and arrive in no fixed order) its longest common prefix with any request received before it. What
    it reuses is a cache read, the rest is prefilled (and written to the cache)."""
    in_conversation = set(conversation)
    parts = {i: chunks(b) for i, b in enumerate(run.requests) if "messages" in b}  # else: no chat completion
    sent = reused = cost = local_s = 0.0
    shares: list[float] = []
    previous_conversation: int | None = None
    for i, body_chunks in parts.items():
        if i in in_conversation:
            earlier = [previous_conversation] if previous_conversation is not None else []
        else:
            earlier = [k for k in parts if k < i]
        total = sum(len(c) for c in body_chunks)
        shared = max((common_prefix(parts[k], body_chunks) for k in earlier), default=0)
        if i in in_conversation:
            if previous_conversation is not None:
                shares.append(shared / total if total else 1.0)
            previous_conversation = i
        sent += total / 4
        reused += shared / 4
        cost += (prices.read * shared + prices.write * (total - shared)) / 4
        decode = len(json.dumps(run.replies.get(i, ""), ensure_ascii=False)) / 4
        local_s += (total - shared) / 4 / prices.prefill_tps + decode / prices.decode_tps
    return {
        "prompt_tokens": round(sent),
        "prefix_reuse": round(sum(shares) / len(shares), 3) if shares else 1.0,
        "prefill_tokens": round(sent - reused),
        "cost": round(cost),
        "local_s": round(local_s),
    }


def promise_figures(run: ArmRun, requests: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts of requests of the conversation (and under `where`, which ones: their index among them)."""
    compacted = [False] + [compaction_between(a, b) for a, b in itertools.pairwise(requests)]
    sizes = [hermes_tokens(b) for b in requests]
    book, seen_users = StepBook(), []
    where: dict[str, list[int]] = {
        "compactions": [k for k, c in enumerate(compacted) if c],
        "missing_user_message": [],
        "last3_not_whole": [],
        "last3_not_whole_would_fit": [],
        "requests_with_orphans": [],
        "requests_over_window": [k for k, s in enumerate(sizes) if s > run.window],
    }
    for k, (body, size) in enumerate(zip(requests, sizes, strict=True)):
        messages = body["messages"]
        users = [m.get("content") for m in messages if m.get("role") == "user"]
        seen_users += [u for u in users if u in run.users and u not in seen_users]
        if any(u not in users for u in seen_users):
            where["missing_user_message"].append(k)
        book.read(messages)
        cut = book.missing_chars(messages)
        if cut:
            where["last3_not_whole"].append(k)
            if size + cut / 4 < run.trigger_tokens:
                where["last3_not_whole_would_fit"].append(k)
        if orphans([m for m in messages if m.get("role") != "system"]):
            where["requests_with_orphans"].append(k)
    return {
        **{name: len(found) for name, found in where.items()},
        "compactions_back_to_back": sum(a and b for a, b in itertools.pairwise(compacted)),
        "max_request_tokens": max(sizes, default=0),
        "where": where,
    } | key_line_figures(run, requests)


def compaction_between(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The list was rewritten between two requests of the conversation: the one before (its system
    prompt aside, which Hermes may rebuild) is no longer a prefix of the one after."""
    before, after = chunks(a)[2:], chunks(b)[2:]
    return after[: len(before)] != before


def key_line_figures(run: ArmRun, requests: list[dict[str, Any]]) -> dict[str, Any]:
    """From the request in which a key error line was first sent on: is it in each request's text,
    else (timmy) does a recall query on the engine's raw log find it?"""
    texts = [request_text(b) for b in requests]
    missing = unreachable = never_sent = 0
    for key in run.key_lines:
        first = next((k for k, text in enumerate(texts) if key.line in text), None)
        if first is None:
            never_sent += 1
            continue
        absent = sum(key.line not in text for text in texts[first:])
        missing += absent
        if absent and not (run.recallable and run.recallable(key.line)):
            unreachable += absent
    return {
        "key_lines": len(run.key_lines),
        "key_lines_never_sent": never_sent,
        "key_line_misses_in_request": missing,
        "key_line_misses_not_one_recall_away": unreachable,
    }


# ------------------------------------------------------------------ one arm, one script


@dataclass(frozen=True)
class Arm:
    """`compressor`: Hermes' own; `timmy`: the engine (`trigger`/`target`/`tail`: its trigger_threshold,
    target_after and max_tail_ratio, else the packaged defaults); `never`: compression disabled, same
    window."""

    engine: str
    trigger: float | None = None
    target: float | None = None
    tail: float | None = None

    @property
    def name(self) -> str:
        if self.engine != "timmy" or self.trigger is None:
            return self.engine
        values = [self.trigger, self.target, self.tail]
        while values[-1] is None:
            values.pop()
        return "timmy " + "/".join("default" if v is None else f"{v:.2f}" for v in values)

    def config(self) -> dict[str, Any]:
        """The arm's TIMMY_COMPACTOR_CONFIG file, as YAML sections."""
        compaction = {"target_after": self.target, "max_tail_ratio": self.tail}
        sections: dict[str, Any] = {"hermes": {"trigger_threshold": self.trigger}}
        if any(v is not None for v in compaction.values()):
            sections["compaction"] = {k: v for k, v in compaction.items() if v is not None}
        return sections


@dataclass
class Outcome:
    run: ArmRun
    result: dict[str, Any]  # what the driver printed (the engine's status, its compress() records)


def run_arm(
    arm: Arm,
    tmp: Path,
    *,
    turns: int = 0,
    long_calls: int = 0,
    summary_chars: int = 4800,
    time_scale: float = 0.0,
    prefill_tps: float = 0.0,
    decode_tps: float = 0.0,
) -> Outcome:
    """One Hermes process running the conversation (`turns`) or the long single turn (`long_calls`)
    with the CLI's toolsets, against a fresh scripted server."""
    script = Script(long_calls=long_calls)
    users = long_turn(long_calls) if long_calls else conversation_turns(turns)
    (tmp / "work").mkdir(parents=True)
    config = tmp / "timmy.yaml"  # always one: a config file of the user's cannot leak into the bench
    config.write_text(yaml.safe_dump(arm.config()))
    speeds = {"prefill_tps": prefill_tps, "decode_tps": decode_tps, "time_scale": time_scale}
    with FakeLLM(script, summary_chars=summary_chars, **speeds) as llm:
        home = hermes_home(tmp, llm.base_url, timmy=arm.engine == "timmy", compression=arm.engine != "never")
        result = run_hermes(
            home,
            tmp / "work",
            llm,
            f"bench_{arm.engine}",
            users,
            toolsets="cli",
            max_iterations=max(90, long_calls + 10),
            env={"TIMMY_COMPACTOR_CONFIG": str(config)},
        )
        requests, replies = list(llm.requests), dict(llm.replies)
    status = result["status"]
    trigger = int(status.get("threshold_tokens") or 0) if arm.engine != "never" else WINDOW
    recallable = None
    if arm.engine == "timmy":
        recallable = recall_finder(tmp / "timmy-state", result["session_id"])
    run = ArmRun(requests, replies, users, list(script.key_lines), trigger, recallable)
    return Outcome(run, result)


def recall_finder(state_dir: Path, session_id: str) -> Callable[[str], bool]:
    """Whether a `timmy_recall` query for a line finds it in the engine's raw log (on disk, as a
    resumed Hermes process would read it)."""
    from timmy_compactor.compactor import recall_source
    from timmy_compactor.config import Config, HueySection
    from timmy_compactor.core.recall import search

    config = Config(huey=HueySection(state_dir=str(state_dir)))
    messages = recall_source(session_id, config, engine=True).messages

    def found(line: str) -> bool:
        escaped = json.dumps(line, ensure_ascii=False)[1:-1]
        items = search(messages, line).items
        return any(line in item["line"] or escaped in item["line"] for item in items)

    return found
