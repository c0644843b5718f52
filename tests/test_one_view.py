"""One session, one view (issue 32, item 4): view names are injective over session ids, and `show`
(recall) answers only with the session asked for, never with another one sharing its name."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import Sidecar, add_db_session, make_state_db, tool_session, user, write_json
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
