"""Error templates in the anchor index (issue 30 item 1): one exemplar of every distinct error a folded
tool output printed, deduplicated with a count and first/last refs; a cap per output."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import assistant, call, terminal, tool, user
from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.fold.errors import TEMPLATE_CHARS, Printed, error_entries
from timmy_compactor.core.fold.index import INDEX_HEADER
from timmy_compactor.core.keylines import KeyLine, template
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.types import Settings

WINDOW = 16_000
SERVICES = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi"
)


def index_of(messages: list[dict[str, Any]]) -> str:
    return next((m["content"] for m in messages if str(m.get("content")).startswith(INDEX_HEADER)), "")


def run(outputs: list[str], filler_steps: int = 60, filler_exit: int = 0) -> list[dict[str, Any]]:
    """An agent run whose first steps print `outputs`, then enough quiet steps to fold them (failing ones,
    with `filler_exit`, are kept by the rules: only a fold can meet the budget)."""
    messages = [user("find out why the workers fail")]
    for i, output in enumerate(outputs):
        messages += [
            assistant(f"Step {i}", call(f"o{i}", "terminal", command="cat /var/log/app.log")),
            tool(f"o{i}", terminal(output)),
        ]
    for i in range(filler_steps):
        quiet = "\n".join(f"line {k} of step {i}" for k in range(60))
        messages += [
            assistant(f"Quiet {i}", call(f"q{i}", "terminal", command="ls")),
            tool(f"q{i}", terminal(quiet, filler_exit)),
        ]
    return [*messages, assistant("done")]


def log_dump(services: list[str], repeats: int = 3) -> str:
    lines = ["2024-06-03T07:00:00Z INFO starting"]
    for m in range(repeats):
        lines += [
            f"2024-06-03T07:{m:02d}:{k:02d}Z ERROR worker {m} {name}: upstream timed out"
            for k, name in enumerate(services)
        ]
        lines.append(f"2024-06-03T07:{m:02d}:59Z INFO retrying")
    return "\n".join(lines)


def test_a_log_dump_with_21_distinct_errors_keeps_all_21_in_the_index() -> None:
    services = SERVICES.split()
    assert len(services) == 21
    result = compact(run([log_dump(services)]), Settings(context_window=WINDOW, index_max_ratio=0.5), force=True)
    assert result.report.verified, result.report.failure
    index = index_of(result.messages)
    for name in services:
        assert f"ERROR worker 0 {name}: upstream timed out" in index, name
    assert "more templates" not in index


def test_one_output_that_would_flood_the_chunk_says_how_many_templates_it_leaves_to_recall() -> None:
    dump = "\n".join(f"ERROR: check {a}{b} failed" for a in "abcdefghijklmnopqrst" for b in "abcdefghijklmnopqrst")
    settings = Settings(context_window=WINDOW)
    result = compact(run([dump]), settings, force=True)
    assert result.report.verified, result.report.failure
    index = index_of(result.messages)
    assert len(index) <= settings.index_max_chars
    (more,) = re.findall(r"- error: \+(\d+) more templates — timmy_recall #(\d+)", index)
    listed = index.count("ERROR: check ")
    assert int(more[1]) == 2 and listed + int(more[0]) == 400
    assert "ERROR: check aa failed" in index  # the key line, as printed


def entries(*printed: Printed, seen: set[str] | None = None, cap: int = 10_000) -> list[str]:
    return error_entries(printed, set() if seen is None else seen, cap).lines()


def test_a_template_printed_by_several_outputs_is_listed_once_with_its_count_and_first_and_last_refs() -> None:
    assert entries(
        Printed(4, (), ("ERROR worker 1: timeout after 30s", "ERROR disk full")),
        Printed(8, (), ("ERROR worker 7: timeout after 5s",)),
        Printed(12, (), ("ERROR worker 2: timeout after 9s",)),
    ) == ["- error: ERROR worker 1: timeout after 30s (×3, #4, #12)", "- error: ERROR disk full (#4)"]


def test_key_lines_are_listed_as_printed_and_count_the_templates_of_their_output_once() -> None:
    key = KeyLine("ModuleNotFoundError: No module named 'pytz'", 1)
    printed = Printed(6, (key,), ("ModuleNotFoundError: No module named 'pytz'",))
    assert entries(printed) == ["- error: exit 1: ModuleNotFoundError: No module named 'pytz' (#6)"]
    # a key line is listed even when an earlier chunk listed its template: the verification promises it
    seen = {"\x00" + template("ERROR worker 1: timeout")}
    other = Printed(9, (KeyLine("ERROR worker 2: timeout"),), ("ERROR worker 3: timeout",))
    assert entries(other, seen=seen) == ["- error: ERROR worker 2: timeout (#9)"]
    assert entries(Printed(9, (), ("ERROR worker 3: timeout",)), seen=seen) == []


def test_a_chunk_lists_what_earlier_chunks_did_not() -> None:
    seen: set[str] = set()
    first = error_entries([Printed(2, (KeyLine("fatal: bad object 3f9a2c17be0d"),), ())], seen, 1000).lines()
    again = error_entries(
        [
            Printed(
                30,
                (KeyLine("fatal: bad object 3f9a2c17be0d"),),
                ("fatal: bad object 1c9e6f0",),
            )
        ],
        seen,
        1000,
    )
    assert first == ["- error: fatal: bad object 3f9a2c17be0d (#2)"] and again.lines() == []
    assert again.distinct == 1


def test_an_exemplar_is_cut_and_an_output_beyond_its_cap_names_where_the_rest_is() -> None:
    long = "ERROR: " + "x" * 400
    lines = entries(Printed(3, (), (long, *(f"ERROR: job {c} lost" for c in "abcdef"))), cap=TEMPLATE_CHARS + 20)
    assert lines == [
        f"- error: {long[:TEMPLATE_CHARS]} (#3)",
        "- error: ERROR: job a lost (#3)",
        "- error: +5 more templates — timmy_recall #3",
    ]


TEMPLATES = [
    "ERROR worker {n}: upstream {word} timed out after {n}s",
    "ValueError: invalid literal for int() with base 10: '{word}'",
    "error: pathspec '{word}' did not match any file(s) known to git",
    "FAILED tests/test_{word}.py::test_{word} - AssertionError: assert {n} == {m}",
    "E   KeyError: '{word}'",
    "{word}.c:{n}:{m}: error: '{word}' undeclared",
    "ls: cannot access '/srv/{word}': No such file or directory",
    "npm ERR! code E{n}",
]


@st.composite
def error_outputs(draw: st.DrawFn) -> list[str]:
    word = st.sampled_from(SERVICES.split())
    outputs = []
    for _ in range(draw(st.integers(1, 6))):
        lines = ["starting"]
        for _ in range(draw(st.integers(0, 12))):
            shape = draw(st.sampled_from(TEMPLATES))
            lines.append(shape.format(n=draw(st.integers(0, 999)), m=draw(st.integers(0, 9)), word=draw(word)))
            lines.append(f"progress {draw(st.integers(0, 99))}%")
        outputs.append("\n".join(lines))
    return outputs


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outputs=error_outputs())
def test_every_error_template_of_a_folded_output_is_in_the_index_or_named_as_left_to_recall(outputs: list[str]) -> None:
    messages = run(outputs, filler_steps=40, filler_exit=1)
    result = compact(messages, Settings(context_window=WINDOW, index_max_ratio=0.5), force=True)
    assert result.report.verified, result.report.failure
    assert result.report.rules["fold_steps"] > len(outputs)
    index = index_of(result.messages)
    assert "(condensed)" not in index
    listed = {template(line) for line in index.splitlines()}
    for k, output in enumerate(outputs):
        if f"more templates — timmy_recall #{2 + 2 * k}" in index:
            continue
        for line in output.splitlines()[1::2]:
            wanted = template(line)[: TEMPLATE_CHARS // 2]
            assert any(wanted in entry for entry in listed), line


def test_entries_read_through_the_calls_remembered_redactions_and_templates_are_the_same() -> None:
    """The index renders its error entries with `RawFacts.redacted` and `RawFacts.templated` (condensing
    reads the same lines): each line is redacted and templated once per call, to the same text."""
    printed = (
        Printed(4, (KeyLine("ERROR login failed for token=hunter2hunter2", 1),), ("ERROR worker 1: timeout",)),
        Printed(9, (KeyLine("ERROR login failed for token=hunter2hunter2"),), ("ERROR worker 7: timeout",)),
    )
    facts = RawFacts([])
    assert error_entries(printed, set(), 1000, redacted=facts.redacted, templated=facts.templated).lines() == (
        entries(*printed)
    )
    assert facts.templates == {line: template(line) for line in facts.templates}
    assert set(facts.templates) == {
        "ERROR login failed for token=hunter2hunter2",
        "ERROR worker 1: timeout",
        "ERROR worker 7: timeout",
    }
