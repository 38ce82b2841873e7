"""The report pipeline (profiler/report/pipeline.py): one path from a capture to a Profile.

Its two ways of reading an event's rows give the same profile, every command ends "nothing to
show" with the same sentence, and the frame model it hands exporters describes the same
samples as the rows."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from profiler.report.capture import Capture
from profiler.report.options import Filters, LoadOptions
from profiler.report.pipeline import NoSamples, load_profile, load_stacks
from profiler.report.profile import Profile, stack_profile
from tests.support.paths import CAPTURES

CAPTURE = CAPTURES / "offline-shares.prof"


def stacks_of(profile: Profile) -> Counter[tuple[str, ...]]:
    """Samples per (comm, stack of function names, root first)."""
    out: Counter[tuple[str, ...]] = Counter()
    for k, comm, n in zip(profile.stack.tolist(), profile.comm.tolist(), profile.sample_weights().tolist()):
        names = [profile.frame(f).label() for f in reversed(profile.stack_frame_ids(k).tolist())]
        out[(profile.comm_names[comm], *names)] += n
    return out


def test_tallied_and_whole_rows_give_the_same_profile() -> None:
    options = LoadOptions(input=str(CAPTURE))
    capture = Capture(str(CAPTURE))
    tallied = load_profile(options, capture)
    whole = load_profile(options, capture, whole=True)
    assert tallied.weight is not None and whole.weight is None  # the two ways were taken
    assert len(tallied.samples) < len(whole.samples)
    assert stacks_of(tallied) == stacks_of(whole)
    assert (tallied.total_samples, tallied.total_period) == (whole.total_samples, whole.total_period)
    assert (tallied.recorded_samples, tallied.base_samples) == (whole.recorded_samples, whole.base_samples)


def test_the_frame_model_holds_the_same_samples() -> None:
    profile = load_profile(LoadOptions(input=str(CAPTURE)), whole=True)
    stacks = stack_profile(profile, locations=True, timeline=True)
    assert sum(s.samples for s in stacks.stacks) == profile.total_samples == stacks.meta.total_samples
    assert stacks.timeline is not None and len(stacks.timeline) == profile.total_samples
    per_stack = Counter(stacks.timeline.stack.tolist())
    assert all(per_stack[i] == s.samples for i, s in enumerate(stacks.stacks))
    assert all(tuple(f for loc in s.locations for f in loc.frames()) == s.frames for s in stacks.stacks)


def test_nothing_to_show_is_one_error() -> None:
    options = LoadOptions(input=str(CAPTURE), filters=Filters(pids=(999_999,)))
    with pytest.raises(NoSamples, match=r"no samples match the filters \(--pid 999999\); the capture has \d+"):
        load_stacks(options, lambda _message: None)


@pytest.mark.slow  # make check leaves it out; make test runs it
@pytest.mark.parametrize(("command", "what"), [
    (["report"], "report"), (["script"], "print"), (["flamegraph", "-o", "{out}"], "draw"),
    (["export", "-f", "folded"], "draw"), (["export", "-f", "pprof", "-o", "{out}"], "export"),
    (["export", "-f", "firefox", "-o", "{out}"], "export"), (["annotate", "main"], "annotate"),
    (["export", "-f", "otlp", "-o", "{out}"], "export"),
])
def test_every_command_says_it_the_same_way(command: list[str], what: str, tmp_path: object) -> None:
    argv = [a.format(out=f"{tmp_path}/out") for a in command]
    done = subprocess.run([sys.executable, "-m", "profiler", *argv, "-i", str(CAPTURE), "--pid", "999999"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("profiler: no samples match the filters (--pid 999999); the capture has ")
    assert last.endswith(f": nothing to {what}."), last


def test_a_stack_with_no_address_shows_its_sampled_ip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A sampled ip that reads as a context marker ((u64)-1) and a callchain of markers only
    leave a stack no address: it gets its sample's ip (``[unknown]``-like, as perf shows it), so
    every report, flat or not, and ``diff`` count the sample instead of failing (found by a
    capture fuzzing run)."""
    from tests.support.capture_factory import cpu_clock_attr, make_test_header
    from tests.support.cli import run_main
    from tests.support.report_capture import kaddr, kallsyms_text

    from profiler.format import records as R
    from profiler.format.container.layout import VERSION_PLAIN
    from profiler.format.container.writer import CaptureWriter
    from profiler.format.encode import encode

    attr = cpu_clock_attr()
    layout = R.SampleLayout.from_attr(attr)
    path = tmp_path / "odd.prof"
    writer = CaptureWriter.create(path, make_test_header([{"name": "cpu-clock", "attr": attr, "ids": [7]}]),
                                  VERSION_PLAIN)
    writer.write_meta("kallsyms", {"text": kallsyms_text(), "kptr_restrict": 0, "hidden": False})
    kernel = R.PERF_RECORD_MISC_KERNEL
    samples = [R.Sample(ip=kaddr("k_mid"), pid=1, tid=1, time=10, cpu=0, res=0, period=100, misc=kernel,
                        callchain=(R.PERF_CONTEXT_KERNEL, kaddr("k_mid"))),
               R.Sample(ip=(1 << 64) - 1, pid=1, tid=1, time=11, cpu=0, res=0, period=100, misc=kernel,
                        callchain=(R.PERF_CONTEXT_KERNEL, kaddr("k_mid"))),
               R.Sample(ip=kaddr("k_mid"), pid=1, tid=1, time=12, cpu=0, res=0, period=100, misc=kernel,
                        callchain=(R.PERF_CONTEXT_KERNEL, R.PERF_CONTEXT_USER))]
    writer.write_raw(0, b"".join(encode(s, layout) for s in samples))
    writer.close({})
    p = str(path)
    for argv in (["report", "--no-children", "-g", "none", "-i", p], ["report", "-i", p],
                 ["report", "--format", "folded", "-i", p], ["diff", "-p", p, p]):
        code, _, err = run_main(capsys, *argv)
        assert code == 0 and "Traceback" not in err, (argv, err)
    code, out, _ = run_main(capsys, "report", "--no-children", "-g", "none", "--format", "csv", "-i", str(path))
    assert sum(int(row.split(",")[1]) for row in out.splitlines()[1:] if row) == 3, out
