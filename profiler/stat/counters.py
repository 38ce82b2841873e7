"""Open counting events through the recorder's perf_event_open binding, and read them.

Each ``-e`` item is a group (a lone event is a group of one). A group is opened once per
target (pid, cpu): the leader with ``group_fd = -1`` and ``disabled = 1``, the members with
the leader's fd and ``disabled = 0``, so they count exactly while the leader does ("the group
is scheduled onto the CPU as a unit", perf_event_open(2)). A braced group is read with one
read(2) of its leader (PERF_FORMAT_GROUP); a lone event with a read of its own fd. Both carry
TOTAL_TIME_ENABLED/RUNNING for the multiplexing scale and ID to match values to events.

Inherited counters (``inherit = 1``) follow the command's children; the kernel folds a
child's counts into the parent counter when the child exits, so one read covers the tree.
"""

from __future__ import annotations

import errno
import os
from dataclasses import field
from pathlib import Path

from profiler.dataclass import dataclass
from profiler.errors import EventError, PermissionDeniedError, ProfilerError, RecordError
from profiler.format import records as R
from profiler.format.attr import (
    PERF_TYPE_HARDWARE,
    PERF_TYPE_HW_CACHE,
    PERF_TYPE_RAW,
    new_attr,
    perf_event_attr,
)
from profiler.record import perf_event
from profiler.record.events import EventGroup, EventSpec
from profiler.stat.values import Reading, readings_from

READ_FORMAT = R.PERF_FORMAT_TOTAL_TIME_ENABLED | R.PERF_FORMAT_TOTAL_TIME_RUNNING | R.PERF_FORMAT_ID
CPU_PMU = Path("/sys/bus/event_source/devices/cpu")


@dataclass(frozen=True)
class Slot:
    """Where a count belongs when counts are not summed: a CPU (-A) or a thread (--per-thread)."""

    cpu: int = -1
    tid: int = -1
    comm: str = ""


@dataclass(frozen=True)
class Target:
    """One (pid, cpu) pair on which every group is opened."""

    pid: int
    cpu: int
    slot: Slot = Slot()


@dataclass
class OpenGroup:
    """One group opened on one target: fds leader first, and the kernel id of each."""

    group: int
    target: int
    fds: list[int]
    ids: list[int]
    read_format: int


@dataclass
class CounterSet:
    """Every counter of one measurement; ``events`` is the flat member list in -e order."""

    groups: list[EventGroup]
    targets: list[Target]
    inherit: bool = True
    enable_on_exec: bool = False
    optional: frozenset[int] = frozenset()  # groups that may be "<not supported>" (the defaults)
    opened: list[OpenGroup] = field(default_factory=list)
    unsupported: set[int] = field(default_factory=set)  # group indexes
    notices: list[str] = field(default_factory=list)
    _exclude_kernel: bool = False

    @property
    def events(self) -> list[tuple[int, EventSpec]]:
        """(group index, spec) for every member of every group, in order."""
        return [(g, spec) for g, group in enumerate(self.groups) for spec in group.members]

    # opening -------------------------------------------------------------------------------

    def open(self) -> None:
        try:
            for g, group in enumerate(self.groups):
                self._open_group_everywhere(g, group)
        except BaseException:
            self.close()
            raise

    def _open_group_everywhere(self, g: int, group: EventGroup) -> None:
        for t, target in enumerate(self.targets):
            try:
                self.opened.append(self._open_group(g, group, t, target))
            except EventError as exc:
                if g in self.optional and _is_unsupported(exc):
                    self.unsupported.add(g)
                    return
                raise
            except RecordError:
                if target.pid > 0 and target.slot.tid > 0 and not os.path.exists(f"/proc/{target.pid}"):
                    continue  # the thread exited since it was listed
                raise

    def _open_group(self, g: int, group: EventGroup, t: int, target: Target) -> OpenGroup:
        read_format = READ_FORMAT | (R.PERF_FORMAT_GROUP if group.braced else 0)
        fds: list[int] = []
        try:
            for index, spec in enumerate(group.members):
                leader = fds[0] if fds else -1
                attr = self.build_attr(spec, read_format, leader=index == 0)
                fds.append(self._open_one(attr, spec, group, target, leader))
            ids = [perf_event.event_id(fd) for fd in fds]
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return OpenGroup(g, t, fds, ids, read_format)

    def build_attr(self, spec: EventSpec, read_format: int, *, leader: bool) -> perf_event_attr:
        attr = new_attr(
            type=spec.type,
            config=spec.config,
            read_format=read_format,
            disabled=int(leader),
            inherit=int(self.inherit),
            exclude_user=int(spec.exclude_user),
            exclude_kernel=int(spec.exclude_kernel or self._exclude_kernel),
            enable_on_exec=int(leader and self.enable_on_exec),
        )
        attr.config1, attr.config2 = spec.config1, spec.config2
        return attr

    def _open_one(
        self, attr: perf_event_attr, spec: EventSpec, group: EventGroup, target: Target, leader: int
    ) -> int:
        try:
            return perf_event.perf_event_open(attr, target.pid, target.cpu, leader, event_name=spec.name)
        except PermissionDeniedError:
            if attr.exclude_kernel or target.pid == -1 or (perf_event.read_paranoid() or 0) < 2:
                raise
            # perf_event_paranoid 2 allows user-space counting only: perf counts :u then.
            self._exclude_kernel = True
            attr.exclude_kernel = 1
            self.notices.append("notice: kernel.perf_event_paranoid allows user space only; "
                                "counting user space (as with ':u').")
            return perf_event.perf_event_open(attr, target.pid, target.cpu, leader, event_name=spec.name)
        except RecordError as exc:
            raise _explain(exc, spec, group, leader, target) from None

    # control ---------------------------------------------------------------------------------

    def enable(self) -> None:
        for og in self.opened:
            perf_event.enable(og.fds[0])

    def disable(self) -> None:
        for og in self.opened:
            try:
                perf_event.disable(og.fds[0])
            except RecordError:
                pass

    def close(self) -> None:
        for og in self.opened:
            for fd in og.fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.opened.clear()

    # reading ---------------------------------------------------------------------------------

    def read(self) -> dict[tuple[int, int], Reading]:
        """{(event index, target index): Reading}; event index as in ``events``."""
        first_event = self._first_event_index()
        out: dict[tuple[int, int], Reading] = {}
        for og in self.opened:
            for member, reading in enumerate(read_group(og)):
                out[(first_event[og.group] + member, og.target)] = reading
        return out

    def _first_event_index(self) -> list[int]:
        firsts, n = [], 0
        for group in self.groups:
            firsts.append(n)
            n += len(group.members)
        return firsts


def read_group(og: OpenGroup) -> list[Reading]:
    """One Reading per member, in member order (matched by the kernel's ids)."""
    if og.read_format & R.PERF_FORMAT_GROUP:
        values = readings_from(_read(og.fds[0], og.read_format, len(og.fds)))
    else:
        values = [r for fd in og.fds for r in readings_from(_read(fd, og.read_format, 1))]
    by_id = {ident: reading for ident, reading in values}
    return [by_id.get(ident, Reading()) for ident in og.ids]


def _read(fd: int, read_format: int, nr: int) -> R.ReadValues:
    size = R.read_format_size(read_format, nr)
    try:
        buf = os.read(fd, size)
    except OSError as exc:
        raise RecordError(f"cannot read a counter: {exc.strerror}.") from None
    try:
        return R.decode_read_format(buf, read_format)
    except R.RecordDecodeError as exc:
        raise RecordError(f"the kernel returned a short counter read ({len(buf)} bytes): {exc}.") from None


# errors ----------------------------------------------------------------------------------------


def _is_unsupported(exc: EventError) -> bool:
    return "does not support" in str(exc) or "not supported" in str(exc)


def has_hardware_pmu() -> bool:
    return CPU_PMU.is_dir() or any(Path("/sys/bus/event_source/devices").glob("armv*"))


def _explain(exc: RecordError, spec: EventSpec, group: EventGroup, leader: int, target: Target) -> ProfilerError:
    """One sentence that says which of the usual reasons applies."""
    hardware = spec.type in (PERF_TYPE_HARDWARE, PERF_TYPE_HW_CACHE, PERF_TYPE_RAW)
    if isinstance(exc, EventError) and _is_unsupported(exc) and hardware and not has_hardware_pmu():
        return EventError(
            f"hardware event '{spec.name}' is not supported on this machine (it has no hardware "
            "PMU, as in most VMs): count software events such as task-clock instead; "
            "'profiler list' shows what is available."
        )
    if leader < 0 or not group.braced:
        return exc
    if exc.errno == errno.E2BIG:
        return EventError(
            f"the group '{_short(group.name)}' cannot be scheduled as a unit: with "
            f"{len(group.members)} members its read exceeds the kernel's limit; split it."
        )
    if exc.errno == errno.EINVAL and _opens_alone(spec, target):
        return EventError(
            f"the events of group '{_short(group.name)}' cannot be scheduled together: the kernel "
            f"rejected '{spec.name}' as a member of it (it opens on its own: list it outside the braces)."
        )
    return exc


def _short(name: str, limit: int = 60) -> str:
    return name if len(name) <= limit else name[: limit - 4] + "...}"


def _opens_alone(spec: EventSpec, target: Target) -> bool:
    attr = new_attr(type=spec.type, config=spec.config, disabled=1,
                    exclude_user=int(spec.exclude_user), exclude_kernel=int(spec.exclude_kernel))
    attr.config1, attr.config2 = spec.config1, spec.config2
    try:
        fd = perf_event.perf_event_open(attr, target.pid, target.cpu, event_name=spec.name)
    except ProfilerError:
        return False
    os.close(fd)
    return True


