"""Issue 30, item 6: anchors are read from the raw text and only the pieces kept are redacted -- and still
no credential of the table (tests/credential_table.py) is ever kept, wherever a run puts it."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.credential_table import KINDS, Sample, leaked, sample
from tests.support import assistant, call, tool, user
from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.fold.anchors import anchors_of
from timmy_compactor.core.fold.index import INDEX_HEADER
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.types import Settings

SEPARATORS = [" ", "\n", "=", "/", ":", '"', "'", "(", ", "]

# Where a run puts text: the plain words of a command, a heredoc, a file written, a path, an output,
# what the agent and the user say.
PLACES = {
    "command words": lambda s: ("terminal", {"command": f"cd /srv/app && {s} && cat config/app.yml"}, "ok"),
    "export": lambda s: ("terminal", {"command": f"export {s}; python run.py"}, "ok"),
    "curl header": lambda s: ("terminal", {"command": f"curl -s -H '{s}' https://api.example.com/v1/items"}, "{}"),
    "heredoc": lambda s: ("terminal", {"command": f"cat > deploy/env.sh << 'EOF'\n{s}\nEOF"}, ""),
    "python -c": lambda s: ("terminal", {"command": f"python3 -c \"print('{s}')\" > out/x.txt"}, s),
    "write_file": lambda s: ("write_file", {"path": "conf/settings.ini", "content": f"[main]\n{s}\n"}, "ok"),
    "patch": lambda s: ("patch", {"path": "conf/app.py", "old_string": "x = 1", "new_string": s}, "ok"),
    "output": lambda s: ("terminal", {"command": "cat conf/secrets.env"}, f"HOST=db\n{s}\nPORT=5432"),
}


def session(item: Sample, place: str, steps: int = 40) -> list[dict[str, Any]]:
    name, args, output = PLACES[place](item.text)
    messages: list[dict[str, Any]] = [user(f"deploy it; the credential is {item.text}")]
    for i in range(steps):
        if i % 5 == 2:
            text = f"Using {item.text} now, see commit 3f9a2c17be0d"
            messages.append(assistant(text, call(f"c{i}", name, **args)))
            messages.append(tool(f"c{i}", json.dumps({"output": output, "exit_code": 0, "error": None})))
        else:
            messages.append(assistant(f"step {i}", call(f"c{i}", "terminal", command=f"cat src/mod_{i}.py")))
            messages.append(tool(f"c{i}", json.dumps({"output": "x = 1\n" * 200, "exit_code": 0, "error": None})))
    messages.append(assistant("done"))
    return messages


def index_text(messages: list[dict[str, Any]]) -> str:
    result = compact(messages, Settings(context_window=8_000, index_max_ratio=0.5), force=True)
    assert result.report.verified, result.report.failure
    blocks = [str(m["content"]) for m in result.messages if str(m.get("content")).startswith(INDEX_HEADER)]
    assert blocks, "nothing was folded"
    return blocks[0]


def kept_values(messages: list[dict[str, Any]]) -> str:
    """The pieces the anchors keep as they are read (paths, URLs, ids; key and error lines are whole
    lines, redacted when the index writes them)."""
    facts = RawFacts(messages)
    parts: list[str] = []
    for i in range(len(messages)):
        anchors = anchors_of(facts, i)
        parts += [*anchors.refs, *anchors.identifiers]
    return "\n".join(parts)


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_no_credential_of_the_table_is_kept_wherever_a_run_puts_it(kind: str, place: str) -> None:
    item = sample(kind, random.Random(11))
    messages = session(item, place)
    assert not leaked(item, kept_values(messages)), (kind, place)
    index = index_text(messages)
    assert not leaked(item, index), (kind, place, index)
    assert "src/mod_0.py" in index  # the index was written, with its paths


table_samples = st.builds(
    lambda kind, seed: sample(kind, random.Random(seed)), st.sampled_from(sorted(KINDS)), st.integers(0, 10**6)
)
words = st.text(alphabet="abcdefXYZ019._-", min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    item=table_samples,
    place=st.sampled_from(sorted(PLACES)),
    before=st.sampled_from(SEPARATORS),
    after=st.sampled_from(SEPARATORS),
    left=words,
    right=words,
)
def test_a_credential_glued_to_paths_and_ids_is_never_kept(
    *, item: Sample, place: str, before: str, after: str, left: str, right: str
) -> None:
    """The credential stuck to what reads like a path or an id (`src/<secret>/x.py`, `KEY=<secret>`):
    what the anchors keep of those words never holds it."""
    glued = Sample(item.kind, f"src/{left}{before}{item.text}{after}{right}/x.py", item.secrets)
    name, args, output = PLACES[place](glued.text)
    messages = [
        user("go"),
        assistant(f"on it: {glued.text}", call("c1", name, **args)),
        tool("c1", json.dumps({"output": output, "exit_code": 1, "error": None})),
    ]
    assert not leaked(glued, kept_values(messages))
