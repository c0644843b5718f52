"""show.py + core/recall.py: `show` and recall answers hold their --max-chars bound exactly."""

from __future__ import annotations

import json
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
    from timmy_compactor.show import _render_item

    raw = make()
    for max_chars in [*range(1, 400, 7), 500, 1_000, 5_000, 20_000]:
        for render in (None, _render_item):
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
    """Through the console script: `show --max-chars 100` on a short message prints no more than 100
    characters before its one-line notice, and never a negative count."""
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
                    body, cut, notice = out.rpartition("[answer cut at --max-chars ")
                    if cut:
                        assert notice.endswith("narrow the ref or raise --max-chars]\n"), out
                        assert len(body) <= int(max_chars), out
                    else:
                        assert len(out) <= int(max_chars), out
    done = subprocess.run(
        [str(bin_), "show", str(raw), "--ref", "#0", "--max-chars", "-6"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2 and "--max-chars: expected a positive integer, got '-6'" in done.stderr
