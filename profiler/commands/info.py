"""``profiler info``: describe a capture."""

from __future__ import annotations

import datetime
from typing import TextIO

import sys

import click

from profiler.commands._common import input_option, warn
from profiler.format.container.reader import CaptureReader
from profiler.format.summary import CaptureSummary, attr_words, summarize


def render_summary(s: CaptureSummary, out: TextIO) -> None:
    h = s.header
    w = out.write
    w(f"# capture: {s.path} ({s.size} bytes, format {s.version[0]}.{s.version[1]}, "
      f"written by profiler {h.get('tool_version', '?')})\n")
    w(f"# host: {h.get('hostname', '?')}, kernel {h.get('kernel_release', '?')}, "
      f"{h.get('arch', '?')} {h.get('byte_order', '?')}-endian {8 * int(h.get('word_size', 8))}-bit, "
      f"{h.get('nr_cpus', '?')} CPUs, page size {h.get('page_size', '?')}\n")
    if h.get("start_time_ns"):
        start = datetime.datetime.fromtimestamp(int(h["start_time_ns"]) / 1e9, datetime.UTC)
        w(f"# started: {start.isoformat(timespec='seconds')} (perf clock {h.get('start_perf_clock_ns')})\n")
    if h.get("cmdline"):
        w(f"# cmdline: {' '.join(str(a) for a in h['cmdline'])}\n")
    target = h.get("target") or {}
    if target:
        parts = [f"{k}={v}" for k, v in target.items() if v not in (None, [], False)]
        w(f"# target: {', '.join(parts) or 'none'}\n")
    for i, ev in enumerate(h.get("events", [])):
        w(f"# event {i}: {ev.get('name')} (ids {', '.join(str(x) for x in ev.get('ids', [])) or 'none'})\n")
        for line in attr_words(ev.get("attr", {})):
            w(f"#   {line}\n")
    dur = s.duration_s
    w(f"# duration: {dur:.3f} s\n" if dur is not None else "# duration: unknown (no timed records)\n")
    w(f"# samples: {s.samples}\n")
    w(f"# lost: {s.lost_records} records (LOST), {s.lost_samples} samples (LOST_SAMPLES)\n")
    w("# records by type:\n")
    for name, count in sorted(s.record_counts.items()):
        w(f"#   {name:<18} {count}\n")
    w("# frames: " + ", ".join(f"{k} {v}" for k, v in sorted(s.frame_counts.items())) + "\n")
    if s.zstd_bytes is not None:
        stored, inflated = s.zstd_bytes
        w(f"# raw_zstd frames (compacted, zstd-compressed records): {stored} bytes stored, {inflated} bytes "
          f"inflated ({inflated / max(1, stored):.1f}x)\n")
    if s.metadata:
        w("# metadata: " + ", ".join(f"{k} {v}" for k, v in sorted(s.metadata.items())) + "\n")
    w(f"# ended cleanly: {'yes' if s.clean_end else 'no (no trailer: the recorder did not finish)'}\n")


@click.command("info")
@input_option
def command(input_path: str) -> None:
    """Describe a capture: header, events, duration, record counts, lost, clean end."""
    with CaptureReader.open(input_path) as reader:
        summary = summarize(reader)
        render_summary(summary, sys.stdout)
        for message in summary.warnings:
            warn(message)
