"""Hand-built captures for reporter tests: records in, a capture file out (no privileges).

Kernel frames make symbol-exact tests possible without any ELF: the capture carries a
kallsyms snapshot naming the fake kernel functions below, so every ``[k]`` frame resolves
on any machine.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tests.support.capture_factory import cpu_clock_attr, make_test_header

from profiler.format import records as R

from profiler.format.encode import encode
from profiler.format.container.writer import CaptureWriter

KBASE = 0xFFFFFFFF81000000
KFUNCS = ("k_root", "k_mid", "k_leaf_a", "k_leaf_b", "k_recurse", "k_other")


def kaddr(name: str, offset: int = 0x10) -> int:
    """An address inside fake kernel function ``name`` (each is 0x1000 long)."""
    return KBASE + 0x1000 * (KFUNCS.index(name) + 1) + offset


def kallsyms_text() -> str:
    lines = [f"{KBASE:016x} T _text"] + [f"{kaddr(n, 0):016x} T {n}" for n in KFUNCS]
    lines.append(f"{kaddr(KFUNCS[-1], 0) + 0x1000:016x} T k_end")
    return "\n".join(lines) + "\n"


def sid(pid: int, tid: int, time: int, cpu: int = 0) -> R.SampleId:
    return R.SampleId(pid=pid, tid=tid, time=time, cpu=cpu, res=0)


def comm(pid: int, tid: int, name: str, time: int, exec: bool = False) -> R.Comm:
    return R.Comm(pid, tid, name, exec=exec, sample_id=sid(pid, tid, time))


def mmap2(pid: int, addr: int, length: int, pgoff: int, path: str, time: int,
          build_id: bytes | None = None) -> R.Mmap2:
    return R.Mmap2(pid, pid, addr, length, pgoff, prot=5, flags=2, filename=path, build_id=build_id,
                   misc=R.PERF_RECORD_MISC_USER, sample_id=sid(pid, pid, time))


def fork(pid: int, ppid: int, tid: int, ptid: int, time: int) -> R.Fork:
    return R.Fork(pid, ppid, tid, ptid, time, sample_id=sid(pid, tid, time))


def kernel_sample(frames: Sequence[str], time: int, pid: int = 100, tid: int | None = None,
                  cpu: int = 0, period: int = 1000) -> R.Sample:
    """A kernel-mode sample whose callchain is ``frames`` (leaf first)."""
    chain = (R.PERF_CONTEXT_KERNEL, *(kaddr(f) for f in frames))
    return R.Sample(ip=kaddr(frames[0]), pid=pid, tid=pid if tid is None else tid, time=time,
                    cpu=cpu, res=0, period=period, callchain=chain, misc=R.PERF_RECORD_MISC_KERNEL)


def user_sample(ips: Sequence[int], time: int, pid: int = 100, tid: int | None = None, cpu: int = 0,
                period: int = 1000) -> R.Sample:
    chain = (R.PERF_CONTEXT_USER, *ips)
    return R.Sample(ip=ips[0], pid=pid, tid=pid if tid is None else tid, time=time, cpu=cpu,
                    res=0, period=period, callchain=chain, misc=R.PERF_RECORD_MISC_USER)


def write_capture(path: Path, records: Iterable[R.Record], *, kallsyms: str | None = None,
                  meta: dict[str, dict[str, Any]] | None = None, callchain: bool = True,
                  events: list[dict[str, Any]] | None = None, header: dict[str, Any] | None = None) -> Path:
    """Write ``records`` as one synthesized frame plus metadata; a clean trailer. ``header``:
    fields that replace the test header's (``arch``...)."""
    st = cpu_clock_attr()["sample_type"]
    if not callchain:
        st &= ~R.PERF_SAMPLE_CALLCHAIN
    head = make_test_header(events or [{"name": "cpu-clock", "attr": cpu_clock_attr(st), "ids": [7]}],
                            **(header or {}))
    layout = R.SampleLayout.from_attr(head["events"][0]["attr"])
    writer = CaptureWriter.create(path, head)
    recs = list(records)
    if not callchain:
        for r in recs:
            if isinstance(r, R.Sample):
                r.callchain = None
    writer.write_synth(b"".join(encode(r, layout) for r in recs))
    if kallsyms is not None:
        writer.write_meta("kallsyms", {"text": kallsyms, "kptr_restrict": 0, "hidden": False})
    for kind, data in (meta or {}).items():
        writer.write_meta(kind, data)
    writer.close({})
    return path
