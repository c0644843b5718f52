"""Run every strategy on every session, measure, and write the table, plots and HTML page."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from timmy_compactor.compare import strategies as strats
from timmy_compactor.compare.cycles import replay as replay_cycles
from timmy_compactor.compare.promises import check
from timmy_compactor.config import Config
from timmy_compactor.core.types import Message
from timmy_compactor.sessions.files import Session, SessionError, read_session


@dataclass
class Row:
    session: str
    strategy: str
    tokens_before: int = 0
    tokens_after: int = 0
    messages_before: int = 0
    messages_after: int = 0
    ms: float = 0.0
    kept: int = 0
    total: int = 0
    orphans: int = 0
    prefix_share: float | None = None
    reprefill_tokens: float | None = None
    compactions: int = 0  # replayed as Hermes drives an engine (compare/cycles.py)
    stuck: int = 0
    max_usage_after: float | None = None
    cache_reuse: float | None = None
    lost: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def cut(self) -> float:
        return 1 - self.tokens_after / self.tokens_before if self.tokens_before else 0.0


def _steps_ends(messages: Sequence[Message]) -> list[int]:
    """Indices after which the session is at a step boundary (after each assistant step)."""
    ends = []
    for i, m in enumerate(messages):
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        if m.get("role") in ("assistant", "tool") and (nxt is None or nxt.get("role") != "tool"):
            ends.append(i + 1)
    return ends


def replay(session: Session, run: strats.Strategy, settings: Any, budget: int, checkpoints: int) -> tuple[float, float]:
    """Grow the session step by step, compact when the strategy would trigger, and measure how much of
    each new view is a byte-identical prefix of the previous one (prompt-cache reuse) and how many
    tokens would be prefilled again."""
    ends = [e for e in _steps_ends(session.messages)]
    if len(ends) > checkpoints:
        stride = len(ends) / checkpoints
        ends = [ends[int(k * stride)] for k in range(checkpoints)] + [ends[-1]]
    shares, reprefill, previous = [], [], None
    for end in ends:
        messages = session.messages[:end]
        tokens = strats.message_tokens(messages, session.system_prompt, session.tools)
        view = (
            run(messages, settings, budget)
            if tokens >= settings.context_window * settings.trigger_threshold
            else messages
        )
        text = json.dumps(view, ensure_ascii=False)
        if previous is not None and previous:
            common = len(os.path.commonprefix([previous, text]))  # noqa: RUF071 -- a string prefix is meant
            shares.append(common / len(previous))
            reprefill.append((len(text) - common) / 4)
        previous = text
    if not shares:
        return 1.0, 0.0
    return statistics.mean(shares), statistics.mean(reprefill)


def evaluate(
    paths: Iterable[Path], names: Sequence[str], config: Config, checkpoints: int, window: int | None
) -> tuple[list[Row], list[str]]:
    available = strats.available()
    unavailable = [n for n in names if available.get(n) is None]
    rows: list[Row] = []
    files = list(paths)
    bar = _progress(files)
    for path in bar:
        try:
            session = read_session(path)
        except SessionError as exc:
            rows.append(Row(session=path.name, strategy="-", error=str(exc)))
            continue
        settings = config.settings_for(session.model, session.base_url)
        if window:
            settings = dataclasses.replace(settings, context_window=window)
        before = strats.message_tokens(session.messages, session.system_prompt, session.tools)
        rules_view = available["rules"](session.messages, settings, 0)  # type: ignore[misc]
        budget = strats.message_tokens(rules_view, None, None)
        for name in names:
            run = available.get(name)
            if run is None:
                continue
            start = time.perf_counter()
            view = run(list(session.messages), settings, budget)
            ms = (time.perf_counter() - start) * 1000
            verdict = check(session.messages, view)
            share, reprefill = replay(session, run, settings, budget, checkpoints)
            cycles = replay_cycles(
                session.messages,
                lambda messages, run=run, settings=settings, budget=budget: run(messages, settings, budget),  # type: ignore[misc]
                window=settings.context_window,
                trigger=settings.trigger_threshold,
                system_prompt=session.system_prompt,
                tools=session.tools,
            )
            rows.append(
                Row(
                    session=path.name,
                    strategy=name,
                    tokens_before=before,
                    tokens_after=strats.message_tokens(view, session.system_prompt, session.tools),
                    messages_before=len(session.messages),
                    messages_after=len(view),
                    ms=ms,
                    kept=verdict.kept,
                    total=verdict.total,
                    orphans=verdict.orphans,
                    prefix_share=share,
                    reprefill_tokens=reprefill,
                    compactions=cycles.compactions,
                    stuck=cycles.stuck,
                    max_usage_after=max(cycles.usage_after) if cycles.usage_after else None,
                    cache_reuse=cycles.reuse,
                    lost=verdict.lost[:5],
                )
            )
    return rows, unavailable


def _progress(items: list[Path]) -> Any:
    if not sys.stderr.isatty():
        return items
    from tqdm import tqdm

    return tqdm(items, desc="eval", unit="session", file=sys.stderr, leave=False)


def summary(rows: list[Row], names: Sequence[str]) -> list[dict[str, Any]]:
    out = []
    for name in names:
        mine = [r for r in rows if r.strategy == name and r.error is None]
        if not mine:
            continue
        out.append(
            {
                "strategy": name,
                "sessions": len(mine),
                "mean_token_cut": statistics.mean(r.cut for r in mine),
                "promises_kept": sum(r.kept for r in mine) / max(1, sum(r.total for r in mine)),
                "sessions_all_kept": sum(r.kept == r.total for r in mine),
                "orphans": sum(r.orphans for r in mine),
                "prefix_share": statistics.mean(r.prefix_share or 0 for r in mine),
                "reprefill_tokens": statistics.mean(r.reprefill_tokens or 0 for r in mine),
                "ms_per_session": statistics.median(r.ms for r in mine),
                "compactions": sum(r.compactions for r in mine),
                "stuck": sum(r.stuck for r in mine),
                "max_usage_after": max((r.max_usage_after or 0.0) for r in mine),
                "cache_reuse": statistics.mean(r.cache_reuse or 0 for r in mine),
            }
        )
    return out


def markdown(table: list[dict[str, Any]]) -> str:
    lines = [
        "| strategy | sessions | mean token cut | promises kept | sessions keeping all | orphans | prefix reuse |"
        " re-prefill tokens | ms/session | replay: compactions | stuck | max usage after | cache reuse |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in table:
        lines.append(
            f"| `{t['strategy']}` | {t['sessions']} | {t['mean_token_cut']:.0%} | {t['promises_kept']:.1%} | "
            f"{t['sessions_all_kept']}/{t['sessions']} | {t['orphans']} | {t['prefix_share']:.0%} | "
            f"{t['reprefill_tokens']:,.0f} | {t['ms_per_session']:.1f} | {t['compactions']} | {t['stuck']} | "
            f"{t['max_usage_after']:.2f} | {t['cache_reuse']:.1%} |"
        )
    return "\n".join(lines)


def plots(rows: list[Row], table: list[dict[str, Any]], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for k, t in enumerate(table):
        ax.scatter(t["mean_token_cut"] * 100, t["promises_kept"] * 100, s=60)
        ax.annotate(
            t["strategy"],
            (t["mean_token_cut"] * 100, t["promises_kept"] * 100),
            textcoords="offset points",
            xytext=(5, 5 - 12 * (k % 3)),
            fontsize=8,
        )
    ax.set_xlabel("mean token cut (%)")
    ax.set_ylabel("promises kept (%)")
    ax.set_title("Token cut vs promises kept")
    ax.grid(alpha=0.3)
    files.append(out / "cut_vs_promises.png")
    fig.tight_layout()
    fig.savefig(files[-1], dpi=110)
    plt.close(fig)
    sessions = sorted({r.session for r in rows if r.error is None})
    names = [t["strategy"] for t in table]
    fig, ax = plt.subplots(figsize=(max(8, len(sessions) * 1.1), 4.5))
    width = 0.8 / max(1, len(names))
    for k, name in enumerate(names):
        cuts = [next((r.cut * 100 for r in rows if r.session == s and r.strategy == name), 0) for s in sessions]
        ax.bar([i + k * width for i in range(len(sessions))], cuts, width, label=name)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(sessions))])
    ax.set_xticklabels(
        [s.removeprefix("session_").removesuffix(".json")[:18] for s in sessions], rotation=30, ha="right", fontsize=7
    )
    ax.set_ylabel("token cut (%)")
    ax.set_title("Token cut per session")
    ax.legend(fontsize=7)
    fig.tight_layout()
    files.append(out / "cut_per_session.png")
    fig.savefig(files[-1], dpi=110)
    plt.close(fig)
    return files


def html(table_md: str, images: list[Path], out: Path, elapsed: float) -> Path:
    imgs = "".join(
        f'<img alt="{p.stem}" src="data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}">' for p in images
    )
    rows = "".join(
        f"<tr>{''.join(f'<td>{c.strip()}</td>' for c in line.strip('|').split('|'))}</tr>"
        for line in table_md.splitlines()[2:]
    )
    head = "".join(f"<th>{c.strip()}</th>" for c in table_md.splitlines()[0].strip("|").split("|"))
    page = (
        "<!doctype html><meta charset=utf-8><title>timmy-compactor eval</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:4px 8px;border-bottom:1px solid #ddd}"
        "img{max-width:48%;margin:1%}</style>"
        f"<h1>timmy-compactor: strategies side by side</h1><table><tr>{head}</tr>{rows}</table>{imgs}"
        f"<p>Run time {elapsed:.1f} s. Promises are checked by an independent checker "
        "(timmy_compactor/compare/promises.py).</p>"
    )
    target = out / "report.html"
    target.write_text(page, encoding="utf-8")
    return target
