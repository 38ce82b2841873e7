"""``profiler view`` at scale: file size, first paint, range re-render and page memory.

    make bench-view            (or: python benchmarks/bench_view.py [--samples N] [--threads T]
                                [--record-seconds S: also a real system-wide recording])

Writes a synthetic capture (the format's own encoder: N samples over T threads, each with its
COMM record, 4000 distinct depth-8..20 stacks over 3000 functions named by the capture's kallsyms
snapshot, two CPUs), then:

1. ``profiler view`` on it (wall time of the command, size of the HTML file);
2. for comparison, the same capture as ``export -f firefox`` (the Firefox Profiler's processed
   format) and ``export -f speedscope``: their file sizes, raw and gzip'd;
3. opens the view in headless Chromium (Debian's /usr/bin/chromium, Playwright): first paint
   (ms from navigation start to the frame after the first render), range selections
   re-rendering the flame graph and call tree (ms per selection, median and worst of 12), and
   the page's memory: the renderer process's PSS and the JS heap.

Goals (issue #27, 1M samples / 64 threads): file <= 20 MB, first paint <= 1.5 s, a range
selection <= 250 ms, page memory <= 400 MB. Timings on a shared 2-core VM are noisy.
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profiler.format import records as R  # noqa: E402
from profiler.format.attr import attr_to_dict, new_attr  # noqa: E402
from profiler.format.container.writer import CaptureWriter  # noqa: E402
from profiler.format.encode import encode  # noqa: E402
from profiler.format.header import make_header  # noqa: E402

SAMPLE_TYPE = (R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME | R.PERF_SAMPLE_CPU
               | R.PERF_SAMPLE_PERIOD | R.PERF_SAMPLE_CALLCHAIN)
KBASE, FUNCS = 0xFFFFFFFF81000000, 3000
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def write_capture(path: Path, n: int, threads: int, per_frame: int = 5000) -> None:
    attr = new_attr(type=1, config=0, sample_type=SAMPLE_TYPE, sample_id_all=1, freq=1, sample_period=4000,
                    comm=1, task=1)
    layout = R.SampleLayout.from_attr(attr_to_dict(attr))
    header = make_header([{"name": "cpu-clock", "attr": attr_to_dict(attr), "ids": [1]}])
    rng = random.Random(1)
    templates = []
    for _ in range(4000):
        depth = rng.randint(8, 20)
        chain = (R.PERF_CONTEXT_KERNEL,) + tuple(KBASE + 0x100 * (1 + rng.randrange(FUNCS)) + 0x10 * rng.randrange(8)
                                                 for _ in range(depth))
        templates.append(chain)
    pid = 5000
    writer = CaptureWriter.create(path, header)
    comms = b"".join(encode(R.Comm(pid=pid, tid=pid + t, comm=f"worker-{t}",
                                   sample_id=R.SampleId(pid=pid, tid=pid + t, time=1_000_000, cpu=0)), layout)
                     for t in range(threads))
    writer.write_raw(0, comms)
    t, written = 2_000_000, 0
    while written < n:
        count = min(per_frame, n - written)
        cpu = (written // per_frame) % 2
        parts = []
        for _ in range(count):
            tid = pid + rng.randrange(threads)
            t += 250_000 // max(1, threads // 2)
            chain = templates[min(len(templates) - 1, int(rng.expovariate(1 / 600)))]  # a few hot stacks
            parts.append(encode(R.Sample(ip=chain[1], pid=pid, tid=tid, time=t, cpu=cpu, period=250_000,
                                         callchain=chain, misc=R.PERF_RECORD_MISC_KERNEL), layout))
        writer.write_raw(cpu, b"".join(parts))
        written += count
        if written % (per_frame * 2) == 0:
            writer.write_round()
    names = "".join(f"{KBASE + 0x100 * (1 + k):016x} T subsystem_{k % 37}_function_{k}\n" for k in range(FUNCS))
    text = f"{KBASE:016x} T _text\n{names}{KBASE + 0x100 * (FUNCS + 1):016x} T _etext\n"
    writer.write_meta("kallsyms", {"text": text, "kptr_restrict": 0, "hidden": False})
    writer.close({"samples": n})


def profiler(*args: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "profiler", *args], check=True, capture_output=True)
    return time.perf_counter() - t0


def gz_size(path: Path) -> int:
    return len(gzip.compress(path.read_bytes(), compresslevel=6))


def process_tree(root: int) -> list[int]:
    """``root`` and its descendants (from /proc), only this benchmark's own processes."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def renderer_pss_mb() -> float:
    """PSS of the Chromium renderer processes under this benchmark (the page's memory)."""
    total = 0
    for p in process_tree(os.getpid()):
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                if b"--type=renderer" not in f.read():
                    continue
            with open(f"/proc/{p}/smaps_rollup") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration):
            continue
    return total / 1024


def measure_page(html: Path, selections: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(html.as_uri())
        page.wait_for_selector("html[data-pv-ready]", timeout=120_000)
        page.wait_for_function("view.firstPaintMs > 0")
        first = page.evaluate("[view.loadMs, view.lastRenderMs, view.firstPaintMs]")
        end = page.evaluate("view.model.endNs")
        rng = random.Random(2)
        times = []
        for _ in range(selections):
            width = end * rng.uniform(0.05, 0.6)
            a = rng.uniform(0, end - width)
            # from the call to the frame after it is painted: the flame graph and the call tree
            ms = page.evaluate("""([a, b]) => new Promise(done => {
                const t0 = performance.now(); view.select(a, b);
                requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - t0))); })""",
                               [a, a + width])
            times.append(ms)
        merged = page.evaluate("""() => { const t0 = performance.now(); view.setMerge(true);
                                         return performance.now() - t0; }""")
        bottom = page.evaluate("""() => { const t0 = performance.now(); view.setMerge(false); view.setTab('bottom');
                                         return performance.now() - t0; }""")
        client = page.context.new_cdp_session(page)
        client.send("Performance.enable")
        heap = {m["name"]: m["value"] for m in client.send("Performance.getMetrics")["metrics"]}
        pss = renderer_pss_mb()
        browser.close()
    return {"load_ms": first[0], "first_render_ms": first[1], "first_paint_ms": first[2],
            "select_median_ms": statistics.median(times), "select_max_ms": max(times),
            "merge_ms": merged, "bottom_up_ms": bottom,
            "js_heap_mb": heap.get("JSHeapUsedSize", 0) / 2**20, "renderer_pss_mb": pss}


def measure(capture: Path, d: Path, selections: int) -> None:
    """The view of ``capture`` and the two exports beside it, then the page in Chromium."""
    html = d / (capture.stem + ".html")
    took = profiler("view", "-i", str(capture), "-o", str(html))
    print(f"profiler view: {took:.1f} s, file {html.stat().st_size / 1e6:.1f} MB (goal <= 20 MB)")
    for fmt in ("firefox", "speedscope"):
        out = d / f"{capture.stem}.{fmt}.json"
        took = profiler("export", "-f", fmt, "-i", str(capture), "-o", str(out))
        print(f"export -f {fmt}: {took:.1f} s, file {out.stat().st_size / 1e6:.1f} MB "
              f"({gz_size(out) / 1e6:.1f} MB gzip'd)")
    r = measure_page(html, selections)
    print(f"page: data inflated and decoded in {r['load_ms']:.0f} ms, first render {r['first_render_ms']:.0f} ms, "
          f"first paint {r['first_paint_ms']:.0f} ms (goal <= 1500)")
    print(f"range selection, flame graph + call tree to paint: median {r['select_median_ms']:.0f} ms, "
          f"worst {r['select_max_ms']:.0f} ms of {selections} (goal <= 250)")
    print(f"merging threads: {r['merge_ms']:.0f} ms; opening bottom-up with threads apart: "
          f"{r['bottom_up_ms']:.0f} ms")
    print(f"page memory: renderer PSS {r['renderer_pss_mb']:.0f} MB, JS heap {r['js_heap_mb']:.0f} MB "
          f"(goal <= 400 MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--threads", type=int, default=64)
    parser.add_argument("--selections", type=int, default=12)
    parser.add_argument("--record-seconds", type=float, default=0.0,
                        help="also record the whole machine (-a -g) for this long and measure its view")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        capture = d / "synthetic.prof"
        write_capture(capture, args.samples, args.threads)
        print(f"capture: {args.samples:,} samples, {args.threads} threads, {capture.stat().st_size / 1e6:.1f} MB")
        measure(capture, d, args.selections)
        if args.record_seconds > 0:
            real = d / "system.prof"
            subprocess.run([sys.executable, "-m", "profiler", "record", "-q", "-a", "-g", "-o", str(real), "--",
                            "sleep", str(args.record_seconds)], check=True, capture_output=True)
            print(f"\nreal capture: record -a -g for {args.record_seconds:g} s, {real.stat().st_size / 1e6:.1f} MB")
            measure(real, d, args.selections)
        print("(a shared 2-core VM: timings vary from run to run)")


if __name__ == "__main__":
    main()
