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

import heapq
from collections.abc import Iterator
from typing import TextIO


from profiler.report.render import utf8
from profiler.report.profile import Profile
from profiler.names import UNKNOWN


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
    if srcline:
        text += srcline_text(profile, k)
    return text


def srcline_text(profile: Profile, k: int) -> str:
    """perf script's srcline line of stack entry ``k``: ``  file.c:12`` from DWARF; for a
    kernel frame without one, perf's fallback ``  [kernel.kallsyms][ffffffff81000c82]``;
    nothing for other code without lines (perf prints none for those either)."""
    t = profile.stack_table
    if t.srclines is not None and t.srclines[k] >= 0:
        return f"  {profile.srclines[int(t.srclines[k])]}\n"
    fr = profile.frames[int(t.frames[k])]
    if fr.kind == "kernel":
        return f"  {fr.dso}[{int(t.addrs[k]):x}]\n"
    return ""


def stack_block(profile: Profile, stack: int, srcline: bool = False) -> str:
    a, b = int(profile.stack_start[stack]), int(profile.stack_start[stack + 1])
    return "".join(frame_line(profile, k, srcline) for k in range(a, b))


def render_script(out: TextIO, profile: Profile, show_cpu: bool | None = None, srcline: bool = False) -> None:
    """Write every sample of ``profile`` (already filtered) in time order."""
    for _, _, text in script_texts(profile, show_cpu, srcline):
        out.write(text)


SampleText = tuple[int, int, str]  # (time, position in the file, the sample's text)


def script_texts(profile: Profile, show_cpu: bool | None = None, srcline: bool = False) -> Iterator[SampleText]:
    """The default layout's text of every sample, in time order."""
    s = profile.samples
    cpu = ("cpu" in s.has) if show_cpu is None else show_cpu
    blocks: dict[int, str] = {}
    event = profile.event
    comms = profile.comm_names
    cols = zip(s.pid.tolist(), s.tid.tolist(), s.cpu.tolist(), s.time.tolist(),
               s.period.tolist(), profile.comm.tolist(), profile.stack.tolist(), s.seq.tolist())
    for pid, tid, c, t, period, comm, st, q in cols:
        block = blocks.get(st)
        if block is None:
            block = blocks[st] = stack_block(profile, st, srcline)
        cpu_text = f"[{'%.3d' % c}] " if cpu else ""  # an unknown CPU (-1) as perf prints it: -001
        yield t, q, (f"{comms[comm]} {pid:5d}/{tid:<5d} {cpu_text}{t // 1_000_000_000:5d}."
                     f"{(t % 1_000_000_000) // 1000:06d}: {period:10d} {event}: \n{block}\n")


def render_merged(out: TextIO, streams: list[Iterator[SampleText]]) -> None:
    """Several events' samples interleaved in time order (file order for equal times), as
    perf script prints a capture with several events."""
    for _, _, text in heapq.merge(*streams, key=lambda item: (item[0], item[1])):
        out.write(text)


# --- -F field selection, tracepoint payloads ---------------------------------------------------

FIELDS: tuple[str, ...] = ("comm", "tid", "pid", "time", "cpu", "event", "ip", "sym", "symoff",
                           "dso", "srcline", "period", "trace", "tod", "cgroup")
DEFAULT_FIELDS: tuple[str, ...] = ("comm", "pid", "tid", "cpu", "time", "period", "event", "ip", "sym",
                                   "symoff", "dso")
TRACEPOINT_FIELDS: tuple[str, ...] = ("comm", "tid", "cpu", "time", "event", "trace", "ip", "sym",
                                      "symoff", "dso")


def parse_fields(text: str | None, tracepoint: bool, chains: bool = True) -> tuple[str, ...] | None:
    """perf script's ``-F``: ``comm,tid,time`` (these fields), ``+period`` / ``-cpu`` (the
    defaults with fields added or removed). None: the default layout."""
    from profiler.errors import UsageError

    if text is None:
        if not tracepoint:
            return None
        if chains:
            return TRACEPOINT_FIELDS
        return tuple(f for f in TRACEPOINT_FIELDS if f not in ("ip", "sym", "symoff", "dso"))
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise UsageError(f"-F needs fields, a comma-separated list of {', '.join(FIELDS)}.")
    base = list(TRACEPOINT_FIELDS if tracepoint else DEFAULT_FIELDS)
    relative = all(n[0] in "+-" for n in names)
    chosen = base if relative else []
    for n in names:
        name = n.lstrip("+-")
        if name not in FIELDS:
            raise UsageError(f"-F: unknown field {name!r}: the fields are {', '.join(FIELDS)}.")
        if n[0] == "-":
            chosen = [c for c in chosen if c != name]
        elif name not in chosen:
            chosen.append(name)
    return tuple(chosen)


def render_fields(out: TextIO, profile: Profile, fields: tuple[str, ...]) -> None:
    """Every sample with the fields perf script's ``-F`` selects, in perf's layout: the fields
    always in perf's order, whatever order they were given in."""
    for _, _, text in field_texts(profile, fields):
        out.write(text)


def _wall_offset(profile: Profile) -> int:
    """What puts a sample time on the wall clock; a ReportError when the capture cannot say."""
    from profiler.errors import ReportError

    h = profile.header
    if h.start_time_ns is None or h.start_perf_clock_ns is None:
        raise ReportError("cannot print 'tod': the capture does not say when its clock started (a perf.data "
                          "file needs perf record -k; profiler record always keeps it).")
    return h.start_time_ns - h.start_perf_clock_ns


def time_of_day(wall_ns: int) -> str:
    """perf script's ``tod``: local date and time with microseconds."""
    import time

    seconds, ns = divmod(wall_ns, 1_000_000_000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds)) + f".{ns // 1000:06d}"


def field_texts(profile: Profile, fields: tuple[str, ...]) -> Iterator[SampleText]:
    """The ``-F`` layout's text of every sample, in time order."""
    from profiler.report.tracepoint_print import TracePrinter

    s = profile.samples
    f = set(fields)
    chains = profile.has_callchains
    width = max((len(n) for n in profile.event_names), default=0)
    printer = TracePrinter.of(profile.trace_format) if profile.trace_format is not None else None
    raw = profile.raw if "trace" in f and printer is not None else None
    stack_lines = "ip" in f and chains
    comm_fmt = "{} " if stack_lines else "{:>16} "
    blocks: dict[int, str] = {}
    singles: dict[int, str] = {}  # a stack's sampled frame, on the sample's line
    comms = profile.comm_names
    wall_offset = _wall_offset(profile) if "tod" in f else 0
    cgroups = _cgroup_texts(profile) if "cgroup" in f else []
    pids, tids, cpus, times = s.pid.tolist(), s.tid.tolist(), s.cpu.tolist(), s.time.tolist()
    periods, seqs, comm_of, stack_of = s.period.tolist(), s.seq.tolist(), profile.comm.tolist(), profile.stack.tolist()
    for i in range(len(s)):
        parts = []
        if "comm" in f:
            parts.append(comm_fmt.format(comms[comm_of[i]]))
        pid, tid = pids[i], tids[i]
        if "pid" in f and "tid" in f:
            parts.append(f"{pid:5d}/{tid:<5d} ")
        elif "pid" in f or "tid" in f:
            parts.append(f"{pid if 'pid' in f else tid:5d} ")
        if "cpu" in f:
            parts.append(f"[{'%.3d' % cpus[i]}] ")  # an unknown CPU (-1) as perf prints it: -001
        if "tod" in f:
            parts.append(time_of_day(times[i] + wall_offset) + " ")
        if "time" in f:
            t = times[i]
            parts.append(f"{t // 1_000_000_000:5d}.{(t % 1_000_000_000) // 1000:06d}: ")
        if "period" in f:
            parts.append(f"{periods[i]:10d} ")
        if "event" in f:
            parts.append(f"{profile.event:>{width}}: ")
        if "cgroup" in f:
            parts.append(cgroups[i] + " ")
        if raw is not None and printer is not None:
            parts.append(printer.format(raw[i], profile.byte_order))
        st = stack_of[i]
        if stack_lines:
            block = blocks.get(st)
            if block is None:
                block = blocks[st] = "".join(
                    _field_frame(profile, k, f) + (srcline_text(profile, k) if "srcline" in f else "")
                    for k in range(int(profile.stack_start[st]), int(profile.stack_start[st + 1])))
            text = "".join(parts) + "\n" + block + "\n"
        elif f & {"ip", "sym", "dso"} and profile.stack_start[st + 1] > profile.stack_start[st]:
            single = singles.get(st)
            if single is None:
                single = _field_frame(profile, _sampled_entry(profile, st), f, raw_ip=True)[1:]
                if "srcline" in f:  # the sampled address's innermost line, as addr2line gives it
                    single += srcline_text(profile, int(profile.stack_start[st]))
                singles[st] = single
            text = "".join(parts) + " " + single
        elif "srcline" in f and profile.stack_start[st + 1] > profile.stack_start[st]:
            text = "".join(parts) + "\n" + srcline_text(profile, int(profile.stack_start[st]))
        else:
            text = "".join(parts) + "\n"
        yield times[i], seqs[i], text


def _cgroup_texts(profile: Profile) -> list[str]:
    """Each sample's cgroup path (``-F cgroup``; ``report --sort cgroup``'s words)."""
    from profiler.report.profile import cgroup_column, cgroup_name

    return [cgroup_name(profile, c) for c in cgroup_column(profile).tolist()]


def _sampled_entry(profile: Profile, stack: int) -> int:
    """The stack entry of the function the sampled address is in (inlined frames skipped):
    what perf prints for a sample without a call chain."""
    k, end = int(profile.stack_start[stack]), int(profile.stack_start[stack + 1])
    while k < end - 1 and profile.frames[int(profile.stack_table.frames[k])].inlined:
        k += 1
    return k


def _field_frame(profile: Profile, k: int, f: set[str], raw_ip: bool = False) -> str:
    t = profile.stack_table
    fr = profile.frames[int(t.frames[k])]
    parts = []
    if "ip" in f:
        parts.append(f"{int(t.addrs[k] if raw_ip else t.shown[k]):16x}")
    if "sym" in f:
        name = UNKNOWN if fr.symbol is None else fr.name(profile.demangle)
        if "symoff" in f and fr.symbol is not None and not fr.inlined:
            name += f"+0x{int(t.offsets[k]):x}"
        parts.append(name)
    if "dso" in f:
        parts.append(f"({fr.dso_path})")
    return "\t" + " ".join(parts) + "\n"


def render_json_lines(out: TextIO, profile: Profile) -> None:
    """One JSON object per sample (JSON Lines): the sample's fields, its call chain (leaf
    first) and, for a tracepoint, its payload's fields by name (``trace``)."""
    import json

    s = profile.samples
    t = profile.stack_table
    fmt = profile.trace_format
    for i in range(len(s)):
        st = int(profile.stack[i])
        frames = []
        for k in range(int(profile.stack_start[st]), int(profile.stack_start[st + 1])):
            fr = profile.frames[int(t.frames[k])]
            line = int(t.srclines[k]) if t.srclines is not None else -1
            frames.append({"addr": int(t.shown[k]), "symbol": None if fr.symbol is None else fr.name(profile.demangle),
                           "offset": int(t.offsets[k]), "dso": fr.dso_path,
                           "srcline": profile.srclines[line] if line >= 0 else None})
        obj = {"comm": profile.comm_names[int(profile.comm[i])], "pid": int(s.pid[i]), "tid": int(s.tid[i]),
               "cpu": int(s.cpu[i]), "time_ns": int(s.time[i]), "period": int(s.period[i]),
               "event": profile.event, "callchain": frames}
        if fmt is not None and profile.raw is not None:
            obj["trace"] = {k: (v.hex() if isinstance(v, bytes) else v)
                            for k, v in fmt.decode(profile.raw[i], profile.byte_order).items()}
        out.write(utf8.json_text(json.dumps(obj, separators=(",", ":"))) + "\n")
