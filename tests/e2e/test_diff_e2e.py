"""``profiler diff`` against ``perf diff`` (perf 6.1, the reference) on real recordings of the
fixture workloads, and across two builds of one program (the CI gate).

* The same two perf.data files through both tools: every row's Baseline and computed value are
  perf's printed texts, for ``-c delta``, ``delta-abs``, ``ratio`` and ``wdiff:1,1`` (and the
  rows are the same rows); the same files imported as captures (``profiler import``) give the
  same numbers.
* Our two captures recorded by ``profiler record`` of the same runs that ``perf record``
  recorded (perf records the profiler and its child): the two tools sample independently, so
  shares agree within a point, not to the printed digit.
* Two builds of ``builds.c`` (one function 3x slower, one removed, one added, every address
  moved), three captures of each: the slower function is the first row by delta, the gate fails
  on it, and it passes on no-change repeats (10 splits of nine captures of one build into
  3 against 3).
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from profiler.report.aggregate import aggregate
from profiler.report.diff import Compute, Side, build_diff, side_of
from profiler.report.diffgate import check, parse_rules
from profiler.report.options import LoadOptions
from profiler.report.pipeline import load_profile

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("require_perf")]
PERF = shutil.which("perf")
needs_perf = pytest.mark.skipif(PERF is None, reason="perf (the reference) is not installed")
Rows = dict[tuple[str, str], tuple[str, str]]


def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def table(text: str) -> Rows:
    """(dso, symbol) -> (Baseline cell, computed cell) of a default dso,sym diff. The value
    columns are fixed-width (Baseline 8, then the computed column as wide as its title). A PLT
    entry's symbol reads ``[.] @plt``, as perf 6.1 names some of libc's (see :func:`sections`)."""
    lines = text.splitlines()
    titles = next(i for i, line in enumerate(lines) if line.startswith("# Baseline"))
    dots = lines[titles + 1][2:].split("  ")
    w0, w1, w2 = len(dots[0]), len(dots[1]), len(dots[2])
    out: Rows = {}
    for line in lines[titles + 3:]:
        body = line[2:]
        base, value = body[:w0].strip(), body[w0 + 2:w0 + 2 + w1].strip()
        rest = body[w0 + w1 + 4:]
        out[(rest[:w2].strip(), re.sub(r"^\[\.\] \S*@plt$", "[.] @plt", rest[w2 + 2:]))] = (base, value)
    return out


def heads(text: str) -> list[str]:
    """The first lines (event, titles, dots), the Symbol column's dots as in :func:`sections`."""
    return [re.sub(r"\.{3,}$", "...", line.rstrip()) for line in text.splitlines()[:5]]


@pytest.fixture(scope="module")
def perf_pair(fixtures_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if PERF is None:
        pytest.skip("perf (the reference) is not installed")
    d = tmp_path_factory.mktemp("perfdiff")
    out = []
    for name in ("a", "b"):
        data = d / f"{name}.data"
        res = run([PERF, "record", "-q", "-g", "-o", str(data), "--", str(fixtures_dir / "workloads" / "shares"),
                   "0.3"])
        assert res.returncode == 0, res.stderr
        out.append(data)
    return out[0], out[1]


@needs_perf
@pytest.mark.parametrize("compute", ["delta", "delta-abs", "ratio", "wdiff:1,1"])
def test_perf_data_rows_equal_perf_diffs(perf_pair: tuple[Path, Path], profiler_cmd: list[str],
                                         compute: str) -> None:
    assert PERF is not None
    a, b = map(str, perf_pair)
    theirs = run([PERF, "diff", "-c", compute, a, b])
    assert theirs.returncode == 0, theirs.stderr
    ours = run([*profiler_cmd, "diff", "-c", compute, a, b])
    assert ours.returncode == 0, ours.stderr
    want, got = table(theirs.stdout), table(ours.stdout)
    assert len(want) >= 3 and ("shares", "[.] work_a") in want
    assert got == want
    assert heads(ours.stdout) == heads(theirs.stdout)  # event, titles, dots


@needs_perf
def test_periods_and_formulas_equal_perf_diffs(perf_pair: tuple[Path, Path], profiler_cmd: list[str]) -> None:
    assert PERF is not None
    a, b = map(str, perf_pair)
    for args in (["-p", "-F"], ["-c", "ratio", "-p", "-F"], ["-c", "wdiff:2,3", "-F"]):
        theirs, ours = run([PERF, "diff", *args, a, b]), run([*profiler_cmd, "diff", *args, a, b])
        assert ours.returncode == 0, ours.stderr
        # each row's cells, whatever the order of ties
        assert sections(ours.stdout) == sections(theirs.stdout)


@needs_perf
def test_imported_captures_give_perf_diffs_numbers(perf_pair: tuple[Path, Path], profiler_cmd: list[str],
                                                   tmp_path: Path) -> None:
    assert PERF is not None
    caps = []
    for data in perf_pair:
        cap = tmp_path / (data.stem + ".prof")
        res = run([*profiler_cmd, "import", str(data), "-o", str(cap)])
        assert res.returncode == 0, res.stderr
        caps.append(str(cap))
    for compute in ("delta", "ratio", "wdiff:1,1"):
        theirs = run([PERF, "diff", "-c", compute, *map(str, perf_pair)])
        ours = run([*profiler_cmd, "diff", "-c", compute, *caps])
        assert ours.returncode == 0, ours.stderr
        assert table(ours.stdout) == table(theirs.stdout)
    mixed = run([*profiler_cmd, "diff", "-c", "delta", caps[0], str(perf_pair[1])])
    assert table(mixed.stdout) == table(run([PERF, "diff", "-c", "delta", *map(str, perf_pair)]).stdout)


def sections(text: str) -> list[tuple[list[str], list[str]]]:
    """Each event's section: its header lines, its rows as a sorted list (perf orders rows of
    equal value by its own internal order, which a reader need not follow).

    One known difference is set aside: perf 6.1 names some PLT entries of libc ``@plt``, with
    an empty symbol, where we name the function the entry jumps to (``__tunable_get_val@plt``):
    such a row is compared as ``@plt``, and the Symbol column's width (the title's padding
    and its dots, which that longer name can widen) is not compared."""
    out: list[tuple[list[str], list[str]]] = []
    for line in text.splitlines():
        if line.startswith("# Event"):
            out.append(([], []))
        if not line:
            continue
        if line.startswith("#"):
            out[-1][0].append(re.sub(r"\.{3,}$", "...", line.rstrip()))
        else:
            out[-1][1].append(re.sub(r"\[\.\] \S*@plt$", "[.] @plt", line))
    return [(head, sorted(rows)) for head, rows in out]


def plt_header_as_perf(text: str, exe: Path) -> str:
    """A second known difference, seen when a sample lands in the lazy-binding stub at the start
    of the workload's ``.plt`` (PLT0: no symbol covers it): we show ``shares+0x1020``, perf 6.1
    stretches ``_init`` (just below, in ``.init``) over the gap and names it ``_init``. Our name
    for that one address is given perf's before comparing."""
    from elftools.elf.elffile import ELFFile

    with open(exe, "rb") as f:
        plt = ELFFile(f).get_section_by_name(".plt")
        if plt is None:
            return text
        plt0 = int(plt["sh_addr"])
    return re.sub(rf"\[\.\] shares\+{plt0:#x}$", "[.] _init", text, flags=re.M)


@pytest.fixture(scope="module")
def two_event_pair(fixtures_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Two perf.data files of cpu-clock and page-faults, and one of cpu-clock alone."""
    if PERF is None:
        pytest.skip("perf (the reference) is not installed")
    d = tmp_path_factory.mktemp("perfdiff2")
    out = []
    for name, events in (("a", "cpu-clock,page-faults"), ("b", "page-faults,cpu-clock"), ("c", "cpu-clock")):
        data = d / f"{name}.data"
        res = run([PERF, "record", "-q", "-e", events, "-o", str(data), "--",
                   str(fixtures_dir / "workloads" / "shares"), "0.3"])
        assert res.returncode == 0, res.stderr
        out.append(data)
    return out[0], out[1], out[2]


@needs_perf
@pytest.mark.parametrize("args", [[], ["-b"], ["-b", "-p", "-c", "ratio"], ["-t", ";"], ["-t", ",", "-p", "-F"],
                                  ["-t", ";", "-c", "wdiff:1,2", "-p"], ["-b", "-t", "|", "-c", "delta"]])
def test_every_event_and_perfs_b_and_t_options(two_event_pair: tuple[Path, Path, Path], profiler_cmd: list[str],
                                               args: list[str], fixtures_dir: Path) -> None:
    """perf diff's section per event of BASE (page-faults listed first in b.data: matched by
    name; c.data has no page-faults: that section's new column is blank), -b and -t: the same
    text as perf's, up to the order of rows of equal value."""
    assert PERF is not None
    a, b, c = map(str, two_event_pair)
    for files in ([a, b], [a, c], [a, b, c]):
        theirs = run([PERF, "diff", *args, *files])
        assert theirs.returncode == 0, theirs.stderr
        ours = run([*profiler_cmd, "diff", *args, *files])
        assert ours.returncode == 0, ours.stderr
        got = sections(plt_header_as_perf(ours.stdout, fixtures_dir / "workloads" / "shares"))
        want = sections(theirs.stdout)
        assert [h[0] for h, _ in got] == ["# Event 'cpu-clock'", "# Event 'page-faults'"]
        assert got == want, (args, files)


@needs_perf
def test_our_recordings_of_the_same_runs_agree_with_perf(fixtures_dir: Path, profiler_cmd: list[str],
                                                         tmp_path: Path) -> None:
    assert PERF is not None
    shares = str(fixtures_dir / "workloads" / "shares")
    for name in ("p", "q"):
        res = run([PERF, "record", "-q", "-g", "-o", str(tmp_path / f"{name}.data"), "--",
                   *profiler_cmd, "record", "-q", "-g", "-o", str(tmp_path / f"{name}.prof"), "--", shares, "0.3"])
        assert res.returncode == 0, res.stderr
    args = ["diff", "-c", "delta", "--comm", "shares", "--percentage", "relative"]
    theirs = table(run([PERF, *args, str(tmp_path / "p.data"), str(tmp_path / "q.data")]).stdout)
    res = run([*profiler_cmd, *args, str(tmp_path / "p.prof"), str(tmp_path / "q.prof")])
    assert res.returncode == 0, res.stderr
    ours = table(res.stdout)
    for fn in ("work_a", "work_b", "work_c"):
        (pb, pd), (ob, od) = theirs[("shares", f"[.] {fn}")], ours[("shares", f"[.] {fn}")]
        assert abs(float(pb.rstrip("%")) - float(ob.rstrip("%"))) < 1.0, (fn, pb, ob)
        assert abs(float(pd.rstrip("%")) - float(od.rstrip("%"))) < 1.0, (fn, pd, od)


# --- two builds of one program, and the gate -----------------------------------------------------


def record(profiler_cmd: list[str], binary: Path, out: Path) -> str:
    res = run([*profiler_cmd, "record", "-q", "-o", str(out), "--", str(binary)])
    assert res.returncode == 0, res.stderr
    return str(out)


@pytest.fixture(scope="module")
def builds(fixtures_dir: Path, profiler_cmd: list[str],
           tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[str]]:
    """Nine captures of build 1, three of build 2."""
    d = tmp_path_factory.mktemp("builds")
    app = fixtures_dir / "workloads" / "builds"
    v1 = [record(profiler_cmd, app / "v1" / "app", d / f"v1_{i}.prof") for i in range(9)]
    v2 = [record(profiler_cmd, app / "v2" / "app", d / f"v2_{i}.prof") for i in range(3)]
    return v1, v2


def test_rebuilt_program_names_the_slower_function_first(builds: tuple[list[str], list[str]],
                                                         profiler_cmd: list[str]) -> None:
    v1, v2 = builds
    res = run([*profiler_cmd, "diff", "-c", "delta", "--repeats", "3", *v1[:3], *v2])
    assert res.returncode == 0, res.stderr
    rows = [line for line in res.stdout.splitlines() if not line.startswith("#")]
    assert rows[0].split()[2:] == ["app", "[.]", "parse_input"], res.stdout
    assert rows[0].split()[1].startswith("+")
    named = {line.rsplit(" ", 1)[-1]: line for line in rows}
    assert named["new_path"].split()[0].startswith("+")  # only in build 2: no Baseline
    assert named["old_path"].split()[-3:-2] == ["app"] and "%" in named["old_path"].split()[0]  # no Delta
    assert len(named["old_path"].split()) == 4


def test_gate_fails_on_the_slower_function(builds: tuple[list[str], list[str]], profiler_cmd: list[str]) -> None:
    v1, v2 = builds
    res = run([*profiler_cmd, "diff", "--repeats", "3", "--fail-on", "sym:parse_*>+5%,any>+2pp", *v1[:3], *v2])
    assert res.returncode == 1, res.stderr
    gate = [line for line in res.stderr.splitlines() if line.startswith("profiler: gate:")]
    assert any("'sym:parse_*>+5%'" in line and "parse_input" in line for line in gate), res.stderr
    assert any("'any>+2pp'" in line and "parse_input" in line for line in gate), res.stderr
    assert not any("steady" in line for line in gate)  # its share fell


def side(paths: list[str]) -> Side:
    flats = []
    for p in paths:
        profile = load_profile(LoadOptions(input=p, callchains=False, inline=False), keep_cpu=False)
        flats.append(aggregate(profile, ("dso", "sym"), children=False))
    return side_of(paths, flats)


def test_gate_passes_no_change_repeats(builds: tuple[list[str], list[str]]) -> None:
    v1, _ = builds
    rules = parse_rules("any>+2pp,sym:parse_*>+5%")
    splits = list(itertools.islice(((list(a), [p for p in v1 if p not in a])
                                    for a in itertools.combinations(v1, 3)), 0, 84, 8))[:10]
    assert len(splits) == 10
    failures = []
    for base, rest in splits:
        data = build_diff("cpu-clock", ("dso", "sym"), [side(base), side(rest[:3])], Compute("delta"))
        failures += [b.sentence() for b in check(data, rules)]
    assert failures == []


@needs_perf
def test_gate_checks_every_event_section(two_event_pair: tuple[Path, Path, Path], profiler_cmd: list[str]) -> None:
    a, b, _ = map(str, two_event_pair)
    res = run([*profiler_cmd, "diff", "--fail-on", "total>-99%", a, b])  # any total not cut by 99 % breaks it
    assert res.returncode == 1, res.stderr
    gate = [line for line in res.stderr.splitlines() if line.startswith("profiler: gate:")]
    assert [line.split(":")[2].strip() for line in gate] == ["cpu-clock", "page-faults"], res.stderr
    res = run([*profiler_cmd, "diff", "--event", "page-faults", "--fail-on", "total>-99%", a, b])
    assert res.returncode == 1 and res.stdout.count("# Event") == 1
    assert "profiler: gate: rule 'total>-99%' broken by the total period" in res.stderr
