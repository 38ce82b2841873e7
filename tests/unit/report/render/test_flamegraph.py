"""Flame graph data: tree building, pruning, the embedded JSON, self-containment, golden HTML.

The golden file is re-blessed with ``PROFILER_BLESS=1 pytest tests/unit/report/render/test_flamegraph.py``.
"""

from __future__ import annotations

import io
import json
import os
import random
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from profiler.errors import UsageError
from profiler.report.render.flamegraph import (
    FlameGraphOptions,
    FlameTree,
    build_flame_tree,
    render_flamegraph,
    write,
)
from profiler.report.model import Frame, ProfileMeta, StackSet, StackSample

from tests.support.paths import GOLDEN

LIBC = "libc.so.6"
META = ProfileMeta("shares: cpu-clock", "./shares 3", "cpu-clock", 1000, 250_000_000, True)


def user(name: str, dso: str = "shares") -> Frame:
    return Frame(name, dso, "user")


def kernel(name: str) -> Frame:
    return Frame(name, "[kernel.kallsyms]", "kernel")


def stack(*frames: Frame, comm: str = "shares", pid: int = 100, tid: int = 100,
          samples: int = 1) -> StackSample:
    return StackSample(comm, pid, tid, tuple(frames), samples, samples * 250_000)


def sample_profile() -> list[StackSample]:
    """1000 samples: heavy 60 %, light 30 % (memcpy 10 % of it on another thread), a syscall
    path 9 % with main reached without __libc_start_main, and 1 % unresolved."""
    start = (user("_start"), user("__libc_start_main", LIBC), user("main"))
    return [
        stack(*start, user("heavy"), samples=600),
        stack(*start, user("light"), samples=200),
        stack(*start, user("light"), user("memcpy", LIBC), tid=101, samples=100),
        stack(user("_start"), user("main"), user("write", LIBC), kernel("entry_SYSCALL_64"),
              kernel("do_syscall_64"), kernel("ksys_write"), samples=90),
        stack(Frame("[unknown]", "[unknown]", "unknown"), samples=10),
    ]


def render(tree: FlameTree, meta: ProfileMeta = META) -> str:
    out = io.StringIO()
    render_flamegraph(tree, meta, out)
    return out.getvalue()


def embedded_data(page: str) -> dict[str, Any]:
    match = re.search(r'<script type="application/json" id="fg-data">(.*?)</script>', page, re.S)
    assert match, "no data script in the page"
    data = json.loads(match.group(1))
    assert isinstance(data, dict)
    return data


def test_identical_prefixes_merge_into_one_path() -> None:
    tree = build_flame_tree(sample_profile(), FlameGraphOptions(min_width=0))
    main = tree.find_path("shares", "_start", "__libc_start_main", "main")
    assert tree.node_value[main] == 900
    assert [tree.get_frame(c).name for c in tree.iter_children(main)] == ["heavy", "light"]
    light = tree.find_path("shares", "_start", "__libc_start_main", "main", "light")
    assert tree.node_value[light] == 300 and tree.self_value(light) == 200
    # the same function under another caller is another node
    assert tree.node_value[tree.find_path("shares", "_start", "main")] == 90
    assert tree.total == 1000 and tree.node_value[tree.find_path("shares")] == 1000


def test_siblings_sorted_and_preorder_depths() -> None:
    tree = build_flame_tree(sample_profile(), FlameGraphOptions(min_width=0))
    start = tree.find_path("shares", "_start")
    assert [tree.get_frame(c).name for c in tree.iter_children(start)] == ["__libc_start_main", "main"]
    assert tree.node_depth[0] == 0
    for prev, cur in zip(tree.node_depth, tree.node_depth[1:]):
        assert 1 <= cur <= prev + 1


def test_pruning_drops_narrow_frames_but_keeps_their_weight_in_the_parent() -> None:
    full = build_flame_tree(sample_profile(), FlameGraphOptions(min_width=0))
    tree = build_flame_tree(sample_profile(), FlameGraphOptions(min_width=0.095))
    # 90 and 10 of 1000 samples are under 9.5 %: those subtrees (1 + 5 nodes) go
    assert tree.find_path("shares", "[unknown]") == -1
    assert tree.find_path("shares", "_start", "main") == -1
    assert tree.pruned == 6 and tree.num_nodes() == full.num_nodes() - 6
    # memcpy is exactly 10 %: kept
    assert tree.find_path("shares", "_start", "__libc_start_main", "main", "light", "memcpy") > 0
    # widths unchanged, the pruned weight shows as the parents' own weight
    assert tree.total == full.total == 1000
    start = tree.find_path("shares", "_start")
    assert tree.node_value[start] == 990 and tree.self_value(start) == 90
    assert tree.self_value(tree.find_path("shares")) == 10


def test_the_default_keeps_the_whole_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 13: zooming must find every frame, so nothing is pruned by default; a tree
    above MAX_NODES is cut to it, narrowest nodes first, and says so (pruned, min_width)."""
    assert FlameGraphOptions().min_width == 0.0
    full = build_flame_tree(sample_profile())
    assert full.pruned == 0
    import profiler.report.render.flamegraph as fg

    monkeypatch.setattr(fg, "MAX_NODES", full.num_nodes() - 2)
    cut = build_flame_tree(sample_profile())
    assert cut.num_nodes() <= full.num_nodes() - 2 and cut.pruned == full.num_nodes() - cut.num_nodes()
    assert cut.min_width > 0 and cut.total == full.total


@pytest.mark.parametrize("bad", [-0.1, 1.0, 2.0])
def test_min_width_out_of_range_is_rejected(bad: float) -> None:
    with pytest.raises(UsageError, match="--min-width"):
        build_flame_tree(sample_profile(), FlameGraphOptions(min_width=bad))


def test_group_by_levels_and_period_weights() -> None:
    stacks = sample_profile()
    by_tid = build_flame_tree(stacks, FlameGraphOptions(group_by="tid", min_width=0))
    assert by_tid.node_value[by_tid.find_path("shares-100/100")] == 900
    assert by_tid.node_value[by_tid.find_path("shares-100/101")] == 100
    assert by_tid.get_frame(by_tid.find_path("shares-100/101")).kind == "process"
    flat = build_flame_tree(stacks, FlameGraphOptions(group_by="none", weight="period", min_width=0))
    assert flat.get_frame(1).name == "[unknown]"  # sorts before "_start"
    assert flat.total == 250_000_000 and flat.node_samples[0] == 1000


def test_without_callchains_the_graph_is_one_level_below_the_command() -> None:
    stacks = [stack(user("spin"), samples=7), stack(kernel("clear_page"), samples=3)]
    tree = build_flame_tree(stacks, FlameGraphOptions(min_width=0))
    assert max(tree.node_depth) == 2
    assert [tree.get_frame(c).name for c in tree.iter_children(1)] == ["clear_page", "spin"]


def test_empty_profile_gives_a_root_of_zero() -> None:
    tree = build_flame_tree([], FlameGraphOptions())
    assert tree.num_nodes() == 1 and tree.total == 0
    assert embedded_data(render(tree))["v"] == [0]


frame_st = st.builds(Frame, st.sampled_from(["a", "b", "c", "d"]), st.sampled_from(["x", "y"]),
                     st.sampled_from(["user", "kernel"]))
stacks_st = st.lists(
    st.builds(StackSample, st.sampled_from(["p", "q"]), st.just(1), st.just(1),
              st.lists(frame_st, max_size=5).map(tuple), st.integers(0, 100), st.integers(0, 100)),
    max_size=25,
)


@given(stacks_st, st.sampled_from([0.0, 0.01, 0.1, 0.3]))
def test_tree_invariants(stacks: list[StackSample], min_width: float) -> None:
    tree = build_flame_tree(stacks, FlameGraphOptions(min_width=min_width))
    assert tree.total == sum(s.samples for s in stacks)
    for node in range(tree.num_nodes()):
        children = list(tree.iter_children(node))
        assert tree.self_value(node) >= 0
        keys = [(f.name, f.dso, f.kind) for f in map(tree.get_frame, children)]
        assert keys == sorted(keys) and len(set(keys)) == len(keys)
        if node:
            assert tree.node_value[node] > 0
            assert tree.node_value[node] >= min_width * tree.total
    if min_width == 0:  # leaf-level self weights add up to what each stack put there
        assert sum(tree.self_value(n) for n in range(tree.num_nodes())) == tree.total


def test_payload_tables_describe_the_tree() -> None:
    tree = build_flame_tree(sample_profile(), FlameGraphOptions(weight="period"))
    data = embedded_data(render(tree))
    strings, frames, kinds = data["strings"], data["frames"], data["kinds"]
    names = [strings[frames[3 * f]] for f in data["f"]]
    assert names == [tree.get_frame(n).name for n in range(tree.num_nodes())]
    assert data["d"] == list(tree.node_depth) and data["v"] == list(tree.node_value)
    assert data["s"] == list(tree.node_samples)
    kernel_frame = names.index("ksys_write")
    assert kinds[frames[3 * data["f"][kernel_frame] + 2]] == "kernel"
    meta = data["meta"]
    assert meta["unit"] == "ns" and meta["has_callchains"] is True and meta["command"] == "./shares 3"


def test_page_is_self_contained() -> None:
    page = render(build_flame_tree(sample_profile()))
    assert "default-src 'none'" in page  # the CSP blocks any request the page might try
    for pattern in (r"<script[^>]*\ssrc=", r"<link(?![^>]*href=\"data:)[^>]*href=", r"<img", r"url\(",
                    r"@import", r"@font-face", r"https?://", r"\bfetch\(", r"XMLHttpRequest"):
        assert not re.search(pattern, page), pattern


def test_hostile_names_cannot_break_out_of_the_page() -> None:
    evil = "</script><script>alert(1)</script><!--"
    stacks = [stack(user(evil), comm="<b>x</b>", samples=5)]
    meta = ProfileMeta("<i>t</i> & co", "run </script>", "cpu-clock", 5, 5, True)
    out = io.StringIO()
    write(StackSet(meta, stacks), out)
    page = out.getvalue()
    assert page.count("</script>") == 2 and page.count("<script") == 2
    assert "<i>t</i>" not in page and "&lt;i&gt;t&lt;/i&gt; &amp; co" in page
    names = embedded_data(page)["strings"]
    assert evil in names and "<b>x</b>" in names


def test_same_input_any_order_gives_identical_bytes() -> None:
    stacks = sample_profile()
    first = render(build_flame_tree(stacks))
    random.Random(7).shuffle(stacks)
    assert render(build_flame_tree(stacks)) == first


def test_subtitle_names_command_event_and_samples() -> None:
    page = render(build_flame_tree(sample_profile()))
    assert "<title>shares: cpu-clock</title>" in page
    assert "command: ./shares 3 \u00b7 event: cpu-clock \u00b7 1,000 samples" in page
    no_chains = ProfileMeta("t", "c", "cpu-clock", 1, 1, False)
    assert "no call chains" in render(build_flame_tree([stack(user("f"))]), no_chains)


def assert_golden(name: str, text: str) -> None:
    """Compare ``text`` with tests/golden/<name>; PROFILER_BLESS=1 rewrites the file."""
    path = GOLDEN / name
    if os.environ.get("PROFILER_BLESS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden file {path}: run with PROFILER_BLESS=1"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs: re-bless if intended"


def test_golden_flamegraph_html() -> None:
    assert_golden("flamegraph/basic.html", render(build_flame_tree(sample_profile())))


def _located(frames: tuple[tuple[str, str | None], ...], n: int) -> StackSample:
    """A stack of (function, "file.c:line" or None) frames, root first, one address each."""
    from profiler.report.model import Location, Mapping, SourceLine

    locs = []
    for k, (name, where) in enumerate(frames):
        file, _, line = where.rpartition(":") if where else (None, "", "")
        src = SourceLine(name, file or None, int(line) if line else None)
        locs.append(Location(0x1000 + k, 0x1000 + k, Mapping("/bin/app"), "app", "user", (src,)))
    return StackSample("app", 1, 1, tuple(user(name, "app") for name, _ in frames), n, n,
                       locations=tuple(locs))


def test_nodes_keep_their_heaviest_source_lines_for_the_tooltip() -> None:
    stacks = [
        _located((("main", "app.c:10"), ("work", "work.c:5")), 60),
        _located((("main", "app.c:10"), ("work", "work.c:6")), 30),
        _located((("main", "app.c:11"), ("work", "work.c:7")), 6),
        _located((("main", "app.c:11"), ("work", "work.c:8")), 3),
        _located((("main", "app.c:11"), ("work", None)), 1),
    ]
    tree = build_flame_tree(stacks, FlameGraphOptions(group_by="none"))
    work = tree.find_path("main", "work")
    main = tree.find_path("main")
    assert tree.node_lines[work] == (("work.c:5", 60), ("work.c:6", 30), ("work.c:7", 6))  # 3 kept
    assert tree.node_lines[main] == (("app.c:10", 90), ("app.c:11", 10))
    assert tree.node_lines[0] == ()  # the root has no source
    out = io.StringIO()
    render_flamegraph(tree, META, out)
    data = json.loads(re.search(r'id="fg-data"[^>]*>(.*?)</script>', out.getvalue(), re.S).group(1))  # type: ignore[union-attr]
    rows = {r[0]: [(data["strings"][r[k]], r[k + 1]) for k in range(1, len(r), 2)] for r in data["l"]}
    assert rows[work] == [("work.c:5", 60), ("work.c:6", 30), ("work.c:7", 6)]
    assert 0 not in rows


def test_stacks_without_locations_carry_no_lines() -> None:
    tree = build_flame_tree([StackSample("app", 1, 1, (user("main"),), 5, 5)])
    assert not any(tree.node_lines)
    out = io.StringIO()
    render_flamegraph(tree, META, out)
    assert '"l":' not in out.getvalue()


def test_narrow_nodes_leave_their_lines_to_their_function() -> None:
    """Nodes under 0.1 % of the total keep no lines of their own (file size); every node's
    lines add up in its function's table."""
    stacks = [_located((("main", "app.c:10"), ("work", "work.c:5")), 1998),
              _located((("main", "app.c:11"), ("tiny", "t.c:7")), 1),
              _located((("main", "app.c:12"), ("work", "work.c:5"), ("tiny", "t.c:9")), 1)]
    tree = build_flame_tree(stacks, FlameGraphOptions(group_by="none"))
    tiny = tree.find_path("main", "tiny")
    assert tree.node_lines[tiny] == ()
    frame = tree.node_frame[tiny]
    assert tree.frame_lines[frame] == (2, (("t.c:7", 1), ("t.c:9", 1)))
    assert tree.node_lines[tree.find_path("main")] == (("app.c:10", 1998), ("app.c:11", 1), ("app.c:12", 1))
