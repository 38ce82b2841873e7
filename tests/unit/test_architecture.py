"""The package's import rules, checked on the source (every import counts: module level,
inside functions, under ``TYPE_CHECKING``):

* ``format`` imports neither ``record`` nor ``report``; ``record`` and ``report`` never
  import each other (docs/format.md: the capture format is the only contract);
* no import cycle anywhere in ``profiler/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "profiler"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def imported_modules(path: Path, modules: dict[str, Path]) -> set[str]:
    """The ``profiler`` modules ``path`` imports (``from pkg import sub`` names the submodule)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    modules = all_modules()
    return {name: imported_modules(path, modules) for name, path in modules.items()}


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


FORBIDDEN = {"format": {"record", "report", "commands"}, "record": {"report"}, "report": {"record", "commands"}}


def test_the_graph_sees_known_edges() -> None:
    graph = import_graph()  # guards the checker itself: it must see real imports
    assert "profiler.format.records" in graph["profiler.format.decode.samples"]
    assert "profiler.report.symbols.elf" in graph["profiler.report.symbols.dso"]
    assert "profiler.report.stacks" in graph["profiler.commands.flamegraph"]


@pytest.mark.parametrize("side", sorted(FORBIDDEN))
def test_layers_do_not_import_across_the_format(side: str) -> None:
    bad = [
        f"{src} imports {dst}"
        for src, dsts in import_graph().items()
        if layer(src) == side
        for dst in sorted(dsts)
        if layer(dst) in FORBIDDEN[side]
    ]
    assert bad == []


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_cycle_finder_finds_a_cycle() -> None:
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    assert find_cycles(import_graph()) == []
