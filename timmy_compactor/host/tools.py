"""The tool schemas Hermes sends with every request, for sessions that do not record them.

A session in `state.db` has no `tools` field, but every request Hermes makes for it carries the
schemas of the enabled toolsets (~11.5k tokens with the default toolsets of hermes-agent 0.19, 17 %
of a 65,536 window). When Hermes is importable, its own code says which: `hermes_cli.tools_config.
_get_platform_tools(load_config(), "cli")` gives the enabled toolsets and
`model_tools.get_tool_definitions(enabled_toolsets=…)` their schemas, as Hermes' CLI builds them.

Hermes creates its home layout (state.db, SOUL.md, skills/…) on import, so it runs in a fresh
process whose `HERMES_HOME` is a private temporary directory holding only a copy of the user's
`config.yaml` (and a link to its `.env`, whose API keys decide which tools are available): nothing
is written into the real Hermes home, and `~/.hermes` is never created. The result is cached per
process, keyed by the content of those two files. Without Hermes (or when the probe fails) the
documented estimate `TOOLS_ESTIMATE_TOKENS` is used instead.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

TOOLS_ESTIMATE_TOKENS = 11_500
"""Tool-schema tokens of a request with hermes-agent 0.19's default CLI toolsets (observed)."""

_PROBE = """
import json, sys
from hermes_cli.config import load_config
from hermes_cli.tools_config import _get_platform_tools
from model_tools import get_tool_definitions
toolsets = sorted(_get_platform_tools(load_config(), sys.argv[1]))
tools = get_tool_definitions(enabled_toolsets=toolsets, quiet_mode=True)
sys.stdout.write("\\n" + json.dumps({"toolsets": toolsets, "tools": tools}) + "\\n")
"""

_cache: dict[tuple[str, ...], list[dict[str, Any]] | None] = {}
_probing = threading.Lock()  # one probe at a time: a thread that asks meanwhile waits for its answer


def hermes_importable() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("hermes_cli", "model_tools"))


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "-"


def hermes_tool_schemas(
    hermes_home: Path, platform: str = "cli", timeout: float = 120.0
) -> list[dict[str, Any]] | None:
    """The schemas Hermes would send for `platform` with this home's config, or None if unknown."""
    key = (platform, _digest(hermes_home / "config.yaml"), _digest(hermes_home / ".env"))
    with _probing:
        if key not in _cache:
            _cache[key] = _probe(hermes_home, platform, timeout) if hermes_importable() else None
        return _cache[key]


def _probe(hermes_home: Path, platform: str, timeout: float) -> list[dict[str, Any]] | None:
    with tempfile.TemporaryDirectory(prefix="timmy-hermes-tools-") as scratch:
        home = Path(scratch)
        config = hermes_home / "config.yaml"
        if config.is_file():
            shutil.copyfile(config, home / "config.yaml")
        if (hermes_home / ".env").is_file():
            (home / ".env").symlink_to((hermes_home / ".env").resolve())
        env = {**os.environ, "HERMES_HOME": str(home), "HOME": str(home)}
        try:
            proc = subprocess.run(
                [sys.executable, "-c", _PROBE, platform],
                env=env,
                cwd=home,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    try:
        tools = json.loads(proc.stdout.strip().splitlines()[-1]).get("tools")
    except (ValueError, AttributeError):
        return None
    return tools if isinstance(tools, list) else None


def request_extras(
    session_tools: list[Any] | None, source: str, hermes_home: Path, platform: str | None = None
) -> tuple[list[Any] | None, int]:
    """What a request for this session carries besides its messages and system prompt:
    (tool schemas, or None; tokens known only as an estimate, or 0).

    A snapshot records its tools; a state.db session gets the schemas Hermes enables for the platform
    it ran on (`cli` when unknown, or when Hermes cannot say for that platform), or the estimate.
    """
    if session_tools or source != "state.db":
        return session_tools, 0
    tools = hermes_tool_schemas(hermes_home, platform or "cli")
    if tools is None and platform not in (None, "cli"):
        tools = hermes_tool_schemas(hermes_home, "cli")
    return (tools, 0) if tools else (None, TOOLS_ESTIMATE_TOKENS)
