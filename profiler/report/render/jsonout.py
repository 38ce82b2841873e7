"""The flat profile (and optionally call trees) as JSON.

Shape (stable; documented in docs/report.md)::

    {"event": str, "total_samples": int, "total_period": int, "lost_samples": int,
     "sort": [str, ...], "children_mode": bool,
     "rows": [{"children": float | null, "self": float, "samples": int, "period": int,
               "children_samples": int | null, "children_period": int | null,
               <one field per sort key: "comm", "pid", "tid", "cpu", "dso", "symbol">,
               "unnamed": bool (with "symbol": a function without a symbol, DSO+0xSTART),
               "kernel": bool, "callgraph": [node, ...]   (only with a call graph)}, ...]}

Percentages are of ``total_period``, rounded to 4 decimals; ``samples``/``period`` are the
row's self counts. A call-graph node is ``{"symbol": str, "dso": str, "percent": float,
"period": int, "srclines": [{"srcline": "file.c:12", "period": int}, ...], "children": [node,
...]}`` (a compressed chain becomes nested single nodes; ``srclines`` are the source lines the
node's period went through, heaviest first: the sampled line of a leaf, the call's line of a
caller; empty without DWARF lines).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from profiler.report.render import utf8
from profiler.report.aggregate import ReportRows, ReportRow
from profiler.report.callgraph import CallNode, PerfReport

FrameFields = Callable[[int], tuple[str, str]]


def row_dict(flat: ReportRows, row: ReportRow) -> dict[str, Any]:
    """One row as plain JSON data."""
    out: dict[str, Any] = {
        "children": round(flat.percent(row.children_period), 4) if flat.children else None,
        "self": round(flat.percent(row.self_period), 4),
        "samples": row.self_samples,
        "period": row.self_period,
        "children_samples": row.children_samples if flat.children else None,
        "children_period": row.children_period if flat.children else None,
    }
    for key in flat.sort:
        if key == "sym":
            out["symbol"] = row.symbol
            out["unnamed"] = row.unnamed
        else:
            out[key] = getattr(row, key)
    out["kernel"] = row.kernel
    return out


def tree_json(nodes: list[CallNode], total: int, frame: FrameFields,
              srclines: Sequence[str] = ()) -> list[dict[str, Any]]:
    out = []
    for node in nodes:
        inner = tree_json(node.children, total, frame, srclines)
        for k in range(len(node.frames) - 1, -1, -1):
            name, dso = frame(node.frames[k])
            lines = node.lines[k] if k < len(node.lines) else {}
            inner = [{"symbol": name, "dso": dso,
                      "percent": round(100.0 * node.weight / total, 4) if total else 0.0,
                      "period": node.weight,
                      "srclines": [{"srcline": srclines[i], "period": w}
                                   for i, w in sorted(lines.items(), key=lambda kv: (-kv[1], srclines[kv[0]]))],
                      "children": inner}]
        out.extend(inner)
    return out


def profile_dict(report: PerfReport) -> dict[str, Any]:
    flat, graph = report.flat, report.graph
    rows = []
    for i, row in enumerate(flat.rows):
        d = row_dict(flat, row)
        if graph is not None:
            d["callgraph"] = tree_json(graph.trees[i], flat.total_period, graph.names.__getitem__, graph.srclines)
        rows.append(d)
    return {
        "event": flat.event,
        "total_samples": flat.total_samples,
        "total_period": flat.total_period,
        "lost_samples": flat.lost_samples,
        **({"unwind": flat.unwind} if flat.unwind is not None else {}),
        "sort": list(flat.sort),
        "children_mode": flat.children,
        "rows": rows,
    }


def write(report: PerfReport, out: TextIO) -> None:
    out.write(utf8.json_text(json.dumps(profile_dict(report), indent=1, ensure_ascii=False)))
    out.write("\n")
