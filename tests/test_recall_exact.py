"""Recall returns what was there (issue 22, item 3): exact text but credentials, which the answer
counts; no Hermes bookkeeping; cut answers say where the rest is, and following them gives it all."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest

from tests.credential_table import leaked, sample
from tests.support import assistant, call, tool, user
from timmy_compactor.core.recall import BOOKKEEPING, Answer, lookup, search
from timmy_compactor.core.redact import IP_MARKER, credential_ref, redact_text

IPS = [f"10.{i % 250}.{i * 7 % 256}.{i * 13 % 256}" for i in range(1, 326)]
_OFFSET_NOTE = re.compile(r'ref "(#\d+)" with offset (\d+)')
_RANGE_NOTE = re.compile(r'ref "(#\d+(?:-#\d+)?)" \(not shown yet')
_QUERY_NOTE = re.compile(r"the same query with offset (\d+)")


def ip_log() -> str:
    """A 42k-character access log with 325 distinct IPv4 addresses (the issue's case)."""
    stamps = [f"2026-11-20T10:{k % 60:02d}:{k % 53:02d}Z" for k in range(650)]
    lines = [f"{stamp} accepted connection from {IPS[k % 325]}:443" for k, stamp in enumerate(stamps)]
    return json.dumps({"output": "\n".join(lines), "exit_code": 0})


def keys(value: Any) -> set[str]:
    """Every key of a decoded JSON value, at any depth."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys(v)}
    return set()


def test_ipv4_addresses_come_back_as_they_were() -> None:
    raw = [user("check the log"), assistant("", call("c1", "terminal", command="cat access.log")), tool("c1", ip_log())]
    answer = lookup(raw, "#2", max_chars=10**6)
    assert answer.items[0]["message"] == raw[2] and IP_MARKER not in answer.to_json()
    assert all(ip in answer.items[0]["message"]["content"] for ip in IPS)
    found = search(raw, "from 10.5.35.65:", max_chars=10**6)
    assert [item["line"][-32:] for item in found.items] == ["accepted connection from 10.5.35.65:443"[-32:]] * 2
    assert not answer.notes and not found.notes  # nothing replaced: nothing to say


def test_credentials_are_replaced_by_the_exports_stand_ins_and_the_answer_says_so() -> None:
    token = "ghp_" + "Q7r2" * 9  # one secret, three times: three stand-ins, all the same
    raw = [
        user("deploy"),
        assistant(f"pushing with {token} to 192.168.1.20", call("c1", "terminal", command=f"echo {token}")),
        tool("c1", json.dumps({"output": f"{token}\nok", "exit_code": 0})),
    ]
    answer = lookup(raw, "#1-#2", max_chars=10**6)
    text = answer.to_json()
    assert token not in text and text.count(credential_ref(token)) == 3 and "192.168.1.20" in text
    assert len(answer.notes) == 1 and answer.notes[0].startswith("3 credential(s) replaced by credential_ref:")
    found = search(raw, "pushing with", max_chars=10**6)
    assert token not in found.to_json() and found.notes[0].startswith("1 credential(s) replaced")
    for kind in ("github_classic", "postgres_url", "rsa_private_key", "bearer_json"):  # the export's table
        secret = sample(kind, random.Random(3))
        message = tool("c1", f"{secret.text}\nfrom 10.0.0.7")
        answer = lookup([user("go"), message], "#1", max_chars=10**6)
        assert not leaked(secret, answer.to_json()) and "10.0.0.7" in answer.to_json(), kind
        assert answer.items[0]["message"]["content"] == redact_text(message["content"], ips=False)
        assert answer.notes and answer.notes[0].split()[0].isdigit(), kind


def test_hermes_bookkeeping_keys_are_not_in_answers() -> None:
    call_ = {**call("c1", "terminal", command="ls"), "call_id": "call_9", "response_item_id": "fc_9"}
    raw = [
        {**user("go"), "timestamp": 1_700_000_000.5, "_db_persisted": True},
        {**assistant("listing", call_), "finish_reason": "tool_calls", "timestamp": 1_700_000_001.0},
        {**tool("c1", "a\nb"), "timestamp": 1_700_000_002.0},
    ]
    answer = lookup(raw, "#0-#2", max_chars=10**6)
    assert not keys(answer.as_dict()) & BOOKKEEPING
    kept = answer.items[1]["message"]
    assert kept["content"] == "listing" and kept["tool_calls"][0]["id"] == "c1"
    assert kept["tool_calls"][0]["function"] == call_["function"]


def test_search_does_not_find_the_recall_tools_own_calls_and_answers() -> None:
    earlier = lookup([user("quota probe failed")], "#0").to_json()
    raw = [
        user("why did the quota probe fail?"),
        assistant("", call("r1", "timmy_recall", query="quota probe")),
        tool("r1", earlier, name="timmy_recall"),
        assistant("checking", call("c2", "terminal", command="grep quota /var/log/app.log")),
        tool("c2", "quota probe: 429 Too Many Requests"),
    ]
    found = search(raw, "quota", max_chars=10**6)
    assert [item["ref"] for item in found.items] == ["#0", "#3", "#4"]
    assert found.total == 3


def _follow_ref(raw: list[dict[str, Any]], ref: str, max_chars: int) -> tuple[list[Answer], str]:
    """Recall `ref` and follow every cut answer's note until nothing is left: the answers, and the
    text of the messages pieced together."""
    answers: list[Answer] = []
    pieces: dict[str, str] = {}
    todo: list[tuple[str, int]] = [(ref, 0)]
    while todo:
        ref, offset = todo.pop(0)
        answer = lookup(raw, ref, max_chars=max_chars, offset=offset)
        assert len(answer.to_json()) <= max_chars
        answers.append(answer)
        for item in answer.items:
            message = item["message"]
            pieces[item["ref"]] = pieces.get(item["ref"], "") + (
                message["content"] if "chars" in item else json.dumps(message)
            )
        if not answer.truncated:
            continue
        (note,) = [n for n in answer.notes if n.startswith("cut to fit")]
        todo += [(m.group(1), int(m.group(2))) for m in _OFFSET_NOTE.finditer(note)]
        todo += [(m.group(1), 0) for m in _RANGE_NOTE.finditer(note)]
        assert len(answers) < 200
    return answers, "".join(pieces.values())


def test_a_cut_message_is_read_on_by_offset_to_its_exact_end() -> None:
    raw = [user("check the log"), assistant("", call("c1", "terminal", command="cat access.log")), tool("c1", ip_log())]
    first = lookup(raw, "#2", max_chars=8_000)
    assert first.truncated and first.items[0]["chars"][0] == 0
    assert _OFFSET_NOTE.search(first.notes[-1]), first.notes
    answers, text = _follow_ref(raw, "#2", 8_000)
    assert text == raw[2]["content"] and len(raw[2]["content"]) > 15_000
    assert len(answers) > 2 and all(a.items for a in answers)


def test_a_message_with_long_calls_is_paged_as_json_and_pieced_together_exactly() -> None:
    body = "".join(f"line {i}: {'é' * (i % 7)} \\n {IPS[i % len(IPS)]}\n" for i in range(900))
    raw = [user("write it"), assistant("writing", call("c1", "write_file", path="/srv/app.py", content=body))]
    answers, _ = _follow_ref(raw, "#1", 6_000)
    assert len(answers) > 2 and {a.items[0]["paged"] for a in answers} == {"message as JSON"}
    text = "".join(a.items[0]["message"]["content"] for a in answers)
    assert json.loads(text) == {k: v for k, v in raw[1].items() if k != "role"}


def test_a_cut_range_names_the_refs_not_shown_and_following_them_gives_every_message() -> None:
    raw = [user("go")] + [tool(f"c{i}", f"output {i}\n" + "x" * 3_000) for i in range(8)]
    first = lookup(raw, "#1-#8", max_chars=7_000)
    assert first.truncated and "#8" in first.notes[-1]
    answers, _ = _follow_ref(raw, "#1-#8", 7_000)
    seen: dict[str, str] = {}
    for answer in answers:
        for item in answer.items:
            seen[item["ref"]] = seen.get(item["ref"], "") + item["message"]["content"]
    assert seen == {f"#{i}": raw[i]["content"] for i in range(1, 9)}


def test_a_cut_search_names_the_offset_of_the_rest() -> None:
    raw = [user("go"), tool("c1", "\n".join(f"warning {i}: disk at {IPS[i]}" for i in range(300)))]
    lines: list[str] = []
    offset = 0
    while True:
        found = search(raw, "warning", max_chars=2_000, offset=offset)
        assert len(found.to_json()) <= 2_000 and found.total == 300
        lines += [item["line"] for item in found.items]
        if not found.truncated:
            break
        offset = int(_QUERY_NOTE.findall(found.notes[-1])[0])
    assert lines == [f"warning {i}: disk at {IPS[i]}" for i in range(300)]


def test_an_offset_past_the_end_is_a_clear_error_and_a_huge_ref_is_no_crash() -> None:
    from timmy_compactor.core.recall import RefError

    raw = [user("go"), tool("c1", "short")]
    with pytest.raises(RefError, match="past the end of #1"):
        lookup(raw, "#1", offset=5)
    with pytest.raises(RefError, match="not a ref") as caught:
        lookup(raw, "#" + "9" * 5_000)
    assert len(str(caught.value)) < 200


def test_show_reads_on_with_offset_and_prints_the_notes_apart(tmp_path: Any, capsys: Any) -> None:
    from timmy_compactor.cli import main

    raw = [user("check the log"), tool("c1", ip_log())]
    path = tmp_path / "session_log1.json"
    path.write_text(json.dumps({"session_id": "log1", "messages": raw}), encoding="utf-8")
    assert main(["show", str(path), "--ref", "#1", "--json", "--max-chars", "9000"]) == 0
    first = json.loads(capsys.readouterr().out)
    offset = first["items"][0]["chars"][1]
    assert f'ref "#1" with offset {offset}' in first["notes"][-1]
    assert main(["show", str(path), "--ref", "#1", "--offset", str(offset), "--max-chars", "9000"]) == 0
    out, err = capsys.readouterr()
    assert f"── #1 tool, content chars {offset}-" in out and "note: cut to fit the size bound" in err
    assert "[REDACTED_IP]" not in out and IPS[200] in out + first["items"][0]["message"]["content"]
    with pytest.raises(SystemExit) as refused:
        main(["show", str(path), "--ref", "#1", "--offset", "-1"])
    assert refused.value.code == 2 and "expected an integer of 0 or more" in capsys.readouterr().err


def test_a_search_offset_past_the_last_match_says_so() -> None:
    raw = [user("go"), tool("c1", "warning: disk\nwarning: fan")]
    found = search(raw, "warning", offset=2)
    assert not found.items and found.total == 2 and not found.truncated
    assert found.notes == ("offset 2 is past the last match: there are 2, from offset 0",)


def test_a_cut_answer_ends_at_a_word_so_no_url_or_number_is_read_half() -> None:
    """A URL cut in the middle (`https://docs`) would be stored as a fact by whatever reads the answer
    later (the index of a folded recall): a cut ends after a line break or a space, and paging on still
    gives the exact text."""
    words = [f"https://docs.example.com/page/{k}.html" if k % 3 == 0 else f"value-{k * 7919}" for k in range(900)]
    raw = [user(" ".join(words[:450]) + "\n" + " ".join(words[450:]))]
    for max_chars in (1_000, 2_345, 4_000):
        answer = lookup(raw, "#0", max_chars=max_chars)
        (item,) = answer.items
        end = item["chars"][1]
        assert answer.truncated and raw[0]["content"][end - 1] in " \n", (max_chars, item["message"]["content"][-40:])
        _, text = _follow_ref(raw, "#0", max_chars)
        assert text == raw[0]["content"]
