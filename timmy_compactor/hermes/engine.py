"""The `timmy` context engine for Hermes Agent: the same pure `compact()`, zero LLM calls.

Hermes loads it through the `hermes_agent.plugins` entry point (`register(ctx)` below) when
`timmy` is listed in `plugins.enabled` and `context.engine: timmy` is set in
`$HERMES_HOME/config.yaml` (`timmy-compactor hermes enable` does both). This module imports Hermes;
nothing else in the package does.

It logs through the standard `logging` module (logger `timmy_compactor.hermes`), so its lines go
wherever Hermes sends its own logs instead of onto the agent's terminal.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import logging
import time
from typing import Any

from agent.context_engine import ContextEngine

from timmy_compactor.config import Config, engine_trigger, load_config, make_counter, resolve_context_window
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.readings import Readings
from timmy_compactor.core.recall import RECALL_TOOL
from timmy_compactor.core.tokens import TextCounter, messages_tokens, pressure_level
from timmy_compactor.core.types import Settings
from timmy_compactor.hermes.recall_tool import RECALL_SCHEMA, answer, calls_in_turn
from timmy_compactor.hermes.shape import as_hermes_keeps_it, unpaired
from timmy_compactor.hermes.usage import CacheCounts, cache_counts
from timmy_compactor.host.names import ENGINE_NAME
from timmy_compactor.sessions.rawlog import RawLog
from timmy_compactor.sessions.rawstore import RawStore

log = logging.getLogger("timmy_compactor.hermes")


class TimmyContextEngine(ContextEngine):  # type: ignore[misc]
    """Rule-based compaction inside Hermes: deterministic, milliseconds, fails closed.

    Every method Hermes calls takes keywords it does not know (`**_`): hosts newer than the one this
    was written against add optional arguments (Hermes main's `bypass_cooldown`, the `max_tokens`
    asked for in Hermes #115517), and an engine that raises TypeError on one stops compacting."""

    emit_automatic_compaction_status = True  # Hermes main reads it; our hook below words the status

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or load_config()
        self.threshold_percent = self.config.compaction.trigger_threshold
        self.trigger_reason = "until Hermes names the model: compaction.trigger_threshold"
        self.model = ""
        self.base_url = ""
        self.context_length = 0
        self.threshold_tokens = 0
        self.output_reserve = 0  # `max_tokens` Hermes reserves for the answer, out of the same window
        self.last_report: dict[str, Any] | None = None
        self.last_failure: str | None = None
        self.compactions_failed = 0
        self.compaction_ms_total = 0.0
        self.raw = RawLog()
        self.readings = Readings()  # what compactions read of the raw log: each message is read once
        self.readings_of = 0  # the raw log's `replaced` count the readings belong to
        self.store = RawStore(self.config.engine_raw_dir)
        self.store_failure: str | None = None
        self.raw_log_resumed = False
        self.session_id: str | None = None
        self.recalls = 0
        self.cache = CacheCounts()
        self.last_cache: CacheCounts | None = None
        self.last_compress_call: dict[str, Any] = {}
        with contextlib.suppress(OSError):  # housekeeping only; a save reports a store that does not work
            self.store.prune()
        # Read by Hermes after compress(): we never abort a summary, and progress is real or none.
        self._last_compress_aborted = False
        self._last_compression_made_progress = False
        self._counter: TextCounter | None = None
        self._counter_made = False

    @property
    def name(self) -> str:
        return ENGINE_NAME

    def update_model(  # noqa: PLR0917 -- Hermes' signature
        self,
        model: str,
        context_length: int,
        base_url: str = "",
        api_key: str = "",
        provider: str = "",
        api_mode: str = "",
        max_tokens: int | None = None,
        **_: Any,
    ) -> None:
        """Hermes' window for the model, unless our config sets one; the fallback chain's minimum.

        `max_tokens` (not passed by hermes-agent 0.19 nor by Hermes main at the commit our contract
        tests pin; asked for in Hermes #115517) is the output the provider reserves out of the same
        window. Hermes' own compressor computes its trigger as `threshold × (window − max_tokens)`
        (`_compute_threshold_tokens`), and so do we; the compaction's budget is taken from that input
        window as well, so what a compaction leaves fits with the answer's room beside it. None keeps
        the reservation given before, as the built-in compressor keeps the one it was built with."""
        self.model, self.base_url = model, base_url
        if max_tokens is not None:
            self.output_reserve = max(0, int(max_tokens))
        configured = self.config.model.context_window is not None or model in self.config.model.context_windows
        window = resolve_context_window(self.config, model, base_url) if configured else context_length
        if self.config.model.fallback_models:
            window = min(window, resolve_context_window(self.config, None))
        self.context_length = int(window)
        trigger = engine_trigger(self.config, self._input_window())
        self.threshold_percent, self.trigger_reason = trigger.ratio, trigger.reason
        self.threshold_tokens = int(self._input_window() * self.threshold_percent)

    def _window(self) -> int:
        """The one window rule: the window `update_model` settled on; before Hermes named a model (or
        when it gave none), the one our config resolves (`config.resolve_context_window`)."""
        return self.context_length or resolve_context_window(self.config, self.model or None, self.base_url or None)

    def _input_window(self) -> int:
        """The window less the output Hermes reserves (`max_tokens`), or the whole window when the
        reservation would leave nothing (as Hermes' `_effective_input_window`)."""
        window = self._window()
        return window - self.output_reserve if window > self.output_reserve else window

    def _settings(self) -> Settings:
        """The engine's settings for this window: its input window, the trigger it applies (config.
        engine_trigger; Hermes may lower it, as 0.19 does for a smaller summary model), a target no
        higher than that trigger."""
        c = self.config.compaction
        target = None if c.target_after is None else min(c.target_after, self.threshold_percent)
        return dataclasses.replace(
            c, context_window=self._input_window(), trigger_threshold=self.threshold_percent, target_after=target
        )

    def _token_counter(self) -> TextCounter | None:
        """The token counter of our config, made once (an `hf:` tokenizer is loaded from disk)."""
        if not self._counter_made:
            self._counter, self._counter_made = make_counter(self.config), True
        return self._counter

    def update_from_response(self, usage: dict[str, Any], **_: Any) -> None:
        """Hermes' counts for the last request; the prompt-cache counters of the session."""
        self.last_prompt_tokens = int(usage.get("prompt_tokens") or 0)
        self.last_completion_tokens = int(usage.get("completion_tokens") or 0)
        self.last_total_tokens = int(usage.get("total_tokens") or 0)
        counts = cache_counts(usage)
        if counts is not None:
            self.cache, self.last_cache = self.cache + counts, counts
            if self.session_id:  # for `timmy-compactor status` (its cache-read share); a failed write costs nothing
                with contextlib.suppress(OSError, ValueError):
                    self.store.save_usage(self.session_id, dataclasses.asdict(self.cache))

    def should_compress(self, prompt_tokens: int | None = None, **_: Any) -> bool:
        return self.should_compress_info(prompt_tokens)[0]

    def should_compress_info(self, prompt_tokens: int | None = None, **_: Any) -> tuple[bool, str | None]:
        """(compact now, why not although over the trigger), the shape Hermes main's base class
        defines: the reason is None below the trigger and when compacting; the engine has no cooldown
        and no anti-thrash guard, so the one block is compaction switched off in our config."""
        tokens = prompt_tokens if prompt_tokens is not None else self.last_prompt_tokens
        if not self.threshold_tokens or tokens < self.threshold_tokens:
            return False, None
        if not self.config.compaction.enabled:
            return False, "disabled: compaction.enabled is false in the timmy config"
        return True, None

    def should_compress_preflight(self, messages: list[dict[str, Any]], **_: Any) -> bool:
        return self.should_compress(messages_tokens(messages, self._token_counter()))

    def compress(  # noqa: PLR0917 -- Hermes' signature
        self,
        messages: list[dict[str, Any]],
        current_tokens: int | None = None,
        focus_topic: str | None = None,
        force: bool = False,
        memory_context: str = "",
        bypass_cooldown: bool = False,
        **unknown: Any,
    ) -> list[dict[str, Any]]:
        """The compacted messages, or the same messages (and the reason in get_status) on failure.
        Every call compacts: the engine keeps no cooldown (nor does Hermes main's base class), so `force`
        (/compress) and `bypass_cooldown` (Hermes main, after a proven overflow) have nothing to lift."""
        self.last_compress_call = {
            "force": bool(force),
            "bypass_cooldown": bool(bypass_cooldown),
            "focus_topic": focus_topic is not None,
            "memory_context": bool(memory_context),
            "unknown_keywords": sorted(unknown),
        }
        self._last_compress_aborted = False
        self._last_compression_made_progress = False
        settings = self._settings()
        counter = self._token_counter()
        # Hermes' estimate covers the whole request; what the messages do not explain is the system
        # prompt and the tool schemas, which the budget (target_after) must leave room for.
        fixed = max(0, int(current_tokens) - messages_tokens(messages, counter)) if current_tokens else 0
        start = time.perf_counter()
        try:
            raw = self.raw.absorb(messages)  # compact from the raw messages: refs stay the same across compactions
            if self.raw.replaced != self.readings_of:  # the log was started again or cut: read it anew
                self.readings, self.readings_of = Readings(), self.raw.replaced
            result = compact(raw, settings, force=True, counter=counter, fixed_tokens=fixed, readings=self.readings)
        except Exception as exc:  # noqa: BLE001 -- compact() fails closed itself; this guards the guard
            self._fail(f"{type(exc).__name__} while compacting")  # never the message: it may quote content
            self.raw.reset()
            return messages
        finally:
            self.compaction_ms_total += (time.perf_counter() - start) * 1000
        self.last_report = result.report.as_dict()
        if not result.compacted:
            self._fail(result.report.failure or "compaction did not verify")
            self._answer(messages)
            return messages
        # Hermes edits the dicts it holds in place: it gets its own, the raw log keeps ours
        shaped, sources = as_hermes_keeps_it(result.messages, result.sources)
        compacted = copy.deepcopy(shaped)
        new_orphans = unpaired(compacted) - unpaired(messages)
        if new_orphans:
            kind, call_id = sorted(new_orphans, key=str)[0]
            self._fail(f"the compacted list would leave a tool {kind} without its pair ({call_id})")
            self._answer(messages)
            return messages
        self.last_failure = None
        if compacted != messages:
            self.compression_count += 1
            self._last_compression_made_progress = True
        self._answer(compacted, sources)
        return compacted

    def _answer(self, returned: list[dict[str, Any]], sources: list[tuple[int, ...]] | None = None) -> None:
        """Remember what Hermes gets back (and the raw indices behind each message), here and on disk
        (so a resumed session keeps its refs)."""
        self.raw.answered(returned, sources)
        if not self.session_id:
            return
        try:
            self.store.save(self.session_id, self.raw)
        except (OSError, TypeError, ValueError, RecursionError) as exc:
            reason = f"{type(exc).__name__}: {getattr(exc, 'strerror', None) or 'not serialisable'}"
            if reason != self.store_failure:
                log.warning(
                    "timmy: cannot save the raw log under %s (%s); recall and #N refs restart if Hermes restarts",
                    self.store.directory(self.session_id),
                    reason,
                )
            self.store_failure = reason
        else:
            self.store_failure = None

    def on_session_start(self, session_id: str, **kwargs: Any) -> None:
        super().on_session_start(session_id, **kwargs)
        if session_id == self.session_id:
            return
        if kwargs.get("boundary_reason") == "compression" and self.session_id:
            # Hermes rotated the session id at a compaction: the same conversation goes on
            with contextlib.suppress(OSError, ValueError):  # else the next save writes it all anew
                self.store.move(self.session_id, session_id)
        else:
            self.raw.reset()
            saved = self.store.load(session_id)
            if saved is not None:
                saved.restarts = self.raw.restarts
                self.raw, self.raw_log_resumed = saved, True
        self.session_id = session_id

    def on_session_end(self, session_id: str, messages: list[dict[str, Any]], **_: Any) -> None:
        """Nothing to flush: every compaction already saved the raw log."""

    def on_session_reset(self, **_: Any) -> None:
        super().on_session_reset()
        self.raw.reset()
        self.cache, self.last_cache = CacheCounts(), None

    def clone_for_agent(self, **_: Any) -> TimmyContextEngine:
        """Hermes main gives each agent its own copy of the plugin's one engine: a fresh engine on the
        same config (a deep copy would duplicate the raw log and a loaded tokenizer)."""
        clone = TimmyContextEngine(self.config)
        clone.model, clone.base_url, clone.context_length = self.model, self.base_url, self.context_length
        clone.output_reserve, clone.threshold_tokens = self.output_reserve, self.threshold_tokens
        return clone

    def should_defer_preflight_to_real_usage(self, rough_tokens: int, **_: Any) -> bool:
        return False

    def get_automatic_compaction_status_message(
        self, *, phase: str = "", default_message: str = "", **_: Any
    ) -> str | None:
        """Hermes main's status line for an automatic compaction. Its default for the compaction
        itself says "summarizing earlier conversation"; timmy calls no model, so that line is worded
        for what happens (keeping Hermes' "Compacting context" marker its gateways match on)."""
        if not self.emit_automatic_compaction_status:
            return None
        if "summariz" not in default_message.lower():
            return default_message or None
        return "🗜️ Compacting context — timmy folds earlier turns by rule (no model call)..."

    def get_tool_schemas(self, **_: Any) -> list[dict[str, Any]]:
        return [RECALL_SCHEMA]

    def handle_tool_call(self, name: str, args: dict[str, Any], **kwargs: Any) -> str:
        """`timmy_recall`: raw messages by ref, or matching lines by query, from the engine's raw log;
        never longer than what Hermes hands the model unchanged for the current window."""
        if name != RECALL_TOOL:
            return json.dumps({"error": f"unknown tool {name[:60]!r}"})
        current = list(kwargs.get("messages") or [])
        self.recalls += 1
        return answer(self.raw.messages or current, args, self.context_length, calls_in_turn(current))

    def _fail(self, reason: str) -> None:
        """Refuse to compact: Hermes keeps the messages as they are."""
        self.last_failure = reason
        self.compactions_failed += 1
        log.warning(
            "timmy: compaction refused, messages kept as they are: %s (model %s, window %d, refusals so far %d)",
            reason,
            self.model or "?",
            self.context_length,
            self.compactions_failed,
        )

    def has_content_to_compress(self, messages: list[dict[str, Any]], **_: Any) -> bool:
        result = compact(messages, self._settings(), force=True, counter=self._token_counter())
        return result.compacted and result.report.tokens_after < result.report.tokens_before

    def get_status(self, **_: Any) -> dict[str, Any]:
        status: dict[str, Any] = dict(super().get_status())
        # Hermes sets last_prompt_tokens to -1 after a compaction until the next response
        usage = max(0, self.last_prompt_tokens) / self.context_length if self.context_length else 0.0
        status.update(
            engine=ENGINE_NAME,
            llm_calls=0,
            pressure_level=pressure_level(usage),
            pressure_levels=[60, 75, 85, 95],
            trigger_threshold=self.threshold_percent,
            trigger_reason=self.trigger_reason,
            output_reserve=self.output_reserve,
            cache_read_share=self.cache.read_share,
            cache_read_share_last=self.last_cache.read_share if self.last_cache else None,
            cache_read_tokens=self.cache.cache_read_tokens,
            cache_write_tokens=self.cache.cache_write_tokens,
            cache_prompt_tokens=self.cache.prompt_tokens,
            last_compress_call=self.last_compress_call or None,
            last_compaction=self.last_report,
            last_failure=self.last_failure,
            compactions_failed=self.compactions_failed,
            compaction_ms_total=round(self.compaction_ms_total, 2),
            recall_tool=RECALL_TOOL,
            raw_messages_held=len(self.raw.messages),
            raw_log_restarts=self.raw.restarts,
            raw_log_truncations=self.raw.truncations,
            raw_log_resumed=self.raw_log_resumed,
            raw_log_dir=str(self.store.directory(self.session_id)) if self.session_id else None,
            raw_log_save_failure=self.store_failure,
            recalls=self.recalls,
        )
        return status
