"""The HTML flame graph in headless Chromium, opened from disk with the network blocked.

Checks what a user sees: frames drawn with widths proportional to their share, details on
hover, click to zoom and reset, search with the matched percentage (nested matches counted
once), the inverted (icicle) layout, and that the page makes no request at all.
Screenshots go to test-artifacts/.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from profiler.report.model import Frame, ProfileMeta, StackSet, StackSample
from profiler.report.render.flamegraph import FlameGraphOptions, write

pytestmark = pytest.mark.browser

LIBC = "libc.so.6"
META = ProfileMeta("shares: cpu-clock", "./shares 3", "cpu-clock", 1000, 250_000_000, True)
MATCH_RGB = (224, 64, 224)


def user(name: str, dso: str = "shares") -> Frame:
    return Frame(name, dso, "user")


def kernel(name: str) -> Frame:
    return Frame(name, "[kernel.kallsyms]", "kernel")


def sample_profile() -> list[StackSample]:
    """1000 samples: heavy 60 %, light 30 % (memcpy 10 % inside it), a syscall path 9 % that
    reaches main without __libc_start_main, 1 % unresolved."""
    start = (user("_start"), user("__libc_start_main", LIBC), user("main"))

    def s(frames: tuple[Frame, ...], n: int, tid: int = 100) -> StackSample:
        return StackSample("shares", 100, tid, frames, n, n * 250_000)

    return [
        s((*start, user("heavy")), 600),
        s((*start, user("light")), 200),
        s((*start, user("light"), user("memcpy", LIBC)), 100, tid=101),
        s((user("_start"), user("main"), user("write", LIBC), kernel("entry_SYSCALL_64"),
           kernel("do_syscall_64"), kernel("ksys_write")), 90),
        s((Frame("[unknown]", "[unknown]", "unknown"),), 10),
    ]


@dataclass
class Viewer:
    """An open flame graph page and everything it tried to do."""

    page: Any
    url: str
    requests: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def drawn(self) -> list[dict[str, Any]]:
        frames: list[dict[str, Any]] = self.page.evaluate("window.flamegraph.drawn()")
        return frames

    def frame(self, name: str, dso: str | None = None) -> dict[str, Any]:
        found = [f for f in self.drawn() if f["name"] == name and (dso is None or f["dso"] == dso)]
        assert len(found) == 1, f"{name}: drawn {len(found)} times"
        return found[0]

    def is_drawn(self, name: str) -> bool:
        return any(f["name"] == name for f in self.drawn())

    def canvas_width(self) -> float:
        width: float = self.page.evaluate("document.getElementById('fg-canvas').clientWidth")
        return width

    def centre(self, frame: dict[str, Any]) -> tuple[float, float]:
        box = self.page.locator("#fg-canvas").bounding_box()
        return box["x"] + frame["x"] + frame["w"] / 2, box["y"] + frame["y"] + frame["h"] / 2

    def pixel(self, frame: dict[str, Any]) -> tuple[int, int, int, int]:
        """The canvas pixel at the left part of ``frame`` (away from its label)."""
        rgba = self.page.evaluate(
            """([x, y]) => { const c = document.getElementById('fg-canvas');
                 const r = window.devicePixelRatio || 1;
                 return Array.from(c.getContext('2d').getImageData(Math.floor(x * r),
                                   Math.floor(y * r), 1, 1).data); }""",
            [frame["x"] + min(2.0, frame["w"] / 2), frame["y"] + 1],
        )
        return (rgba[0], rgba[1], rgba[2], rgba[3])

    def text(self, selector: str) -> str:
        content: str = self.page.locator(selector).inner_text()
        return content


@pytest.fixture
def html_file(tmp_path: Path) -> Path:
    path = tmp_path / "flame graph.html"
    with path.open("w", encoding="utf-8") as out:
        write(StackSet(META, sample_profile()), out, FlameGraphOptions())
    return path


def open_offline(browser: Any, path: Path) -> Iterator[Viewer]:
    context = browser.new_context(viewport={"width": 1000, "height": 500}, device_scale_factor=1)
    page = context.new_page()
    viewer = Viewer(page, path.as_uri())

    def route(route: Any) -> None:
        url = route.request.url
        viewer.requests.append(url)
        if url == viewer.url:
            route.continue_()
        else:
            route.abort()

    context.route("**/*", route)
    page.on("request", lambda request: viewer.requests.append(request.url))
    page.on("pageerror", lambda exc: viewer.problems.append(f"page error: {exc}"))
    def console(msg: Any) -> None:
        if msg.type == "error":  # errors only: the tests' own canvas readback draws a warning
            viewer.problems.append(msg.text)

    page.on("console", console)
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation',"
        " e => console.error('CSP blocked ' + e.blockedURI));")
    page.goto(viewer.url)
    page.wait_for_selector("html[data-fg-ready]")
    try:
        yield viewer
    finally:
        context.close()


@pytest.fixture
def viewer(chromium: Any, html_file: Path) -> Iterator[Viewer]:
    yield from open_offline(chromium, html_file)


def assert_quiet(viewer: Viewer) -> None:
    """Nothing but the page itself was requested and nothing was logged (CSP violations,
    script errors and failed loads all reach the console)."""
    assert set(viewer.requests) <= {viewer.url}, f"network requests: {viewer.requests}"
    assert viewer.problems == []


def test_request_recorder_sees_external_loads(chromium: Any, tmp_path: Path) -> None:
    """The harness itself: a page that does load something remote is caught."""
    page_path = tmp_path / "leaky.html"
    page_path.write_text('<!DOCTYPE html><html data-fg-ready="1"><body>'
                         '<img src="http://example.invalid/x.png"></body></html>')
    for leaky in open_offline(chromium, page_path):
        leaky.page.wait_for_timeout(100)
        assert "http://example.invalid/x.png" in leaky.requests


def test_draws_frames_with_widths_proportional_to_their_share(viewer: Viewer) -> None:
    assert "shares: cpu-clock" in viewer.text("#fg-title")
    subtitle = viewer.text("#fg-subtitle")
    assert "./shares 3" in subtitle and "cpu-clock" in subtitle and "1,000 samples" in subtitle
    width = viewer.canvas_width()
    root = viewer.frame("all")
    assert root["x"] == 0 and abs(root["w"] - width) < 0.5
    shares = {"heavy": 0.60, "light": 0.30, "memcpy": 0.10, "__libc_start_main": 0.90,
              "write": 0.09, "ksys_write": 0.09, "[unknown]": 0.01}
    for name, share in shares.items():
        assert abs(viewer.frame(name)["w"] - share * width) < 1.0, name
    heavy, light = viewer.frame("heavy"), viewer.frame("light")
    assert abs(light["x"] - (heavy["x"] + heavy["w"])) < 0.5  # siblings side by side
    assert viewer.frame("memcpy")["x"] == light["x"]  # a child starts at its parent
    # what is on the canvas: opaque rectangles coloured by kind
    r, g, b, a = viewer.pixel(heavy)
    assert a == 255 and r > 180 and r > b + 60  # user: warm
    r, g, b, a = viewer.pixel(viewer.frame("ksys_write"))
    assert a == 255 and b > r + 40  # kernel: blue
    r, g, b, a = viewer.pixel(viewer.frame("[unknown]"))
    assert a == 255 and r == g == b  # unknown: grey
    assert_quiet(viewer)


def test_hover_shows_name_dso_samples_and_percentage(viewer: Viewer) -> None:
    viewer.page.mouse.move(*viewer.centre(viewer.frame("memcpy")))
    details = viewer.text("#fg-details")
    assert "memcpy" in details and "libc.so.6 (user)" in details
    assert "100 samples" in details and "10.00% of total" in details
    assert viewer.page.locator("#fg-tooltip").is_visible()
    assert "memcpy" in viewer.text("#fg-tooltip")
    viewer.page.mouse.move(1, 1)
    assert not viewer.page.locator("#fg-tooltip").is_visible()
    assert_quiet(viewer)


def test_click_zooms_into_a_frame_and_reset_restores(viewer: Viewer, artifacts_dir: Path) -> None:
    width = viewer.canvas_width()
    assert viewer.page.locator("#fg-reset").is_disabled()
    viewer.page.mouse.click(*viewer.centre(viewer.frame("light")))
    light = viewer.frame("light")
    assert viewer.page.evaluate("window.flamegraph.zoom()") == light["node"]
    # the pointer is still over light, now full width: details follow the new layout
    assert "light" in viewer.text("#fg-details")
    assert "100.00% of zoomed frame" in viewer.text("#fg-details")
    assert light["x"] == 0 and abs(light["w"] - width) < 0.5 and not light["dimmed"]
    assert abs(viewer.frame("memcpy")["w"] - width / 3) < 1.0
    assert not viewer.is_drawn("heavy") and not viewer.is_drawn("ksys_write")
    main = viewer.frame("main")  # ancestors stay, full width and dimmed
    assert main["dimmed"] and abs(main["w"] - width) < 0.5
    viewer.page.mouse.move(*viewer.centre(viewer.frame("memcpy")))
    assert "33.33% of zoomed frame" in viewer.text("#fg-details")
    viewer.page.screenshot(path=str(artifacts_dir / "flamegraph-zoomed.png"), full_page=True)

    viewer.page.click("#fg-reset")
    assert viewer.page.evaluate("window.flamegraph.zoom()") == 0
    assert abs(viewer.frame("heavy")["w"] - 0.6 * width) < 1.0
    assert viewer.page.locator("#fg-reset").is_disabled()
    viewer.page.mouse.click(*viewer.centre(viewer.frame("heavy")))
    viewer.page.keyboard.press("Escape")
    assert viewer.page.evaluate("window.flamegraph.zoom()") == 0
    assert_quiet(viewer)


def test_search_highlights_matches_and_counts_nested_weight_once(viewer: Viewer) -> None:
    search = viewer.page.locator("#fg-search")
    search.fill("light")
    assert viewer.text("#fg-matched") == "Matched: 30.00% of total"
    light = viewer.frame("light")
    assert light["matched"] and not viewer.frame("heavy")["matched"]
    assert viewer.pixel(light)[:3] == MATCH_RGB

    # main appears twice (900 + 90 samples) and heavy sits inside main: 99 %, not 159 %
    viewer.page.check("#fg-regex")
    search.fill("^(main|heavy)$")
    assert viewer.text("#fg-matched") == "Matched: 99.00% of total"
    assert viewer.page.evaluate("window.flamegraph.matchedValue()") == 990
    assert sum(f["matched"] for f in viewer.drawn()) == 3

    search.fill("(")
    assert viewer.text("#fg-matched") == "invalid regular expression"
    assert not any(f["matched"] for f in viewer.drawn())
    viewer.page.uncheck("#fg-regex")
    assert viewer.text("#fg-matched") == "Matched: 0.00% of total"  # "(" as a substring
    search.fill("")
    assert viewer.text("#fg-matched") == ""
    assert_quiet(viewer)


def test_inverted_toggle_draws_an_icicle(viewer: Viewer, artifacts_dir: Path) -> None:
    viewer.page.screenshot(path=str(artifacts_dir / "flamegraph.png"), full_page=True)
    flame_root, flame_leaf = viewer.frame("all"), viewer.frame("ksys_write")
    heavy_width = viewer.frame("heavy")["w"]
    assert flame_root["y"] > flame_leaf["y"]  # flame: root at the bottom
    viewer.page.check("#fg-invert")
    assert viewer.page.evaluate("window.flamegraph.inverted()") is True
    root, leaf = viewer.frame("all"), viewer.frame("ksys_write")
    assert root["y"] == 0 and leaf["y"] == flame_root["y"]  # icicle: root on top
    assert viewer.frame("heavy")["w"] == heavy_width
    viewer.page.mouse.click(*viewer.centre(viewer.frame("light")))  # zoom works inverted too
    assert viewer.frame("light")["x"] == 0
    viewer.page.screenshot(path=str(artifacts_dir / "flamegraph-inverted.png"), full_page=True)
    viewer.page.uncheck("#fg-invert")
    assert viewer.frame("all")["y"] == flame_root["y"]
    assert_quiet(viewer)


# --- issue 13: what was pruned, re-expanding on zoom, deep stacks, names and DSOs ----------------


def _wide_and_narrow() -> list[StackSample]:
    """"big" takes 98 % of 100,000 samples; "many" 2 % spread over 1,000 distinct one-sample
    leaves, each far narrower than a pixel until "many" is zoomed into."""
    root = (user("_start"), user("main"))
    out = [StackSample("shares", 100, 100, (*root, user("big")), 98_000, 98_000)]
    for k in range(1000):
        out.append(StackSample("shares", 100, 100, (*root, user("many"), user(f"leaf_{k:04d}")), 2, 2))
    return out


def test_narrow_frames_are_counted_and_drawn_after_zoom(chromium: Any, tmp_path: Path) -> None:
    path = tmp_path / "narrow.html"
    with path.open("w", encoding="utf-8") as out:
        tree = write(StackSet(META, _wide_and_narrow()), out, FlameGraphOptions())
    assert tree.pruned == 0 and tree.num_nodes() == 1 + 1 + 2 + 1 + 1 + 1000  # the whole tree is in the file
    for viewer in open_offline(chromium, path):
        assert not any(f["name"].startswith("leaf_") for f in viewer.drawn())
        hidden = viewer.page.evaluate("window.flamegraph.hidden()")
        assert hidden >= 1000
        label = viewer.text("#fg-hidden")
        assert f"{hidden:,} frames too narrow to draw at this zoom" in label
        viewer.page.mouse.click(*viewer.centre(viewer.frame("many")))
        assert viewer.page.evaluate("window.flamegraph.zoom()") > 0
        leaves = [f for f in viewer.drawn() if f["name"].startswith("leaf_")]
        assert len(leaves) == 1000  # every leaf, each about one pixel wide
        assert viewer.page.evaluate("window.flamegraph.hidden()") == 0
        assert not viewer.page.locator("#fg-hidden").is_visible()
        assert viewer.problems == []


def test_pruning_at_build_time_is_said(chromium: Any, tmp_path: Path) -> None:
    path = tmp_path / "pruned.html"
    with path.open("w", encoding="utf-8") as out:
        tree = write(StackSet(META, _wide_and_narrow()), out, FlameGraphOptions(min_width=0.001))
    assert tree.pruned == 1000
    for viewer in open_offline(chromium, path):
        assert "1,000 frames narrower than 0.10% of the total left out of this file" in viewer.text("#fg-hidden")


def test_deep_stacks_open_scrolled_to_the_widest_frames(chromium: Any, tmp_path: Path) -> None:
    deep = tuple(user(f"level_{k:03d}") for k in range(300))
    stacks = [StackSample("shares", 100, 100, deep, 100, 100)]
    path = tmp_path / "deep.html"
    with path.open("w", encoding="utf-8") as out:
        write(StackSet(META, stacks), out, FlameGraphOptions())
    for viewer in open_offline(chromium, path):
        root = viewer.frame("all")
        top = viewer.page.evaluate("document.getElementById('fg-canvas').getBoundingClientRect().top")
        inner = viewer.page.evaluate("window.innerHeight")
        assert 0 <= top + root["y"] and top + root["y"] + root["h"] <= inner  # the root row is on screen
        assert viewer.page.evaluate("window.scrollY") > 0


def test_search_matches_dsos_and_ignores_case_unless_asked(viewer: Viewer) -> None:
    search = viewer.page.locator("#fg-search")
    search.fill("LIBC.SO")  # the DSO of __libc_start_main, memcpy and write
    matched = {f["name"] for f in viewer.drawn() if f["matched"]}
    assert matched == {"__libc_start_main", "memcpy", "write"}
    assert "Matched: 99.00% of total" in viewer.text("#fg-matched")  # __libc_start_main 90 %, write 9 % under main
    viewer.page.check("#fg-case")
    assert not any(f["matched"] for f in viewer.drawn())
    search.fill("HEAVY")
    assert not any(f["matched"] for f in viewer.drawn())
    viewer.page.uncheck("#fg-case")
    assert {f["name"] for f in viewer.drawn() if f["matched"]} == {"heavy"}
    viewer.page.check("#fg-regex")
    search.fill("^LIBC")
    assert {f["name"] for f in viewer.drawn() if f["matched"]} == {"__libc_start_main", "memcpy", "write"}


def _addr2line_lines(binary: Path, addrs: list[int]) -> dict[str, set[str]]:
    """function -> the ``file:line`` texts ``addr2line -f -i`` gives it at ``addrs``."""
    import subprocess

    out = subprocess.run(["addr2line", "-f", "-i", "-e", str(binary), *map(hex, addrs)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    found: dict[str, set[str]] = {}
    for name, where in zip(out[::2], out[1::2]):
        found.setdefault(name, set()).add(where.split(" ")[0].rsplit("/", 1)[-1])
    return found


def test_hover_shows_source_lines_of_a_real_recording(chromium: Any, fixtures_dir: Path, tmp_path: Path,
                                                       require_perf: None) -> None:
    """fixtures/workloads/inline recorded, drawn and hovered in Chromium: the tooltip of the
    inlined ``mix`` and of ``drive`` names their hottest source lines with shares, and every
    line shown is one binutils' addr2line -i gives that function at a sampled address (for
    ``drive``, the line of the inlined call)."""
    import re
    import subprocess
    import sys

    binary = fixtures_dir / "workloads" / "inline"
    capture, page = tmp_path / "inline.prof", tmp_path / "inline.html"
    run = [sys.executable, "-m", "profiler"]
    subprocess.run([*run, "record", "-q", "-g", "-o", str(capture), "--", str(binary), "0.5"], check=True, timeout=120)
    subprocess.run([*run, "flamegraph", "-i", str(capture), "-o", str(page), "--comm", "inline"],
                   check=True, timeout=120, capture_output=True)
    script = subprocess.run([*run, "script", "-i", str(capture), "--comm", "inline", "--no-inline", "-F", "ip,dso"],
                            check=True, timeout=120, capture_output=True, text=True).stdout
    sampled = sorted({int(a, 16) for a, dso in re.findall(r"^\t\s*([0-9a-f]+) \((\S+)\)$", script, re.M)
                      if dso == str(binary)})
    # a caller's line is its call's (return address minus one): both are references
    reference = _addr2line_lines(binary, sorted({x for a in sampled for x in (a, a - 1)}))
    for viewer in open_offline(chromium, page):
        for name, function in (("mix (inlined)", "mix"), ("drive", "drive")):
            viewer.page.mouse.move(*viewer.centre(viewer.frame(name)))
            tip = viewer.text("#fg-tooltip")
            m = re.search(r"^source: (.+)$", tip, re.M)
            assert m, tip
            shown = re.findall(r"(\S+:\d+) \(([\d.]+)%\)", m.group(1))
            assert shown and all(line in reference[function] for line, _ in shown), (shown, reference[function])
            shares = [float(p) for _, p in shown]
            assert shares == sorted(shares, reverse=True) and sum(shares) <= 100.01
        assert_quiet(viewer)


def test_narrow_frames_show_their_functions_lines(chromium: Any, tmp_path: Path) -> None:
    """A node narrower than 0.1 % of the total shows its function's lines over all its calls
    (labelled so); a wider one its own."""
    from profiler.report.model import Location, Mapping, SourceLine

    def s(path: tuple[tuple[str, str], ...], n: int) -> StackSample:
        locs = tuple(Location(0, 0, Mapping("/bin/app"), "app", "user",
                              (SourceLine(name, where.split(":")[0], int(where.split(":")[1])),))
                     for name, where in path)
        return StackSample("app", 1, 1, tuple(user(name, "app") for name, _ in path), n, n, locations=locs)

    stacks = [s((("main", "m.c:1"), ("small", "s.c:2"), ("work", "w.c:3")), 3),
              s((("main", "m.c:1"), ("small", "s.c:2"), ("tiny", "t.c:7")), 1),
              s((("main", "m.c:5"), ("big", "b.c:4")), 1995),
              s((("main", "m.c:5"), ("big", "b.c:4"), ("tiny", "t.c:9")), 1)]
    path = tmp_path / "narrow.html"
    with path.open("w", encoding="utf-8") as out:
        write(StackSet(META, stacks), out, FlameGraphOptions(group_by="none"))
    for viewer in open_offline(chromium, path):
        viewer.page.mouse.move(*viewer.centre(viewer.frame("main")))
        assert "source: m.c:5 (99.80%), m.c:1 (0.20%)" in viewer.text("#fg-tooltip")
        viewer.page.mouse.click(*viewer.centre(viewer.frame("small")))  # 0.2 %: its own lines
        assert "source: s.c:2 (100.00%)" in viewer.text("#fg-tooltip")
        viewer.page.mouse.move(*viewer.centre(viewer.frame("tiny")))  # 0.05 %: all calls of tiny
        assert "source (all its calls): t.c:7 (50.00%), t.c:9 (50.00%)" in viewer.text("#fg-tooltip")
        assert_quiet(viewer)
