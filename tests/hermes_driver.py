"""Run a conversation with the real Hermes Agent (in its own process; HERMES_HOME from the env).

python tests/hermes_driver.py BASE_URL SESSION_ID WORKDIR TURNS_JSON  -> prints one JSON line

With HERMES_DRIVER_RESUME=1 the conversation goes on from the session's rows in state.db, as
`hermes --resume SESSION_ID` loads them; with HERMES_DRIVER_RETRY=1 the last turn is retried after the
others, as `/retry` does. Each compress() call Hermes makes is recorded (messages in and out, and for
the `timmy` engine the report get_status() gives right after it: its tiers, as `rules` counts).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def main() -> None:
    base_url, session_id, workdir, turns_json = sys.argv[1:5]
    os.chdir(workdir)
    from hermes_state import SessionDB
    from run_agent import AIAgent

    toolsets = json.loads(os.environ.get("HERMES_DRIVER_TOOLSETS", '["terminal", "file"]'))
    if toolsets == "cli":  # what Hermes' CLI enables with this home's config
        from hermes_cli.config import load_config
        from hermes_cli.tools_config import _get_platform_tools

        toolsets = sorted(_get_platform_tools(load_config(), "cli"))
    agent = AIAgent(
        base_url=base_url,
        api_key="sk-local-not-a-secret",
        model="scripted-coder-1",
        quiet_mode=True,
        enabled_toolsets=toolsets,
        session_id=session_id,
        skip_memory=True,
        skip_context_files=True,
        platform="cli",
        tool_delay=0,
        session_db=SessionDB(),
        **(
            {"max_iterations": int(os.environ["HERMES_DRIVER_MAX_ITERATIONS"])}
            if "HERMES_DRIVER_MAX_ITERATIONS" in os.environ
            else {}
        ),
    )
    compactions = record_compactions(agent.context_compressor)
    history: list[dict[str, object]] = []
    if os.environ.get("HERMES_DRIVER_RESUME") == "1":
        restored = SessionDB().get_messages_as_conversation(session_id, repair_alternation=True)
        history = [m for m in restored if m.get("role") != "session_meta"]
    start = time.perf_counter()
    for text in json.loads(turns_json):
        result = agent.run_conversation(text, conversation_history=history)
        history = result["messages"]
    if os.environ.get("HERMES_DRIVER_RETRY") == "1":  # what Hermes' /retry does: cut at the last user turn, ask again
        last = max(i for i, m in enumerate(history) if m.get("role") == "user")
        text = history[last]["content"]
        result = agent.run_conversation(text, conversation_history=history[:last])
        history = result["messages"]
    engine = agent.context_compressor
    print(
        json.dumps(
            {
                "engine": getattr(engine, "name", type(engine).__name__),
                "compression_count": getattr(engine, "compression_count", 0),
                "status": engine.get_status(),
                "messages": history,
                "session_id": agent.session_id,
                "compactions": compactions,
                "wall_s": time.perf_counter() - start,
            },
            default=str,
        )
    )


def record_compactions(engine: Any) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    compress = engine.compress

    def recorded(messages: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        before = len(messages)
        result = compress(messages, *args, **kwargs)
        report = engine.get_status().get("last_compaction") if getattr(engine, "name", "") == "timmy" else None
        records.append({"messages_in": before, "messages_out": len(result), "report": report})
        return result

    engine.compress = recorded
    return records


if __name__ == "__main__":
    main()
