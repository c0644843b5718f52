"""Which messages are recall answers (`facts.recall_answers`), read in one pass: the same as walking back
from each tool result to the message its step began with, also when the log grows between calls."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.test_properties import examples
from timmy_compactor.core.facts import RECALL_TOOL, RawFacts, recall_answers, tool_calls
from timmy_compactor.core.readings import Readings


def walked_back(messages: list[dict[str, Any]], index: int) -> bool:
    """The definition: a tool result named so, or answering a recall call of its step's first message."""
    message = messages[index]
    if message.get("role") != "tool":
        return False
    if RECALL_TOOL in (message.get("name"), message.get("tool_name")):
        return True
    k = index - 1
    while k >= 0 and messages[k].get("role") == "tool":
        k -= 1
    call_id = message.get("tool_call_id")
    return k >= 0 and any(
        c.get("id") == call_id and c.get("function", {}).get("name") == RECALL_TOOL for c in tool_calls(messages[k])
    )


_IDS = st.sampled_from(["a", "b", None, 1, ["x"]])  # ids of any JSON value: unhashable too
_NAMES = st.sampled_from([RECALL_TOOL, "terminal", None])
_CALL = st.builds(lambda i, n: {"id": i, "type": "function", "function": {"name": n, "arguments": "{}"}}, _IDS, _NAMES)
_MESSAGE = st.one_of(
    st.builds(lambda calls: {"role": "assistant", "content": "", "tool_calls": calls}, st.lists(_CALL, max_size=3)),
    st.builds(lambda i, n: {"role": "tool", "tool_call_id": i, "name": n, "content": "x"}, _IDS, _NAMES),
    st.just({"role": "user", "content": "go"}),
)


@examples(500)
@given(st.lists(_MESSAGE, max_size=25), st.integers(0, 25))
def test_one_pass_finds_what_walking_back_finds(messages: list[dict[str, Any]], grown_at: int) -> None:
    expected = {i for i in range(len(messages)) if walked_back(messages, i)}
    assert recall_answers(messages) == expected
    readings = Readings()  # the engine's way: a log read, then read on when it grew
    early = RawFacts(messages[:grown_at], readings)
    assert {i for i in range(len(early.messages)) if early.answers_recall(i)} == {i for i in expected if i < grown_at}
    late = RawFacts(messages, readings)
    assert {i for i in range(len(messages)) if late.answers_recall(i)} == expected
