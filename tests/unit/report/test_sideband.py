"""``script --show-namespace-events``: perf's text of a NAMESPACES record, placed among the
samples by time, the comm of its task from the records before it."""

from __future__ import annotations

from tests.support.report_capture import comm, fork, sid

from profiler.format import records as R
from profiler.format.decode.columns import OtherRecord
from profiler.report.sideband import Pending, namespace_events, namespaces_text

LINKS = ((4, 0xEFFFFFF9), (4, 0xEFFFFFFE), (4, 0xEFFFFFFF), (4, 0xEFFFFFFC), (4, 0xEFFFFFFD), (4, 0xEFFFFFF8),
         (4, 0xF0000151))


def test_the_text_is_perf_s() -> None:
    text = namespaces_text(R.Namespaces(2990, 2990, LINKS))
    assert text == ("PERF_RECORD_NAMESPACES 2990/2990 - nr_namespaces: 7\n"
                    "\t\t[0/net: 4/0xeffffff9, 1/uts: 4/0xeffffffe, 2/ipc: 4/0xefffffff, 3/pid: 4/0xeffffffc, \n"
                    "\t\t 4/user: 4/0xeffffffd, 5/mnt: 4/0xeffffff8, 6/cgroup: 4/0xf0000151]\n")
    short = namespaces_text(R.Namespaces(1, 1, LINKS[:2]))
    assert short.endswith("[0/net: 4/0xeffffff9, 1/uts: 4/0xeffffffe]\n")
    longer = namespaces_text(R.Namespaces(1, 1, LINKS + ((0, 0),)))
    assert longer.endswith("6/cgroup: 4/0xf0000151, 7/UNKNOWN: 0/0x0]\n")
    assert namespaces_text(R.Namespaces(1, 1, ())).endswith("nr_namespaces: 0\n\t\t[]\n")


def test_records_are_headed_by_their_task_s_comm_and_handed_out_by_time() -> None:
    others = [OtherRecord(t, q, 0, rec) for q, (t, rec) in enumerate([
        (1, comm(10, 10, "sh", 1)),
        (5_000_000_000, fork(11, 10, 11, 10, 5_000_000_000)),
        (5_000_000_000, R.Namespaces(11, 11, LINKS, sample_id=sid(10, 10, 5_000_000_000))),
        (7_000_000_000, R.Namespaces(12, 12, LINKS, sample_id=sid(12, 12, 7_000_000_000))),
    ])]
    items = namespace_events(others)
    assert [(t, q) for t, q, _ in items] == [(5_000_000_000, 2), (7_000_000_000, 3)]
    assert items[0][2].startswith("sh    10/10    [000]     5.000000: PERF_RECORD_NAMESPACES 11/11 - ")
    assert items[1][2].startswith(":12    12/12    [000]     7.000000: ")  # a task never named: perf's :TID
    pending = Pending(items)
    assert [q for _, q, _ in pending.upto((5_000_000_000, 10))] == [2]
    assert [q for _, q, _ in pending.upto((6_000_000_000, 0))] == []
    assert [q for _, q, _ in pending.rest()] == [3]
