"""One session, one view (issue 32, item 4): view names are injective over session ids, and `show`
(recall) answers only with the session asked for, never with another one sharing its name."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import Sidecar, add_db_session, append_row, make_state_db, tool_session, user, write_json
from timmy_compactor.sessions.files import SessionError
from timmy_compactor.sessions.names import UnsafeIdError, file_id


def escaped_by_hermes(session_id: str) -> str:
    """The name Hermes' snapshot writer gives an id it escapes (and the one we gave before): a plain id."""
    sanitized = re.sub(r"[^\w-]", "_", session_id.strip()).strip("._")[:96] or "session"
    return f"{sanitized}_{hashlib.sha256(session_id.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"


def _valid(session_id: str) -> bool:
    try:
        file_id(session_id)
    except UnsafeIdError:
        return False
    return True


HEX12 = st.text("0123456789abcdef", min_size=12, max_size=12)
PLAIN = st.from_regex(r"[A-Za-z0-9][\w-]{0,40}[A-Za-z0-9]", fullmatch=True)
ANY_ID = st.text(min_size=1, max_size=120).filter(_valid)
ADVERSARIAL = st.one_of(
    ANY_ID,
    PLAIN,
    st.builds(escaped_by_hermes, ANY_ID),  # the escaped name of another id, as an id
    st.builds(file_id, ANY_ID),  # our own name of another id, as an id
    st.builds(lambda i: file_id(file_id(i)), ANY_ID),
    st.builds(lambda p, h: f"{p}_{h}", PLAIN, HEX12),  # any id that ends like an escaped one
    st.builds(lambda i: i + "/", PLAIN),  # `a/` and `a_<hash of a/>`
    st.builds(lambda i: "x" * 97 + i, PLAIN),  # cut at 96 characters: the rest differs
)


@settings(max_examples=400, deadline=None)
@given(st.lists(ADVERSARIAL, min_size=2, max_size=12, unique=True).flatmap(
    lambda ids: st.just(ids + [escaped_by_hermes(i) for i in ids if _valid(escaped_by_hermes(i))])
))  # fmt: skip
def test_no_two_ids_share_a_file_id(ids: list[str]) -> None:
    ids = list(dict.fromkeys(i for i in ids if _valid(i)))
    names = {file_id(i): i for i in ids}
    assert len(names) == len(ids), [(i, file_id(i)) for i in ids if names[file_id(i)] != i]


@settings(max_examples=300, deadline=None)
@given(PLAIN.filter(lambda i: not re.search(r"_[0-9a-f]{12}\Z", i)))
def test_a_plain_id_keeps_its_name(session_id: str) -> None:
    assert file_id(session_id) == session_id  # existing views of ordinary ids are not renamed


def test_the_issues_pair_gets_two_names() -> None:
    other = escaped_by_hermes("a/b")
    assert file_id("a/b") == other  # the name Hermes gives a/b's snapshot, kept
    assert file_id(other) != other and file_id(other) != file_id("a/b")
    for hermes_id in ("20260425_143012_a1b2c3", "0f8fad5b-d9cb-469f-a165-70867728950e", "cron_job-7"):
        assert file_id(hermes_id) == hermes_id


def two_sessions_one_old_name(car: Sidecar) -> tuple[str, str]:
    other = escaped_by_hermes("a/b")
    path = make_state_db(car.root / "hermes" / "state.db", "a/b", [*tool_session(40), user("MARK-OF-A-SLASH-B")])
    add_db_session(path, other, [*tool_session(40), user("MARK-OF-THE-OTHER")])
    return "a/b", other


def test_two_sessions_get_two_views_and_show_answers_for_the_one_asked(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    slash, other = two_sessions_one_old_name(car)
    sweep = car.cli("sweep", "--now", "--json")
    assert json.loads(sweep.stdout) == {"sessions": 2, "written": 2}, sweep.stderr
    views = {sid: car.sessions / f"compacted_session_{file_id(sid)}.json" for sid in (slash, other)}
    for sid, view in views.items():
        assert json.loads(view.read_text())["session_id"] == sid
    for sid, mine in ((slash, "MARK-OF-A-SLASH-B"), (other, "MARK-OF-THE-OTHER")):
        for target in (sid, str(views[sid])):
            show = car.cli("show", target, "--grep", "MARK-OF")
            assert show.returncode == 0 and mine in show.stdout, (target, show.stderr)
            assert show.stdout.count("MARK-OF") == show.stdout.count(mine), (target, show.stdout)
    again = car.cli("sweep", "--now", "--json")  # both known: none an orphan of the other, none redone
    assert json.loads(again.stdout) == {"sessions": 0}, again.stderr
    assert all(view.is_file() for view in views.values())


def test_show_refuses_a_view_that_belongs_to_another_session(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    slash, other = two_sessions_one_old_name(car)
    assert json.loads(car.cli("sweep", "--now", "--json").stdout)["written"] == 2
    mine, theirs = (car.sessions / f"compacted_session_{file_id(sid)}.json" for sid in (other, slash))
    shutil.copyfile(theirs, mine)  # what the old names did: a/b's view under the other's name
    show = car.cli("show", str(mine), "--grep", "MARK-OF")
    assert show.returncode == 2 and "Traceback" not in show.stderr, show.stderr
    assert len(show.stderr.strip().splitlines()) == 1 and "refusing" in show.stderr, show.stderr
    assert "MARK-OF" not in show.stdout
    restore = car.cli("restore", str(mine))
    assert restore.returncode == 2 and "refusing" in restore.stderr and "MARK-OF" not in restore.stdout


def test_a_snapshot_named_like_an_escaped_id_is_still_shown_by_its_id(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    other = escaped_by_hermes("a/b")
    write_json(car.sessions / f"session_{other}.json", {"session_id": other, "messages": [user("MARK-MINE")]})
    show = car.cli("show", other, "--grep", "MARK")
    assert show.returncode == 0 and "MARK-MINE" in show.stdout, show.stderr
    write_json(car.sessions / f"session_{other}.json", {"session_id": "a/b", "messages": [user("MARK-OF-A-SLASH-B")]})
    assert car.cli("show", "a/b", "--grep", "MARK").stdout.count("MARK-OF-A-SLASH-B") == 1  # Hermes named it so
    refused = car.cli("show", other, "--grep", "MARK")  # that file is a/b's, not this id's
    assert refused.returncode == 2 and "refusing" in refused.stderr and "MARK" not in refused.stdout, refused.stderr


def test_a_view_under_an_old_shared_name_is_replaced_by_the_session_that_name_stands_for(tmp_path: Path) -> None:
    """Before: `a_b_<hash>` (plain) and `a/b` shared `compacted_session_a_b_<hash>.json`. That view, made
    from the plain id, is stale under the new names: `a/b`'s next run replaces it, never refused."""
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    slash, other = two_sessions_one_old_name(car)
    assert json.loads(car.cli("sweep", "--now", "--json").stdout)["written"] == 2
    shared = car.sessions / f"compacted_session_{file_id(slash)}.json"
    shutil.copyfile(car.sessions / f"compacted_session_{file_id(other)}.json", shared)  # the old names' view
    append_row(car.root / "hermes" / "state.db", slash, "MARK-OF-A-SLASH-B again")
    sweep = car.cli("sweep", "--now", "--json")
    assert json.loads(sweep.stdout) == {"sessions": 1, "written": 1}, sweep.stderr
    assert json.loads(shared.read_text())["session_id"] == slash


def test_two_ids_under_one_name_the_later_one_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What 12 hex digits of a hash cannot rule out for a forger: two escaped ids, one name. The view
    written first is kept and the later session's run is refused, never written over it nor removed."""
    from timmy_compactor import compactor
    from timmy_compactor.config import load_config
    from timmy_compactor.sessions.sources import Picker, Places

    car = Sidecar(tmp_path, "sqlite", window=8_000)
    path = make_state_db(car.root / "hermes" / "state.db", "p/q", [*tool_session(40), user("MARK-P")])
    add_db_session(path, "r/s", [*tool_session(40), user("MARK-R")])
    config = load_config(car.config_path)
    picker = Picker.of(Places(sessions_dir=car.sessions, hermes_home=car.root / "hermes"))
    first = picker.read(picker.find(file_id("p/q"))[0])  # type: ignore[arg-type]
    later = picker.read(picker.find(file_id("r/s"))[0])  # type: ignore[arg-type]
    assert compactor.compact_to_view(first, config).action == "written"
    collided = {"p/q": "p_q_000000000000", "r/s": "p_q_000000000000"}
    monkeypatch.setattr(compactor, "key_of", lambda sid: collided.get(sid, sid))
    view = car.sessions / f"compacted_session_{file_id('p/q')}.json"
    before = view.read_bytes()
    with pytest.raises(SessionError, match=r"belongs to session p_q_\w+, not r_s_\w+; refusing") as caught:
        compactor.compact_to_view(replace(later, path=first.path), config)
    assert "\n" not in str(caught.value) and view.read_bytes() == before
