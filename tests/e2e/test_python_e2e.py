"""Python stacks end to end (docs/python.md): fixtures/python/stacks.py, whose stacks are known,
run by CPython 3.12.1 (perf map) and 3.13.0 (jitdump) with no flag but -g or --call-graph dwarf;
its Python frames must come complete and in order, a C extension's frame between the right
Python frames; against perf 6.1 on 3.13 (perf record -k 1 + perf inject --jit); and a capture
reported where neither the interpreter nor the JIT files are (a mount namespace hides them)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STACKS = ROOT / "fixtures" / "python" / "stacks.py"
CEXT = ROOT / "fixtures" / "python" / "cext.c"
FIXTURE = {"leaf", "mid", "recurse", "Worker.run", "consume", "squares", "spin_thread", "child_main",
           "from_c", "via_c"}
# caller -> callees among the Python frames (and the C extension's call_back) of the fixture
EDGES = {
    "<module>": {"main"}, "main": {"burn", "child_main"}, "burn": {"main.<locals>.<lambda>",
                                                                   "child_main.<locals>.<lambda>"},
    "child_main": {"burn"}, "main.<locals>.<lambda>": {"mid", "recurse", "Worker.run", "consume", "via_c"},
    "child_main.<locals>.<lambda>": {"mid"}, "mid": {"leaf"}, "recurse": {"recurse", "leaf"},
    "Worker.run": {"leaf"}, "consume": {"squares"}, "via_c": {"call_back"}, "call_back": {"from_c"},
    "from_c": {"leaf"}, "Thread._bootstrap": {"Thread._bootstrap_inner"},
    "Thread._bootstrap_inner": {"Thread.run"}, "Thread.run": {"spin_thread"}, "spin_thread": {"mid"},
}
ROOT_FRAMES = {"<module>", "Thread._bootstrap"}


def interpreter(version: str) -> Path:
    """pyenv's CPython ``version`` (in the machine image and in CI); skipped where absent,
    unless REQUIRE_PERF=1 (CI), where its absence fails."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    major = ".".join(version.split(".")[:2])
    path = root / "versions" / version / "bin" / f"python{major}"
    if not path.exists():
        found = shutil.which(f"python{major}")
        if found and subprocess.run([found, "-c", f"import sys; assert sys.version.startswith('{version}')"],
                                    capture_output=True).returncode == 0:
            return Path(found)
        if os.environ.get("REQUIRE_PERF") == "1":
            pytest.fail(f"CPython {version} is not installed ({path}), and CI requires it")
        pytest.skip(f"CPython {version} is not installed here")
    return path


def build_cext(python: Path, out: Path) -> Path:
    """fixtures/python/cext.c built for ``python``, in ``out``."""
    info = subprocess.run([str(python), "-c", "import sysconfig as s; print(s.get_paths()['include']); "
                           "print(s.get_config_var('EXT_SUFFIX'))"], capture_output=True, text=True, check=True)
    include, suffix = info.stdout.split()
    out.mkdir(exist_ok=True)
    subprocess.run(["gcc", "-O2", "-g", "-shared", "-fPIC", f"-I{include}", str(CEXT), "-o",
                    str(out / f"cext{suffix}")], check=True, capture_output=True)
    return out


def profiler(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "profiler", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=None if env is None else {**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return done


def python_stacks(folded: str) -> Counter[tuple[str, ...]]:
    """Folded lines -> samples per sequence of Python frames (and call_back), root first."""
    out: Counter[tuple[str, ...]] = Counter()
    for line in folded.splitlines():
        stack, _, count = line.rpartition(" ")
        frames = tuple(f[:-4] if f.endswith("_[p]") else f for f in stack.split(";")[1:]
                       if f.endswith("_[p]") or f == "call_back")
        out[frames] += int(count)
    return out


def complete(frames: tuple[str, ...]) -> bool:
    """Every Python frame there, in order: from a root, each caller calling its callee."""
    return bool(frames) and frames[0] in ROOT_FRAMES and all(b in EDGES.get(a, ()) for a, b in zip(frames, frames[1:]))


def in_fixture(frames: tuple[str, ...]) -> bool:
    return bool(frames) and frames[-1] in FIXTURE


def record(python: Path, capture: Path, mode: list[str], cext: Path | None, *extra: str) -> str:
    done = profiler("record", "-o", capture, *mode, "--", python, STACKS, "0.3",
                    str(cext) if cext else "-", *extra)
    return done.stderr


@pytest.mark.e2e
@pytest.mark.parametrize(("version", "mode"), [
    ("3.12.1", ["-g"]), ("3.12.1", ["--call-graph", "dwarf"]), ("3.13.0", ["-g"]),
    ("3.13.0", ["--call-graph", "dwarf"]), ("3.13.0", ["-g", "--python", "jit"]),
])
def test_python_stacks_complete_and_in_order(require_perf: None, tmp_path: Path, version: str,
                                             mode: list[str]) -> None:
    """The perf map by default (3.12, 3.13) and the jitdump (3.13 --python=jit: without the forked
    child, whose jitdump 3.13.0 leaves empty when it ends with os._exit: docs/python.md)."""
    python = interpreter(version)
    cext = build_cext(python, tmp_path / "ext")
    capture = tmp_path / "py.prof"
    jit = "jit" in mode
    said = record(python, capture, mode, cext, *(["nofork"] if jit else []))
    if "-g" in mode:  # no frame pointers in the interpreter: DWARF instead, said in one line
        assert "has no frame pointers: -g records --call-graph dwarf,32768" in said
    stacks = python_stacks(profiler("export", "-i", capture, "--format", "folded", "-o", "-").stdout)
    ours = {k: v for k, v in stacks.items() if in_fixture(k)}
    total = sum(ours.values())
    good = sum(v for k, v in ours.items() if complete(k))
    assert total > 1000 and good >= 0.99 * total, [(v, k) for k, v in ours.items() if not complete(k)][:5]
    seen = {k[-2:] for k in ours}
    # every part of the fixture: the recursion whole, a method, a generator, a thread, the forked
    # child (its parent's trampolines), the C extension between the right Python frames
    assert ("mid", "leaf") in seen and ("consume", "squares") in seen and ("Worker.run", "leaf") in seen
    assert any(k.count("recurse") == 9 and k[0] == "<module>" for k in ours)
    assert any(k[0] == "Thread._bootstrap" and k[-2:] == ("mid", "leaf") for k in ours)
    assert jit or any("child_main" in k for k in ours)
    assert any(k[-4:] == ("via_c", "call_back", "from_c", "leaf") for k in ours)
    # --python-frames=all keeps the interpreter between them; the default drops it
    folded = profiler("export", "-i", capture, "--format", "folded", "-o", "-").stdout
    everything = profiler("export", "-i", capture, "--format", "folded", "-o", "-", "--python-frames", "all").stdout
    assert ";mid_[p];leaf_[p];" in folded and ";mid_[p];leaf_[p];" not in everything
    assert "_PyEval_EvalFrameDefault;" in everything.split("mid_[p]", 1)[1].split("leaf_[p]", 1)[0]


@pytest.mark.e2e
def test_python_stacks_match_perf_with_jit_inject(require_perf: None, tmp_path: Path) -> None:
    """perf 6.1 needs -k 1, -X perf_jit and a perf inject --jit pass (one ELF file per
    function); we need neither. Same workload (without the forked child, whose jitdump perf
    inject fails on), the same stack size; the Python stacks' shares agree within 2 pp."""
    perf = shutil.which("perf")
    if perf is None:
        pytest.skip("perf is not installed")
    python = interpreter("3.13.0")
    work = tmp_path / "perf"
    work.mkdir()
    args = [str(python), "-X", "perf_jit", str(STACKS), "0.3", "-", "nofork"]
    before = set(Path("/tmp").glob("jitted-*.so"))
    done = subprocess.run([perf, "record", "-q", "-k", "1", "--call-graph", "dwarf,32768", "-o", "perf.data", "--",
                           *args], cwd=work, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    injected = subprocess.run([perf, "inject", "--jit", "-i", "perf.data", "-o", "jit.data"], cwd=work,
                              capture_output=True, text=True, timeout=300)
    assert injected.returncode == 0, injected.stderr
    script = subprocess.run([perf, "script", "-i", "jit.data", "-F", "tid,ip,sym"], cwd=work, capture_output=True,
                            text=True, timeout=300)
    theirs = perf_python_stacks(script.stdout)
    capture = tmp_path / "ours.prof"
    profiler("record", "-o", capture, "--call-graph", "dwarf,32768", "--", *args)
    ours = python_stacks(profiler("export", "-i", capture, "--format", "folded", "-o", "-").stdout)
    # perf's stacks of the thread end early (at spin_thread: 5 % of them, measured), so the
    # comparison is of each sample's innermost three Python frames; ours are complete
    a, b = shares(theirs, 3), shares(ours, 3)
    assert sum(v for k, v in shares(ours).items() if complete(k)) >= 99.0
    for key in set(a) | set(b):
        if max(a.get(key, 0), b.get(key, 0)) >= 1.0:
            assert abs(a.get(key, 0) - b.get(key, 0)) <= 2.0, (key, a.get(key), b.get(key))
    for so in set(Path("/tmp").glob("jitted-*.so")) - before:  # what perf inject leaves behind
        so.unlink(missing_ok=True)


def perf_python_stacks(script: str) -> Counter[tuple[str, ...]]:
    """``perf script -F tid,ip,sym`` of an injected capture -> samples per Python stack (root
    first), named as ours (``py::leaf:/file`` -> ``leaf``)."""
    out: Counter[tuple[str, ...]] = Counter()
    cur: list[str] = []
    for line in [*script.splitlines(), ""]:
        if line.startswith(("\t", " ")) and line.split(None, 1)[1:]:
            cur.append(line.split(None, 1)[1])
        elif not line.strip():
            if cur:
                out[tuple(f[4:].split(":", 1)[0] for f in reversed(cur) if f.startswith("py::"))] += 1
            cur = []
    return out


def shares(stacks: Counter[tuple[str, ...]], innermost: int = 0) -> dict[tuple[str, ...], float]:
    """Percent of the fixture's samples per Python stack (its ``innermost`` frames only, if given)."""
    mine: Counter[tuple[str, ...]] = Counter()
    for k, v in stacks.items():
        if in_fixture(k):
            mine[k[-innermost:] if innermost else k] += v
    total = sum(mine.values()) or 1
    return {k: 100.0 * v / total for k, v in mine.items()}


@pytest.mark.e2e
@pytest.mark.parametrize("version", ["3.12.1", "3.13.0"])
def test_python_frames_named_where_neither_the_interpreter_nor_its_jit_files_are(
        require_perf: None, tmp_path: Path, version: str) -> None:
    """The capture carries the perf map or jitdump; archive packs libpython's symbols and unwind
    rules: in a mount namespace where the interpreter's directory is empty and the JIT files
    are gone, the report is the same."""
    python = interpreter(version)
    capture = tmp_path / "py.prof"
    env = {"PROFILER_CACHE_DIR": str(tmp_path / "cache1")}
    profiler("record", "-o", capture, "-g", "--", python, STACKS, "0.2", "-", "nofork", env=env)
    before = profiler("export", "-i", capture, "--format", "folded", "-o", "-", env=env).stdout
    assert "leaf_[p]" in before
    profiler("archive", "-i", capture, env=env)
    pids = {int(p) for p in profiler("script", "-i", capture, "-F", "pid", env=env).stdout.split()}
    for pid in pids:
        for name in (f"perf-{pid}.map", f"jit-{pid}.dump"):
            Path("/tmp", name).unlink(missing_ok=True)
    hidden = python.resolve().parents[1]  # the interpreter's prefix: binary and libpython
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "after.folded"
    script = (f"mount --bind {empty} {hidden} && PROFILER_CACHE_DIR={tmp_path / 'cache2'} "
              f"{sys.executable} -m profiler export -i {capture} --format folded -o {out}")
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert out.read_text() == before


@pytest.mark.e2e
def test_python_frames_in_every_output(require_perf: None, tmp_path: Path) -> None:
    """report, script, flame graph, folded, speedscope, Firefox and pprof all name Python
    functions with their file; the flame graph gives them the 'python' kind (its colour)."""
    import gzip
    import json

    python = interpreter("3.12.1")
    capture = tmp_path / "py.prof"
    profiler("record", "-o", capture, "-g", "--", python, STACKS, "0.1", "-", "nofork")
    report = profiler("report", "-i", capture, "--children", "--sort", "dso,sym", "-g", "none").stdout
    assert any(str(STACKS) in line and line.endswith("[.] leaf") for line in report.splitlines())
    script = profiler("script", "-i", capture).stdout
    assert " leaf+0x" in script and f"({STACKS})" in script
    page = profiler("flamegraph", "-i", capture, "-o", tmp_path / "fg.html")
    html = (tmp_path / "fg.html").read_text()
    assert page.returncode == 0 and '"python"' in html and "k-python" in html
    profiler("export", "-i", capture, "--format", "speedscope", "-o", tmp_path / "s.json")
    frames = json.loads((tmp_path / "s.json").read_text())["shared"]["frames"]
    assert {"name": "leaf", "file": str(STACKS)} in frames
    profiler("export", "-i", capture, "--format", "firefox", "-o", tmp_path / "f.json")
    ff = json.loads((tmp_path / "f.json").read_text())
    strings = ff["shared"]["stringArray"]
    funcs = ff["threads"][0]["funcTable"]
    at = [i for i, n in enumerate(funcs["name"]) if strings[n] == "leaf"]
    assert at and strings[funcs["fileName"][at[0]]] == str(STACKS)
    assert ff["meta"]["categories"][ff["threads"][0]["frameTable"]["category"][
        ff["threads"][0]["frameTable"]["func"].index(at[0])]]["name"] == "Python"
    profiler("export", "-i", capture, "--format", "pprof", "-o", tmp_path / "p.pb.gz")
    from profiler.report.render.proto import profile_pb2  # type: ignore[attr-defined]

    prof = profile_pb2.Profile.FromString(gzip.decompress((tmp_path / "p.pb.gz").read_bytes()))
    names = {(prof.string_table[f.name], prof.string_table[f.filename]) for f in prof.function}
    assert ("leaf", str(STACKS)) in names


@pytest.mark.e2e
def test_a_jitdump_in_a_pid_namespace_with_its_own_tmp(require_perf: None, tmp_path: Path) -> None:
    """3.13 -X perf_jit in ``unshare -p -f -m`` with a private /tmp: the jitdump is written as
    jit-<its namespace pid>.dump where the host cannot see it, and is gone with the namespace;
    the recorder reads it through the process's root, so the capture names and unwinds it."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare")
    python = interpreter("3.13.0")
    capture = tmp_path / "ns.prof"
    outside = Path(tempfile.mkdtemp(prefix="profiler-py-", dir="/var/tmp"))  # the namespace hides /tmp
    try:
        script = outside / STACKS.name
        shutil.copy(STACKS, script)
        profiler("record", "-o", capture, "--call-graph", "dwarf,32768", "--", "unshare", "-p", "-f", "-m",
                 "--mount-proc", "--propagation", "private", "sh", "-c",
                 f"mount -t tmpfs none /tmp && exec {python} -X perf_jit {script} 0.2 - nofork")
    finally:
        shutil.rmtree(outside)
    stacks = python_stacks(profiler("export", "-i", capture, "--format", "folded", "-o", "-").stdout)
    ours = {k: v for k, v in stacks.items() if in_fixture(k)}
    assert sum(ours.values()) > 300
    assert sum(v for k, v in ours.items() if complete(k)) >= 0.99 * sum(ours.values())
