"""perf.data files written by the real ``perf record`` read by ``profiler``, compared with
``perf report`` and ``perf script`` on the very same files (no sampling noise: the same
samples), per event, per (comm, dso, symbol), exactly.

Recordings: user-bound (shares) without and with call chains, threads and a fork (forker),
kernel-bound under user call chains (syscalls: read, write, page faults, the vdso), pipe
mode (``-o -``), zstd-compressed records (``-z``), two events, DWARF stacks
(``--call-graph dwarf``: REGS_USER and STACK_USER in every sample).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

RECORDINGS: dict[str, tuple[list[str], str, str]] = {
    # name: (perf record options, workload, its argument)
    "flat": (["-F", "4000"], "shares", "0.4"),
    "callchains": (["-g", "-F", "4000"], "shares", "0.4"),
    "threads": (["-g", "-F", "4000"], "forker", "0.3"),
    "kernel": (["-g", "-F", "4000"], "syscalls", "0.6"),
    "pipe": (["-g", "-F", "4000", "-o", "-"], "syscalls", "0.4"),
    "zstd": (["-z", "-g", "-F", "4000"], "syscalls", "0.4"),
    "two-events": (["-g", "-e", "cpu-clock,page-faults", "-F", "2000"], "syscalls", "0.4"),
    "dwarf": (["--call-graph", "dwarf,4096", "-F", "1000"], "syscalls", "0.3"),
}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PROFILER_CACHE_DIR", "/tmp/profiler-test-cache")
    return env


@pytest.fixture(scope="module")
def perf() -> str:
    found = shutil.which("perf")
    if found is None:
        pytest.skip("perf is not installed: nothing to compare with")
    return found


@pytest.fixture(scope="module")
def recordings(require_perf: None, perf: str, fixtures_dir: Path,
               tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("perfdata")
    files = {}
    for name, (opts, workload, arg) in RECORDINGS.items():
        path = out / f"{name}.data"
        # -N: no build-id cache update (perf 6.1 aborts in it when another tool's event set
        # PERF_RECORD_MISC_MMAP_BUILD_ID on a shared MMAP2, see DESIGN.md); build-ids still land
        # in the file's header
        cmd = [perf, "record", "-q", "-N", *opts]
        if "-o" not in opts:
            cmd += ["-o", str(path)]
        cmd += ["--", str(fixtures_dir / "workloads" / workload), arg]
        res = _record(cmd, path, "-o" in opts)
        if res.returncode != 0 and b"build-id.c" in res.stderr:
            # perf 6.1 aborts collecting build-ids at exit when another tool's event made the
            # kernel flag a shared MMAP2 with PERF_RECORD_MISC_MMAP_BUILD_ID (DESIGN.md; other
            # test suites record at the same time): record again without build-ids (-B)
            res = _record([*cmd[:4], "-B", *cmd[4:]], path, "-o" in opts)
        assert res.returncode == 0, res.stderr.decode()
        files[name] = path
    return files


def _record(cmd: list[str], path: Path, to_stdout: bool) -> subprocess.CompletedProcess[bytes]:
    with open(path, "wb") if to_stdout else open(os.devnull, "wb") as sink:
        return subprocess.run(cmd, stdout=sink, stderr=subprocess.PIPE, timeout=120)


def perf_counts(perf: str, path: Path, children: bool = False) -> dict[str, dict[tuple[str, str, str], float]]:
    """{event: {(comm, dso, symbol): samples}} from perf report's table (percent in
    children mode)."""
    mode = "--children" if children else "--no-children"
    res = subprocess.run([perf, "report", "-i", str(path), "--stdio", mode, "-n", "-g", "none",
                          "--sort", "comm,dso,sym"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out: dict[str, dict[tuple[str, str, str], float]] = {}
    event = ""
    row = (r"^\s+([\d.]+)%\s+([\d.]+)%\s+\d+\s+(\S+)\s+(\S+)\s+\[[k.]\] (.+?)\s*$" if children
           else r"^\s+[\d.]+%\s+(\d+)\s+(\S+)\s+(\S+)\s+\[[k.]\] (.+?)\s*$")
    for line in res.stdout.splitlines():
        m = re.match(r"^# Samples: .* of event '(.*)'", line)
        if m:
            event = m.group(1)
            out[event] = {}
            continue
        m = re.match(row, line)
        if m:
            n = len(m.groups())
            key = (m.group(n - 2), m.group(n - 1), _sym(m.group(n), m.group(n - 1)))
            out[event][key] = out[event].get(key, 0) + float(m.group(1) if children else m.group(1))
    return out


def _sym(name: str, dso: str) -> str:
    """perf prints an unresolved frame as 0x%016x, we print 0x... (bare hex outside any
    DSO): compare addresses as numbers."""
    if re.fullmatch(r"0x[0-9a-f]+", name) or (dso == "[unknown]" and re.fullmatch(r"[0-9a-f]+", name)):
        return f"{int(name, 16):#x}"
    return name


def our_counts(profiler_cmd: list[str], path: Path, event: str,
               children: bool = False) -> dict[tuple[str, str, str], float]:
    mode = "--children" if children else "--no-children"
    # --no-inline: perf's entries are the symbol table's functions (it shows inlined ones only
    # inside printed call graphs)
    res = subprocess.run([*profiler_cmd, "report", "-i", str(path), "--event", event, "--format", "json",
                          mode, "-g", "none", "--sort", "comm,dso,sym", "--no-inline"],
                         capture_output=True, text=True, timeout=300, env=_env())
    assert res.returncode == 0, res.stderr
    out: dict[tuple[str, str, str], float] = {}
    for r in json.loads(res.stdout)["rows"]:
        key = (r["comm"], r["dso"], _sym(r["symbol"], r["dso"]))
        out[key] = out.get(key, 0) + (r["children"] if children else r["samples"])
    return out


@pytest.mark.parametrize("name", list(RECORDINGS))
def test_self_samples_per_symbol_equal_perf_report(name: str, recordings: dict[str, Path], perf: str,
                                                   profiler_cmd: list[str]) -> None:
    theirs = perf_counts(perf, recordings[name])
    assert theirs, "perf report printed no event"
    if name == "two-events":
        assert len(theirs) == 2
    for event, expected in theirs.items():
        ours = _plt(our_counts(profiler_cmd, recordings[name], event))
        expected = _plt(expected)
        assert sum(expected.values()) > 0
        assert ours == expected, (event, {k: (expected.get(k), ours.get(k)) for k in set(ours) ^ set(expected)
                                          | {k for k in ours if ours[k] != expected.get(k)}})
    if name in ("kernel", "zstd", "pipe"):
        symbols = {k[2] for k in next(iter(theirs.values())) if k[1] == "[kernel.kallsyms]"}
        assert len(symbols) >= 3 and not any(s.startswith("0x") for s in symbols)


@pytest.mark.parametrize("name", ["callchains", "kernel", "zstd"])
def test_children_per_symbol_equal_perf_report(name: str, recordings: dict[str, Path], perf: str,
                                               profiler_cmd: list[str]) -> None:
    for event, expected in perf_counts(perf, recordings[name], children=True).items():
        ours = _unresolved_in_page(_plt(our_counts(profiler_cmd, recordings[name], event, children=True)))
        expected = _unresolved_in_page(_plt(expected))
        assert set(ours) == set(expected)
        for key, percent in expected.items():
            # perf prints two decimals; the merged PLT row (see _plt) sums each entry's Children,
            # where perf's bare '@plt' counts a sample once that passes two PLT entries
            assert abs(ours[key] - percent) <= (0.02 if key[2] == "@plt" else 0.0051), key


def _unresolved_in_page(counts: dict[tuple[str, str, str], float]) -> dict[tuple[str, str, str], float]:
    """perf 6.1 names a frame without a symbol that only callchains reach (a Children-only
    row) by its absolute address, and the same frame as a sample's leaf by its address in the
    DSO, as we always do (seen once: a return address in [vdso], 0x7f796fcf1389 against
    0x389). Both agree within their page (a mapping starts on a page, and an ELF segment's
    address and file offset agree modulo the page size), so such rows are compared there."""
    out: dict[tuple[str, str, str], float] = {}
    for (comm, dso, sym), value in counts.items():
        if sym.startswith("0x") and dso != "[kernel.kallsyms]":
            sym = f"0x...{int(sym, 16) & 0xFFF:03x}"
        out[comm, dso, sym] = out.get((comm, dso, sym), 0) + value
    return out


def _plt(counts: dict[tuple[str, str, str], float]) -> dict[tuple[str, str, str], float]:
    """perf 6.1 names some PLT entries of libc bare ``@plt`` where we find their target
    (``__tunable_get_val@plt``): compare PLT entries by DSO only."""
    out: dict[tuple[str, str, str], float] = {}
    for (comm, dso, sym), value in counts.items():
        key = (comm, dso, "@plt" if sym.endswith("@plt") else sym)
        out[key] = out.get(key, 0) + value
    return out


def _script_frames(text: str) -> list[str]:
    """Every frame line (address, symbol+offset, dso) of a perf-script text, in order; a PLT
    entry as perf 6.1 prints some of libc's (bare ``@plt+0x0``, where we name the target,
    ``__tunable_get_val@plt+0x0``)."""
    return [re.sub(r" \S*@plt\+", " @plt+", line.strip()) for line in text.splitlines() if line.startswith("\t")]


@pytest.mark.parametrize("name", ["callchains", "threads", "kernel", "pipe"])
def test_script_frames_equal_perf_script(name: str, recordings: dict[str, Path], perf: str,
                                         profiler_cmd: list[str]) -> None:
    theirs = subprocess.run([perf, "script", "-i", str(recordings[name])], capture_output=True, text=True,
                            timeout=300)
    assert theirs.returncode == 0, theirs.stderr
    ours = subprocess.run([*profiler_cmd, "script", "--no-inline", "-i", str(recordings[name])], capture_output=True,
                          text=True, timeout=300, env=_env())
    assert ours.returncode == 0, ours.stderr
    expected = _script_frames(theirs.stdout)
    assert len(expected) > 1000
    assert _script_frames(ours.stdout) == expected


def test_pipe_from_perf_record_into_report(perf: str, fixtures_dir: Path, profiler_cmd: list[str],
                                           require_perf: None) -> None:
    """``perf record -o - | profiler report -i -``: the stream, never a file."""
    rec = subprocess.Popen([perf, "record", "-q", "-N", "-g", "-o", "-", "--",
                            str(fixtures_dir / "workloads" / "shares"), "0.3"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    rep = subprocess.run([*profiler_cmd, "report", "-i", "-", "--no-children", "--sort", "sym", "--format",
                          "json", "-g", "none"], stdin=rec.stdout, capture_output=True, text=True,
                         timeout=120, env=_env())
    assert rec.wait(timeout=60) == 0
    assert rep.returncode == 0, rep.stderr
    rows = {r["symbol"]: r["self"] for r in json.loads(rep.stdout)["rows"]}
    assert rows["work_a"] > rows["work_b"] > rows["work_c"] > 10


def test_import_then_report_is_the_same(recordings: dict[str, Path], perf: str, profiler_cmd: list[str],
                                        tmp_path: Path) -> None:
    for name in ("kernel", "zstd"):
        out = tmp_path / f"{name}.prof"
        res = subprocess.run([*profiler_cmd, "import", str(recordings[name]), "-o", str(out)],
                             capture_output=True, text=True, timeout=120, env=_env())
        assert res.returncode == 0, res.stderr
        for event, expected in perf_counts(perf, recordings[name]).items():
            assert our_counts(profiler_cmd, out, event) == expected


def test_dwarf_samples_keep_their_user_stacks(recordings: dict[str, Path]) -> None:
    """REGS_USER and STACK_USER arrive intact for the DWARF unwinder (decoded one by one)."""
    import profiler.format.perfdata  # noqa: F401  registers the perf.data reader
    from profiler.format import records as R
    from profiler.format.container.reader import CaptureReader

    reader = CaptureReader.open(recordings["dwarf"])
    samples = [r for r in reader.iter_records() if isinstance(r, R.Sample)]
    assert samples
    user = [s for s in samples if s.misc & 7 == R.PERF_RECORD_MISC_USER]
    assert user and all(s.regs_user and s.stack_user for s in user)
    assert max(len(s.stack_user or b"") for s in user) == 4096
