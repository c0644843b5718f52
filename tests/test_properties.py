"""Invariants of compact() over generated Hermes sessions, checked against the generator's record.

Nothing here asks the engine what a path or an error line is: the generator recorded every fact
it placed, and the checks search the whole view (every string, JSON-encoded tool results decoded)
for it. Example counts follow the Hypothesis profile: `HYPOTHESIS_PROFILE=ci` (test.sh) runs
more than 1,000 generated sessions in total, the default `dev` profile a tenth of that.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.strategies import Generated, agent_run, sessions, settings_strategy
from timmy_compactor.compare.promises import condensed_ranges
from timmy_compactor.core.fold.index import INDEX_HEADER
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.redact import redact_text
from timmy_compactor.core.tokens import request_tokens
from timmy_compactor.core.types import Result, Settings, restore

CI = os.environ.get("HYPOTHESIS_PROFILE", "dev") == "ci"
REPAIR_TOKENS = 20


def examples(n: int) -> Any:
    """`n` examples under the ci profile, a tenth (at least 20) otherwise."""
    return settings(
        max_examples=n if CI else max(20, n // 10),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def strings(value: Any) -> Iterator[str]:
    """Every string in `value`; strings holding JSON are decoded and searched too."""
    if isinstance(value, str):
        yield value
        stripped = value.lstrip()
        if stripped[:1] in ("{", "["):
            try:
                decoded = json.loads(value)
            except ValueError:
                return
            yield from strings(decoded)
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def haystack(messages: list[dict[str, Any]]) -> str:
    return "\n".join(strings(messages))


def one_recall_away(view: list[dict[str, Any]], raw: list[dict[str, Any]]) -> str:
    """The raw text of the ranges the index names only by a condensed line (spec §2a: recall returns it)."""
    covered = condensed_ranges(haystack(view))
    return haystack([m for i, m in enumerate(raw) if i in covered])


def orphans(messages: list[dict[str, Any]]) -> list[int]:
    """Indices of tool results without their call and of calls without their result."""
    bad: list[int] = []
    open_ids: set[Any] = set()
    opener = -1
    for k, m in enumerate(messages):
        if m.get("role") == "tool":
            if m.get("tool_call_id") not in open_ids:
                bad.append(k)
            open_ids.discard(m.get("tool_call_id"))
            continue
        if open_ids:
            bad.append(opener)
        open_ids = {c["id"] for c in m.get("tool_calls") or []} if m.get("role") == "assistant" else set()
        opener = k
    if open_ids:
        bad.append(opener)
    return bad


def run(gen: Generated, config: Settings) -> Result:
    return compact(gen.messages, config, system_prompt=gen.system_prompt, force=True)


def check_promises(gen: Generated, raw: list[dict[str, Any]], config: Settings, result: Result) -> None:
    report = result.report
    view = result.messages
    assert report.triggered
    assert report.verified, report.failure
    assert result.compacted

    # the input is not mutated
    assert dumps(gen.messages) == dumps(raw)

    # user messages byte-identical, in order; the last resort (spec §2a) may fold cold ones, never silently
    folded = {
        i
        for message, sources in zip(view, result.sources, strict=True)
        if str(message.get("content")).startswith((INDEX_HEADER, "[folded #"))
        for i in sources
    }
    folded_users = [i for i in folded if raw[i]["role"] == "user"]
    assert len(folded_users) == report.rules.get("user_messages_folded", 0) or config.strategy == "ledger"
    kept_users = [dumps(m) for i, m in enumerate(raw) if m["role"] == "user" and i not in folded]
    assert [dumps(m) for m in view if m["role"] == "user"] == kept_users

    # the head untouched (a leading system prompt may have become its marker)
    for k in range(report.head_end):
        assert raw[k]["role"] == "system" or dumps(view[k]) == dumps(raw[k])

    # the tail byte-identical
    tail = raw[report.tail_start :]
    assert [dumps(m) for m in view[len(view) - len(tail) :]] == [dumps(m) for m in tail]
    compacted = view[: len(view) - len(tail)]

    # no orphan tool call/result, except those the raw tail itself holds (the tail is never touched)
    raw_tail_orphans = [k - report.tail_start + len(compacted) for k in orphans(raw) if k >= report.tail_start]
    assert orphans(view) == raw_tail_orphans
    users = sum(1 for m in raw if m["role"] == "user")
    drops = 0 < config.drop_system_after_turn < users
    for k, (message, sources) in enumerate(zip(compacted, result.sources, strict=False)):
        if k and message["role"] == "system":  # only a raw one the disabled rule 3 left alone
            relieved = "tail_relief" in report.rules  # what was tail keeps its raw system messages
            assert (not drops or relieved) and len(sources) == 1 and raw[sources[0]] == message, "a late system message"

    # every promised fact is somewhere in the view; the index holds them redacted (spec §2a), and of a
    # folded tool output only its first error line
    text = haystack(view) + "\n" + one_recall_away(view, raw)
    by_id = {m.get("tool_call_id"): i for i, m in enumerate(raw) if m["role"] == "tool"}
    # a path or URL said only in the prose of folded messages is not promised (spec §2a: the index holds
    # the files and URLs of the run's tool calls, nothing from prose); one said in user/assistant text
    # that was not folded, or named by a tool call, is
    said = ("user", "assistant")
    unfolded = haystack([m.get("content") for i, m in enumerate(raw) if i not in folded and m["role"] in said])
    called = "\n".join(
        json.dumps(json.loads(c["function"]["arguments"]), ensure_ascii=False)
        for m in raw
        for c in m.get("tool_calls") or []
    )
    for item in gen.refs:
        if item in unfolded or item in called:
            assert item in text or redact_text(item) in text, f"path/URL lost: {item}"
    for name in gen.tool_names:
        assert name in text, f"tool name lost: {name}"
    folded_later_lines = {
        line for cid, lines in gen.errors_by_call.items() if by_id.get(cid) in folded for line in lines[1:]
    }
    for line in (gen.first_errors | gen.error_lines) - folded_later_lines:
        assert line in text, f"error line lost: {line}"
    for file in gen.persisted:
        assert file in text, f"persisted output file lost: {file}"

    # failed calls are never collapsed: their result is still a tool message, unless it was folded
    view_result_ids = {m.get("tool_call_id") for m in view if m["role"] == "tool"}
    assert {cid for cid in gen.failed_ids if by_id.get(cid) not in folded} <= view_result_ids

    middle = range(report.head_end, report.tail_start)
    if config.keep_tool_summary and "tail_relief" not in report.rules:  # succeeded pairs of the middle: one line each
        collapsed = {i for i in gen.ok_ids if i in by_id and by_id[i] in middle and by_id[i] not in folded}
        assert not (collapsed & view_result_ids)
        assert text.count("[tool: ") >= len(collapsed)

    for message, sources in zip(view, result.sources, strict=True):
        if not all(i in middle for i in sources) or message["role"] == "user" or "tail_relief" in report.rules:
            continue  # (tail relief only truncates what was tail: its reasoning and media stay)
        if config.collapse_consecutive_assistant and message["role"] == "assistant":
            assert not {"reasoning", "reasoning_content"} & message.keys()
        content = message.get("content")
        if isinstance(content, list):  # media in the middle became markers
            assert all(p.get("type") == "text" for p in content if isinstance(p, dict))

    # restorable, and never larger -- except that a note standing for a broken raw message (a result
    # without its call, a system message between turns) may cost a few tokens more than the message
    assert restore(result.sources, raw) == raw
    assert report.tokens_after <= report.tokens_before + REPAIR_TOKENS * gen.repairs


@examples(800)
@given(gen=sessions(), config=settings_strategy())
def test_promises_hold_on_generated_sessions(gen: Generated, config: Settings) -> None:
    raw = copy.deepcopy(gen.messages)
    result = run(gen, config)
    check_promises(gen, raw, config, result)
    again = compact(copy.deepcopy(raw), config, system_prompt=gen.system_prompt, force=True)
    assert dumps(again.messages) == dumps(result.messages), "not deterministic"
    assert again.sources == result.sources and again.report == result.report


@examples(150)
@given(gen=agent_run(max_steps=60), window=st.sampled_from([8_000, 32_000, 65_536]), min_steps=st.integers(1, 5))
def test_single_agent_turn_is_compacted_down_to_a_tail_of_steps(gen: Generated, window: int, min_steps: int) -> None:
    config = Settings(context_window=window, min_tail_steps=min_steps)
    raw = copy.deepcopy(gen.messages)
    result = run(gen, config)
    check_promises(gen, raw, config, result)
    report = result.report
    tail_steps = sum(1 for m in raw[report.tail_start :] if m["role"] != "tool")
    assert tail_steps >= min_steps or "tail_relief" in report.rules  # relief keeps the last step whole
    if report.tokens_before > window:  # far over the window: the one turn did not swallow the session
        assert report.tail_start > 1
        assert report.tokens_after < report.tokens_before


@examples(150)
@given(gen=sessions(max_turns=3, max_steps=4, anomalies=False))
def test_below_the_threshold_nothing_changes(gen: Generated) -> None:
    result = compact(gen.messages, Settings(context_window=10_000_000), system_prompt=gen.system_prompt)
    assert not result.report.triggered and result.report.verified and not result.compacted
    assert result.messages == gen.messages
    assert result.report.tokens_after == result.report.tokens_before


json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
odd_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system"])},
    optional={
        "content": json_value,
        "tool_calls": json_value | st.lists(st.fixed_dictionaries({"id": json_value, "function": json_value})),
        "tool_call_id": json_value,
    },
)


@examples(100)
@given(
    messages=st.lists(
        odd_message | st.dictionaries(st.text(max_size=6), json_value, max_size=3) | json_value, max_size=12
    )
)
def test_any_json_messages_never_raise(messages: list[Any]) -> None:
    """Odd but JSON-valid input: a correct view or an unchanged result naming why, never an exception."""
    raw = copy.deepcopy(messages)
    result = compact(messages, Settings(context_window=1_000), force=True)
    assert messages == raw
    if result.compacted:
        assert restore(result.sources, raw) == raw
    else:
        assert result.messages == raw and result.report.failure


LOSSY_TIERS = ("tail_relief", "user_messages_folded", "last_step_truncated")


def promised_bound(messages: list[dict[str, Any]], system_prompt: str | None, config: Settings) -> int:
    """An upper bound of a request that keeps every promise, computed without the engine: the system
    prompt, the first messages, every user message with a fold line after it, a full index, and the
    last min_tail_steps steps and tool-calling steps whole."""
    starts = [k for k, m in enumerate(messages) if m["role"] != "tool"]
    calling = [k for k in starts if messages[k]["role"] == "assistant" and messages[k].get("tool_calls")]
    wanted = max(config.min_tail_steps, 1)
    tail_from = min([starts[-min(wanted, len(starts))], *calling[-wanted:]])
    users = [m for m in messages[:tail_from] if m["role"] == "user"]
    kept = messages[:3] + users + messages[tail_from:]
    fold_lines = 80 * (len(users) + 1)
    return request_tokens(kept, system_prompt) + fold_lines + config.index_max_chars // 4 + 100


def big_step(serial: int, chars: int) -> list[dict[str, Any]]:
    call_id = f"big{serial}"
    body = "\n".join(f"{serial}:{k} " + "x" * 60 for k in range(chars // 66))
    call = {"id": call_id, "type": "function", "function": {"name": "terminal", "arguments": '{"command": "cat"}'}}
    return [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": json.dumps({"output": body, "exit_code": 0})},
    ]


@examples(200)
@given(
    gen=sessions(max_turns=6, max_steps=10),
    sizes=st.lists(st.integers(500, 40_000), min_size=1, max_size=4),
    user_between=st.booleans(),
    fixed=st.sampled_from([0, 4_000, 10_500]),
    window=st.sampled_from([32_000, 65_536]),
    trigger=st.sampled_from([0.5, 0.6, 0.85]),
)
def test_no_lossy_tier_fires_when_every_promise_fits_under_the_trigger(  # noqa: PLR0917 -- drawn by hypothesis
    gen: Generated, sizes: list[int], user_between: bool, fixed: int, window: int, trigger: float
) -> None:
    """Promises before depth (issue 29): target_after is an aim; the last tool-calling steps are cut only
    when keeping them would leave the request at or above the trigger, user messages folded only when it
    would stay there (at it, or within a fold quantum under it: the next steps would trigger again)."""
    config = Settings(context_window=window, trigger_threshold=trigger, target_after=min(0.4, trigger - 0.1))
    messages = list(gen.messages)
    for serial, size in enumerate(sizes):
        if user_between and serial == len(sizes) - 1:
            messages.append({"role": "user", "content": "and one more thing"})
        messages += big_step(serial, size)
    result = compact(messages, config, system_prompt=gen.system_prompt, force=True, fixed_tokens=fixed)
    assert result.report.verified, result.report.failure
    bound = promised_bound(messages, gen.system_prompt, config) + fixed
    fired = {tier: n for tier, n in result.report.rules.items() if tier in LOSSY_TIERS}
    if bound < config.trigger_tokens - config.quantum_tokens:
        assert not fired, (fired, result.report.tokens_after, config.trigger_tokens)
    elif bound < config.trigger_tokens:
        assert set(fired) <= {"user_messages_folded"}, (fired, result.report.tokens_after, config.trigger_tokens)
    else:
        assert result.report.tokens_after <= window
