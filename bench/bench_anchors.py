"""How real the anchor index's paths and ids are, and whether every edited file is marked so (issue 30).

    PYTHONPATH=. .venv/bin/python bench/bench_anchors.py [SESSION_OR_DIR …] [--window N …] [--show]

Every session is compacted (forced) at each window, and the index's `- edited:` / `- paths:` / `- ids:`
entries are judged by rules of this script's own, not by the engine's reader (`core.fold.paths`):

- **a file of the run**: a listed path (leading `./` or `/testbed/` aside) that a tool output shows as a
  file -- a line of its own (`ls`, `find`), a grep hit `path:12:`, a traceback's `File "…path"`, a diff
  header, `patching file path` -- or the last word of an `ls -l` line; or that a tool call wrote (a `>`
  redirection, `sed -i`, `cp`/`mv` target, `tee`, a write/patch tool); or a folder of such a file; or a
  name with an extension that a command named without the output saying it does not exist. Never one
  with a diff's `a/`/`b/` prefix or a placeholder (`path/to`, `<…>`, `your_…`).
- **an id from code**: every occurrence of it in user/assistant text and tool-call arguments is code --
  inside a heredoc body, a `python -c` program, a fenced or inline code span, or a `KEY=value` between
  `(` / `,` and `,` / `)` (a call's keyword argument).
- **edited files**: what the run wrote by the rules above, in the folded range outside condensed
  ranges; each must be listed under `edited:` (in a spelling it is the end of, or that is its end) with
  its last write as the entry's last ref.

It prints, per session and window: paths listed, the share that are files of the run, ids listed and
ids from code, edited files and how many are marked with their last write, the cut (runs at or above
the trigger) and the index's share of the window; then the totals. `--show` lists what failed a check.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_templates import strings
from sessions import session_files

from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.tokens import request_tokens
from timmy_compactor.core.types import Settings

DEFAULT_PATHS = ("/work/shared/corpus", "/work/shared/samples")
_ENTRY = re.compile(r"([^\s,()][^,()]*?) \((#[^)]*)\)")
_REFS = re.compile(r"#(\d+)")
_CONDENSED = re.compile(r"^### #(\d+)(?:–#(\d+))? \(condensed\)", re.M)
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1[^\n]*\n(.*?)^\s*\2\s*$", re.S | re.M)
_PY_C = re.compile(r"""python3?\s+-c\s+(?:"(?:[^"\\]|\\.)*"|'[^']*')""", re.S)
_CODE_SPAN = re.compile(r"```.*?```|`[^`\n]*`", re.S)
_WRITES = (
    re.compile(r"(?<![<>&\d])>>?\s*([^\s&|;<>]+)"),
    re.compile(r"\bsed\s+(?:-\w*\s+)*-i\S*\s+(?:(?:'[^']*'|\"[^\"]*\"|-\S+)\s+)*([^\s;&|]+)"),
    re.compile(r"\b(?:cp|mv)\s+(?:-\w+\s+)*\S+\s+([^\s;&|]+)"),
    re.compile(r"\btee\s+(?:-\w+\s+)*([^\s;&|]+)"),
)
_PATCHED = re.compile(r"^patching file (\S+)", re.M)
_PLACEHOLDER = re.compile(r"path/to|<|>|\byour|\bxxx|\$", re.I)


def bare(path: str) -> str:
    path = path.rstrip("/")
    for prefix in ("./", "/testbed/"):
        if path.startswith(prefix):
            path = path[len(prefix) :]
    return path


class Run:
    """What this script reads of a raw session: outputs, calls, writes."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.outputs = "\n".join(s for m in messages if m.get("role") == "tool" for s in strings(m.get("content")))
        self.output_lines = {line.strip() for line in self.outputs.splitlines()}
        self.writes: dict[str, int] = {}  # file -> last raw index that wrote it
        self.calls: list[tuple[int, str]] = []
        self.prose: list[str] = []
        for i, m in enumerate(messages):
            if m.get("role") in ("user", "assistant"):
                self.prose += strings(m.get("content"))
            for c in m.get("tool_calls") or []:
                fn = c.get("function", {})
                args = json.loads(fn.get("arguments") or "{}")
                self.calls += [(i, s) for s in strings(args)]
                if any(w in fn.get("name", "") for w in ("write", "patch")) and isinstance(args.get("path"), str):
                    self.writes[bare(args["path"])] = i
                command = args.get("command") if isinstance(args.get("command"), str) else ""
                shell = _HEREDOC.sub("", command)
                for pattern in _WRITES:
                    for target in pattern.findall(shell):
                        if re.fullmatch(r"[\w.~-][\w./~-]*", target) and not target.startswith(("s/", "/dev/")):
                            self.writes[bare(target.strip("'\""))] = i
            if m.get("role") == "tool":
                for target in _PATCHED.findall("\n".join(strings(m.get("content")))):
                    self.writes[bare(target)] = i

    def shown(self, path: str) -> bool:
        """Whether a tool output shows `path` as a file."""
        if path in self.output_lines or f"./{path}" in self.output_lines or f"/testbed/{path}" in self.output_lines:
            return True
        esc = re.escape(path)
        return bool(
            re.search(
                rf"(?:^|[\s\"'/])(?:\./)?{esc}(?::\d+[:-]|\"|$)|File \"[^\"]*{esc}\""
                rf"|^(?:\+\+\+|---|diff --git) .*[ab]/{esc}\b|patching file {esc}|\s{esc}$",
                self.outputs,
                re.M,
            )
        )

    def named_and_found(self, path: str) -> bool:
        """A file name (an extension, or absolute) a call named, or a folder it listed or entered, and no
        output said it does not exist."""
        if f"{path}: No such file" in self.outputs or f"'{path}': No such file" in self.outputs:
            return False
        if re.search(r"\.\w+$", path) or path.startswith("/"):
            return any(path in text for _, text in self.calls)
        listing = re.compile(rf"\b(?:ls|cd|find|tree)\s+(?:-\S+\s+)*(?:\./)?{re.escape(path)}/?(?:\s|$)")
        return any(listing.search(text) for _, text in self.calls)


def is_file_of_run(path: str, run: Run, listed: set[str]) -> bool:
    p = bare(path)
    if _PLACEHOLDER.search(path) or "://" in path:
        return "://" in path  # a URL is judged elsewhere: it counts as real
    if re.match(r"[ab]/", p) and any(bare(q) == p[2:] for q in listed | set(run.writes)):
        return False
    if p in run.writes or run.shown(p) or run.named_and_found(p):
        return True
    under = [q for q in listed if len(q) > len(path) and q.startswith(path.rstrip("/") + "/")]
    return any(is_file_of_run(q, run, listed) for q in under) or any(w.startswith(p + "/") for w in run.writes)


def code_regions(text: str) -> list[tuple[int, int]]:
    spans = [m.span(3) for m in _HEREDOC.finditer(text)] + [m.span() for m in _PY_C.finditer(text)]
    return spans + [m.span() for m in _CODE_SPAN.finditer(text)]


def from_code(value: str, run: Run) -> bool:
    seen = False
    for text in [t for _, t in run.calls] + run.prose:
        regions = code_regions(text)
        for m in re.finditer(re.escape(value), text):
            seen = True
            before, after = text[max(0, m.start() - 1) : m.start()], text[m.end() : m.end() + 1]
            kwarg = "=" in value and ((before in "(," and before != "") or (after in ",)" and after != ""))
            if not kwarg and not any(a <= m.start() < b for a, b in regions):
                return False
    return seen


def entries(index: str, label: str) -> list[tuple[str, list[int]]]:
    out = []
    for line in index.splitlines():
        if line.startswith(f"- {label}: "):
            body = line[len(f"- {label}: ") :]
            out += [(m.group(1).strip(), [int(r) for r in _REFS.findall(m.group(2))]) for m in _ENTRY.finditer(body)]
    return out


def measure(doc: dict[str, Any], window: int, show: bool) -> dict[str, float]:
    messages = doc["messages"]
    settings = Settings(context_window=window)
    result = compact(messages, settings, system_prompt=doc.get("system_prompt"), tools=doc.get("tools"), force=True)
    assert result.report.verified, result.report.failure
    view = list(result.messages)
    index = next((str(m["content"]) for m in view if str(m.get("content", "")).startswith("[ANCHOR INDEX")), "")
    run = Run(messages)
    edited = entries(index, "edited")
    paths = edited + entries(index, "paths")
    listed = {p for p, _ in paths}
    real = [p for p in listed if is_file_of_run(p, run, listed)]
    ids = {v for v, _ in entries(index, "ids")}
    coded = [v for v in ids if from_code(v, run)]
    folded = {
        i
        for m, sources in zip(view, result.sources, strict=True)
        if str(m.get("content", "")).startswith(("[ANCHOR INDEX", "[folded #"))
        for i in sources
    }
    covered = {i for a, b in _CONDENSED.findall(index) for i in range(int(a), int(b or a) + 1)}
    due = {f: i for f, i in run.writes.items() if i in folded and i not in covered}
    marked = [f for f, i in due.items() if _last_write(f, edited) == i]
    if show:
        for p in sorted(listed - set(real)):
            print(f"    not a file of the run: {p}")
        for v in coded:
            print(f"    id from code: {v}")
        for f in sorted(set(due) - set(marked)):
            print(f"    edited {f} (last #{due[f]}) listed as {_last_write(f, edited)}")
    before = request_tokens(messages, doc.get("system_prompt"), doc.get("tools"))
    after = request_tokens(view, doc.get("system_prompt"), doc.get("tools"))
    return {
        "paths": len(listed),
        "real": len(real),
        "ids": len(ids),
        "code": len(coded),
        "edited": len(due),
        "marked": len(marked),
        "cut": 1 - after / before if before >= settings.trigger_tokens else math.nan,
        "index": len(index) / 4 / window,
    }


def _last_write(path: str, edited: list[tuple[str, list[int]]]) -> int | None:
    p = bare(path)
    refs = [max(r) for q, r in edited if r and (bare(q) == p or bare(q).endswith("/" + p) or p.endswith("/" + bare(q)))]
    return max(refs) if refs else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("paths", nargs="*", default=list(DEFAULT_PATHS))
    parser.add_argument("--window", type=int, action="append")
    parser.add_argument("--show", action="store_true")
    args = parser.parse_args()
    files = session_files([Path(item) for item in args.paths])
    totals: dict[str, float] = {}
    cuts: list[float] = []
    head = f"{'session':<40} {'window':>7} {'paths':>5} {'real':>6} {'ids':>4} {'code':>4} {'edited':>9}"
    print(f"{head} {'cut':>6} {'index':>6}")
    for window in args.window or [65_536, 32_768]:
        for path in files:
            doc = json.loads(path.read_text(encoding="utf-8"))
            row = measure(doc, window, args.show)
            for key in ("paths", "real", "ids", "code", "edited", "marked"):
                totals[key] = totals.get(key, 0) + row[key]
            if not math.isnan(row["cut"]):
                cuts.append(row["cut"])
            share = row["real"] / row["paths"] if row["paths"] else 1.0
            cut = "" if math.isnan(row["cut"]) else f"{row['cut']:.1%}"
            print(
                f"{path.stem[8:]:<40} {window:>7} {row['paths']:>5.0f} {share:>6.1%} {row['ids']:>4.0f} "
                f"{row['code']:>4.0f} {row['marked']:>4.0f}/{row['edited']:<4.0f} "
                f"{cut:>6} {row['index']:>6.1%}"
            )
    real = totals["real"] / max(totals["paths"], 1)
    print(
        f"overall: paths {totals['real']:.0f}/{totals['paths']:.0f} = {real:.1%} files of the run; ids "
        f"{totals['ids']:.0f}, {totals['code']:.0f} from code; edited files marked with their last write "
        f"{totals['marked']:.0f}/{totals['edited']:.0f}; mean cut above the trigger "
        f"{sum(cuts) / max(len(cuts), 1):.1%} ({len(cuts)} runs)"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
