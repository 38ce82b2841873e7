"""Self-contained interactive HTML flame graph.

Two steps, as everywhere in the reporter:

1. :func:`build_flame_tree` merges the stacks into a call tree (identical children merged,
   siblings sorted by name), drops the nodes narrower than ``min_width`` of the total and
   flattens what is left into preorder arrays. A pruned node's weight stays counted in its
   parent, so every kept node's width (and the total) is exact.
2. :func:`render_flamegraph` writes one HTML file: the template, stylesheet and script from
   ``profiler/report/render/assets/`` inlined, and the tree as JSON inside
   ``<script type="application/json">``. The page makes no network request (its
   Content-Security-Policy forbids them) and works from ``file://``.

The same input always gives the same bytes, so the output can be a golden file.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal, TextIO

from profiler.dataclass import dataclass
from profiler.report.render import utf8
from profiler.errors import UsageError
from profiler.names import UNKNOWN
from profiler.report.model import (
    Frame,
    ProfileMeta,
    StackSet,
    StackSample,
    Weight,
    period_is_nanoseconds,
)

#: Default pruning threshold: none. The file keeps the whole tree, so zooming into a frame
#: draws everything below it; the page skips frames narrower than a pixel at the current zoom
#: and says how many it skipped. A 158k-node tree is about 2.5 MB of HTML.
DEFAULT_MIN_WIDTH = 0.0

#: Trees larger than this are pruned to it (the narrowest nodes first), and the page says so:
#: it bounds the file size (about 16 bytes a node) whatever the capture.
MAX_NODES = 1_000_000

#: Source lines kept per node (the heaviest), shown in the tooltip with their shares.
MAX_LINES = 3

#: Nodes at least this share of the total wide keep their own source lines; narrower ones
#: show their function's lines over the whole graph (one table per function), which keeps
#: a 400k-node tree's file within a few hundred kilobytes of its size without lines.
LINES_MIN_WIDTH = 0.001

#: Kinds of the synthetic frames above the stacks.
ROOT_KIND = "root"
PROCESS_KIND = "process"
NODE_KINDS: tuple[str, ...] = (ROOT_KIND, PROCESS_KIND, "user", "kernel", "jit", "unknown", "state", "python")

ROOT_FRAME = Frame(name="all", dso="", kind=ROOT_KIND)

GroupBy = Literal["comm", "pid", "tid", "none"]


@dataclass(frozen=True)
class FlameGraphOptions:
    """How the flame graph is built.

    weight: widths by ``"samples"`` or by summed ``"period"``.
    min_width: prune frames narrower than this fraction of the total (0 keeps all).
    group_by: the level under the root: one frame per command name (``"comm"``), per process
        (``"pid"``: ``comm-PID``), per thread (``"tid"``: ``comm-PID/TID``), or none.
    title: the page title; ``None`` uses the capture's title.
    """

    weight: Weight = "samples"
    min_width: float = DEFAULT_MIN_WIDTH
    group_by: GroupBy = "comm"
    title: str | None = None


@dataclass(frozen=True)
class FlameTree:
    """A pruned call tree flattened in preorder (a node's subtree follows it directly).

    Node ``i`` is frame ``frames[node_frame[i]]`` at depth ``node_depth[i]`` (the root is node
    0 at depth 0); ``node_value[i]`` is its weight including its descendants and
    ``node_samples[i]`` its sample count. Siblings are sorted by (name, dso, kind).
    """

    weight: Weight
    frames: tuple[Frame, ...]
    node_frame: tuple[int, ...]
    node_depth: tuple[int, ...]
    node_value: tuple[int, ...]
    node_samples: tuple[int, ...]
    min_width: float
    pruned: int  # nodes dropped by min_width (subtrees included)
    node_lines: tuple[tuple[tuple[str, int], ...], ...] = ()  # per node: (file:line, weight), heaviest first
    frame_lines: tuple[tuple[int, tuple[tuple[str, int], ...]], ...] = ()  # per frame: (its lines' weight, heaviest)

    @property
    def total(self) -> int:
        """The root's weight: the sum over every stack."""
        return self.node_value[0]

    def num_nodes(self) -> int:
        """How many nodes were kept."""
        return len(self.node_frame)

    def get_frame(self, node: int) -> Frame:
        """The frame of ``node``."""
        return self.frames[self.node_frame[node]]

    def iter_children(self, node: int) -> Iterable[int]:
        """The children of ``node``, in drawing order."""
        depth = self.node_depth[node]
        for i in range(node + 1, len(self.node_depth)):
            d = self.node_depth[i]
            if d <= depth:
                return
            if d == depth + 1:
                yield i

    def self_value(self, node: int) -> int:
        """Weight of ``node`` not drawn in a child (its own samples plus pruned children)."""
        return self.node_value[node] - sum(self.node_value[c] for c in self.iter_children(node))

    def find_path(self, *names: str) -> int:
        """The node reached from the root by following child frames named ``names``, or -1."""
        node = 0
        for name in names:
            node = next((c for c in self.iter_children(node) if self.get_frame(c).name == name), -1)
            if node < 0:
                return -1
        return node


class _Trie:
    """The unpruned tree while stacks are added: flat lists indexed by node id."""

    def __init__(self) -> None:
        self.frame_ids: dict[Frame, int] = {ROOT_FRAME: 0}
        self.by_identity: dict[int, tuple[Frame, int]] = {}
        self.frames: list[Frame] = [ROOT_FRAME]
        self.child_of: dict[int, int] = {}  # (frame id << 32 | parent node) -> child node
        self.node_frame: list[int] = [0]
        self.children: list[list[int]] = [[]]
        self.value: list[int] = [0]
        self.samples: list[int] = [0]
        self.lines: dict[int, dict[str, int]] = {}  # node -> {"file.c:12": weight}

    def frame_id(self, frame: Frame) -> int:
        # Reporters share Frame objects between stacks: look the object up by identity first
        # (hashing a dataclass is the slow part). The entry keeps the object alive, so its
        # id cannot be reused by another frame while the trie exists.
        seen = self.by_identity.get(id(frame))
        if seen is not None and seen[0] is frame:
            return seen[1]
        fid = self.frame_ids.get(frame)
        if fid is None:
            fid = self.frame_ids[frame] = len(self.frames)
            self.frames.append(frame)
        self.by_identity[id(frame)] = (frame, fid)
        return fid

    def add(self, path: Iterable[Frame], weight: int, samples: int,
            lines: Sequence[str | None] | None = None) -> None:
        """Add one stack; ``lines``, when given, is each frame's source line (or None), in
        the order of ``path``."""
        node = 0
        value, count, child_of, by_identity = self.value, self.samples, self.child_of, self.by_identity
        value[0] += weight
        count[0] += samples
        for k, frame in enumerate(path):
            seen = by_identity.get(id(frame))
            fid = seen[1] if seen is not None and seen[0] is frame else self.frame_id(frame)
            key = (fid << 32) | node
            child = child_of.get(key)
            if child is None:
                child = child_of[key] = len(self.node_frame)
                self.node_frame.append(fid)
                self.children.append([])
                value.append(0)
                count.append(0)
                self.children[node].append(child)
            value[child] += weight
            count[child] += samples
            node = child
            line = lines[k] if lines is not None else None
            if line is not None:
                at = self.lines.setdefault(child, {})
                at[line] = at.get(line, 0) + weight


def group_frame(stack: StackSample, group_by: GroupBy) -> Frame | None:
    """The synthetic frame under the root for ``stack``'s thread, or None."""
    if group_by == "none":
        return None
    comm = stack.comm or UNKNOWN
    label = {"comm": comm, "pid": f"{comm}-{stack.pid}", "tid": f"{comm}-{stack.pid}/{stack.tid}"}
    return Frame(name=label[group_by], dso="", kind=PROCESS_KIND)


def _build_trie(stacks: Iterable[StackSample], options: FlameGraphOptions) -> _Trie:
    trie = _Trie()
    for stack in stacks:
        weight = stack.weight(options.weight)
        if weight <= 0:
            continue
        top = group_frame(stack, options.group_by)
        path = stack.frames if top is None else (top, *stack.frames)
        lines = stack.frame_lines()
        if lines is not None and top is not None:
            lines = (None, *lines)
        trie.add(path, weight, stack.samples, lines)
    return trie


def _sort_key(frame: Frame) -> tuple[str, str, str]:
    return (frame.name, frame.dso, frame.kind)


def _flatten(trie: _Trie, options: FlameGraphOptions) -> FlameTree:
    """Preorder walk keeping nodes at least ``min_width`` of the total wide."""
    threshold = max(options.min_width * trie.value[0], _cap_threshold(trie))
    frame_index: dict[int, int] = {}
    frames: list[Frame] = []
    node_frame: list[int] = []
    node_depth: list[int] = []
    node_value: list[int] = []
    node_samples: list[int] = []
    node_lines: list[tuple[tuple[str, int], ...]] = []
    frame_acc: dict[int, dict[str, int]] = {}
    lines_min = LINES_MIN_WIDTH * trie.value[0]
    pruned = 0
    todo: list[tuple[int, int]] = [(0, 0)]
    while todo:
        node, depth = todo.pop()
        fid = trie.node_frame[node]
        if fid not in frame_index:
            frame_index[fid] = len(frames)
            frames.append(trie.frames[fid])
        node_frame.append(frame_index[fid])
        node_depth.append(depth)
        node_value.append(trie.value[node])
        node_samples.append(trie.samples[node])
        lines = trie.lines.get(node)
        node_lines.append(heaviest_lines(lines) if trie.value[node] >= lines_min else ())
        if lines:
            acc = frame_acc.setdefault(frame_index[fid], {})
            for text, w in lines.items():
                acc[text] = acc.get(text, 0) + w
        kept: list[int] = []
        for child in trie.children[node]:
            if trie.value[child] >= threshold and trie.value[child] > 0:
                kept.append(child)
            else:
                pruned += _subtree_size(trie, child)
        kept.sort(key=lambda c: _sort_key(trie.frames[trie.node_frame[c]]), reverse=True)
        todo.extend((child, depth + 1) for child in kept)
    return FlameTree(
        weight=options.weight,
        frames=tuple(frames),
        node_frame=tuple(node_frame),
        node_depth=tuple(node_depth),
        node_value=tuple(node_value),
        node_samples=tuple(node_samples),
        min_width=max(options.min_width, threshold / trie.value[0] if trie.value[0] else 0.0),
        pruned=pruned,
        node_lines=tuple(node_lines),
        frame_lines=tuple((sum(frame_acc[i].values()), heaviest_lines(frame_acc[i])) if i in frame_acc else (0, ())
                          for i in range(len(frames))),
    )


def heaviest_lines(lines: dict[str, int] | None) -> tuple[tuple[str, int], ...]:
    """A node's source lines by weight, heaviest first (ties by text), at most MAX_LINES."""
    if not lines:
        return ()
    ranked = sorted(lines.items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple(ranked[:MAX_LINES])


def _cap_threshold(trie: _Trie) -> float:
    """The smallest weight that keeps at most MAX_NODES nodes (0 when the tree is smaller).
    A node weighs at least as much as any descendant, so keeping the nodes at or above a
    weight keeps whole paths from the root."""
    if len(trie.value) <= MAX_NODES:
        return 0.0
    ranked = sorted(trie.value, reverse=True)
    return float(ranked[MAX_NODES - 1]) + 1.0


def _subtree_size(trie: _Trie, node: int) -> int:
    size = 0
    todo = [node]
    while todo:
        size += 1
        todo.extend(trie.children[todo.pop()])
    return size


def build_flame_tree(
    stacks: Iterable[StackSample], options: FlameGraphOptions = FlameGraphOptions()
) -> FlameTree:
    """Merge ``stacks`` into a call tree, prune it and flatten it in preorder."""
    if not 0.0 <= options.min_width < 1.0:
        raise UsageError(f"--min-width must be at least 0 and below 1, not {options.min_width}.")
    return _flatten(_build_trie(stacks, options), options)


# --- rendering ---------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"@@([A-Z_]+)@@")
# Inside <script>, "</script" or "<!--" would end or confuse the element; JSON strings may
# spell these characters as \u escapes, which JSON.parse reads back unchanged.
_SCRIPT_UNSAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


#: The legend of the ordinary flame graph: the colours by frame kind.
KIND_LEGEND = ('<span id="fg-legend"><span class="sw k-user"></span>user <span class="sw k-kernel"></span>kernel '
               '<span class="sw k-jit"></span>JIT <span class="sw k-python"></span>Python '
               '<span class="sw k-unknown"></span>unknown '
               '<span class="sw k-match"></span>match</span>')
#: ... and of a graph with thread states (the offcpu and wall events, docs/offcpu.md): whatever
#: their kind, the frames of blocked stacks are blue and those of runnable stacks violet.
STATE_LEGEND = KIND_LEGEND.replace('</span>match</span>', '</span>match <span class="sw k-running"></span>running '
                                   '<span class="sw k-blocked"></span>blocked '
                                   '<span class="sw k-runnable"></span>runnable</span>')


ASSETS = Path(__file__).with_name("assets")  # package data (pyproject.toml), installed as files


def read_asset(name: str) -> str:
    """The text of one file in ``profiler/report/render/assets/``. Read by path: importlib.resources
    (with tempfile and zipfile) cost ``flamegraph`` and ``view`` 20-25 ms of start-up."""
    return (ASSETS / name).read_text(encoding="utf-8")


def weight_unit(weight: Weight, event: str) -> str:
    """What one unit of width is, for the page's tooltip."""
    if weight == "samples":
        return "samples"
    return "ns" if period_is_nanoseconds(event) else "events"


def tree_payload(tree: FlameTree, meta: ProfileMeta, title: str) -> dict[str, object]:
    """The JSON document the page's script reads: a string table, a frame table of
    (name, dso, kind) indices, and per-node arrays ``f`` (frame), ``d`` (depth), ``v`` (value)
    and, when widths are periods, ``s`` (samples)."""
    strings: dict[str, int] = {}

    def intern(text: str) -> int:
        return strings.setdefault(text, len(strings))

    frame_table: list[int] = []
    for frame in tree.frames:
        kind = NODE_KINDS.index(frame.kind) if frame.kind in NODE_KINDS else NODE_KINDS.index("unknown")
        frame_table.extend((intern(frame.name), intern(frame.dso), kind))
    payload: dict[str, object] = {
        "meta": {
            "title": title,
            "command": meta.command,
            "event": meta.event,
            "total_samples": meta.total_samples,
            "total_period": meta.total_period,
            "has_callchains": meta.has_callchains,
            "weight": tree.weight,
            "unit": weight_unit(tree.weight, meta.event),
            "min_width": tree.min_width,
            "pruned": tree.pruned,
        },
        "kinds": list(NODE_KINDS),
        "strings": list(strings),
        "frames": frame_table,
        "f": list(tree.node_frame),
        "d": list(tree.node_depth),
        "v": list(tree.node_value),
    }
    if tree.weight != "samples":
        payload["s"] = list(tree.node_samples)
    if any(tree.node_lines) or any(lines for _, lines in tree.frame_lines):
        # per wide node with source lines: [node, line string, its weight, line string, weight, ...];
        # per frame (all its nodes): [frame, weight of its lines, line string, weight, ...]
        payload["l"] = [[i, *(x for text, w in lines for x in (intern(text), w))]
                        for i, lines in enumerate(tree.node_lines) if lines]
        payload["fl"] = [[i, total, *(x for text, w in lines for x in (intern(text), w))]
                         for i, (total, lines) in enumerate(tree.frame_lines) if lines]
        payload["strings"] = list(strings)
    return payload


def subtitle(tree: FlameTree, meta: ProfileMeta) -> str:
    """One line under the title: command, event, sample count, what widths mean."""
    parts = [
        f"command: {meta.command}" if meta.command else "",
        f"event: {meta.event}" if meta.event else "",
        f"{meta.total_samples:,} samples",
        "width: period" if tree.weight == "period" else "",
        "" if meta.has_callchains else "no call chains (one level)",
    ]
    return " \u00b7 ".join(p for p in parts if p)


def render_flamegraph(
    tree: FlameTree, meta: ProfileMeta, stream: TextIO, title: str | None = None
) -> None:
    """Write the self-contained HTML page for ``tree`` to ``stream``."""
    page_title = title if title is not None else meta.title
    legend = STATE_LEGEND if any(f.kind == "state" for f in tree.frames) else KIND_LEGEND
    stream.write(page_html(page_title, subtitle(tree, meta), tree_payload(tree, meta, page_title), legend))


def page_html(title: str, subtitle_text: str, payload: dict[str, object], legend: str = KIND_LEGEND) -> str:
    """The page: the template with the stylesheet, the script, ``payload`` as JSON and
    ``legend`` (HTML) inlined; ``title`` and ``subtitle_text`` are escaped."""
    data = utf8.json_text(json.dumps(payload, separators=(",", ":"), ensure_ascii=True)).translate(_SCRIPT_UNSAFE)
    values = {
        "TITLE": html.escape(utf8.text(title)),
        "SUBTITLE": html.escape(utf8.text(subtitle_text)),
        "CSS": read_asset("flamegraph.css"),
        "JS": read_asset("flamecommon.js") + read_asset("flamegraph.js"),
        "DATA": data,
        "LEGEND": legend,
    }
    template = read_asset("flamegraph.html")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def write(profile: StackSet, stream: TextIO, options: FlameGraphOptions = FlameGraphOptions()) -> FlameTree:
    """The renderer protocol: build the tree from the profile's stacks, write the page to
    ``stream``; the tree is returned for tests."""
    tree = build_flame_tree(profile.stacks, options)
    render_flamegraph(tree, profile.meta, stream, options.title)
    return tree
