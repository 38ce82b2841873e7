"""Source lines and inlined frames end to end, against perf.

fixtures/workloads/inline spends its time in functions GCC inlines into ``drive``. It is
recorded with ``profiler record -g`` and with ``perf record -g`` (one after the other);
``--sort srcline`` must give the same lines with the same shares as ``perf report --sort
srcline`` (within sampling noise); call stacks must show the inlined functions
``addr2line -i`` names at each sampled address (perf 6.1 here shows none), ``--no-inline``
must drop them, and an archived capture must show the same lines with the binary gone.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from profiler.report.offline.archive import archive_capture
from profiler.symbols.srcline import clear_line_tables
from profiler.symbols.dso import clear_symbol_cache

from tests.support.offline_helpers import record

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def _fresh() -> None:
    clear_symbol_cache()
    clear_line_tables()


@pytest.fixture
def binary(fixtures_dir: Path, tmp_path: Path) -> Path:
    path = tmp_path / "app" / "inline"
    path.parent.mkdir()
    shutil.copy(fixtures_dir / "workloads" / "inline", path)
    return path


@pytest.fixture
def ours(binary: Path, tmp_path: Path, require_perf: None) -> Path:
    capture = tmp_path / "inline.prof"
    record(capture, [str(binary), "1.0"])
    return capture


def perf_capture(binary: Path, tmp_path: Path) -> Path:
    perf = shutil.which("perf")
    if perf is None:
        pytest.skip("perf is not installed")
    data = tmp_path / "perf.data"
    rec = subprocess.run([perf, "record", "-q", "-g", "-o", str(data), "--", str(binary), "1.0"],
                         capture_output=True, text=True)
    if rec.returncode != 0:
        pytest.skip(f"perf record does not work here: {rec.stderr.strip()[:200]}")
    return data


def profiler(*args: str | Path) -> str:
    done = subprocess.run([sys.executable, "-m", "profiler", *map(str, args)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def our_lines(capture: Path, *extra: str) -> dict[str, float]:
    rows = json.loads(profiler("report", "-i", capture, "--sort", "srcline", "--no-children", "-g", "none",
                               "--format", "json", "--comm", "inline", *extra))["rows"]
    return {r["srcline"]: r["self"] for r in rows}


def test_srclines_agree_with_perf(binary: Path, ours: Path, tmp_path: Path) -> None:
    data = perf_capture(binary, tmp_path)
    out = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "-q", "--sort", "srcline",
                          "--no-children", "-g", "none", "--comm", "inline"],
                         capture_output=True, text=True, check=True).stdout
    theirs: dict[str, float] = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)", line)
        if m:
            theirs[m.group(2)] = theirs.get(m.group(2), 0.0) + float(m.group(1))
    mine = our_lines(ours)
    big = {k for k, v in theirs.items() if v >= 5.0} | {k for k, v in mine.items() if v >= 5.0}
    assert big and all(k.startswith("inline.c:") for k in big), (mine, theirs)
    for key in big:
        assert mine.get(key, 0.0) == pytest.approx(theirs.get(key, 0.0), abs=6.0), (key, mine, theirs)


def addr2line_functions(binary: Path, addrs: list[int]) -> dict[int, list[str]]:
    out = subprocess.run(["addr2line", "-a", "-f", "-i", "-e", str(binary), *map(hex, addrs)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    chains: dict[int, list[str]] = {}
    current: list[str] = []
    i = 0
    while i < len(out):
        if out[i].startswith("0x"):
            current = chains.setdefault(int(out[i], 16), [])
            i += 1
        else:
            current.append(out[i])
            i += 2
    return chains


def test_inlined_frames_are_addr2lines_chains(binary: Path, ours: Path) -> None:
    """perf 6.1 here shows no inlined frames (its addr2line path has none); binutils'
    addr2line -i is the reference: every sampled address of drive shows, above it, the
    functions addr2line says are inlined there, innermost first."""
    text = profiler("script", "-i", ours, "--comm", "inline")
    seen: dict[int, list[str]] = {}
    for block in text.split("\n\n"):
        frames = re.findall(r"^\t\s*([0-9a-f]+) (\w+)(?: \(inlined\)|\+0x[0-9a-f]+) \((\S+)\)$", block, re.M)
        inlined: list[str] = []
        for addr, name, dso in frames:
            if dso != str(binary):
                inlined = []
                continue
            if name == "drive":
                seen.setdefault(int(addr, 16), inlined + ["drive"])
            inlined = inlined + [name] if name != "drive" else []
    assert len(seen) >= 5
    expected = addr2line_functions(binary, sorted(seen))
    assert {a: expected[a] for a in seen} == seen
    names = {n for chain in seen.values() for n in chain}
    assert {"mix", "fold", "step"} <= names
    folded = profiler("export", "-i", ours, "-f", "folded", "--comm", "inline")
    assert re.search(r"drive;fold \(inlined\);step \(inlined\) \d+", folded)
    plain = profiler("export", "-i", ours, "-f", "folded", "--comm", "inline", "--no-inline")
    assert "(inlined)" not in plain and "drive" in plain


def test_script_prints_srclines(ours: Path) -> None:
    text = profiler("script", "-i", ours, "--comm", "inline", "--srcline")
    assert re.search(r"drive\+0x[0-9a-f]+ \(\S+/inline\)\n  inline\.c:\d+\n", text)


def _speedscope_frames(capture: Path, *extra: str) -> dict[str, dict[str, object]]:
    doc = json.loads(profiler("export", "-i", capture, "-f", "speedscope", "-o", "-", "--comm", "inline", *extra))
    return {str(f["name"]): f for f in doc["shared"]["frames"]}


def test_archive_carries_the_lines(binary: Path, ours: Path, tmp_path: Path) -> None:
    """An archived capture shows the same lines with the binary gone, functions' start
    lines (exports) included."""
    before, frames_before = our_lines(ours), _speedscope_frames(ours)
    archived = tmp_path / "archived.prof"
    archive_capture(ours, output=archived)
    shutil.rmtree(binary.parent)
    clear_symbol_cache()
    clear_line_tables()
    empty = tmp_path / "empty"
    empty.mkdir()
    after = our_lines(archived, "--symfs", str(empty), "--debug-dir", str(empty))
    assert after == before and any(k.startswith("inline.c:") for k in after)
    frames_after = _speedscope_frames(archived, "--symfs", str(empty), "--debug-dir", str(empty))
    assert frames_before["drive"]["file"] == "inline.c" and isinstance(frames_before["drive"]["line"], int)
    assert frames_after["drive"] == frames_before["drive"]


def test_callers_show_the_line_of_their_call(fixtures_dir: Path, tmp_path: Path, require_perf: None) -> None:
    """A caller's entry is a return address: its line is the call's (address minus one),
    what addr2line says for the call instruction, never the line after the call."""
    binary = fixtures_dir / "workloads" / "shares"
    capture = tmp_path / "shares.prof"
    record(capture, [str(binary), "0.15"])
    text = profiler("script", "-i", capture, "--comm", "shares", "--srcline", "--no-inline")
    callers: dict[int, str] = {}
    for block in text.split("\n\n"):
        entries = re.findall(r"^\t\s*([0-9a-f]+) \S+ \((\S+)\)\n  (\S+)$", block, re.M)
        for addr, dso, line in entries[1:]:  # the first entry is the sampled address itself
            if dso == str(binary):
                callers.setdefault(int(addr, 16), line)
    assert len(callers) >= 3
    out = subprocess.run(["addr2line", "-e", str(binary), *[hex(a - 1) for a in sorted(callers)]],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    expected = [o.split(" ")[0].rsplit("/", 1)[-1] for o in out]  # "file:line (discriminator N)"
    assert [callers[a] for a in sorted(callers)] == expected


def _leaf_srclines(text: str, binary: Path) -> dict[int, str]:
    """Sampled address -> its srcline line, for blocks whose leaf is in ``binary``, from
    ``script -F ip,sym,dso,srcline`` text (perf's or ours)."""
    leaves: dict[int, str] = {}
    for block in text.split("\n\n"):
        m = re.match(r"\s*\n?\t\s*([0-9a-f]+) \S+ \((\S+)\)\n  (\S+)\n", block.lstrip("\n") + "\n")
        if m and m.group(2) == str(binary):
            leaves.setdefault(int(m.group(1), 16), m.group(3))
    return leaves


def test_script_srcline_field_agrees_with_perf(binary: Path, ours: Path, tmp_path: Path) -> None:
    """``-F ip,sym,dso,srcline`` in perf's layout: every sampled address of the fixture
    that both recordings hit shows the same ``inline.c:N`` line as ``perf script``; kernel
    frames show perf's ``[kernel.kallsyms][address]`` fallback."""
    data = perf_capture(binary, tmp_path)
    theirs_text = subprocess.run(["perf", "script", "-i", str(data), "-F", "ip,sym,dso,srcline", "--comm", "inline"],
                                 capture_output=True, text=True, check=True).stdout
    mine_text = profiler("script", "-i", ours, "-F", "ip,sym,dso,srcline", "--comm", "inline", "--no-inline")
    theirs, mine = _leaf_srclines(theirs_text, binary), _leaf_srclines(mine_text, binary)
    both = sorted(set(theirs) & set(mine))
    assert len(both) >= 3, (sorted(theirs), sorted(mine))
    assert {a: mine[a] for a in both} == {a: theirs[a] for a in both}
    assert all(v.startswith("inline.c:") for v in mine.values())
    for m in re.finditer(r"^\t\s*([0-9a-f]{16}) \S+ \(\[kernel\.kallsyms\]\)\n  (.*)$", mine_text, re.M):
        assert m.group(2) == f"[kernel.kallsyms][{m.group(1).lstrip('0')}]"


def test_script_srcline_field_without_call_chains(binary: Path, ours: Path, tmp_path: Path) -> None:
    """Without call chains the sampled address's line follows the sample's line, as perf
    prints it; ``--json`` carries each frame's srcline."""
    flat = tmp_path / "flat.prof"
    done = subprocess.run([sys.executable, "-m", "profiler", "record", "-q", "-o", str(flat), "--", str(binary), "0.3"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    text = profiler("script", "-i", flat, "-F", "comm,ip,sym,srcline", "--comm", "inline")
    assert re.search(r"^\s+inline\s+[0-9a-f]+ drive\n  inline\.c:\d+$", text, re.M), text[:2000]
    lines = [json.loads(x) for x in profiler("script", "-i", ours, "--json", "--comm", "inline").splitlines()]
    leaves = [s["callchain"][0] for s in lines if s["callchain"] and s["callchain"][0]["dso"] == str(binary)]
    # A rare leaf in code without line information (a PLT stub, the C runtime's start-up
    # code) has none, as perf prints ??:0 for it; every line given is the fixture's.
    lined = [f["srcline"] for f in leaves if f["srcline"] is not None]
    assert leaves and len(lined) >= 0.99 * len(leaves), [f for f in leaves if f["srcline"] is None][:5]
    assert all(re.fullmatch(r"inline\.c:\d+", line) for line in lined)


def _sampled_addresses(capture: Path, binary: Path) -> list[int]:
    text = profiler("script", "-i", capture, "--comm", "inline", "--no-inline", "-F", "ip,dso")
    return sorted({int(a, 16) for a, dso in re.findall(r"^\t\s*([0-9a-f]+) \((\S+)\)$", text, re.M)
                   if dso == str(binary)})


def addr2line_lines(binary: Path, addrs: list[int]) -> dict[str, set[str]]:
    """function -> the ``file:line`` texts ``addr2line -f -i`` gives it at ``addrs``."""
    out = subprocess.run(["addr2line", "-f", "-i", "-e", str(binary), *map(hex, addrs)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    found: dict[str, set[str]] = {}
    for name, where in zip(out[::2], out[1::2]):
        found.setdefault(name, set()).add(where.split(" ")[0].rsplit("/", 1)[-1])
    return found


def test_json_call_graph_nodes_carry_their_lines(binary: Path, ours: Path) -> None:
    """``--format json -g caller``: every node says which source lines its period went
    through; the lines of ``drive`` and of the functions inlined into it are lines
    addr2line -i gives them at the sampled addresses (or at a caller's call), and a node's
    lines add up to its period."""
    sampled = _sampled_addresses(ours, binary)
    reference = addr2line_lines(binary, sorted({x for a in sampled for x in (a, a - 1)}))
    doc = json.loads(profiler("report", "-i", ours, "--format", "json", "--no-children", "-g", "caller",
                              "--comm", "inline", "--sort", "sym"))
    checked: set[str] = set()

    def walk(nodes: list[dict[str, object]]) -> None:
        for node in nodes:
            name = str(node["symbol"]).removesuffix(" (inlined)")
            lines = node["srclines"]
            assert isinstance(lines, list)
            if node["dso"] == binary.name and name in ("drive", "mix", "fold", "step"):
                assert lines and sum(x["period"] for x in lines) == node["period"], node
                assert {x["srcline"] for x in lines} <= reference[name], (name, lines, reference[name])
                checked.add(name)
            walk(node["children"])  # type: ignore[arg-type]

    for row in doc["rows"]:
        walk(row["callgraph"])
    assert {"drive", "mix", "fold", "step"} <= checked
