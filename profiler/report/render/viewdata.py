"""The data of ``profiler view``'s page, packed: built from the report pipeline's profiles.

The page (:mod:`profiler.report.render.view`) computes every view from these tables; nothing
here is aggregated for one view. One document for all events:

* ``strings``: every name, DSO, thread name and ``file:line`` once;
* ``frames``: per frame ``[name, dso, kind, inlined]`` (string indices, kind an index into
  ``kinds``); frames are shared by the events;
* the **stack table**: per stack node ``prefix`` (the caller's node, -1 at the root),
  ``frame``, ``line`` (string index of the frame's ``file:line``, -1 without) and ``offset``
  (the address's offset in its function, for the assembly view): a node is a distinct
  (prefix, frame, line, offset), so a sample's stack is one node id;
* ``threads``: per thread ``[pid, tid, comm]`` (its name at its last sample);
* per event, per-sample columns in time order: ``time`` (ns from the capture's start,
  delta-coded), ``cpu``, ``period``, ``pair`` and, when the detail was reduced, ``count`` (how
  many samples a row stands for); ``pair`` indexes the event's table of distinct (thread, stack)
  pairs, ``pair_thread`` and ``pair_stack`` (the stack as its leaf node), ordered by thread.

Columns are little-endian typed arrays after the JSON document in one buffer
(:func:`pack`): ``u32 JSON length, JSON, columns each 8-byte aligned``; the page inflates it
with the browser's ``DecompressionStream``.
"""

from __future__ import annotations

import json
import struct
from dataclasses import field
from typing import Any

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.report.profile import Profile
from profiler.report.render import utf8

KINDS: tuple[str, ...] = ("user", "kernel", "jit", "unknown", "state", "python")

#: Rows per event above which samples are merged into (time bucket, thread, cpu, stack) rows.
DEFAULT_MAX_ROWS = 2_000_000


@dataclass
class Marker:
    """A point in time on one thread's track: exec, fork, exit, lost, throttle."""

    kind: str
    time_ns: int  # from the capture's start
    pid: int
    tid: int
    text: str = ""


@dataclass
class ViewData:
    """What :func:`pack` writes: the document (JSON) and the columns it names."""

    doc: dict[str, Any]
    columns: list[tuple[str, npt.NDArray[Any]]] = field(default_factory=list)

    def add(self, name: str, values: npt.NDArray[Any]) -> dict[str, Any]:
        """Keep ``values`` as column ``name``; the descriptor the document holds for it."""
        values = _narrow(values)
        self.columns.append((name, values))
        return {"col": name, "type": values.dtype.name, "n": int(len(values))}


def _narrow(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """The smallest little-endian type that holds ``values`` exactly (floats stay float64)."""
    if values.dtype.kind == "f":
        return values.astype("<f8")
    if values.dtype.kind == "b":
        return values.astype("<u1")
    if not len(values):
        return values.astype("<u1")
    lo, hi = int(values.min()), int(values.max())
    for t in ("<u1", "<u2", "<u4") if lo >= 0 else ("<i1", "<i2", "<i4"):
        info = np.iinfo(np.dtype(t))
        if info.min <= lo and hi <= info.max:
            return values.astype(t)
    return values.astype("<f8")  # beyond 32 bits: exact up to 2**53 in the page


class Tables:
    """Strings, frames, threads and stack nodes shared by the events."""

    def __init__(self) -> None:
        self.strings: dict[str, int] = {}
        self.frames: dict[tuple[int, int, int, int], int] = {}
        self.frame_rows: list[int] = []
        self.threads: dict[tuple[int, int], int] = {}
        self.thread_rows: list[list[Any]] = []
        self.nodes: dict[tuple[int, int, int, int], int] = {}
        self.prefix: list[int] = []
        self.frame: list[int] = []
        self.line: list[int] = []
        self.offset: list[int] = []

    def string(self, text: str) -> int:
        return self.strings.setdefault(text, len(self.strings))

    def frame_id(self, name: str, dso: str, kind: str, inlined: bool) -> int:
        key = (self.string(name), self.string(dso), KINDS.index(kind) if kind in KINDS else 3, int(inlined))
        found = self.frames.get(key)
        if found is None:
            found = self.frames[key] = len(self.frames)
            self.frame_rows.extend(key)
        return found

    def node(self, prefix: int, frame: int, line: int, offset: int) -> int:
        key = (prefix, frame, line, offset)
        found = self.nodes.get(key)
        if found is None:
            found = self.nodes[key] = len(self.prefix)
            self.prefix.append(prefix)
            self.frame.append(frame)
            self.line.append(line)
            self.offset.append(offset)
        return found

    def thread(self, pid: int, tid: int, comm: str) -> int:
        found = self.threads.get((pid, tid))
        if found is None:
            found = self.threads[(pid, tid)] = len(self.thread_rows)
            self.thread_rows.append([pid, tid, self.string(comm)])
        return found


def _stack_nodes(profile: Profile, t: Tables) -> npt.NDArray[np.int64]:
    """The leaf node of each of the profile's distinct stacks (root first, inlined functions
    as their own frames, as the flame graph and report draw them)."""
    table = profile.stack_table
    fid_cache: dict[int, int] = {}
    leaf = np.full(profile.num_stacks, -1, dtype=np.int64)
    used = np.unique(profile.stack) if len(profile.stack) else np.zeros(0, np.int64)
    for k in used.tolist():
        node = -1
        for group in profile.address_groups(k):
            offset = int(table.offsets[group[0]])
            for e in group:
                raw = int(table.frames[e])
                fid = fid_cache.get(raw)
                if fid is None:
                    model = profile.model_frame(raw)
                    fid = fid_cache[raw] = t.frame_id(model.name, model.dso, model.kind, profile.frames[raw].inlined)
                line_id = int(table.srclines[e]) if table.srclines is not None else -1
                line = t.string(profile.srclines[line_id]) if line_id >= 0 else -1
                node = t.node(node, fid, line, offset if e == group[0] else 0)
        leaf[k] = node
    return leaf


def _reduce(time: npt.NDArray[np.int64], thread: npt.NDArray[np.int64], cpu: npt.NDArray[np.int64],
            stack: npt.NDArray[np.int64], period: npt.NDArray[np.float64], max_rows: int
            ) -> tuple[dict[str, npt.NDArray[Any]], int]:
    """Samples merged into rows of (time bucket, thread, cpu, stack) until at most
    ``max_rows`` remain; every sample still counted (``count``), its time the bucket's start.
    Returns the columns and the bucket width in ns."""
    span = int(time.max() - time.min()) + 1 if len(time) else 1
    width = max(1, span // max(1, max_rows))
    while True:
        bucket = (time // width) * width
        order = np.lexsort((stack, cpu, thread, bucket))
        keys = np.stack([bucket[order], thread[order], cpu[order], stack[order]])
        first = np.ones(len(order), dtype=bool)
        first[1:] = (keys[:, 1:] != keys[:, :-1]).any(axis=0)
        starts = np.flatnonzero(first)
        if len(starts) <= max_rows:
            break
        width *= 2
    cols = {"time": keys[0, starts], "thread": keys[1, starts], "cpu": keys[2, starts], "stack": keys[3, starts],
            "period": np.add.reduceat(period[order], starts),
            "count": np.diff(np.append(starts, len(order)))}
    return cols, width


def add_event(view: ViewData, t: Tables, profile: Profile, t0: int, weight: str, max_rows: int) -> None:
    """Event ``profile``'s columns into ``view`` (see the module docstring)."""
    s = profile.samples
    leaf = _stack_nodes(profile, t)
    comms = dict(profile.last_comms())
    pairs = np.stack([s.pid.astype(np.int64), s.tid.astype(np.int64)], axis=1) if len(s) else np.zeros((0, 2), np.int64)
    uniq, inverse = np.unique(pairs, axis=0, return_inverse=True) if len(s) else (pairs, np.zeros(0, np.int64))
    ids = np.asarray([t.thread(int(p), int(tid), comms.get(int(tid), "")) for p, tid in uniq.tolist()], np.int64)
    cols: dict[str, npt.NDArray[Any]] = {
        "time": s.time.astype(np.int64) - t0,
        "thread": ids[inverse.reshape(-1)] if len(s) else np.zeros(0, np.int64),
        "cpu": s.cpu.astype(np.int64),
        "stack": leaf[profile.stack] if len(s) else np.zeros(0, np.int64),
        "period": s.period.astype(np.float64),
    }
    if profile.weight is not None:
        cols["count"] = profile.weight
    bucket_ns = 0
    if len(s) > max_rows:
        cols, bucket_ns = _reduce(cols["time"], cols["thread"], cols["cpu"], cols["stack"], cols["period"],
                                  max_rows)
    order = np.argsort(cols["time"], kind="stable")
    if not (order == np.arange(len(order))).all():
        cols = {k: v[order] for k, v in cols.items()}
    name = f"e{len(view.doc['events'])}"
    time = cols.pop("time")
    entry: dict[str, Any] = {
        "name": profile.event, "weight": weight, "samples": profile.total_samples,
        "period": profile.total_period, "rows": int(len(time)), "reduced_bucket_ns": bucket_ns,
        "has_callchains": profile.has_callchains,
        "time": view.add(name + ".time", np.diff(time, prepend=0) if len(time) else time),
        "first_ns": int(time[0]) if len(time) else 0,
    }
    pair, pair_thread, pair_stack = _pairs(cols.pop("thread"), cols.pop("stack"))
    cols["pair"] = pair
    for key, values in cols.items():
        entry[key] = view.add(f"{name}.{key}", values)
    entry["pair_thread"] = view.add(f"{name}.pair_thread", pair_thread)
    entry["pair_stack"] = view.add(f"{name}.pair_stack", pair_stack)
    view.doc["events"].append(entry)


def _pairs(thread: npt.NDArray[np.int64], stack: npt.NDArray[np.int64]
           ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Each row's (thread, stack) as one id into a table of the distinct pairs, ordered by
    thread then stack (each thread's pairs are one run): the page sums a selection into this
    table with typed arrays (sort + mask: np.unique is slow on millions of keys)."""
    if not len(thread):
        z = np.zeros(0, np.int64)
        return z, z, z
    key = thread.astype(np.int64) * (int(stack.max()) + 1) + stack
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    first = np.ones(len(key), dtype=bool)
    first[1:] = sorted_key[1:] != sorted_key[:-1]
    ids = np.cumsum(first) - 1
    pair = np.empty(len(key), dtype=np.int64)
    pair[order] = ids
    starts = order[first]
    return pair, thread[starts], stack[starts]


def finish_tables(view: ViewData, t: Tables) -> None:
    """The shared tables into the document and columns."""
    view.doc["strings"] = list(t.strings)
    view.doc["kinds"] = list(KINDS)
    view.doc["frames"] = view.add("frames", np.asarray(t.frame_rows, dtype=np.int64))
    view.doc["threads"] = t.thread_rows
    view.doc["stacks"] = {"prefix": view.add("stack.prefix", np.asarray(t.prefix, dtype=np.int64)),
                          "frame": view.add("stack.frame", np.asarray(t.frame, dtype=np.int64)),
                          "line": view.add("stack.line", np.asarray(t.line, dtype=np.int64)),
                          "offset": view.add("stack.offset", np.asarray(t.offset, dtype=np.int64))}


def pack(view: ViewData) -> bytes:
    """``u32 length, JSON document, columns`` (each column 8-byte aligned, its byte offset
    in the document's column index)."""
    index: dict[str, int] = {}
    body = bytearray()
    for name, values in view.columns:
        body.extend(b"\0" * (-len(body) % 8))
        index[name] = len(body)
        body.extend(values.tobytes())
    view.doc["columns"] = index
    # names that are not UTF-8 (surrogate escapes) as \xNN, the one rule of render/utf8.py
    text = utf8.json_text(json.dumps(view.doc, separators=(",", ":"), ensure_ascii=True)).encode("ascii")
    text += b" " * (-(4 + len(text)) % 8)
    return struct.pack("<I", len(text)) + text + bytes(body)
