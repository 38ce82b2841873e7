"""--call-graph options, the DWARF attr (as perf sets it), and the recorder's compaction of
stack copies (kernel-layout records that decode to the same fields, minus the unused bytes)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from profiler.errors import UsageError
from profiler.format import records as R
from profiler.format.encode import encode
from profiler.format.compact import compact_stacks
from profiler.format.regs import X86_64
from profiler.record.events import EventSpec
from profiler.record.options import DWARF_DATA_PAGES, RecordOptions, parse_call_graph
from profiler.record.recorder import build_attr


def test_parse_call_graph() -> None:
    assert parse_call_graph("fp") is None
    assert parse_call_graph("dwarf") == 8192
    assert parse_call_graph("dwarf,4000") == 4000
    assert parse_call_graph("dwarf,4001") == 4008  # rounded up to 8, as perf does
    for bad in ("lbr", "dwarf,", "dwarf,x", "dwarf,0", "dwarf,70000", "fp,8"):
        with pytest.raises(UsageError):
            parse_call_graph(bad)


def test_dwarf_attr_matches_perfs() -> None:
    """perf evlist -v of `perf record --call-graph dwarf`: sample_type has CALLCHAIN,
    REGS_USER and STACK_USER, sample_regs_user 0xff0fff, sample_stack_user 8192,
    exclude_callchain_user 1."""
    opts = RecordOptions(command=("x",), callgraph=True, dwarf_stack_size=8192)
    attr = build_attr(EventSpec("cpu-clock", 1, 0), opts, tracking=True, several=False,
                      enable_on_exec=True, inherit=True, data_size=1 << 21)
    want = R.PERF_SAMPLE_CALLCHAIN | R.PERF_SAMPLE_REGS_USER | R.PERF_SAMPLE_STACK_USER
    assert attr.sample_type & want == want
    assert attr.sample_stack_user == 8192
    assert attr.exclude_callchain_user == 1
    import os
    if os.uname().machine == "x86_64":
        assert attr.sample_regs_user == 0xFF0FFF == X86_64.mask


def test_cli_call_graph_options(monkeypatch: pytest.MonkeyPatch) -> None:
    from profiler.commands import record as cmd

    seen: list[RecordOptions] = []

    def fake_record(opts: RecordOptions, *args: object, **kw: object) -> None:
        seen.append(opts)
        raise _Stop  # the options are all this test looks at

    monkeypatch.setattr("profiler.record.recorder.record", fake_record)
    runner = CliRunner()
    for argv in (["--call-graph", "dwarf,1024"], ["--call-graph", "fp"], ["-g"]):
        result = runner.invoke(cmd.command, [*argv, "--", "true"])
        assert isinstance(result.exception, _Stop), result.output
        if argv[-1] == "dwarf,1024":
            assert seen[-1].dwarf_stack_size == 1024 and seen[-1].callgraph
            assert seen[-1].data_pages == DWARF_DATA_PAGES
        else:
            assert seen[-1].dwarf_stack_size is None and seen[-1].callgraph
    result = runner.invoke(cmd.command, ["--call-graph", "lbr", "--", "true"])
    assert result.exit_code != 0 and not isinstance(result.exception, _Stop)


class _Stop(Exception):
    pass


LAYOUT = R.SampleLayout(
    sample_type=R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME | R.PERF_SAMPLE_CALLCHAIN
    | R.PERF_SAMPLE_REGS_USER | R.PERF_SAMPLE_STACK_USER,
    sample_id_all=True, sample_regs_user=0b111,
)


def _sample(ip: int, stack: bytes, dyn: int, regs: bool = True) -> R.Sample:
    return R.Sample(misc=R.PERF_RECORD_MISC_USER, ip=ip, pid=1, tid=1, time=ip,
                    callchain=(R.PERF_CONTEXT_KERNEL, 0xffffffff81000000),
                    regs_user_abi=2 if regs else 0, regs_user=(1, 2, 3) if regs else (),
                    stack_user=stack, stack_user_dyn_size=dyn)


def test_compaction_cuts_stacks_to_dyn_size() -> None:
    full = bytes(range(256)) * 4  # 1024 bytes reserved
    recs = [_sample(1, full, 1024), _sample(2, full, 100), _sample(3, full, 0, regs=False),
            R.Comm(pid=1, tid=1, comm="x")]
    raw = b"".join(encode(r, LAYOUT) for r in recs)
    out = compact_stacks(raw, LAYOUT)
    assert len(out) == len(raw) - (1024 - 104) - 1024
    decoded = []
    pos = 0
    while pos < len(out):
        rec = R.decode_record(out, pos, LAYOUT)
        decoded.append(rec)
        pos += rec.size if hasattr(rec, "size") and rec.size else int.from_bytes(out[pos + 6:pos + 8], "little")
    assert [type(r) for r in decoded] == [type(r) for r in recs]
    a, b, c = decoded[0], decoded[1], decoded[2]
    assert isinstance(a, R.Sample) and isinstance(b, R.Sample) and isinstance(c, R.Sample)
    assert a.stack_user == full and a.stack_user_dyn_size == 1024
    assert b.stack_user == full[:104] and b.stack_user_dyn_size == 100
    assert b.callchain == recs[1].callchain and b.regs_user == (1, 2, 3)  # type: ignore[union-attr]
    assert c.stack_user == b"" and c.stack_user_dyn_size == 0
