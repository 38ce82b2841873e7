"""``profiler dump``: every frame and record, one line each (for debugging)."""

from __future__ import annotations

from typing import Any, TextIO

import sys

import click

from profiler.commands._common import input_option, warn
from profiler.format import records as R
from profiler.format.container.layout import FRAME_INDEX, FRAME_META, FRAME_RAW, FRAME_SYNTH, INDEX_ENTRY
from profiler.format.container.reader import CaptureReader
from profiler.format.container.scan import FileFrame
from profiler.format.events import EventTable


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return f"{v:#x}" if v > 0xFFFF else str(v)
    if isinstance(v, bytes):
        return v.hex() if len(v) <= 32 else f"<{len(v)} bytes>"
    if isinstance(v, tuple):
        return "[" + ",".join(_value(x) for x in v) + "]"
    if isinstance(v, R.SampleId | R.ReadValues | R.BranchEntry):
        return "{" + " ".join(f"{k}={_value(x)}" for k, x in R.record_fields(v).items()  # type: ignore[arg-type]
                              if x is not None) + "}"
    return str(v)


def record_line(rec: R.Record) -> str:
    name = R.record_name(rec.type if isinstance(rec, R.UnknownRecord) else rec.TYPE)
    parts = [name, f"misc={rec.misc:#x}"]
    for key, value in R.record_fields(rec).items():
        if key in ("misc",) or value is None:
            continue
        parts.append(f"{key}={_value(value)}")
    return " ".join(parts)


def dump(reader: CaptureReader, out: TextIO) -> None:
    events = EventTable.from_header(reader.header)
    for frame in reader.iter_frames():
        out.write(_frame_line(frame))
        if frame.kind in (FRAME_RAW, FRAME_SYNTH):
            for rec in events.decode_stream(frame.payload, reader):
                out.write("    " + record_line(rec) + "\n")
    out.write(f"# ended cleanly: {'yes' if reader.clean_end else 'no'}\n")


def _frame_line(frame: FileFrame) -> str:
    cpu = "" if frame.cpu == 0xFFFF else f" cpu={frame.cpu}"
    extra = ""
    if frame.kind == FRAME_META:
        kind, data = frame.meta()
        extra = f" kind={kind} keys={','.join(sorted(str(key) for key in data))}"  # any key type
    elif frame.kind == FRAME_INDEX and len(frame.payload) % INDEX_ENTRY.size == 0:
        extra = " samples=" + ",".join(f"{seq}:{n}" for seq, n in INDEX_ENTRY.iter_unpack(frame.payload))
    return f"frame {frame.seq} @{frame.offset} {frame.kind_name}{cpu} len={len(frame.payload)}{extra}\n"


@click.command("dump")
@input_option
def command(input_path: str) -> None:
    """Print every frame and record of a capture, one line each, with raw fields."""
    with CaptureReader.open(input_path) as reader:
        dump(reader, sys.stdout)
        for message in reader.warnings:
            warn(message)
