"""The differential flame graph in headless Chromium, made by ``profiler flamegraph --diff``
from two hand-built captures (tests/support/diff_captures.py) and opened with the network
blocked: a frame that grew is red, one that shrank blue, one that kept its share pale; hover
shows both sides' counts and shares; the legend shows the scale; search and zoom work; the
page makes no request. Screenshots go to test-artifacts/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.browser.test_flamegraph_browser import Viewer, assert_quiet, open_offline
from tests.support.diff_captures import write_pair

from profiler.cli import main

pytestmark = pytest.mark.browser


def diff_page(tmp_path: Path, *extra: str) -> Path:
    base, new = write_pair(tmp_path)
    out = tmp_path / "diff graph.html"
    try:
        main(["flamegraph", "--diff", str(base), str(new), "-o", str(out), *extra])
    except SystemExit as exc:
        assert not exc.code
    return out


@pytest.fixture
def viewer(chromium: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Viewer]:
    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))
    yield from open_offline(chromium, diff_page(tmp_path))


def test_grown_frames_are_red_shrunk_ones_blue(viewer: Viewer, artifacts_dir: Path) -> None:
    width = viewer.canvas_width()
    grew, shrank, same = viewer.frame("k_leaf_b"), viewer.frame("k_leaf_a"), viewer.frame("k_mid")
    assert abs(grew["w"] - 0.7 * width) < 1.0 and abs(shrank["w"] - 0.2 * width) < 1.0  # NEW's shape
    assert not viewer.is_drawn("k_other")  # only in BASE
    r, g, b, a = viewer.pixel(grew)
    assert a == 255 and r > 240 and g < 80 and b < 80  # +40 pp: the scale's end, full red
    r, g, b, a = viewer.pixel(shrank)
    assert a == 255 and b > 240 and r < 80 and g < 80  # -40 pp: full blue
    r, g, b, a = viewer.pixel(viewer.frame("k_recurse"))
    assert a == 255 and r == 255 and 150 < g == b < 220  # new code, +10 pp: light red
    r, g, b, a = viewer.pixel(same)
    assert a == 255 and r == g == b == 235  # 90 % on both sides
    legend = viewer.text("#fg-legend")
    assert "\u221240.00 pp" in legend and "+40.00 pp" in legend and "share of its own total" in legend
    assert "10 samples of BASE in frames NEW does not have" in viewer.text("#fg-subtitle")
    viewer.page.screenshot(path=str(artifacts_dir / "diffgraph.png"), full_page=True)
    assert_quiet(viewer)


def test_hover_shows_both_sides_and_the_change(viewer: Viewer) -> None:
    viewer.page.mouse.move(*viewer.centre(viewer.frame("k_leaf_b")))
    details = viewer.text("#fg-tooltip")
    assert "k_leaf_b" in details and "[kernel.kallsyms] (kernel)" in details
    assert "BASE: 30 samples (30.00%)" in details and "NEW: 140 samples (70.00%)" in details
    assert "change: +40.00 pp of share, +110 samples" in details
    viewer.page.mouse.move(*viewer.centre(viewer.frame("k_leaf_a")))
    details = viewer.text("#fg-details")
    assert "BASE: 60 samples (60.00%)" in details and "NEW: 40 samples (20.00%)" in details
    assert "change: \u221240.00 pp of share, \u221220 samples" in details
    assert_quiet(viewer)


def test_search_and_zoom_work_as_in_the_flame_graph(viewer: Viewer) -> None:
    viewer.page.fill("#fg-search", "leaf")
    assert viewer.text("#fg-matched") == "Matched: 90.00% of total"
    assert viewer.frame("k_leaf_a")["matched"] and not viewer.frame("k_mid")["matched"]
    viewer.page.fill("#fg-search", "")
    width = viewer.canvas_width()
    viewer.page.mouse.click(*viewer.centre(viewer.frame("k_mid")))
    assert abs(viewer.frame("k_mid")["w"] - width) < 0.5
    assert abs(viewer.frame("k_leaf_b")["w"] - width * 140 / 180) < 1.0
    assert not viewer.is_drawn("k_recurse")
    r, _, b, _ = viewer.pixel(viewer.frame("k_leaf_b"))
    assert r > b + 100  # still coloured by the change, whatever the zoom
    viewer.page.keyboard.press("Escape")
    assert viewer.page.evaluate("window.flamegraph.zoom()") == 0
    assert_quiet(viewer)


def test_negate_draws_base_shape_coloured_by_the_same_change(chromium: Any, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))
    for viewer in open_offline(chromium, diff_page(tmp_path, "--negate")):
        width = viewer.canvas_width()
        assert abs(viewer.frame("k_leaf_a")["w"] - 0.6 * width) < 1.0  # BASE's shape
        assert not viewer.is_drawn("k_recurse")
        r, g, b, _ = viewer.pixel(viewer.frame("k_other"))
        assert b == 255 and 150 < r == g < 220  # removed code: -10 pp, light blue
        r, _, b, _ = viewer.pixel(viewer.frame("k_leaf_b"))
        assert r > 240 and b < 80
        assert "20 samples of NEW in frames BASE does not have" in viewer.text("#fg-subtitle")
        assert_quiet(viewer)


def test_hover_shows_the_drawn_sides_source_lines(chromium: Any, tmp_path: Path) -> None:
    """The differential graph's tooltip names the drawn side's hottest lines, as the flame
    graph's does (the stacks of both sides carry their source lines)."""
    from profiler.report.model import Frame, Location, Mapping, ProfileMeta, SourceLine, StackSample, StackSet
    from profiler.report.render import diffgraph

    def s(path: tuple[tuple[str, str], ...], n: int) -> StackSample:
        locs = tuple(Location(0, 0, Mapping("/bin/app"), "app", "user",
                              (SourceLine(name, where.split(":")[0], int(where.split(":")[1])),))
                     for name, where in path)
        frames = tuple(Frame(name, "app", "user") for name, _ in path)
        return StackSample("app", 1, 1, frames, n, n, locations=locs)

    meta = ProfileMeta("app: cpu-clock", "./app", "cpu-clock", 0, 0, True)
    base = StackSet(meta, [s((("main", "m.c:1"), ("parse", "p.c:5")), 50),
                           s((("main", "m.c:1"), ("draw", "d.c:2")), 50)])
    new = StackSet(meta, [s((("main", "m.c:1"), ("parse", "p.c:7")), 75),
                          s((("main", "m.c:1"), ("parse", "p.c:8")), 25),
                          s((("main", "m.c:1"), ("draw", "d.c:2")), 100)])
    path = tmp_path / "diff-lines.html"
    with path.open("w", encoding="utf-8") as out:
        diffgraph.write(diffgraph.DiffInput(base, new), out, diffgraph.DiffGraphOptions(group_by="none"))
    for viewer in open_offline(chromium, path):
        viewer.page.mouse.move(*viewer.centre(viewer.frame("parse")))
        details = viewer.text("#fg-tooltip")
        assert "source (NEW): p.c:7 (75.00%), p.c:8 (25.00%)" in details, details
        assert "BASE: 50 samples (50.00%)" in details
        assert_quiet(viewer)
