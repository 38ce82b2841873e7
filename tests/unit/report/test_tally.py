"""The folded report pipeline (profiler.report.tally) gives exactly the report of the whole-capture
decode: on random captures cut into many small chunks (execs, forks, mmaps at the same time as
samples, two CPUs, two events, threads never named), in this process and in worker processes,
and on the recorded fixture captures."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from tests.support.capture_factory import cpu_clock_attr, make_test_header
from tests.support.report_capture import KFUNCS, comm, fork, kaddr, kallsyms_text, mmap2
from tests.support.paths import CAPTURES

from profiler.cli import main
from profiler.format import records as R
from profiler.format.encode import encode
from profiler.format.container.layout import VERSION_FRAME_CPU, VERSION_PLAIN
from profiler.format.container.writer import CaptureWriter
from profiler.report import parallel, tally

FIXTURES = CAPTURES


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))


def report(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, mode: str, *argv: str) -> str:
    """The report's output under ``mode``: whole (no folding), or folded by 1 or 2 processes."""
    monkeypatch.setenv("PROFILER_TALLY", "0" if mode == "whole" else "1")
    monkeypatch.setenv("PROFILER_JOBS", "2" if mode == "jobs2" else "1")
    # jobs1 folds with the compiled kernel when it is built; jobs2 with numpy in worker
    # processes (the kernel needs none): both must give the whole decode's report
    monkeypatch.setenv("PROFILER_NO_NATIVE", "1" if mode == "jobs2" else "0")
    code = 0
    try:
        main(["report", *argv])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return f"exit {code}\n{out}\n{err}"


def random_capture(path: Path, seed: int, frame_cpu: bool = False, version: tuple[int, int] | None = None) -> Path:
    """Two events on two CPUs in raw frames of a few records each; processes that fork, exec
    and map code while being sampled; records sharing times with samples. ``frame_cpu``: the
    same records without PERF_SAMPLE_CPU, in a format 3.0 capture (their frames name the CPU)."""
    rng = random.Random(seed)
    sample_type = cpu_clock_attr()["sample_type"] | R.PERF_SAMPLE_IDENTIFIER
    if frame_cpu:
        sample_type &= ~R.PERF_SAMPLE_CPU
    attr = cpu_clock_attr(sample_type)
    attr2 = dict(attr, config=1)
    header = make_test_header([{"name": "cpu-clock", "attr": attr, "ids": [7]},
                               {"name": "task-clock", "attr": attr2, "ids": [8]}])
    layout = R.SampleLayout.from_attr(attr)
    writer = CaptureWriter.create(path, header, version or (VERSION_FRAME_CPU if frame_cpu else VERSION_PLAIN))
    writer.write_meta("kallsyms", {"text": kallsyms_text(), "kptr_restrict": 0, "hidden": False})
    pids = [100, 200]
    t = 1000
    per_cpu: dict[int, list[R.Record]] = {0: [], 1: []}
    synth = [comm(100, 100, "first", 1), comm(200, 200, "second", 1),
             mmap2(100, 0x400000, 0x10000, 0, "/bin/a", 2), mmap2(200, 0x400000, 0x10000, 0, "/bin/b", 2)]
    writer.write_synth(b"".join(encode(r, layout) for r in synth))
    for i in range(600):
        if rng.random() < 0.5:
            t += rng.randint(1, 3)  # else: the same time as the record before
        cpu = rng.randint(0, 1)
        pid = rng.choice(pids)
        tid = pid + rng.randint(0, 2)  # threads pid+1, pid+2 are never named
        roll = rng.random()
        rec: R.Record
        if roll < 0.03:
            rec = comm(pid, pid, rng.choice(["x", "y", "z"]), t, exec=True)
        elif roll < 0.06:
            rec = mmap2(pid, 0x400000 + 0x1000 * rng.randint(0, 3), 0x1000, 0, rng.choice(["/bin/c", "/bin/d"]), t)
        elif roll < 0.07:
            child = 300 + i
            rec = fork(child, pid, child, pid, t)
            pids.append(child)
        else:
            if rng.random() < 0.5:
                chain = (R.PERF_CONTEXT_KERNEL, *(kaddr(rng.choice(KFUNCS)) for _ in range(rng.randint(1, 3))))
                misc = R.PERF_RECORD_MISC_KERNEL
            else:
                chain = (R.PERF_CONTEXT_USER, *(0x400000 + 0x10 * rng.randint(0, 40) for _ in range(rng.randint(1, 4))))
                misc = R.PERF_RECORD_MISC_USER
            rec = R.Sample(ip=chain[1], pid=pid, tid=tid, time=t, cpu=cpu, res=0, period=rng.randint(1, 9) * 1000,
                           callchain=chain, misc=misc, identifier=rng.choice([7, 8]))
        per_cpu[cpu].append(rec)
        if len(per_cpu[cpu]) >= rng.randint(3, 12):
            writer.write_raw(cpu, b"".join(encode(r, layout) for r in per_cpu[cpu]))
            per_cpu[cpu] = []
            if rng.random() < 0.3:
                writer.write_round()
    for cpu, recs in per_cpu.items():
        if recs:
            writer.write_raw(cpu, b"".join(encode(r, layout) for r in recs))
    writer.close({})
    return path


OPTIONS = [
    (),
    ("--no-children", "-g", "none"),
    ("--sort", "comm,pid,tid,cpu,dso,sym", "-g", "none"),
    ("--event", "task-clock", "--sort", "comm,sym", "-g", "caller"),
    ("--format", "folded"),
    ("--format", "json"),
    ("--comm", "x,second", "--percentage", "relative", "-g", "none"),
    ("--tid", "101,200", "--cpu", "1", "-g", "none"),
    ("--time", "0.000001,0.0000015", "-g", "none"),
]


@pytest.mark.slow  # make check leaves it out; make test runs it
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_folding_in_small_chunks_gives_the_whole_decodes_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    path = str(random_capture(tmp_path / "r.prof", seed))
    monkeypatch.setattr(tally, "TALLY_CHUNK_BYTES", 512)  # a chunk every frame or two
    for argv in OPTIONS:
        whole = report(capsys, monkeypatch, "whole", "-i", path, *argv)
        assert "exit 0" in whole.splitlines()[0] or "--time" in argv, whole
        for mode in ("jobs1", "jobs2"):
            assert report(capsys, monkeypatch, mode, "-i", path, *argv) == whole, (mode, argv)


@pytest.mark.slow  # make check leaves it out; make test runs it
@pytest.mark.parametrize("seed", [1, 2])
def test_samples_without_cpu_take_their_frames_cpu_in_every_report_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """A format 3.0 capture (samples without PERF_SAMPLE_CPU, the CPU in their frame) reports
    exactly as the same records with the CPU in every sample: --sort cpu, --cpu, script's [cpu],
    whole decode and folded in one or two processes."""
    (tmp_path / "field").mkdir()
    (tmp_path / "frame").mkdir()
    with_field = str(random_capture(tmp_path / "field" / "r.prof", seed))
    from_frame = str(random_capture(tmp_path / "frame" / "r.prof", seed, frame_cpu=True))
    monkeypatch.setattr(tally, "TALLY_CHUNK_BYTES", 512)
    for argv in [("--sort", "cpu", "-g", "none"), ("--sort", "comm,pid,tid,cpu,dso,sym", "-g", "none"),
                 ("--tid", "101,200", "--cpu", "1", "-g", "none"), ("--cpu", "0", "--format", "json")]:
        want = report(capsys, monkeypatch, "whole", "-i", with_field, *argv).replace(with_field, "R")
        assert "exit 0" in want.splitlines()[0] and ("cpu" not in argv[1] or "001" in want), want
        for mode in ("whole", "jobs1", "jobs2"):
            got = report(capsys, monkeypatch, mode, "-i", from_frame, *argv).replace(from_frame, "R")
            assert got == want, (mode, argv)
    for argv in SCRIPT_OPTIONS:
        for whole in (True, False):  # warnings differ between the two: compare each with its own
            want_script = script(capsys, monkeypatch, whole, "-i", with_field, *argv)
            assert script(capsys, monkeypatch, whole, "-i", from_frame, *argv) == want_script, (whole, argv)


def test_samples_that_name_no_cpu_get_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Samples without PERF_SAMPLE_CPU in a capture older than 3.0 (as imported from a perf.data
    of a command): no made-up CPU. --sort cpu shows -001 as perf does, script shows no [cpu],
    and --cpu is refused with one sentence, in every path."""
    path = str(random_capture(tmp_path / "r.prof", 1, frame_cpu=True, version=VERSION_PLAIN))
    monkeypatch.setattr(tally, "TALLY_CHUNK_BYTES", 512)
    for mode in ("whole", "jobs1", "jobs2"):
        out = report(capsys, monkeypatch, mode, "-i", path, "--sort", "cpu", "-g", "none")
        rows = [line.split()[-1] for line in out.splitlines()[1:] if line.strip() and line[0] not in "#p"]
        assert rows == ["-001", "-001"], out  # one table per event
        out = report(capsys, monkeypatch, mode, "-i", path, "--cpu", "1", "-g", "none")
        assert not out.startswith("exit 0") and "samples carry no CPU" in out and "Traceback" not in out, out
    for whole in (True, False):
        code, out, _ = script(capsys, monkeypatch, whole, "-i", path)
        assert code == 0 and "[00" not in out and "-001" not in out
        code, out, err = script(capsys, monkeypatch, whole, "-i", path, "--cpu", "0")
        assert code != 0 and any("samples carry no CPU" in line for line in err), err


def test_folding_splits_a_random_capture_into_many_chunks(tmp_path: Path) -> None:
    from profiler.format.decode.decoder import ChunkDecoder
    from profiler.format.container.reader import CaptureReader

    reader = CaptureReader.open(random_capture(tmp_path / "r.prof", 4))
    assert len(ChunkDecoder(reader, 512).plan()) > 20


@pytest.mark.parametrize("name", ["small.prof", "format-3.0.prof", "format-2.0.prof", "format-1.0.prof"])
def test_recorded_fixtures_report_the_same_folded(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(FIXTURES / name)
    monkeypatch.setattr(tally, "TALLY_CHUNK_BYTES", 4096)
    for argv in [(), ("--no-children", "-g", "none", "--sort", "pid,comm,dso,sym"), ("--format", "folded"),
                 ("--sort", "cpu,sym", "-g", "none"), ("--cpu", "1", "-g", "none")]:
        whole = report(capsys, monkeypatch, "whole", "-i", path, *argv)
        for mode in ("jobs1", "jobs2"):
            assert report(capsys, monkeypatch, mode, "-i", path, *argv) == whole, (mode, argv)


def script(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, whole: bool,
           *argv: str) -> tuple[int, str, list[str]]:
    """Exit code, output and warnings (streamed, a warning comes when its window does)."""
    monkeypatch.setenv("PROFILER_TALLY", "0" if whole else "1")
    code = 0
    try:
        main(["script", *argv])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, sorted(err.splitlines())


SCRIPT_OPTIONS = [
    (),
    ("--event", "task-clock"),
    ("-F", "comm,tid,time,event,ip,sym,dso,period"),
    ("--json",),
    ("--comm", "x,second", "--cpu", "1"),
    ("--tid", "101,200,300"),
    ("--time", "0.000001,0.0000015"),
]


@pytest.mark.slow  # make check leaves it out; make test runs it
@pytest.mark.parametrize("seed", [1, 2, 5])
def test_script_streamed_window_by_window_is_the_whole_decodes_script(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    from profiler.report import windows as windows_module

    path = str(random_capture(tmp_path / "r.prof", seed))
    monkeypatch.setattr(tally, "TALLY_CHUNK_BYTES", 512)
    monkeypatch.setattr(windows_module, "WINDOW_SAMPLES", 1)
    for argv in SCRIPT_OPTIONS:
        code, out, warned = script(capsys, monkeypatch, True, "-i", path, *argv)
        s_code, s_out, s_warned = script(capsys, monkeypatch, False, "-i", path, *argv)
        assert (s_code, s_out) == (code, out), argv
        # the whole decode warns only of the first event's symbols; streamed, of every event's
        assert set(warned) <= set(s_warned), argv


def test_script_windows_hold_part_of_the_capture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The samples come out in many windows, each in time order, all of them once."""
    from profiler.report import windows as windows_module
    from profiler.report.capture import Capture
    from profiler.report.options import LoadOptions
    from profiler.report.pipeline import stream_profiles
    from profiler.report.windows import Totals

    path = str(random_capture(tmp_path / "r.prof", 6))
    monkeypatch.setattr(tally, "TALLY_CHUNK_BYTES", 512)
    monkeypatch.setattr(windows_module, "WINDOW_SAMPLES", 1)
    capture = Capture(path)
    totals = Totals()
    windows = stream_profiles(LoadOptions(input=path), capture, [0, 1], totals)
    assert windows is not None
    sizes, last = [], (0, -1)
    for profiles in windows:
        keys = sorted((int(t), int(q)) for p in profiles for t, q in zip(p.samples.time, p.samples.seq))
        assert keys and keys[0] >= last
        last = keys[-1]
        sizes.append(len(keys))
    assert len(sizes) > 10 and max(sizes) < sum(sizes) / 5
    assert sum(sizes) == sum(totals.recorded.values())


@pytest.mark.parametrize("name", ["small.prof", "format-3.0.prof", "format-1.0.prof"])
def test_recorded_fixtures_script_the_same_streamed(name: str, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(FIXTURES / name)
    monkeypatch.setattr(tally, "TALLY_CHUNK_BYTES", 4096)
    for argv in [(), ("-F", "comm,pid,tid,cpu,time,period,event,ip,sym,dso")]:
        whole = script(capsys, monkeypatch, False, "-i", path, *argv)
        assert whole == script(capsys, monkeypatch, True, "-i", path, *argv)


def test_a_worker_that_dies_ends_the_report_with_one_sentence(tmp_path: Path) -> None:
    """A worker killed mid-report (the OOM killer, kill -9) must not leave the report waiting
    for its result forever: one sentence, a non-zero exit, well within the timeout."""
    import subprocess
    import sys

    path = random_capture(tmp_path / "r.prof", 5)
    script = (
        "import os, signal, sys, time\n"
        "from profiler.report import tally\n"
        "tally.TALLY_CHUNK_BYTES = 512\n"
        "parent, chunk = os.getpid(), tally._tally_chunk\n"
        "def dying(plan, index):\n"
        "    if os.getpid() != parent:  # the worker dies on the first chunk it takes\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    time.sleep(0.02)  # while this process leaves it some to take\n"
        "    return chunk(plan, index)\n"
        "tally._tally_chunk = dying\n"
        "from profiler.cli import main\n"
        f"main(['report', '-i', {str(path)!r}])\n"
    )
    env = {**os.environ, "PROFILER_JOBS": "2", "PROFILER_CACHE_DIR": str(tmp_path / "cache"),
           "PROFILER_NO_NATIVE": "1"}  # the workers serve the numpy fallback only
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "worker process" in lines[0] and "died" in lines[0], result.stderr


def _rows(columns: dict[str, list[int]]) -> tally.Rows:
    import numpy as np

    n = len(next(iter(columns.values())))
    cols = {k: np.asarray(columns.get(k, [0] * n), dtype=np.uint64 if k in ("ip", "period", "last_time") else np.int64)
            for k in ("event", "pid", "tid", "cpu", "comm", "gen", "misc", "chain_id", "ip", "count", "period",
                      "last_time", "last_seq")}
    return tally.Rows(**cols)


def _as_set(rows: tally.Rows) -> set[tuple[int, ...]]:
    names = [*tally.Rows.KEYS, "count", "period", "last_time", "last_seq"]
    return set(zip(*(getattr(rows, k).tolist() for k in names)))


def test_rows_fold_like_the_exact_group_by() -> None:
    rng = random.Random(7)
    n = 5000
    cols = {k: [rng.randrange(4) for _ in range(n)] for k in tally.Rows.KEYS}
    cols["ip"] = [rng.choice((0x401000, 0xFFFFFFFF81000000, 0x7F0000001234)) for _ in range(n)]
    cols["count"] = [1] * n
    cols["period"] = [rng.randrange(1, 1000) for _ in range(n)]
    cols["last_time"] = [rng.randrange(50) for _ in range(n)]  # ties: the later file position wins
    cols["last_seq"] = list(range(n))
    rows = _rows(cols)
    folded = rows.combine()
    assert _as_set(folded) == _as_set(rows._combine_exact())
    assert int(folded.count.sum()) == n and len(folded) < n


def test_rows_whose_hashes_collide_stay_apart() -> None:
    """Keys chosen so that their row hashes are equal (a crafted capture could do this): the
    fold notices and groups by the exact keys."""
    k0, k1 = (int(k) for k in tally._KEY_MULTIPLIERS[:2])
    signed = [v - (1 << 64) if v >= 1 << 63 else v for v in (k0, k1)]
    rows = _rows({"event": [signed[1], 0], "pid": [0, signed[0]], "count": [1, 1], "period": [3, 4],
                  "last_time": [1, 2], "last_seq": [0, 1]})
    h = [sum(int(getattr(rows, key)[i]) % (1 << 64) * int(m) for key, m in zip(tally.Rows.KEYS, tally._KEY_MULTIPLIERS))
         % (1 << 64) for i in range(2)]
    assert h[0] == h[1]  # the collision is real
    folded = rows.combine()
    assert len(folded) == 2 and sorted(folded.period.tolist()) == [3, 4]


def test_the_worker_pool_gives_results_in_order_and_raises_a_workers_error() -> None:
    from profiler.errors import FormatError

    import time

    parent = os.getpid()

    def square(k: int) -> tuple[int, bool]:
        time.sleep(0.01 * (k % 3))  # chunks of unequal lengths: whoever is free takes the next
        return k * k, os.getpid() != parent

    # this process and two forked workers take the tasks from one queue
    got = list(parallel.in_order(square, 30, 3))
    assert [value for value, _ in got] == [k * k for k in range(30)]
    assert any(forked for _, forked in got) and not all(forked for _, forked in got)
    import gc

    assert gc.isenabled()  # the pool's pause of the cycle collector ended with it

    def failing(k: int) -> int:
        if k == 4:
            raise FormatError(f"chunk {k} is damaged.")
        return k

    before = _children()
    with pytest.raises(FormatError, match="chunk 4 is damaged"):
        list(parallel.in_order(failing, 9, 2))
    assert _children() <= before  # every worker was waited for


def _children() -> set[str]:
    return {pid for task in Path("/proc/self/task").iterdir()
            for pid in (task / "children").read_text().split()}


def test_workers_default_to_the_idle_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROFILER_JOBS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3, 4, 5})
    for others, want in ((0, 4), (2, 4), (3, 3), (5, 1), (30, 1)):
        monkeypatch.setattr(parallel, "others_running", lambda others=others: others)
        assert parallel.worker_count(None, 100) == want
    assert parallel.worker_count(None, 2) == 1 and parallel.worker_count(3, 100) == 3
    monkeypatch.setenv("PROFILER_JOBS", "2")
    assert parallel.worker_count(None, 100) == 2


def test_other_running_threads_are_read_from_proc_loadavg() -> None:
    fields = Path("/proc/loadavg").read_text().split()
    assert 0 <= parallel.others_running() <= int(fields[3].split("/")[1])


@pytest.mark.slow  # make check leaves it out; make test runs it
def test_workers_die_with_the_report(tmp_path: Path) -> None:
    """A report killed with kill -9 (a timeout, the OOM killer) leaves no worker behind."""
    import signal
    import subprocess
    import sys
    import time

    script = (
        "import os, sys, time\n"
        "from profiler.report import parallel\n"
        "def task(k):\n"
        f"    open({str(tmp_path)!r} + f'/worker-{{os.getpid()}}', 'w').close()\n"
        "    time.sleep(60)\n"
        "list(parallel.in_order(task, 2, 2))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 30
        while len(list(tmp_path.glob("worker-*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = [int(p.name.split("-")[1]) for p in tmp_path.glob("worker-*")]
        assert len(pids) == 2
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)


@pytest.mark.parametrize("mode", ["whole", "jobs1", "jobs2"])
def test_periods_adding_up_past_64_bits_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """Damaged PERIOD fields whose sum passes 2^64 would make every 64-bit sum wrap around: the
    report refuses in one sentence, whether one decode sees them all or no chunk alone does."""
    attr = cpu_clock_attr()
    layout = R.SampleLayout.from_attr(attr)
    writer = CaptureWriter.create(tmp_path / "wrap.prof", make_test_header([{"name": "cpu-clock", "attr": attr,
                                                                            "ids": [7]}]))
    writer.write_synth(encode(comm(100, 100, "demo", 1), layout))
    for i in range(40):  # 40 * 2^60 = 2.5 * 2^64; a 512-byte chunk holds a few samples (< 2^64)
        sample = R.Sample(ip=0x400100, pid=100, tid=100, time=1_000 + i, cpu=0, res=0, period=1 << 60,
                          callchain=(R.PERF_CONTEXT_USER, 0x400100), misc=R.PERF_RECORD_MISC_USER)
        writer.write_raw(0, encode(sample, layout))
    writer.close()
    monkeypatch.setattr(tally, "TALLY_CHUNK_BYTES", 512)
    out = report(capsys, monkeypatch, mode, "-i", str(tmp_path / "wrap.prof"))
    assert out.startswith("exit 1\n"), out
    assert out.rstrip().endswith("the samples' periods add up to 2^64 or more: the capture's PERIOD fields "
                                 "are damaged.") and "Traceback" not in out
    code = 0
    try:  # the records as recorded are still there to see
        main(["dump", "-i", str(tmp_path / "wrap.prof")])
    except SystemExit as exc:
        code = int(exc.code or 0)
    assert code == 0 and capsys.readouterr().out.count(f"period={1 << 60:#x} ") == 40


def test_two_at_a_time_gives_results_in_order_and_raises_in_order() -> None:
    """The stream's chunks, two at a time in threads: the odd ones in a helper thread, at most
    one chunk ahead; results and an exception (of either thread) come in chunk order, and the
    helper stops when the consumer does."""
    import threading

    from profiler.errors import FormatError

    seen: list[tuple[int, str]] = []

    def task(k: int) -> int:
        seen.append((k, threading.current_thread().name))
        return k * k

    assert list(parallel.two_at_a_time(task, 7)) == [k * k for k in range(7)]
    assert {name for k, name in seen if k % 2} == {"tally-helper"}
    assert {name for k, name in seen if not k % 2} == {threading.current_thread().name}

    def failing(k: int) -> int:
        if k == 3:
            raise FormatError("chunk 3 is damaged.")
        return k

    got: list[int] = []
    with pytest.raises(FormatError, match="chunk 3"):
        for value in parallel.two_at_a_time(failing, 9):
            got.append(value)
    assert got == [0, 1, 2]
