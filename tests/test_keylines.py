"""The key error lines of a tool result (spec §2a): the line that says what failed, and nothing else."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timmy_compactor.core.facts import RawFacts, tool_outcome
from timmy_compactor.core.fold.anchors import anchors_of, identifiers
from timmy_compactor.core.keylines import (
    KEY_LINE_MAX_CHARS,
    KeyLine,
    error_lines,
    exit_code,
    is_key_start,
    key_error_lines,
    template,
)
from timmy_compactor.core.text import keywords, lines_holding, lines_with

TRACEBACK = """Traceback (most recent call last):
  File "/testbed/app.py", line 3, in <module>
    from django.urls import re_path
  File "/testbed/django/urls/base.py", line 3, in <module>
    raise ImportError("No module named 'asgiref'")
ModuleNotFoundError: No module named 'asgiref'"""


def texts(content: object) -> list[str]:
    return [str(line) for line in key_error_lines(content)]


def test_a_traceback_gives_the_exception_line_that_closes_it_not_its_header() -> None:
    assert texts(TRACEBACK) == ["ModuleNotFoundError: No module named 'asgiref'"]
    assert texts("Traceback (most recent call last):\n  File 'x.py', line 1") == []  # cut short: no closing line


def test_several_tracebacks_give_the_first_and_the_last() -> None:
    chained = "\n".join(
        [
            TRACEBACK,
            "",
            "During handling of the above exception, another exception occurred:",
            "",
            "Traceback (most recent call last):",
            '  File "/testbed/manage.py", line 9, in main',
            "    raise ImportError(msg) from exc",
            "ImportError: Couldn't import Django.",
            "Traceback (most recent call last):",
            '  File "/testbed/x.py", line 2',
            "django.core.exceptions.ImproperlyConfigured: settings are not configured",
        ]
    )
    assert texts(chained) == [
        "ModuleNotFoundError: No module named 'asgiref'",
        "django.core.exceptions.ImproperlyConfigured: settings are not configured",
    ]


@pytest.mark.parametrize(
    "line",
    [
        "ValueError: bad literal",
        "error: pathspec 'x' did not match any file(s) known to git",
        "fatal: not a git repository (or any of the parent directories): .git",
        "ERROR: Could not find a version that satisfies the requirement erfa",
        "2024-06-03T07:55:00Z ERROR app.views upstream lookup failed",
        "[2024-06-03 07:55:00,123] CRITICAL worker died",
        "E   AssertionError: assert 2 == 3",
        "FAILED tests/test_x.py::test_y - KeyError: 'pk'",
        "/opt/miniconda3/bin/python: No module named pytest",
        "/usr/bin/bash: line 3: nginx: command not found",
        "ls: cannot access '/var/log/x': No such file or directory",
        "cp: cannot create regular file '/root/x': Permission denied",
        "astropy/table/_np_utils.c:3529:39: error: 'PyArray_Descr' has no member named 'subarray'",
        "src/app.py:12: error: Incompatible return value type",
    ],
)
def test_a_line_that_starts_like_an_error_is_key_even_with_exit_code_zero(line: str) -> None:
    output = json.dumps({"output": f"running\n{line}\ndone", "exit_code": 0, "error": None})
    assert texts(output) == [line]


@pytest.mark.parametrize(
    "line",
    [
        "62-            raise ValueError(",
        "62:            raise ValueError(msg)",
        "./django/db/utils.py:122:        raise ImproperlyConfigured(",
        "django/core/exceptions.py:class ValidationError(Exception):",
        "    except ValueError as exc:",
        "print('Error: this only prints')",
        "from django.core.exceptions import ValidationError",
        '+        raise ValueError("no such file or directory")',
        "-    # ValueError: old comment",
        "msg = 'Permission denied'",
        "The error handling looks fine to me.",
        "1 line mentions error handling",
    ],
)
def test_code_grep_hits_diffs_and_prose_are_never_key_lines(line: str) -> None:
    assert not is_key_start(line)
    assert texts(f"<returncode>0</returncode>\n<output>\n{line}\n</output>") == []


def test_a_non_zero_exit_with_no_error_line_gives_its_last_line() -> None:
    output = json.dumps({"output": "comparing\nFiles a and b differ\n", "exit_code": 1, "error": None})
    assert key_error_lines(output) == (KeyLine("Files a and b differ", 1),)
    assert texts(output) == ["exit 1: Files a and b differ"]
    swe = "<returncode>2</returncode>\n<output>\nbuilding\nhalted at step 4\n</output>"
    assert texts(swe) == ["exit 2: halted at step 4"]
    assert texts(json.dumps({"output": "all fine", "exit_code": 0})) == []


def test_the_error_field_of_a_json_result_is_read_first() -> None:
    body = {"content": "", "similar_files": ["a.yaml"], "error": "Error: File not found: config/x.yml"}
    assert texts(json.dumps(body)) == ["Error: File not found: config/x.yml"]


def test_a_long_key_line_is_cut_to_the_promised_length() -> None:
    line = "RuntimeError: " + "x" * 1000
    (found,) = key_error_lines(line)
    assert found.text == line[:KEY_LINE_MAX_CHARS]


@given(
    lines=st.lists(
        st.text(
            alphabet=st.characters(
                blacklist_categories=("Cs",), blacklist_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
            ),
            max_size=60,
        ),
        max_size=30,
    ),
    code=st.one_of(st.none(), st.integers(-3, 130)),
)
def test_at_most_two_key_lines_each_a_line_of_the_output(lines: list[str], code: int | None) -> None:
    body = "\n".join(lines)
    content = body if code is None else json.dumps({"output": body, "exit_code": code})
    found = key_error_lines(content)
    assert len(found) <= 2
    stripped = {line.strip()[:KEY_LINE_MAX_CHARS] for line in lines}
    for line in found:
        assert line.text in stripped
        assert (line.exit_code is not None) == (bool(code) and len(found) == 1 and not is_key_start(line.text))


def test_identifiers_are_identifiers_not_code() -> None:
    text = (
        "Fixed in 3f9a2c17be0d for PR #4521 and ticket #812, see JIRA-77; run id "
        "1c9e6f0a-2b7d-4e8f-9a01-23456789abcd on v2.14.0 with DATABASE_URL_POOL=20, port 8080.\n"
        "loop_while=lambda x: x\nis_wildcard = False\nif count == 7: pass\nencoding UTF-8 and SHA-256"
    )
    assert identifiers(text) == [
        "3f9a2c17be0d",
        "PR #4521",
        "ticket #812",
        "JIRA-77",
        "1c9e6f0a-2b7d-4e8f-9a01-23456789abcd",
        "v2.14.0",
        "DATABASE_URL_POOL=20",
        "port 8080",
    ]


def test_a_setting_whose_value_is_too_long_to_keep_is_no_identifier_rather_than_a_cut_one() -> None:
    long_url = "https://docs.example.com/" + "guide/" * 20
    found = identifiers(f"export DOCS_URL={long_url} PORT_NUMBER=8080")
    assert found == ["PORT_NUMBER=8080"]
    assert not any(value.startswith("DOCS_URL") for value in found)


@given(padding=st.integers(min_value=960, max_value=1_040))
def test_no_identifier_is_read_half_from_the_head_of_a_call(padding: int) -> None:
    """Ids come from the first 1,000 characters of a call's arguments: one the limit would cut is left
    out, never kept in part."""
    sha = "3f9a2c17be0d4e5f6a7b"
    command = "x" * (padding - 1) + " " + sha + " tail"
    message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": command}}],
    }
    facts = RawFacts([message])
    found = anchors_of(facts, 0).identifiers
    assert found in ((), (sha,)), found  # the whole id or none of it


@pytest.mark.parametrize("bare", ["StopIteration", "django.core.exceptions.EmptyResultSet", "KeyboardInterrupt"])
def test_a_traceback_closed_by_a_bare_exception_gives_it_not_a_later_stdout_line(bare: str) -> None:
    output = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/testbed/repro.py", line 4, in <module>',
            "    print(next(iter(qs)))",
            bare,
            "Result: 3 rows",
        ]
    )
    assert texts(f"<returncode>1</returncode>\n<output>\n{output}\n</output>") == [bare]


def test_a_traceback_whose_frames_run_into_other_output_has_no_closing_line() -> None:
    output = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nwaiting for workers\nStatus: ok'
    assert texts(output) == []


TIMEOUT = (
    "<exception>An error occurred while executing the command: Command '['docker', 'exec', '-w', '/testbed', "
    "'-e', 'PAGER=cat', '-e', 'MANPAGER=cat', '-e', 'LESS=-R', '-e', 'PIP_PROGRESS_BAR=off', '-e', "
    "'TQDM_DISABLE=1', '1c6ba19b2818435c0cff807d530b6e026dbe266abf776d32a0c6fd36e0a01248', 'bash', '-c', "
    "'cd /testbed && pip install pyerfa numpy -q']' timed out after 60 seconds</exception>\n"
    "<returncode>-1</returncode>\n<output>\n</output>"
)


def test_an_exit_code_after_the_first_200_characters_is_read() -> None:
    """A command time-out (the corpus' shape): the exit code follows a long `<exception>` block."""
    outcome = tool_outcome(TIMEOUT)
    assert outcome.exit_code == -1 and outcome.failed
    (line,) = outcome.anchored_lines
    assert line.exit_code == -1 and line.text.startswith("<exception>An error occurred while executing the command")


def test_an_exit_code_the_command_printed_is_not_the_tools() -> None:
    printed = "<output>\n" + "x" * 300 + "\n<returncode>5</returncode>\n</output>"
    assert exit_code(printed) is None


@pytest.mark.parametrize(
    ("output", "code"),
    [
        ("Exit code: 2\nWall time: 0.4 seconds\nOutput:\nls: cannot access 'x'", 2),
        ("collecting\n3 passed\n[Command finished with exit code 1]", 1),
        ("go: downloading example.com/x v1.2.0\nexit status 1", 1),
        ("running\nthe exit code of the child was fine\ndone", None),
    ],
)
def test_an_exit_code_the_tool_states_on_its_first_or_last_line_is_read(output: str, code: int | None) -> None:
    assert exit_code(output) == code


@pytest.mark.parametrize(
    "fatal",
    [
        "patch: **** malformed patch at line 13: @@ -1,3 +1,3 @@",
        "make: *** [Makefile:12: all] Error 2",
        "E: Unable to locate package libfoo-dev",
        "FAIL: test_total_rounds_half_up (test_invoice.InvoiceTest.test_total_rounds_half_up)",
    ],
)
def test_a_tools_fatal_line_is_key_wherever_it_stands(fatal: str) -> None:
    output = f"checking file a.py\n{fatal}\nHunk #1 done\nall steps ran"
    assert texts(json.dumps({"output": output, "exit_code": 0})) == [fatal]


def test_a_fatal_line_after_the_first_error_line_is_key_too() -> None:
    output = (
        "error: could not apply 3f9a2c1... fix\nhint: resolve all conflicts\n"
        "fatal: Exiting because of an unresolved conflict."
    )
    assert texts(output) == [
        "error: could not apply 3f9a2c1... fix",
        "fatal: Exiting because of an unresolved conflict.",
    ]


def test_a_numbered_line_of_a_file_read_is_judged_by_its_text() -> None:
    log = "1|2024-06-03T07:55:00Z INFO started\n2|2024-06-03T07:56:05Z ERROR app.views upstream lookup failed\n3|ok"
    assert texts(json.dumps({"content": log, "total_lines": 3})) == [
        "2|2024-06-03T07:56:05Z ERROR app.views upstream lookup failed"
    ]
    assert not is_key_start("12|    raise ValueError('bad')")


def test_a_template_folds_numbers_hex_and_ids() -> None:
    a = "2024-06-03T07:56:05Z ERROR worker 17 (0x7fae12, job 3f9a2c17be0d): timeout after 30s"
    b = "2024-06-04T11:02:45Z ERROR worker 3 (0x1b, job 1c9e6f0a-2b7d-4e8f-9a01-23456789abcd): timeout after 5s"
    assert template(a) == template(b) == "#-#-#T#:#:#Z ERROR worker # (#, job #): timeout after #s"
    assert template("No module named 'sqlparse'") != template("No module named 'pytz'")


_FOLDED_AS_WRITTEN = re.compile(  # keylines._FOLDED without the lookahead that makes it fast
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|0x[0-9a-fA-F]+|(?<![\w.-])(?=[0-9a-f]*\d)[0-9a-f]{6,}(?![\w-])|\d+"
)


@given(
    st.lists(
        st.sampled_from(("0x", "-", ".", "_", " ", "1c9e6f0a-2b7d-4e8f-9a01-23456789abcd", "٣", "ff", "G"))
        | st.text("0123456789abcdefABCDEFx-. ", max_size=12)
        | st.text(max_size=4),
        max_size=12,
    ).map("".join)
)
def test_a_template_folds_what_the_pattern_as_written_folds(line: str) -> None:
    assert template(line) == _FOLDED_AS_WRITTEN.sub("#", line)


def test_every_distinct_error_template_of_an_output_gives_one_exemplar() -> None:
    """A log dump with 21 distinct errors (each printed three times, with other numbers) gives 21."""
    lines = [
        f"2024-06-03T07:{m:02d}:00Z ERROR service_{name} failed: code {m}"
        for m in range(3)
        for name in "abcdefghijklmnopqrstu"
    ]
    lines += ["INFO all done", "  File 'x.py', line 3", "E   assert 1 == 2", "E   AssertionError: totals differ"]
    found = error_lines(json.dumps({"output": "\n".join(lines), "exit_code": 1}))
    assert found == (*lines[:21], "E   AssertionError: totals differ")


_WORDS = ("rror", "E   ", "E: ", ": ***", "ERR!", "ERROR", "No such file", "ab", "a")


@given(
    st.lists(st.sampled_from((*_WORDS, "\n", " ", "E", "r", "x", "é", "\r\n")) | st.text(max_size=8), max_size=30).map(
        "".join
    ),
    st.lists(st.sampled_from(_WORDS), min_size=1, max_size=5, unique=True),
)
def test_the_keyword_search_gives_the_lines_a_find_per_keyword_gives(text: str, words: list[str]) -> None:
    """`lines_with` (what the key-line reader scans a whole output with) is `lines_holding`."""
    assert lines_with(text, keywords(words)) == list(lines_holding(text, words))


_RARE_WORDS = ("FATAL", "ERR!", ": ***", "E: ", "xception", "No module", "rror", "AL")  # searched from L, !, *, E, x, N


@settings(max_examples=300)
@given(
    st.lists(
        st.sampled_from((*_RARE_WORDS, "L", "ATAL", "!", "R!", "***", "* **", ":", "E", "x", "No", "\n", " ", "é"))
        | st.text(max_size=4),
        max_size=30,
    ).map("".join),
    st.lists(st.sampled_from(_RARE_WORDS), min_size=1, max_size=4, unique=True),
)
def test_the_keyword_search_from_rare_characters_gives_the_lines_one_pattern_gives(text: str, words: list[str]) -> None:
    """`lines_with` (each word searched from its rarest character, or by `str.find`: what the key-line
    reader scans a whole output with) gives the lines a find per word gives (`lines_holding`)."""
    assert lines_with(text, keywords(words)) == list(lines_holding(text, words))
