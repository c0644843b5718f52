"""Without `../shared` (a public clone, issue 17.6) the tests that need real sessions run on the
fixtures under tests/data instead of skipping, and the sidecar benchmark finds its sample."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import DATA, REPO, pytest_in_child


def test_fixtures_are_small_and_present() -> None:
    files = [p for p in DATA.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 1_000_000
    assert {p.name for p in files} >= {
        "session_sample.json",
        "session_20261122_billing_debug.json",
        "session_astropy_12907.json",
        "session_django_11099.json",
    }


def test_tests_run_without_shared(tmp_path: object) -> None:
    env = {**os.environ, "TIMMY_SHARED": "/nonexistent/shared"}
    tests = [
        "tests/test_cli.py::test_corpus_is_present_when_shared_is",
        "tests/test_cli.py::test_every_corpus_session_compacts_and_verifies_with_force",
        "tests/test_dpo_rules.py::test_no_false_pairs_in_the_agent_corpus",
        "tests/test_tokens.py",
        "tests/test_session_io.py",
    ]
    proc = pytest_in_child("-rs", *tests, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    skipped = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
    # only the large sample (353 kB) is not shipped
    assert all("session_sample_large" in line for line in skipped), skipped


def test_bench_sidecar_finds_its_sample_without_shared() -> None:
    code = "import runpy; print(runpy.run_path('bench/bench_sidecar.py', run_name='bench')['SAMPLE'])"
    env = {**os.environ, "TIMMY_SHARED": "/nonexistent/shared"}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == str(DATA / "session_sample.json")


def test_bench_export_runs_on_the_fixtures_without_shared() -> None:
    env = {**os.environ, "TIMMY_SHARED": "/nonexistent/shared"}
    proc = subprocess.run(
        [sys.executable, "bench/bench_export.py", "--sessions", "40", "--repeat", "1", "--redact", "on"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("40 sessions, ") and f"(4 templates from {DATA});" in lines[0], lines
    assert lines[1].startswith("redaction on (export: ")
    figures = [line.split() for line in lines[2:]]
    assert [f[0] for f in figures] == ["full", "no", "1"]  # full, no change, 1 changed
    assert all(f[-1] == "MB/s" and float(f[-2]) > 0 and f[-3] == "sessions/s" for f in figures), lines


def test_test_sh_installs_without_setuptools_banner() -> None:
    """Issue 33: one `--quiet` still printed setuptools' "Editable installation" warning banner; `-qq`
    leaves errors only (a failed build still prints its error and stops the script: `set -e`)."""
    script = (REPO / "test.sh").read_text(encoding="utf-8")
    installs = [line for line in script.splitlines() if " install " in line and " -e " in line]
    assert installs and all(" -qq " in line for line in installs), installs
    assert "set -euo pipefail" in script


def test_the_recall_tests_leave_nothing_in_the_temp_dir(tmp_path: Path) -> None:
    """Issue 33: tests/test_recall_hermes.py left an empty `timmy-recall-hermes-*` folder on every run."""
    pytest.importorskip("agent.context_engine")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    test = "tests/test_recall_hermes.py::test_the_pass_through_limit_is_hermes_own"
    proc = pytest_in_child(test, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == []
