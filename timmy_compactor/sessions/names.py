"""THE session-file naming rule, used everywhere a file name is tested, made or taken apart.

Hermes writes `session_<id>.json`; our view of it is `compacted_session_<id>.json` (which never
matches `session_*.json`), and a bare-array view keeps its provenance in
`compacted_session_<id>.meta.json`. The id is not empty: `session_.json` is not a session, for the
sidecar, the watcher, the export and the evaluation alike. Hermes' temp files (`.session_<id>_XXXX.tmp`),
`sessions.json`, `request_dump_*` and `*.jsonl` are not sessions either.
"""

from __future__ import annotations

from pathlib import Path

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


def session_name(session_id: str) -> str:
    """`abc` → `session_abc.json`."""
    return f"{SESSION_PREFIX}{session_id}{SESSION_SUFFIX}"


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


def meta_path_for(view: Path) -> Path:
    """Where a bare-array view keeps its provenance record."""
    return view.with_name(view.stem + ".meta.json")
