"""Bad input: a clear one-line error naming the file (exit 2) or a correct view; never a crash,
never a written (or half-written) file, never a touched raw file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import assistant, call, listing, padding_turns, terminal, tool, tool_session, user
from timmy_compactor.cli import main
from timmy_compactor.sessions.files import SessionError, parse_session, read_session

BAD = {
    "empty file": (b"", "file is empty"),
    "only whitespace": (b"  \n\n", "file is empty"),
    "truncated JSON": (b'{"messages": [{"role": "user", "content": "hi"}', "invalid JSON at line 1"),
    "truncated after a write": (json.dumps({"messages": [user("x" * 5000)]}).encode()[:3000], "invalid JSON"),
    "non-UTF-8 bytes": (b'{"messages": [{"role": "user", "content": "caf\xe9"}]}', "not UTF-8 text"),
    "a JSON number": (b"42", "expected a JSON object or array, got int"),
    "a JSON string": (b'"session"', "expected a JSON object or array, got str"),
    "JSON null": (b"null", "expected a JSON object or array, got NoneType"),
    "messages not a list": (b'{"messages": {"0": {"role": "user"}}}', "'messages' is a dict, expected a list"),
    "messages a string": (b'{"messages": "nope"}', "'messages' is a str, expected a list"),
    "no messages": (b'{"session_id": "x", "model": "m"}', "no 'messages' list"),
    "a message not an object": (b'[{"role": "user", "content": "a"}, 7]', "message 1 is a int, expected an object"),
}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_naming(err: str, path: Path, problem: str) -> bool:
    return err.count("\n") == 1 and err.startswith("timmy-compactor: error: ") and str(path) in err and problem in err


@pytest.mark.parametrize(("content", "problem"), BAD.values(), ids=BAD.keys())
@pytest.mark.parametrize("flags", [[], ["--force"], ["--force", "--json"], ["--out", "-"], ["--out", "OUT"]])
def test_compact_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes, problem: str, flags: list[str]
) -> None:
    path = tmp_path / "session_bad.json"
    path.write_bytes(content)
    flags = [str(tmp_path / "out.json") if f == "OUT" else f for f in flags]
    before = listing(tmp_path)
    code, out, err = run(capsys, "compact", str(path), *flags)
    assert code == 2, err
    assert out == ""
    assert one_line_naming(err, path, problem), err
    assert "wizard" not in err  # an error names the problem, never what the message holds
    assert listing(tmp_path) == before  # nothing written, raw untouched


@pytest.mark.parametrize(("content", "problem"), [v for k, v in BAD.items() if "role" not in k])
def test_stats_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "session_bad.json"
    path.write_bytes(content)
    code, out, err = run(capsys, "stats", str(path), "--json")
    assert code == 2 and out == "" and one_line_naming(err, path, problem)


@pytest.mark.parametrize(("content", "problem"), [v for k, v in BAD.items() if "role" not in k])
def test_session_io_names_the_file_in_one_line(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "session_bad.json"
    with pytest.raises(SessionError) as info:
        parse_session(path, content)
    assert str(info.value).startswith(f"{path}: ") and problem in str(info.value)
    assert "\n" not in str(info.value) and info.value.path == path


def test_missing_file_and_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "session_none.json"
    code, out, err = run(capsys, "compact", str(missing))
    assert code == 2 and out == "" and one_line_naming(err, missing, "no such file")
    folder = tmp_path / "session_dir.json"
    folder.mkdir()
    code, out, err = run(capsys, "compact", str(folder), "--force")
    assert code == 2 and one_line_naming(err, folder, "is a directory")
    with pytest.raises(SessionError, match="no such file"):
        read_session(missing)


def test_restore_of_a_broken_view(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    view = tmp_path / "compacted_session_x.json"
    view.write_bytes(b'{"timmy_compaction": ')
    code, out, err = run(capsys, "restore", str(view))
    assert code == 2 and out == "" and one_line_naming(err, view, "invalid JSON")
    view.write_text(json.dumps({"messages": [], "timmy_compaction": {"raw_file": "../etc/passwd"}}))
    code, out, err = run(capsys, "restore", str(view))
    assert code == 2 and out == "" and one_line_naming(err, view, "names no raw file")


def session_with(*middle: dict) -> list[dict]:
    return [user("start"), assistant("ok"), *middle, *padding_turns(6)]


def compact_ok(capsys: pytest.CaptureFixture[str], tmp_path: Path, messages: list[dict]) -> tuple[dict, list[dict]]:
    path = tmp_path / "session_odd.json"
    path.write_text(json.dumps({"session_id": "odd", "messages": messages}))
    before = path.read_bytes()
    code, out, err = run(capsys, "compact", str(path), "--force", "--json")
    report = json.loads(out)
    assert code == 0 and report["verified"] is True, (err, report)
    assert path.read_bytes() == before
    view = json.loads((tmp_path / "compacted_session_odd.json").read_text())
    return report, view["messages"]


def test_a_tool_result_with_no_call_gives_a_correct_view(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    ghost = tool("ghost", "Traceback (most recent call last):\n  File x\nOSError: lost")
    report, view = compact_ok(capsys, tmp_path, session_with(ghost))
    assert report["rules"].get("sanitize_tool_pairs") == 1 or report["rules"].get("fold_steps")
    assert not any(m["role"] == "tool" for m in view)
    # a note in place of the orphan, or the fold's index, names what it said
    assert "OSError: lost (#2)" in json.dumps(view) or any(
        "[tool result #2 without a call: terminal → failed: " in str(m["content"]) for m in view
    )


def test_a_5_mb_single_line_tool_output_gives_a_small_view(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    huge = terminal("y" * 5_000_000, exit_code=1)
    messages = session_with(assistant("", call("c1", "terminal", command="yes | head -c 5M")), tool("c1", huge))
    report, view = compact_ok(capsys, tmp_path, messages)
    assert report["rules"]["truncate_tool_output"] == 1
    assert len(json.dumps(view)) < 60_000
    if report["rules"].get("fold_steps"):  # folded: the index keeps its key line (the exit and its last line)
        assert "- error: exit 1: yyyy" in json.dumps(view)
    else:
        output = json.loads(view[3]["content"])
        assert output["exit_code"] == 1 and "[...truncated " in output["output"] and " chars...]" in output["output"]


def test_a_5_mb_single_line_through_a_real_process(tmp_path: Path) -> None:
    huge = json.dumps({"output": "z" * 5_000_000, "exit_code": 0, "error": None})
    messages = [user("go"), assistant("", call("c1", "terminal", command="cat big")), tool("c1", huge)]
    messages += [user("next"), assistant("a"), user("and"), assistant("b")]  # the last 3 steps are the tail
    path = tmp_path / "session_big.json"
    path.write_text(json.dumps(messages))
    proc = subprocess.run(
        [sys.executable, "-m", "timmy_compactor.cli", "compact", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["triggered"] and report["verified"]
    assert report["tokens_before"] > 1_000_000 and report["tokens_after"] < 1_000
    assert (tmp_path / "compacted_session_big.json").stat().st_size < 10_000


def test_an_unwritable_out_path_is_one_line_not_a_traceback(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "session_ok.json"
    path.write_text(json.dumps(session_with(tool("ghost", "x"), *tool_session(40, output_lines=40)[1:])))
    before = listing(tmp_path)
    target = tmp_path / "missing" / "view.json"
    code, out, err = run(capsys, "compact", str(path), "--force", "--out", str(target))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("timmy-compactor: error: ") and str(target.parent) in err and "No such file" in err
    assert listing(tmp_path) == before
    assert main(["compact", str(path), "--force"]) == 0
    capsys.readouterr()
    code, out, err = run(capsys, "restore", str(tmp_path / "compacted_session_ok.json"), "--out", str(target))
    assert code == 2 and out == "" and err.count("\n") == 1 and str(target.parent) in err


@pytest.mark.parametrize(
    "other",
    [
        {"role": "developer", "content": "be brief"},
        {"role": "function", "name": "f", "content": "{}"},
        {"content": "no role at all"},
    ],
)
def test_a_message_of_another_role_is_kept_verbatim_and_the_rest_compacted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, other: dict[str, str]
) -> None:
    messages = session_with(
        assistant("", call("c1", "terminal", command="seq 1 2000")),
        tool("c1", terminal("\n".join(map(str, range(2000))))),
    )
    messages.insert(3, other)
    report, view = compact_ok(capsys, tmp_path, messages)
    assert report["verified"] and report["tokens_after"] < report["tokens_before"]
    assert "\\n1500\\n" not in json.dumps(view)  # the long output around it was compacted
    kept = [m for m in view if m == other]
    assert len(kept) == 1  # verbatim, once
    before = [m.get("role") for m in view[: view.index(kept[0])]]
    assert "user" in before  # in place: after the messages that came before it


def test_a_session_where_nothing_can_be_cut_gets_no_view_and_says_why(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A huge user message (kept verbatim, always) and nothing else: a view would be the raw again."""
    path = tmp_path / "session_big_user.json"
    path.write_text(json.dumps({"session_id": "big_user", "messages": [user("x" * 2_000_000), assistant("ok")]}))
    code, out, err = run(capsys, "compact", str(path), "--json")
    report = json.loads(out)
    assert code == 0 and report["action"] == "nothing_to_cut" and report["view"] is None
    assert report["reason"].startswith("nothing could be cut")
    assert not (tmp_path / "compacted_session_big_user.json").exists()
    assert "xxxx" not in out + err  # the reason names no content


def test_a_view_above_the_window_is_logged_as_a_warning_and_one_above_the_budget_says_why() -> None:
    from structlog.testing import capture_logs

    from timmy_compactor.compactor import Outcome
    from timmy_compactor.core.pipeline import compact
    from timmy_compactor.core.types import Settings
    from timmy_compactor.sidecar.outcomes import log_outcome

    messages = [user("go"), assistant("", call("c1", "terminal", command="cat big.log"))]
    messages.append(tool("c1", terminal("\n".join("y" * 60 for _ in range(300)))))  # the last step: kept whole
    result = compact(messages, Settings(context_window=8_000), force=True)
    assert result.report.note and "above the budget" in result.report.note
    outcome = Outcome(path=Path("session_x.json"), action="written", report=result.report, reason=result.report.note)
    huge = [user("x" * 400_000), assistant("ok")]  # a user message 12x the window: kept verbatim, always
    too_big = compact(huge + huge[-1:], Settings(context_window=8_000), force=True)
    above = Outcome(path=Path("session_y.json"), action="written", report=too_big.report)
    with capture_logs() as logs:
        log_outcome("x", outcome)
        log_outcome("y", above)
    budget, window = logs
    assert budget["event"] == "view_written" and budget["log_level"] == "info"
    assert budget["note"] == result.report.note and "yyyy" not in str(budget)
    assert window["event"] == "view_written_above_window" and window["log_level"] == "warning"
    assert "xxxx" not in str(window)


@pytest.mark.parametrize("kind", ["fifo", "dev_zero_link", "symlink_loop"])
@pytest.mark.parametrize("verb", [["compact"], ["stats"], ["show", "--ref", "#1"]])
def test_a_special_file_named_as_a_session_is_refused_not_read(tmp_path: Path, kind: str, verb: list[str]) -> None:
    """Issue 32: `compact`, `stats` and `show` named at a FIFO hung (the open waits for a writer), at a
    link to /dev/zero read until memory ran out, at a symlink loop raised a traceback."""
    path = tmp_path / "session_odd.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero_link":
        path.symlink_to("/dev/zero")
    else:
        path.symlink_to(tmp_path / "loop.json")
        (tmp_path / "loop.json").symlink_to(path)
    command = [sys.executable, "-m", "timmy_compactor.cli", verb[0], str(path), *verb[1:]]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and "session_odd" in proc.stderr, proc.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("compacted_")]


def test_special_files_in_the_sessions_folder_hang_nothing_and_the_good_sessions_get_views(tmp_path: Path) -> None:
    """Issue 32: a symlink loop named session_*.json made sweep, status and export end in a traceback;
    a FIFO at a view path blocked the readers; a link to /dev/zero was read until memory ran out."""
    from tests.support_homes import write_default_config

    config, sessions = write_default_config(tmp_path)
    good = sessions / "session_good.json"
    good.write_text(json.dumps(session_with(*tool_session(60, output_lines=60)[1:])))
    os.mkfifo(sessions / "session_fifo.json")
    (sessions / "session_zero.json").symlink_to("/dev/zero")
    (sessions / "session_loopa.json").symlink_to(sessions / "session_loopb.json")
    (sessions / "session_loopb.json").symlink_to(sessions / "session_loopa.json")
    (sessions / "session_withfifo.json").write_text(json.dumps(session_with(*tool_session(60, output_lines=60)[1:])))
    os.mkfifo(sessions / "compacted_session_withfifo.json")  # a FIFO where its view goes
    (sessions / "compacted_session_good.json").symlink_to("/dev/zero")  # a device where a view goes
    export = tmp_path / "export"
    for verb in (["sweep", "--now"], ["status"], ["status", "--json"], ["export", "--out", str(export)]):
        command = [sys.executable, "-m", "timmy_compactor.cli", "--config", str(config), *verb]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        assert "Traceback" not in proc.stderr + proc.stdout, (verb, proc.stderr[-2000:])
        assert proc.returncode in (0, 1, 3, 5), (verb, proc.returncode, proc.stderr[-2000:])
    for name in ("good", "withfifo"):
        view = sessions / f"compacted_session_{name}.json"
        assert view.is_file() and not view.is_symlink(), name  # written over what stood there, by rename
        assert json.loads(view.read_text())
