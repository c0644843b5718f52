"""docker-compose.yml and the README's compose command (issue 17.4)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import REPO

COMPOSE = REPO / "docker-compose.yml"


def readme_compose_commands() -> list[str]:
    """The compose commands the README and its docs/ pages give."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    text = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    found = [line.strip().strip("`") for line in re.findall(r"[^\n`]*docker compose up[^\n`]*", text)]
    return [line for line in found if "#" not in line.split("docker compose up")[0]]  # not in a comment


def test_readme_compose_command_runs_in_bash() -> None:
    """`UID=… docker compose up` fails in bash (UID is read-only); the README's command must not."""
    commands = readme_compose_commands()
    assert commands
    for command in commands:
        script = f'docker() {{ echo "uid=$TIMMY_UID gid=$TIMMY_GID"; }}\n{command}'
        proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30, check=False)
        assert proc.returncode == 0 and "readonly" not in proc.stderr, (command, proc.stderr)
        assert re.match(r"uid=\d+ gid=\d+", proc.stdout), (command, proc.stdout)


def test_compose_file_uses_variables_bash_does_not_own() -> None:
    text = COMPOSE.read_text(encoding="utf-8")
    assert not re.search(r"\$\{(UID|GID|EUID|PPID)\b", text)
    services = yaml.safe_load(text)["services"]
    for name in ("consumer", "watcher"):
        assert services[name]["user"] == "${TIMMY_UID:-1000}:${TIMMY_GID:-1000}"


def test_docker_compose_config_validates_the_file() -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("docker is not installed here (CI with docker runs this)")
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, timeout=30, check=False)
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["?"])[0][:120]
        pytest.skip(f"the docker compose plugin is not available here (CI with docker runs this): {reason}")
    proc = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE), "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"TIMMY_UID": "1000", "TIMMY_GID": "1000", "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp"},
    )
    assert proc.returncode == 0, proc.stderr


DOCKERFILE = REPO / "Dockerfile"


def sidecar_services() -> dict[str, dict[str, object]]:
    services = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]
    return {name: services[name] for name in ("consumer", "watcher")}


def state_dir_in_image() -> tuple[str, str]:
    """(the mount point the image makes writable for any user, the state dir the image sets)."""
    text = DOCKERFILE.read_text(encoding="utf-8")
    made = re.search(r"mkdir -p (/\S+) && chmod 1777 \1", text)
    env = re.search(r"TIMMY_STATE_DIR=(\S+)", text)
    assert made and env, "the Dockerfile must make the state volume's mount point usable by any run user"
    return made.group(1), env.group(1)


def test_the_state_volume_is_usable_by_the_run_user_whatever_its_uid() -> None:
    """A named volume starts as a copy of the image's mount point: root-owned unless the image makes it
    writable. The image makes it 1777 (like /tmp) and the state lives in a folder of its own inside,
    which the run user creates; every service that mounts the volume uses that folder."""
    mount, state_dir = state_dir_in_image()
    assert state_dir.startswith(mount.rstrip("/") + "/")
    for name, service in sidecar_services().items():
        volumes = [str(v) for v in service["volumes"]]  # type: ignore[attr-defined]
        assert f"timmy-state:{mount}" in volumes, (name, volumes)
        assert service["environment"]["TIMMY_STATE_DIR"] == state_dir, name  # type: ignore[index]
        assert service["user"] == "${TIMMY_UID:-1000}:${TIMMY_GID:-1000}"


def test_each_sidecar_service_checks_its_own_health() -> None:
    """Issue 33: the consumer's health is its queue, not the watcher's lock (nor the sessions' state,
    so one broken session file does not mark both containers unhealthy)."""
    services = sidecar_services()
    tests = {name: service["healthcheck"]["test"] for name, service in services.items()}
    assert tests["watcher"] == ["CMD", "timmy-compactor", "status", "--check"]
    assert tests["consumer"] == ["CMD", "timmy-compactor", "watch", "--check-backend"]
    for name, service in services.items():
        assert {"interval", "timeout", "retries"} <= set(service["healthcheck"]), name


def consumer_command(env: dict[str, str], tmp_path: Path) -> str:
    """What the consumer's command would run, with a stand-in `huey_consumer` that prints its arguments
    (compose turns `$$` into `$` before the shell sees it)."""
    command = sidecar_services()["consumer"]["command"]
    assert command[:2] == ["sh", "-c"]
    script = command[2].replace("$$", "$")
    stand_in = tmp_path / "bin" / "huey_consumer"
    stand_in.parent.mkdir(exist_ok=True)
    stand_in.write_text('#!/bin/sh\necho "$@"\n')
    stand_in.chmod(0o755)
    path = f"{stand_in.parent}:{Path(sys.executable).parent}:{os.environ['PATH']}"
    proc = subprocess.run(
        ["sh", "-c", script], env={**env, "PATH": path}, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_consumer_runs_the_workers_of_the_mounted_config_unless_timmy_workers_says(tmp_path: Path) -> None:
    """Issue 33: not a hard-coded `--workers 2`; the config file is mounted (TIMMY_COMPACTOR_CONFIG)."""
    consumer = sidecar_services()["consumer"]
    inside = consumer["environment"]["TIMMY_COMPACTOR_CONFIG"]
    assert any(str(v).endswith(f":{inside}:ro") and "TIMMY_COMPACTOR_CONFIG" in str(v) for v in consumer["volumes"])
    config = tmp_path / "compaction.yaml"
    config.write_text("huey:\n  workers: 5\n")
    env = {"HOME": str(tmp_path), "TIMMY_COMPACTOR_CONFIG": str(config), "TIMMY_WORKERS": ""}
    assert consumer_command(env, tmp_path).split()[:3] == ["tasks.huey", "--workers", "5"]
    assert consumer_command({**env, "TIMMY_WORKERS": "3"}, tmp_path).split()[:3] == ["tasks.huey", "--workers", "3"]


def test_the_default_export_folder_is_on_the_writable_state_volume() -> None:
    for name, service in sidecar_services().items():
        data_home = service["environment"]["XDG_DATA_HOME"]
        assert data_home.startswith("/state/"), name  # /state is 1777 in the image


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_a_user_that_owns_nothing_can_run_the_sidecar_in_the_images_state_layout() -> None:
    """The image's layout without docker: a root-owned 1777 folder as the volume, the state dir inside
    it, the commands run as a user that owns nothing there (nobody): the watcher's start check and the
    healthcheck work, and the state dir is the run user's, 0700."""
    import sys
    import tempfile

    from tests.support import VENV_BIN

    tmp_path = Path(tempfile.mkdtemp(prefix="timmy-compose-"))  # pytest's tmp_path: a 0700 folder of root's
    try:
        image_layout_case(tmp_path, VENV_BIN, sys.executable)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def image_layout_case(tmp_path: Path, venv_bin: Path, python: str) -> None:
    os.chmod(tmp_path, 0o755)
    volume = tmp_path / "state"
    volume.mkdir(mode=0o1777)
    os.chmod(volume, 0o1777)
    hermes = tmp_path / "hermes"
    (hermes / "sessions").mkdir(parents=True)
    os.chown(hermes / "sessions", 65534, 65534)
    _, state_dir = state_dir_in_image()
    state = volume / Path(state_dir).name
    env = {
        "PATH": f"{Path(python).parent}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "HERMES_HOME": str(hermes),
        "TIMMY_STATE_DIR": str(state),
        "TIMMY_HUEY_BACKEND": "sqlite",
    }
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        command = [*nobody, str(venv_bin / "timmy-compactor"), *argv]
        return subprocess.run(command, env=env, cwd="/", capture_output=True, text=True, timeout=120, check=False)

    if run("--version").returncode != 0:
        pytest.skip("the user nobody cannot run this checkout's venv")
    started = run("watch", "--check")
    assert started.returncode == 0, started.stderr
    assert state.stat().st_uid == 65534 and state.stat().st_mode & 0o777 == 0o700
    health = run("status", "--check")
    assert health.returncode == 3 and health.stdout.startswith("unhealthy: no sidecar runs"), health
    assert "Traceback" not in started.stderr + health.stderr
