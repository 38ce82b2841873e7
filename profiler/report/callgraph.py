"""Call trees under flat-profile rows, as perf report draws them.

For a row R (a symbol), the paths merged into its tree are, per stack behind R:

* self mode (``--no-children``): the whole stack, from the root down to the leaf
  (``caller``) or from the leaf up (``callee``);
* children mode: where R is the leaf, the whole stack as above; where R is a caller (its
  first occurrence from the leaf at depth i > 0), ``caller`` shows R down to the leaf and
  ``callee`` shows R up to the root. This is what perf shows: a caller's tree spreads
  into its callees, the leaf's tree shows how it was reached.

Nodes whose weight is below the threshold (percent of the report's total) are dropped.
A chain of nodes that carry the same weight (nothing branches off or ends there) is one
node with several frames, perf's compressed callchain node.
"""

from __future__ import annotations

from dataclasses import field

from profiler.dataclass import dataclass
from profiler.report.aggregate import ReportRows
from profiler.report.profile import Profile


@dataclass
class CallNode:
    """A tree node: consecutive ``frames`` (ids) that share one ``weight`` (period);
    ``lines[k]`` is frame k's source lines (id in ``Profile.srclines`` -> period), empty
    without line information."""

    frames: list[int]
    weight: int
    samples: int = 0
    children: list[CallNode] = field(default_factory=list)
    lines: list[dict[int, int]] = field(default_factory=list)


@dataclass
class _Trie:
    """A node of the call tree being built."""

    weight: int = 0
    samples: int = 0
    kids: dict[int, _Trie] = field(default_factory=dict)
    lines: dict[int, int] = field(default_factory=dict)


#: A path merged into a tree: frame ids, their source line ids (-1 without one) or None, period.
Path = tuple[list[int], "list[int] | None", int]


def row_paths(profile: Profile, flat: ReportRows, row: int, order: str) -> list[Path]:
    """The (frame-id path, line-id path, period) triples merged into ``row``'s tree."""
    stacks, weights = flat.stacks_of(row)
    key = int(flat.row_fkey[row]) if len(flat.row_fkey) else -1
    by_sym = "sym" in flat.sort
    srclines = profile.stack_table.srclines
    out: list[Path] = []
    for st, w in zip(stacks.tolist(), weights.tolist()):
        frames = profile.stack_frame_ids(st).tolist()
        lines = (srclines[profile.stack_start[st]:profile.stack_start[st + 1]].tolist()
                 if srclines is not None else None)
        i = frames.index(key) if by_sym and flat.children and key in frames else 0
        if order == "callee":
            cut = slice(i, None)
        elif i == 0:
            cut = slice(None, None, -1)
        else:
            cut = slice(i, None, -1)
        out.append((frames[cut], lines[cut] if lines is not None else None, int(w)))
    return out


def build_tree(paths: list[Path], min_weight: float) -> list[CallNode]:
    """Merge paths into a tree, drop light nodes and compress single-weight chains."""
    root = _Trie()
    for path, lines, w in paths:
        node = root
        node.weight += w
        for k, f in enumerate(path):
            node = node.kids.setdefault(f, _Trie())
            node.weight += w
            if lines is not None and lines[k] >= 0:
                node.lines[lines[k]] = node.lines.get(lines[k], 0) + w
    return _compress(root, min_weight)


def _compress(trie: _Trie, min_weight: float) -> list[CallNode]:
    out: list[CallNode] = []
    for fid, kid in trie.kids.items():
        if kid.weight < min_weight or kid.weight == 0:
            continue
        node = CallNode([fid], kid.weight, lines=[kid.lines])
        cur = kid
        while len(cur.kids) == 1:
            (nf, nxt), = cur.kids.items()
            if nxt.weight != cur.weight or nxt.weight < min_weight:
                break
            node.frames.append(nf)
            node.lines.append(nxt.lines)
            cur = nxt
        node.children = _compress(cur, min_weight)
        out.append(node)
    out.sort(key=lambda n: (-n.weight, n.frames[0]))
    return out


def row_tree(profile: Profile, flat: ReportRows, row: int, order: str, threshold: float) -> list[CallNode]:
    """The call tree (top-level nodes) of one row; empty when everything is below threshold."""
    min_weight = flat.total_period * threshold / 100.0
    return build_tree(row_paths(profile, flat, row, order), min_weight)


def default_order(children: bool) -> str:
    """perf's default: caller graphs with --children, callee graphs without."""
    return "caller" if children else "callee"


@dataclass
class CallGraph:
    """Each row's call tree (top-level nodes, in row order) and the names of the frames the
    trees hold: frame id -> (label, DSO), where a label is perf's Symbol text (the name, or
    the address of an unresolved frame); ``srclines`` are the texts the nodes' line ids name."""

    trees: list[list[CallNode]]
    names: dict[int, tuple[str, str]]
    srclines: list[str] = field(default_factory=list)

    def label(self, frame_id: int) -> str:
        return self.names[frame_id][0]


@dataclass
class PerfReport:
    """What perf report's layouts (table, JSON, CSV) render: the rows, and with a call graph
    each row's tree. Plain data: no capture, no resolver."""

    flat: ReportRows
    graph: CallGraph | None = None


def build_call_graph(profile: Profile, flat: ReportRows, order: str, threshold: float) -> CallGraph:
    """The call tree of every row of ``flat`` (``order``: caller or callee) above ``threshold``
    percent, with the names of the frames they hold."""
    trees = [row_tree(profile, flat, row, order, threshold) for row in range(len(flat.rows))]
    names: dict[int, tuple[str, str]] = {}

    def name(nodes: list[CallNode]) -> None:
        for node in nodes:
            for fid in node.frames:
                if fid not in names:
                    fr = profile.frame(fid)
                    names[fid] = (fr.name(profile.demangle) if fr.resolved else f"{fr.addr:#x}", fr.dso)
            name(node.children)

    for tree in trees:
        name(tree)
    return CallGraph(trees, names, list(profile.srclines))
