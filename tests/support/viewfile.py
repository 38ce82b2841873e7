"""Read back what ``profiler view`` packed into its HTML (profiler/report/render/viewdata.py),
in Python, to check the file against the report's own outputs without a browser."""

from __future__ import annotations

import base64
import gzip
import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

_DATA = re.compile(r'<script type="application/octet-stream" id="pv-data">([A-Za-z0-9+/=]*)</script>')


@dataclass
class ViewFile:
    doc: dict[str, Any]
    buffer: bytes
    base: int

    def column(self, desc: dict[str, Any]) -> npt.NDArray[Any]:
        dtype = np.dtype(desc["type"]).newbyteorder("<")
        offset = self.base + self.doc["columns"][desc["col"]]
        return np.frombuffer(self.buffer, dtype=dtype, count=desc["n"], offset=offset)

    def event(self, name: str) -> dict[str, Any]:
        return next(e for e in self.doc["events"] if e["name"] == name)

    def times(self, name: str) -> npt.NDArray[np.float64]:
        return np.cumsum(self.column(self.event(name)["time"]).astype(np.float64))

    def folded(self, name: str, weight: str = "samples") -> dict[str, int]:
        """``export -f folded`` of one event rebuilt from the packed tables: comm;root;...;leaf."""
        strings, e = self.doc["strings"], self.event(name)
        frames = self.column(self.doc["frames"]).reshape(-1, 4)
        prefix, frame = self.column(self.doc["stacks"]["prefix"]), self.column(self.doc["stacks"]["frame"])
        pair = self.column(e["pair"])
        stack, thread = self.column(e["pair_stack"])[pair], self.column(e["pair_thread"])[pair]
        counts = self.column(e["count"]) if "count" in e else np.ones(len(stack), np.int64)
        values = self.column(e["period"]) if weight == "period" else counts
        out: dict[str, int] = {}
        for s, t, v in zip(stack.tolist(), thread.tolist(), values.tolist()):
            path = []
            n = int(s)
            while n >= 0:
                path.append(strings[frames[frame[n]][0]])
                n = int(prefix[n])
            key = ";".join([strings[self.doc["threads"][t][2]], *reversed(path)])
            out[key] = out.get(key, 0) + int(v)
        return out


def read_view(path: Path) -> ViewFile:
    match = _DATA.search(path.read_text(encoding="utf-8"))
    assert match is not None, "no packed data in the page"
    raw = gzip.decompress(base64.b64decode(match.group(1)))
    (length,) = struct.unpack_from("<I", raw)
    return ViewFile(json.loads(raw[4:4 + length]), raw, 4 + length)
