"""Token accounting: Hermes' own rough estimate (chars/4 over str(message), images 1,500 each)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.strategies import Generated, sessions
from tests.support import SAMPLE_NAMES, assistant, call, sample_path, user
from timmy_compactor.core.tokens import (
    IMAGE_TOKENS,
    PRINTED_LEVELS,
    message_chars,
    message_sizes,
    message_tokens,
    messages_tokens,
    pressure_level,
    request_tokens,
    rough_text_tokens,
    tools_chars,
)

CI = os.environ.get("HYPOTHESIS_PROFILE", "dev") == "ci"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "terminal",
            "description": "Run a shell command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]


def test_rough_estimate_rounds_up_and_counts_nothing_as_zero() -> None:
    assert [rough_text_tokens("x" * n) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]


def test_a_message_costs_its_python_repr_over_four() -> None:
    message = assistant("héllo /srv/x.py", call("c1", "terminal", command="ls"), reasoning="r")
    assert message_tokens(message) == (len(str(message)) + 3) // 4
    assert messages_tokens([message, message]) == (2 * len(str(message)) + 3) // 4


def test_images_cost_a_flat_1500_and_their_payload_nothing() -> None:
    small = user([{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "data:x"}}])
    huge = user([{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "data:" + "A" * 10**6}}])
    assert message_tokens(small) == message_tokens(huge)
    stripped = {
        "role": "user",
        "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image": "[stripped]"}],
    }
    assert message_tokens(huge) == (len(str(stripped)) + 3) // 4 + IMAGE_TOKENS
    two = user([{"type": "input_image"}, {"type": "image"}])
    assert message_tokens(two) >= 2 * IMAGE_TOKENS


def test_a_request_is_system_prompt_plus_messages_plus_tool_schemas() -> None:
    messages = [user("hi"), assistant("hello")]
    fn = TOOLS[0]["function"]
    schema_chars = (
        len("terminal") + len("Run a shell command.") + len(json.dumps(fn["parameters"], separators=(",", ":")))
    )
    assert tools_chars(TOOLS) == schema_chars
    expected = rough_text_tokens("S" * 101) + messages_tokens(messages) + (schema_chars + 3) // 4
    assert request_tokens(messages, "S" * 101, TOOLS) == expected
    assert request_tokens([], None, None) == 0


def test_an_exact_counter_replaces_the_estimate() -> None:
    def words(text: str) -> int:
        return len(text.split())

    messages = [user("one two three"), assistant("four")]
    assert message_sizes(messages, words) == [words(str(m)) for m in messages]
    assert request_tokens(messages, "a b", None, words) == 2 + sum(words(str(m)) for m in messages)


@pytest.mark.parametrize(
    ("usage", "level"), [(0.0, 0), (0.5999, 0), (0.60, 60), (0.74, 60), (0.75, 75), (0.85, 85), (0.96, 95), (1.4, 95)]
)
def test_pressure_levels(usage: float, level: int) -> None:
    assert pressure_level(usage) == level


def hermes_estimate() -> object:
    return pytest.importorskip("agent.model_metadata").estimate_request_tokens_rough


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_same_numbers_as_hermes_on_its_own_files(name: str) -> None:
    estimate = hermes_estimate()
    doc = json.loads(sample_path(name).read_text(encoding="utf-8"))
    ours = request_tokens(doc["messages"], doc["system_prompt"], doc["tools"])
    assert ours == estimate(doc["messages"], system_prompt=doc["system_prompt"], tools=doc["tools"])  # type: ignore[operator]


@settings(
    max_examples=100 if CI else 20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(gen=sessions(max_turns=3))
def test_same_numbers_as_hermes_on_generated_sessions(gen: Generated) -> None:
    estimate = hermes_estimate()
    expected = estimate(gen.messages, system_prompt=gen.system_prompt or "", tools=TOOLS)  # type: ignore[operator]
    assert request_tokens(gen.messages, gen.system_prompt, TOOLS) == expected


@given(
    st.lists(
        st.sampled_from(("'", '"', "\\", "\n", "\t", "\r", "\x00", "\x1b", "\x7f", "a", " "))
        | st.text(st.characters(max_codepoint=127), max_size=40),
        min_size=200,
        max_size=400,
    ).map("".join),
    st.sampled_from(("tool", "assistant", "user")),
)
def test_a_long_ascii_content_is_measured_apart_as_str_measures_it(content: str, role: str) -> None:
    """A long ASCII content is measured by its escapes (`unicode_escape`), not printed: the same length."""
    message = {"role": role, "content": content, "tool_call_id": "call_1"}
    assert message_sizes([message]) == [len(str(message))]


_ESCAPED = ("'", '"', "\\", "\n", "\t", "\r", "\x00", "\x1b", "\x7f", "a", " ")
_LONG_ASCII = st.lists(
    st.sampled_from(_ESCAPED) | st.text(st.characters(max_codepoint=127), max_size=60), min_size=40, max_size=120
).map("".join)
_TEXTS = st.text(max_size=12) | _LONG_ASCII | _LONG_ASCII.map(lambda text: text + "é✓\u2028")
_PLAIN = st.none() | st.booleans() | st.integers() | st.floats() | _TEXTS
_PRINTED = st.recursive(
    _PLAIN | st.tuples(_PLAIN),  # a tuple: measured by str itself
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXTS | st.integers(), inner, max_size=3),
    max_leaves=20,
)


def _nested(value: object, levels: int) -> object:
    for _ in range(levels):
        value = [value]
    return value


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    _TEXTS | _PRINTED,
    st.lists(st.dictionaries(st.sampled_from(("id", "function")), _PRINTED, max_size=2), max_size=2),
    st.sampled_from((0, PRINTED_LEVELS - 3, PRINTED_LEVELS + 1)),
)
def test_a_message_is_measured_as_str_prints_it_without_printing_it(
    content: object, calls: object, levels: int
) -> None:
    """`message_chars` measures each part of a message as `str` prints it (long ASCII texts by their
    escapes), and leaves what it does not know (a tuple, a message nested too deep) to `str`: the
    length of `str(message)` either way."""
    message = {"role": "assistant", "content": content, "tool_calls": calls, "extra": _nested([], levels)}
    assert message_chars(message) == len(str(message))
