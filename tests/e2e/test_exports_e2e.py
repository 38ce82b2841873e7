"""pprof and Firefox Profiler exports of real recordings, read by outside references:
``go tool pprof -top`` must print our flat report's per-function sample counts; the Firefox
export must pass the processed format's structural validation (tests/support/firefox_schema.py:
profiler.firefox.com cannot be loaded offline) and carry every sample of every thread."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest



def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PROFILER_CACHE_DIR", "/tmp/profiler-test-cache")
    return env


@pytest.fixture(scope="module")
def recording(require_perf: None, fixtures_dir: Path, profiler_cmd: list[str],
              tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("exports") / "forker.prof"
    res = subprocess.run([*profiler_cmd, "record", "-q", "-g", "-F", "4000", "-o", str(out), "--",
                          str(fixtures_dir / "workloads" / "syscalls"), "0.6"],
                         capture_output=True, text=True, timeout=120, env=_env())
    assert res.returncode == 0, res.stderr
    return out


def our_flat(profiler_cmd: list[str], capture: Path) -> Counter[str]:
    res = subprocess.run([*profiler_cmd, "report", "-i", str(capture), "--format", "json", "--no-children",
                          "-g", "none", "--sort", "sym"], capture_output=True, text=True, timeout=120, env=_env())
    assert res.returncode == 0, res.stderr
    out: Counter[str] = Counter()
    for r in json.loads(res.stdout)["rows"]:
        out[r["symbol"]] += r["samples"]  # pprof groups functions by name, whatever their DSO
    return out


def pprof_top(go: str, path: Path) -> Counter[str]:
    res = subprocess.run([go, "tool", "pprof", "-top", "-sample_index=samples", "-nodecount=1000000",
                          "-nodefraction=0", "-edgefraction=0", "-symbolize=none", str(path)],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "HOME": str(path.parent)})
    assert res.returncode == 0, res.stderr
    out: Counter[str] = Counter()
    rows = res.stdout.split("flat  flat%", 1)[1].splitlines()[1:]
    for line in rows:
        m = re.match(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+\d+\s+[\d.]+%\s+(.+?)\s*$", line)
        assert m, line
        if int(m.group(1)):
            out[m.group(2)] += int(m.group(1))
    return out


def test_go_tool_pprof_top_equals_our_flat_report(recording: Path, profiler_cmd: list[str],
                                                  tmp_path: Path) -> None:
    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not installed (make test installs Debian's golang-go)")
    out = tmp_path / "profile.pb.gz"
    # --no-inline: pprof charges a location's samples to its innermost Line (an inlined
    # function), the flat report to the function holding it; inlining has its own test below
    res = subprocess.run([*profiler_cmd, "export", "-i", str(recording), "-f", "pprof", "--no-inline",
                          "-o", str(out)],
                         capture_output=True, text=True, timeout=120, env=_env())
    assert res.returncode == 0, res.stderr
    theirs, ours = pprof_top(go, out), our_flat(profiler_cmd, recording)
    assert sum(theirs.values()) > 200 and len(theirs) >= 10
    assert theirs == +ours


def test_firefox_export_of_a_recording_is_valid_and_complete(recording: Path, profiler_cmd: list[str]) -> None:
    from tests.support.firefox_schema import validate

    res = subprocess.run([*profiler_cmd, "export", "-i", str(recording), "-f", "firefox", "-o", "-"],
                         capture_output=True, text=True, timeout=120, env=_env())
    assert res.returncode == 0, res.stderr
    prof = json.loads(res.stdout)
    validate(prof)
    total = sum(sum(r.values()) for r in [our_flat(profiler_cmd, recording)])
    assert sum(t["samples"]["length"] for t in prof["threads"]) == total
    assert any(lib["codeId"] for lib in prof["libs"])


def test_inlined_functions_become_lines_and_inline_depths(require_perf: None, fixtures_dir: Path,
                                                          profiler_cmd: list[str], tmp_path: Path) -> None:
    """fixtures/workloads/inline: drive holds mix, fold and step inlined (DWARF)."""
    import gzip

    from profiler.report.render.proto import profile_pb2 as pb

    cap = tmp_path / "inline.prof"
    res = subprocess.run([*profiler_cmd, "record", "-q", "-g", "-o", str(cap), "--",
                          str(fixtures_dir / "workloads" / "inline"), "0.5"],
                         capture_output=True, text=True, timeout=120, env=_env())
    assert res.returncode == 0, res.stderr
    out = subprocess.run([*profiler_cmd, "export", "-i", str(cap), "-f", "pprof", "-o", "-"],
                         capture_output=True, timeout=120, env=_env())
    assert out.returncode == 0, out.stderr
    prof = pb.Profile()
    prof.ParseFromString(gzip.decompress(out.stdout))
    s = prof.string_table
    func = {f.id: s[f.name] for f in prof.function}
    chains = {tuple(func[line.function_id] for line in loc.line) for loc in prof.location if len(loc.line) > 1}
    assert ("mix", "drive") in chains and ("step", "fold", "drive") in chains
    lines = {line.line for loc in prof.location for line in loc.line if func[line.function_id] == "mix"}
    assert lines and all(n > 0 for n in lines)
    ff = subprocess.run([*profiler_cmd, "export", "-i", str(cap), "-f", "firefox", "-o", "-"],
                        capture_output=True, text=True, timeout=120, env=_env())
    assert ff.returncode == 0, ff.stderr
    data = json.loads(ff.stdout)
    strings = data["shared"]["stringArray"]
    depth = {}
    for th in data["threads"]:
        fr, fn = th["frameTable"], th["funcTable"]
        for i in range(fr["length"]):
            depth[strings[fn["name"][fr["func"][i]]]] = fr["inlineDepth"][i]
    assert depth["drive"] == 0 and depth["mix"] == 1 and depth["fold"] == 1 and depth["step"] == 2


def _addr2line(binary: Path, addrs: list[int]) -> dict[str, set[str]]:
    out = subprocess.run(["addr2line", "-f", "-i", "-e", str(binary), *map(hex, addrs)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    found: dict[str, set[str]] = {}
    for name, where in zip(out[::2], out[1::2]):
        found.setdefault(name, set()).add(where.split(" ")[0].rsplit("/", 1)[-1])
    return found


def test_exports_carry_source_lines(require_perf: None, fixtures_dir: Path, profiler_cmd: list[str],
                                    tmp_path: Path) -> None:
    """fixtures/workloads/inline: ``go tool pprof -top -lines`` counts the same samples per
    source line as ``report --sort srcline``; pprof's Function.filename/start_line, the
    Firefox funcTable's fileName/lineNumber and frameTable's line, and speedscope's frame
    file/line name the fixture's source file and lines binutils' addr2line gives."""
    import gzip

    from profiler.report.render.proto import profile_pb2 as pb

    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not installed (make test installs Debian's golang-go)")
    binary = fixtures_dir / "workloads" / "inline"
    cap = tmp_path / "inline.prof"
    res = subprocess.run([*profiler_cmd, "record", "-q", "-g", "-o", str(cap), "--", str(binary), "0.5"],
                         capture_output=True, text=True, timeout=120, env=_env())
    assert res.returncode == 0, res.stderr

    def run(*args: str) -> bytes:
        done = subprocess.run([*profiler_cmd, *args, "-i", str(cap), "--comm", "inline"],
                              capture_output=True, timeout=120, env=_env())
        assert done.returncode == 0, done.stderr
        return done.stdout

    # pprof, read by go tool pprof: flat samples per line = ours per srcline
    (tmp_path / "p.pb.gz").write_bytes(run("export", "-f", "pprof", "-o", "-"))
    top = subprocess.run([go, "tool", "pprof", "-top", "-lines", "-sample_index=samples", "-nodecount=1000000",
                          "-nodefraction=0", "-edgefraction=0", "-symbolize=none", str(tmp_path / "p.pb.gz")],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "HOME": str(tmp_path)})
    assert top.returncode == 0, top.stderr
    theirs: Counter[str] = Counter()
    for line in top.stdout.split("flat  flat%", 1)[1].splitlines()[1:]:
        m = re.match(r"^\s*(\d+)\s+\S+\s+\S+\s+\d+\s+\S+\s+\S+ (inline\.c:\d+)(?: \(inline\))?\s*$", line)
        if m:
            theirs[m.group(2)] += int(m.group(1))
    rows = json.loads(run("report", "--sort", "srcline", "--no-children", "-g", "none", "--format", "json"))["rows"]
    ours = Counter({r["srcline"]: r["samples"] for r in rows if r["srcline"].startswith("inline.c:")})
    assert sum(ours.values()) > 100 and +theirs == +ours
    prof = pb.Profile()
    prof.ParseFromString(gzip.decompress((tmp_path / "p.pb.gz").read_bytes()))
    s = prof.string_table
    funcs = {s[f.name]: f for f in prof.function}
    assert {s[funcs[n].filename] for n in ("drive", "mix", "fold", "step")} == {"inline.c"}
    # the line of drive's first instruction, as addr2line says
    nm = subprocess.run(["nm", str(binary)], capture_output=True, text=True, check=True).stdout
    drive = int(re.search(r"^([0-9a-f]+) [tT] drive$", nm, re.M).group(1), 16)  # type: ignore[union-attr]
    start_line = int(_addr2line(binary, [drive])["drive"].pop().split(":")[1])
    assert funcs["drive"].start_line == start_line

    # Firefox: fileName per function, line per frame, within addr2line's lines of that function
    text = run("script", "--no-inline", "-F", "ip,dso").decode()
    sampled = sorted({int(a, 16) for a, d in re.findall(r"^\t\s*([0-9a-f]+) \((\S+)\)$", text, re.M)
                      if d == str(binary)})
    reference = _addr2line(binary, sorted({x for a in sampled for x in (a, a - 1)}))
    ff = json.loads(run("export", "-f", "firefox", "-o", "-"))
    strings = ff["shared"]["stringArray"]
    seen = set()
    for th in ff["threads"]:
        fr, fn = th["frameTable"], th["funcTable"]
        for i in range(fr["length"]):
            name = strings[fn["name"][fr["func"][i]]]
            if name in ("drive", "mix", "fold", "step"):
                f = fr["func"][i]
                assert strings[fn["fileName"][f]] == "inline.c"
                assert f"inline.c:{fr['line'][i]}" in reference[name], (name, fr["line"][i], reference[name])
                if name == "drive":
                    assert fn["lineNumber"][f] == start_line
                seen.add(name)
    assert seen == {"drive", "mix", "fold", "step"}

    # speedscope: the frame's file is the source file, drive's line its first line
    doc = json.loads(run("export", "-f", "speedscope", "-o", "-"))
    frames = {f["name"]: f for f in doc["shared"]["frames"]}
    assert frames["drive"]["file"] == "inline.c" and frames["drive"]["line"] == start_line
    assert frames["mix (inlined)"]["file"] == "inline.c" and "line" not in frames["mix (inlined)"]


def pprof_diff_top(go: str, base: Path, new: Path) -> list[tuple[int, str]]:
    """``go tool pprof -top -diff_base BASE NEW``'s rows: (flat NEW minus BASE, function), in its order."""
    res = subprocess.run([go, "tool", "pprof", "-top", "-sample_index=samples", "-nodecount=1000000",
                          "-nodefraction=0", "-edgefraction=0", "-symbolize=none", "-diff_base", str(base), str(new)],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "HOME": str(new.parent)})
    assert res.returncode == 0, res.stderr
    rows = []
    for line in res.stdout.split("flat  flat%", 1)[1].splitlines()[1:]:
        m = re.match(r"^\s*(-?\d+)\s+[\d.]+%\s+[\d.]+%\s+-?\d+\s+[\d.]+%\s+(.+?)\s*$", line)
        assert m, line
        rows.append((int(m.group(1)), m.group(2)))
    return rows


def test_go_tool_pprof_diff_base_compares_two_of_our_exports(profiler_cmd: list[str], tmp_path: Path) -> None:
    """The pprof side of comparing two runs (README, "Compare two runs"): no diff export of
    our own; pprof's -diff_base reads two ordinary exports. NEW minus BASE per function,
    largest change first: k_leaf_b grew by 110 samples."""
    from tests.support.diff_captures import write_pair

    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not installed (make test installs Debian's golang-go)")
    base, new = write_pair(tmp_path)
    for capture in (base, new):
        res = subprocess.run([*profiler_cmd, "export", "-i", str(capture), "-f", "pprof", "-o",
                              str(capture.with_suffix(".pb.gz"))], capture_output=True, text=True, timeout=120,
                             env=_env())
        assert res.returncode == 0, res.stderr
    rows = pprof_diff_top(go, base.with_suffix(".pb.gz"), new.with_suffix(".pb.gz"))
    assert rows[0] == (110, "k_leaf_b")
    assert {name: flat for flat, name in rows if flat} == {"k_leaf_b": 110, "k_leaf_a": -20, "k_recurse": 20,
                                                           "k_other": -10}
    swapped = pprof_diff_top(go, new.with_suffix(".pb.gz"), base.with_suffix(".pb.gz"))
    assert swapped[0] == (-110, "k_leaf_b")
