"""``profiler stat`` through click's CliRunner with the counters replaced by a fake that
returns fixed readings (so nothing needs perf events): option parsing, one-sentence errors,
the CSV and JSON layouts end to end, and the command's exit status."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from profiler.cli import cli
from profiler.errors import EventError, UsageError
from profiler.stat import runner
from profiler.stat.counters import Target
from profiler.stat.values import Reading

PERF_JSON_KEYS = ["counter-value", "unit", "event", "event-runtime", "pcnt-running", "metric-value", "metric-unit"]


class FakeCounters:
    """Event e on every target: value (e + 1) * 1000 (task-clock: 2 ms), half of it
    multiplexed for events named ``*:k`` so scaling shows."""

    instances: list[FakeCounters] = []

    def __init__(self, groups: Any, targets: list[Target], **kwargs: Any) -> None:
        self.events = [spec for g in groups for spec in g.members]
        self.targets = targets
        self.kwargs = kwargs
        self.opened: list[Any] = []
        self.unsupported: set[int] = set()
        self.notices: list[str] = []
        FakeCounters.instances.append(self)

    def open(self) -> None: ...
    def enable(self) -> None: ...
    def disable(self) -> None: ...
    def close(self) -> None: ...

    def read(self) -> dict[tuple[int, int], Reading]:
        out = {}
        for e, spec in enumerate(self.events):
            value = 2_000_000 if spec.name == "task-clock" else (e + 1) * 1000
            running = 500 if spec.name.endswith(":k") else 1000
            for t in range(len(self.targets)):
                out[(e, t)] = Reading(value, 1000, running)
        return out


@pytest.fixture()
def fake(monkeypatch: pytest.MonkeyPatch) -> type[FakeCounters]:
    FakeCounters.instances = []
    monkeypatch.setattr(runner, "CounterSet", FakeCounters)
    return FakeCounters


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, ["stat", *args], catch_exceptions=True)


def test_csv_end_to_end(fake: type[FakeCounters]) -> None:
    result = invoke("-x", ",", "-e", "task-clock,page-faults,cs:k", "--", "true")
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    fields = [line.split(",") for line in lines]
    assert [f[:5] for f in fields] == [["2.00", "msec", "task-clock", "1000", "100.00"],
                                      ["2000", "", "page-faults", "1000", "100.00"],
                                      ["6000", "", "cs:k", "500", "50.00"]]  # 3000 scaled by 1000/500
    assert fields[0][6] == "CPUs utilized"
    # per second of task-clock; exactly 1e6 stays K like perf (its test is "> 1e6")
    assert fields[1][5:] == ["1000.000", "K/sec"] and fields[2][5:] == ["3.000", "M/sec"]
    assert fake.instances[0].kwargs["enable_on_exec"] is True


def test_json_end_to_end(fake: type[FakeCounters]) -> None:
    result = invoke("--json", "-r", "3", "-e", "{task-clock,page-faults}", "--", "true")
    assert result.exit_code == 0, result.output
    objs = [json.loads(line) for line in result.stderr.splitlines()]
    assert [o["event"] for o in objs] == ["task-clock", "page-faults"]
    assert list(objs[1]) == PERF_JSON_KEYS[:3] + ["variance"] + PERF_JSON_KEYS[3:]
    assert objs[1]["counter-value"] == "2000.000000" and objs[1]["variance"] == 0.0
    assert len(fake.instances) == 3  # counters opened afresh for each run


def test_text_summary_title_and_exit_status(fake: type[FakeCounters]) -> None:
    result = invoke("-e", "page-faults", "--", "sh", "-c", "exit 3")
    assert result.exit_code == 3
    assert " Performance counter stats for 'sh -c exit 3':" in result.stderr
    assert "seconds time elapsed" in result.stderr and "seconds user" in result.stderr


def test_per_cpu_rows(fake: type[FakeCounters]) -> None:
    from profiler.record.cpus import online_cpus

    result = invoke("-a", "-A", "-x", ";", "-e", "cpu-clock", "--", "true")
    assert result.exit_code == 0, result.output
    rows = [line.split(";") for line in result.stderr.splitlines()]
    assert [r[0] for r in rows] == [f"CPU{c}" for c in online_cpus()]
    targets = fake.instances[0].targets
    assert {t.pid for t in targets} == {-1} and [t.cpu for t in targets] == online_cpus()


def test_output_file(fake: type[FakeCounters], tmp_path: Any) -> None:
    out = tmp_path / "counts.csv"
    result = invoke("-o", str(out), "-x", ",", "-e", "page-faults", "--", "true")
    assert result.exit_code == 0 and result.stderr == ""
    assert out.read_text().startswith("1000,,page-faults,1000,100.00,,")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "nothing to count"),
        (["-x", ",", "--json", "--", "true"], "cannot be combined"),
        (["-r", "0", "--", "true"], "positive number of runs"),
        (["-r", "2", "-a"], "repeats a command"),
        (["-r", "2", "-I", "100", "--", "true"], "-r and -I"),
        (["-I", "5", "--", "true"], "at least 10 milliseconds"),
        (["--per-thread", "--", "true"], "--per-thread needs -p or -t"),
        (["--per-thread", "-A", "-p", "1"], "cannot be combined"),
        (["-a", "-p", "1"], "cannot be combined with -p"),
        (["-p", "x"], "comma-separated list"),
        (["-C", "a-b"], "not a CPU list"),
    ],
)
def test_bad_options_are_one_sentence(fake: type[FakeCounters], args: list[str], message: str) -> None:
    result = invoke(*args)
    assert isinstance(result.exception, UsageError), result.output
    assert message in str(result.exception)
    assert str(result.exception).endswith(".") and fake.instances == []


@pytest.mark.parametrize(
    ("events", "message"),
    [("{task-clock,page-faults", "unbalanced braces"), ("{}", "empty member"), ("cs:S", "applies to a group"),
     ("{cs,{cs}}", "cannot be nested"), ("task-clok", "did you mean 'task-clock'")],
)
def test_bad_events_are_one_sentence(fake: type[FakeCounters], events: str, message: str) -> None:
    result = invoke("-e", events, "--", "true")
    assert isinstance(result.exception, EventError)
    assert message in str(result.exception)
