"""Real hermes-agent 0.19.0 (issue 22, item 3): a recall that asks for far more than fits reaches the
model whole, as our answer (not Hermes' 1,500-character preview), and its notes lead to the rest."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import FakeLLM, scripted_turn

pytest.importorskip("run_agent", reason="hermes-agent is not installed (pip install -e '.[hermes]')")
pytestmark = [pytest.mark.hermes, pytest.mark.slow]

from tests.test_hermes_e2e import TURNS, hermes_home, run_hermes  # noqa: E402
from timmy_compactor.host.budget import hermes_passthrough_chars  # noqa: E402

WINDOW = 64_000  # the window `hermes_home` gives the model
NEXT = re.compile(r'ref \\"(#\d+)\\" with offset (\d+)|ref \\"(#\d+-#\d+)\\"')


def big_recall_script(body: dict[str, Any]) -> Any:
    """Turns 1-5 print long outputs; in turn 6 the model asks for 30 messages at a million characters,
    then for the rest the answer's notes name."""
    turn, step = scripted_turn(body)
    if turn < len(TURNS):
        if step < 3:
            return [("terminal", {"command": f"seq 1 {2500 + 10 * turn + step}"})]
        return f"Turn {turn} done."
    if step == 0:
        return [("timmy_recall", {"ref": "#1-#30", "max_chars": 1_000_000})]
    if step == 1:
        match = NEXT.search(str(body["messages"][-1].get("content")))
        if match is None:
            return "Turn 6 done: no rest named."
        if match.group(1):
            return [("timmy_recall", {"ref": match.group(1), "offset": int(match.group(2))})]
        return [("timmy_recall", {"ref": match.group(3)})]
    return "Turn 6 done: recalled."


def test_a_recall_far_over_the_limit_reaches_the_model_whole_and_leads_to_the_rest(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    with FakeLLM(big_recall_script) as llm:
        home = hermes_home(tmp_path, llm.base_url, timmy=True)
        result = run_hermes(home, workdir, llm, "big_recall_e2e", toolsets=("terminal", "file", "context_engine"))
        main = llm.main_requests()
    limit = hermes_passthrough_chars(WINDOW)
    received = [m["content"] for m in main[-1]["messages"] if m.get("role") == "tool" and '"items"' in m["content"]]
    assert len(received) == 2, [str(m.get("content"))[:120] for m in main[-1]["messages"] if m.get("role") == "tool"]
    assert "Truncated: tool response was" not in json.dumps(main[-1]["messages"])
    first, rest = (json.loads(text) for text in received)
    assert 0.9 * limit <= len(received[0]) <= limit and len(received[1]) <= limit
    assert first["truncated"] and first["ref"] == "#1-#30"
    assert f"max_chars 1,000,000 is above {limit:,}" in first["notes"][0]
    last = first["items"][-1]
    if "chars" in last:  # the answer stopped inside a message: the second call goes on where it stopped
        assert rest["items"][0]["ref"] == last["ref"] and rest["items"][0]["chars"][0] == last["chars"][1]
    else:
        assert int(rest["items"][0]["ref"][1:]) == int(last["ref"][1:]) + 1
    assert result["messages"][-1]["content"] == "Turn 6 done: recalled."
