"""Containers end to end: mount namespaces, rebuilt binaries, pid namespaces (docs/containers.md).

Every namespace is made here with ``unshare`` (root needed; the tests skip without it, or
fail under ``REQUIRE_PERF=1``). The program at one path is two different builds
(fixtures/containers: ``host_only_fn`` in the host's file, ``container_fn`` in the file
bind-mounted over it inside the namespace), so the function name in a report tells which file
was used to name the samples. "Another machine" is the capture reported after the container's
file is deleted and with ``--symfs``/debug directories pointing at empty directories.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from profiler.symbols.dso import clear_symbol_cache

from tests.support.offline_helpers import Row, profile_rows, record

pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    clear_symbol_cache()


@pytest.fixture
def root_needed(require_perf: None) -> None:
    if os.geteuid() != 0:
        if os.environ.get("REQUIRE_PERF") == "1":
            pytest.fail("REQUIRE_PERF=1 but the container tests need root (unshare -m, bind mounts)")
        pytest.skip("needs root for unshare -m and bind mounts")


@pytest.fixture
def scene(fixtures_dir: Path, tmp_path: Path, root_needed: None) -> dict[str, Path]:
    """The host's build at ``app/spin``, the container's build elsewhere (copied, so it can be
    deleted afterwards: "another machine")."""
    app = tmp_path / "app"
    app.mkdir()
    shutil.copy(fixtures_dir / "containers" / "spin_host", app / "spin")
    image = tmp_path / "image"
    image.mkdir()
    shutil.copy(fixtures_dir / "containers" / "spin_container", image / "spin")
    return {"host": app / "spin", "container": image / "spin", "tmp": tmp_path}


def in_namespace(scene: dict[str, Path], seconds: float) -> list[str]:
    """``unshare -m``: bind the container's build over the host's path, then run it."""
    host, container = scene["host"], scene["container"]
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            f"mount --bind {container} {host} && exec {host} {seconds}"]


def functions_in(rows: list[Row], dso: str) -> set[str]:
    return {label for _, frames, _ in rows for d, label in frames if d == dso}


def frames_of(rows: list[Row], dso: str) -> list[tuple[tuple[str, ...], int]]:
    """The frames of one DSO in each stack, with its samples: what must not change elsewhere
    (the host's own libraries are not the container's to pack)."""
    out: dict[tuple[str, ...], int] = {}
    for _, frames, n in rows:
        key = tuple(label for d, label in frames if d == dso)
        if key:
            out[key] = out.get(key, 0) + n
    return sorted(out.items())


def nowhere(tmp: Path) -> dict[str, object]:
    empty = tmp / "empty"
    empty.mkdir(exist_ok=True)
    return {"symfs": empty, "debug_dirs": [str(empty)]}


def buildids_json(capture: Path) -> list[dict[str, object]]:
    done = subprocess.run([sys.executable, "-m", "profiler", "buildids", "-i", str(capture), "--json"],
                          capture_output=True, text=True, timeout=120, check=True)
    return list(json.loads(done.stdout))


def test_command_in_a_mount_namespace_is_named_from_its_own_file(scene: dict[str, Path]) -> None:
    capture = scene["tmp"] / "cap.prof"
    record(capture, in_namespace(scene, 0.6))
    rows, warnings = profile_rows(capture)
    names = functions_in(rows, "spin")
    assert "container_fn" in names and "host_only_fn" not in names, (names, warnings)
    spin = [e for e in buildids_json(capture) if e["path"] == str(scene["host"])]
    assert spin and all(e["source"] == "packed" for e in spin), spin
    assert any(str(e.get("recorded_from", "")).endswith("+namespace") for e in spin), spin
    # "another machine": the container's file is gone, and nothing else is searched
    scene["container"].unlink()
    clear_symbol_cache()
    again, _ = profile_rows(capture, **nowhere(scene["tmp"]))
    assert frames_of(again, "spin") == frames_of(rows, "spin")


def test_attached_process_in_a_mount_namespace_is_named_from_its_own_file(scene: dict[str, Path]) -> None:
    proc = subprocess.Popen(in_namespace(scene, 60), start_new_session=True)
    try:
        pid = _wait_for_exec(proc.pid, scene["host"])
        capture = scene["tmp"] / "attached.prof"
        done = subprocess.run([sys.executable, "-m", "profiler", "record", "-g", "-q", "-o", str(capture),
                               "-p", str(pid), "--duration", "0.6"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        perf_names = _perf_names(pid, scene["tmp"]) if shutil.which("perf") else None
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    rows, warnings = profile_rows(capture)
    names = functions_in(rows, "spin")
    assert "container_fn" in names and "host_only_fn" not in names, (names, warnings)
    if perf_names is not None:  # perf reads through /proc/PID/root with -p: right too
        assert "container_fn" in perf_names and "host_only_fn" not in perf_names, perf_names
    scene["container"].unlink()
    clear_symbol_cache()
    again, _ = profile_rows(capture, **nowhere(scene["tmp"]))
    assert frames_of(again, "spin") == frames_of(rows, "spin")


def _wait_for_exec(shell_pid: int, path: Path) -> int:
    """The pid once ``sh -c '... exec PATH'`` has exec'd (unshare execs sh in place)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{shell_pid}/cmdline", "rb") as fh:
                if fh.read().split(b"\0")[0] == str(path).encode():
                    return shell_pid
        except OSError:
            pass
        time.sleep(0.02)
    raise AssertionError("the namespaced program did not start")


def _perf_names(pid: int, tmp: Path) -> set[str]:
    data = tmp / "perf.data"
    subprocess.run(["perf", "record", "-q", "-o", str(data), "-p", str(pid), "--", "sleep", "0.6"],
                   capture_output=True, timeout=60, check=True)
    out = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--sort", "sym", "-q"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def test_a_rebuild_without_build_id_is_refused_with_the_sentence(fixtures_dir: Path, tmp_path: Path,
                                                                root_needed: None) -> None:
    binary = tmp_path / "app" / "spin"
    binary.parent.mkdir()
    shutil.copy(fixtures_dir / "containers" / "spin_nobid_a", binary)
    capture = tmp_path / "nobid.prof"
    record(capture, [str(binary), "0.4"])
    rows, _ = profile_rows(capture)
    assert "first_build_fn" in functions_in(rows, "spin")
    entry = [e for e in buildids_json(capture) if e["path"] == str(binary)]
    assert entry and entry[0]["build_id"] is None and str(entry[0].get("content", "")).count(":") == 1, entry
    shutil.copy(fixtures_dir / "containers" / "spin_nobid_b", binary)  # "rebuilt" at the same path
    clear_symbol_cache()
    rows, warnings = profile_rows(capture)
    names = functions_in(rows, "spin")
    assert not names & {"first_build_fn", "second_build_fn"}, names
    refused = [w for w in warnings if str(binary) in w]
    assert len(refused) == 1 and "is not the recorded file" in refused[0] and "without a build-id" in refused[0]
    # the same bytes again: accepted (mtime differs, digest is the same)
    shutil.copy(fixtures_dir / "containers" / "spin_nobid_a", binary)
    clear_symbol_cache()
    rows, warnings = profile_rows(capture)
    assert "first_build_fn" in functions_in(rows, "spin") and not [w for w in warnings if str(binary) in w]


def test_a_jit_in_a_pid_namespace_with_its_own_tmp_is_named(fixtures_dir: Path, tmp_path: Path,
                                                              root_needed: None) -> None:
    """``unshare -p -f -m`` with a private tmpfs on /tmp: the JIT writes /tmp/perf-<its pid>.map
    (pid 1 or 2 in its namespace) where the host cannot see it, and the file system is gone when
    the process exits; the capture still names the JIT code."""
    outside = Path(tempfile.mkdtemp(prefix="profiler-jit-", dir="/var/tmp"))  # the namespace hides /tmp
    try:
        jit = outside / "jitmap"
        shutil.copy(fixtures_dir / "containers" / "jitmap", jit)
        capture = tmp_path / "jit.prof"
        record(capture, ["unshare", "-p", "-f", "-m", "--mount-proc", "--propagation", "private", "sh", "-c",
                         f"mount -t tmpfs none /tmp && exec {jit} 0.6"])
    finally:
        shutil.rmtree(outside)
    rows, warnings = profile_rows(capture)
    jit_frames = {label for _, frames, _ in rows for d, label in frames if d.startswith("perf-")}
    assert jit_frames == {"jitted_hot_loop"}, (jit_frames, warnings)
    host_pid_maps = {d for _, frames, _ in rows for d, _ in frames if d.startswith("perf-")}
    assert host_pid_maps
    for name in host_pid_maps:  # not named from the host's /tmp: a map there is another process's
        host = Path("/tmp", name)  # (a Python run's, left behind with a pid reused since)
        assert not host.exists() or "jitted_hot_loop" not in host.read_text(errors="replace"), name


def _root_with(root: Path, files: list[Path]) -> None:
    """Copy host files into ``root`` at their own paths (the loader and libc a program needs)."""
    for f in files:
        real = Path(os.path.realpath(f))
        for place in {f, real}:
            dest = root / str(place).lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            if not dest.exists():
                shutil.copy(real, dest)


def test_a_whole_other_root_names_its_own_build_of_a_shared_library(fixtures_dir: Path, tmp_path: Path,
                                                                   root_needed: None) -> None:
    """``unshare -m --root DIR``: the program and its library at one path in both roots, the
    host's build of the library outside, the container's inside."""
    app = tmp_path / "app"
    shutil.copytree(fixtures_dir / "containers" / "host", app)
    root = tmp_path / "root"
    inside = root / str(app).lstrip("/")
    shutil.copytree(fixtures_dir / "containers" / "container", inside)
    needed = subprocess.run(["ldd", str(app / "usework")], capture_output=True, text=True, check=True).stdout
    libs = [Path(w) for line in needed.splitlines() for w in line.split() if w.startswith("/")]
    _root_with(root, [lib for lib in libs if "libwork" not in str(lib)])
    capture = tmp_path / "root.prof"
    (root / "proc").mkdir()  # the loader finds $ORIGIN through /proc/self/exe
    record(capture, ["unshare", "-m", "-p", "-f", "--mount-proc", "--root", str(root), str(app / "usework"), "0.6"])
    rows, warnings = profile_rows(capture)
    names = functions_in(rows, "libwork.so")
    assert "lib_container_fn" in names and "lib_host_fn" not in names, (names, warnings)
    shutil.rmtree(root)  # the container is gone: packed symbols name it the same
    clear_symbol_cache()
    again, _ = profile_rows(capture, **nowhere(tmp_path))
    assert frames_of(again, "libwork.so") == frames_of(rows, "libwork.so")


@pytest.fixture
def cgroup(root_needed: None) -> Iterator[Path]:
    """A cgroup v2 group made for the test (removed after it, once empty)."""
    from profiler.record.synth import cgroup2_root

    root = cgroup2_root()
    if root is None:
        pytest.skip("no cgroup2 hierarchy mounted")
    group = Path(root) / f"profiler-test-{os.getpid()}"
    group.mkdir()
    try:
        yield group
    finally:
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def _cgroup_rows(text: str) -> dict[tuple[str, str], float]:
    """(cgroup, command) -> percent, from a perf-style table of --sort cgroup,comm."""
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields or line.startswith("#") or not fields[0].endswith("%"):
            continue
        out[(fields[-2], fields[-1])] = float(fields[0].rstrip("%"))
    return out


def test_all_cgroups_sort_cgroup_names_the_group_as_perf(cgroup: Path, fixtures_dir: Path,
                                                         tmp_path: Path) -> None:
    spin = fixtures_dir / "containers" / "spin_host"
    argv = ["sh", "-c", f"echo $$ > {cgroup}/cgroup.procs && exec {spin} 0.5"]
    capture = tmp_path / "cg.prof"
    record(capture, argv, "--all-cgroups")
    done = subprocess.run([sys.executable, "-m", "profiler", "report", "-i", str(capture), "--sort", "cgroup,comm"],
                          capture_output=True, text=True, timeout=120, check=True)
    assert "Cgroup" in done.stdout
    ours = _cgroup_rows(done.stdout)
    name = "/" + cgroup.name
    assert ours.get((name, "spin_host"), 0) > 90, ours
    script = subprocess.run([sys.executable, "-m", "profiler", "script", "-i", str(capture), "-F", "comm,cgroup"],
                            capture_output=True, text=True, timeout=120, check=True).stdout.splitlines()
    spin_lines = [line.split() for line in script if line.split()[:1] == ["spin_host"]]
    assert spin_lines and all(words == ["spin_host", name] for words in spin_lines), spin_lines[:3]
    # the exports: a pprof label, the Firefox thread name
    import gzip

    from profiler.report.render.proto import profile_pb2 as pb

    export = [sys.executable, "-m", "profiler", "export", "-i", str(capture)]
    raw = subprocess.run([*export, "-f", "pprof", "-o", "-"], capture_output=True, timeout=120, check=True).stdout
    prof = pb.Profile()
    prof.ParseFromString(gzip.decompress(raw))
    st = prof.string_table
    labelled = {(st[lab.str]) for smp in prof.sample for lab in smp.label if st[lab.key] == "cgroup"}
    assert name in labelled, labelled
    fx = json.loads(subprocess.run([*export, "-f", "firefox", "-o", "-"], capture_output=True, timeout=120,
                                   check=True).stdout)
    assert f"spin_host [{name}]" in [t["name"] for t in fx["threads"]]
    if shutil.which("perf") is None:
        return
    data = tmp_path / "perf.data"
    subprocess.run(["perf", "record", "-q", "--all-cgroups", "-o", str(data), "--", *argv], capture_output=True,
                   timeout=120, check=True)
    theirs = _cgroup_rows(subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--sort", "cgroup,comm"],
                                         capture_output=True, text=True, timeout=120, check=True).stdout)
    assert {k for k, v in ours.items() if v > 5} == {k for k, v in theirs.items() if v > 5}, (ours, theirs)


def _comm_rows(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if fields and not line.startswith("#") and fields[0].endswith("%"):
            out[fields[-1]] = float(fields[0].rstrip("%"))
    return out


def test_cgroup_option_records_only_the_group_s_tasks_as_perf(cgroup: Path, fixtures_dir: Path,
                                                               tmp_path: Path) -> None:
    inside = tmp_path / "in_group"
    outside = tmp_path / "outside"
    shutil.copy(fixtures_dir / "containers" / "spin_container", inside)
    shutil.copy(fixtures_dir / "containers" / "spin_host", outside)
    procs = [subprocess.Popen(["sh", "-c", f"echo $$ > {cgroup}/cgroup.procs && exec {inside} 60"]),
             subprocess.Popen([str(outside), "60"])]
    try:
        time.sleep(0.3)
        capture = tmp_path / "g.prof"
        done = subprocess.run([sys.executable, "-m", "profiler", "record", "-q", "-a", "-G", cgroup.name,
                               "--duration", "0.6", "-o", str(capture)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        perf_rows = None
        if shutil.which("perf"):
            data = tmp_path / "perf.data"
            subprocess.run(["perf", "record", "-q", "-a", "-e", "cpu-clock", "-G", cgroup.name, "-o", str(data),
                            "--", "sleep", "0.6"], capture_output=True, timeout=60, check=True)
            perf_rows = _comm_rows(subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--sort", "comm"],
                                                  capture_output=True, text=True, timeout=60, check=True).stdout)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    ours = _comm_rows(subprocess.run([sys.executable, "-m", "profiler", "report", "-i", str(capture), "--sort",
                                      "comm"], capture_output=True, text=True, timeout=60, check=True).stdout)
    assert ours.get("in_group", 0) > 90 and "outside" not in ours, ours
    if perf_rows is not None:
        assert {k for k, v in ours.items() if v > 5} == {k for k, v in perf_rows.items() if v > 5}, (ours, perf_rows)


def test_cgroup_option_needs_a_system_wide_recording_and_a_real_group(tmp_path: Path, root_needed: None) -> None:
    run = [sys.executable, "-m", "profiler", "record", "-q", "-o", str(tmp_path / "x.prof")]
    done = subprocess.run([*run, "-G", "/", "--", "true"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "give -a" in done.stderr
    done = subprocess.run([*run, "-a", "-G", "no-such-group-here", "--duration", "0.1"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0 and "no such cgroup" in done.stderr


def test_a_container_gone_before_its_files_were_read_is_never_named_from_the_host(scene: dict[str, Path]) -> None:
    """Processes that live a few milliseconds: the recorder may see their MMAP2 records only
    after they exited, with no view of their files left. Then the host's file at that path
    (another inode) is refused, with the sentence; never is a frame named from it."""
    capture = scene["tmp"] / "short.prof"
    host, container = scene["host"], scene["container"]
    loop = "; ".join([f"{host} 0.01"] * 20)
    record(capture, ["unshare", "-m", "--propagation", "private", "sh", "-c",
                     f"mount --bind {container} {host} && {loop}"], "-F", "20000")
    rows, warnings = profile_rows(capture)
    names = functions_in(rows, "spin")
    assert "host_only_fn" not in names, (names, warnings)
    refused = [w for w in warnings if str(host) in w and "is not the recorded file" in w]
    assert "container_fn" in names or refused, (names, warnings)
    assert len(refused) <= 1
