"""pprof and Firefox Profiler exports of real recordings, read by outside references:
``go tool pprof -top`` must print our flat report's per-function sample counts; the Firefox
export must pass the processed format's structural validation (tests/unit/firefox_schema.py:
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

UNIT = Path(__file__).resolve().parents[1] / "unit"


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
    import sys

    sys.path.insert(0, str(UNIT))
    from firefox_schema import validate

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
