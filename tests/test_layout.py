"""The layout's rules, read from the imports in the source (nothing is imported to check them)."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

from tests.support import PACKAGE, REPO, import_graph, our_modules, reachable

MAX_LINES = 400
MAX_FUNCTION_LINES = 60
# Offenders allowed for a while, each at the size it had (none today): a listed unit may shrink but
# not grow, and comes off the list when it is split by concept, not by an arbitrary cut.
LONG_MODULES: dict[str, int] = {}
LONG_FUNCTIONS: dict[str, int] = {}
# The house, floor by floor (docs/layout.md draws it): a room imports only rooms on lower floors; on
# the ground floor the leaves may import the core and nothing else. `cli` is cli.py with show.py.
FLOORS: dict[str, int] = {
    "core": 1,
    "host": 1,
    "errors": 1,
    "atomic": 1,
    "locations": 1,
    "logs": 1,
    "timmy_compactor": 1,  # the package's __init__: the version, the engine's names (lazily)
    "config": 2,
    "sessions": 2,
    "compactor": 3,
    "export": 3,
    "compare": 3,
    "hermes": 3,  # the plugin: Hermes loads it by its entry point; only cli.py names it (by string)
    "sidecar": 4,
    "cli": 5,
    "tasks": 5,  # timmy_compactor/tasks.py and the root tasks.py shim
}
# The rooms below the plugin: they may not import it (Hermes' facts they need are in host/).
PLUGIN = "timmy_compactor.hermes"
VIEW_READERS = frozenset({"read_provenance", "restore_file", "view_is_current"})


def test_no_import_cycle_between_our_modules() -> None:
    graph = import_graph()
    cycles = []
    for module in graph:
        if module in reachable(graph, module):
            cycles.append(module)
    assert not cycles, f"modules on an import cycle: {sorted(cycles)}"


def test_the_core_imports_nothing_outside_the_core() -> None:
    graph = import_graph()
    for module, imported in graph.items():
        if module == "timmy_compactor.core" or module.startswith("timmy_compactor.core."):
            outside = [m for m in imported if not m.startswith("timmy_compactor.core")]
            assert not outside, f"{module} imports {outside}"


def test_the_package_never_imports_the_root_tasks_module() -> None:
    graph = import_graph()
    assert not [m for m, imported in graph.items() if "tasks" in imported], "the package imports tasks.py"


def test_the_export_never_reads_views() -> None:
    graph = import_graph()
    export = [m for m in graph if m == "timmy_compactor.export" or m.startswith("timmy_compactor.export.")]
    for module in export:
        assert "timmy_compactor.compactor" not in reachable(graph, module), module
        tree = ast.parse(our_modules()[module].read_text(encoding="utf-8"))
        names = {
            n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else n.name
            for n in ast.walk(tree)
            if isinstance(n, ast.Name | ast.Attribute | ast.alias)
        }
        assert not names & VIEW_READERS, f"{module} uses {sorted(names & VIEW_READERS)}"


def _sources() -> list[Path]:
    return [*PACKAGE.rglob("*.py"), REPO / "tasks.py"]


def test_no_module_over_400_lines() -> None:
    long = {
        name: n
        for path in _sources()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > LONG_MODULES.get(name := _name(path), MAX_LINES)
    }
    assert not long, f"over {MAX_LINES} lines (or longer than listed in LONG_MODULES): {long}"


def test_no_function_over_60_lines() -> None:
    """Lines from `def` to the function's last line (its docstring and comments count)."""
    long = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                key = f"{_name(path)}:{node.name}"
                if n > LONG_FUNCTIONS.get(key, MAX_FUNCTION_LINES):
                    long[key] = n
    assert not long, f"over {MAX_FUNCTION_LINES} lines (or longer than listed in LONG_FUNCTIONS): {long}"


def test_the_allow_lists_name_only_what_exists() -> None:
    names = {_name(path) for path in _sources()}
    assert set(LONG_MODULES) <= names, set(LONG_MODULES) - names
    assert {key.split(":")[0] for key in LONG_FUNCTIONS} <= names


def _name(path: Path) -> str:
    return str(path.relative_to(REPO))


def _room(module: str) -> str:
    parts = module.split(".")
    room = parts[1] if len(parts) > 1 else parts[0]
    return {"show": "cli", "timmy_compactor": "timmy_compactor"}.get(room, room)


def test_the_house_has_five_floors_and_no_import_runs_back_up() -> None:
    graph = import_graph()
    unplaced = sorted({_room(m) for m in graph} - set(FLOORS))
    assert not unplaced, f"rooms with no floor in FLOORS: {unplaced}"
    wrong = []
    for module, imported in graph.items():
        room = _room(module)
        for other in {_room(m) for m in imported} - {room}:
            ground = FLOORS[room] == 1 and other == "core"
            if FLOORS[other] >= FLOORS[room] and not ground:
                wrong.append(f"{module} ({room}, floor {FLOORS[room]}) -> {other} (floor {FLOORS[other]})")
    assert not wrong, wrong


def test_no_room_below_the_plugin_imports_it() -> None:
    """`hermes/` is the plugin at the top; the Hermes facts the rooms below use live in `host/`.
    (`cli.py` loads `hermes.cli` by name, as it loads every verb module.)"""
    graph = import_graph()
    for module, imported in graph.items():
        if module == PLUGIN or module.startswith(PLUGIN + "."):
            continue
        plugin = sorted(m for m in imported if m == PLUGIN or m.startswith(PLUGIN + "."))
        assert not plugin, f"{module} imports {plugin}"


def test_host_is_a_leaf() -> None:
    graph = import_graph()
    for module, imported in graph.items():
        if module.startswith("timmy_compactor.host"):
            ours = sorted(m for m in imported if not m.startswith("timmy_compactor.host"))
            assert not ours, f"{module} imports {ours}"


def test_the_sidecar_does_not_depend_on_the_evaluation() -> None:
    graph = import_graph()
    for module in graph:
        if module.startswith("timmy_compactor.sidecar"):
            evaluation = sorted(m for m in reachable(graph, module) if m.startswith("timmy_compactor.compare"))
            assert not evaluation, f"{module} reaches {evaluation}"


def test_the_sidecar_reaches_the_export_through_its_public_face() -> None:
    """The sidecar runs an export through `timmy_compactor.export` (what its `__init__` offers), never by
    importing one of the export's modules: they may be split or renamed without touching the daemon."""
    graph = import_graph()
    for module, imported in graph.items():
        if module.startswith("timmy_compactor.sidecar"):
            inside = sorted(m for m in imported if m.startswith("timmy_compactor.export."))
            assert not inside, f"{module} imports {inside}"


def test_one_exception_root() -> None:
    """Every exception class of ours derives from `TimmyError` (through classes of ours; a builtin
    base such as `ValueError` may stand beside it, never instead of it)."""
    classes: dict[str, list[str]] = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [
                    b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""
                    for b in node.bases
                ]
                assert node.name not in classes or not bases, f"two classes named {node.name}"
                classes[node.name] = bases

    def builtin_exception(name: str) -> bool:
        value = getattr(builtins, name, None)
        return isinstance(value, type) and issubclass(value, BaseException)

    def rooted(name: str) -> bool:
        return name == "TimmyError" or any(b in classes and rooted(b) for b in classes[name])

    def is_exception(name: str) -> bool:
        return any(builtin_exception(b) or (b in classes and is_exception(b)) for b in classes[name])

    exceptions = [name for name in classes if is_exception(name)]
    assert "RefError" in exceptions and "TimmyError" in exceptions
    assert not [name for name in exceptions if not rooted(name)], "exceptions not derived from TimmyError"


def test_the_graph_sees_lazy_and_relative_imports() -> None:
    """The reader is not blind: imports inside functions count (the old compactor ↔ sidecar cycle was one)."""
    graph = import_graph()
    assert "timmy_compactor.hermes.engine" in graph["timmy_compactor.hermes"]  # inside register()
    assert "timmy_compactor.export" in graph["timmy_compactor.sidecar.app"]  # inside a task
    assert "timmy_compactor.tasks" in graph["tasks"]
    assert "timmy_compactor.sidecar.app" in graph["timmy_compactor.tasks"]


# Who may list every state.db session (a GROUP BY over all its messages): the session sources, and the
# sidecar's one look per sweep (`dblook`, handed to the picker). Who decides between sources: the picker.
LISTERS = frozenset(
    {"timmy_compactor/sessions/statedb.py", "timmy_compactor/sessions/dbsource.py", "timmy_compactor/sidecar/dblook.py"}
)


def test_one_picker_between_the_session_sources() -> None:
    """ "state.db wins over the snapshot" is decided in `sessions/sources.py` only: no other module lists
    state.db's sessions to compare them with the snapshots (issue 23: it was decided in 6 places)."""
    listing = set()
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("high_water_marks", "read_marks", "by_file_id"):
                listing.add(_name(path))
    assert listing <= LISTERS, sorted(listing - LISTERS)


STATE_DB_READER = "timmy_compactor.sessions.statedb"


def test_only_sessions_imports_the_state_db_reader() -> None:
    """Hermes' state.db is read in one place, `sessions/statedb.py`, behind its source
    (`sessions/dbsource.py`); every other room reaches it through the sources."""
    graph = import_graph()
    importers = sorted(m for m, imported in graph.items() if STATE_DB_READER in imported)
    assert importers, "the rule checks nothing: no module imports the reader"
    outside = [m for m in importers if not m.startswith("timmy_compactor.sessions.")]
    assert not outside, f"import {STATE_DB_READER} outside sessions/: {outside}"


def test_one_message_alias() -> None:
    """`Message` is defined once, in core/types.py; every other module imports it."""
    defined = [
        _name(path)
        for path in _sources()
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "Message" for t in node.targets)
    ]
    assert defined == ["timmy_compactor/core/types.py"], defined
