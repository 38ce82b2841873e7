"""``profiler record`` option parsing through click's CliRunner (the recorder is replaced,
so nothing is opened), and RecordOptions validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from profiler.cli import cli
from profiler.errors import UsageError
from profiler.record import recorder
from profiler.record.options import DEFAULT_DATA_PAGES, RecordOptions, parse_mmap_pages


@pytest.fixture()
def captured(monkeypatch: pytest.MonkeyPatch) -> list[RecordOptions]:
    seen: list[RecordOptions] = []

    def fake_record(opts: RecordOptions, stderr: Any = None) -> recorder.RecordResult:
        seen.append(opts)
        return recorder.RecordResult(exit_code=0, path=opts.output, samples=0, lost=0, bytes_written=0)

    monkeypatch.setattr(recorder, "record", fake_record)
    return seen


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, ["record", *args], catch_exceptions=True)


def test_defaults(captured: list[RecordOptions]) -> None:
    result = invoke("--", "ls", "-l")
    assert result.exit_code == 0, result.output
    opts = captured[0]
    assert opts.command == ("ls", "-l")
    assert opts.output == "profile.prof"
    assert opts.freq is None and opts.period is None  # 4000 Hz is applied when building attrs
    assert opts.data_pages == DEFAULT_DATA_PAGES
    assert not opts.callgraph and opts.inherit and not opts.system_wide


def test_every_option(captured: list[RecordOptions]) -> None:
    result = invoke("-e", "cpu-clock", "-e", "task-clock,page-faults", "-F", "999", "-g",
                    "--callchain-max-stack", "32", "-C", "0-1", "-m", "16", "-o", "x.prof", "-q",
                    "--user-only", "--data-mmaps", "--no-inherit", "--duration", "1.5", "--", "true")
    assert result.exit_code == 0, result.output
    opts = captured[0]
    assert opts.events == ("cpu-clock", "task-clock,page-faults")
    assert (opts.freq, opts.callgraph, opts.callchain_max_stack) == (999, True, 32)
    assert opts.cpus == (0, 1) and opts.system_wide  # as perf: those CPUs, while the command runs
    assert (opts.data_pages, opts.output, opts.quiet) == (16, "x.prof", True)
    assert opts.user_only and opts.data_mmaps and not opts.inherit and opts.duration == 1.5


def test_targets(captured: list[RecordOptions]) -> None:
    assert invoke("-p", "12,34").exit_code == 0
    assert invoke("-t", "56").exit_code == 0
    assert invoke("-a", "--duration", "1").exit_code == 0
    assert invoke("-C", "1").exit_code == 0
    assert captured[0].pids == (12, 34)
    assert captured[1].tids == (56,)
    assert captured[2].system_wide and captured[2].cpus is None
    assert captured[3].system_wide and captured[3].cpus == (1,)  # -C alone: those CPUs, all tasks


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-F", "10", "-c", "10", "--", "true"], "cannot be used together"),
        (["-a", "-p", "1"], "cannot be combined"),
        ([], "nothing to record"),
        (["-p", "x"], "comma-separated list of numbers"),
        (["-p", "0"], "positive ids"),
        (["-C", "1-0", "--", "true"], "not a CPU list"),
        (["-m", "3", "--", "true"], "power of two"),
        (["-m", "lots", "--", "true"], "number of pages"),
        (["-F", "0", "--", "true"], "positive sampling frequency"),
        (["-c", "0", "--", "true"], "positive number"),
        (["--user-only", "--kernel-only", "--", "true"], "exclude each other"),
        (["--duration", "0", "-a"], "positive number of seconds"),
        (["-g", "--callchain-max-stack", "0", "--", "true"], "between 1 and 65535"),
    ],
)
def test_bad_options_are_one_sentence(captured: list[RecordOptions], args: list[str], message: str) -> None:
    result = invoke(*args)  # profiler.cli.main maps the UsageError to "profiler: ..." and exit 2
    assert isinstance(result.exception, UsageError), result.output
    assert message in str(result.exception)
    assert str(result.exception).count(". ") == 0 and str(result.exception).endswith(".")
    assert captured == []


def test_all_cpus_with_a_command(captured: list[RecordOptions]) -> None:
    assert invoke("-a", "--", "sleep", "1").exit_code == 0
    assert captured[0].system_wide and captured[0].command == ("sleep", "1")


def test_max_stack_names_the_kernel_limit(captured: list[RecordOptions], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    limit = tmp_path / "perf_event_max_stack"
    limit.write_text("127\n")
    monkeypatch.setattr("profiler.record.options.MAX_STACK", limit)
    result = invoke("-g", "--callchain-max-stack", "1000", "--", "true")
    assert isinstance(result.exception, UsageError)
    assert "exceeds the kernel's limit of 127 frames" in str(result.exception)
    assert invoke("-g", "--callchain-max-stack", "127", "--", "true").exit_code == 0


def test_mmap_sizes() -> None:
    assert parse_mmap_pages("8", 4096) == 8
    assert parse_mmap_pages("512K", 4096) == 128
    assert parse_mmap_pages("1M", 4096) == 256
    assert parse_mmap_pages("100k", 4096) == 32  # 25 pages rounded up to a power of two
    assert parse_mmap_pages("1k", 4096) == 1


def test_frequency_above_the_kernel_limit(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from profiler.record import options

    limit = tmp_path / "max_rate"
    limit.write_text("5000\n")
    monkeypatch.setattr(options, "MAX_SAMPLE_RATE", limit)
    with pytest.raises(UsageError, match="exceeds the kernel's limit of 5000 Hz"):
        RecordOptions(command=("true",), freq=6000).validate()
    RecordOptions(command=("true",), freq=5000).validate()


def test_record_imports_only_what_recording_needs() -> None:
    """Every recording pays for its imports in CPU time (the recorder's own CPU is a benchmark
    row): the entry point reads a usual record command line and loads the recorder and its
    zstd compressor without click, numpy, the record dataclasses (profiler.format.abi has what
    it needs), the register tables of --call-graph dwarf, dataclasses, typing, pathlib,
    shutil, re, the zstandard package's __init__ (with platform), or the capture reader."""
    import subprocess
    import sys

    code = ("import sys; import profiler.main, profiler.record.recorder; "
            "from profiler.commands import record_args; "
            "from profiler.format.container.codec import zstd_compress; "
            "assert record_args.parse(['-g', '-q', '-F', '999', '-o', 'x.prof', '--', 'true']); "
            "assert zstd_compress(bytes(4096)); "
            "print(' '.join(sys.modules))")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout.split())
    assert "profiler.record.recorder" in loaded and "profiler.format.abi" in loaded
    assert "zstandard.backend_c" in loaded
    assert not loaded & {"click", "numpy", "profiler.format.records", "profiler.format.regs", "difflib",
                         "dataclasses", "typing", "zstandard", "platform", "shutil", "pathlib", "re",
                         "tempfile", "profiler.format.container.reader", "profiler.format.container.scan"}


def test_the_recorders_zstd_backend_writes_what_the_package_reads() -> None:
    """The compressor the recorder loads without the zstandard package's __init__ writes
    frames the package reads back (in another process: this one has the package loaded)."""
    import subprocess
    import sys

    data = bytes(range(256)) * 64 + b"profiler" * 1000
    code = ("import sys; from profiler.format.container.codec import zstd_compress; "
            "out = zstd_compress(sys.stdin.buffer.read()); "
            "assert 'zstandard' not in sys.modules; sys.stdout.buffer.write(out)")
    frame = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, check=True).stdout
    import zstandard

    assert len(frame) < len(data)
    assert zstandard.ZstdDecompressor().decompress(frame) == data


@pytest.mark.parametrize("args", [
    ["--", "ls", "-l"],
    ["ls", "-l", "-g"],  # options end at the command
    ["-e", "cpu-clock", "--event", "task-clock,page-faults", "-F", "999", "-g", "--callchain-max-stack", "32",
     "-C", "0-1", "-m", "16", "-o", "x.prof", "-q", "--user-only", "--data-mmaps", "--no-inherit",
     "--duration", "1.5", "--archive", "--buildid-mmap", "--no-compress", "--", "true"],
    ["-p", "12,34", "-c", "100", "--call-graph", "dwarf,1024", "--kernel-only", "-a", "-t", "5"],
    ["-o", "-", "-o", "last.prof", "-F", " 7 ", "--", "--", "x"],  # the last value wins; values as given
    [],
    ["-e", "sched:a", "--filter", "x == 1", "-e", "b", "-e", "c", "--filter", "y == 2", "--", "true"],  # positions
])
def test_the_entry_points_reader_agrees_with_click(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    """What profiler/main.py runs without click is what click would have run."""
    from profiler.commands import record_args

    seen: list[dict[str, Any]] = []
    monkeypatch.setattr(record_args, "run", lambda **kwargs: seen.append(kwargs))
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert record_args.parse(args) == seen[0]


@pytest.mark.parametrize("args", [
    ["-h"], ["--help"], ["--freq=99", "true"], ["-F99", "true"], ["-gq", "true"], ["-F", "fast", "true"],
    ["--duration", "1s", "true"], ["--nope", "true"], ["-o"], ["-e"],
])
def test_the_entry_point_leaves_the_rest_to_click(args: list[str]) -> None:
    from profiler.commands import record_args

    assert record_args.parse(args) is None


def test_the_entry_point_maps_errors_like_click(capsys: pytest.CaptureFixture[str]) -> None:
    from profiler.main import main

    with pytest.raises(SystemExit) as exc:
        main(["record", "-a", "-p", "12"])
    assert exc.value.code == UsageError.exit_code
    assert capsys.readouterr().err == "profiler: -a (all CPUs) cannot be combined with -p or -t.\n"


@pytest.mark.parametrize("output", ["-", "/dev/null"])
def test_archive_is_refused_for_a_streamed_capture(output: str, capsys: pytest.CaptureFixture[str]) -> None:
    from profiler.main import main

    with pytest.raises(SystemExit) as exc:
        main(["record", "--archive", "-o", output, "--", "true"])
    assert exc.value.code == UsageError.exit_code
    assert "--archive packs the symbols into the capture file" in capsys.readouterr().err


def test_each_filter_goes_to_the_event_option_before_it() -> None:
    from profiler.commands.record_args import event_filters, filter_positions

    order = ["event", "filter_", "freq", "event", "event", "filter_", "filter_"]
    assert filter_positions(order) == (1, 3, 3)
    events = ("sched:sched_switch", "cpu-clock", "sched:sched_wakeup")
    assert event_filters(events, ("a == 1", "b == 2", "c == 3"), (1, 3, 3)) == ((0, "a == 1"), (2, "c == 3"))
    with pytest.raises(UsageError, match="must follow the -e"):
        event_filters(events, ("a == 1",), (0,))
