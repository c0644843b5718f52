"""The layout's rules, read from the imports in the source (nothing is imported to check them)."""

from __future__ import annotations

import ast

from tests.support import PACKAGE, REPO, import_graph, our_modules, reachable

MAX_LINES = 500
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


def test_no_module_over_500_lines() -> None:
    long = {
        str(path.relative_to(REPO)): n
        for path in [*PACKAGE.rglob("*.py"), REPO / "tasks.py"]
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, long


def test_the_graph_sees_lazy_and_relative_imports() -> None:
    """The reader is not blind: imports inside functions count (the old compactor ↔ sidecar cycle was one)."""
    graph = import_graph()
    assert "timmy_compactor.hermes.engine" in graph["timmy_compactor.hermes"]  # inside register()
    assert "timmy_compactor.export.run" in graph["timmy_compactor.sidecar.app"]  # inside a task
    assert "timmy_compactor.tasks" in graph["tasks"]
    assert "timmy_compactor.sidecar.app" in graph["timmy_compactor.tasks"]
