"""Small builders for hand-made sessions in the rule tests."""

from __future__ import annotations

import json
from typing import Any

from timmy_compactor.core.draft import Draft
from timmy_compactor.core.partition import Partition
from timmy_compactor.core.types import Message


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def assistant(content: str = "", *calls: dict[str, Any], **extra: Any) -> Message:
    message: Message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message | extra


def tool(call_id: str, content: str, name: str = "terminal") -> Message:
    return {"role": "tool", "tool_call_id": call_id, "tool_name": name, "content": content}


def terminal(output: str, exit_code: int = 0) -> str:
    return json.dumps({"output": output, "exit_code": exit_code, "error": None})


def middle_draft(messages: list[Message], user_turns: int = 2) -> Draft:
    """A draft whose middle is all of `messages` (rules only ever see the middle)."""
    draft = Draft.start(messages, Partition(0, len(messages)))
    return Draft(head=(), middle=draft.middle, tail=(), user_turns=user_turns, facts=draft.facts)
