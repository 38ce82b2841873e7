"""Replay of a capture's non-sample records in time order: maps and comms per process.

The handlers (``HANDLERS``, one per record type, as perf's tool callbacks) keep the state of
every process while the records are replayed:

* COMM: the thread's name; with ``PERF_RECORD_MISC_COMM_EXEC`` ("the comm changed because
  of exec", perf_event.h) the process starts again with no maps.
* FORK: a new process (``pid != ppid``) starts with its parent's maps; a new thread
  (``pid == ppid``) shares its process's maps, which are keyed by pid. The new thread takes
  its parent thread's name.
* MMAP / MMAP2: an executable mapping; it replaces whatever it overlaps. Maps of pid -1
  are the kernel's (perf's convention) and are global. Data mappings
  (``PERF_RECORD_MISC_MMAP_DATA``) carry no code and are ignored.
* NAMESPACES: the thread's cgroup namespace (dev, inode; ``report --sort cgroup_id``); a
  FORK gives the new thread its parent thread's until its own record comes (the kernel sends
  one at every fork, unshare and setns; /proc synthesis one per thread).
* EXIT: nothing to undo (late samples of an exiting thread still resolve).
* LOST / LOST_SAMPLES: counted.

Samples are not replayed one by one. Every change is logged as (entity, boundary, value):
"from sample number ``boundary`` on (in time order), ``entity`` has ``value``". Then a
sample's map generation and comm are found for all samples at once with one searchsorted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import field
from typing import Any

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.format import records as R
from profiler.format.abi import CGROUP_NS_INDEX
from profiler.format.decode.columns import OtherRecord
from profiler.format.recorded import InodeKey, RecordedFile
from profiler.report.maps import EMPTY, KERNEL_MAP_PREFIX, Dso, DsoTable, Map, MapSnapshot

I64 = npt.NDArray[np.int64]
Ints = npt.NDArray[Any]  # any integer dtype

#: perf's pid for kernel maps; the kernel writes the u32 field, so -1 may read as 2**32 - 1.
KERNEL_PIDS = (-1, 0xFFFFFFFF)


@dataclass
class ReplayState:
    """Process state while replaying, and the change logs that samples are matched against."""

    dsos: DsoTable = field(default_factory=DsoTable)
    build_ids: dict[str, str] = field(default_factory=dict)  # path -> hex, from metadata
    by_inode: dict[InodeKey, RecordedFile] = field(default_factory=dict)  # the same, per mapped inode
    snapshots: list[MapSnapshot] = field(default_factory=lambda: [EMPTY])  # generation -> maps
    current_gen: dict[int, int] = field(default_factory=dict)  # pid -> generation
    comm_names: list[str] = field(default_factory=list)
    comm_ids: dict[str, int] = field(default_factory=dict)
    tid_comm: dict[int, int] = field(default_factory=dict)
    kernel_maps: list[tuple[int, int, str]] = field(default_factory=list)  # start, end, name
    gen_log: list[tuple[int, int, int]] = field(default_factory=list)  # (pid, boundary, gen)
    comm_log: list[tuple[int, int, int]] = field(default_factory=list)  # (tid, boundary, comm)
    lost: int = 0
    lost_samples: int = 0
    cgroups: dict[int, str] = field(default_factory=dict)  # cgroup id -> path (PERF_RECORD_CGROUP)
    cgroup_ns_keys: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)])  # (dev, ino); 0: none
    cgroup_ns_ids: dict[tuple[int, int], int] = field(default_factory=dict)
    tid_cgroup_ns: dict[int, int] = field(default_factory=dict)
    cgroup_ns_log: list[tuple[int, int, int]] = field(default_factory=list)  # (tid, boundary, key index)
    boundary: int = 0  # samples (in time order) before the record being replayed
    parent: dict[int, int] = field(default_factory=dict)  # pid -> the pid it forked from (the latest)

    def comm_id(self, name: str) -> int:
        found = self.comm_ids.get(name)
        if found is None:
            found = len(self.comm_names)
            self.comm_names.append(name)
            self.comm_ids[name] = found
        return found

    def set_gen(self, pid: int, gen: int) -> None:
        self.current_gen[pid] = gen
        self.gen_log.append((pid, self.boundary, gen))

    def set_comm(self, tid: int, comm: int) -> None:
        self.tid_comm[tid] = comm
        self.comm_log.append((tid, self.boundary, comm))

    def set_cgroup_ns(self, tid: int, key: tuple[int, int]) -> None:
        found = self.cgroup_ns_ids.get(key)
        if found is None:
            found = self.cgroup_ns_ids[key] = len(self.cgroup_ns_keys)
            self.cgroup_ns_keys.append(key)
        self.tid_cgroup_ns[tid] = found
        self.cgroup_ns_log.append((tid, self.boundary, found))

    def snapshot_of(self, pid: int) -> MapSnapshot:
        return self.snapshots[self.current_gen.get(pid, 0)]


def on_comm(state: ReplayState, rec: R.Record) -> None:
    assert isinstance(rec, R.Comm)
    state.set_comm(rec.tid, state.comm_id(rec.comm))
    if rec.misc & R.PERF_RECORD_MISC_COMM_EXEC:
        state.set_gen(rec.pid, 0)


def on_fork(state: ReplayState, rec: R.Record) -> None:
    assert isinstance(rec, R.Fork)
    if rec.pid != rec.ppid:
        state.set_gen(rec.pid, state.current_gen.get(rec.ppid, 0))
        state.parent[rec.pid] = rec.ppid
    parent_comm = state.tid_comm.get(rec.ptid)
    if parent_comm is not None:
        state.set_comm(rec.tid, parent_comm)
    parent_ns = state.tid_cgroup_ns.get(rec.ptid)
    if parent_ns is not None:
        state.set_cgroup_ns(rec.tid, state.cgroup_ns_keys[parent_ns])


def on_mmap(state: ReplayState, rec: R.Record) -> None:
    assert isinstance(rec, (R.Mmap, R.Mmap2))
    if rec.len <= 0:
        return
    end = min(rec.addr + rec.len, (1 << 64) - 1)  # a u64 address space (a hostile len wraps)
    if rec.pid in KERNEL_PIDS or rec.filename.startswith(KERNEL_MAP_PREFIX):
        state.kernel_maps.append((rec.addr, end, rec.filename))
        return
    if rec.misc & R.PERF_RECORD_MISC_MMAP_DATA:
        return
    build_id: str | None = None
    content: str | None = None
    found = state.by_inode.get((rec.filename, rec.maj, rec.min, rec.ino)) if isinstance(rec, R.Mmap2) else None
    if isinstance(rec, R.Mmap2) and rec.build_id:
        build_id = rec.build_id.hex()
    elif found is not None:  # this inode's own entry: never another namespace's file at the path
        build_id, content = found.build_id, found.check
    else:
        build_id = state.build_ids.get(rec.filename)
    dso = state.dsos.intern(Dso(rec.filename, build_id, content))
    snap = state.snapshot_of(rec.pid).with_map(Map(rec.addr, end, rec.pgoff, dso))
    state.snapshots.append(snap)
    state.set_gen(rec.pid, len(state.snapshots) - 1)


def on_lost(state: ReplayState, rec: R.Record) -> None:
    assert isinstance(rec, R.Lost)
    state.lost += rec.lost


def on_lost_samples(state: ReplayState, rec: R.Record) -> None:
    assert isinstance(rec, R.LostSamples)
    state.lost_samples += rec.lost


Handler = Callable[[ReplayState, R.Record], None]

def on_cgroup(state: ReplayState, rec: R.Record) -> None:
    assert isinstance(rec, R.Cgroup)
    state.cgroups[rec.id] = rec.path


def on_namespaces(state: ReplayState, rec: R.Record) -> None:
    """The thread's cgroup namespace: entry CGROUP_NS_INDEX, (0, 0) in a record too short to
    have it (as perf, which shows ``0/0x0`` for a thread without one)."""
    assert isinstance(rec, R.Namespaces)
    links = rec.namespaces
    state.set_cgroup_ns(rec.tid, links[CGROUP_NS_INDEX] if len(links) > CGROUP_NS_INDEX else (0, 0))


HANDLERS: dict[type[R.Record], Handler] = {
    R.Cgroup: on_cgroup,
    R.Namespaces: on_namespaces,
    R.Comm: on_comm,
    R.Fork: on_fork,
    R.Mmap: on_mmap,
    R.Mmap2: on_mmap,
    R.Lost: on_lost,
    R.LostSamples: on_lost_samples,
}


@dataclass
class ReplayResult:
    """Per-sample map generation and comm, and everything needed to interpret them."""

    state: ReplayState
    sample_gen: I64  # index into state.snapshots, per sample
    sample_comm: I64  # index into comm_names, per sample
    comm_names: list[str]
    sample_cgroup_ns: I64 | None = None  # index into state.cgroup_ns_keys, per sample (NAMESPACES seen)

    @property
    def snapshots(self) -> list[MapSnapshot]:
        return self.state.snapshots

    @property
    def dsos(self) -> DsoTable:
        return self.state.dsos


def replay(others: Sequence[OtherRecord], others_before: I64, sample_pid: npt.NDArray[Any],
           sample_tid: npt.NDArray[Any],
           build_ids: dict[str, str] | None = None) -> ReplayResult:
    """Replay ``others`` (sorted by time) and place every sample in the state of its time.

    ``others_before[k]`` is the number of samples that precede ``others[k]``, so a change made
    by ``others[k]`` applies to samples from index ``others_before[k]`` on.
    """
    state = ReplayState(build_ids=dict(build_ids or {}), by_inode=dict(getattr(build_ids, "by_inode", {})))
    for k, other in enumerate(others):
        handler = HANDLERS.get(type(other.record))
        if handler is not None:
            state.boundary = int(others_before[k])
            handler(state, other.record)
    gen = lookup_changes(sample_pid, state.gen_log, default=0)
    comm = _sample_comms(state, sample_pid, sample_tid, np.arange(len(sample_pid), dtype=np.int64))
    name_unknown(state, sample_tid, comm)
    cgroup_ns = lookup_changes(sample_tid, state.cgroup_ns_log, default=0) if state.cgroup_ns_log else None
    return ReplayResult(state, gen, comm, state.comm_names, cgroup_ns)


def replay_in_order(others: Sequence[OtherRecord], build_ids: dict[str, str] | None = None) -> ReplayState:
    """Replay ``others`` (sorted by time) with the change made by ``others[k]`` logged at
    position ``k + 1``: a sample's position is then the number of records before it (see
    :func:`place_samples`), and the samples need not be in memory, or in order, at once."""
    state = ReplayState(build_ids=dict(build_ids or {}), by_inode=dict(getattr(build_ids, "by_inode", {})))
    for k, other in enumerate(others):
        handler = HANDLERS.get(type(other.record))
        if handler is not None:
            state.boundary = k + 1
            handler(state, other.record)
    return state


def place_samples(state: ReplayState, pid: Ints, tid: Ints, positions: I64) -> tuple[I64, I64]:
    """Map generation and comm of samples that come after ``positions`` of the records
    replayed by :func:`replay_in_order`; comm -1 where the thread was never named (see
    :func:`name_unknown`). Reads ``state`` only: safe in worker processes."""
    gen = lookup_changes(pid, state.gen_log, default=0, positions=positions)
    return gen, _sample_comms(state, pid, tid, positions)


def name_unknown(state: ReplayState, tid: Ints, comm: I64) -> None:
    """Give the threads never named (comm -1) perf's spelling ``:TID``, in place."""
    still = comm < 0
    if still.any():
        comm[still] = [state.comm_id(f":{t}") for t in tid[still].tolist()]


def _sample_comms(state: ReplayState, pid: Ints, tid: Ints, positions: I64) -> I64:
    """The comm of each sample's thread; its process's when the thread was never named;
    -1 when neither is known."""
    by_tid = lookup_changes(tid, state.comm_log, default=-1, positions=positions)
    missing = by_tid < 0
    if missing.any():
        by_tid[missing] = lookup_changes(pid[missing], state.comm_log, default=-1,
                                         positions=positions[missing])
    return by_tid


def lookup_changes(entity: Ints, log: list[tuple[int, int, int]], default: int,
                   positions: I64 | None = None) -> I64:
    """For sample i (at time-order position ``positions[i]``, default i) of ``entity[i]``:
    the value of the latest logged change of that entity with boundary <= the position."""
    n = len(entity)
    if not log or n == 0:
        return np.full(n, default, dtype=np.int64)
    pos = np.arange(n, dtype=np.int64) if positions is None else positions.astype(np.int64)
    changes = np.asarray(log, dtype=np.int64)
    span = int(max(int(pos.max()) if n else 0, int(changes[:, 1].max()))) + 2
    base = int(min(int(entity.min()), int(changes[:, 0].min())))
    # Stable order: by entity, then boundary, then log order (the later change wins).
    order = np.lexsort((np.arange(len(changes)), changes[:, 1], changes[:, 0]))
    changes = changes[order]
    ckey = (changes[:, 0] - base) * span + changes[:, 1]
    skey = (entity.astype(np.int64) - base) * span + pos
    at = np.searchsorted(ckey, skey, side="right") - 1
    safe = np.maximum(at, 0)
    ok = (at >= 0) & (changes[safe, 0] == entity)
    return np.where(ok, changes[safe, 2], default).astype(np.int64)
