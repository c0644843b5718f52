"""`redact_shapes` runs the prefixed formats' pattern only where the runs hold what every match of it holds
(`_PREFIXED_HINT`: each format's literal prefix, looked for from its rarest character): the hint finds
something in every match, so the output is the one the pattern alone gives."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.credential_table import KINDS, sample
from timmy_compactor.core import secrets_by_shape as shape


@settings(max_examples=1500)
@given(st.from_regex(shape._PREFIXED, fullmatch=True))
def test_every_match_of_the_prefixed_formats_holds_a_match_of_the_hint(token: str) -> None:
    assert shape._PREFIXED.fullmatch(token)
    assert shape._PREFIXED_HINT.search(token) is not None


def test_every_prefix_word_alone_is_found() -> None:
    for word in shape._PREFIXED_WORDS:
        assert shape._PREFIXED_HINT.search(f"x{word}y") is not None, word


def unhinted(text: str) -> str:
    """`redact_shapes` as it was: every pass where its gate finds something in the runs."""
    runs = shape.candidate_runs(text)
    for gate, pattern, replace in shape._PASSES:
        if runs and gate.search("\n".join(text[a:b] for a, b in runs)):
            text, runs = shape._in_runs(pattern, replace, text, runs)
    return text


piece = st.one_of(
    st.from_regex(shape._PREFIXED, fullmatch=True),
    st.sampled_from(["/work/src/", "tests/test_", ".py", "_", "-", "sk", "gh", "AKIA", "eyJ", " ", "\n", "\\n"]),
    st.builds(lambda kind, seed: sample(kind, random.Random(seed)).text, st.sampled_from(sorted(KINDS)), st.integers()),
    st.text(max_size=10),
)


@settings(max_examples=600)
@given(st.builds("".join, st.lists(piece, max_size=8)))
def test_the_shapes_with_the_hint_are_the_shapes_without(text: str) -> None:
    assert shape.redact_shapes(text) == unhinted(text)
