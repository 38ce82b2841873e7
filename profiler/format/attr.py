"""``struct perf_event_attr``, mirrored from /usr/include/linux/perf_event.h.

The layout is a ctypes Structure so that the recorder can hand it straight to the
perf_event_open syscall, and the capture header stores it as a plain ``{field: int}`` dict
(``attr_to_dict`` / ``attr_from_dict``), which is independent of the recording machine's
byte order. Size 128 is PERF_ATTR_SIZE_VER7 (up to ``sig_data``); the kernel accepts it.
"""

from __future__ import annotations

import ctypes

PERF_ATTR_SIZE_VER7 = 128

# perf_type_id
PERF_TYPE_HARDWARE = 0
PERF_TYPE_SOFTWARE = 1
PERF_TYPE_TRACEPOINT = 2
PERF_TYPE_HW_CACHE = 3
PERF_TYPE_RAW = 4
PERF_TYPE_BREAKPOINT = 5

# The single-bit (and one two-bit) flags of the u64 after read_format, in header order.
FLAG_BITS: tuple[tuple[str, int], ...] = (
    ("disabled", 1),
    ("inherit", 1),
    ("pinned", 1),
    ("exclusive", 1),
    ("exclude_user", 1),
    ("exclude_kernel", 1),
    ("exclude_hv", 1),
    ("exclude_idle", 1),
    ("mmap", 1),
    ("comm", 1),
    ("freq", 1),
    ("inherit_stat", 1),
    ("enable_on_exec", 1),
    ("task", 1),
    ("watermark", 1),
    ("precise_ip", 2),
    ("mmap_data", 1),
    ("sample_id_all", 1),
    ("exclude_host", 1),
    ("exclude_guest", 1),
    ("exclude_callchain_kernel", 1),
    ("exclude_callchain_user", 1),
    ("mmap2", 1),
    ("comm_exec", 1),
    ("use_clockid", 1),
    ("context_switch", 1),
    ("write_backward", 1),
    ("namespaces", 1),
    ("ksymbol", 1),
    ("bpf_event", 1),
    ("aux_output", 1),
    ("cgroup", 1),
    ("text_poke", 1),
    ("build_id", 1),
    ("inherit_thread", 1),
    ("remove_on_exec", 1),
    ("sigtrap", 1),
    ("__reserved_1", 26),
)

_u32, _u64, _u16, _s32 = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint16, ctypes.c_int32


class perf_event_attr(ctypes.Structure):
    """The kernel's struct, field for field. Unions are flattened to their first name;
    ``sample_freq`` / ``wakeup_watermark`` / ``config1`` / ``config2`` are properties."""

    _fields_ = [
        ("type", _u32),
        ("size", _u32),
        ("config", _u64),
        ("sample_period", _u64),  # union with sample_freq
        ("sample_type", _u64),
        ("read_format", _u64),
        *[(name, _u64, bits) for name, bits in FLAG_BITS],
        ("wakeup_events", _u32),  # union with wakeup_watermark
        ("bp_type", _u32),
        ("bp_addr", _u64),  # union with config1
        ("bp_len", _u64),  # union with config2
        ("branch_sample_type", _u64),
        ("sample_regs_user", _u64),
        ("sample_stack_user", _u32),
        ("clockid", _s32),
        ("sample_regs_intr", _u64),
        ("aux_watermark", _u32),
        ("sample_max_stack", _u16),
        ("__reserved_2", _u16),
        ("aux_sample_size", _u32),
        ("__reserved_3", _u32),
        ("sig_data", _u64),
    ]

    # Aliases for the unions, named as the header names them.
    sample_freq = property(
        lambda self: self.sample_period, lambda self, v: setattr(self, "sample_period", v)
    )
    wakeup_watermark = property(
        lambda self: self.wakeup_events, lambda self, v: setattr(self, "wakeup_events", v)
    )
    config1 = property(lambda self: self.bp_addr, lambda self, v: setattr(self, "bp_addr", v))
    config2 = property(lambda self: self.bp_len, lambda self, v: setattr(self, "bp_len", v))


assert ctypes.sizeof(perf_event_attr) == PERF_ATTR_SIZE_VER7

ATTR_FIELDS: tuple[str, ...] = tuple(f[0] for f in perf_event_attr._fields_)


def attr_to_dict(attr: perf_event_attr) -> dict[str, int]:
    """Every field of ``attr`` by its kernel name (reserved fields left out when zero)."""
    out: dict[str, int] = {}
    for name in ATTR_FIELDS:
        value = int(getattr(attr, name))
        if name.startswith("__") and value == 0:
            continue
        out[name] = value
    return out


def new_attr(**fields: int) -> perf_event_attr:
    """A zeroed attr with ``size`` set and the given fields (union aliases accepted)."""
    attr = perf_event_attr()
    attr.size = PERF_ATTR_SIZE_VER7
    for name, value in fields.items():
        setattr(attr, name, value)
    return attr
