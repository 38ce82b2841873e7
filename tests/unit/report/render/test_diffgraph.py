"""Differential flame graph data: frames matched by name and DSO basename, both sides'
counts and shares, the change's sign, --negate, frames only on one side, the page."""

from __future__ import annotations

import gc
import io
import json
import re

from profiler.report.model import Frame, ProfileMeta, StackSet, StackSample
from profiler.report.render.diffgraph import (
    DiffGraphOptions,
    DiffInput,
    DiffTree,
    build_diff_tree,
    match_key,
    write,
)

META = ProfileMeta("app: cpu-clock", "./app", "cpu-clock", 0, 0, True)


def user(name: str, dso: str = "app") -> Frame:
    return Frame(name, dso, "user")


def stack(*frames: Frame, samples: int, period: int | None = None) -> StackSample:
    return StackSample("app", 10, 10, frames, samples, samples * 1000 if period is None else period)


def base_stacks(dso: str = "/build-1/app") -> list[StackSample]:
    """BASE: parse 60 %, render 30 %, old_path 10 % (all under main)."""
    main = user("main", dso)
    return [stack(main, user("parse", dso), samples=60),
            stack(main, user("render", dso), user("memcpy", "libc.so.6"), samples=30),
            stack(main, user("old_path", dso), samples=10)]


def new_stacks(dso: str = "/build-2/app") -> list[StackSample]:
    """NEW (rebuilt elsewhere): parse 20 %, render 70 %, new_path 10 %, 200 samples in all."""
    main = user("main", dso)
    return [stack(main, user("parse", dso), samples=40),
            stack(main, user("render", dso), user("memcpy", "libc.so.6"), samples=140),
            stack(main, user("new_path", dso), samples=20)]


def node(tree: DiffTree, *names: str) -> int:
    found = tree.tree.find_path(*names)
    assert found >= 0, names
    return found


def test_frames_match_by_name_and_dso_basename_across_rebuilt_binaries() -> None:
    tree = build_diff_tree(base_stacks("/build-1/app"), new_stacks("/build-2/app"))
    assert gc.isenabled()  # switched off while building only
    parse = node(tree, "app", "main", "parse")
    assert (tree.base_samples[parse], tree.new_samples[parse]) == (60, 40)
    assert tree.base_samples[node(tree, "app", "main")] == 100
    assert match_key(user("f", "/a/lib.so")) == match_key(user("f", "/b/lib.so")) == ("f", "lib.so")
    assert match_key(user("f", "[kernel.kallsyms]")) == ("f", "[kernel.kallsyms]")


def test_same_name_in_another_dso_is_another_frame() -> None:
    base = [stack(user("main"), user("copy", "libc.so.6"), samples=10)]
    new = [stack(user("main"), user("copy", "app"), samples=10)]
    tree = build_diff_tree(base, new)
    copy = node(tree, "app", "main", "copy")
    assert tree.tree.get_frame(copy).dso == "app"
    assert (tree.base_samples[copy], tree.new_samples[copy]) == (0, 10)
    assert tree.hidden_samples == 10  # BASE's libc copy is not in NEW's shape


def test_shares_are_of_each_sides_own_total_and_the_change_has_the_right_sign() -> None:
    tree = build_diff_tree(base_stacks(), new_stacks())
    assert (tree.base_total, tree.new_total) == (100, 200)
    parse, render = node(tree, "app", "main", "parse"), node(tree, "app", "main", "render")
    assert (tree.base_share(parse), tree.new_share(parse)) == (60.0, 20.0)
    assert tree.change(parse) == -40.0 and tree.change(render) == 40.0
    assert tree.change(node(tree, "app", "main", "new_path")) == 10.0
    assert tree.change(0) == 0.0  # the root is each side's whole
    assert tree.scale == 40.0


def test_new_shape_by_default_counts_what_only_base_has() -> None:
    tree = build_diff_tree(base_stacks(), new_stacks())
    assert tree.tree.find_path("app", "main", "old_path") == -1
    assert tree.tree.find_path("app", "main", "new_path") >= 0
    assert tree.tree.node_value == tree.new_value
    assert (tree.hidden_samples, tree.hidden_value) == (10, 10)
    assert sum(tree.base_value[c] for c in tree.tree.iter_children(node(tree, "app", "main"))) == 90


def test_negate_draws_base_shape_with_the_same_colours() -> None:
    plain = build_diff_tree(base_stacks(), new_stacks())
    tree = build_diff_tree(base_stacks(), new_stacks(), DiffGraphOptions(negate=True))
    assert tree.negate and tree.tree.node_value == tree.base_value
    assert tree.tree.find_path("app", "main", "new_path") == -1
    old = node(tree, "app", "main", "old_path")
    assert tree.change(old) == -10.0
    assert tree.change(node(tree, "app", "main", "parse")) == plain.change(node(plain, "app", "main", "parse"))
    assert (tree.hidden_samples, tree.hidden_value) == (20, 20)


def test_weight_period_uses_periods_for_widths_and_shares() -> None:
    def side(a: int, b: int) -> list[StackSample]:
        main = user("main")
        return [stack(main, user("a"), samples=10, period=a), stack(main, user("b"), samples=10, period=b)]

    base, new = side(100, 300), side(300, 100)
    tree = build_diff_tree(base, new, DiffGraphOptions(weight="period"))
    a = node(tree, "app", "main", "a")
    assert (tree.base_value[a], tree.new_value[a]) == (100, 300)
    assert (tree.base_samples[a], tree.new_samples[a]) == (10, 10)
    assert tree.change(a) == 50.0
    samples = build_diff_tree(base, new)
    assert samples.change(node(samples, "app", "main", "a")) == 0.0


def test_page_carries_both_sides_the_scale_and_what_is_not_drawn() -> None:
    out = io.StringIO()
    data = DiffInput(StackSet(META, base_stacks()), StackSet(META, new_stacks()), "runs/base.prof", "runs/new.prof")
    tree = write(data, out, DiffGraphOptions())
    page = out.getvalue()
    payload = json.loads(re.search(r'id="fg-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    assert payload["v"] == list(tree.new_value)
    assert payload["diff"]["o"] == list(tree.base_value)
    assert payload["meta"]["diff"]["scale"] == 40.0
    assert payload["meta"]["diff"]["hidden_samples"] == 10
    assert "<title>base.prof \u2192 new.prof</title>" in page
    assert "10 samples of BASE in frames NEW does not have" in page
    assert "+40.00 pp" in page and "each side&#39;s share of its own total" in page
    assert not re.search(r'(src|href)="(https?:)?//', page)


def test_min_width_and_the_size_cap_leave_out_narrow_frames_and_say_how_many(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from profiler.report.render import flamegraph

    full = build_diff_tree(base_stacks(), new_stacks(), DiffGraphOptions(group_by="none"))
    assert full.tree.pruned == 0
    # NEW: main 200, parse 40, render 140 (memcpy 140), new_path 20; 15 % of 200 = 30
    cut = build_diff_tree(base_stacks(), new_stacks(), DiffGraphOptions(group_by="none", min_width=0.15))
    assert cut.tree.find_path("main", "new_path") < 0 and cut.tree.pruned == 1
    main = node(cut, "main")
    assert cut.tree.node_value[main] == 200  # the pruned weight stays in its parent
    assert cut.base_samples[main] == 100 and cut.tree.min_width == 0.15
    out = io.StringIO()
    write(DiffInput(StackSet(META, base_stacks()), StackSet(META, new_stacks())), out,
          DiffGraphOptions(group_by="none", min_width=0.15))
    data = json.loads(re.search(r'id="fg-data"[^>]*>(.*?)</script>', out.getvalue(), re.S).group(1))  # type: ignore[union-attr]
    assert data["meta"]["pruned"] == 1 and data["meta"]["min_width"] == 0.15
    monkeypatch.setattr(flamegraph, "MAX_NODES", full.tree.num_nodes() - 1)
    capped = build_diff_tree(base_stacks(), new_stacks(), DiffGraphOptions(group_by="none"))
    assert capped.tree.num_nodes() <= full.tree.num_nodes() - 1
    assert capped.tree.pruned == full.tree.num_nodes() - capped.tree.num_nodes()
    assert capped.tree.find_path("main", "render", "memcpy") >= 0  # the widest path stays


def test_the_drawn_sides_source_lines_go_to_the_tooltip() -> None:
    from profiler.report.model import Location, Mapping, SourceLine

    def located(names: tuple[tuple[str, str], ...], n: int) -> StackSample:
        locs = tuple(Location(0x1000 + k, 0x1000 + k, Mapping("/bin/app"), "app", "user",
                              (SourceLine(name, where.split(":")[0], int(where.split(":")[1])),))
                     for k, (name, where) in enumerate(names))
        return StackSample("app", 1, 1, tuple(user(name) for name, _ in names), n, n, locations=locs)

    base = [located((("main", "app.c:10"), ("parse", "p.c:5")), 10)]
    new = [located((("main", "app.c:10"), ("parse", "p.c:7")), 30),
           located((("main", "app.c:10"), ("parse", "p.c:8")), 10)]
    tree = build_diff_tree(base, new, DiffGraphOptions(group_by="none"))
    assert tree.tree.node_lines[node(tree, "main", "parse")] == (("p.c:7", 30), ("p.c:8", 10))  # NEW's lines
    neg = build_diff_tree(base, new, DiffGraphOptions(group_by="none", negate=True))
    assert neg.tree.node_lines[node(neg, "main", "parse")] == (("p.c:5", 10),)  # BASE's, when BASE is drawn
    out = io.StringIO()
    write(DiffInput(StackSet(META, base), StackSet(META, new)), out, DiffGraphOptions(group_by="none"))
    data = json.loads(re.search(r'id="fg-data"[^>]*>(.*?)</script>', out.getvalue(), re.S).group(1))  # type: ignore[union-attr]
    rows = {r[0]: [(data["strings"][r[k]], r[k + 1]) for k in range(1, len(r), 2)] for r in data["l"]}
    assert rows[node(tree, "main", "parse")] == [("p.c:7", 30), ("p.c:8", 10)]
