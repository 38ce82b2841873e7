"""The flat profile: rows keyed by the sort keys, with Self and Children weights.

Semantics (perf report's): *self* of a row is what its samples' leaf frames weigh;
*children* is what every sample whose stack contains the row's key weighs, each sample
counted once however often the key repeats in its stack (recursion). All numbers are
summed with numpy over groups of identical (stack, sample attributes), never per sample.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

import numpy as np
import numpy.typing as npt

from profiler.arrays import ranges
from profiler.dataclass import dataclass
from profiler.report.profile import Profile, cgroup_column, cgroup_id_text, cgroup_name, cgroup_ns_column

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]

SAMPLE_KEYS = ("pid", "tid", "comm", "cpu", "cgroup", "cgroup_id")
@dataclass(frozen=True)
class ReportRow:
    """One line of the flat profile. Fields of sort keys not in use are None."""

    self_samples: int
    self_period: int
    children_samples: int
    children_period: int
    comm: str | None = None
    pid: int | None = None
    tid: int | None = None
    cpu: int | None = None
    dso: str | None = None  # short name
    dso_path: str | None = None
    symbol: str | None = None  # display text: name, or hex address when unresolved
    kernel: bool = False  # [k] rather than [.]
    frame: int = -1  # frame id when sorting by sym
    srcline: str | None = None  # "file.c:12" of the sampled address (sort key srcline)
    cgroup: str | None = None  # the sample's cgroup path (sort key cgroup; --all-cgroups)
    cgroup_id: str | None = None  # its cgroup namespace, "dev/0xinode" (sort key cgroup_id; --namespaces)
    unnamed: bool = False  # a function without a symbol, named DSO+0xSTART (see symbols/unnamed.py)


@dataclass
class ReportRows:
    """The whole flat report as plain data (renderers only format it)."""

    event: str
    sort: tuple[str, ...]
    children: bool  # Children column shown
    total_samples: int
    total_period: int
    lost_samples: int
    rows: list[ReportRow]
    # For call graphs: the stacks (and their weights) behind each row, CSR by row index.
    row_start: I64 = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    row_stacks: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    row_weights: U64 = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    row_fkey: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    unwind_lines: list[str] = field(default_factory=list)  # DWARF unwinding quality (header)
    unwind: dict[str, Any] | None = None

    def percent(self, period: int) -> float:
        return 100.0 * period / self.total_period if self.total_period else 0.0

    def stacks_of(self, row: int) -> tuple[I64, U64]:
        a, b = int(self.row_start[row]), int(self.row_start[row + 1])
        return self.row_stacks[a:b], self.row_weights[a:b]


def frame_keys(profile: Profile, sort: tuple[str, ...]) -> tuple[I64, list[tuple[str, str, bool]]]:
    """The frame-derived key of every frame: its id (sorting by sym), its DSO's id (by dso),
    or 0. Also (short name, path, kernel?) by DSO id."""
    n = len(profile.frames)
    ids: dict[str, int] = {}
    info: list[tuple[str, str, bool]] = []
    dso_of = np.empty(n, dtype=np.int64)
    for i, fr in enumerate(profile.frames.frames):
        if fr.dso_path not in ids:
            ids[fr.dso_path] = len(info)
            info.append((fr.dso, fr.dso_path, fr.is_kernel))
        dso_of[i] = ids[fr.dso_path]
    if "sym" in sort:
        return np.arange(n, dtype=np.int64), info
    if "dso" in sort:
        return dso_of, info
    return np.zeros(n, dtype=np.int64), info


def _group(columns: list[npt.NDArray[Any]]) -> tuple[I64, I64]:
    """Sort order and the start of each run of identical rows across ``columns``."""
    order = np.lexsort(columns[::-1])
    n = len(order)
    new = np.zeros(n, dtype=bool)
    if n:
        new[0] = True
        for col in columns:
            c = col[order]
            new[1:] |= c[1:] != c[:-1]
    return order, np.flatnonzero(new)


def aggregate(profile: Profile, sort: tuple[str, ...], children: bool,
              percent_limit: float = 0.0, keep_stacks: bool = False,
              percentage: str = "absolute") -> ReportRows:
    """Build the flat profile; ``children`` is ignored without callchains. ``percentage``
    as perf's: "absolute" (its default) keeps the total of the samples before the entry
    filters (--comm/--pid/--tid/--dso/--symbol/--trace-filter), "relative" is of those left."""
    children = children and profile.has_callchains
    s = profile.samples
    attr_names = [k for k in SAMPLE_KEYS if k in sort]
    sample_cols: dict[str, npt.NDArray[Any]] = {"pid": s.pid, "tid": s.tid, "comm": profile.comm,
                                                "cpu": s.cpu, "cgroup": cgroup_column(profile),
                                                "cgroup_id": cgroup_ns_column(profile)}
    fkey, dso_info = frame_keys(profile, sort)

    # 1. groups of samples with the same stack and attributes
    cols = [profile.stack] + [sample_cols[k] for k in attr_names]
    order, starts = _group(cols)
    g_count = (np.add.reduceat(profile.sample_weights()[order], starts).astype(np.int64) if len(starts)
               else np.zeros(0, np.int64))
    g_period = np.add.reduceat(s.period[order], starts) if len(starts) else np.zeros(0, np.uint64)
    g_first = order[starts]
    g_stack = profile.stack[g_first]
    g_attrs = [sample_cols[k][g_first] for k in attr_names]
    line_texts: list[str] = []
    if "srcline" in sort:  # a function of the stack: keyed per group, not per sample
        stack_lines, line_texts = srcline_keys(profile)
        attr_names.append("srcline")
        g_attrs.append(stack_lines[g_stack])

    # 2. self: the leaf's key
    leaf_key = fkey[profile.leaf_frames()[g_stack]] if len(g_stack) else np.zeros(0, np.int64)
    self_rows = _sum_rows(g_attrs + [leaf_key], g_count, g_period)

    # 3. children: every distinct key in the stack, once
    if children:
        p_start, p_key = _distinct_keys_per_stack(profile, fkey)
        plen = np.diff(p_start)[g_stack]
        idx = ranges(p_start[g_stack], plen)
        grp = np.repeat(np.arange(len(g_stack), dtype=np.int64), plen)
        exp_cols = [a[grp] for a in g_attrs] + [p_key[idx]]
        child_rows = _sum_rows(exp_cols, g_count[grp], g_period[grp])
        contrib_cols, contrib_w, contrib_stack = exp_cols, g_period[grp], g_stack[grp]
    else:
        child_rows = {}
        contrib_cols, contrib_w, contrib_stack = g_attrs + [leaf_key], g_period, g_stack

    keys = list(child_rows) if children else list(self_rows)
    rows = [_row(profile, sort, attr_names, dso_info, k, self_rows.get(k, (0, 0)), child_rows.get(k, (0, 0)),
                 line_texts) for k in keys]
    total, total_samples = profile.total_period, profile.total_samples
    if percentage == "absolute" and profile.base_period:
        total, total_samples = profile.base_period, profile.base_samples

    def primary(r: ReportRow) -> int:
        return r.children_period if children else r.self_period

    order_keys = sorted(range(len(rows)), key=lambda i: (-primary(rows[i]), -rows[i].self_period,
                                                          _text_key(rows[i])))
    if percent_limit > 0 and total:
        order_keys = [i for i in order_keys if 100.0 * primary(rows[i]) / total >= percent_limit]
    rows_sorted = [rows[i] for i in order_keys]
    flat = ReportRows(profile.event, sort, children, total_samples, total,
                       profile.lost_samples, rows_sorted)
    if profile.unwind is not None:
        flat.unwind_lines = profile.unwind.header_lines()
        flat.unwind = profile.unwind.to_dict()
    flat.unwind_lines = [*flat.unwind_lines, *profile.header_notes]
    if keep_stacks:
        _attach_stacks(flat, [keys[i] for i in order_keys], contrib_cols, contrib_w, contrib_stack)
    return flat


def _sum_rows(cols: list[I64], count: I64, period: U64) -> dict[tuple[int, ...], tuple[int, int]]:
    if not len(count):
        return {}
    order, starts = _group(cols)
    c = np.add.reduceat(count[order], starts)
    p = np.add.reduceat(period[order], starts)
    keys = np.stack([col[order][starts] for col in cols], axis=1).tolist()
    return {tuple(k): (int(a), int(b)) for k, a, b in zip(keys, c.tolist(), p.tolist())}


def _distinct_keys_per_stack(profile: Profile, fkey: I64) -> tuple[I64, I64]:
    """CSR of the distinct frame keys of each stack."""
    u = profile.num_stacks
    lens = np.diff(profile.stack_start)
    owner = np.repeat(np.arange(u, dtype=np.int64), lens)
    keys = fkey[profile.stack_frames]
    order = np.lexsort((keys, owner))
    o, k = owner[order], keys[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (o[1:] != o[:-1]) | (k[1:] != k[:-1])
    counts = np.bincount(o[new], minlength=u)
    start = np.zeros(u + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    return start, k[new]


def srcline_keys(profile: Profile) -> tuple[I64, list[str]]:
    """Per stack, a key for its sampled address's source line, and the key texts: the
    DWARF ``file.c:12``, else perf's fallback ``symbol+offset`` (decimal)."""
    lines = profile.leaf_srclines()
    texts = list(profile.srclines)
    keys = lines.copy()
    missing = np.flatnonzero(lines < 0)
    if len(missing):
        first = profile.stack_start[:-1][missing]
        leaf = profile.leaf_frames()[missing]
        offs = profile.stack_table.offsets[first] if len(profile.stack_table.offsets) else first
        ids: dict[tuple[int, int], int] = {}
        for j, (f, off) in zip(missing.tolist(), zip(leaf.tolist(), offs.tolist())):
            found = ids.get((f, off))
            if found is None:
                fr = profile.frame(f)
                found = ids[(f, off)] = len(texts)
                texts.append(f"{fr.label(profile.demangle)}+{off}" if fr.resolved else fr.label(profile.demangle))
            keys[j] = found
    return keys, texts


def _row(profile: Profile, sort: tuple[str, ...], attr_names: list[str],
         dso_info: list[tuple[str, str, bool]], key: tuple[int, ...],
         self_w: tuple[int, int], child_w: tuple[int, int], line_texts: list[str]) -> ReportRow:
    vals = dict(zip(attr_names, key[:-1]))
    fk = key[-1]
    fields: dict[str, Any] = {}
    if "srcline" in vals:
        fields["srcline"] = line_texts[int(vals["srcline"])]
    if "comm" in vals:
        fields["comm"] = profile.comm_names[vals["comm"]]
    for k in ("pid", "tid", "cpu"):
        if k in vals:
            fields[k] = int(vals[k])
    if "cgroup" in vals:
        fields["cgroup"] = cgroup_name(profile, int(vals["cgroup"]))
    if "cgroup_id" in vals:
        fields["cgroup_id"] = cgroup_id_text(profile, int(vals["cgroup_id"]))
    if "sym" in sort:
        fr = profile.frames[fk]
        fields.update(symbol=fr.label(profile.demangle), kernel=fr.is_kernel, frame=fk, unnamed=fr.unnamed)
        if "dso" in sort:
            fields.update(dso=fr.dso, dso_path=fr.dso_path)
    elif "dso" in sort:
        short, path, kernel = dso_info[fk]
        fields.update(dso=short, dso_path=path, kernel=kernel)
    return ReportRow(self_w[0], self_w[1], child_w[0], child_w[1], **fields)


def _text_key(row: ReportRow) -> tuple[str, ...]:
    return (row.comm or "", str(row.pid or 0), str(row.tid or 0), str(row.cpu or 0),
            row.dso or "", row.symbol or "", row.srcline or "", row.cgroup or "", row.cgroup_id or "")



def _attach_stacks(flat: ReportRows, keys: list[tuple[int, ...]], cols: list[I64], w: U64,
                   stacks: I64) -> None:
    """Index, for each shown row, the stacks behind it (for call graphs)."""
    row_of = {k: i for i, k in enumerate(keys)}
    if not len(w):
        flat.row_start = np.zeros(len(keys) + 1, dtype=np.int64)
        return
    tup = np.stack(cols, axis=1).tolist()
    rid = np.fromiter((row_of.get(tuple(t), -1) for t in tup), dtype=np.int64, count=len(tup))
    keep = rid >= 0
    rid, st, ww = rid[keep], stacks[keep], w[keep]
    order = np.argsort(rid, kind="stable")
    flat.row_stacks, flat.row_weights = st[order], ww[order]
    flat.row_fkey = np.asarray([k[-1] for k in keys], dtype=np.int64)
    counts = np.bincount(rid, minlength=len(keys))
    flat.row_start = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(counts, out=flat.row_start[1:])
