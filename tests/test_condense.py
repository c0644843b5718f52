"""Condensing keeps what recurs (issue 30, item 5): a value a condensed range listed that the history holds
again after it is named in view, and the verification accepts "one recall away" only for a covered range."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import random
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import assistant, call, terminal, tool, user
from timmy_compactor.compare.cycles import replay
from timmy_compactor.compare.promises import check, condensed_ranges
from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.fold.condense import PATH, Held, Layout, Value, condensed_header
from timmy_compactor.core.fold.errors import RECALL_HINT
from timmy_compactor.core.fold.index import INDEX_HEADER, INDEX_INTRO, Chunk, Index, _chunks, _laid_out
from timmy_compactor.core.lines import index_label
from timmy_compactor.core.partition import Partition
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.readings import Readings
from timmy_compactor.core.redact import redact_text
from timmy_compactor.core.types import Entry, Message, Settings
from timmy_compactor.core.verify import verify
from timmy_compactor.sessions.rawlog import RawLog

CI = os.environ.get("HYPOTHESIS_PROFILE", "dev") == "ci"
WINDOW = 16_000
SQLPARSE = "ModuleNotFoundError: No module named 'sqlparse'"
# error lines the engine reads, each a template: {n} and {m} are the numbers that vary
TEMPLATES = (
    SQLPARSE,
    "ERROR worker {n}: upstream timed out after {m}s",
    "FAILED tests/test_api.py::test_case_{n} - AssertionError: assert {n} == {m}",
    "KeyError: 'field_{n}'",
    "fatal: unable to access 'https://git.example.com/repo_{n}.git/': timeout",
    "ValueError: bad slot {n} of {m}",
)


def index_of(messages: list[Message]) -> str:
    return next((str(m["content"]) for m in messages if str(m.get("content")).startswith(INDEX_HEADER)), "")


def view_text(messages: list[Message]) -> str:
    return "\n".join(str(m.get("content")) + json.dumps(m.get("tool_calls") or "") for m in messages)


def folded_pair(outputs: list[str]) -> tuple[list[Message], list[Entry], Partition]:
    """A session of one terminal step per output, all folded into the index, and its view."""
    raw: list[Message] = [user("go")]
    for k, output in enumerate(outputs):
        raw += [assistant("", call(f"c{k}", "terminal", command="pytest")), tool(f"c{k}", output)]
    raw.append(user("next"))
    end = len(raw) - 1
    view = [Entry(raw[0], (0,)), Entry({"role": "assistant", "content": "[folded]"}, tuple(range(1, end)))]
    return raw, [*view, Entry(raw[end], (end,))], Partition(1, end)


def verified_with(raw: list[Message], view: list[Entry], part: Partition) -> Callable[[str], list[str]]:
    """The verifier's problems with the two folded steps of `folded_pair`, for an index text whose first
    range (#1–#2) is covered (condensed)."""

    def problems(text: str) -> list[str]:
        index = Index(text, covered=(range(1, 3),))
        return verify(raw, view, part, RawFacts(raw), folded=frozenset(range(1, 5)), index=index)

    return problems


def test_the_verifier_refuses_a_condensed_line_that_drops_a_recurring_key_line() -> None:
    """The first mention of `No module named 'sqlparse'` condensed, its recurrence at #4 is listed by no
    chunk (an earlier one did): accepted as one recall away before, while the index hid that it recurs."""
    problems = verified_with(*folded_pair([terminal(SQLPARSE, 1), terminal(SQLPARSE, 1)]))
    condensed = "### #1–#2 (condensed): 1 step, 1 error line, 0 paths, 0 ids · terminal ×1 — timmy_recall #1–#2"
    live = "### #3–#4: 1 step · terminal ×1"

    assert problems(f"{condensed}\n{live}") == ["the index lost a fact of folded raw #4"]
    assert problems(f'{condensed}\n- recurs: "exit 1: {SQLPARSE}" (×2, #2, #4)\n{live}') == []
    assert problems(f'{condensed}\n{live}\n- recurs: "exit 1: {SQLPARSE}" (#4)') == []


def test_the_verifier_refuses_a_condensed_line_that_drops_a_recurring_template() -> None:
    """`ERROR worker 9: …` is no key line of #4 (its first error is), and its template was listed at #2:
    once #2 condenses, some exemplar of the template must stay named, or the view is refused."""
    first = terminal("ERROR db: connection refused\nERROR worker 7: upstream timed out after 30s")
    again = terminal("ERROR disk: full\nERROR worker 9: upstream timed out after 31s")
    problems = verified_with(*folded_pair([first, again]))
    condensed = "### #1–#2 (condensed): 1 step, 2 error lines, 0 paths, 0 ids · terminal ×1 — timmy_recall #1–#2"
    live = "### #3–#4: 1 step · terminal ×1\n- error: ERROR disk: full (#4)"

    assert problems(f"{condensed}\n{live}") == ["the index lost a fact of folded raw #4"]
    named = f'{condensed}\n- recurs: "ERROR worker 7: upstream timed out after 30s" (×2, #2, #4)\n{live}'
    assert problems(named) == []
    assert problems(f"{live}\n- error: +1 more templates — timmy_recall #4") == []  # its output's cap says so


def sqlparse_run(steps: int) -> list[Message]:
    """A run whose early steps fail on `sqlparse`, which recurs near its end; the rest prints other
    errors once each."""
    messages = [user("fix the migration importer")]
    for i in range(steps):
        error = SQLPARSE if i in (2, 3, steps - 40, steps - 39) else f"ValueError: step {i} rejected row {i * 7}"
        output = f"step {i}\n" + "\n".join(f"line {k} of step {i}" for k in range(40)) + f"\n{error}"
        command = f"python scripts/import_{i}.py --batch {i}"
        messages.append(assistant(f"Step {i}", call(f"c{i}", "terminal", command=command)))
        messages.append(tool(f"c{i}", terminal(output, 1)))
    messages.append(assistant("done"))
    return messages


def test_a_condensed_range_names_the_error_that_recurs_after_it() -> None:
    messages = sqlparse_run(300)
    config = Settings(context_window=WINDOW)
    result = compact(messages, config, force=True)
    assert result.compacted and result.report.verified, result.report.failure
    index = index_of(result.messages)
    assert len(index) <= config.index_max_chars
    covered = condensed_ranges(index)
    assert 6 in covered and len(messages) - 80 not in covered  # the first mention condensed, the recurrence not
    recurs = [line for line in index.splitlines() if line.startswith("- recurs:")]
    assert any(SQLPARSE in line and "#6," in line for line in recurs), recurs  # named with its first mention
    assert "ValueError: step 2 rejected" not in index  # what does not recur stays one recall away
    assert check(messages, result.messages).all_kept


def recurring_run(seed: int, steps: int) -> list[Message]:
    """A long agent run whose outputs print a few error templates again and again (with other numbers,
    or the very same line) and whose commands name a few files again and again."""
    rng = random.Random(seed)
    messages = [user("make the importer pass its tests")]
    for k in range(steps):
        path = f"src/pkg/mod_{rng.randrange(10)}.py"
        errors = [rng.choice(TEMPLATES).format(n=rng.randrange(4), m=rng.randrange(3)) for _ in range(rng.randrange(4))]
        output = "\n".join([*(f"line {j}: collected" for j in range(rng.randrange(5, 80))), *errors])
        messages.append(assistant(f"Step {k}", call(f"c{k}", "terminal", command=f"python -m pytest {path}")))
        messages.append(tool(f"c{k}", terminal(output, rng.choice([0, 1]) if errors else 0)))
    messages.append(assistant("done"))
    return messages


def names(view: str, printed: list[str], index: int) -> bool:
    """Whether `view` names a template: one of its exemplars (as printed or redacted), or its output's cap."""
    cap = f" more templates — timmy_recall #{index}"
    return any(line in view or redact_text(line) in view for line in printed) or f"{cap}\n" in view + "\n"


@settings(
    max_examples=60 if CI else 15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.integers(0, 2**32 - 1), st.integers(60, 160), st.sampled_from([0.03, 0.05, 0.10]))
def test_every_template_and_file_that_recurs_after_a_condensed_range_is_in_view(
    seed: int, steps: int, ratio: float
) -> None:
    messages = recurring_run(seed, steps)
    config = Settings(context_window=WINDOW, index_max_ratio=ratio)
    result = compact(messages, config, force=True)
    assert result.compacted, result.report.failure
    index = index_of(result.messages)
    assert len(index) <= config.index_max_chars
    covered = condensed_ranges(index)
    kept = {sources[0] for m, sources in zip(result.messages, result.sources, strict=True) if m is messages[sources[0]]}
    folded = set(range(len(messages))) - kept
    view = view_text(result.messages)
    exemplars: dict[str, list[str]] = {}
    for line in (line for m in messages if m["role"] == "tool" for line in _output(m).splitlines()):
        for pattern in TEMPLATES:
            if _matches(pattern, line):
                exemplars.setdefault(pattern, []).append(line)
    after = range(min(covered), len(messages)) if covered else range(0)
    for i in (i for i in after if i in folded and i not in covered):
        message = messages[i]
        if message["role"] == "tool":
            for line in _output(message).splitlines():
                pattern = next((p for p in TEMPLATES if _matches(p, line)), None)
                assert pattern is None or names(view, exemplars[pattern], i), (i, line)
        for c in message.get("tool_calls") or []:
            path = json.loads(c["function"]["arguments"])["command"].split()[-1]
            assert path in view, (i, path)


def _output(message: Message) -> str:
    return str(json.loads(message["content"])["output"])


def _matches(pattern: str, line: str) -> bool:
    head = pattern.split("{", 1)[0]
    return line.startswith(head) if "{" in pattern else line == pattern


def test_replayed_a_long_run_keeps_its_recurrences_named_and_its_index_in_budget_and_append_only() -> None:
    """Also: a compaction resumes the index's layout and path spellings where the last one left them
    (chunks are append-only), and writes the view a compaction reading the same raw log anew writes."""
    messages = sqlparse_run(700)
    config = Settings(context_window=WINDOW)
    log, readings = RawLog(), Readings()
    indexes: list[str] = []

    def compress(held: list[Message]) -> list[Message]:
        raw = log.absorb(held)
        result = compact(raw, config, force=True, readings=readings)
        assert result.compacted, result.report.failure
        assert result.messages == compact(raw, config, force=True).messages
        log.answered(result.messages)
        indexes.append(index_of(result.messages))
        return result.messages

    report = replay(messages, compress, window=WINDOW, trigger=config.trigger_threshold)
    assert report.compactions >= 10 and report.stuck == 0
    assert all(len(index) <= config.index_max_chars for index in indexes)
    assert sum("(condensed)" in index for index in indexes) >= 5
    assert any(SQLPARSE in line for line in indexes[-1].splitlines() if line.startswith("- recurs:"))
    for before, after in itertools.pairwise(indexes):
        if before and not after.startswith(before):
            assert after.count("(condensed)") >= 1  # the only rewrite is a condensation


def _chunk(k: int, size: int, keys: list[int], listed: list[bool]) -> Chunk:
    """A chunk for raw messages `10k:10k+10`, `size` characters long, holding the values `keys` (a
    small pool, so they recur), listing those marked in `listed`."""
    values = [Value(PATH, f"src/mod_{key}.py", f"src/mod_{key}.py") for key in dict.fromkeys(keys)]
    held = tuple(Held(value, 1, 10 * k, 10 * k + 9) for value in values)
    shown = frozenset(v.key for v, first in zip(values, listed, strict=False) if first)
    text = f"### #{10 * k}–#{10 * k + 9}: 5 steps\n" + "x" * size
    return Chunk(10 * k, 10 * k + 10, text, 5, (("terminal", 5),), 0, len(values), 0, False, shown, held)


_calls = st.lists(  # each call: how many chunks it keeps of the last call's, and the chunks it adds
    st.tuples(
        st.integers(0, 12),
        st.lists(
            st.tuples(st.integers(20, 900), st.lists(st.integers(0, 6), max_size=4), st.lists(st.booleans())),
            max_size=4,
        ),
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=300 if CI else 100, deadline=None)
@given(_calls)
def test_an_index_laid_out_from_where_the_last_call_left_it_is_the_one_laid_out_anew(
    calls: list[tuple[int, list[tuple[int, list[int], list[bool]]]]],
) -> None:
    """Calls share their first chunks and differ after them (a compaction's tries, the next compaction):
    the layout resumed from the kept ones equals every chunk laid out again, condensings included."""
    memo: dict[str, object] = {}
    chunks: list[Chunk] = []
    made = itertools.count()
    for keep, added in calls:
        chunks = chunks[:keep] + [_chunk(next(made), size, keys, listed) for size, keys, listed in added]
        resumed = _laid_out(memo, chunks, 2_000)
        fresh = Layout(2_000, len(INDEX_INTRO))
        for chunk in chunks:
            fresh.add(chunk)
        assert (resumed.parts(), resumed.covered()) == (fresh.parts(), fresh.covered())


def _header_of(chunks: list[Chunk]) -> str:
    """A condensed range's header read from all its chunks (the definition `condense.Group` adds up)."""
    tools: dict[str, int] = {}
    for chunk in chunks:
        for name, n in chunk.tools:
            tools[name] = tools.get(name, 0) + n
    counts = [sum(c.steps for c in chunks), sum(c.errors for c in chunks), sum(c.paths for c in chunks)]
    counts.append(sum(c.ids for c in chunks))
    held = ", ".join(
        f"{n} {w}" if n == 1 else f"{n} {w}s" for n, w in zip(counts, ("step", "error line", "path", "id"), strict=True)
    )
    span = index_label(range(chunks[0].start, chunks[-1].stop))
    tool_text = ", ".join(f"{name} ×{n}" for name, n in tools.items())
    return f"### {span} (condensed): {held}" + (f" · {tool_text}" if tool_text else "") + f" — {RECALL_HINT} {span}"


@settings(max_examples=200 if CI else 50, deadline=None)
@given(st.lists(st.tuples(st.integers(20, 900), st.integers(0, 3), st.integers(0, 4), st.integers(0, 2)), max_size=40))
def test_a_condensed_range_adds_up_what_its_chunks_hold(chunks: list[tuple[int, int, int, int]]) -> None:
    """Each group's figures, added to as chunks join it (and merged), are its chunks' sums: the header says
    the same as one read from all its chunks, and the values listed are all they listed."""
    layout = Layout(2_000, len(INDEX_INTRO))
    added: list[Chunk] = []
    for k, (size, errors, named, ids) in enumerate(chunks):
        made = _chunk(k, size, [k % 5, k % 7], [True, k % 2 == 0])
        added.append(dataclasses.replace(made, errors=errors, ids=ids, tools=(("terminal", 1), (f"tool_{named}", 2))))
        layout.add(added[-1])
    condensed = 0
    for group in layout.groups:  # oldest first, each the chunks of its range
        members = [c for c in added if group.start <= c.start and c.stop <= group.stop]
        assert members == added[condensed : condensed + len(members)] and len(members) == group.chunks
        assert (group.start, group.stop) == (members[0].start, members[-1].stop)
        assert condensed_header(group) == _header_of(members)
        assert group.listed == frozenset().union(*(c.listed for c in members))
        condensed += len(members)
    assert layout.live == added[condensed:]  # the rest stand live


@settings(max_examples=60 if CI else 25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.integers(1, 40), min_size=1, max_size=9), min_size=2, max_size=5))
def test_chunks_rendered_after_a_changed_range_are_the_ones_rendered_anew(calls: list[list[int]]) -> None:
    """Each call folds other ranges (the first ones often the same): a chunk is reused or rendered with
    the path spellings of the chunks before it, kept or read on, as a fresh reading renders it."""
    raw: list[Message] = [user("fix it")]
    for k in range(120):  # each full path once, its short spelling after: a chunk's spellings matter
        path = f"docs/page_{k}.md" if k < 30 else f"pkg/db/sql/query_{k % 7}.py" if k < 37 else f"sql/query_{k % 7}.py"
        raw += [assistant("", call(f"c{k}", "read_file", path=path)), tool(f"c{k}", f"line {k}", "read_file")]
    facts = RawFacts(raw, Readings())
    for widths in calls:
        bounds = list(itertools.accumulate([1, *widths]))
        bounds = [b for b in bounds if b <= len(raw)]
        kept = _chunks(facts, bounds, 600)
        assert kept == _chunks(RawFacts(raw, Readings()), bounds, 600)


_KEYS = st.sampled_from("abcdefgh")
_OWED_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("update"), st.lists(st.tuples(_KEYS, st.integers(1, 9)), max_size=3)),
        st.tuples(st.just("pop"), _KEYS),
    ),
    max_size=12,
)


@given(st.dictionaries(_KEYS, st.integers(0, 5)), st.dictionaries(_KEYS, st.integers(1, 9)), _OWED_STEPS)
def test_what_a_layout_owes_is_the_dict_of_what_its_ranges_listed_that_its_text_has_not_named(
    listed_at: dict[str, int], counts: dict[str, int], steps: list[tuple[str, Any]]
) -> None:
    """The owed values are a view over what the condensed ranges listed (as `met` holds them), not a copy
    of it made at each condensing: each step does to it what it does to a dict made of that copy."""
    from timmy_compactor.core.fold.condense import _Owed

    def held(key: str, count: int) -> Held:
        return Held(Value(PATH, key, key), count, 0, count)

    met = {key: held(key, n) for key, n in counts.items()}
    owed = _Owed(listed_at, met)
    model = {key: met[key] for key in listed_at if key in met}
    for step, arg in steps:
        if step == "update":
            pairs = [(key, held(key, n)) for key, n in arg]
            owed.update(pairs)
            model.update(pairs)
        else:
            owed.pop(arg)
            model.pop(arg, None)
        assert {key for key in "abcdefgh" if key in owed} == set(model)
        assert all(owed[key] == value for key, value in model.items())
    copied = owed.copy(dict(listed_at), dict(met))
    assert {key for key in "abcdefgh" if key in copied} == set(model)
