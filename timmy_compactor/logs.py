"""What a run shows while it works: structlog lines (readable in a terminal, JSON lines elsewhere),
each carrying its logger's name, and progress bars in a terminal."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Iterator, Sized
from typing import Any, TypeVar

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
T = TypeVar("T")


class _Bars:
    shown = 0
    """How many progress bars are on the terminal now: log lines go through tqdm.write meanwhile."""


class _CurrentStderr:
    """sys.stderr as it is at each write (not as it was when logging was configured: a test harness
    or a daemon may swap it later). While a progress bar is shown, whole lines go through
    `tqdm.write`, which clears the bar, prints the line and draws the bar again below it."""

    def __init__(self) -> None:
        self._partial = ""

    def write(self, text: str) -> int:
        if not _Bars.shown and not self._partial:
            return one_write(sys.stderr, text)
        from tqdm import tqdm

        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            tqdm.write(line, file=sys.stderr)
        if self._partial and not _Bars.shown:  # the bar is gone: nothing to route around
            sys.stderr.write(self._partial)
            self._partial = ""
        return len(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def one_write(stream: Any, text: str) -> int:
    """`text` written with one write(2) where the stream has a descriptor (a log line is never
    split: two processes appending JSON lines to one file or pipe do not interleave within a line);
    else through the stream."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    if fd is None:
        written = int(stream.write(text))
        stream.flush()
        return written
    stream.flush()  # whatever an earlier plain write left in its buffer goes first
    data = text.encode(getattr(stream, "encoding", None) or "utf-8", "backslashreplace")
    while data:
        data = data[os.write(fd, data) :]
    return len(text)


def configure(fmt: str = "auto", level: str = "info", stream: Any = None) -> None:
    stream = stream or _CurrentStderr()
    as_json = fmt == "json" or (fmt == "auto" and not stream.isatty())
    renderer: Any = structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer(colors=False)
    _route_stdlib(renderer, _LEVELS.get(level, logging.INFO), stream)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _add_logger_name,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        logger_factory=_NamedPrintLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )


class _OurHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The root handler `configure` installs (replaced, not duplicated, on reconfiguration)."""


def _route_stdlib(renderer: Any, level: int, stream: Any) -> None:
    """Send stdlib logging (huey, watchdog, redis) through the same renderer: one format, every line
    with its logger name. huey's consumer adds its own handler to the `huey` logger after loading
    the app; that handler keeps its stream but gets our formatter, and stops propagating (no
    duplicate lines)."""
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
        ],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            renderer,
        ],
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _OurHandler)]:
        root.removeHandler(old)
    handler = _OurHandler(stream)
    handler.setFormatter(formatter)
    root.addHandler(handler)
    root.setLevel(level)
    huey = logging.getLogger("huey")
    if not any(isinstance(f, _TaskRunLines) for f in huey.filters):
        huey.addFilter(_TaskRunLines())
    for existing in huey.handlers:
        existing.setFormatter(formatter)
    if not getattr(huey, "_timmy_routed", False):
        original_add = huey.addHandler

        def add_handler(new: logging.Handler) -> None:
            new.setFormatter(getattr(huey, "_timmy_formatter", formatter))
            if isinstance(new, logging.StreamHandler) and new.stream in (sys.stderr, sys.__stderr__):
                new.setStream(_CurrentStderr())  # one write per line, like ours
            huey.propagate = False
            original_add(new)

        huey.addHandler = add_handler  # type: ignore[method-assign,assignment]
        huey._timmy_routed = True  # type: ignore[attr-defined]
    huey._timmy_formatter = formatter  # type: ignore[attr-defined]


class _TaskRunLines(logging.Filter):
    """huey's `Executing <task>`, `<task> executed in 0.012s` and `Task <id> raised RetryTask` (a
    session still being written: our own debug line says so) as debug lines: a compaction says what
    it did in one line of ours, and huey's would triple it. huey's warnings and errors (a task that
    raised, retries given up) stay as they are."""

    MESSAGES = frozenset({"Executing %s", "%s executed in %0.3fs", "Task %s raised RetryTask, retrying."})

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or record.msg not in self.MESSAGES:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


class _NamedPrintLogger(structlog.PrintLogger):
    def __init__(self, file: Any, name: str | None) -> None:
        super().__init__(file)
        self.name = name

    def msg(self, message: str) -> None:
        """The line and its newline in one write (`print` makes two: another process's line could
        land between them)."""
        with self._lock:
            if isinstance(self._file, _CurrentStderr):
                self._file.write(message + "\n")
            else:
                one_write(self._file, message + "\n")

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg


class _NamedPrintLoggerFactory:
    """structlog's print factory drops the name given to `get_logger`; this one keeps it."""

    def __init__(self, file: Any) -> None:
        self._file = file

    def __call__(self, *args: Any) -> _NamedPrintLogger:
        return _NamedPrintLogger(self._file, str(args[0]) if args else None)


def _add_logger_name(logger: Any, method_name: str, event_dict: Any) -> Any:
    name = getattr(logger, "name", None)
    if name:
        event_dict.setdefault("logger", name)
    return event_dict


def get_logger(name: str) -> Any:
    """A structlog logger whose every line carries `logger=<name>`."""
    return structlog.get_logger(name)


def progress(items: Iterable[T], desc: str, *, total: int | None = None, enabled: bool | None = None) -> Iterable[T]:
    """A tqdm bar on stderr when `enabled` (default: when stderr is a terminal); else `items` as they are."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if total is None and isinstance(items, Sized):
        total = len(items)
    if not enabled or not total:
        return items
    from tqdm import tqdm

    return _shown(tqdm(items, total=total, desc=desc, unit="session", file=sys.stderr, leave=False))


def _shown(bar: Any) -> Iterator[Any]:
    """Iterate the bar, counted as shown meanwhile (log lines are routed around it)."""
    _Bars.shown += 1
    try:
        yield from bar
    finally:
        _Bars.shown -= 1
        bar.close()
