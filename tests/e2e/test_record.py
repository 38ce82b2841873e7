"""End-to-end tests of ``profiler record`` on the real kernel with the workload fixtures.

Captures are checked with the format's own reader; function names come from the fixture
binary's symbol table (pyelftools), never from the recorder itself.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from elftools.elf.elffile import ELFFile

from profiler.format import records as R
from profiler.format.container.layout import FRAME_INDEX, FRAME_RAW, INDEX_ENTRY
from profiler.format.container.reader import CaptureReader

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("require_perf")]


# --- helpers -------------------------------------------------------------------------------


def run_record(profiler_cmd: list[str], *args: str, timeout: float = 60, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*profiler_cmd, "record", *args], capture_output=True, text=True, timeout=timeout, **kw)


def records(path: Path) -> list[Any]:
    with CaptureReader.open(path) as reader:
        return list(reader.iter_records())


def samples(recs: list[Any]) -> list[R.Sample]:
    return [r for r in recs if isinstance(r, R.Sample)]


class Symbols:
    """Function symbols of one fixture binary, and its build-id, read with pyelftools."""

    def __init__(self, path: Path) -> None:
        with open(path, "rb") as f:
            elf: Any = ELFFile(f)
            self.funcs: list[tuple[int, int, str]] = sorted(
                (s["st_value"], s["st_value"] + s["st_size"], s.name)
                for s in elf.get_section_by_name(".symtab").iter_symbols()
                if s["st_info"]["type"] == "STT_FUNC" and s["st_size"]
            )
            self.segments = [
                (seg["p_offset"], seg["p_vaddr"], seg["p_filesz"])
                for seg in elf.iter_segments()
                if seg["p_type"] == "PT_LOAD"
            ]
            note = next(
                n
                for sec in elf.iter_sections()
                if sec["sh_type"] == "SHT_NOTE"
                for n in sec.iter_notes()
                if n["n_type"] == "NT_GNU_BUILD_ID"
            )
            self.build_id = note["n_desc"]

    def name(self, ip: int, maps: list[R.Mmap2]) -> str | None:
        for m in maps:
            if m.addr <= ip < m.addr + m.len:
                offset = ip - m.addr + m.pgoff
                for p_offset, p_vaddr, p_filesz in self.segments:
                    if p_offset <= offset < p_offset + p_filesz:
                        vaddr = offset - p_offset + p_vaddr
                        for lo, hi, name in self.funcs:
                            if lo <= vaddr < hi:
                                return name
        return None


def user_chain(sample: R.Sample) -> list[int]:
    """The user part of a callchain, context markers removed."""
    chain = sample.callchain or ()
    out, in_user = [], False
    for ip in chain:
        if ip >= R.PERF_CONTEXT_MAX:
            in_user = ip == R.PERF_CONTEXT_USER
            continue
        if in_user:
            out.append(ip)
    return out


@pytest.fixture(scope="module")
def workloads(fixtures_dir: Path) -> Path:
    return fixtures_dir / "workloads"


@pytest.fixture()
def spinner(workloads: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([str(workloads / "spinner")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("ready")
    yield proc
    proc.kill()
    proc.wait()


# --- a command ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shares_capture(workloads: Path, tmp_path_factory: pytest.TempPathFactory,
                   profiler_cmd: list[str]) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("shares") / "shares.prof"
    result = run_record(profiler_cmd, "-g", "-o", str(out), "--", str(workloads / "shares"), "0.6")
    assert result.returncode == 0, result.stderr
    return out, result


def test_command_samples_comm_exec_and_mmap2_with_build_id(shares_capture: tuple[Path, Any], workloads: Path) -> None:
    path, result = shares_capture
    recs = records(path)
    comms = [r for r in recs if isinstance(r, R.Comm) and r.comm == "shares"]
    assert comms and comms[0].exec, "exec of the command must produce COMM with COMM_EXEC"
    child = comms[0].pid
    got = samples(recs)
    assert sum(1 for s in got if s.pid == child) > 100
    binary = str(workloads / "shares")
    maps = [r for r in recs if isinstance(r, R.Mmap2) and r.filename == binary]
    assert maps, "no MMAP2 of the fixture binary"
    expected = Symbols(workloads / "shares").build_id
    with CaptureReader.open(path) as reader:
        entries = reader.metadata("buildids")[0]["entries"]
    by_path = {e["path"]: e.get("build_id") for e in entries}
    assert by_path[binary] == expected
    st = os.stat(binary)  # the kernel's MMAP2 identity of the mapped inode, as stat sees it
    assert maps[0].build_id is None  # no attr.build_id unless --buildid-mmap
    assert (maps[0].maj, maps[0].min, maps[0].ino) == (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    mine = next(e for e in entries if e["path"] == binary)
    assert (mine["maj"], mine["min"], mine["ino"]) == (maps[0].maj, maps[0].min, maps[0].ino)
    assert any("libc" in p for p in by_path), "build-ids of every mapped ELF, libc included"
    assert "Captured and wrote" in result.stderr and str(path) in result.stderr


def test_ring_data_is_compressed_unless_no_compress(shares_capture: tuple[Path, Any], workloads: Path,
                                                    tmp_path: Path, profiler_cmd: list[str]) -> None:
    """Ring-buffer data goes into zstd frames by default; ``--no-compress`` writes it as the
    kernel wrote it, and so do ring buffers of 64 KiB or less (-m 16). All read back to the
    same kind of records. (A command's samples take their CPU from their frame: format 3.0
    either way, 3.1 with the INDEX frames that come with zstd frames; system-wide ones are
    2.1 and 1.1.) Every INDEX entry counts a zstd frame whose records are all samples."""
    plain, small = tmp_path / "plain.prof", tmp_path / "small.prof"
    for path, option in ((plain, "--no-compress"), (small, "-m16")):
        result = run_record(profiler_cmd, "-g", option, "-o", str(path), "--", str(workloads / "shares"), "0.6")
        assert result.returncode == 0, result.stderr
    per_sample = {}
    for path, version, compressed in ((shares_capture[0], (3, 1), True), (plain, (3, 0), False),
                                      (small, (3, 0), False)):
        with CaptureReader.open(path) as reader:
            assert reader.version == version
            raws = [f for f in reader.iter_frames() if f.kind == FRAME_RAW]
            assert raws
            assert all((f.seq in reader.inflated.seqs) == compressed for f in raws)
            n = int(reader.trailer["samples"])
            index = {seq: count for f in reader.iter_frames() if f.kind == FRAME_INDEX
                     for seq, count in INDEX_ENTRY.iter_unpack(f.payload)}
            assert bool(index) == compressed, (len(index), len(raws))  # a short capture: few passes of samples only
            kinds: dict[int, Counter[str]] = {seq: Counter() for seq in index}
            for frame, rec in reader.iter_records_with_frames():
                if frame.seq in kinds:
                    kinds[frame.seq][type(rec).__name__] += 1
            assert all(kinds[seq] == Counter(Sample=count) for seq, count in index.items())
        assert len(samples(records(path))) == n > 1000
        per_sample[compressed] = path.stat().st_size / n
    assert per_sample[True] * 4 < per_sample[False], per_sample


def test_buildid_mmap_is_an_opt_in(workloads: Path, tmp_path: Path, profiler_cmd: list[str]) -> None:
    """``--buildid-mmap`` asks the kernel for the build-id form of MMAP2, as perf's option does."""
    out = tmp_path / "bid.prof"
    result = run_record(profiler_cmd, "--buildid-mmap", "-o", str(out), "--", str(workloads / "shares"), "0.1")
    assert result.returncode == 0, result.stderr
    with CaptureReader.open(out) as reader:
        assert reader.header["events"][0]["attr"]["build_id"] == 1
    binary = str(workloads / "shares")
    maps = [r for r in records(out) if isinstance(r, R.Mmap2) and r.filename == binary]
    assert maps and maps[0].build_id is not None
    assert maps[0].build_id.hex() == Symbols(workloads / "shares").build_id


def test_known_shares_of_time(shares_capture: tuple[Path, Any], workloads: Path) -> None:
    path, _ = shares_capture
    recs = records(path)
    syms = Symbols(workloads / "shares")
    maps = [r for r in recs if isinstance(r, R.Mmap2) and r.filename.endswith("/shares")]
    names = Counter(syms.name(s.ip or 0, maps) for s in samples(recs))
    work = {k: names[k] for k in ("work_a", "work_b", "work_c")}
    total = sum(work.values())
    assert total > 500
    for name, share in (("work_a", 0.5), ("work_b", 0.3), ("work_c", 0.2)):
        assert abs(work[name] / total - share) < 0.08, (name, work)


def test_callchains_hold_the_callers(shares_capture: tuple[Path, Any], workloads: Path) -> None:
    path, _ = shares_capture
    recs = records(path)
    syms = Symbols(workloads / "shares")
    maps = [r for r in recs if isinstance(r, R.Mmap2) and r.filename.endswith("/shares")]
    # main -> work (the timed loop) -> run -> work_a / work_b, main -> work -> other -> work_c
    expected = {"work_a": ["work_a", "run", "work", "main"], "work_b": ["work_b", "run", "work", "main"],
                "work_c": ["work_c", "other", "work", "main"]}
    good: Counter[str] = Counter()
    bad: list[list[str | None]] = []
    for s in samples(recs):
        chain = [syms.name(ip, maps) for ip in user_chain(s)]
        leaf = chain[0] if chain else None
        if leaf in expected:
            if [n for n in chain if n is not None][:4] == expected[leaf]:
                good[leaf] += 1
            else:
                bad.append(chain)
    assert all(good[k] > 20 for k in expected), good
    # a sample on a leaf's first instruction (before push %rbp) may miss one caller
    assert len(bad) <= 0.01 * sum(good.values()), bad[:5]


def test_exit_status_of_the_command_is_ours(profiler_cmd: list[str], tmp_path: Path) -> None:
    result = run_record(profiler_cmd, "-q", "-o", str(tmp_path / "x.prof"), "--", "sh", "-c", "exit 7")
    assert result.returncode == 7
    assert result.stderr == ""


def test_forks_and_threads(workloads: Path, tmp_path: Path, profiler_cmd: list[str]) -> None:
    out = tmp_path / "forker.prof"
    result = run_record(profiler_cmd, "-o", str(out), "--", str(workloads / "forker"), "0.5")
    assert result.returncode == 0, result.stderr
    recs = records(out)
    forks = [r for r in recs if isinstance(r, R.Fork)]
    comm = next(r for r in recs if isinstance(r, R.Comm) and r.comm == "forker")
    parent = comm.pid
    thread_forks = [f for f in forks if f.pid == parent and f.tid != parent]
    child_forks = [f for f in forks if f.ppid == parent and f.pid != parent]
    assert len(thread_forks) == 2 and len(child_forks) == 1, forks
    tids = {s.tid for s in samples(recs)}
    expected = {parent, child_forks[0].pid, *(f.tid for f in thread_forks)}
    assert expected <= tids, (expected, tids)


# --- attaching and system-wide ----------------------------------------------------------------


def test_attach_to_pid_synthesizes_maps(spinner: subprocess.Popen[str], workloads: Path, tmp_path: Path,
                                        profiler_cmd: list[str]) -> None:
    out = tmp_path / "p.prof"
    result = run_record(profiler_cmd, "-p", str(spinner.pid), "--duration", "0.5", "-o", str(out))
    assert result.returncode == 0, result.stderr
    with CaptureReader.open(out) as reader:
        synth_frames = [f for f in reader.iter_frames() if f.kind_name == "synth"]
        recs = list(reader.iter_records())
    assert synth_frames, "pre-existing processes need synthesized records"
    binary = str(workloads / "spinner")
    assert any(isinstance(r, R.Mmap2) and r.filename == binary and r.pid == spinner.pid for r in recs)
    assert any(isinstance(r, R.Comm) and r.pid == spinner.pid and r.comm == "spinner" for r in recs)
    threads = os.listdir(f"/proc/{spinner.pid}/task")
    assert any(isinstance(r, R.Fork) and r.pid == spinner.pid and r.tid != spinner.pid for r in recs)
    tids = {s.tid for s in samples(recs) if s.pid == spinner.pid}
    assert tids == {int(t) for t in threads}


def test_a_command_after_pid_is_a_timer(spinner: subprocess.Popen[str], workloads: Path, tmp_path: Path,
                                        profiler_cmd: list[str]) -> None:
    # ``-p PID -- sleep 0.5`` as in perf: the process is recorded while the command runs, the
    # command itself is not, and its exit status is ours
    out = tmp_path / "timer.prof"
    start = time.monotonic()
    result = run_record(profiler_cmd, "-p", str(spinner.pid), "-o", str(out), "--", "sh", "-c", "sleep 0.5; exit 3")
    elapsed = time.monotonic() - start
    assert result.returncode == 3, result.stderr
    assert 0.5 <= elapsed < 20
    recs = records(out)
    got = samples(recs)
    assert got and {s.pid for s in got} == {spinner.pid}
    assert not any(isinstance(r, R.Comm) and r.comm in ("sh", "sleep") for r in recs)
    assert spinner.poll() is None  # the target runs on


def test_a_timer_outliving_its_target_is_terminated_like_perfs(workloads: Path, tmp_path: Path,
                                                               profiler_cmd: list[str]) -> None:
    # the target exits after ~1 s (time enough for perf, slower to start, to attach on a busy
    # machine): the recording ends then, and the timer command still running gets SIGTERM,
    # whose status (143) is the recorder's, as perf's is
    def attach(cmd: list[str], *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
        target = subprocess.Popen([str(workloads / "shares"), "0.7"], stdout=subprocess.DEVNULL)
        try:
            start = time.monotonic()
            done = subprocess.run([*cmd, "-p", str(target.pid), *args, "--", "sleep", "30"],
                                  capture_output=True, text=True, timeout=60)
            return done, time.monotonic() - start
        finally:
            target.kill()
            target.wait()

    ours, ours_s = attach([*profiler_cmd, "record"], "-o", str(tmp_path / "ours.prof"))
    assert ours_s < 15, ours.stderr
    assert samples(records(tmp_path / "ours.prof"))
    assert ours.returncode == 128 + signal.SIGTERM, ours.stderr
    if shutil.which("perf"):
        theirs, theirs_s = attach(["perf", "record", "-q"], "-o", str(tmp_path / "perf.data"))
        assert theirs_s < 15
        assert theirs.returncode in (128 + signal.SIGTERM, -signal.SIGTERM), theirs.stderr


def test_attach_to_one_thread(spinner: subprocess.Popen[str], tmp_path: Path, profiler_cmd: list[str]) -> None:
    helper = max(int(t) for t in os.listdir(f"/proc/{spinner.pid}/task"))
    out = tmp_path / "t.prof"
    result = run_record(profiler_cmd, "-t", str(helper), "--duration", "0.4", "-o", str(out))
    assert result.returncode == 0, result.stderr
    got = samples(records(out))
    assert got and {s.tid for s in got} == {helper}


def test_system_wide_with_duration(tmp_path: Path, profiler_cmd: list[str], workloads: Path) -> None:
    """Every CPU is busy meanwhile: an idle CPU of this VM takes no cpu-clock samples (perf's
    recording shows the same), so a quiet machine would leave some CPU without any."""
    out = tmp_path / "a.prof"
    ncpu = os.cpu_count() or 1
    busy = subprocess.Popen([str(workloads / "shares"), "3.0", str(ncpu)], stdout=subprocess.DEVNULL)
    try:
        start = time.monotonic()
        result = run_record(profiler_cmd, "-a", "--duration", "0.5", "-o", str(out))
        elapsed = time.monotonic() - start
    finally:
        busy.kill()
        busy.wait()
    assert result.returncode == 0, result.stderr
    assert elapsed < 10
    recs = records(out)
    got = samples(recs)
    assert {s.cpu for s in got} == set(range(ncpu))
    assert len({s.pid for s in got}) > 1
    assert sum(1 for r in recs if isinstance(r, R.Comm)) > 5, "all running processes synthesized"


def test_cpu_list_restricts_cpus(tmp_path: Path, profiler_cmd: list[str]) -> None:
    out = tmp_path / "c.prof"
    result = run_record(profiler_cmd, "-C", "0", "--duration", "0.3", "-o", str(out))
    assert result.returncode == 0, result.stderr
    got = samples(records(out))
    assert got and {s.cpu for s in got} == {0}


def test_every_raw_frame_holds_the_samples_of_the_cpu_it_names(workloads: Path, tmp_path: Path,
                                                                 profiler_cmd: list[str]) -> None:
    """What format 3.0 rests on: a system-wide recording keeps PERF_SAMPLE_CPU (as perf's ``-a``),
    and there every sample's CPU field is its frame's cpu. A command's samples leave the field
    out (8 bytes a sample, as perf for a command) and the reader gives them their frame's cpu."""
    out = tmp_path / "a.prof"
    result = run_record(profiler_cmd, "-a", "-F", "2000", "-o", str(out), "--", str(workloads / "shares"), "0.3", "2")
    assert result.returncode == 0, result.stderr
    with CaptureReader.open(out) as reader:
        assert reader.version < (3, 0) and reader.header["events"][0]["attr"]["sample_type"] & R.PERF_SAMPLE_CPU
        pairs = [(frame.cpu, rec.cpu) for frame, rec in reader.iter_records_with_frames() if isinstance(rec, R.Sample)]
    assert len(pairs) > 100 and all(f == c for f, c in pairs), Counter(pairs)
    for compress in ([], ["--no-compress"]):  # raw_zstd frames, raw frames
        out = tmp_path / "c.prof"
        result = run_record(profiler_cmd, *compress, "-F", "2000", "-o", str(out), "--", str(workloads / "shares"),
                            "0.3", "2")
        assert result.returncode == 0, result.stderr
        assert_frame_cpus(out)


def assert_frame_cpus(out: Path) -> None:
    with CaptureReader.open(out) as reader:
        assert reader.version in ((3, 0), (3, 1))  # 3.1: with the INDEX frames of zstd frames
        assert not reader.header["events"][0]["attr"]["sample_type"] & R.PERF_SAMPLE_CPU
        from profiler.format.decode.decoder import load_capture

        cols = load_capture(reader).samples
        frame_cpus = Counter(frame.cpu for frame, rec in reader.iter_records_with_frames() if isinstance(rec, R.Sample))
    assert len(cols) > 100 and Counter(cols.cpu.tolist()) == frame_cpus and "cpu" in cols.has


def test_tracepoint_event(tmp_path: Path, profiler_cmd: list[str]) -> None:
    from profiler.record.events import tracefs_root

    if tracefs_root() is None:
        if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"]).returncode:
            pytest.skip("tracefs is not mounted")
    out = tmp_path / "tp.prof"
    result = run_record(profiler_cmd, "-e", "sched:sched_switch", "-a", "--duration", "0.3", "-o", str(out))
    assert result.returncode == 0, result.stderr
    with CaptureReader.open(out) as reader:
        attr = reader.header["events"][0]["attr"]
        got = samples(list(reader.iter_records()))
    assert attr["type"] == 2 and attr["sample_period"] == 1
    assert got


def test_several_events_are_told_apart(workloads: Path, tmp_path: Path, profiler_cmd: list[str]) -> None:
    out = tmp_path / "two.prof"
    result = run_record(profiler_cmd, "-e", "cpu-clock,task-clock", "-o", str(out), "--", str(workloads / "shares"),
                        "0.2")
    assert result.returncode == 0, result.stderr
    with CaptureReader.open(out) as reader:
        events = reader.header["events"]
        got = samples(list(reader.iter_records()))
    assert [e["name"] for e in events] == ["cpu-clock", "task-clock"]
    ids = [set(e["ids"]) for e in events]
    assert all(e["attr"]["sample_type"] & R.PERF_SAMPLE_IDENTIFIER for e in events)
    seen = {s.identifier for s in got}
    assert seen & ids[0] and seen & ids[1]


def test_host_metadata(shares_capture: tuple[Path, Any]) -> None:
    path, _ = shares_capture
    with CaptureReader.open(path) as reader:
        header = reader.header
        kernel = reader.metadata("kernel")[0]
        vdso = reader.metadata("vdso")[0]
        kallsyms = reader.metadata("kallsyms")
        kernel_symbols = [m for m in reader.metadata("symbols") if m["kind"] == "kernel"]
    assert header["arch"] == os.uname().machine and header["kernel_release"] == os.uname().release
    assert header["target"]["command"][-1] == "0.6"
    assert vdso["image"][:4] == b"\x7fELF"
    assert kernel["release"] == os.uname().release
    if Path("/sys/kernel/notes").exists():
        assert kernel["build_id"]
    if kallsyms:  # only when kernel.kptr_restrict hid the addresses: no symbols then
        assert kallsyms[0]["hidden"] and not kernel_symbols
    else:  # the symbols that the kernel samples hit, packed at the end (none is fine)
        assert len(kernel_symbols) == 1 and kernel_symbols[0]["coverage"] == "sampled"
        assert kernel_symbols[0]["path"] == "[kernel.kallsyms]" and kernel_symbols[0]["build_id"] == kernel["build_id"]


def test_kernel_symbols_of_every_sampled_kernel_address(workloads: Path, tmp_path: Path,
                                                       profiler_cmd: list[str]) -> None:
    """The recorder packs the kernel symbols that cover the kernel addresses its samples hold:
    each such address is named as the whole of this machine's /proc/kallsyms names it."""
    from profiler.symbols.kallsyms import KernelSymbols, load_kallsyms

    full = load_kallsyms("/proc/kallsyms")
    if full.all_zero or not len(full.kernel):
        pytest.skip("kernel addresses are hidden here (kernel.kptr_restrict)")
    out = tmp_path / "kernel.prof"
    result = run_record(profiler_cmd, "-g", "-F", "2000", "-o", str(out), "--", str(workloads / "syscalls"), "0.3")
    assert result.returncode == 0, result.stderr
    with CaptureReader.open(out) as reader:
        entries = [m for m in reader.metadata("symbols") if m["kind"] == "kernel"]
        if reader.header["events"][0]["attr"]["exclude_kernel"]:
            pytest.skip("kernel.perf_event_paranoid allows user space only")
        addresses = set()
        for s in samples(list(reader.iter_records())):
            if s.misc & R.PERF_RECORD_MISC_CPUMODE_MASK == R.PERF_RECORD_MISC_KERNEL:
                addresses.update(a for a in [s.ip, *(s.callchain or ())] if (1 << 63) <= a < R.PERF_CONTEXT_MAX)
    assert addresses, "the syscalls workload spends most of its time in the kernel"
    assert len(entries) == 1 and entries[0]["coverage"] == "sampled"
    packed = KernelSymbols.from_packed(entries[0]["kallsyms"])
    assert 0 < entries[0]["count"] <= len(addresses)
    assert {a: packed.lookup(a) for a in addresses} == {a: full.lookup(a) for a in addresses}
    assert any(packed.lookup(a) is not None for a in addresses)


# --- losing, stopping, crashing ----------------------------------------------------------------


def test_a_capture_to_standard_output_leaves_the_commands_output_out_of_it(tmp_path: Path,
                                                                           profiler_cmd: list[str]) -> None:
    # -o /proc/self/fd/1 (what /dev/stdout links to) redirected to a file: the file is written
    # through the link, not renamed over it, and the command's own output goes to standard
    # error, as perf sends a workload's when perf.data goes to stdout
    out = tmp_path / "piped.prof"
    with open(out, "wb") as stream:
        result = subprocess.run([*profiler_cmd, "record", "-o", "/proc/self/fd/1", "--", "sh", "-c",
                                 "echo said-by-the-command; i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"],
                                stdout=stream, stderr=subprocess.PIPE, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "said-by-the-command" in result.stderr
    assert not out.with_name("piped.prof.old").exists()
    with CaptureReader.open(out) as reader:
        assert reader.clean_end
        assert samples(list(reader.iter_records()))


def test_dash_streams_the_capture_to_a_report_reading_standard_input(tmp_path: Path, profiler_cmd: list[str]) -> None:
    # perf record -o - | perf report -i -: the same pipeline, the command's output kept out of it
    script = "echo said-by-the-command; i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"
    rec = subprocess.Popen([*profiler_cmd, "record", "-o", "-", "--", "sh", "-c", script],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    report = subprocess.run([*profiler_cmd, "report", "--sort", "comm", "-i", "-"], stdin=rec.stdout,
                            capture_output=True, text=True, timeout=60)
    assert rec.stdout is not None
    rec.stdout.close()
    _, rec_err = rec.communicate(timeout=60)
    assert rec.returncode == 0, rec_err
    assert b"said-by-the-command" in rec_err and b"wrote" in rec_err and b"standard output" in rec_err
    assert report.returncode == 0, report.stderr
    assert re.search(r"^\s+100\.00%\s+\d+\s+\d+\s+sh\s*$", report.stdout, re.M), report.stdout
    assert os.listdir(tmp_path) == []  # no file named '-'


def test_a_program_whose_name_is_not_utf8_is_recorded(workloads: Path, tmp_path: Path, profiler_cmd: list[str]) -> None:
    # its path reaches the header (cmdline, target) and the build-id table as surrogateescape
    # text, which msgpack refused: the recording failed with a traceback before the command ran
    program = os.fsencode(tmp_path) + b"/sh\xffres"
    shutil.copy(workloads / "shares", os.fsdecode(program))
    out = tmp_path / "named.prof"
    result = run_record(profiler_cmd, "-o", str(out), "--", os.fsdecode(program), "0.2")
    assert result.returncode == 0, result.stderr
    with CaptureReader.open(out) as reader:
        assert reader.header["cmdline"][-2].endswith("/sh\ufffdres")
        recs = list(reader.iter_records())
    assert any(isinstance(r, R.Mmap2) and os.fsencode(r.filename) == program for r in recs)  # the bytes, in raw frames
    assert len(samples(recs)) > 100


def test_a_capture_into_a_fifo_keeps_the_fifo(tmp_path: Path, profiler_cmd: list[str]) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    result = run_record(profiler_cmd, "-o", str(fifo), "--", "sh", "-c",
                        "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
    data, _ = reader.communicate(timeout=60)
    assert result.returncode == 0, result.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and sorted(os.listdir(tmp_path)) == ["fifo"]
    copy = tmp_path / "copy.prof"
    copy.write_bytes(data)
    with CaptureReader.open(copy) as capture:
        assert capture.clean_end
        assert samples(list(capture.iter_records()))


def _running_child(pid: int, name: str, timeout: float = 30) -> int:
    """The pid of ``pid``'s child once it runs ``name`` (after exec), waiting up to ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            children = []
        for child in children:
            try:
                if Path(f"/proc/{child}/comm").read_text().strip() == name:
                    return int(child)
            except OSError:
                continue
        time.sleep(0.01)
    raise AssertionError(f"{name} did not start under {pid}")


def test_tiny_buffer_reports_lost_while_the_drain_is_stalled(workloads: Path, tmp_path: Path,
                                                             profiler_cmd: list[str]) -> None:
    # The drain loop is stopped (SIGSTOP) while the command runs, so a one-page buffer at
    # 20 kHz must overflow whatever the machine's load: a drain loop fast enough to keep up
    # on its own (nice -5 when privileged) cannot hide the kernel's LOST records.
    out = tmp_path / "lost.prof"
    proc = subprocess.Popen([*profiler_cmd, "record", "-m", "1", "-F", "20000", "-g", "-o", str(out), "--",
                             str(workloads / "shares"), "1.0", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _running_child(proc.pid, "shares")
        time.sleep(0.1)
        proc.send_signal(signal.SIGSTOP)
        time.sleep(0.4)
        proc.send_signal(signal.SIGCONT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    recs = records(out)
    lost = sum(r.lost for r in recs if isinstance(r, R.Lost))
    assert lost > 0
    assert f"{lost} lost" in stderr
    assert samples(recs)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_cleanly_and_reaches_the_command(sig: int, workloads: Path, tmp_path: Path,
                                                      profiler_cmd: list[str]) -> None:
    out = tmp_path / "sig.prof"
    proc = subprocess.Popen([*profiler_cmd, "record", "-o", str(out), "--", str(workloads / "sigcatch")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    time.sleep(0.3)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == -sig, stderr  # ends by the signal once written, as perf does
    assert f"got signal {int(sig)}" in stdout  # which reached the command
    assert "Traceback" not in stderr
    with CaptureReader.open(out) as reader:
        assert reader.clean_end
        assert samples(list(reader.iter_records()))


def test_sigkill_leaves_a_readable_capture(workloads: Path, tmp_path: Path, profiler_cmd: list[str]) -> None:
    out = tmp_path / "killed.prof"
    proc = subprocess.Popen([*profiler_cmd, "record", "-F", "10000", "-o", str(out), "--", str(workloads / "shares"),
                             "20"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (not out.exists() or out.stat().st_size < 6_000_000):
        time.sleep(0.1)
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    proc.kill()
    proc.wait()
    for child in children:
        os.kill(int(child), signal.SIGKILL)
    with CaptureReader.open(out) as reader:
        got = samples(list(reader.iter_records()))
        assert not reader.clean_end
        assert reader.warnings
    assert len(got) > 100


@contextmanager
def small_tmpfs(tmp_path: Path, size: str) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / f"small-{size}"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)]).returncode:
        pytest.skip("cannot mount tmpfs")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def shares_then_exit(workloads: Path, seconds: str, code: int, marker: Path) -> list[str]:
    """A command that runs shares, leaves a marker file and exits with ``code``."""
    return ["sh", "-c", f'{workloads / "shares"} {seconds}; echo ran > "{marker}"; exit {code}']


def test_full_disk_keeps_the_capture_and_the_command(workloads: Path, tmp_path: Path, profiler_cmd: list[str]) -> None:
    """The disk fills up while the command runs: it is left to finish and its status is ours."""
    marker = tmp_path / "ran"
    with small_tmpfs(tmp_path, "4m") as mnt:  # 20 kHz for 1.5 s on 2 CPUs writes about 7 MB uncompressed
        out = mnt / "full.prof"
        result = run_record(profiler_cmd, "-F", "20000", "-g", "--no-compress", "-o", str(out), "--",
                            *shares_then_exit(workloads, "1.5", 5, marker))
        assert result.returncode == 5, result.stderr
        assert "disk is full" in result.stderr and "Traceback" not in result.stderr
        assert "rounds 135" in result.stdout and marker.exists(), "the command ran to its end"
        with CaptureReader.open(out) as reader:
            assert samples(list(reader.iter_records()))


def test_disk_full_before_the_command_starts(workloads: Path, tmp_path: Path, profiler_cmd: list[str]) -> None:
    """4 KiB cannot hold the header and host facts (about 5 KiB: the vdso image is 3.5 KiB of
    it): one sentence, exit 1, the command never runs, no hang."""
    marker = tmp_path / "ran"
    with small_tmpfs(tmp_path, "4k") as mnt:
        result = run_record(profiler_cmd, "-o", str(mnt / "x.prof"), "--",
                            *shares_then_exit(workloads, "0.1", 0, marker), timeout=30)
        assert result.returncode == 1
        assert one_sentence_error(result).startswith("profiler: the disk is full")
    assert not marker.exists()


def fsize_limit(limit: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.parametrize(("limit", "code"), [(4 << 10, 1), (96 << 10, 6)], ids=["before-start", "while-running"])
def test_file_size_limit(workloads: Path, tmp_path: Path, profiler_cmd: list[str], limit: int, code: int) -> None:
    """RLIMIT_FSIZE (no root needed) takes the same paths as a full disk; here with compressed
    frames (20 kHz for 1 s on 2 CPUs writes about 300 KB of them)."""
    marker = tmp_path / "ran"
    out = tmp_path / "limited.prof"
    result = run_record(profiler_cmd, "-F", "20000", "-g", "-o", str(out), "--",
                        *shares_then_exit(workloads, "1.0", 6, marker), timeout=60, preexec_fn=fsize_limit(limit))
    assert result.returncode == code, result.stderr
    assert "file size limit" in result.stderr and "Traceback" not in result.stderr
    assert marker.exists() == (code == 6)


def test_failure_after_the_command_started_terminates_it(workloads: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Any other failure once the command runs: the command is terminated and reaped."""
    from profiler.errors import ProfilerError
    from profiler.record.options import RecordOptions
    from profiler.record.recorder import Recorder

    def broken(self: Recorder, *args: Any) -> None:
        raise ProfilerError("injected failure.")

    monkeypatch.setattr(Recorder, "_synthesize", broken)
    recorder = Recorder(RecordOptions(command=("sleep", "60"), output=str(tmp_path / "x.prof"), quiet=True))
    with pytest.raises(ProfilerError, match="injected"):
        recorder.run()
    assert recorder.child is not None and recorder.child.status is not None
    assert os.WIFSIGNALED(recorder.child.status) and os.WTERMSIG(recorder.child.status) == signal.SIGTERM


def test_failure_before_the_command_started_never_runs_it(workloads: Path, tmp_path: Path,
                                                          profiler_cmd: list[str]) -> None:
    marker = tmp_path / "ran"
    result = run_record(profiler_cmd, "-o", str(tmp_path / "no" / "such" / "dir.prof"), "--",
                        *shares_then_exit(workloads, "0.1", 0, marker), timeout=30)
    assert one_sentence_error(result).startswith("profiler: cannot write the capture")
    assert not marker.exists()


# --- bad input ------------------------------------------------------------------------------------


def one_sentence_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("profiler: ")
    return lines[0]


@pytest.mark.parametrize(
    ("args", "expected", "code"),
    [
        (["-e", "cylces", "--", "true"], "did you mean 'cycles'", 1),
        (["-p", "999999999"], "does not exist", 1),
        (["-F", "100", "-c", "100", "--", "true"], "cannot be used together", 2),
        (["-a", "-p", "1"], "cannot be combined", 2),
        (["--call-graph", "dwarf", "--no-compress", "--", "true"], "always compressed", 2),
        (["--", "no-such-command-here"], "command not found", 127),
        (["-o", "/nonexistent-dir/x.prof", "--", "true"], "cannot write the capture", 1),
    ],
)
def test_bad_input(args: list[str], expected: str, code: int, profiler_cmd: list[str], tmp_path: Path) -> None:
    extra = [] if "-o" in args else ["-o", str(tmp_path / "x.prof")]
    result = run_record(profiler_cmd, *extra, *args)
    assert expected in one_sentence_error(result)
    assert result.returncode == code


def test_event_the_machine_lacks(profiler_cmd: list[str], tmp_path: Path) -> None:
    from profiler.record.events import HARDWARE_EVENTS, EventSpec, probe

    if probe(EventSpec("cycles", 0, HARDWARE_EVENTS["cycles"])):
        pytest.skip("this machine has a hardware PMU")
    result = run_record(profiler_cmd, "-e", "cycles", "-o", str(tmp_path / "x.prof"), "--", "true")
    assert "does not support the event 'cycles'" in one_sentence_error(result)


def test_default_event_falls_back_with_a_notice(profiler_cmd: list[str], tmp_path: Path) -> None:
    from profiler.record.events import HARDWARE_EVENTS, EventSpec, probe

    result = run_record(profiler_cmd, "-o", str(tmp_path / "x.prof"), "--", "true")
    assert result.returncode == 0
    with CaptureReader.open(tmp_path / "x.prof") as reader:
        name = reader.header["events"][0]["name"]
    if probe(EventSpec("cycles", 0, HARDWARE_EVENTS["cycles"])):
        assert name == "cycles"
    else:
        assert name == "cpu-clock"
        assert sum("cpu-clock" in line for line in result.stderr.splitlines()) == 1


def as_nobody(profiler_cmd: list[str]) -> list[str]:
    """The CLI run as user nobody (setpriv from util-linux)."""
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *profiler_cmd]


def test_foreign_process_and_no_permission(profiler_cmd: list[str], spinner: subprocess.Popen[str]) -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the recorder as another user")
    nobody = as_nobody(profiler_cmd)
    foreign = run_record(nobody, "-o", "/tmp/never.prof", "-p", str(spinner.pid), cwd="/")
    assert "belongs to another user" in one_sentence_error(foreign)
    paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    if paranoid <= 0:
        pytest.skip("perf_event_paranoid allows system-wide recording to everyone")
    denied = run_record(nobody, "-o", "/tmp/never.prof", "-a", "--duration", "0.1", cwd="/")
    assert "perf_event_paranoid" in one_sentence_error(denied)


def test_list_shows_supported_events(profiler_cmd: list[str]) -> None:
    result = subprocess.run([*profiler_cmd, "list"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    names = {line.split()[0] for line in result.stdout.splitlines() if line.strip()}
    assert {"cpu-clock", "task-clock", "page-faults"} <= names
    from profiler.record.events import HARDWARE_EVENTS, EventSpec, probe

    assert ("cycles" in names) == probe(EventSpec("cycles", 0, HARDWARE_EVENTS["cycles"]))


