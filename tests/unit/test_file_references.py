"""Every repository path the code's docstrings and comments, the docs and the READMEs name exists.

Modules move (``report/symbols/`` → ``symbols/``, a module split into a package): a docstring
or a doc that still names the old place sends the next reader nowhere. This test reads
``profiler/**/*.py``, ``tests/**/*.py``, ``benchmarks/*.py``, ``fixtures/**/*.py``, ``docs/*.md``,
``README.md`` and ``tests/README.md``, takes what looks like a path of this repository and fails
on each one that names nothing:

* ``profiler/…``, ``tests/…``, ``fixtures/…``, ``docs/…``, ``benchmarks/…``, ``tools/…`` (a file,
  or a folder when it ends with ``/``) from the repository root;
* a relative path with a folder (``symbols/sources.py``, ``render/pprof.py``, ``unit/test_x.py``):
  from the naming file's folder or one of its parents up to the root, or as the tail of a path
  of the repository (a package-relative name; ``report/load.py`` from ``docs/``);
* a bare module name (``pipeline.py``): some file of that name exists;
* in Markdown, a link target (``[format](format.md)``) from the Markdown file's folder;
* a dotted module path (``profiler.report.tally``, ``profiler.format.decode.chains.split_callchains``): the
  longest importable prefix is a module of ``profiler`` and the rest are its attributes.

Absolute paths (``/proc/kallsyms``) and build outputs (``out/…``) are not the repository's.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

from tests.support.paths import ROOT

EXTENSIONS = ("py", "md", "c", "cpp", "h", "prof", "data", "txt", "json", "sh", "toml", "proto", "html", "folded",
              "js", "css", "so", "yml", "yaml", "cfg")
TOP = ("profiler", "tests", "fixtures", "docs", "benchmarks", "tools")
# what looks like a path: segments of word characters, dots and dashes joined by "/", ending in a
# known extension, or a top-level folder followed by segments and a final "/"
_SEG = r"[A-Za-z0-9_][A-Za-z0-9_.+-]*"
PATH_RE = re.compile(
    rf"(?<![\w/.$~-])((?:{_SEG}/)*{_SEG}\.(?:{'|'.join(EXTENSIONS)})|(?:{'|'.join(TOP)})/(?:{_SEG}/)*)(?![\w/-])")
LINK_RE = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
DOTTED_RE = re.compile(r"(?<![\w.])(profiler(?:\.[A-Za-z_]\w*)+)")
# Names that are not this repository's files: other projects' files, files made at run time.
ALLOWED = {
    "setup.py",  # setuptools' classic entry, named as what the project does without
}
OTHER_TREES = ("tools/perf/",)  # the kernel's perf sources (its documentation and code, quoted)


def tracked_files() -> list[Path]:
    skip = {".git", ".venv", "out", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", "__pycache__",
            "test-artifacts", "build"}
    found: list[Path] = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skip and not d.startswith(".")]
        found += [Path(folder, name).relative_to(ROOT) for name in files]
    return found


FILES = tracked_files()
BASENAMES = {p.name for p in FILES}
POSIX = [p.as_posix() for p in FILES]
DIRS = {q.as_posix() for p in FILES for q in p.parents if q != Path(".")}
DIR_NAMES = {Path(d).name for d in DIRS}


def ours(ref: str) -> bool:
    """Whether a path-like name is meant as one of this repository's: it starts with a top-level
    folder, or with the name of one of its folders (``symbols/sources.py``), or it is a bare
    ``.py`` module name. ``kernel/events/core.c``, ``libc.so``, ``app.prof`` are not."""
    first = ref.split("/")[0]
    if "/" in ref.rstrip("/"):
        return first in TOP or first in DIR_NAMES
    return ref.endswith(".py")


def sources() -> list[Path]:
    picked = [p for p in FILES if p.suffix == ".py" and p.parts[0] in ("profiler", "tests", "benchmarks", "fixtures")]
    picked += [p for p in FILES if p.suffix == ".md" and (p.parts[0] == "docs" or p.as_posix() in
                                                          ("README.md", "tests/README.md"))]
    return sorted(p for p in picked if "proto" not in p.parts and p.name != "test_file_references.py")


def exists(ref: str, where: Path) -> bool:
    """Whether ``ref``, named in the file ``where`` (relative to the root), is in the repository."""
    ref = ref.rstrip("/")
    if ref in ALLOWED or ref.split("/")[-1] in ALLOWED:
        return True
    if "/" not in ref:  # a bare name: some file or folder of that name
        return ref in BASENAMES or ref in DIR_NAMES
    if ref.split("/")[0] in TOP:
        return (ROOT / ref).exists()
    for base in [where.parent, *where.parent.parents]:  # from the naming file's folder up
        if (ROOT / base / ref).exists():
            return True
    return any(p == ref or p.endswith("/" + ref) for p in POSIX) or any(d.endswith("/" + ref) for d in DIRS)


def dotted_exists(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def references(path: Path) -> Iterator[tuple[int, str, str]]:
    """(line number, kind, reference) of every candidate in the file."""
    text = (ROOT / path).read_text(errors="replace")
    for lineno, line in enumerate(text.splitlines(), 1):
        for m in PATH_RE.finditer(line):
            ref = m.group(1)
            if ref.startswith(("out/", "build/", *OTHER_TREES)) or not ours(ref):
                continue
            yield lineno, "path", ref
        if path.suffix == ".md":
            for m in LINK_RE.finditer(line):
                target = m.group(1)
                if not re.match(r"[a-z]+:", target):  # not http:, mailto:
                    yield lineno, "link", target
        for m in DOTTED_RE.finditer(line):
            name = m.group(1).rstrip(".")
            if name.endswith((".com", ".org", ".io")):  # profiler.firefox.com
                continue
            if path.suffix == ".py" and re.match(r"\s*(from|import)\s", line):
                continue  # an import statement: Python checks those
            if not name.endswith((".py", ".md")):
                yield lineno, "module", name


def stale(path: Path) -> list[str]:
    bad = []
    for lineno, kind, ref in references(path):
        if kind == "link":
            ok = (ROOT / path.parent / ref).exists()
        elif kind == "module":
            ok = dotted_exists(ref)
        else:
            ok = exists(ref, path)
        if not ok:
            bad.append(f"{path}:{lineno}: {ref}")
    return bad


def test_the_scan_sees_the_kinds_of_reference_it_checks() -> None:
    """The patterns find what they are meant to (a pattern that matched nothing would pass)."""
    line = ("see `profiler/report/load.py`, symbols/chain.py, docs/format.md and profiler/report/ "
            "[spec](format.md) profiler.report.fold, not /proc/kallsyms or out/x.prof")
    found = {ref for _, _, ref in references_of_text(line, Path("docs/x.md"))}
    assert found == {"profiler/report/load.py", "symbols/chain.py", "docs/format.md", "profiler/report/",
                     "format.md", "profiler.report.fold"}


def references_of_text(text: str, where: Path) -> list[tuple[int, str, str]]:
    import tempfile

    with tempfile.NamedTemporaryFile("w", dir=ROOT, suffix=where.suffix, delete=True) as fh:
        fh.write(text)
        fh.flush()
        return list(references(Path(fh.name).relative_to(ROOT)))


def test_stale_references_are_caught() -> None:
    """A moved module, a wrong package-relative name, a dead link and a gone attribute fail."""
    here = Path("profiler/report/pipeline.py")
    assert exists("symbols/sources.py", here) and exists("report/capture.py", Path("docs/x.md"))
    assert not exists("report/no_such_module.py", here)
    assert not exists("profiler/format/no_such.py", here)
    assert not exists("profiler/nowhere/", here)
    assert not exists("never_written.py", here)
    assert dotted_exists("profiler.format.container.reader.CaptureReader")
    assert not dotted_exists("profiler.format.container.reader.NoSuchThing")
    assert not dotted_exists("profiler.no_such_package.module")


def test_named_files_exist() -> None:
    scanned = sources()
    assert len(scanned) > 100 and Path("README.md") in scanned and Path("profiler/report/pipeline.py") in scanned
    bad = [line for path in scanned for line in stale(path)]
    assert not bad, "names that no longer exist (moved or renamed?):\n" + "\n".join(bad)
