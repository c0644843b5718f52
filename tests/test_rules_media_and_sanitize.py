"""Media parts become markers; orphan tool calls and results are sanitised."""

from __future__ import annotations

from helpers_core import assistant, call, middle_draft, terminal, tool
from timmy_compactor.core.rules import media, sanitize_pairs
from timmy_compactor.core.types import Settings


def test_image_parts_in_the_middle_become_a_marker_but_user_images_stay() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 10_000}}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "look"}, image]},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "shot"}, image]},
    ]
    draft, counts = media.apply(middle_draft(messages), Settings())
    assert counts == {"media_to_marker": 1}
    assert draft.middle[0].message == messages[0]
    assert draft.middle[1].message["content"][1] == {"type": "text", "text": "[image_url removed from context, #1]"}


def test_call_without_result_becomes_a_line() -> None:
    messages = [assistant("trying", call("c1", "terminal", command="cat /srv/x.log")), {"role": "user", "content": "?"}]
    draft, counts = sanitize_pairs.apply(middle_draft(messages), Settings())
    assert counts == {"sanitize_tool_pairs": 1}
    first = draft.middle[0].message
    assert "tool_calls" not in first
    assert '[tool: terminal("cat /srv/x.log") → no result, #0]' in first["content"]


def test_result_without_call_becomes_a_note_keeping_its_error() -> None:
    messages = [assistant("done"), tool("ghost", terminal("Permission denied: /root/x", exit_code=1))]
    draft, counts = sanitize_pairs.apply(middle_draft(messages), Settings())
    assert counts == {"sanitize_tool_pairs": 1}
    (entry,) = draft.middle
    assert entry.sources == (0, 1)
    assert "without a call: terminal → failed: Permission denied: /root/x" in entry.message["content"]
