"""``report --header`` (the capture's header as ``# key : value`` lines, like perf's
``--header-only``) and ``report --stats`` (records by type, lost samples, clean end)."""

from __future__ import annotations

from typing import Any, TextIO

from profiler.format.decode.columns import CaptureData
from profiler.format.container.reader import CaptureReader


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def render_header(out: TextIO, header: dict[str, Any]) -> None:
    out.write("# ========\n# captured by profiler\n# ========\n")
    for key in sorted(header):
        if key == "events":
            continue
        out.write(f"# {key} : {_text(header[key])}\n")
    for i, ev in enumerate(header.get("events") or []):
        attr = ev.get("attr") or {}
        shown = {k: v for k, v in attr.items() if v}
        out.write(f"# event {i} : name = {ev.get('name')}, ids = {_text(ev.get('ids') or [])}, "
                  + ", ".join(f"{k} = {v}" for k, v in sorted(shown.items())) + "\n")
    out.write("#\n")


def stats_data(reader: CaptureReader, data: CaptureData) -> dict[str, Any]:
    """Plain data behind ``--stats``."""
    lost = 0
    for meta in reader.metadata("lost"):
        per_cpu = meta.get("per_cpu") or {}
        lost += sum(int(v) for v in per_cpu.values())
    return {
        "records": dict(sorted(data.counts.items())),
        "total_records": sum(data.counts.values()),
        "samples": len(data.samples),
        "lost_samples": lost,
        "damaged_samples": data.damaged_samples,
        "clean_end": reader.clean_end,
        "warnings": list(reader.warnings) + list(data.warnings),
    }


def render_stats(out: TextIO, reader: CaptureReader, data: CaptureData) -> None:
    st = stats_data(reader, data)
    out.write("Aggregated stats:\n")
    out.write(f"{'TOTAL records':>22s}: {st['total_records']:10d}\n")
    for name, count in st["records"].items():
        out.write(f"{name + ' records':>22s}: {count:10d}\n")
    out.write(f"{'lost samples':>22s}: {st['lost_samples']:10d}\n")
    if st["damaged_samples"]:
        out.write(f"{'damaged samples':>22s}: {st['damaged_samples']:10d}\n")
    out.write(f"{'clean end':>22s}: {'yes' if st['clean_end'] else 'no'}\n")
    for w in st["warnings"]:
        out.write(f"warning: {w}\n")
