"""A JSON document inside a JSON string -- a tool result whose output is JSON, escaped twice or more: every
kind of the credential table (tests/credential_table.py) is redacted there exactly as one level down, so
a secret gets the reference it gets in the same document encoded once (the same secret is the same text
once the nesting is read); the result is valid JSON at every level, idempotent, and spells what it keeps
as it was spelled. Texts without a second level are redacted as before (tests/test_redact_reference.py)."""

from __future__ import annotations

import json
import random
import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.credential_table import KINDS, Sample, sample
from tests.support import assistant, call, terminal, tool, user
from timmy_compactor.core.escapes import has_second_level, redact_escaped
from timmy_compactor.core.fold.index import INDEX_HEADER
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.redact import REF_PREFIX, credential_ref, redact_text
from timmy_compactor.core.types import Settings

REF = re.compile(r"credential_ref:[0-9a-f]{12}")


def nested(text: str, levels: int) -> str:
    """A tool result whose output holds `text` inside `levels - 1` JSON documents: escaped `levels` times."""
    for _ in range(levels - 1):
        text = json.dumps({"content": text})
    return json.dumps({"output": text, "exit_code": 0})


def innermost(document: str, levels: int) -> str:
    """What `nested` put in: `json.loads` at every level (each must parse)."""
    text = json.loads(document)["output"]
    for _ in range(levels - 1):
        text = json.loads(text)["content"]
    assert isinstance(text, str)
    return text


def spellings(secret: str, levels: int) -> list[str]:
    """`secret` as written and escaped once, twice, … `levels` times."""
    forms = [secret]
    for _ in range(levels):
        forms.append(json.dumps(forms[-1])[1:-1])
    return forms


def leaks(item: Sample, output: str, levels: int) -> list[str]:
    return [s for s in item.secrets if any(form in output for form in spellings(s, levels))]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_nested_two_three_and_four_levels_deep_is_redacted_as_one_level_down(kind: str) -> None:
    for seed in range(4):
        item = sample(kind, random.Random(seed))
        text = f"config:\n{item.text}\nok"
        once = innermost(redact_text(nested(text, 1)), 1)
        for levels in (2, 3, 4):
            out = redact_text(nested(text, levels))
            assert not leaks(item, out, levels + 1), (levels, out)
            assert out == nested(once, levels), levels  # the same references, every other character kept
            assert innermost(out, levels) == once
            assert redact_text(out) == out


def test_the_issue_example_a_password_in_a_json_document_in_a_tool_result() -> None:
    doc = json.dumps({"output": json.dumps({"content": '{"password": "x9Tq2vLm", "user": "app"}'})})
    out = redact_text(doc)
    assert "x9Tq2vLm" not in out
    inner = json.loads(json.loads(json.loads(out)["output"])["content"])
    assert inner == {"password": credential_ref("x9Tq2vLm"), "user": "app"}
    assert credential_ref("x9Tq2vLm") in redact_text('{"password": "x9Tq2vLm"}')  # the same secret, the same ref


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_what_is_kept_is_spelled_as_it_was(ensure_ascii: bool) -> None:
    """Escaped or raw non-ASCII, `\\/` (PHP's `json_encode`), tabs: only the secret changes."""
    text = 'café → "password": "hunter2x" in\t/srv/app'
    inner = json.dumps({"content": text}, ensure_ascii=ensure_ascii)
    for doc in (json.dumps({"output": inner}, ensure_ascii=ensure_ascii), json.dumps(inner.replace("/", "\\/"))):
        assert redact_text(doc) == doc.replace("hunter2x", credential_ref("hunter2x"))


def test_a_literal_backslash_n_in_code_is_no_second_level_and_changes_nothing() -> None:
    source = 'print("a\\nb")\nhelp = "see --help"\n'
    for doc in (json.dumps({"output": source}), json.dumps({"output": json.dumps({"content": source})})):
        assert has_second_level(doc)
        assert redact_text(doc) == doc


def test_only_the_lines_that_hold_a_second_level_are_read_again() -> None:
    """A tool output's lines are read by the passes over the text; a line holding a nested document is read
    one level down too, the others are not read again (a stand-in redaction shows which were)."""
    output = "x plain line\n" + json.dumps({"k": "x\ny"}) + "\nx another plain line"
    document = json.dumps({"output": output})
    ref = REF_PREFIX + "0" * 12
    out = redact_escaped(document, lambda inner: inner.replace("x", ref))
    expected = "x plain line\n" + json.dumps({"k": f"{ref}\ny"}) + "\nx another plain line"
    assert json.loads(out) == {"output": expected}


def test_hostile_runs_of_backslashes_and_quotes_are_read_in_bounds() -> None:
    """A megabyte of backslashes, escaped quotes and newlines (timed in bench/bench_redact.py): nothing to
    redact, nothing changed; a secret nested among them is still found."""
    for piece in ("\\", '\\\\\\"', "\\\\n", '"\\\\n', '\\\\\\"a\\\\n"', "\\" * 15 + '"password' + "\\" * 15 + '"'):
        text = piece * (1_000_000 // len(piece))
        assert redact_text(text) == text
    secret = nested('{"password": "x9Tq2vLm"}', 3)
    out = redact_text('\\\\\\"' * 50_000 + secret + '\\\\n"' * 50_000)
    assert "x9Tq2vLm" not in out and credential_ref("x9Tq2vLm") in out


def run_with_error_line(line: str, steps: int = 120) -> list[dict[str, object]]:
    """An agent run long enough to fold whose step 5 fails with `line`: a key line the anchor index lists."""
    messages: list[dict[str, object]] = [user("upload the report")]
    for i in range(steps):
        output = (line if i == 5 else f"step {i} ok") + "\n" + "\n".join(f"line {k} of step {i}" for k in range(60))
        reply = assistant(f"Step {i}", call(f"c{i}", "terminal", command=f"python scripts/upload_{i}.py"))
        messages += [reply, tool(f"c{i}", terminal(output, exit_code=1 if i == 5 else 0))]
    return [*messages, assistant("done")]


def test_anchor_index_keeps_no_kind_from_an_error_line_holding_a_doubly_encoded_document() -> None:
    found = []
    for kind in sorted(KINDS):
        item = sample(kind, random.Random(f"{kind}:nested-index"))
        line = "Error: upload rejected: " + json.dumps({"request": json.dumps({"content": item.text})})
        result = compact(run_with_error_line(line), Settings(context_window=16_000, index_max_ratio=0.5), force=True)
        assert result.compacted, (kind, result.report.failure)
        index = next(m["content"] for m in result.messages if str(m.get("content")).startswith(INDEX_HEADER))
        assert "upload rejected" in str(index), kind
        if leaks(item, str(index), 3):
            found.append(kind)
    assert not found


# ---------------------------------------------------------------- properties

table_samples = st.builds(
    lambda kind, seed: sample(kind, random.Random(seed)), st.sampled_from(sorted(KINDS)), st.integers(0, 10**6)
)
filler = st.text(alphabet='abcXYZ019 .,:=/_-"\\\n\té', max_size=30)


@given(item=table_samples, prefix=filler, suffix=filler, levels=st.integers(2, 4), ascii_only=st.booleans())
@example(item=sample("pgpass_line", random.Random(0)), prefix="\\", suffix='"', levels=2, ascii_only=True)
def test_a_nested_document_stays_valid_json_and_redaction_is_idempotent(
    *, item: Sample, prefix: str, suffix: str, levels: int, ascii_only: bool
) -> None:
    text = prefix + "\n" + item.text + "\n" + suffix
    document = json.dumps({"output": text}, ensure_ascii=ascii_only)
    for _ in range(levels - 1):
        document = json.dumps({"output": json.dumps({"content": json.loads(document)["output"]})})
    out = redact_text(document)
    assert redact_text(out) == out
    assert not leaks(item, out, levels + 1)
    innermost(out, levels)  # every level still parses


@given(text=st.text(max_size=80), levels=st.integers(2, 3))
@example(text='a\\nb "x" 😀 \ud800 é/', levels=2)
def test_an_escaped_run_decodes_to_what_the_redaction_made_of_it(text: str, levels: int) -> None:
    """With a stand-in redaction (every `x` becomes a reference): the runs holding a second level decode
    to the replaced text and are spelled as `json.dumps` spells it; the rest is kept."""
    document = text
    for _ in range(levels):
        document = json.dumps(document)
    ref = REF_PREFIX + "0" * 12
    out = redact_escaped(document, lambda inner: inner.replace("x", ref))
    decoded = out
    for _ in range(levels):
        decoded = json.loads(decoded)
    assert decoded in (text, text.replace("x", ref))
    if decoded != text:
        assert has_second_level(document)
        replaced = text.replace("x", ref)
        for _ in range(levels):
            replaced = json.dumps(replaced)
        assert out == replaced


escape_heavy = st.text(alphabet='\\\\\\"nrtu0 :={}password', max_size=120) | st.builds(
    lambda item, noise, levels: noise + nested(item.text, levels) + noise,
    table_samples,
    st.text(alphabet='\\\\"n :', max_size=12),
    st.integers(1, 4),
)


@given(text=escape_heavy)
@example(text='\\\\\\"password\\\\\\": \\\\\\"hunter2x\\\\\\"')
def test_redaction_of_escape_heavy_text_is_idempotent(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once
