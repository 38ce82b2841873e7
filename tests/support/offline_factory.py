"""Synthetic captures that sample real fixture ELF files (no perf events needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.capture_factory import make_test_header

from profiler.format import records as R

from profiler.format.encode import encode
from profiler.format.container.writer import CaptureWriter
from profiler.symbols.elf import ElfFile

BASE = 0x5555_0000_0000
KERNEL_TEXT = 0xFFFF_FFFF_8100_0000
KALLSYMS = (
    f"{KERNEL_TEXT:016x} T _stext\n"
    f"{KERNEL_TEXT + 0x100:016x} T k_alpha\n"
    f"{KERNEL_TEXT + 0x200:016x} t k_beta\n"
    f"{KERNEL_TEXT + 0x300:016x} T k_gamma\n"
    f"{KERNEL_TEXT + 0x10000:016x} t m_delta\t[mymod]\n"
    f"{KERNEL_TEXT + 0x10100:016x} t m_eps\t[mymod]\n"
)
KERNEL_BUILD_ID = "cd" * 20


def runtime_ip(elf: ElfFile, name: str, delta: int = 4) -> int:
    """The address of ``name + delta`` when the whole file is mapped at BASE with pgoff 0."""
    table = elf.symbol_table()
    for i in range(len(table)):
        if table.name(i) == name:
            vaddr = int(table.starts[i]) + delta
            for seg in elf.load_segments:
                if seg.p_vaddr <= vaddr < seg.p_vaddr + seg.p_filesz:
                    return BASE + vaddr - seg.p_vaddr + seg.p_offset
    raise KeyError(name)


def write_capture(path: Path, binary: Path, stacks: list[list[str]], *, byte_order: str = "little",
                  kernel: bool = True, cmdline: list[str] | None = None) -> dict[str, Any]:
    """A capture of one process running ``binary``: one sample per stack (leaf first names),
    plus (``kernel``) a kallsyms snapshot and samples with kernel frames."""
    elf = ElfFile(binary)
    extra: dict[str, Any] = {"byte_order": byte_order}
    if byte_order == "big":
        extra["arch"] = "s390x"
    if cmdline is not None:
        extra["cmdline"] = cmdline
        extra["target"] = {"command": cmdline, "pids": [], "tids": [], "system_wide": False, "cpus": None}
    header = make_test_header(**extra)
    layout = R.SampleLayout.from_attr(header["events"][0]["attr"], byte_order)
    sid = R.SampleId
    size = (binary.stat().st_size + 0xFFF) & ~0xFFF
    mmap = R.Mmap2(100, 100, BASE, size, 0, prot=5, flags=2, filename=str(binary),
                   misc=R.PERF_RECORD_MISC_USER | R.PERF_RECORD_MISC_MMAP_BUILD_ID,
                   sample_id=sid(pid=100, tid=100, time=1, cpu=0, res=0))
    mmap.build_id = bytes.fromhex(elf.build_id or "")
    kmap = R.Mmap(-1 & 0xFFFFFFFF, 0, KERNEL_TEXT, 0x100000, KERNEL_TEXT, filename="[kernel.kallsyms]_text",
                  misc=R.PERF_RECORD_MISC_KERNEL, sample_id=sid(pid=-1 & 0xFFFFFFFF, tid=0, time=0, cpu=0, res=0))
    synth = [R.Comm(100, 100, "demo", exec=True, sample_id=sid(pid=100, tid=100, time=0, cpu=0, res=0)), kmap, mmap]
    samples: list[R.Record] = []
    t = 10
    for stack in stacks:
        ips = [runtime_ip(elf, name) for name in stack]
        chain: tuple[int, ...] = (R.PERF_CONTEXT_USER, *ips)
        misc = R.PERF_RECORD_MISC_USER
        if kernel and len(samples) % 2:
            chain = (R.PERF_CONTEXT_KERNEL, KERNEL_TEXT + 0x208, KERNEL_TEXT + 0x10104, *chain)
            misc = R.PERF_RECORD_MISC_KERNEL
        t += 10
        samples.append(R.Sample(ip=chain[1], pid=100, tid=100, time=t, cpu=0, res=0, period=1000,
                                callchain=chain, misc=misc))
    writer = CaptureWriter.create(path, header)
    writer.write_synth(b"".join(encode(r, layout) for r in synth))
    if kernel:
        writer.write_meta("kernel", {"build_id": KERNEL_BUILD_ID, "release": "6.0.0-test"})
        writer.write_meta("kallsyms", {"text": KALLSYMS, "kptr_restrict": 0, "hidden": False})
    writer.write_raw(0, b"".join(encode(r, layout) for r in samples))
    writer.write_meta("buildids", {"entries": [{"path": str(binary), "build_id": elf.build_id, "source": "mmap2"}]})
    writer.close({"samples": len(samples)})
    return header
