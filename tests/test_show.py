"""show.py + core/recall.py: `show` and recall answers hold their --max-chars bound exactly."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support_homes import VENV


def bounded_session() -> list[dict[str, Any]]:
    from tests.support import assistant, call, tool, user

    return [
        user("short question about ./app.py"),  # 94 characters as JSON: the item alone exceeds 100
        assistant("looking", call("c1", "terminal", command="cat " + "/srv/a" * 80)),
        tool("c1", "line of output é\n" * 300),
        user("ü" * 40),
    ]


@pytest.mark.parametrize("ref", ["#0", "#1", "#2", "#0-#3", "#3"])
def test_recall_answers_hold_their_bound_exactly(ref: str) -> None:
    import re

    from tests.test_show import bounded_session as make
    from timmy_compactor.core.recall import lookup, search
    from timmy_compactor.show import _text

    raw = make()
    for max_chars in [*range(1, 400, 7), 500, 1_000, 5_000, 20_000]:
        for render in (None, _text):  # the JSON answer, or the message text `show` prints
            answer = lookup(raw, ref, max_chars=max_chars, render=render)
            if render is None:  # the JSON envelope of an empty answer is the least there is
                assert len(answer.to_json()) <= max(max_chars, len(answer.to_json()) if not answer.items else 0)
            else:
                assert sum(len(render(i)) for i in answer.items) <= max_chars, (ref, max_chars)
            text = answer.to_json()
            counts = [int(n.replace(",", "")) for n in re.findall(r"cut: (-?[\d,]+) more chars", text)]
            assert all(n > 0 for n in counts), text
            whole = lookup(raw, ref, max_chars=10**9)
            assert answer.truncated == (answer.items != whole.items)
        found = search(raw, "output", max_chars=max_chars)
        empty = len(found.to_json()) if not found.items else 0
        assert len(found.to_json()) <= max(max_chars, empty) and found.total == 300
        assert found.truncated == (len(found.items) < 300)


def test_show_max_chars_bounds_what_it_prints(tmp_path: Path) -> None:
    """Through the console script: never a negative count, and a cut says how to read on in the CLI's words
    (narrow the ref only where there is more than one message)."""
    import re

    raw = tmp_path / "session_short.json"
    raw.write_text(json.dumps({"session_id": "short", "messages": bounded_session()}))
    bin_ = VENV / "bin" / "timmy-compactor"
    for max_chars in ("100", "250", "400", "2000"):
        for mode in ([], ["--json"]):
            for what in (["--ref", "#0"], ["--ref", "#1-#2"], ["--grep", "output"]):
                done = subprocess.run(
                    [str(bin_), "show", str(raw), *what, "--max-chars", max_chars, *mode],
                    capture_output=True,
                    text=True,
                    check=False,
                    timeout=60,
                )
                assert done.returncode == 0, done.stderr
                out = done.stdout
                assert not re.search(r"-\d+ more chars", out), out
                if mode:
                    assert len(out.rstrip("\n")) <= int(max_chars), out
                else:
                    _, cut, notice = out.rpartition("[answer cut at --max-chars ")
                    if cut:
                        assert notice.endswith("or raise --max-chars]\n"), out
                        assert ("narrow the --ref" in notice) == (what[1] == "#1-#2"), out
                        assert "max_chars" not in done.stderr and " with offset" not in done.stderr
    done = subprocess.run(
        [str(bin_), "show", str(raw), "--ref", "#0", "--max-chars", "-6"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2 and "--max-chars: expected a positive integer, got '-6'" in done.stderr


def test_show_pages_the_content_not_its_json_framing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 33: a page at `--max-chars 200` held 8-11 characters of content (the JSON framing counted), and
    its notes named the recall tool's parameters (`max_chars`, `offset`) instead of the options."""
    from timmy_compactor.cli import main

    messages = bounded_session()
    content = messages[2]["content"]
    raw = tmp_path / "session_short.json"
    raw.write_text(json.dumps({"session_id": "short", "messages": messages}))
    config = tmp_path / "c.yaml"
    config.write_text("{}")
    read, offset = "", 0
    for _ in range(3):  # each page goes on where the last stopped, as its note says
        assert (
            main(
                [
                    "show",
                    str(raw),
                    "--ref",
                    "#2",
                    "--max-chars",
                    "200",
                    "--offset",
                    str(offset),
                    "--config",
                    str(config),
                ]
            )
            == 0
        )
        out, err = capsys.readouterr()
        header, ids, *lines, cut = out.splitlines(keepends=True)
        assert header.startswith(f"── #2 tool, content chars {offset}-") and json.loads(ids)["tool_call_id"] == "c1"
        page = "".join(lines)
        assert 150 <= len(page) <= 200 and content[offset:].startswith(page)
        assert "narrow" not in cut and "--offset" in cut
        note = re.search(r"--ref '#2' --offset (\d+) \(where its text goes on\)", err)
        assert note and "max_chars" not in err, err
        read, offset = read + page, int(note.group(1))
    assert content.startswith(read) and offset == len(read)
    main(["show", str(raw), "--grep", "output", "--max-chars", "200", "--config", str(config)])
    out, err = capsys.readouterr()
    assert "the same --grep with --offset 12" in err and "narrow" not in out
