"""Every sample in perf script's default text layout.

One block per sample, in time order::

    shares 10255/10255 [000]   662.787089:     250000 cpu-clock: 
    	            1339 work_a+0x29 (/tmp/fx/shares)
    	            14be work+0x3e (/tmp/fx/shares)

The event line is ``comm pid/tid [cpu] seconds.micros: period event:``; each frame line is a
tab, the address right-aligned in 16 hex digits (in the DSO's own address space for user code,
absolute for the kernel), ``symbol+0xoffset`` (``[unknown]`` when unresolved) and the DSO's
path in parentheses; a blank line ends the block. stackcollapse-perf.pl,
inferno-collapse-perf and speedscope's importer read this layout.
"""

from __future__ import annotations

from typing import TextIO


from profiler.report.load import Profile


def frame_line(profile: Profile, k: int, srcline: bool = False) -> str:
    """The text line of entry ``k`` of the stack table; with ``srcline``, followed by the
    entry's ``  file.c:12`` line when DWARF has one (perf script ``-F +srcline``). An inlined
    function shows as ``name (inlined)`` without an offset, as perf prints it."""
    t = profile.stack_table
    fr = profile.frames[int(t.frames[k])]
    addr = int(t.shown[k])
    if fr.symbol is None:
        text = f"\t{addr:16x} [unknown] ({fr.dso_path})\n"
    elif fr.inlined:
        text = f"\t{addr:16x} {fr.name(profile.demangle)} ({fr.dso_path})\n"
    else:
        text = f"\t{addr:16x} {fr.name(profile.demangle)}+0x{int(t.offsets[k]):x} ({fr.dso_path})\n"
    if srcline and t.srclines is not None and t.srclines[k] >= 0:
        text += f"  {profile.srclines[int(t.srclines[k])]}\n"
    return text


def stack_block(profile: Profile, stack: int, srcline: bool = False) -> str:
    a, b = int(profile.stack_start[stack]), int(profile.stack_start[stack + 1])
    return "".join(frame_line(profile, k, srcline) for k in range(a, b))


def render_script(out: TextIO, profile: Profile, show_cpu: bool | None = None, srcline: bool = False) -> None:
    """Write every sample of ``profile`` (already filtered) in time order."""
    s = profile.samples
    cpu = ("cpu" in s.has) if show_cpu is None else show_cpu
    blocks: dict[int, str] = {}
    event = profile.event
    comms = profile.comm_names
    cols = zip(s.pid.tolist(), s.tid.tolist(), s.cpu.tolist(), s.time.tolist(),
               s.period.tolist(), profile.comm.tolist(), profile.stack.tolist())
    write = out.write
    for pid, tid, c, t, period, comm, st in cols:
        block = blocks.get(st)
        if block is None:
            block = blocks[st] = stack_block(profile, st, srcline)
        cpu_text = f"[{c:03d}] " if cpu else ""
        write(f"{comms[comm]} {pid:5d}/{tid:<5d} {cpu_text}{t // 1_000_000_000:5d}."
              f"{(t % 1_000_000_000) // 1000:06d}: {period:10d} {event}: \n{block}\n")


