"""Call trees as perf report's ``--stdio`` graph text.

The drawing follows perf's: a fixed 12-column margin; one column of ``|`` per depth whose
branch continues; ``--12.34%--`` before the first frame of a branch (percent of the
report's total); the other frames of a compressed node aligned under it. A tree with one
top node that carries the whole row's weight is drawn as ``---name`` without a percent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from profiler.report.callgraph import CallNode

MARGIN = " " * 12
Label = Callable[[int], str]


def render_tree(out: TextIO, nodes: list[CallNode], row_weight: int, total: int, label: Label) -> None:
    """Write one row's tree (nothing at all when ``nodes`` is empty), then a blank line."""
    if not nodes:
        return
    margin = 0
    if len(nodes) == 1 and nodes[0].weight == row_weight:
        top = nodes[0]
        out.write(f"{MARGIN}|\n")
        for i, fid in enumerate(top.frames):
            prefix = "---" if i == 0 else "   "
            out.write(f"{MARGIN}{prefix}{label(fid)}\n")
        margin = 3
        nodes = top.children
    _branches(out, nodes, total, 1, 1, margin, label)
    out.write("\n")


def _percent(weight: int, total: int) -> str:
    return f"{100.0 * weight / total:.2f}%" if total else "0.00%"


def _branches(out: TextIO, nodes: list[CallNode], total: int, depth: int, mask: int, margin: int,
              label: Label) -> None:
    new_mask = mask
    lead = MARGIN + " " * margin
    for k, node in enumerate(nodes):
        if k == len(nodes) - 1:
            new_mask &= ~(1 << (depth - 1))
        out.write(lead + "".join("|          " if mask & (1 << i) else "           "
                                 for i in range(depth)) + "\n")
        for j, fid in enumerate(node.frames):
            parts = []
            for i in range(depth):
                parts.append("|" if new_mask & (1 << i) else " ")
                if j == 0 and i == depth - 1:
                    parts.append(f"--{_percent(node.weight, total)}--")
                else:
                    parts.append(" " * 10)
            out.write(lead + "".join(parts) + label(fid) + "\n")
        _branches(out, node.children, total, depth + 1, new_mask | (1 << depth), margin, label)
