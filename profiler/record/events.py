"""Event specifications: ``-e cycles,sched:sched_switch,r1a8,msr/tsc/:u`` into (type, config).

The names follow perf's: the software and generic hardware events of ``enum perf_sw_ids`` /
``enum perf_hw_id``, hardware cache events ``<cache>-<op>[-misses]`` encoded as
``id | (op << 8) | (result << 16)`` ("PERF_TYPE_HW_CACHE" in perf_event_open(2)), raw events
``rNNN``, tracepoints ``subsystem:event`` whose config is the id in tracefs, and PMU events
``pmu/term=value,.../`` whose type and term bit layout come from
``/sys/bus/event_source/devices/<pmu>/{type,format/*}``. Modifiers ``:u`` (user only),
``:k`` (kernel only) and ``:p`` (precise_ip, repeatable) may follow any of them.

Groups ``{a,b}`` are scheduled by the kernel as a unit (the first is the leader, the others
are opened with its fd as ``group_fd``). Modifiers after the brace apply to every member;
``:S`` after a group asks for leader sampling: only the leader samples, and each sample
carries every member's count (PERF_SAMPLE_READ with PERF_FORMAT_GROUP).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from profiler.errors import EventError, ProfilerError
from profiler.format.attr import (
    PERF_TYPE_HARDWARE,
    PERF_TYPE_HW_CACHE,
    PERF_TYPE_RAW,
    PERF_TYPE_SOFTWARE,
    PERF_TYPE_TRACEPOINT,
    new_attr,
)
from profiler.value import Frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from pathlib import Path

SOFTWARE_EVENTS: dict[str, int] = {
    "cpu-clock": 0,
    "task-clock": 1,
    "page-faults": 2,
    "faults": 2,
    "context-switches": 3,
    "cs": 3,
    "cpu-migrations": 4,
    "migrations": 4,
    "minor-faults": 5,
    "major-faults": 6,
    "alignment-faults": 7,
    "emulation-faults": 8,
    "dummy": 9,
    "cgroup-switches": 11,
}

HARDWARE_EVENTS: dict[str, int] = {
    "cycles": 0,
    "cpu-cycles": 0,
    "instructions": 1,
    "cache-references": 2,
    "cache-misses": 3,
    "branches": 4,
    "branch-instructions": 4,
    "branch-misses": 5,
    "bus-cycles": 6,
    "stalled-cycles-frontend": 7,
    "idle-cycles-frontend": 7,
    "stalled-cycles-backend": 8,
    "idle-cycles-backend": 8,
    "ref-cycles": 9,
}

# enum perf_hw_cache_id / perf_hw_cache_op_id / perf_hw_cache_op_result_id
HW_CACHE_IDS: dict[str, int] = {
    "L1-dcache": 0,
    "L1-icache": 1,
    "LLC": 2,
    "dTLB": 3,
    "iTLB": 4,
    "branch": 5,
    "node": 6,
}
HW_CACHE_OPS: dict[str, tuple[int, str]] = {
    "load": (0, "loads"),
    "store": (1, "stores"),
    "prefetch": (2, "prefetches"),
}
HW_CACHE_RESULT_ACCESS, HW_CACHE_RESULT_MISS = 0, 1

# pathlib is imported where tracepoints and PMUs are read: not in every recording's start-up
TRACEFS_ROOTS: tuple[str, ...] = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
PMU_ROOT = "/sys/bus/event_source/devices"

# matched with _match: re is imported only where an -e list or modifiers are read
_MODIFIER_RE = r"^[ukp]+$"
_GROUP_RE = r"(?s)^\{(.*)\}(?::(.*))?$"
_GROUP_MODIFIER_RE = r"^[ukpS]+$"
_RAW_RE = r"^r([0-9a-fA-F]+)$"
_PMU_RE = r"^([A-Za-z0-9_.\-]+)/([^/]*)/$"


def _match(pattern: str, text: str) -> re.Match[str] | None:
    import re  # not at the top: a recording of the default event parses no event names

    return re.match(pattern, text)


class EventSpec(Frozen):
    """One parsed event: the attr fields that select it, and the name to show for it."""

    __slots__ = _fields = (
        "name", "type", "config", "config1", "config2", "exclude_user", "exclude_kernel", "precise_ip"
    )

    def __init__(
        self,
        name: str,
        type: int,
        config: int,
        config1: int = 0,
        config2: int = 0,
        exclude_user: bool = False,
        exclude_kernel: bool = False,
        precise_ip: int = 0,
    ) -> None:
        self.name = name
        self.type = type
        self.config = config
        self.config1 = config1
        self.config2 = config2
        self.exclude_user = exclude_user
        self.exclude_kernel = exclude_kernel
        self.precise_ip = precise_ip


def hw_cache_events() -> dict[str, int]:
    """Every ``<cache>-<op>s`` / ``<cache>-<op>-misses`` name perf accepts, with its config."""
    out: dict[str, int] = {}
    for cache, cache_id in HW_CACHE_IDS.items():
        for op, (op_id, plural) in HW_CACHE_OPS.items():
            base = cache_id | (op_id << 8)
            out[f"{cache}-{plural}"] = base | (HW_CACHE_RESULT_ACCESS << 16)
            out[f"{cache}-{op}-misses"] = base | (HW_CACHE_RESULT_MISS << 16)
    return out


HW_CACHE_EVENTS = hw_cache_events()


# ---------------------------------------------------------------------------------------
# splitting and modifiers


def split_event_list(text: str) -> list[str]:
    """Split ``-e`` on commas that are not inside a ``pmu/.../`` term list or a ``{...}`` group."""
    parts: list[str] = []
    current: list[str] = []
    slashes = braces = 0
    for ch in text:
        if ch == "/":
            slashes += 1
        elif ch == "{":
            braces += 1
        elif ch == "}":
            braces -= 1
        if ch == "," and slashes % 2 == 0 and braces == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts]


def split_modifiers(token: str) -> tuple[str, str]:
    """``cycles:u`` -> (``cycles``, ``u``); ``sched:sched_switch`` keeps its colon."""
    head, sep, tail = token.rpartition(":")
    if sep and head and _match(_MODIFIER_RE, tail):
        return head, tail
    return token, ""


def apply_modifiers(spec: EventSpec, modifiers: str) -> EventSpec:
    if not modifiers:
        return spec
    user, kernel = "u" in modifiers, "k" in modifiers
    return spec.replace(
        name=f"{spec.name}:{modifiers}",
        exclude_user=kernel and not user,
        exclude_kernel=user and not kernel,
        precise_ip=min(modifiers.count("p"), 3),
    )


# ---------------------------------------------------------------------------------------
# tracepoints


def tracefs_root(mount: bool = False) -> Path | None:
    """The mounted tracefs: /sys/kernel/tracing, or the older debugfs location. With
    ``mount``, a tracefs that is not mounted is mounted at /sys/kernel/tracing when this
    process may (as perf does: root, or CAP_SYS_ADMIN), else debugfs at /sys/kernel/debug."""
    from pathlib import Path

    for root in map(Path, TRACEFS_ROOTS):
        try:
            if (root / "events").is_dir():
                return root
        except PermissionError:  # mounted, but this user may not look inside (mode 700, as Debian has it)
            if not mount:
                return None
            raise EventError(f"cannot read the tracepoints under {root}: permission denied. Record "
                             "tracepoints (--off-cpu's sched:sched_switch among them) as root.") from None
    if mount and (_mount("tracefs", TRACEFS_ROOTS[0]) or _mount("debugfs", "/sys/kernel/debug")):
        return tracefs_root()
    return None


def _mount(fstype: str, target: str) -> bool:
    """mount(2) ``fstype`` on ``target`` (an existing directory); False when not permitted or
    not possible (the caller then says how to do it)."""
    import ctypes
    import ctypes.util

    if not os.path.isdir(target):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return bool(libc.mount(b"nodev", target.encode(), fstype.encode(), 0, None) == 0)


def tracepoint_id(subsystem: str, event: str) -> int:
    root = tracefs_root(mount=True)
    if root is None:
        raise EventError(
            f"cannot resolve tracepoint '{subsystem}:{event}': tracefs is not mounted and this "
            "process may not mount it (as root: 'mount -t tracefs nodev /sys/kernel/tracing')."
        )
    id_path = root / "events" / subsystem / event / "id"
    try:
        return int(id_path.read_text().strip())
    except FileNotFoundError:
        known = [f"{s}:{e}" for s, e in iter_tracepoints(root, subsystem)] or [
            f"{s}:" for s in _tracepoint_subsystems(root)
        ]
        raise EventError(
            f"unknown tracepoint '{subsystem}:{event}'{_suggest(f'{subsystem}:{event}', known)}"
        ) from None
    except (OSError, ValueError) as exc:
        raise EventError(f"cannot read the id of tracepoint '{subsystem}:{event}': {exc}.") from None


def _tracepoint_subsystems(root: Path) -> list[str]:
    try:
        return sorted(p.name for p in (root / "events").iterdir() if p.is_dir())
    except OSError:
        return []


def iter_tracepoints(root: Path | None = None, subsystem: str | None = None) -> Iterator[tuple[str, str]]:
    """(subsystem, event) for every tracepoint in tracefs (or in one subsystem)."""
    root = root or tracefs_root()
    if root is None:
        return
    subsystems = [subsystem] if subsystem else _tracepoint_subsystems(root)
    for sub in subsystems:
        try:
            events = sorted((root / "events" / sub).iterdir())
        except OSError:
            continue
        for path in events:
            if (path / "id").is_file():
                yield sub, path.name


# ---------------------------------------------------------------------------------------
# PMU events from sysfs


def pmu_names() -> list[str]:
    try:
        return sorted(os.listdir(PMU_ROOT))
    except OSError:
        return []


def parse_format(text: str) -> tuple[str, list[tuple[int, int]]]:
    """A sysfs format file, e.g. ``config:0-7,21`` -> (``config``, [(0, 7), (21, 21)])."""
    field, _, ranges = text.strip().partition(":")
    bits: list[tuple[int, int]] = []
    for part in ranges.split(","):
        lo, _, hi = part.partition("-")
        bits.append((int(lo), int(hi or lo)))
    if field not in ("config", "config1", "config2"):
        raise ValueError(f"unknown format field {field!r}")
    return field, bits


def place_bits(value: int, bits: list[tuple[int, int]]) -> int:
    """Scatter ``value``'s low bits into the (lo, hi) ranges, lowest range first."""
    out = 0
    shift = 0
    for lo, hi in bits:
        width = hi - lo + 1
        out |= ((value >> shift) & ((1 << width) - 1)) << lo
        shift += width
    if value >> shift:
        raise ValueError(f"value {value:#x} does not fit in {shift} bits")
    return out


def _pmu_terms(pmu_dir: Path, terms_text: str) -> list[tuple[str, int]]:
    """``event=0x3c,umask=0`` -> [(term, value)], expanding a named alias from ``events/``."""
    terms: list[tuple[str, int]] = []
    for term in filter(None, (t.strip() for t in terms_text.split(","))):
        name, eq, value = term.partition("=")
        alias = pmu_dir / "events" / name
        if not eq and alias.is_file():
            terms.extend(_pmu_terms(pmu_dir, alias.read_text().strip()))
            continue
        terms.append((name, int(value, 0) if eq else 1))
    return terms


def parse_pmu_event(pmu: str, terms_text: str) -> EventSpec:
    from pathlib import Path

    pmu_dir = Path(PMU_ROOT) / pmu
    display = f"{pmu}/{terms_text}/"
    try:
        pmu_type = int((pmu_dir / "type").read_text().strip())
    except (OSError, ValueError):
        raise EventError(f"unknown PMU '{pmu}' in '{display}'{_suggest(pmu, pmu_names())}") from None
    fields = {"config": 0, "config1": 0, "config2": 0}
    try:
        for name, value in _pmu_terms(pmu_dir, terms_text):
            if name in fields:
                fields[name] |= value
                continue
            fmt = pmu_dir / "format" / name
            if not fmt.is_file():
                known = sorted(p.name for p in (pmu_dir / "format").glob("*"))
                raise EventError(
                    f"PMU '{pmu}' has no term '{name}' (it has: {', '.join(known) or 'none'})."
                )
            field, bits = parse_format(fmt.read_text())
            fields[field] |= place_bits(value, bits)
    except ValueError as exc:
        raise EventError(f"cannot encode '{display}': {exc}.") from None
    return EventSpec(display, pmu_type, fields["config"], fields["config1"], fields["config2"])


def iter_pmu_events() -> Iterator[str]:
    """``pmu/alias/`` for every named event a PMU publishes in sysfs."""
    for pmu in pmu_names():
        try:
            names = sorted(os.listdir(os.path.join(PMU_ROOT, pmu, "events")))
        except OSError:
            continue
        for name in names:
            if not name.endswith((".scale", ".unit", ".per-pkg", ".snapshot")):
                yield f"{pmu}/{name}/"


# ---------------------------------------------------------------------------------------
# parsing


def symbolic_names() -> list[str]:
    return [*SOFTWARE_EVENTS, *HARDWARE_EVENTS, *HW_CACHE_EVENTS]


def _suggest(name: str, candidates: Iterable[str]) -> str:
    import difflib  # only for this error message: not in every recording's start-up

    close = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
    if not close:
        return "."
    return " (did you mean " + " or ".join(f"'{c}'" for c in close) + "?)."


def parse_event(token: str) -> EventSpec:
    """One event of the ``-e`` list."""
    if not token:
        raise EventError("empty event name in the event list.")
    name, modifiers = split_modifiers(token)
    return apply_modifiers(_parse_base(name), modifiers)


def _parse_base(name: str) -> EventSpec:
    if name in SOFTWARE_EVENTS:
        return EventSpec(name, PERF_TYPE_SOFTWARE, SOFTWARE_EVENTS[name])
    if name in HARDWARE_EVENTS:
        return EventSpec(name, PERF_TYPE_HARDWARE, HARDWARE_EVENTS[name])
    if name in HW_CACHE_EVENTS:
        return EventSpec(name, PERF_TYPE_HW_CACHE, HW_CACHE_EVENTS[name])
    raw = _match(_RAW_RE, name)
    if raw:
        return EventSpec(name, PERF_TYPE_RAW, int(raw.group(1), 16))
    pmu = _match(_PMU_RE, name)
    if pmu:
        return parse_pmu_event(pmu.group(1), pmu.group(2))
    if ":" in name:
        subsystem, _, event = name.partition(":")
        return EventSpec(name, PERF_TYPE_TRACEPOINT, tracepoint_id(subsystem, event))
    raise EventError(f"unknown event '{name}'{_suggest(name, symbolic_names())}")


def parse_events(texts: Iterable[str]) -> list[EventSpec]:
    """Every ``-e`` option (each may be a comma-separated list), in order, without duplicates;
    the members of ``{...}`` groups are listed in place."""
    specs: list[EventSpec] = []
    for group in parse_event_groups(texts):
        for spec in group.members:
            if spec not in specs:
                specs.append(spec)
    return specs


class EventGroup(Frozen):
    """One item of the ``-e`` list: a lone event (``braced`` False, one member) or a ``{...}``
    group whose first member is the leader."""

    __slots__ = _fields = ("members", "braced", "leader_sampling")

    def __init__(self, members: tuple[EventSpec, ...], braced: bool = False, leader_sampling: bool = False) -> None:
        self.members = members
        self.braced = braced
        self.leader_sampling = leader_sampling  # ``:S``

    @property
    def name(self) -> str:
        if not self.braced:
            return self.members[0].name
        return "{" + ",".join(m.name for m in self.members) + "}"


def parse_group(token: str) -> EventGroup:
    """``{a,b}`` / ``{a,b}:u`` / ``{a,b}:S`` or a lone event."""
    match = _match(_GROUP_RE, token)
    if match is None:
        if "{" in token or "}" in token:
            raise EventError(f"unbalanced braces in the event group '{token}'.")
        name, modifiers = split_modifiers(token)
        if not modifiers and name.endswith(":S"):
            raise EventError(f"':S' (leader sampling) applies to a group, as in '{{{name[:-2]},...}}:S'.")
        return EventGroup((parse_event(token),))
    inner, modifiers = match.group(1), match.group(2) or ""
    if match.group(2) is not None and not _match(_GROUP_MODIFIER_RE, modifiers):
        raise EventError(f"unknown modifier ':{modifiers}' after the event group (u, k, p and S are known).")
    tokens = split_event_list(inner)
    if not inner.strip() or not all(tokens):
        raise EventError(f"the event group '{token}' has an empty member.")
    if any("{" in t for t in tokens):
        raise EventError(f"event groups cannot be nested: '{token}'.")
    shared = modifiers.replace("S", "")
    members = tuple(_with_group_modifiers(t, shared) for t in tokens)
    return EventGroup(members, braced=True, leader_sampling="S" in modifiers)


def _with_group_modifiers(token: str, shared: str) -> EventSpec:
    """A member with the group's ``:u``/``:k``/``:p`` added to its own; like perf, the group's
    modifiers do not rename the member."""
    name, own = split_modifiers(token)
    spec = apply_modifiers(_parse_base(name), own + "".join(c for c in shared if c not in own))
    return spec.replace(name=token)


def parse_event_groups(texts: Iterable[str]) -> list[EventGroup]:
    """Every ``-e`` option as groups, in order (a lone event is a group of one)."""
    groups: list[EventGroup] = []
    for text in texts:
        for token in split_event_list(text):
            if not token:
                raise EventError("empty event name in the event list.")
            groups.append(parse_group(token))
    return groups


# ---------------------------------------------------------------------------------------
# what this machine supports


def probe(spec: EventSpec) -> bool:
    """Can this machine open ``spec``? Opens a disabled counter on ourselves and closes it."""
    from profiler.record import perf_event

    attr = new_attr(
        type=spec.type,
        config=spec.config,
        disabled=1,
        exclude_kernel=1,
        exclude_hv=1,
    )
    attr.config1, attr.config2 = spec.config1, spec.config2
    try:
        fd = perf_event.perf_event_open(attr, 0, -1, event_name=spec.name)
    except ProfilerError:
        return False
    os.close(fd)
    return True


DEFAULT_EVENT = EventSpec("cycles", PERF_TYPE_HARDWARE, HARDWARE_EVENTS["cycles"])
FALLBACK_EVENT = EventSpec("cpu-clock", PERF_TYPE_SOFTWARE, SOFTWARE_EVENTS["cpu-clock"])


def default_event() -> tuple[EventSpec, str | None]:
    """cycles, or cpu-clock with a one-line notice when there is no hardware PMU (like perf)."""
    if probe(DEFAULT_EVENT):
        return DEFAULT_EVENT, None
    return FALLBACK_EVENT, "notice: no hardware 'cycles' event on this machine, sampling 'cpu-clock' instead."


class ListedEvent(Frozen):
    __slots__ = _fields = ("name", "kind")

    def __init__(self, name: str, kind: str) -> None:
        self.name = name
        self.kind = kind  # "Software event", "Hardware event", ...


def supported_events(probe_hardware: bool = True) -> list[ListedEvent]:
    """The events ``profiler list`` shows: software always, hardware and cache ones that
    open here, PMU aliases from sysfs, and every tracepoint in tracefs."""
    out: list[ListedEvent] = [ListedEvent(n, "Software event") for n in SOFTWARE_EVENTS]
    for table, kind, type_ in (
        (HARDWARE_EVENTS, "Hardware event", PERF_TYPE_HARDWARE),
        (HW_CACHE_EVENTS, "Hardware cache event", PERF_TYPE_HW_CACHE),
    ):
        for name, config in table.items():
            if not probe_hardware or probe(EventSpec(name, type_, config)):
                out.append(ListedEvent(name, kind))
    out.extend(ListedEvent(n, "Kernel PMU event") for n in iter_pmu_events())
    out.extend(ListedEvent(f"{s}:{e}", "Tracepoint event") for s, e in iter_tracepoints())
    return out

