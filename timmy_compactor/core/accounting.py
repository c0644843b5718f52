"""What every strategy measures the same way: tokens before and after, usage, the trigger, results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from timmy_compactor.core.readings import Readings
from timmy_compactor.core.tokens import (
    TextCounter,
    count_images,
    message_chars,
    message_sizes,
    pressure_level,
    request_tokens,
)
from timmy_compactor.core.types import Entry, Message, Report, Result, Settings


@dataclass(frozen=True, kw_only=True)
class Accounting:
    messages: Sequence[Message]
    system_prompt: str | None
    tools: Sequence[Any] | None
    fixed_tokens: int  # request tokens outside the messages that the caller only knows as a total
    counter: TextCounter | None
    window: int
    raw_sizes: list[int]
    before: int
    usage: float
    triggered: bool
    # sizes of the messages rules made, measured once per message object (across calls with the same readings)
    readings: Readings = field(default_factory=Readings)

    def sizes(self, messages: Sequence[Message], sources: Sequence[Sequence[int]]) -> list[int]:
        """The size of each message: the raw one's when it is untouched, else measured once."""
        out: list[int] = []
        for message, indices in zip(messages, sources, strict=True):
            if len(indices) == 1 and message is self.messages[indices[0]]:
                out.append(self.raw_sizes[indices[0]])
                continue
            out.append(self.readings.of_object("size", message, lambda m: message_sizes((m,), self.counter)[0]))
        return out

    def view_tokens(self, entries: Sequence[Entry]) -> int:
        """The request's tokens with `entries` as its messages."""
        messages = [e.message for e in entries]
        sizes = self.sizes(messages, [e.sources for e in entries])
        return request_tokens(messages, self.system_prompt, self.tools, self.counter, sizes) + self.fixed_tokens

    @classmethod
    def start(
        cls,
        messages: Sequence[Message],
        settings: Settings,
        *,
        system_prompt: str | None,
        tools: Sequence[Any] | None,
        force: bool,
        counter: TextCounter | None,
        fixed_tokens: int = 0,
        readings: Readings | None = None,
    ) -> Accounting:
        window = settings.context_window
        readings = readings if readings is not None else Readings()
        unit = "tokens" if counter is not None else "chars"  # a counter's sizes are not characters
        size = message_chars if counter is None else lambda m: message_sizes((m,), counter)[0]
        sizes = readings.each(f"size:{unit}", messages, size)
        images = sum(readings.each("images", messages, count_images))
        before = request_tokens(messages, system_prompt, tools, counter, sizes, images=images) + fixed_tokens
        usage = before / window if window else 1.0
        return cls(
            messages=messages,
            system_prompt=system_prompt,
            tools=tools,
            fixed_tokens=fixed_tokens,
            counter=counter,
            window=window,
            raw_sizes=sizes,
            before=before,
            usage=usage,
            triggered=force or (settings.enabled and usage >= settings.trigger_threshold),
            readings=readings,
        )

    def report(self, view: Sequence[Message], sizes: Sequence[int] | None = None, **extra: Any) -> Report:
        after = request_tokens(view, self.system_prompt, self.tools, self.counter, sizes) + self.fixed_tokens
        return Report(
            tokens_before=self.before,
            tokens_after=after,
            messages_before=len(self.messages),
            messages_after=len(view),
            context_window=self.window,
            usage_before=self.usage,
            usage_after=after / self.window if self.window else 1.0,
            pressure_level=pressure_level(self.usage),
            triggered=self.triggered,
            **extra,
        )

    def result(
        self,
        view: list[Message],
        sources: tuple[tuple[int, ...], ...],
        sizes: Sequence[int] | None = None,
        **extra: Any,
    ) -> Result:
        return Result(messages=view, sources=sources, report=self.report(view, sizes, **extra))

    def unchanged(self, **extra: Any) -> Result:
        """The raw messages as the result (not triggered, or failed closed with the reason in `extra`)."""
        sources = tuple((i,) for i in range(len(self.messages)))
        return self.result(list(self.messages), sources, self.raw_sizes, **extra)
