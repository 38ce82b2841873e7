"""A perf user's first hour (issue 13): the same command line with perf 6.1 and with us,
on the same workload, and the behaviours compared. Tests skip the perf side when perf is
not installed (it is a reference, never a run-time dependency)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from profiler.format import records as R
from profiler.format.container.reader import CaptureReader

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("require_perf")]


def perf_bin() -> str:
    perf = shutil.which("perf")
    if perf is None:
        pytest.skip("perf is not installed (the reference these tests compare with)")
    return perf


def ours(profiler_cmd: list[str], *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*profiler_cmd, *args], capture_output=True, text=True, timeout=120, **kw)


def perf(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([perf_bin(), *args], capture_output=True, text=True, timeout=120, **kw)


def samples(path: Path) -> list[R.Sample]:
    with CaptureReader.open(path) as reader:
        return [r for r in reader.iter_records() if isinstance(r, R.Sample)]


def perf_samples(data: Path, fields: str = "pid,cpu") -> list[list[str]]:
    res = perf("script", "-i", str(data), "-F", fields)
    assert res.returncode == 0, res.stderr
    return [line.split() for line in res.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def workloads(fixtures_dir: Path) -> Path:
    return fixtures_dir / "workloads"


@pytest.fixture()
def pinned_spinner(workloads: Path) -> Iterator[int]:
    """A CPU-bound process pinned to the last CPU: whoever records that CPU must see it."""
    proc = subprocess.Popen([str(workloads / "spinner")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("ready")
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(proc.pid, {cpu})
    yield proc.pid
    proc.kill()
    proc.wait()


# --- -C CPUS -- cmd, -a -- cmd ---------------------------------------------------------------


@pytest.mark.parametrize("target", ["-C", "-a"])
def test_cpus_with_a_command_record_every_task_while_it_runs(
    target: str, pinned_spinner: int, tmp_path: Path, profiler_cmd: list[str]
) -> None:
    cpu = max(os.sched_getaffinity(0))
    where = ["-C", str(cpu)] if target == "-C" else ["-a"]
    mine, theirs = tmp_path / "c.prof", tmp_path / "c.data"
    res = ours(profiler_cmd, "record", *where, "-o", str(mine), "--", "sleep", "0.5")
    assert res.returncode == 0, res.stderr
    got = samples(mine)
    pres = perf("record", "-q", *where, "-o", str(theirs), "--", "sleep", "0.5")
    assert pres.returncode == 0, pres.stderr
    perf_pids = {int(f[0]) for f in perf_samples(theirs)}
    perf_cpus = {int(f[1].strip("[]")) for f in perf_samples(theirs)}
    # both: the pinned spinner, which the command never touches, is recorded
    assert pinned_spinner in perf_pids
    assert pinned_spinner in {s.pid for s in got}
    spinner_share = Counter(s.pid for s in got if s.cpu == cpu)[pinned_spinner]
    assert spinner_share > 10
    if target == "-C":
        assert perf_cpus == {cpu}
        assert {s.cpu for s in got} == {cpu}
    # the command's life bounds the recording: the header names it and the run ended with it
    with CaptureReader.open(mine) as reader:
        tgt = reader.header["target"]
    assert tgt["command"] == ["sleep", "0.5"] and tgt["system_wide"]


# --- signals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("where", "settle"), [(("-a",), 0.5), (("-a",), 0.0), (("--", "sigcatch"), 0.0)],
                         ids=["system-wide", "system-wide-during-setup", "command"])
def test_sigint_ends_the_recorder_like_perf(where: tuple[str, ...], settle: float, workloads: Path,
                                            tmp_path: Path, profiler_cmd: list[str]) -> None:
    """SIGINT ends both recorders by SIGINT with a whole capture, whenever it comes once the
    output file exists: while recording, or at once (while the recorder still reads the host
    facts: the handlers are in place before the file is created, as perf's are)."""
    args = [str(workloads / a) if a == "sigcatch" else a for a in where]
    codes = []
    for tool, out in ((profiler_cmd + ["record"], tmp_path / "s.prof"),
                      ([perf_bin(), "record", "-q"], tmp_path / "s.data")):
        proc = subprocess.Popen([*tool, "-o", str(out), *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        if "--" in where:
            assert proc.stdout.readline() == "ready\n"
        else:
            while not out.exists() or out.stat().st_size == 0:  # the recorder has created it
                time.sleep(0.005)
            time.sleep(settle)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
        assert "Traceback" not in stderr
        codes.append(proc.returncode)
    assert codes[0] == codes[1] == -signal.SIGINT  # both end by SIGINT: a shell sees 130
    with CaptureReader.open(tmp_path / "s.prof") as reader:
        assert reader.clean_end


# --- event labels ----------------------------------------------------------------------------


@pytest.mark.parametrize(("our_flag", "perf_flag", "suffix"), [("--kernel-only", "--all-kernel", ":k"),
                                                              ("--user-only", "--all-user", ":u")])
def test_privilege_flags_label_the_event_like_perf(our_flag: str, perf_flag: str, suffix: str, workloads: Path,
                                                   tmp_path: Path, profiler_cmd: list[str]) -> None:
    # page faults: time in the kernel and in user space alike (a pure user workload may get no
    # kernel sample at all on a busy machine)
    cmd = ["--", str(workloads / "statload"), "pages", "40000"]
    assert ours(profiler_cmd, "record", "-q", our_flag, "-e", "cpu-clock", "-o", str(tmp_path / "k.prof"),
                *cmd).returncode == 0
    assert perf("record", "-q", "-e", "cpu-clock" + suffix, "-o", str(tmp_path / "k.data"), *cmd).returncode == 0
    mine = ours(profiler_cmd, "report", "-i", str(tmp_path / "k.prof"))
    theirs = perf("report", "-i", str(tmp_path / "k.data"), "--stdio")
    label = f"of event 'cpu-clock{suffix}'"
    assert label in mine.stdout and label in theirs.stdout


def test_max_stack_above_the_kernel_limit_names_it(profiler_cmd: list[str], tmp_path: Path) -> None:
    limit = int(Path("/proc/sys/kernel/perf_event_max_stack").read_text())
    res = ours(profiler_cmd, "record", "-g", "--callchain-max-stack", str(limit + 1), "-o",
               str(tmp_path / "x.prof"), "--", "true")
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and f"limit of {limit}" in lines[0] and "perf_event_max_stack" in lines[0]
    ok = ours(profiler_cmd, "record", "-q", "-g", "--callchain-max-stack", str(limit), "-o",
              str(tmp_path / "y.prof"), "--", "true")
    assert ok.returncode == 0, ok.stderr


# --- tracepoint payloads ---------------------------------------------------------------------

_WORKLOAD = ["sh", "-c", "/bin/true; /bin/true; ls / > /dev/null"]
_TP_EVENTS = "sched:sched_switch,sched:sched_process_exec"


def _shape(line: str) -> str:
    """A script line's trace part reduced to its field names and separators (values, which
    may hold spaces in a thread name, dropped)."""
    import re

    trace = line.split(": ", 2)[-1]
    return " ".join(re.findall(r"\w+=|==>", trace))


@pytest.fixture(scope="module")
def tracepoint_runs(tmp_path_factory: pytest.TempPathFactory, profiler_cmd: list[str]) -> tuple[Path, Path]:
    from profiler.record.events import tracefs_root

    if tracefs_root() is None:
        pytest.skip("tracefs is not mounted")
    d = tmp_path_factory.mktemp("tp")
    mine, theirs = d / "tp.prof", d / "tp.data"
    res = ours(profiler_cmd, "record", "-q", "-e", _TP_EVENTS, "-o", str(mine), "--", *_WORKLOAD)
    assert res.returncode == 0, res.stderr
    pres = perf("record", "-q", "-e", _TP_EVENTS, "-o", str(theirs), "--", *_WORKLOAD)
    assert pres.returncode == 0, pres.stderr
    return mine, theirs


def test_tracepoint_payloads_print_like_perf(tracepoint_runs: tuple[Path, Path], profiler_cmd: list[str]) -> None:
    mine, theirs = tracepoint_runs
    perf_lines = perf("script", "-i", str(theirs)).stdout.splitlines()
    for event in ("sched:sched_process_exec", "sched:sched_switch"):
        res = ours(profiler_cmd, "script", "-i", str(mine), "--event", event)
        assert res.returncode == 0, res.stderr
        mine_lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
        theirs_lines = [ln for ln in perf_lines if f" {event}: " in ln]
        assert mine_lines and theirs_lines
        if event.endswith("exec"):
            # the same programs were exec'd: the same lines once pids and times are blanked
            def norm(ln: str) -> str:
                return " ".join(ln.split(": ", 2)[-1].split()[0:1])
            assert sorted(map(norm, mine_lines)) == sorted(map(norm, theirs_lines))
            assert sorted(map(norm, mine_lines)) == ["filename=/bin/true", "filename=/bin/true",
                                                     "filename=/usr/bin/ls", "filename=/usr/bin/sh"]
        # every line has the layout perf prints, field names in perf's order
        assert {_shape(ln) for ln in mine_lines} == {_shape(ln) for ln in theirs_lines}
        # and the head: 16-wide comm, tid, [cpu], time, the event right-aligned to the longest name
        width = max(len(e) for e in _TP_EVENTS.split(","))
        head = f"{event:>{width}}: "
        assert all(head in ln for ln in mine_lines) and all(head in ln for ln in theirs_lines)
        assert all(ln.index(head) == theirs_lines[0].index(head) for ln in mine_lines)


def test_several_events_interleave_in_time_like_perf(tracepoint_runs: tuple[Path, Path],
                                                     profiler_cmd: list[str]) -> None:
    import re

    mine, theirs = tracepoint_runs
    for text in (ours(profiler_cmd, "script", "-i", str(mine)).stdout, perf("script", "-i", str(theirs)).stdout):
        lines = [ln for ln in text.splitlines() if ln.strip()]
        events = {re.search(r" (sched:\w+): ", ln).group(1) for ln in lines}  # type: ignore[union-attr]
        assert events == {"sched:sched_switch", "sched:sched_process_exec"}
        stamps = [float(s) for s in _stamps(text)]
        assert len(stamps) == len(lines) and stamps == sorted(stamps)


def test_tracepoint_fields_in_json_and_filters(tracepoint_runs: tuple[Path, Path], profiler_cmd: list[str]) -> None:
    import json

    mine, theirs = tracepoint_runs
    res = ours(profiler_cmd, "script", "-i", str(mine), "--event", "sched:sched_switch", "--json")
    assert res.returncode == 0, res.stderr
    objs = [json.loads(ln) for ln in res.stdout.splitlines()]
    assert objs and all(set(o["trace"]) >= {"prev_comm", "prev_pid", "next_comm", "next_pid"} for o in objs)
    assert all(o["trace"]["prev_pid"] == o["tid"] for o in objs)  # the task switched out is the sampled one
    filtered = ours(profiler_cmd, "script", "-i", str(mine), "--event", "sched:sched_process_exec",
                    "--trace-filter", 'filename == "/bin/true"')
    assert filtered.returncode == 0, filtered.stderr
    perf_true = [ln for ln in perf("script", "-i", str(theirs)).stdout.splitlines()
                 if "sched_process_exec:" in ln and "filename=/bin/true " in ln]
    assert len(filtered.stdout.splitlines()) == len(perf_true) == 2
    rep = ours(profiler_cmd, "report", "-i", str(mine), "--event", "sched:sched_switch", "--sort", "comm",
               "--trace-filter", f'prev_comm == "{objs[0]["trace"]["prev_comm"]}"', "--format", "json",
               "--percentage", "relative")
    assert rep.returncode == 0, rep.stderr
    want = sum(1 for o in objs if o["trace"]["prev_comm"] == objs[0]["trace"]["prev_comm"])
    assert json.loads(rep.stdout)["total_samples"] == want


# --- --time, script -F ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shares_runs(tmp_path_factory: pytest.TempPathFactory, profiler_cmd: list[str],
                workloads: Path) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("shares")
    mine, theirs = d / "s.prof", d / "s.data"
    cmd = ["--", str(workloads / "shares"), "0.3"]
    res = ours(profiler_cmd, "record", "-q", "-e", "cpu-clock", "-o", str(mine), *cmd)
    assert res.returncode == 0, res.stderr
    pres = perf("record", "-q", "-e", "cpu-clock", "-o", str(theirs), *cmd)
    assert pres.returncode == 0, pres.stderr
    return mine, theirs


def _stamps(text: str) -> list[str]:
    import re

    # a stamp is right-aligned in 12 columns: once uptime passes 10,000 s it has no space before it
    return [m.group(1) for m in re.finditer(r"(?<!\S)(\d+\.\d{6}):", text)]


def _script(tool: str, path: Path, profiler_cmd: list[str], *args: str) -> str:
    res = ours(profiler_cmd, "script", "-i", str(path), *args) if tool == "ours" else perf(
        "script", "-i", str(path), *args)
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.mark.parametrize("tool", ["ours", "perf"])
def test_time_takes_what_script_prints_several_ranges_and_percentages(tool: str, shares_runs: tuple[Path, Path],
                                                                      profiler_cmd: list[str]) -> None:
    """The same --time arguments select the same samples of each tool's own capture."""
    path = shares_runs[0] if tool == "ours" else shares_runs[1]
    every = _stamps(_script(tool, path, profiler_cmd, "-F", "time"))
    assert len(every) > 100
    one = _stamps(_script(tool, path, profiler_cmd, "-F", "time", "--time", f"{every[10]},{every[20]}"))
    # microseconds as printed: the sample printed as the end is after it by its nanoseconds,
    # in perf as in ours (unless they are 000)
    assert one in (every[10:20], every[10:21])
    two = _stamps(_script(tool, path, profiler_cmd, "-F", "time", "--time",
                          f"{every[10]},{every[20]} {every[50]},{every[60]}"))
    assert two[:len(one)] == one and two[len(one):] in (every[50:60], every[50:61])
    halves = [_stamps(_script(tool, path, profiler_cmd, "-F", "time", "--time", t)) for t in ("50%/1", "50%/2")]
    assert halves[0] + halves[1] == every and halves[0] and halves[1]
    slices = _stamps(_script(tool, path, profiler_cmd, "-F", "time", "--time", "10%/1,10%/2"))
    assert slices == _stamps(_script(tool, path, profiler_cmd, "-F", "time", "--time", "0%-20%"))


@pytest.mark.parametrize("fields", ["comm,tid,time", "tid,period", "comm,pid,tid,time,event", "time,event,period",
                                    "pid,tid"])
def test_script_fields_lay_out_like_perf(fields: str, shares_runs: tuple[Path, Path], profiler_cmd: list[str]) -> None:
    import re

    def shapes(text: str) -> set[str]:
        return {re.sub(r"\d", "0", ln) for ln in text.splitlines()}

    mine = _script("ours", shares_runs[0], profiler_cmd, "-F", fields)
    theirs = _script("perf", shares_runs[1], profiler_cmd, "-F", fields)
    assert shapes(mine) == shapes(theirs)


def test_script_symbol_fields_without_callchains_like_perf(shares_runs: tuple[Path, Path],
                                                           profiler_cmd: list[str]) -> None:
    import re

    mine = _script("ours", shares_runs[0], profiler_cmd, "-F", "comm,ip,sym,dso")
    theirs = _script("perf", shares_runs[1], profiler_cmd, "-F", "comm,ip,sym,dso")
    pattern = re.compile(r"^ {10}shares  [ 0-9a-f]{16} (\S+) \((\S+)\)$")
    for text in (mine, theirs):
        lines = text.splitlines()
        assert lines and all(pattern.match(ln) for ln in lines), lines[:3]
    def top(text: str) -> str:
        return Counter(pattern.match(ln).group(1) for ln in text.splitlines()).most_common(1)[0][0]  # type: ignore[union-attr]
    assert top(mine) == top(theirs) == "work_a"


# --- --percentage ---------------------------------------------------------------------------------


def _overheads(text: str) -> list[float]:
    import re

    return [float(m.group(1)) for m in re.finditer(r"^\s+([\d.]+)%", text, re.M)]


def _header_samples(text: str) -> str:
    import re

    m = re.search(r"^# Samples: (\S+)\s", text, re.M)
    assert m, text[:300]
    return m.group(1)


def test_percentage_absolute_by_default_and_relative_like_perf(workloads: Path, tmp_path: Path,
                                                               profiler_cmd: list[str]) -> None:
    cmd = ["--", "sh", "-c", f"{workloads / 'shares'} 0.2 >/dev/null; i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done"]
    mine, theirs = tmp_path / "p.prof", tmp_path / "p.data"
    assert ours(profiler_cmd, "record", "-q", "-e", "cpu-clock", "-o", str(mine), *cmd).returncode == 0
    assert perf("record", "-q", "-e", "cpu-clock", "-o", str(theirs), *cmd).returncode == 0
    for tool, path in (("ours", mine), ("perf", theirs)):
        def run(*args: str) -> str:
            base = ["report", "-i", str(path), "--sort", "comm", *args]  # noqa: B023 (called in this iteration)
            res = ours(profiler_cmd, *base) if tool == "ours" else perf(*base, "--stdio")  # noqa: B023
            assert res.returncode == 0, res.stderr
            return res.stdout
        everything = run()
        absolute = run("--comm", "shares")
        relative = run("--comm", "shares", "--percentage", "relative")
        assert sum(_overheads(relative)) == pytest.approx(100.0, abs=0.05), tool
        # absolute (perf's default): the share of all samples, and the header keeps the total
        assert sum(_overheads(absolute)) < 99.9, (tool, absolute)
        assert _header_samples(absolute) == _header_samples(everything), tool
        assert _overheads(absolute) == [max(_overheads(everything))], tool


# --- buildids / archive on what users share; speedscope names ------------------------------------


def _perf_buildids(data: Path) -> dict[str, str]:
    res = perf("buildid-list", "-i", str(data))
    assert res.returncode == 0, res.stderr
    out = {}
    for line in res.stdout.splitlines():
        bid, _, path = line.partition(" ")
        out[path.strip()] = bid
    return out


def test_buildids_of_a_stripped_copy_list_the_elf_files(workloads: Path, tmp_path: Path,
                                                        profiler_cmd: list[str]) -> None:
    prog = workloads / "shares"
    mine, theirs, shared = tmp_path / "b.prof", tmp_path / "b.data", tmp_path / "share.prof"
    assert ours(profiler_cmd, "record", "-q", "-g", "-e", "cpu-clock", "-o", str(mine), "--", str(prog),
                "0.2").returncode == 0
    assert perf("record", "-q", "-g", "-e", "cpu-clock", "-o", str(theirs), "--", str(prog), "0.2").returncode == 0
    perf_ids = _perf_buildids(theirs)
    archived = ours(profiler_cmd, "archive", "-i", str(mine), "--strip-paths", "-o", str(shared))
    assert archived.returncode == 0, archived.stderr + archived.stdout
    assert "+-" not in archived.stdout
    for path in (mine, shared):
        res = ours(profiler_cmd, "buildids", "-i", str(path), "--json")
        assert res.returncode == 0, res.stderr
        rows = {r["path"]: r for r in json.loads(res.stdout)}
        # no JIT here: no perf map is asked for (perf's buildid-list has none either)
        assert not any(p.startswith("/tmp/perf-") for p in rows), rows.keys()
        assert not any(p.startswith("/tmp/perf-") for p in perf_ids)
        # the sampled program is listed as an ELF file with the build-id perf lists for it
        name = str(prog) if path == mine else "shares"
        assert rows[name]["kind"] == "elf" and rows[name]["build_id"] == perf_ids[str(prog)]
        assert rows[name]["samples"] > 0
        if path == shared:
            assert rows[name]["source"] == "packed"
    rep = ours(profiler_cmd, "report", "-i", str(shared), "--no-children", "--sort", "sym", "--format", "json")
    assert rep.returncode == 0, rep.stderr
    assert "work_a" in {r["symbol"] for r in json.loads(rep.stdout)["rows"]}


def test_archive_fails_naming_what_it_could_not_pack(workloads: Path, tmp_path: Path,
                                                     profiler_cmd: list[str]) -> None:
    import shutil as sh

    prog = tmp_path / "gone"
    sh.copy(workloads / "shares", prog)
    cap = tmp_path / "g.prof"
    assert ours(profiler_cmd, "record", "-q", "-o", str(cap), "--", str(prog), "0.1").returncode == 0
    prog.unlink()
    res = ours(profiler_cmd, "archive", "-i", str(cap), "-o", str(tmp_path / "out.prof"))
    assert res.returncode == 1
    assert f"missing {prog}" in res.stdout
    last = res.stderr.strip().splitlines()[-1]
    assert "could not pack" in last and str(prog) in last
    assert "+-" not in res.stdout


def test_speedscope_names_threads_after_the_exec(workloads: Path, tmp_path: Path, profiler_cmd: list[str]) -> None:
    cap, theirs = tmp_path / "e.prof", tmp_path / "e.data"
    cmd = ["--", "sh", "-c", f"i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; exec {workloads / 'shares'} 0.2"]
    assert ours(profiler_cmd, "record", "-q", "-e", "cpu-clock", "-o", str(cap), *cmd).returncode == 0
    assert perf("record", "-q", "-e", "cpu-clock", "-o", str(theirs), *cmd).returncode == 0
    # perf script: the thread is sh, then shares after the exec
    perf_comms = [ln.split()[0] for ln in perf("script", "-i", str(theirs), "-F", "comm").stdout.splitlines()]
    assert perf_comms[0] == "sh" and perf_comms[-1] == "shares"
    for per in ("thread", "process"):
        res = ours(profiler_cmd, "export", "-i", str(cap), "-f", "speedscope", "--per", per)
        assert res.returncode == 0, res.stderr
        names = [p["name"] for p in json.loads(res.stdout)["profiles"]]
        assert len(names) == 1 and names[0].startswith("shares (pid "), names
