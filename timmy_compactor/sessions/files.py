"""Session files: read a raw session, write its view atomically, read a view back (names: `names`).

Accepted inputs: a Hermes session snapshot (an object with `messages`, `system_prompt`, `tools`
...), any JSON object with a `messages` list, or a bare JSON array of messages. The view has the
same shape as its input; objects gain a `timmy_compaction` key with the provenance, arrays get a
`<view>.meta.json` beside them.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import re
import stat
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from timmy_compactor.atomic import atomic_write, host_tag, pid_is_dead, temp_writer
from timmy_compactor.core.redact import redact_document_fields
from timmy_compactor.core.types import Message, Result
from timmy_compactor.errors import TimmyError
from timmy_compactor.sessions.names import is_view_name, meta_path_for, session_id_of

META_KEY = "timmy_compaction"


class SessionError(TimmyError, ValueError):
    """A session file that cannot be used. `str()` is one line naming the file and the problem."""

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = Path(path)
        self.problem = problem


@dataclass(frozen=True, kw_only=True)
class Session:
    path: Path
    shape: Literal["object", "array"]
    document: dict[str, Any] | None  # the top-level object (None for a bare array)
    messages: list[Message]
    sha256: str
    source: str = "file"  # or "state.db" (the live rows of Hermes' database), or "timmy engine" (its raw log)
    platform: str | None = None  # for state.db sessions: the Hermes platform (its toolsets)

    @property
    def session_id(self) -> str:
        if self.document and isinstance(self.document.get("session_id"), str):
            return str(self.document["session_id"])
        return session_id_of(self.path)

    @property
    def system_prompt(self) -> str | None:
        value = self.document.get("system_prompt") if self.document else None
        return value if isinstance(value, str) else None

    @property
    def tools(self) -> list[Any] | None:
        value = self.document.get("tools") if self.document else None
        return value if isinstance(value, list) else None

    @property
    def model(self) -> str | None:
        value = self.document.get("model") if self.document else None
        return value if isinstance(value, str) else None

    @property
    def base_url(self) -> str | None:
        value = self.document.get("base_url") if self.document else None
        return value if isinstance(value, str) else None


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parse_session(path: Path, data: bytes) -> Session:
    if not data.strip():
        raise SessionError(path, "file is empty (half-written? try again after the writer finishes)")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SessionError(path, f"not UTF-8 text (invalid byte at offset {exc.start})") from None
    try:
        document = load_json(data)
    except orjson.JSONDecodeError as exc:
        raise SessionError(path, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:  # the stdlib parser: an integer too long, nesting too deep
        raise SessionError(path, f"unusable JSON ({_one_line(exc)})") from None
    messages: Any
    shape: Literal["object", "array"]
    top: dict[str, Any] | None
    if isinstance(document, list):
        messages, shape, top = document, "array", None
    elif isinstance(document, dict):
        messages, shape, top = document.get("messages"), "object", document
        if messages is None:
            raise SessionError(path, "JSON object has no 'messages' list (not a Hermes session?)")
    else:
        raise SessionError(path, f"expected a JSON object or array, got {type(document).__name__}")
    if not isinstance(messages, list):
        raise SessionError(path, f"'messages' is a {type(messages).__name__}, expected a list")
    if (top is not None and META_KEY in top) or is_view_name(path.name):
        raise SessionError(path, "is a compacted view, not a raw session (compact its raw session_<id>.json)")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise SessionError(path, f"message {i} is a {type(message).__name__}, expected an object")
    return Session(path=path, shape=shape, document=top, messages=messages, sha256=sha256_bytes(data))


MAX_FILE_BYTES = 1 << 30
"""The largest session, view or record file read (1 GiB): a bigger one is refused, never read into memory."""


def read_regular(path: Path, limit: int = MAX_FILE_BYTES, *, follow: bool = True) -> bytes:
    """The bytes of a regular file (a link to one is followed unless `follow` is False), never of a
    FIFO, a device or a socket: opened without blocking (a FIFO with no writer would wait forever),
    checked by `fstat` on the open file (no race with a rename), and read up to `limit`. OSError
    (ENOENT, ELOOP, EISDIR, ...) or SessionError (not a regular file, too large) otherwise."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file (a FIFO, device or socket)"
            raise SessionError(path, f"is {kind}: only regular files are read")
        if info.st_size > limit:
            raise SessionError(path, f"is {info.st_size:,} bytes, over the {limit:,} read at most")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise SessionError(path, f"grew past the {limit:,} bytes read at most")
    return data


def read_session(path: Path) -> Session:
    try:
        data = read_regular(path)
    except FileNotFoundError:
        raise SessionError(path, "no such file") from None
    except IsADirectoryError:
        raise SessionError(path, "is a directory, expected a session .json file") from None
    except OSError as exc:
        raise SessionError(path, f"cannot read ({exc.strerror or type(exc).__name__})") from None
    return parse_session(path, data)


def raw_file_name(session: Session) -> str:
    """How a view's provenance names its raw session: its file's name, or `<source>#<file id>` for a
    session whose source has no file of its own (state.db: no invented `session_<id>.json`)."""
    return session.path.name if session.source == "file" else f"{session.source}#{session_id_of(session.path)}"


def build_view(
    session: Session, result: Result, meta: dict[str, Any], *, redact: bool = False
) -> tuple[Any, dict[str, Any]]:
    """The view document (same shape as the raw) and its provenance record; with `redact`, the
    document's fields besides the messages and ids (system prompt, `base_url`...) redacted."""
    provenance = {
        **meta,
        "source": session.source,
        "raw_file": raw_file_name(session),
        "raw_sha256": session.sha256,
        "sources": [list(s) for s in result.sources],
        "report": result.report.as_dict(),
    }
    if session.shape == "array":
        return result.messages, provenance
    assert session.document is not None
    view = redact_document_fields(session.document) if redact else dict(session.document)
    view["messages"] = result.messages
    if "message_count" in view:
        view["message_count"] = len(result.messages)
    view[META_KEY] = provenance
    return view, provenance


_BIG_INT = re.compile(rb"\d{19,}")
"""A run of digits that may be an integer beyond 64 bits (orjson would turn it into a float)."""
_DEEP_LIMIT = 20_000


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deep"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def load_json(data: bytes) -> Any:
    """orjson, or the stdlib parser for a document with integers beyond 64 bits (kept exact, not floats)."""
    if not _BIG_INT.search(data):
        return orjson.loads(data)
    orjson.loads(data)  # the same syntax errors, with line and column
    with _deeper_recursion():
        return json.loads(data)


@contextlib.contextmanager
def _deeper_recursion() -> Iterator[None]:
    """The stdlib codec recurses per nesting level; orjson accepts up to 1,024 levels on read."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, _DEEP_LIMIT))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def encode_json(document: Any) -> bytes:
    """Hermes writes indent=2 with raw UTF-8; do the same so views diff cleanly against raws.

    orjson refuses integers beyond 64 bits and nesting beyond 254 levels; the stdlib encoder writes
    those. A document even it cannot write raises ValueError with a one-line reason."""
    try:
        return orjson.dumps(document, option=orjson.OPT_INDENT_2, default=str) + b"\n"
    except orjson.JSONEncodeError:
        pass
    try:
        with _deeper_recursion():
            text = json.dumps(document, indent=2, ensure_ascii=False, default=str)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"cannot encode as JSON: {_one_line(exc)}") from None
    return text.encode("utf-8", "surrogatepass") + b"\n"


def write_view(session: Session, result: Result, meta: dict[str, Any], target: Path, *, redact: bool = False) -> None:
    """With `redact` (`redact_credentials`), the document's other fields are redacted like the middle."""
    if target.resolve() == session.path.resolve():
        raise SessionError(target, "refusing to overwrite the raw session with its view")
    view, provenance = build_view(session, result, meta, redact=redact)
    try:
        mode = stat.S_IMODE(session.path.stat().st_mode)
    except OSError:
        mode = 0o600
    try:
        encoded = encode_json(view)
        encoded_meta = encode_json(provenance) if session.shape == "array" else None
    except ValueError as exc:
        raise SessionError(session.path, f"its view cannot be written: {exc}") from None
    if encoded_meta is not None:
        atomic_write(meta_path_for(target), encoded_meta, mode)
    atomic_write(target, encoded, mode)


def read_provenance(view_path: Path) -> tuple[Any, dict[str, Any]]:
    """The view document and its provenance record."""
    try:
        document = load_json(read_regular(view_path))
    except FileNotFoundError:
        raise SessionError(view_path, "no such file") from None
    except OSError as exc:
        raise SessionError(view_path, f"cannot read ({exc.strerror or type(exc).__name__})") from None
    except orjson.JSONDecodeError as exc:
        raise SessionError(view_path, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:
        raise SessionError(view_path, f"unusable JSON ({_one_line(exc)})") from None
    if isinstance(document, dict) and isinstance(document.get(META_KEY), dict):
        return document, document[META_KEY]
    meta_file = meta_path_for(view_path)
    if isinstance(document, list) and meta_file.exists():
        try:
            return document, load_json(read_regular(meta_file))
        except OSError as exc:
            raise SessionError(meta_file, f"cannot read ({exc.strerror or type(exc).__name__})") from None
    raise SessionError(view_path, f"not a timmy-compactor view (no '{META_KEY}' record)")


def remove_view(view: Path) -> bool:
    removed = False
    for path in (view, meta_path_for(view)):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed = True
    return removed


TEMP_MAX_AGE_SECONDS = 3600.0
"""A view's temp file this old is a dead writer's whoever wrote it (a write takes milliseconds)."""


def remove_leftover_temp_files(view: Path) -> int:
    """Remove the hidden temp files of writers of `view` that died mid-write (`.<view>.XXXX.tmp`,
    and those of its `.meta.json`): those a dead process of this host left (`atomic.temp_tag` in
    the name), or any over TEMP_MAX_AGE_SECONDS old. Another host's writer may be mid-write (one
    sessions folder, several consumers): its younger temp files stay."""
    removed = 0
    for target in (view, meta_path_for(view)):
        for tmp in target.parent.glob(f".{glob.escape(target.name)}.*.tmp"):
            if not _dead_writers(tmp, target.name):
                continue
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
                removed += 1
    return removed


def _dead_writers(tmp: Path, target_name: str) -> bool:
    writer = temp_writer(tmp.name[len(target_name) + 2 : -len(".tmp")])
    if writer is not None and writer[0] == host_tag() and pid_is_dead(writer[1]):
        return True
    try:
        return time.time() - tmp.stat().st_mtime > TEMP_MAX_AGE_SECONDS
    except FileNotFoundError:
        return False
