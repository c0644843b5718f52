"""The engine as each Hermes calls it: hermes-agent 0.19 (read from the installed wheel) and Hermes main
(read with the search tools; repository, paths and commits in tests/data/hermes_call_shapes.json). A stub
host makes the calls of the fixture, with the same positional and keyword arguments, in a session's order."""

from __future__ import annotations

import dataclasses
import inspect
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import DATA, assistant, call, tool, user
from timmy_compactor.config import Config, HermesSection, HueySection
from timmy_compactor.core.tokens import messages_tokens

pytest.importorskip("agent.context_engine", reason="hermes-agent is not installed (pip install -e '.[hermes]')")
pytestmark = pytest.mark.hermes

from timmy_compactor.hermes.engine import TimmyContextEngine, unpaired  # noqa: E402

SHAPES: dict[str, Any] = json.loads((DATA / "hermes_call_shapes.json").read_text())
VERSIONS = [name for name in SHAPES if not name.startswith("_")]
WINDOW = 65_536
FIXED = 2_000  # what the messages do not explain: the system prompt and the tool schemas
# Hermes main's default status for the compaction itself (conversation_compression.COMPACTION_STATUS)
SUMMARY_STATUS = "🗜️ Compacting context — summarizing earlier conversation so I can continue..."


def _steps(first: int, count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(first, first + count):
        out.append(assistant(f"step {i}", call(f"c{i}", "terminal", command=f"cat /srv/f{i}.log")))
        out.append(tool(f"c{i}", json.dumps({"output": f"line of f{i}\n" * 40, "exit_code": 0})))
    return out


def _supported(method: Any, candidates: dict[str, Any]) -> dict[str, Any]:
    """Hermes' `_supported_compression_kwargs`: every candidate to a `**kwargs` signature, else the named ones."""
    parameters = inspect.signature(method).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return candidates
    return {name: value for name, value in candidates.items() if name in parameters}


class StubHost:
    """Calls the engine as one Hermes version does: the fixture's shape, values from `values`."""

    def __init__(self, version: str, values: dict[str, Any]) -> None:
        self.calls: dict[str, Any] = SHAPES[version]["calls"]
        self.values = values
        self.made: list[str] = []

    def __call__(self, engine: Any, key: str, **values: Any) -> Any:
        shape, known = self.calls[key], {**self.values, **values}
        method = getattr(engine, shape["method"])
        args = [known[name] for name in shape.get("args", [])]
        kwargs = {name: known[name] for name in shape.get("kwargs", [])}
        if "filtered_kwargs" in shape:
            candidates = {name: known[name] for name in shape["filtered_kwargs"]}
            candidates |= {name: known[name] for name in shape.get("kwargs_if_set", []) if known.get(name)}
            kwargs = _supported(method, candidates)
        self.made.append(key)
        return method(*args, **kwargs)


def _engine(tmp_path: Path, **compaction: Any) -> TimmyContextEngine:
    # the spec's 0.60: this test is about call shapes, not about when Hermes compacts
    config = Config(
        huey=dataclasses.replace(HueySection(), state_dir=str(tmp_path)),
        hermes=HermesSection(trigger_threshold=0.60),
    )
    if compaction:
        config = dataclasses.replace(config, compaction=dataclasses.replace(config.compaction, **compaction))
    return TimmyContextEngine(config)


def _usage(keys: list[str], prompt: int, read: int) -> dict[str, Any]:
    """A usage dict with the version's keys, as Hermes' CanonicalUsage fills it (prompt = input + read + write)."""
    written = (prompt - read) // 3
    full = {
        "prompt_tokens": prompt,
        "completion_tokens": 150,
        "total_tokens": prompt + 150,
        "input_tokens": prompt - read - written,
        "output_tokens": 150,
        "cache_read_tokens": read,
        "cache_write_tokens": written,
        "reasoning_tokens": 0,
    }
    return {key: full[key] for key in keys}


def _run_session(version: str, tmp_path: Path) -> dict[str, Any]:
    shapes = SHAPES[version]
    values: dict[str, Any] = {
        "model": "test-model",
        "context_length": WINDOW,
        "base_url": "http://127.0.0.1:8000/v1",
        "api_key": "sk-not-a-real-key",
        "provider": "custom",
        "api_mode": "chat_completions",
        "session_id": "s0",
        "hermes_home": str(tmp_path),
        "platform": "cli",
        "conversation_id": None,
        "boundary_reason": "compression",
        "empty_usage": {},
        "focus_topic": None,
        "force": False,
        "memory_context": "",
        "bypass_cooldown": False,
        "tool_name": "timmy_recall",
        "tool_args": {"query": "f3.log"},
        "phase": "pre_api",
        "attempt": 1,
        "max_attempts": 3,
    }
    host = StubHost(version, values)
    registered = _engine(tmp_path)
    engine = host(registered, "clone_for_agent") if "clone_for_agent" in shapes["session"] else registered
    found: dict[str, Any] = {"compactions": 0, "prompt": 0, "read": 0, "last": None, "statuses": []}
    messages: list[dict[str, Any]] = [user("start")]
    for step in shapes["session"]:
        if step == "clone_for_agent":
            continue  # made above: Hermes main clones the plugin's engine before anything else
        if step == "turns":
            messages = _turns(host, engine, shapes, messages, found)
            found["after_turns"] = (engine.compression_count, engine.raw.restarts, engine.session_id)
        elif step == "compress:overflow":
            messages += _steps(10_000, 250)  # the provider said the request did not fit
            tokens = messages_tokens(messages, None) + FIXED
            out = host(engine, step, messages=messages, current_tokens=tokens, bypass_cooldown=True)
            found["overflow"] = (messages, out)
            messages = out
        elif step in {"handle_tool_call", "has_content_to_compress", "on_session_end"}:
            found[step] = host(engine, step, messages=messages, session_id=engine.session_id)
        elif step == "get_status":
            found["main_status"] = host(engine, step)
        else:
            found[step] = host(engine, step)
            if step == "update_model":
                values["context_length"] = engine.context_length  # on_session_start passes the engine's own
    found["engine"], found["calls"] = engine, host.made
    return found


def _turns(host: StubHost, engine: Any, shapes: dict[str, Any], messages: list[Any], found: dict[str, Any]) -> Any:
    keys = shapes["calls"]["update_from_response"]["usage_keys"]
    previous = 0
    for turn in range(12):
        messages = [*messages, user(f"turn {turn}"), *_steps(turn * 30, 30)]
        tokens = messages_tokens(messages, None) + FIXED
        read = min(previous, tokens)
        host(engine, "update_from_response", usage=_usage(keys, tokens, read))
        found["prompt"], found["read"], found["last"], previous = (
            found["prompt"] + tokens,
            found["read"] + read,
            (read, tokens),
            tokens,
        )
        assert host(engine, "should_defer_preflight_to_real_usage", prompt_tokens=tokens) is False
        should = host(engine, "should_compress", prompt_tokens=tokens)
        assert should == (tokens >= engine.threshold_tokens)
        if "should_compress_info" in shapes["turn"]:
            assert host(engine, "should_compress_info", prompt_tokens=tokens) == (should, None)
        if not should:
            continue
        if "get_automatic_compaction_status_message" in shapes["turn"]:
            line = host(engine, "get_automatic_compaction_status_message", default_message=SUMMARY_STATUS,
                        approx_tokens=tokens, threshold_tokens=engine.threshold_tokens)  # fmt: skip
            found["statuses"].append(line)
        out = host(engine, "compress", messages=messages, current_tokens=tokens)
        assert out != messages and unpaired(out) <= unpaired(messages) and out[-1] == messages[-1]
        assert messages_tokens(out, None) + FIXED < engine.threshold_tokens
        found["compactions"] += 1
        new_id = f"s{found['compactions']}"
        host(engine, "on_session_start:compression", new_session_id=new_id, old_session_id=engine.session_id)
        host(engine, "update_from_response:empty")
        messages, previous = out, 0
    return messages


@pytest.mark.parametrize("version", VERSIONS)
def test_a_session_as_this_hermes_runs_it_compacts_and_reports(version: str, tmp_path: Path) -> None:
    found = _run_session(version, tmp_path)
    engine: TimmyContextEngine = found["engine"]
    # followed every rotation of the session id with the same raw log
    assert found["compactions"] >= 2 and found["after_turns"] == (found["compactions"], 0, f"s{found['compactions']}")
    assert engine.last_failure is None and json.loads(found["handle_tool_call"]).get("error") is None
    assert found["get_tool_schemas"][0]["name"] == "timmy_recall"
    if "main_status" in found:
        status = found["main_status"]
        read, prompt = found["last"]
        assert status["cache_read_share"] == round(found["read"] / found["prompt"], 4)
        assert status["cache_read_share_last"] == round(read / prompt, 4)
        assert status["last_compress_call"]["bypass_cooldown"] is True  # the overflow's call came last
        before, after = found["overflow"]
        assert messages_tokens(after, None) < messages_tokens(before, None) and unpaired(after) <= unpaired(before)
        assert all(s and "Compacting context" in s and "summariz" not in s for s in found["statuses"])
    assert engine.get_status()["cache_prompt_tokens"] == 0  # on_session_reset ended the session's counts
    expected = [k for k in SHAPES[version]["session"] if k != "turns"]
    assert [k for k in found["calls"] if k in expected] == expected


@pytest.mark.parametrize(
    ("version", "key"), [(v, k) for v in VERSIONS for k in SHAPES[v]["calls"] if not k.endswith(":proposed")]
)
def test_every_call_takes_a_keyword_it_does_not_know(version: str, key: str, tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    engine.update_model("test-model", WINDOW)
    method = getattr(engine, SHAPES[version]["calls"][key]["method"])
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(method).parameters.values())
    samples = {
        "update_model": (("test-model", WINDOW), {}),
        "on_session_start": (("s1",), {}),
        "update_from_response": (({"prompt_tokens": 10},), {}),
        "should_defer_preflight_to_real_usage": ((10,), {}),
        "should_compress": ((10,), {}),
        "should_compress_info": ((10,), {}),
        "compress": (([user("hi"), assistant("hello")],), {}),
        "handle_tool_call": (("timmy_recall", {"query": "x"}), {}),
        "has_content_to_compress": (([user("hi")],), {}),
        "on_session_end": (("s1", []), {}),
        "get_automatic_compaction_status_message": ((), {"phase": "pre_api", "default_message": "x"}),
    }
    args, kwargs = samples.get(method.__name__, ((), {}))
    method(*args, **kwargs, hermes_next_release=True)


def test_the_0_19_sites_are_where_the_fixture_says() -> None:
    import agent

    root = Path(agent.__file__).resolve().parents[1]
    for key, shape in SHAPES["hermes-agent 0.19.0"]["calls"].items():
        name = "compress_fn" if shape["method"] == "compress" else shape["method"]
        for site in shape["sites"]:
            path, line = site.rsplit(":", 1)
            lines = (root / path).read_text().splitlines()
            assert name in lines[int(line) - 1], (key, site)


def test_max_tokens_reserves_the_answer_s_room(tmp_path: Path) -> None:
    """Hermes main's update_model passes no max_tokens; the proposed shape (Hermes #115517) does. The
    trigger and the compaction's budget are then taken from the window less max_tokens."""
    host = StubHost("hermes main", {"model": "m", "context_length": WINDOW, "base_url": "", "api_key": "",
                                     "provider": "", "api_mode": "", "max_tokens": 16_384})  # fmt: skip
    plain, reserved = _engine(tmp_path / "a"), _engine(tmp_path / "b")
    host(plain, "update_model")
    host(reserved, "update_model:proposed")
    pct = plain.threshold_percent
    assert plain.threshold_tokens == int(WINDOW * pct) and reserved.threshold_tokens == int((WINDOW - 16_384) * pct)
    between = (plain.threshold_tokens + reserved.threshold_tokens) // 2
    assert reserved.should_compress(between) and not plain.should_compress(between)
    raw = [user("start"), *_steps(0, 300)]
    plain.compress(raw, current_tokens=messages_tokens(raw, None) + FIXED)
    reserved.compress(raw, current_tokens=messages_tokens(raw, None) + FIXED)
    assert plain.last_report and reserved.last_report
    budget, less = plain.last_report["budget_tokens"], reserved.last_report["budget_tokens"]
    assert less == pytest.approx(budget * (WINDOW - 16_384) / WINDOW, abs=2)
    assert (
        reserved.last_report["tokens_after"] <= less
        and reserved.last_report["tokens_after"] < plain.last_report["tokens_after"]
    )
    host(reserved, "update_model", context_length=WINDOW * 2)  # a later call without max_tokens keeps it
    assert reserved.output_reserve == 16_384 and reserved.threshold_tokens == int((2 * WINDOW - 16_384) * pct)


def test_bypass_cooldown_compacts_after_a_refusal(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    engine.update_model("m", 8_192)
    assert engine.compress([user("hi"), 7]) == [user("hi"), 7]  # type: ignore[list-item]
    assert engine.last_failure
    raw = [user("start"), *_steps(0, 60)]
    out = engine.compress(raw, current_tokens=messages_tokens(raw, None), bypass_cooldown=True, native_summary="x")
    assert out != raw and engine.last_failure is None
    assert engine.last_compress_call == {"force": False, "bypass_cooldown": True, "focus_topic": False,
                                         "memory_context": False, "unknown_keywords": ["native_summary"]}  # fmt: skip


def test_should_compress_info_names_the_one_block(tmp_path: Path) -> None:
    off = _engine(tmp_path, enabled=False)
    off.update_model("m", WINDOW)
    assert off.should_compress_info(off.threshold_tokens - 1) == (False, None)
    blocked, reason = off.should_compress_info(off.threshold_tokens)
    assert blocked is False and reason and reason.startswith("disabled")


def test_the_status_line_says_what_timmy_does(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    preflight = "📦 Preflight compression: ~50,000 tokens >= 39,321 threshold. This may take a moment."
    assert engine.get_automatic_compaction_status_message(phase="preflight", default_message=preflight) == preflight
    engine.emit_automatic_compaction_status = False
    assert engine.get_automatic_compaction_status_message(phase="compress", default_message=SUMMARY_STATUS) is None


def test_cache_counters_read_the_openai_shape_too(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    engine.update_from_response({"prompt_tokens": 1_000, "prompt_tokens_details": {"cached_tokens": 600}})
    engine.update_from_response({"prompt_tokens": 3_000, "completion_tokens": 20, "total_tokens": 3_020})
    engine.update_from_response({})  # no usage: not a request
    status = engine.get_status()
    assert status["cache_read_share"] == round(600 / 4_000, 4) and status["cache_read_share_last"] == 0.0
    assert status["cache_prompt_tokens"] == 4_000


def test_clone_for_agent_is_a_fresh_engine_on_the_same_settings(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    engine.update_model("m", WINDOW, max_tokens=4_096)
    engine.compress([user("start"), *_steps(0, 60)])
    clone = engine.clone_for_agent()
    assert clone is not engine and clone.config is engine.config and clone.raw.messages == []
    assert (clone.context_length, clone.threshold_tokens, clone.output_reserve) == (
        WINDOW,
        engine.threshold_tokens,
        4_096,
    )
