"""`timmy_recall` inside Hermes (issue 22, item 3): every answer is one Hermes 0.19 hands the model
unchanged (checked with Hermes' own budget code), whatever the window, the session and the arguments;
`ref: 3` works like `"#3"`; a `max_chars` not taken as given is named in the answer."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import assistant, call, tool, user
from timmy_compactor.config import Config, HueySection

pytest.importorskip("agent.context_engine", reason="hermes-agent is not installed (pip install -e '.[hermes]')")
pytestmark = pytest.mark.hermes

from tools.budget_config import budget_for_context_window  # noqa: E402
from tools.tool_result_storage import maybe_persist_tool_result  # noqa: E402

from timmy_compactor.core.recall import RECALL_TOOL  # noqa: E402
from timmy_compactor.hermes.engine import TimmyContextEngine  # noqa: E402
from timmy_compactor.host.budget import hermes_passthrough_chars  # noqa: E402

WINDOWS = (32_768, 65_536, 131_072, 200_000)
_STATE = str(Path.home() / "timmy-recall-hermes")  # the throwaway HOME (conftest.py) goes at the end


def engine_for(window: int) -> TimmyContextEngine:
    engine = TimmyContextEngine(Config(huey=dataclasses.replace(HueySection(), state_dir=_STATE)))
    engine.update_model("test-model", window)
    return engine


def recall(window: int, raw: list[dict[str, Any]], **args: Any) -> str:
    return engine_for(window).handle_tool_call(RECALL_TOOL, args, messages=raw)


def as_hermes_passes_it(window: int, answer: str) -> str:
    """What Hermes 0.19 puts in the model's context for this tool result (its layer-2 budget)."""
    config = budget_for_context_window(window)
    return str(
        maybe_persist_tool_result(content=answer, tool_name=RECALL_TOOL, tool_use_id="t1", env=None, config=config)
    )


@given(st.integers(min_value=-10, max_value=3_000_000))
def test_the_pass_through_limit_is_hermes_own(window: int) -> None:
    budget = budget_for_context_window(window)
    assert hermes_passthrough_chars(window) == budget.default_result_size == budget.resolve_threshold(RECALL_TOOL)


@pytest.mark.parametrize("window", WINDOWS)
def test_a_larger_answer_reaches_the_model_as_a_preview_and_ours_never_do(window: int) -> None:
    """The issue's case: a 50,540-character answer reached the model as 1,589 characters."""
    limit = hermes_passthrough_chars(window)
    assert len(as_hermes_passes_it(window, "x" * (limit + 1))) < 2_000
    raw = [user("go")] + [tool(f"c{i}", f"out {i}\n" + "é\\n" * 40_000) for i in range(6)]
    answer = recall(window, raw, ref="#1-#6", max_chars=10**7)
    assert 0.95 * limit <= len(answer) <= limit  # all the room there is, and not one character more
    assert as_hermes_passes_it(window, answer) == answer
    notes = json.loads(answer)["notes"]
    assert f"max_chars 10,000,000 is above {limit:,}" in notes[0] and 'ref "#1" with offset' in notes[-1]


_PIECE = st.text(alphabet=st.sampled_from('ab é€\\"\n{}:,0123456789.ü\t'), min_size=1, max_size=30)
_CONTENT = st.builds(
    lambda piece, n, extra: piece * n + extra,
    _PIECE,
    st.one_of(st.integers(0, 50), st.integers(1_000, 8_000)),  # short messages and long ones
    st.sampled_from(["", " 10.0.0.7", " token=ghp_" + "Q7r2" * 9, " -----BEGIN RSA PRIVATE KEY-----\nMIIE"]),
)


@st.composite
def sessions(draw: st.DrawFn) -> list[dict[str, Any]]:
    raw: list[dict[str, Any]] = [user(draw(_CONTENT))]
    for k in range(draw(st.integers(0, 6))):
        raw.append(assistant(draw(_CONTENT), call(f"c{k}", "write_file", path="/srv/a.py", content=draw(_CONTENT))))
        raw.append({**tool(f"c{k}", draw(_CONTENT)), "timestamp": 1_700_000_000.0 + k})
    return raw


def recall_args(count: int) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments a model may send for a session of `count` messages: mostly refs that exist, some
    that do not, queries, every kind of max_chars, offsets (mostly none)."""
    first = st.integers(0, count - 1)
    ref = st.one_of(
        first,
        st.builds(lambda a, b: f"#{a}-#{min(count - 1, a + b)}", first, st.integers(0, 12)),
        st.sampled_from([-1, count, f"#{count + 3}", "#3-#1", "twelve"]),
    )
    return st.fixed_dictionaries(
        {"ref": ref} if count else {},
        optional={
            "query": st.sampled_from(["a", "é", "10.0.0.7", "ghp", "\\", '"', "zzz", "", "€\n"]),
            "offset": st.one_of(st.integers(0, 2_000), st.integers(0, 80_000), st.text(max_size=3)),
        },
    )


@settings(max_examples=80)
@given(window=st.sampled_from(WINDOWS), raw=sessions(), data=st.data())
def test_every_answer_fits_what_hermes_passes_through(window: int, raw: list[dict[str, Any]], data: Any) -> None:
    args = data.draw(recall_args(len(raw)))
    limit = hermes_passthrough_chars(window)
    near = st.sampled_from([limit - 1, limit, limit + 1, 10**6, 50_000, 20_000])
    args["max_chars"] = data.draw(
        st.one_of(st.none(), near, st.integers(-100, 300_000), st.floats(allow_nan=True), st.text(max_size=5))
    )
    if data.draw(st.booleans()):  # a search instead of a ref
        args.pop("ref", None)
        args.setdefault("query", "a")
    answer = recall(window, raw, **args)
    assert len(answer) <= hermes_passthrough_chars(window)
    assert as_hermes_passes_it(window, answer) == answer
    decoded = json.loads(answer)
    assert "error" in decoded or decoded["items"] or decoded["total"] == 0 or decoded.get("notes")
    assert "[REDACTED_IP]" not in answer and "Q7r2Q7r2" not in answer and "timestamp" not in answer


def test_ref_as_a_number_works_like_its_ref() -> None:
    raw = [user("go"), assistant("", call("c1", "terminal", command="ls")), tool("c1", "a\nb"), user("and?")]
    assert recall(65_536, raw, ref=2) == recall(65_536, raw, ref="#2")
    assert json.loads(recall(65_536, raw, ref=2))["items"][0]["message"]["content"] == "a\nb"
    assert "no message #9" in json.loads(recall(65_536, raw, ref=9))["error"]
    assert "error" in json.loads(recall(65_536, raw, ref=True))  # a bool is no message number


@pytest.mark.parametrize(
    ("given_", "named"),
    [
        (100_000, "max_chars 100,000 is above 39,321, the largest tool result Hermes passes on unchanged"),
        (50_001, "max_chars 50,001 is above 39,321"),
        (12, "max_chars 12 is below the least, 500: used 500"),
        (-5, "max_chars -5 is below the least"),
        ("lots", "max_chars 'lots' is not a whole number: used the default, 6,000"),
        (7.5, "max_chars '7.5' is not a whole number"),
        (-(10**300), "max_chars -1000000000000000000… (301 digits) is below the least"),
        (10**300, "max_chars 10000000000000000000… (301 digits) is above 39,321"),
    ],
)
def test_a_max_chars_out_of_range_is_named_in_the_answer(given_: Any, named: str) -> None:
    raw = [user("go"), tool("c1", "x" * 60_000)]
    answer = json.loads(recall(65_536, raw, ref="#1", max_chars=given_))
    assert any(note.startswith(named) for note in answer["notes"]), answer["notes"]


@pytest.mark.parametrize("given_", [None, 500, 20_000, 39_321, "20000", 20_000.0])
def test_a_max_chars_in_range_is_taken_as_given_without_a_note(given_: Any) -> None:
    raw = [user("go"), tool("c1", "x" * 60_000)]
    args = {} if given_ is None else {"max_chars": given_}
    answer = recall(65_536, raw, ref="#1", **args)
    bound = 6_000 if given_ is None else int(given_)
    assert not any("max_chars" in note for note in json.loads(answer).get("notes", []))
    assert 0.9 * bound <= len(answer) <= bound


def test_a_search_after_recalls_finds_the_history_not_the_recalls() -> None:
    engine = engine_for(65_536)
    raw = [user("why did the quota probe fail?"), tool("c0", "quota probe: 429")]
    first = engine.handle_tool_call(RECALL_TOOL, {"query": "quota probe"}, messages=raw)
    raw += [
        assistant("", {**call("r1", RECALL_TOOL, query="quota probe"), "call_id": "r1", "response_item_id": "fc_1"}),
        {**tool("r1", first, name=RECALL_TOOL), "timestamp": 1_700_000_000.0},
    ]
    second = json.loads(engine.handle_tool_call(RECALL_TOOL, {"query": "quota probe"}, messages=raw))
    assert [item["ref"] for item in second["items"]] == ["#0", "#1"] == [i["ref"] for i in json.loads(first)["items"]]
    whole = engine.handle_tool_call(RECALL_TOOL, {"ref": "#2-#3"}, messages=raw)
    assert not re.search(r'"(timestamp|call_id|response_item_id|_db_persisted|finish_reason)"', whole)


def test_arguments_recall_cannot_use_are_short_errors() -> None:
    raw = [user("go"), tool("c1", "short")]
    for args in ({"ref": "#" + "9" * 5_000}, {"ref": "#1", "offset": "x"}, {"ref": "#1", "offset": 99}, {}):
        answer = json.loads(recall(65_536, raw, **args))
        assert set(answer) == {"error"} and len(answer["error"]) < 200, args


def test_a_recall_error_is_judged_a_failed_call_when_compacted() -> None:
    """The error answers are `{"error": …}`, which the compaction's outcome reader counts as a failure
    (so a failed recall is kept, not folded as `→ ok`)."""
    from timmy_compactor.core.facts import tool_outcome

    raw = [user("go"), tool("c1", "short")]
    for args in ({"ref": "#9"}, {"ref": "#1", "offset": 99}, {"query": " "}, {}):
        answer = recall(65_536, raw, **args)
        assert "error" in json.loads(answer) and tool_outcome(answer).failed, args
    assert not tool_outcome(recall(65_536, raw, ref="#1")).failed


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("others", [0, 1, 3])
@pytest.mark.parametrize("recalls", [1, 2, 3])
def test_several_calls_in_one_turn_keep_every_recall_answer_whole(window: int, others: int, recalls: int) -> None:
    """Hermes bounds a turn's tool results together (30 % of the window) and replaces the largest
    first; with other results as large as Hermes lets any be, every recall answer still arrives whole."""
    from tools.tool_result_storage import enforce_turn_budget

    limit = hermes_passthrough_chars(window)
    raw = [user("go")] + [tool(f"c{i}", f"out {i}\n" + "x\\n" * 30_000) for i in range(6)]
    calls = [call(f"r{k}", RECALL_TOOL, ref="#1-#6") for k in range(recalls)]
    calls += [call(f"t{k}", "terminal", command="cat big.log") for k in range(others)]
    turn = [*raw, assistant("", *calls)]
    answers = [recall_in_turn(window, raw, turn) for _ in range(recalls)]
    results = [tool(f"r{k}", answer, name=RECALL_TOOL) for k, answer in enumerate(answers)]
    results += [tool(f"t{k}", "y" * limit) for k in range(others)]  # the most layer 2 lets through
    enforce_turn_budget(results, env=None, config=budget_for_context_window(window))
    assert [m["content"] for m in results[:recalls]] == answers
    assert all(len(a) <= limit for a in answers)
    if recalls + others == 1:
        assert len(answers[0]) > 0.9 * limit  # alone in its turn, an answer takes all the room there is
    else:
        assert f"and {recalls + others} tool calls in this turn" in json.loads(answers[0])["notes"][0]


def recall_in_turn(window: int, raw: list[dict[str, Any]], turn: list[dict[str, Any]]) -> str:
    engine = engine_for(window)
    engine.raw.absorb(raw)
    return engine.handle_tool_call(RECALL_TOOL, {"ref": "#1-#6", "max_chars": 10**6}, messages=turn)


def test_a_max_chars_of_digits_int_cannot_read_is_not_a_number() -> None:
    """`"²".isdigit()` is True but `int("²")` raises: such a max_chars is not a whole number (a hypothesis find)."""
    from timmy_compactor.hermes.recall_tool import recall_bound

    bound, notes = recall_bound("²", 65_536)
    assert bound == recall_bound(None, 65_536)[0] and "not a whole number" in notes[0]
    assert recall_bound("٣٠٠٠", 65_536)[0] == 3_000  # Arabic-Indic digits are a number int() reads
