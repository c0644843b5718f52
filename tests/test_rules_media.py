"""Images and other media parts in the middle become a one-line marker; users' media stay."""

from __future__ import annotations

from tests.support import assistant, middle_draft, padding_turns, tool, user
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.rules import media
from timmy_compactor.core.tokens import IMAGE_TOKENS
from timmy_compactor.core.types import Settings

DATA_IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 10_000}}


def test_media_parts_of_tool_and_assistant_messages_become_markers() -> None:
    messages = [
        tool("c1", [{"type": "text", "text": "screenshot"}, DATA_IMAGE]),
        assistant([{"type": "image_url", "image_url": {"url": "https://example.org/chart.png"}}]),
        assistant([{"type": "input_audio", "input_audio": {"data": "UklGR" * 900}}, {"type": "text", "text": "hi"}]),
    ]
    draft, counts = media.apply(middle_draft(messages), Settings())
    assert counts == {"media_to_marker": 3}
    assert draft.middle[0].message["content"] == [
        {"type": "text", "text": "screenshot"},
        {"type": "text", "text": "[image_url removed from context, #0]"},
    ]
    assert draft.middle[1].message["content"] == [
        {"type": "text", "text": "[image_url https://example.org/chart.png removed from context, #1]"}
    ]
    assert draft.middle[2].message["content"][0] == {"type": "text", "text": "[input_audio removed from context, #2]"}
    assert draft.middle[0].message["tool_call_id"] == "c1"


def test_a_small_non_media_part_stays() -> None:
    messages = [assistant([{"type": "refusal", "refusal": "No."}, {"type": "text", "text": "sorry"}])]
    draft, counts = media.apply(middle_draft(messages), Settings())
    assert counts == {} and draft.middle[0].message is messages[0]


def test_users_media_and_text_only_content_are_untouched() -> None:
    messages = [user([{"type": "text", "text": "look"}, DATA_IMAGE]), assistant("plain"), tool("c", [{"type": "text"}])]
    draft, counts = media.apply(middle_draft(messages), Settings())
    assert counts == {}
    assert all(e.message is m for e, m in zip(draft.middle, messages, strict=True))


def test_in_a_session_images_leave_the_middle_only_and_save_their_tokens() -> None:
    shot = [{"type": "text", "text": "here"}, DATA_IMAGE]
    messages = [user([{"type": "text", "text": "first"}, DATA_IMAGE]), assistant("ok")]
    messages += [user("take a screenshot"), assistant(shot), *padding_turns(6), user("again"), assistant(shot)]
    result = compact(messages, Settings(target_after=None, context_window=8_000, protect_last_n_turns=1), force=True)
    assert result.report.verified, result.report.failure
    assert result.report.rules["media_to_marker"] == 1
    assert result.messages[0] is messages[0]  # head
    assert result.messages[-1] is messages[-1]  # tail
    assert result.messages[3]["content"][1] == {"type": "text", "text": "[image_url removed from context, #3]"}
    assert result.report.tokens_before - result.report.tokens_after >= IMAGE_TOKENS - 20
