"""Flame graph renderer on a large synthetic profile: build time, file size, first paint.

Generates STACKS distinct stacks (default 50,000) of depth about 12 summing to SAMPLES
samples (default 1,000,000), the shape of a long capture after the reporter aggregated it,
then times building the tree and writing the HTML, measures the file, and loads it in
headless Chromium (when /usr/bin/chromium and playwright are there) to time first paint:
``performance.now()`` when the page's script has drawn, measured from navigation start.

Targets from the issue: file < 5 MB, first paint < 1 s. Prints figures, asserts nothing.

    python benchmarks/bench_flamegraph.py [--stacks N] [--samples N] [--min-width F]
"""

from __future__ import annotations

import argparse
import io
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from profiler.report.model import Frame, ProfileMeta, StackSet, StackSample
from profiler.report.render.flamegraph import FlameGraphOptions, build_flame_tree, render_flamegraph
from profiler.report.render import folded as folded_renderer

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def synthetic_stacks(count: int, total: int, seed: int = 1) -> list[StackSample]:
    """``count`` distinct stacks of depth 8-16 whose samples sum to ``total``.

    Callers pick callees from a fixed fan-out per function (so prefixes are shared, as in
    real programs) with a skew toward the first callees; some leaves are kernel frames.
    """
    rng = random.Random(seed)
    pool = [
        Frame(f"ns{i % 37}::Module{i % 211}::function_{i}", f"lib{i % 23}.so", "user")
        for i in range(4000)
    ]
    kernel = [Frame(f"kernel_fn_{i}", "[kernel.kallsyms]", "kernel") for i in range(300)]
    callees = {i: rng.sample(range(len(pool)), 8) for i in range(len(pool))}
    top = (Frame("_start", "app", "user"), Frame("__libc_start_main", "libc.so.6", "user"),
           Frame("main", "app", "user"))
    seen: set[tuple[Frame, ...]] = set()
    stacks: list[tuple[Frame, ...]] = []
    while len(stacks) < count:
        depth = rng.randint(5, 13)
        fn = min(int(rng.expovariate(1 / 25)), 399)  # a few hot entry points, a long tail
        frames = list(top)
        for _ in range(depth):
            frames.append(pool[fn])
            fn = callees[fn][min(int(rng.expovariate(0.9)), 7)]
        if rng.random() < 0.1:
            frames.extend(rng.sample(kernel, 2))
        key = tuple(frames)
        if key not in seen:
            seen.add(key)
            stacks.append(key)
    raw = [1.0 / (rank + 1) ** 0.9 for rank in range(count)]
    rng.shuffle(raw)
    spare = total - count
    scale = spare / sum(raw)
    weights = [1 + int(r * scale) for r in raw]
    weights[0] += total - sum(weights)
    return [
        StackSample("synthetic", 1000, 1000 + i % 4, frames, w, w * 250_000)
        for i, (frames, w) in enumerate(zip(stacks, weights))
    ]


def first_paint_ms(path: Path) -> tuple[list[float], int, int] | str:
    """(first paint ms of a cold and two warm loads, frames drawn, requests other than the
    page) in headless Chromium, or why it could not be measured."""
    if not os.path.exists(CHROMIUM):
        return f"{CHROMIUM} not installed (make browser-deps)"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "playwright not installed"
    requests: list[str] = []

    def route(route: Any) -> None:
        requests.append(route.request.url)
        if route.request.url == path.as_uri():
            route.continue_()
        else:
            route.abort()

    times: list[float] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for _ in range(3):
                page = browser.new_page(viewport={"width": 1600, "height": 900})
                page.route("**/*", route)
                page.goto(path.as_uri())
                page.wait_for_function("window.flamegraph && window.flamegraph.firstPaintMs >= 0")
                times.append(float(page.evaluate("window.flamegraph.firstPaintMs")))
                drawn = int(page.evaluate("window.flamegraph.drawn().length"))
                page.close()
        finally:
            browser.close()
    return times, drawn, sum(1 for url in requests if url != path.as_uri())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stacks", type=int, default=50_000)
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--min-width", type=float, default=FlameGraphOptions().min_width)
    args = parser.parse_args()

    t0 = time.perf_counter()
    stacks = synthetic_stacks(args.stacks, args.samples)
    t_gen = time.perf_counter() - t0
    meta = ProfileMeta("synthetic", "synthetic --bench", "cpu-clock", args.samples,
                       args.samples * 250_000, True)
    print(f"input: {len(stacks):,} distinct stacks, {sum(s.samples for s in stacks):,} samples, "
          f"{sum(len(s.frames) for s in stacks) / len(stacks):.1f} frames on average "
          f"(generated in {t_gen:.2f} s)")

    t0 = time.perf_counter()
    tree = build_flame_tree(stacks, FlameGraphOptions(min_width=args.min_width))
    t_tree = time.perf_counter() - t0
    out = io.StringIO()
    t0 = time.perf_counter()
    render_flamegraph(tree, meta, out)
    t_render = time.perf_counter() - t0
    html = out.getvalue().encode()
    print(f"tree: {tree.num_nodes():,} nodes kept, {tree.pruned:,} pruned "
          f"(min width {args.min_width}), built in {t_tree:.2f} s")
    print(f"html: {len(html) / 1e6:.2f} MB written in {t_render:.2f} s "
          f"(target < 5 MB: {len(html) / 5e6:.2f} of budget)")

    folded = io.StringIO()
    t0 = time.perf_counter()
    folded_renderer.write(StackSet(meta, stacks), folded, folded_renderer.FoldedOptions())
    print(f"folded: {len(folded.getvalue()) / 1e6:.2f} MB in {time.perf_counter() - t0:.2f} s")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench-flamegraph.html"
        path.write_bytes(html)
        result = first_paint_ms(path)
    if isinstance(result, str):
        print(f"first paint: not measured: {result}")
    else:
        times, drawn, extra = result
        print(f"first paint: {times[0]:.0f} ms cold, {min(times[1:]):.0f} ms warm in headless "
              f"Chromium (from navigation start), {drawn:,} frames drawn, {extra} network "
              f"requests (target < 1000 ms: {times[0] / 1000:.2f} of budget)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
