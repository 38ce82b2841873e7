"""Differential flame graph: two captures' stacks merged into one tree, drawn in one side's shape.

Two steps, as every renderer:

1. :func:`build_diff_tree` merges BASE's and NEW's stacks into one call tree whose nodes
   match by (function name, DSO basename) along the path from the root — never by address,
   so two builds of one program compare — and keeps both sides' weights and sample counts
   per node. It is flattened in preorder in the drawn side's shape (NEW's; BASE's with
   ``negate``): a node is kept when the drawn side has weight there. What only the other side
   has (removed code, or added code with ``negate``) is counted in :attr:`DiffTree.hidden_samples`.
   As in the flame graph, frames narrower than ``min_width`` of the drawn side's total are left
   out (none by default), a tree above :data:`~profiler.report.render.flamegraph.MAX_NODES`
   is cut to it narrowest first, the page says how many frames either left out, and nodes
   keep the drawn side's heaviest source lines for the tooltip when its stacks carry them.
2. :func:`render_diffgraph` writes the flame graph page (the same template, stylesheet and
   script as :mod:`profiler.report.render.flamegraph`) with the other side's weights beside
   the drawn ones; the page colours each frame by its change in share — its weight's share
   of its own side's total, NEW minus BASE, in percentage points — red for more, blue for
   less, saturated in proportion to the largest change (:attr:`DiffTree.scale`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from typing import TextIO

from profiler.dataclass import dataclass
from profiler.errors import UsageError
from profiler.report.model import Frame, ProfileMeta, StackSet, StackSample, Weight
from profiler.report.render import flamegraph
from profiler.report.render.flamegraph import (
    DEFAULT_MIN_WIDTH,
    LINES_MIN_WIDTH,
    ROOT_FRAME,
    FlameTree,
    GroupBy,
    group_frame,
    heaviest_lines,
    page_html,
    tree_payload,
)


@dataclass(frozen=True)
class DiffGraphOptions:
    """How the differential flame graph is built.

    weight: widths and shares by ``"samples"`` or by summed ``"period"``.
    negate: draw BASE's shape instead of NEW's (colours still say NEW minus BASE).
    group_by: the level under the root, as in the flame graph.
    title: the page title; ``None``: "BASE → NEW".
    min_width: leave out frames narrower than this fraction of the drawn side's total.
    """

    weight: Weight = "samples"
    negate: bool = False
    group_by: GroupBy = "comm"
    title: str | None = None
    min_width: float = DEFAULT_MIN_WIDTH


def match_key(frame: Frame) -> tuple[str, str]:
    """What a frame matches on between the two captures: its function name and its DSO's
    basename (``/opt/v2/bin/app`` and ``/opt/v1/bin/app`` are one DSO)."""
    dso = frame.dso if frame.dso.startswith("[") else frame.dso.rsplit("/", 1)[-1]
    return (frame.name, dso)


@dataclass(frozen=True)
class DiffTree:
    """The merged tree in the drawn side's shape, flattened in preorder.

    ``tree`` is the drawn side's flame tree (its ``node_value`` and ``node_samples`` are the
    drawn side's); ``base_value``/``new_value`` and ``base_samples``/``new_samples`` are per
    node, both sides (one of each pair equals the tree's). Totals are each side's whole
    weight and sample count; ``hidden_samples``/``hidden_value`` are the other side's samples
    and weight in frames the drawn shape lacks.
    """

    tree: FlameTree
    negate: bool
    base_value: tuple[int, ...]
    new_value: tuple[int, ...]
    base_samples: tuple[int, ...]
    new_samples: tuple[int, ...]
    base_total: int
    new_total: int
    base_total_samples: int
    new_total_samples: int
    hidden_samples: int
    hidden_value: int

    def base_share(self, node: int) -> float:
        """The node's share of BASE's total, in percent."""
        return 100.0 * self.base_value[node] / self.base_total if self.base_total else 0.0

    def new_share(self, node: int) -> float:
        """The node's share of NEW's total, in percent."""
        return 100.0 * self.new_value[node] / self.new_total if self.new_total else 0.0

    def change(self, node: int) -> float:
        """NEW's share minus BASE's share, in percentage points (> 0: grew)."""
        return self.new_share(node) - self.base_share(node)

    @property
    def scale(self) -> float:
        """The largest change in absolute value (percentage points): full saturation."""
        return max((abs(self.change(i)) for i in range(self.tree.num_nodes())), default=0.0)


class _Node:
    __slots__ = ("frame", "children", "value", "samples", "lines")

    def __init__(self, frame: Frame) -> None:
        self.frame = frame
        self.children: dict[tuple[str, str], _Node] = {}
        self.value = [0, 0]  # BASE, NEW
        self.samples = [0, 0]
        self.lines: dict[str, int] | None = None  # the drawn side's source lines: {"f.c:12": weight}


def _add(root: _Node, side: int, stacks: Iterable[StackSample], options: DiffGraphOptions) -> None:
    drawn = 0 if options.negate else 1
    # Reporters share Frame objects between stacks: key them by identity (hashing a dataclass
    # is the slow part); the entry keeps the object alive, so its id is not reused meanwhile.
    keys: dict[int, tuple[Frame, tuple[str, str]]] = {}
    for stack in stacks:
        weight = stack.weight(options.weight)
        if weight <= 0:
            continue
        top = group_frame(stack, options.group_by)
        node = root
        node.value[side] += weight
        node.samples[side] += stack.samples
        lines = stack.frame_lines() if side == drawn else None
        if lines is not None and top is not None:
            lines = (None, *lines)
        for k, frame in enumerate(stack.frames if top is None else (top, *stack.frames)):
            seen = keys.get(id(frame))
            if seen is None or seen[0] is not frame:
                seen = keys[id(frame)] = (frame, match_key(frame))
            key = seen[1]
            child = node.children.get(key)
            if child is None:
                child = node.children[key] = _Node(frame)
            elif side == drawn:
                child.frame = frame  # the drawn side names the frame (its kind, its DSO's spelling)
            child.value[side] += weight
            child.samples[side] += stack.samples
            node = child
            line = lines[k] if lines is not None else None
            if line is not None:
                if child.lines is None:
                    child.lines = {}
                child.lines[line] = child.lines.get(line, 0) + weight


def build_diff_tree(base: Iterable[StackSample], new: Iterable[StackSample],
                    options: DiffGraphOptions = DiffGraphOptions()) -> DiffTree:
    """Merge BASE's and NEW's stacks and flatten the tree in the drawn side's shape."""
    if not 0.0 <= options.min_width < 1.0:
        raise UsageError(f"--min-width must be at least 0 and below 1, not {options.min_width}.")
    # A node is a few containers and the tree makes no reference cycle: the cyclic collector
    # would only rescan the growing tree (measured: 9.0 s of 60k stacks, 870k nodes, 3.4 s without).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _build(base, new, options)
    finally:
        if enabled:
            gc.enable()


def _build(base: Iterable[StackSample], new: Iterable[StackSample], options: DiffGraphOptions) -> DiffTree:
    root = _Node(ROOT_FRAME)
    _add(root, 0, base, options)
    _add(root, 1, new, options)
    drawn, other = (0, 1) if options.negate else (1, 0)
    total = root.value[drawn]
    threshold = max(options.min_width * total, _cap_threshold(root, drawn))
    lines_min = LINES_MIN_WIDTH * total
    frame_index: dict[Frame, int] = {}
    frames: list[Frame] = []
    node_frame: list[int] = []
    depth_of: list[int] = []
    value: tuple[list[int], list[int]] = ([], [])
    samples: tuple[list[int], list[int]] = ([], [])
    node_lines: list[tuple[tuple[str, int], ...]] = []
    frame_acc: dict[int, dict[str, int]] = {}
    hidden_samples = hidden_value = pruned = 0
    todo: list[tuple[_Node, int]] = [(root, 0)]
    while todo:
        node, depth = todo.pop()
        fi = frame_index.setdefault(node.frame, len(frames))
        if fi == len(frames):
            frames.append(node.frame)
        node_frame.append(fi)
        depth_of.append(depth)
        for side in (0, 1):
            value[side].append(node.value[side])
            samples[side].append(node.samples[side])
        node_lines.append(heaviest_lines(node.lines) if node.value[drawn] >= lines_min else ())
        if node.lines:
            acc = frame_acc.setdefault(fi, {})
            for text, w in node.lines.items():
                acc[text] = acc.get(text, 0) + w
        kept = []
        for child in node.children.values():
            if child.value[drawn] <= 0:
                hidden_samples += child.samples[other]
                hidden_value += child.value[other]
            elif child.value[drawn] < threshold:
                pruned += _drawn_size(child, drawn)
            else:
                kept.append(child)
        kept.sort(key=lambda c: (c.frame.name, c.frame.dso, c.frame.kind), reverse=True)
        todo.extend((child, depth + 1) for child in kept)
    tree = FlameTree(weight=options.weight, frames=tuple(frames), node_frame=tuple(node_frame),
                     node_depth=tuple(depth_of), node_value=tuple(value[drawn]),
                     node_samples=tuple(samples[drawn]),
                     min_width=max(options.min_width, threshold / total if total else 0.0), pruned=pruned,
                     node_lines=tuple(node_lines),
                     frame_lines=tuple((sum(frame_acc[i].values()), heaviest_lines(frame_acc[i]))
                                       if i in frame_acc else (0, ()) for i in range(len(frames))))
    return DiffTree(tree=tree, negate=options.negate,
                    base_value=tuple(value[0]), new_value=tuple(value[1]),
                    base_samples=tuple(samples[0]), new_samples=tuple(samples[1]),
                    base_total=root.value[0], new_total=root.value[1],
                    base_total_samples=root.samples[0], new_total_samples=root.samples[1],
                    hidden_samples=hidden_samples, hidden_value=hidden_value)


def _drawn_nodes(root: _Node, drawn: int) -> Iterable[_Node]:
    """Every node the drawn side has weight in (the root's subtree, in no order)."""
    todo = [root]
    while todo:
        node = todo.pop()
        if node.value[drawn] > 0:
            yield node
            todo.extend(node.children.values())


def _drawn_size(node: _Node, drawn: int) -> int:
    return sum(1 for _ in _drawn_nodes(node, drawn))


def _cap_threshold(root: _Node, drawn: int) -> float:
    """The smallest drawn weight that keeps at most ``flamegraph.MAX_NODES`` nodes (0 when the
    tree is smaller); as in the flame graph, whole paths from the root stay."""
    cap = flamegraph.MAX_NODES
    weights = [n.value[drawn] for n in _drawn_nodes(root, drawn)]
    if len(weights) <= cap:
        return 0.0
    weights.sort(reverse=True)
    return float(weights[cap - 1]) + 1.0


# --- rendering ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DiffInput:
    """What the page shows: both sides' stacks and the names the page gives them."""

    base: StackSet
    new: StackSet
    base_name: str = "BASE"
    new_name: str = "NEW"


def diff_payload(diff: DiffTree, meta: ProfileMeta, title: str, data: DiffInput) -> dict[str, object]:
    """The flame graph's JSON document (see :func:`flamegraph.tree_payload`) with ``diff``:
    the other side's weight per node (``o``) and sample count (``os``), and in ``meta.diff``
    both totals, the side drawn and the colour scale."""
    payload = tree_payload(diff.tree, meta, title)
    other_value, other_samples = ((diff.new_value, diff.new_samples) if diff.negate
                                  else (diff.base_value, diff.base_samples))
    payload["s"] = list(diff.tree.node_samples)
    payload["diff"] = {"o": list(other_value), "os": list(other_samples)}
    meta_dict = payload["meta"]
    assert isinstance(meta_dict, dict)
    meta_dict["diff"] = {
        "negate": diff.negate,
        "base_name": data.base_name,
        "new_name": data.new_name,
        "base_total": diff.base_total,
        "new_total": diff.new_total,
        "base_samples": diff.base_total_samples,
        "new_samples": diff.new_total_samples,
        "hidden_samples": diff.hidden_samples,
        "scale": round(diff.scale, 6),
    }
    return payload


def diff_subtitle(diff: DiffTree, data: DiffInput) -> str:
    """One line under the title: both captures, what is drawn, what is not."""
    base, new = data.base.meta, data.new.meta
    drawn, other = ("BASE", "NEW") if diff.negate else ("NEW", "BASE")
    parts = [
        f"BASE: {data.base_name} ({diff.base_total_samples:,} samples)",
        f"NEW: {data.new_name} ({diff.new_total_samples:,} samples)",
        f"event: {new.event}" if new.event == base.event else f"events: {base.event} / {new.event}",
        f"drawn in {drawn}'s shape",
        "width: period" if diff.tree.weight == "period" else "",
        f"{diff.hidden_samples:,} samples of {other} in frames {drawn} does not have (not drawn)",
    ]
    return " \u00b7 ".join(p for p in parts if p)


def diff_legend(diff: DiffTree) -> str:
    """The colour scale, as HTML: blue (less) through white to red (more), its end values in
    percentage points, and what a share is."""
    pp = diff.scale
    return ('<span id="fg-legend" class="fg-diff-legend">change in share (NEW − BASE): '
            f'<span class="fg-scale-end">−{pp:.2f} pp</span>'
            '<span class="fg-scale" aria-hidden="true"></span>'
            f'<span class="fg-scale-end">+{pp:.2f} pp</span> '
            '<span class="sw k-match"></span>match · shares are each side&#39;s share of its own total; '
            'red: more in NEW, blue: less</span>')


def _basename(path: str) -> str:
    return path.rsplit("/", 1)[-1] or path


def render_diffgraph(diff: DiffTree, data: DiffInput, stream: TextIO, title: str | None = None) -> None:
    """Write the self-contained differential flame graph page to ``stream``."""
    meta = data.base.meta if diff.negate else data.new.meta
    page_title = title if title is not None else f"{_basename(data.base_name)} \u2192 {_basename(data.new_name)}"
    stream.write(page_html(page_title, diff_subtitle(diff, data), diff_payload(diff, meta, page_title, data),
                           diff_legend(diff)))


def write(data: DiffInput, stream: TextIO, options: DiffGraphOptions = DiffGraphOptions()) -> DiffTree:
    """The renderer protocol: merge both sides' stacks, write the page; the tree is returned
    for tests."""
    diff = build_diff_tree(data.base.stacks, data.new.stacks, options)
    render_diffgraph(diff, data, stream, options.title)
    return diff
