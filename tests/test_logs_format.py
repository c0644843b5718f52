"""logs.py: one format for every line, huey's and ours (JSON, or console in a terminal), naming its logger."""

from __future__ import annotations

import io
import json

import structlog

from timmy_compactor import logs


def test_log_lines_carry_their_logger_name() -> None:
    stream = io.StringIO()
    logs.configure("json", "info", stream)
    try:
        logs.get_logger("timmy_compactor.sidecar.work").info("hello", n=1)
    finally:
        structlog.reset_defaults()
    line = json.loads(stream.getvalue())
    assert (line["logger"], line["event"], line["n"]) == ("timmy_compactor.sidecar.work", "hello", 1)
