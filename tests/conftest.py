"""Shared fixtures: real redis-server processes, sidecar directories, Hermes-style writes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SAMPLES = SHARED / "samples"
CORPUS = SHARED / "corpus"
VENV_BIN = Path(sys.executable).parent

settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=30, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
        self.proc = subprocess.Popen(
            [
                "redis-server",
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
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None

    def flush(self) -> None:
        import redis

        redis.Redis.from_url(self.url).flushall()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        if os.environ.get("TIMMY_REQUIRE_REDIS") == "1":
            pytest.fail("redis-server is required (TIMMY_REQUIRE_REDIS=1) but not installed")
        pytest.skip("redis-server not installed (apt-get install -y redis-server)")
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


DATA = REPO / "tests" / "data"  # a copy of the main Hermes sample, for checkouts without ../shared


def load_sample(name: str = "session_sample.json") -> dict[str, Any]:
    path = SAMPLES / name if (SAMPLES / name).exists() else DATA / name
    if not path.exists():
        pytest.skip(f"sample {name} not available")
    return json.loads(path.read_text(encoding="utf-8"))


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

    def start(self, name: str) -> subprocess.Popen[bytes]:
        if name == "consumer":
            cmd = [
                str(VENV_BIN / "huey_consumer"),
                "tasks.huey",
                "-w",
                "2",
                "-k",
                "process",
                "-d",
                "0.05",
                "-m",
                "0.05",
                "-b",
                "1.0",
                "-f",
            ]
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

    def log_text(self) -> str:
        return "\n".join(f"--- {n} ---\n{p.read_text(errors='replace')[-4000:]}" for n, p in self.logs.items())


@pytest.fixture(params=["sqlite", "redis"])
def sidecar(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sidecar]:
    redis_url = None
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        server.flush()
        redis_url = server.url
    car = Sidecar(tmp_path, request.param, redis_url)
    car.redis = request.getfixturevalue("redis_server") if request.param == "redis" else None  # type: ignore[attr-defined]
    yield car
    car.stop_all()


def wait_for(predicate: Any, timeout: float = 10.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
