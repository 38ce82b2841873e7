"""``profiler view`` in headless Chromium, opened from disk with the network blocked.

A real recording of fixtures/workloads/shares (perf events needed) is viewed; what the page
computes for a range dragged on its timeline is checked against the report's own commands
on the same capture: ``report --time`` (flame graph and call tree totals, per-function self
and total), ``report --no-children`` (bottom-up), ``report --call-graph caller/callee``
(the sandwich) and ``annotate`` (source and assembly shares). A synthetic off-CPU capture
(no privileges) checks the event picker with the offcpu and wall pseudo-events.

A screenshot of each view goes to tests/golden/view/ when PROFILER_BLESS=1 (for review in the
repository; compared by size only, never pixel by pixel) and to test-artifacts/ always.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.test_flamegraph_browser import Viewer, assert_quiet
from tests.support.offcpu_factory import COMMS, timeline, write_offcpu_capture

pytestmark = pytest.mark.browser

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "view"


def profiler(*args: str | Path) -> str:
    done = subprocess.run([sys.executable, "-m", "profiler", *map(str, args)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def report_json(capture: Path, *args: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(profiler("report", "-i", capture, "--format", "json", *args))
    return doc


@pytest.fixture(scope="module")
def shares_capture(fixtures_dir: Path, tmp_path_factory: pytest.TempPathFactory, require_perf: None) -> Path:
    out = tmp_path_factory.mktemp("view") / "shares.prof"
    profiler("record", "-q", "-g", "-o", out, "--", fixtures_dir / "workloads" / "shares", "0.6")
    return out


@pytest.fixture(scope="module")
def shares_view(shares_capture: Path) -> Path:
    out = shares_capture.with_suffix(".html")
    profiler("view", "-i", shares_capture, "-o", out)
    return out


def open_view(browser: Any, path: Path, fragment: str = "") -> Iterator[Viewer]:
    context = browser.new_context(viewport={"width": 1200, "height": 900}, device_scale_factor=1)
    page = context.new_page()
    viewer = Viewer(page, path.as_uri())

    def route(route: Any) -> None:
        viewer.requests.append(route.request.url)
        if route.request.url.split("#")[0] == viewer.url:
            route.continue_()
        else:
            route.abort()

    context.route("**/*", route)
    page.on("request", lambda request: viewer.requests.append(request.url.split("#")[0]))
    page.on("pageerror", lambda exc: viewer.problems.append(f"page error: {exc}"))
    page.on("console", lambda msg: viewer.problems.append(msg.text) if msg.type == "error" else None)
    page.add_init_script("document.addEventListener('securitypolicyviolation',"
                         " e => console.error('CSP blocked ' + e.blockedURI));")
    page.goto(viewer.url + fragment)
    page.wait_for_selector("html[data-pv-ready]", timeout=60_000)
    try:
        yield viewer
    finally:
        context.close()


@pytest.fixture
def view(chromium: Any, shares_view: Path) -> Iterator[Viewer]:
    yield from open_view(chromium, shares_view)


def drag_range(viewer: Viewer, left: float, right: float) -> tuple[str, str]:
    """Drag on the tracks from ``left`` to ``right`` (fractions of the time axis); the
    selection as report --time's START,END."""
    box = viewer.page.locator("#pv-tracks").bounding_box()
    x0 = box["x"] + 170 + left * (box["width"] - 170)
    x1 = box["x"] + 170 + right * (box["width"] - 170)
    y = box["y"] + box["height"] - 5
    viewer.page.mouse.move(x0, y)
    viewer.page.mouse.down()
    viewer.page.mouse.move((x0 + x1) / 2, y)
    viewer.page.mouse.move(x1, y)
    viewer.page.mouse.up()
    text = viewer.text("#pv-range")
    found = re.search(r"as report --time ([\d.]+),([\d.]+)", text)
    assert found, text
    return found.group(1), found.group(2)


def screenshot(viewer: Viewer, name: str, selector: str, artifacts_dir: Path) -> None:
    """The view's picture for review: test-artifacts/ always; tests/golden/view/ when
    blessing. Only the size is compared with the golden (fonts and anti-aliasing vary)."""
    shot = viewer.page.locator(selector).screenshot()
    (artifacts_dir / f"view-{name}.png").write_bytes(shot)
    golden = GOLDEN / f"{name}.png"
    if os.environ.get("PROFILER_BLESS") == "1":
        GOLDEN.mkdir(parents=True, exist_ok=True)
        golden.write_bytes(shot)
    elif golden.exists():
        assert png_size(shot)[0] == png_size(golden.read_bytes())[0]  # the width; the height follows the data


def png_size(data: bytes) -> tuple[int, int]:
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def functions_by_report(capture: Path, *args: str) -> dict[str, tuple[int, int]]:
    """symbol -> (children samples, self samples) from report --children."""
    doc = report_json(capture, "--children", "-g", "none", *args)
    return {r["symbol"]: (r["children_samples"], r["samples"]) for r in doc["rows"]}


def test_opens_offline_and_draws_every_view(view: Viewer, artifacts_dir: Path) -> None:
    assert view.page.evaluate("view.model.events.length") == 1
    assert "whole capture" in view.text("#pv-range")
    names = {f["name"] for f in view.page.evaluate("view.flameDrawn()")}
    assert {"work_a", "work_b", "work_c", "main"} <= names
    screenshot(view, "timeline", "#pv-timeline", artifacts_dir)
    screenshot(view, "flamegraph", "#pv-flame-box", artifacts_dir)
    screenshot(view, "calltree", "#pv-lower", artifacts_dir)
    for tab in ("bottom", "sandwich", "source"):
        view.page.evaluate(f"view.pick('work_a'); view.setTab('{tab}')")
        screenshot(view, tab, "#pv-lower", artifacts_dir)
    assert_quiet(view)


def test_a_dragged_range_gives_the_totals_of_report_time(view: Viewer, shares_capture: Path) -> None:
    start, end = drag_range(view, 0.25, 0.6)
    total = view.page.evaluate("view.flameTotal()")
    doc = report_json(shares_capture, "--time", f"{start},{end}", "--no-children", "-g", "none")
    assert total["samples"] == doc["total_samples"] > 0
    tree = view.page.evaluate("view.tableRows('tree')")
    assert tree[0]["total"] == doc["total_samples"]  # the thread's row holds the whole selection
    # every function's total (each sample once) and self, as report --children counts them
    page = view.page.evaluate("view.functions()")
    want = functions_by_report(shares_capture, "--time", f"{start},{end}")
    got = {key.split(" ")[0]: (v["total"], v["self"]) for key, v in page.items() if not key.startswith("shares-")}
    assert {k: v for k, v in got.items() if k in want} == want
    assert_quiet(view)


def test_bottom_up_equals_report_no_children(view: Viewer, shares_capture: Path) -> None:
    start, end = drag_range(view, 0.1, 0.9)
    view.page.evaluate("view.setMerge(true); view.setTab('bottom')")
    rows = view.page.evaluate("view.tableRows('bottom')")
    roots = {r["name"]: r["total"] for r in rows if r["self"] is not None}
    doc = report_json(shares_capture, "--time", f"{start},{end}", "--no-children", "-g", "none")
    assert roots == {r["symbol"]: r["samples"] for r in doc["rows"]}
    assert_quiet(view)


def callgraph(nodes: list[dict[str, Any]], depth: int) -> dict[str, Any]:
    return {n["symbol"]: [n["period"], callgraph(n.get("children", []), depth - 1) if depth > 1 else {}]
            for n in nodes}


def page_graph(nest: dict[str, Any]) -> dict[str, Any]:
    return {name: [int(v[1]), page_graph(v[2])] for name, v in nest.items()}


@pytest.mark.parametrize("function", ["run", "work_b"])
def test_sandwich_equals_report_caller_and_callee_graphs(view: Viewer, shares_capture: Path, function: str) -> None:
    """Callers: report --children -g callee's graph of the function (function, then its
    callers). Callees: -g caller's graph, whose function node holds the samples under it (perf
    draws the function's own samples as whole chains from the root beside it)."""
    view.page.evaluate(f"view.setMerge(true); view.pick('{function}'); view.setTab('sandwich')")
    got = view.page.evaluate("view.sandwich(3)")
    rows = {mode: next(r for r in report_json(shares_capture, "--children", "-g", mode, "--callchain-threshold",
                                               "0")["rows"] if r["symbol"] == function)
            for mode in ("caller", "callee")}
    assert page_graph(got["callers"]) == callgraph(rows["callee"]["callgraph"], 3)
    callees = page_graph(got["callees"])[function]
    want = callgraph(rows["caller"]["callgraph"], 3).get(function, [0, {}])
    assert [callees[0] - got["selfPeriod"], callees[1]] == [want[0], {k: v[:1] + [v[1]] for k, v in want[1].items()}]
    assert got["callees"][function][0] == rows["caller"]["children_samples"]
    assert got["selfSamples"] == rows["caller"]["samples"]
    assert "Callers" in view.text("#pv-callers") and "Callees" in view.text("#pv-callees")
    assert_quiet(view)


def annotate_shares(capture: Path, function: str) -> tuple[dict[int, float], dict[str, float]]:
    """Per instruction address and per source line: annotate's percent."""
    text = profiler("annotate", "-i", capture, function)
    per_ins = {int(m.group(2), 16): float(m.group(1))
               for m in re.finditer(r"^\s*([\d.]+) :\s+([0-9a-f]+):", text, re.M) if float(m.group(1)) > 0}
    per_line = {m.group(2): float(m.group(1))
                for m in re.finditer(r"^\s+([\d.]+) :\t(\S+:\d+) \(\d+ samples\)", text, re.M)}
    return per_ins, per_line


def test_source_and_assembly_shares_equal_annotate(view: Viewer, shares_capture: Path) -> None:
    view.page.evaluate("view.pick('work_a'); view.setTab('source')")
    rows = view.page.evaluate("""() => {
        const ins = {}, lines = {};
        document.querySelectorAll('#pv-tab-source table.asm tr.hot').forEach(tr => {
            ins[parseInt(tr.children[2].textContent, 16)] = parseFloat(tr.children[0].textContent); });
        document.querySelectorAll('#pv-tab-source table.src tr.hot').forEach(tr => {
            lines[tr.getAttribute('data-line')] = parseFloat(tr.children[0].textContent); });
        return {ins, lines};
    }""")
    per_ins, per_line = annotate_shares(shares_capture, "work_a")
    assert {int(k): v for k, v in rows["ins"].items()} == per_ins
    assert {f"shares.c:{k}": v for k, v in rows["lines"].items()} == per_line
    assert "shares.c" in view.text("#pv-tab-source")  # the source text is embedded
    assert_quiet(view)


def test_search_highlights_in_every_view(view: Viewer, shares_capture: Path) -> None:
    view.page.fill("#pv-search", "work_b")
    assert "Matched: " in view.text("#pv-matched")
    children = functions_by_report(shares_capture)["work_b"][0]  # samples whose stacks hold work_b
    assert view.page.evaluate("view.matchedWeight()") == children
    matched = [f["name"] for f in view.page.evaluate("view.flameDrawn()") if f["matched"]]
    assert matched == ["work_b"]
    assert view.page.locator("#pv-tab-tree tr.match").count() >= 1
    view.page.evaluate("view.setTab('bottom')")
    assert view.page.locator("#pv-tab-bottom tr.match").count() >= 1
    assert_quiet(view)


def test_keyboard_and_the_url_hash_keep_the_state(view: Viewer, chromium: Any, shares_view: Path) -> None:
    start, end = drag_range(view, 0.3, 0.5)
    fragment = view.page.evaluate("location.hash")
    assert "t=" in fragment
    before = view.page.evaluate("view.flameTotal()")
    selected = view.page.evaluate("view.state.range")
    view.page.keyboard.press("ArrowRight")  # the selection moves right by its width
    moved = view.page.evaluate("view.state.range")
    assert abs((moved[0] - selected[0]) - (selected[1] - selected[0])) < 1
    view.page.keyboard.press("Escape")
    assert view.page.evaluate("view.state.range") is None
    for again in open_view(chromium, shares_view, fragment):  # the link with the hash opens the same view
        assert again.page.evaluate("view.flameTotal()") == before
        assert f"as report --time {start},{end}" in again.text("#pv-range")
        assert_quiet(again)


def test_thread_filter_and_merge_toggle(view: Viewer) -> None:
    whole = view.page.evaluate("view.flameTotal()")
    view.page.fill("#pv-threads", "no-such-thread")
    assert view.page.evaluate("view.flameTotal()")["samples"] == 0
    view.page.fill("#pv-threads", "shares")
    assert view.page.evaluate("view.flameTotal()") == whole
    view.page.keyboard.press("Escape")
    view.page.keyboard.press("m")
    assert view.page.evaluate("view.state.merge") is True
    names = [f["name"] for f in view.page.evaluate("view.flameDrawn()")]
    assert not any(n.startswith("shares-") for n in names)  # no thread level when merged
    assert view.page.evaluate("view.flameTotal()") == whole
    assert_quiet(view)


def test_event_picker_offers_offcpu_and_wall(chromium: Any, tmp_path: Path) -> None:
    capture = tmp_path / "offcpu.prof"
    write_offcpu_capture(capture, timeline()[0], COMMS)
    out = tmp_path / "view.html"
    profiler("view", "-i", capture, "-o", out)
    for viewer in open_view(chromium, out):
        options = viewer.page.locator("#pv-event option").all_inner_texts()
        assert any(o.startswith("offcpu") for o in options) and any(o.startswith("wall") for o in options)
        for event in ("offcpu", "wall"):
            viewer.page.evaluate(f"view.setEvent('{event}')")
            doc = report_json(capture, "--event", event, "--no-children", "-g", "none")
            assert viewer.page.evaluate("view.flameTotal()")["weight"] == doc["total_period"]
        assert_quiet(viewer)


def test_a_range_dragged_on_the_heat_map_gives_the_totals_of_report_time(view: Viewer, shares_capture: Path) -> None:
    box = view.page.locator("#pv-heat").bounding_box()
    left = box["x"] + 170
    width = box["width"] - 170
    view.page.mouse.move(left + 0.2 * width, box["y"] + 2)  # the first row of a column...
    view.page.mouse.down()
    view.page.mouse.move(left + 0.5 * width, box["y"] + 100)
    view.page.mouse.move(left + 0.5 * width, box["y"] + 148)  # ... to the last row of another
    view.page.mouse.up()
    found = re.search(r"as report --time ([\d.]+),([\d.]+)", view.text("#pv-range"))
    assert found
    doc = report_json(shares_capture, "--time", f"{found.group(1)},{found.group(2)}", "--no-children", "-g", "none")
    assert view.page.evaluate("view.flameTotal()")["samples"] == doc["total_samples"] > 0
    assert_quiet(view)


def test_tracks_per_cpu(view: Viewer) -> None:
    assert view.page.evaluate("view.tracks()")[0].startswith("shares-")
    view.page.check("#pv-bycpu")
    tracks = view.page.evaluate("view.tracks()")
    assert tracks and all(t.startswith("CPU ") for t in tracks)
    assert "cpu=1" in view.page.evaluate("location.hash")
    assert_quiet(view)


def test_a_reduced_file_says_so_and_keeps_every_sample(chromium: Any, tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from bench_decode import write_capture

    capture, out = tmp_path / "big.prof", tmp_path / "view.html"
    write_capture(capture, 6000, depth=4, per_frame=1000)
    profiler("view", "-i", capture, "-o", out, "--max-rows", "1000")
    for viewer in open_view(chromium, out):
        text = viewer.text("#pv-range")
        assert "detail reduced: 6,000 samples kept in" in text and "buckets (--max-rows)" in text
        assert viewer.page.evaluate("view.flameTotal()")["samples"] == 6000
        assert_quiet(viewer)
