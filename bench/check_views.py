"""Compare compacted views with a saved reference: a speed change must leave every view byte-identical.

    .venv/bin/python bench/check_views.py save DIR      # on the reference branch (e.g. main)
    .venv/bin/python bench/check_views.py compare DIR   # on the changed branch; exit 1 on any difference

Every session of ../shared/corpus and ../shared/samples, the real runs joined (~150k tokens) and the
generated sessions of bench_engine are compacted (force) at windows 65,536 and 32,768; the joined run is
also replayed in prefixes with one Readings kept across them (the engine's way). Each view (messages,
sources) and its report are written as JSON; compare names the cases whose view differs (exit 1), and
prints the report fields that differ (numbers and rule counts, never content).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_long import SOURCES, joined
from sessions import make_session

from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.readings import Readings
from timmy_compactor.core.types import Settings

WINDOWS = (65_536, 32_768)


def _view(doc: dict[str, Any], window: int, readings: Readings | None = None) -> dict[str, Any]:
    result = compact(
        doc["messages"],
        Settings(context_window=window),
        system_prompt=doc.get("system_prompt"),
        tools=doc.get("tools"),
        force=True,
        readings=readings,
    )
    view = json.dumps({"messages": result.messages, "sources": result.sources}, sort_keys=True, ensure_ascii=False)
    return {"view": view, "report": result.report.as_dict()}


def cases() -> Iterator[tuple[str, dict[str, Any]]]:
    docs: list[tuple[str, dict[str, Any]]] = []
    for source in SOURCES:
        docs += [(path.stem, json.loads(path.read_text())) for path in sorted(source.glob("*.json"))]
    docs.append(("joined_150k", joined(150_000)))
    docs += [(f"generated_{size}", make_session(size)) for size in (8_000, 32_000, 128_000)]
    for name, doc in docs:
        for window in WINDOWS:
            yield f"{name}@{window}", _view(doc, window)
    doc = joined(150_000)
    readings = Readings()
    messages = doc["messages"]
    for end in range(len(messages) // 4, len(messages) + 1, len(messages) // 4):
        yield f"replay_{end}@65536", _view({**doc, "messages": messages[:end]}, 65_536, readings)


def main() -> int:
    mode, folder = sys.argv[1], Path(sys.argv[2])
    folder.mkdir(parents=True, exist_ok=True)
    differ = 0
    for name, out in cases():
        path = folder / f"{name}.json"
        if mode == "save":
            path.write_text(json.dumps(out, sort_keys=True))
            continue
        saved = json.loads(path.read_text())
        if saved["view"] != out["view"]:
            differ += 1
            print(f"VIEW DIFFERS {name}")
        changed = {
            key: (saved["report"][key], value)
            for key, value in out["report"].items()
            if saved["report"].get(key) != value
        }
        if changed:  # counts, not content
            print(f"report differs {name}: {changed}")
    print(f"{mode}: done, {differ} views differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
