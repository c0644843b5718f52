"""Throughput and recall of `redact_text`, against a JSON round trip of the same files, in one run.

    .venv/bin/python bench/bench_redact.py [--repeat 7] [--against main] [--detect-secrets]

For every session of ../shared/corpus (the main sample when it is absent), per repeat: the time of
`json.loads` + `json.dumps` of the file (the baseline), of `redact_text` on every string of the
decoded document (what the export does) and on the whole raw file text. Prints the median MB/s of
raw session input for each, and the recall on the table of fake credential formats
(tests/credential_table.py): a kind counts as caught when none of its secrets survives in any of
four embeddings (plain, JSON-encoded, inside a JSON object, after an escaped newline).
`--against REV` measures the `redact.py` of a git revision too (e.g. `main`, before a change), in
the same process, and counts the strings it redacts otherwise (a speed-up must leave none);
`--false-positives DIR,DIR` counts the references each variant makes in the corpus' strings (ids
left out) and in the `.py` files under the folders (ordinary code: none of them is a secret), and
`--show` writes them, with context, to /tmp/redact_refs_<variant>.txt to read;
`--detect-secrets` scores detect-secrets' `scan_line` (all plugins) on the table
and times it on ~100 kB of the corpus' lines (it is far slower), when that package is installed.
Always: the recall on the table nested 2 and 3 levels deep (a JSON document in a JSON string in a tool
result), and the time of `redact_text` on 1 MB texts of backslashes, escaped quotes and escaped `\\n`
(hostile to the reading of nested escapes: they must stay well under a second).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
FALLBACK = ROOT / "tests" / "data" / "session_sample.json"
sys.path.insert(0, str(ROOT))

from tests.credential_table import Sample, leaked, samples  # noqa: E402
from timmy_compactor.core import redact  # noqa: E402

Redact = Callable[[str], str]


def strings(value: Any, skip: tuple[str, ...] = ()) -> Iterator[str]:
    """Every string of `value` (iterative), but those under a key of `skip`."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(v for k, v in item.items() if k not in skip)
        elif isinstance(item, list):
            stack.extend(item)


_REF = re.compile(r"credential_ref:[0-9a-f]{12}")


def refs_made(fn: Redact, texts: list[str]) -> list[str]:
    """Each reference `fn` puts in `texts`, with 60 characters of context before it."""
    found = []
    for text in texts:
        out = fn(text)
        if out != text:
            found += [out[max(0, m.start() - 60) : m.end()].replace("\n", "⏎") for m in _REF.finditer(out)]
    return found


def embeddings(text: str) -> list[str]:
    return [text, json.dumps(text), json.dumps({"command": text}), "see:\\n" + json.dumps(text)[1:-1] + "\\nend"]


def recall(fn: Redact, seeds: range = range(5)) -> tuple[int, int, list[str]]:
    table: list[Sample] = [s for seed in seeds for s in samples(seed)]
    kinds = sorted({s.kind for s in table})
    missed = sorted({s.kind for s in table for text in embeddings(s.text) if leaked(s, fn(text))})
    return len(kinds) - len(missed), len(kinds), missed


def nested_recall(fn: Redact, seeds: range = range(5)) -> tuple[int, int, list[str]]:
    """`recall` on a tool result whose output holds the credential in 1 or 2 more JSON documents."""
    table: list[Sample] = [s for seed in seeds for s in samples(seed)]
    kinds = sorted({s.kind for s in table})
    missed = set()
    for item in table:
        text = f"config:\n{item.text}\nok"
        for _ in range(2):
            text = json.dumps({"content": text})
            out = fn(json.dumps({"output": text}))
            twice = [json.dumps(json.dumps(s)[1:-1])[1:-1] for s in item.secrets]
            forms = twice + [json.dumps(form)[1:-1] for form in twice]
            if leaked(item, out) or any(form in out for form in forms):
                missed.add(item.kind)
    return len(kinds) - len(missed), len(kinds), sorted(missed)


HOSTILE = {
    "backslashes": "\\",
    "escaped quotes": '\\\\\\"',
    "escaped \\n": "\\\\n",
    "quote, escaped \\n": '"\\\\n',
    "both, short runs": '\\\\\\"a\\\\n"',
    "7 levels of quotes": "\\" * 15 + '"password' + "\\" * 15 + '"',
}


def hostile(fn: Redact, repeat: int) -> dict[str, float]:
    """The median milliseconds of `fn` on 1 MB of each of `HOSTILE`."""
    texts = {name: piece * (1_000_000 // len(piece)) for name, piece in HOSTILE.items()}
    ms = {}
    for name, text in texts.items():
        ms[name] = 1000 * statistics.median(timed(partial(fn, text)) for _ in range(repeat))
    return ms


def load_revision(rev: str) -> ModuleType:
    """`timmy_compactor.core.redact` as it was at `rev`, with the core modules it imported then (the
    package is extracted from git and imported under its own name, then taken out of `sys.modules`
    again: its functions keep their own module globals)."""
    where = Path(tempfile.mkdtemp())
    archive = subprocess.run(["git", "archive", rev, "timmy_compactor"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive.stdout, check=True)
    ours = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "timmy_compactor"}
    for name in ours:
        del sys.modules[name]
    sys.path.insert(0, str(where))
    try:
        return importlib.import_module("timmy_compactor.core.redact")
    finally:
        sys.path.remove(str(where))
        for name in [n for n in sys.modules if n.split(".")[0] == "timmy_compactor"]:
            del sys.modules[name]
        sys.modules.update(ours)


def detect_secrets_redact() -> Redact | None:
    try:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings
    except ImportError:
        return None

    def scrub(text: str) -> str:
        lines = text.split("\n")
        with default_settings():
            for k, line in enumerate(lines):
                found = {secret.secret_value for secret in scan_line(line) if secret.secret_value}
                if found:  # one pass per line, longest first, so a ref is never rewritten
                    pattern = re.compile("|".join(re.escape(v) for v in sorted(found, key=len, reverse=True)))
                    lines[k] = pattern.sub(lambda m: redact.credential_ref(m.group(0)), line)
        return "\n".join(lines)

    return scrub


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--against", metavar="REV", help="also measure redact.py of this git revision")
    parser.add_argument("--detect-secrets", action="store_true", help="also score detect-secrets (if installed)")
    parser.add_argument("--false-positives", metavar="DIRS", help="count references in .py files under these")
    parser.add_argument("--show", action="store_true", help="with --false-positives: write them out to read")
    args = parser.parse_args()

    files = sorted(CORPUS.glob("session_*.json")) or [FALLBACK]
    raws = [p.read_text(encoding="utf-8") for p in files]
    docs = [json.loads(raw) for raw in raws]
    texts = [list(strings(doc)) for doc in docs]
    mb = sum(len(raw.encode("utf-8")) for raw in raws) / 1e6
    print(f"{len(files)} sessions, {mb:.2f} MB of raw JSON; median of {args.repeat} runs")

    variants: dict[str, Redact] = {"this tree": redact.redact_text}
    if args.against:
        variants[args.against] = load_revision(args.against).redact_text
    slow: dict[str, Redact] = {}
    if args.detect_secrets:
        scrub = detect_secrets_redact()
        if scrub is None:
            print("detect-secrets is not installed (pip install detect-secrets)")
        else:
            slow["detect-secrets scan_line"] = scrub

    def baseline() -> None:
        for raw in raws:
            json.dumps(json.loads(raw), ensure_ascii=False)

    runs: dict[str, list[float]] = {"json.loads + json.dumps": []}
    for name in variants:
        runs[f"{name}: every string"] = []
        runs[f"{name}: whole file"] = []
    for _ in range(args.repeat):
        runs["json.loads + json.dumps"].append(timed(baseline))
        for name, fn in variants.items():
            runs[f"{name}: every string"].append(timed(lambda fn=fn: [fn(s) for t in texts for s in t]))
            runs[f"{name}: whole file"].append(timed(lambda fn=fn: [fn(raw) for raw in raws]))
    for name, fn in slow.items():  # far slower: one run on ~100 kB of lines
        lines = [line for raw in raws for line in raw.splitlines() if len(line) <= 1_000]
        chunk = "\n".join(lines)[:100_000]
        seconds = timed(lambda fn=fn, chunk=chunk: fn(chunk))
        runs[f"{name}: 100 kB of lines"] = [seconds * mb / (len(chunk.encode()) / 1e6)]

    base = statistics.median(runs["json.loads + json.dumps"])
    print(f"\n{'':44} {'MB/s':>9} {'x json round trip':>18}")
    for name, seconds in runs.items():
        median = statistics.median(seconds)
        print(f"{name:44} {mb / median:9.1f} {median / base:17.2f}x")

    if args.against:  # the change measured must not change what is redacted
        every = [s for t in texts for s in t] + raws
        for name, fn in variants.items():
            if name != "this tree":
                differ = sum(fn(s) != redact.redact_text(s) for s in every)
                print(f"\nstrings redacted otherwise than {name}: {differ} of {len(every)}")

    if args.false_positives is not None:
        code = [p.read_text(errors="replace") for d in args.false_positives.split(",") for p in Path(d).rglob("*.py")]
        content = [s for doc in docs for s in strings(doc, skip=("id", "tool_call_id"))]
        print("\nreferences made in ordinary text (each one a false positive):")
        for name, fn in variants.items():
            found = {where: refs_made(fn, texts) for where, texts in (("corpus", content), ("code", code))}
            print(f"  {name:42} corpus {len(found['corpus'])}, code ({len(code)} files) {len(found['code'])}")
            if args.show:
                listed = "\n".join(found["corpus"] + found["code"])
                Path(f"/tmp/redact_refs_{name.replace(' ', '_')}.txt").write_text(listed)

    print("\nrecall on the credential table (kinds caught in every embedding):")
    for name, fn in {**variants, **slow}.items():
        caught, total, missed = recall(fn, range(2) if name in slow else range(5))
        print(f"  {name:42} {caught}/{total}" + (f"  missed: {', '.join(missed)}" if missed else ""))
    print("\nrecall nested 2 and 3 levels deep (a JSON document in a JSON string in a tool result):")
    for name, fn in variants.items():
        caught, total, missed = nested_recall(fn)
        print(f"  {name:42} {caught}/{total}" + (f"  missed: {', '.join(missed)}" if missed else ""))
    print(f"\nms on 1 MB of hostile escapes (median of {min(args.repeat, 3)}):")
    for name, fn in variants.items():
        figures = hostile(fn, min(args.repeat, 3))
        print(f"  {name:42} " + ", ".join(f"{kind} {ms:.0f}" for kind, ms in figures.items()))


if __name__ == "__main__":
    main()
