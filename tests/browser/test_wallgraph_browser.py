"""The wall-clock flame graph (``flamegraph --wall``, docs/offcpu.md) in headless Chromium:
the frames of blocked stacks are drawn in their own colour (blue), those of runnable stacks in
another (violet), whatever their kind, while the same function on a CPU keeps its usual colour."""

from __future__ import annotations

import colorsys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from profiler.report.model import Frame, ProfileMeta, StackSample, StackSet
from profiler.report.render.flamegraph import FlameGraphOptions, write
from tests.browser.test_flamegraph_browser import Viewer, assert_quiet, open_offline

pytestmark = pytest.mark.browser

META = ProfileMeta("server: wall", "./server", "wall", 3, 1_000_000_000, True)


def state(name: str) -> Frame:
    return Frame(f"[{name}]", "[thread state]", "state")


def wall_stacks() -> list[StackSample]:
    """One thread: 40 % running in work, 40 % blocked in work's read, 20 % runnable in work."""
    base = (Frame("main", "server", "user"), Frame("work", "server", "user"))
    sched = (Frame("schedule", "[kernel.kallsyms]", "kernel"), Frame("__schedule", "[kernel.kallsyms]", "kernel"))

    def s(frames: tuple[Frame, ...], ns: int) -> StackSample:
        return StackSample("server", 100, 100, frames, 1, ns)

    return [
        s((state("running"), *base, Frame("compute", "server", "user")), 400_000_000),
        s((state("blocked"), *base, Frame("read", "libc.so.6", "user"), Frame("vfs_read", "[kernel.kallsyms]",
                                                                           "kernel"), *sched), 400_000_000),
        s((state("runnable"), *base, Frame("compute", "server", "user"), *sched), 200_000_000),
    ]


@pytest.fixture
def viewer(chromium: Any, tmp_path: Path) -> Iterator[Viewer]:
    path = tmp_path / "wall.html"
    with path.open("w", encoding="utf-8") as out:
        write(StackSet(META, wall_stacks()), out, FlameGraphOptions(weight="period"))
    yield from open_offline(chromium, path)


def hue(rgb: tuple[int, int, int, int]) -> float:
    h, _, _ = colorsys.rgb_to_hls(rgb[0] / 255, rgb[1] / 255, rgb[2] / 255)
    return h * 360


def under(viewer: Viewer, name: str, root: str) -> dict[str, Any]:
    """The drawn frame ``name`` whose state ancestor is ``root`` (by horizontal extent)."""
    top = viewer.frame(root)
    found = [f for f in viewer.drawn() if f["name"] == name and top["x"] <= f["x"] < top["x"] + top["w"]]
    assert len(found) == 1, (name, root, found)
    return found[0]


def test_blocked_and_runnable_frames_have_their_own_colours(viewer: Viewer, artifacts_dir: Path) -> None:
    width = viewer.canvas_width()
    assert abs(viewer.frame("[blocked]")["w"] - 0.4 * width) < 1.0
    on_cpu = viewer.pixel(under(viewer, "work", "[running]"))
    blocked = [viewer.pixel(under(viewer, name, "[blocked]")) for name in ("work", "read", "vfs_read", "__schedule")]
    runnable = [viewer.pixel(under(viewer, name, "[runnable]")) for name in ("work", "compute", "__schedule")]
    assert hue(on_cpu) < 60  # a user function on a CPU: the warm user colours
    assert all(232 <= hue(p) <= 252 for p in blocked), [hue(p) for p in blocked]  # blue, kernel frames too
    assert all(270 <= hue(p) <= 294 for p in runnable), [hue(p) for p in runnable]  # violet
    kernel_on_cpu_hues = (192, 224)  # the kernel's own colours, which blocked frames must not be mistaken for
    assert all(not kernel_on_cpu_hues[0] <= hue(p) <= kernel_on_cpu_hues[1] for p in blocked)
    legend = viewer.text("#fg-legend")
    assert "blocked" in legend and "runnable" in legend and "running" in legend
    viewer.page.screenshot(path=str(artifacts_dir / "wallgraph.png"), full_page=True)
    assert_quiet(viewer)
