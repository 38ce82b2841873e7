"""The package's import rules, checked on the source (every import counts: module level,
inside functions, under ``TYPE_CHECKING``):

* ``format`` imports neither ``record`` nor ``report``; ``record`` and ``report`` never
  import each other (docs/format.md: the capture format is the only contract);
* ``symbols`` and ``unwind`` (address -> name, DWARF unwinding) serve both sides: they import
  neither ``record``, ``report`` nor ``commands``, nor the capture reader;
* no import cycle anywhere in ``profiler/``;
* no private name (a leading underscore) is imported from another module, and a private
  module only from its own package;
* no module is longer than 700 lines.
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


FORBIDDEN = {"format": {"record", "report", "commands", "symbols", "unwind"}, "record": {"report", "commands"},
             "report": {"record", "commands"}, "symbols": {"record", "report", "commands", "unwind"},
             "unwind": {"record", "report", "commands"}}
CAPTURE_READER = "profiler.format.container"  # symbols and unwind take what they need, not a reader
MAX_LINES = 700


def test_the_graph_sees_known_edges() -> None:
    graph = import_graph()  # guards the checker itself: it must see real imports
    assert "profiler.format.records" in graph["profiler.format.decode.samples"]
    assert "profiler.symbols.elf" in graph["profiler.symbols.dso"]
    assert "profiler.report.pipeline" in graph["profiler.commands.flamegraph"]


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


@pytest.mark.parametrize("side", ["symbols", "unwind"])
def test_symbols_and_unwinding_need_no_capture_reader(side: str) -> None:
    bad = [f"{src} imports {dst}" for src, dsts in import_graph().items() if layer(src) == side
           for dst in sorted(dsts) if dst == CAPTURE_READER or dst.startswith(CAPTURE_READER + ".")]
    assert bad == []


def private_imports(source: str, name: str, package: str) -> list[str]:
    """In the source of module ``name`` (of ``package``): ``from X import _name`` (a private
    function, class or module of another module), and a private module imported from outside
    the package that holds it."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("profiler"):
            hidden = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
            if hidden:
                bad.append(f"{name}: from {node.module} import {', '.join(hidden)}")
                continue
            targets = [node.module]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names if a.name.startswith("profiler")]
        for target in targets:
            parts = target.split(".")
            for i, part in enumerate(parts[1:], 1):
                owner = ".".join(parts[:i])
                if part.startswith("_") and not part.startswith("__") and not (package + ".").startswith(owner + "."):
                    bad.append(f"{name} imports the private module {'.'.join(parts[:i + 1])}")
    return bad


def test_the_private_import_check_sees_them() -> None:
    source = ("from profiler.format.events import _Hidden\n"
              "from profiler.commands._common import warn\n"
              "import profiler.commands._output\n"
              "from profiler.report.capture import Capture\n")
    assert len(private_imports(source, "profiler.report.capture", "profiler.report")) == 3
    assert private_imports("from profiler.commands._common import warn\n", "profiler.commands.export",
                           "profiler.commands") == []


def test_no_private_name_is_imported_across_modules() -> None:
    bad = []
    for name, path in all_modules().items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        bad += private_imports(path.read_text(), name, package)
    assert bad == []


def test_no_module_is_over_the_limit() -> None:
    long = {module_name(p): n for p in sorted(ROOT.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}
