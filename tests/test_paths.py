"""Issue 30, item 2: the index's paths are files of the run, in one spelling, marked when edited; its ids
are never code, and are read from anywhere in a call's arguments when they are ids."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.support import DATA_CORPUS, assistant, call, tool, user
from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.fold.anchors import anchors_of
from timmy_compactor.core.fold.index import INDEX_HEADER
from timmy_compactor.core.fold.paths import Mention, Spellings, shell_mentions
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.types import Settings


def paths(command: str) -> list[tuple[str, bool]]:
    return [(m.path, m.edited) for m in shell_mentions(command)]


def test_scripts_diff_prefixes_placeholders_and_prose_are_no_paths() -> None:
    assert paths("cd /testbed && sed -i 's/if a/if b/' django/db/models/sql/compiler.py") == [
        ("/testbed", False),
        ("django/db/models/sql/compiler.py", True),
    ]
    assert paths("awk -F/ '{print $2/$3}' data/in.csv") == [("data/in.csv", False)]
    assert paths("perl -pi -e 's/foo\\/bar/baz/' src/a.c") == [("src/a.c", True)]
    assert paths("sed -n '10,20p' src/x.py | grep -n 'and/or'") == [("src/x.py", False)]
    assert paths("echo 'see write/load and path/to/file1' > notes/todo.txt") == [("notes/todo.txt", True)]
    assert paths("ls /path/to/working/dir; cat '<dir>/x.py' $HOME/y.py your/file.txt") == []
    assert paths("grep -rn 'a/b/c' --include='*.py' django/db/ 2>/dev/null") == [("django/db", False)]
    assert paths("find ./tests -name '*/x.py' -exec grep -l foo/bar {} \\;") == [("./tests", False)]


def test_writes_are_edits() -> None:
    assert paths("cp django/x.py django/x.py.backup && mv a/b.txt c/d.txt") == [
        ("django/x.py", False),
        ("django/x.py.backup", True),
        ("a/b.txt", True),
        ("c/d.txt", True),
    ]
    assert paths("cat > reproduce.py << 'EOF'\nimport os\nprint(open('x/y.txt').read())\nEOF\npython reproduce.py") == [
        ("reproduce.py", True)
    ]
    patch = "patch -p1 << 'EOF'\n--- a/django/db/x.py\n+++ b/django/db/x.py\n@@ -1 +1 @@\n-a\n+b\nEOF"
    assert paths(patch) == [("django/db/x.py", True)]
    fix = "python3 - << 'EOF'\nwith open('astropy/wcs/wcs.py', 'w') as f:\n    f.write(s)\nEOF"
    assert paths(fix) == [("astropy/wcs/wcs.py", True)]
    assert paths("python -m pytest tests/test_a.py | tee logs/run.log") == [
        ("tests/test_a.py", False),
        ("logs/run.log", True),
    ]
    assert paths("git checkout -- src/app.py && git diff src/app.py") == [("src/app.py", True), ("src/app.py", False)]


def test_a_short_spelling_is_merged_into_the_one_path_it_ends() -> None:
    spellings = Spellings()
    spellings.add(["django/db/models/sql/query.py", "sql/query.py", "tests/x/models.py", "tests/y/models.py"])
    assert spellings.full("sql/query.py") == "django/db/models/sql/query.py"
    assert spellings.full("models.py") == "models.py"  # two candidates: it stays itself


def _plain_full(known: list[str], path: str) -> str:
    """`Spellings.full` by its definition: the longest known path `path` is the end of, when every other
    known path it ends is the end of that one too (itself when none, or when two are not)."""
    longer = [p for p in set(known) if p.endswith("/" + path)]
    if not longer:
        return path
    longest = max(longer, key=len)
    return longest if all(longest.endswith("/" + p) for p in longer if p != longest) else path


_PART = st.sampled_from(["a", "b", "src", "x.py", "query.py", ".", ""])


@given(known=st.lists(st.lists(_PART, min_size=1, max_size=4).map("/".join), max_size=8), probe=st.data())
def test_the_full_spelling_is_the_one_longer_path_it_ends(known: list[str], probe: st.DataObject) -> None:
    spellings = Spellings()
    spellings.add(known)
    path = probe.draw(
        st.one_of(st.sampled_from(known or ["x.py"]), st.lists(_PART, min_size=1, max_size=3).map("/".join))
    )
    assert spellings.full(path) == _plain_full(known, path)


def test_ids_are_read_from_anywhere_in_the_arguments_and_never_from_code() -> None:
    body = "x = 1\n" * 400  # the commit id stands far beyond the first 1,000 characters
    patch_text = f"{body}From 3f9a2c17be0d9e4a Mon Sep 17 00:00:00 2001\nSubject: [PATCH] fix JIRA-4521\n"
    heredoc = "cat > t.py << 'EOF'\nsettings.configure(DEBUG=True, USE_TZ=True)\nprint('1.2.3')\nEOF"
    messages = [
        user("go"),
        assistant("", call("c1", "patch", path="src/a.py", patch=patch_text)),
        tool("c1", "ok"),
        assistant("", call("c2", "terminal", command=heredoc + "\nDJANGO_SETTINGS_MODULE=test_sqlite python t.py")),
        tool("c2", "ok"),
    ]
    facts = RawFacts(messages)
    assert anchors_of(facts, 1).identifiers == ("3f9a2c17be0d9e4a", "JIRA-4521")
    assert anchors_of(facts, 3).identifiers == ("DJANGO_SETTINGS_MODULE=test_sqlite",)
    assert anchors_of(facts, 3).edited == ("t.py",)


def test_prose_ids_leave_out_code_spans() -> None:
    messages = [user("prefix any action with `MY_ENV_VAR=MY_VALUE cd /x` -- the bug is in Django 3.2.4, PR #12")]
    assert anchors_of(RawFacts(messages), 0).identifiers == ("3.2.4", "PR #12")
    assert anchors_of(RawFacts(messages), 0).refs == ()  # nothing from prose


def index_of(messages: list[dict[str, Any]]) -> str:
    result = compact(messages, Settings(context_window=32_768), force=True)
    assert result.report.verified, result.report.failure
    return next(str(m["content"]) for m in result.messages if str(m.get("content")).startswith(INDEX_HEADER))


def test_a_real_run_lists_its_edited_files_with_their_last_write_and_no_code_ids() -> None:
    doc = json.loads((DATA_CORPUS / "session_django_11099.json").read_text(encoding="utf-8"))
    index = index_of(doc["messages"])
    assert "DEBUG=True" not in index and "USE_TZ=True" not in index
    edited = [line for line in index.splitlines() if line.startswith("- edited: ")]
    last = {}
    for line in edited:
        for path, refs in re.findall(r"([^\s,(]+) \((#[^)]*)\)", line):
            last[path] = max(int(r) for r in re.findall(r"#(\d+)", refs.split(";")[0]))
    assert last["django/contrib/auth/validators.py"] == 37
    assert last["test_username_validator.py"] == 7


def test_a_file_written_again_in_a_later_chunk_is_listed_again_there() -> None:
    messages: list[dict[str, Any]] = [user("fix it")]
    for i in range(160):
        command = f"sed -i 's/a{i}/b{i}/' src/core/app.py" if i in (3, 60) else f"cat src/mod_{i}.py"
        messages.append(assistant(f"step {i}", call(f"c{i}", "terminal", command=command)))
        messages.append(tool(f"c{i}", json.dumps({"output": "x = 1\n" * 120, "exit_code": 0, "error": None})))
    messages.append(assistant("done"))
    index = index_of(messages)
    edits = [line for line in index.splitlines() if line.startswith("- edited: ") and "src/core/app.py" in line]
    assert len(edits) == 2 and "src/core/app.py (#121)" in edits[-1]
    assert index.count("src/mod_5.py (") == 1
    assert Mention("x", True).edited
