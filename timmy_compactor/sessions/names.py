"""THE session-file naming rule, used everywhere a file name is tested, made or taken apart.

Hermes writes `session_<id>.json`; our view of it is `compacted_session_<id>.json` (which never
matches `session_*.json`), and a bare-array view keeps its provenance in
`compacted_session_<id>.meta.json`. The id is not empty: `session_.json` is not a session, for the
sidecar, the watcher, the export and the evaluation alike. Hermes' temp files (`.session_<id>_XXXX.tmp`),
`sessions.json`, `request_dump_*` and `*.jsonl` are not sessions either.

A session id comes from Hermes (its `state.db`, a file name, the engine's hooks) and is never trusted:
`file_id` is the one function that turns it into the `<id>` of a file name, and every path built
from an id goes through it (`session_name`). `inside` checks that a path about to be written is in
the folder it must be in.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from timmy_compactor.errors import TimmyError

SESSION_PREFIX = "session_"
SESSION_SUFFIX = ".json"
VIEW_PREFIX = "compacted_"


def is_session_name(name: str) -> bool:
    """`session_<id>.json` with a non-empty id."""
    return (
        name.startswith(SESSION_PREFIX)
        and name.endswith(SESSION_SUFFIX)
        and len(name) > len(SESSION_PREFIX) + len(SESSION_SUFFIX)
    )


MAX_ID_CHARS = 1_000
"""An id longer than this is not an id (a damaged or hostile row): refused, not shortened."""
_UNSAFE_CHARS = re.compile(r"[^\w-]")
_KEPT_CHARS = 96
_ESCAPED_TAIL = re.compile(r"_[0-9a-f]{12}\Z")
"""How every escaped file id ends (`_` + 12 hex digits of the id's hash): a plain id that ends so is
escaped too, so that no plain id is ever the escaped name of another id."""


class UnsafeIdError(TimmyError, ValueError):
    """A session id no file name can stand for (empty, not text, or over MAX_ID_CHARS)."""


def file_id(session_id: object) -> str:
    """THE rule from a session id to the `<id>` of its file names: one path component, at most
    109 characters, whatever the id holds.

    It is the rule of Hermes' own snapshot writer (`run_agent._safe_session_filename_component`,
    hermes-agent 0.19), so a state.db session's view sits beside the snapshot Hermes writes for it:
    an id of word characters and `-` is its own file id (existing views keep their names); in any
    other id every other character (`/`, `\\`, `.`, NUL...) becomes `_`, leading and trailing `._`
    go, the rest is cut to 96 characters and `_` + 12 hex digits of the id's sha256 are appended
    (two ids never share a name by accident). Two differences: an id with surrounding whitespace is
    hashed whole (Hermes gives ` a ` the name of `a`; here two sessions never share a view), and a
    plain id that ends like an escaped one (`a_b_<12 hex>`, which is the file id of `a/b`) is escaped
    too: plain file ids never end so and escaped ones always do, so no two ids map to one name.
    Raises UnsafeIdError for an empty id, one that is not text, or one over MAX_ID_CHARS."""
    if not isinstance(session_id, str):
        raise UnsafeIdError(f"a session id must be text, got {type(session_id).__name__}")
    if not session_id.strip():
        raise UnsafeIdError("empty session id")
    if len(session_id) > MAX_ID_CHARS:
        raise UnsafeIdError(f"session id of {len(session_id):,} characters (over {MAX_ID_CHARS:,})")
    raw = session_id.strip()
    sanitized = _UNSAFE_CHARS.sub("_", raw).strip("._")[:_KEPT_CHARS] or "session"
    if sanitized == session_id and not _ESCAPED_TAIL.search(session_id):
        return sanitized
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{sanitized}_{digest}"


def id_problem(session_id: object) -> str | None:
    """Why no file name (and no query of state.db) can stand for this id, or None: `file_id`'s refusals,
    and an id that is not valid UTF-8 (its bytes kept as surrogates by the reader that met it)."""
    try:
        file_id(session_id)
    except UnsafeIdError as exc:
        return str(exc)
    assert isinstance(session_id, str)
    if any("\ud800" <= c <= "\udfff" for c in session_id):
        return "session id that is not valid UTF-8"
    return None


def shown_id(session_id: object) -> str:
    """A session id as a log line or an error may name it: its file id, or a placeholder."""
    try:
        return file_id(session_id)
    except UnsafeIdError as exc:
        return f"<{exc}>"


def session_name(session_id: str) -> str:
    """`abc` → `session_abc.json` (the id through `file_id`: `x/../y` → `session_x%2F%2E%2E%2Fy.json`)."""
    return f"{SESSION_PREFIX}{file_id(session_id)}{SESSION_SUFFIX}"


class OutsideFolderError(TimmyError, ValueError):
    """A path that would be written outside the folder it belongs in."""


def inside(path: Path, folder: Path) -> Path:
    """`path`, after checking that it names an entry directly in `folder` (symlinks and `..`
    resolved): raises OutsideFolderError otherwise. Call it before writing where an id went in."""
    base = folder.expanduser().resolve()
    parent = path.expanduser().parent.resolve()
    if parent != base or path.name in ("", ".", "..") or "/" in path.name or "\x00" in path.name:
        raise OutsideFolderError(f"{path}: refusing to write outside {base}")
    return base / path.name


def snapshot_path(sessions_dir: Path, session_id: str) -> Path:
    """Where Hermes writes (or would write) the JSON snapshot of a session (a state.db session's too):
    the name its view is named after (`view_path_for`)."""
    return sessions_dir / session_name(session_id)


def session_id_of(path: Path | str) -> str:
    """The id in `session_<id>.json`; for any other file (`chat.json`, a bare array), its stem."""
    name = Path(path).name
    if is_session_name(name):
        return name[len(SESSION_PREFIX) : -len(SESSION_SUFFIX)]
    return Path(name).stem.removeprefix(SESSION_PREFIX)


def is_view_name(name: str) -> bool:
    return name.startswith(VIEW_PREFIX)


def view_path_for(raw: Path) -> Path:
    """`…/session_<id>.json` → `…/compacted_session_<id>.json`."""
    return raw.with_name(VIEW_PREFIX + raw.name)


def view_path(sessions_dir: Path, key: str) -> Path:
    """THE name of a session's view, from its key (its file id, whichever source holds it):
    `<sessions_dir>/compacted_session_<key>.json`, checked to be in `sessions_dir` (OutsideFolderError)."""
    return inside(sessions_dir / f"{VIEW_PREFIX}{SESSION_PREFIX}{key}{SESSION_SUFFIX}", sessions_dir)


def raw_path_of(view: Path, raw_file: str) -> Path:
    """The raw file a view's provenance names (`raw_file`), or for a session of a source with no file
    of its own (`state.db#<key>`) where its snapshot is or would be."""
    _, named_by_source, key = raw_file.rpartition("#")
    return view.with_name(f"{SESSION_PREFIX}{key}{SESSION_SUFFIX}" if named_by_source else raw_file)


def view_key(name: str) -> str | None:
    """The key a view's file name carries (`compacted_session_<key>.json`), or None for any other name."""
    if not is_view_name(name) or name.endswith(".meta.json"):
        return None
    raw = name[len(VIEW_PREFIX) :]
    return session_id_of(raw) if is_session_name(raw) else None


def meta_path_for(view: Path) -> Path:
    """Where a bare-array view keeps its provenance record."""
    return view.with_name(view.stem + ".meta.json")
