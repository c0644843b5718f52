"""hermes/setup.py + cli.py: `hermes enable|disable|status`, leaving a Hermes home as they found it."""

from __future__ import annotations

from pathlib import Path

import pytest

from timmy_compactor.cli import main


def test_hermes_enable_on_a_config_that_is_not_a_mapping_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config.yaml").write_text("- just\n- a list\n")
    assert main(["hermes", "enable", "--hermes-home", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("timmy-compactor: error: ") and err.count("\n") == 1 and "not a mapping" in err
