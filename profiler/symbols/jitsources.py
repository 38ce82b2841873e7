"""A process's JIT code: names from ``perf-PID.map`` and ``jit-PID.dump``, unwind rules for the
code they describe, and a forked child's fallback to its parent's.

:class:`JitSymbols` is what one process's JIT files say, whichever way it was found (packed in
the capture, or the files under ``--symfs`` or in the perf-map directory): the names as one
:class:`SymbolTable` (a jitdump's entries win over a perf map's at the same address) and the
jitdump's functions that carry code bytes or ``.eh_frame`` (:class:`JitBlobs`, deduplicated:
every CPython trampoline is the same 11 bytes and the same CFI). Packed, the blobs ride in
the process's ``jit`` symbols entry as its ``code`` field.

:class:`profiler.unwind.jitcode.JitCodeOf` turns that into unwind rules per process.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import field
from typing import Any

import numpy as np

from profiler.dataclass import dataclass
from profiler.errors import FormatError
from profiler.symbols.jitdump import JitDump
from profiler.symbols.table import SymbolTable

MAX_PARENTS = 32  # fork generations followed for a child's JIT code
MAX_BLOBS = 4096  # distinct code shapes kept per process
MAX_BLOB_BYTES = 1 << 16


@dataclass
class JitBlobs:
    """Functions with code bytes and/or ``.eh_frame``: ``start``/``size`` per function, and
    ``blob`` its index in ``blobs`` (code bytes, ``.eh_frame`` or empty)."""

    start: list[int] = field(default_factory=list)
    size: list[int] = field(default_factory=list)
    blob: list[int] = field(default_factory=list)
    blobs: list[tuple[bytes, bytes]] = field(default_factory=list)

    @classmethod
    def of_dump(cls, dump: JitDump) -> JitBlobs:
        out = cls()
        ids: dict[tuple[bytes, bytes], int] = {}
        for fn in dump.functions:
            key = (fn.code, fn.eh_frame or b"")
            k = ids.get(key)
            if k is None:
                if len(out.blobs) >= MAX_BLOBS:
                    continue
                k = ids[key] = len(out.blobs)
                out.blobs.append(key)
            out.start.append(fn.start)
            out.size.append(fn.size)
            out.blob.append(k)
        return out

    def to_packed(self) -> dict[str, Any]:
        return {"start": np.asarray(self.start, dtype="<u8").tobytes(),
                "size": np.asarray(self.size, dtype="<u8").tobytes(),
                "blob": np.asarray(self.blob, dtype="<u4").tobytes(),
                "blobs": [[code, eh] for code, eh in self.blobs]}

    @classmethod
    def from_packed(cls, data: Any) -> JitBlobs:
        """Inverse of :meth:`to_packed`; FormatError when damaged (the entry is untrusted)."""
        try:
            raw = [data[k] for k in ("start", "size", "blob")]
            blobs = data["blobs"]
            if not all(isinstance(v, (bytes, bytearray)) for v in raw) or not isinstance(blobs, list):
                raise FormatError("a column is not bytes")
            start = np.frombuffer(bytes(raw[0]), dtype="<u8").tolist()
            size = np.frombuffer(bytes(raw[1]), dtype="<u8").tolist()
            blob = np.frombuffer(bytes(raw[2]), dtype="<u4").tolist()
            pairs = []
            for b in blobs[:MAX_BLOBS]:
                code, eh = b
                if not isinstance(code, (bytes, bytearray)) or not isinstance(eh, (bytes, bytearray)) \
                        or len(code) + len(eh) > MAX_BLOB_BYTES:
                    raise FormatError("a code blob is not bytes or too large")
                pairs.append((bytes(code), bytes(eh)))
        except (KeyError, TypeError, ValueError) as exc:
            raise FormatError(f"the packed JIT code is damaged ({exc})") from exc
        if not len(start) == len(size) == len(blob) or any(b >= len(pairs) for b in blob):
            raise FormatError("the packed JIT code is damaged (counts disagree)")
        return cls(start, size, blob, pairs)


@dataclass
class JitSymbols:
    """What a process's JIT files say: names, and the code of the jitdump's functions."""

    table: SymbolTable | None
    blobs: JitBlobs
    origin: str

    @classmethod
    def of(cls, perf_map: SymbolTable | None, dump: JitDump | None, origin: str) -> JitSymbols:
        if dump is None or not dump.functions:
            return cls(perf_map, JitBlobs(), origin)
        starts = [fn.start for fn in dump.functions]
        sizes = [fn.size for fn in dump.functions]
        names = [fn.name for fn in dump.functions]
        if perf_map is not None and len(perf_map):  # the map's entries where the dump has none
            taken = set(starts)
            for i in range(len(perf_map)):
                s = int(perf_map.starts[i])
                if s not in taken:
                    starts.append(s)
                    sizes.append(int(perf_map.ends[i]) - s)
                    names.append(perf_map.name(i))
        order = sorted(range(len(starts)), key=starts.__getitem__)
        table = SymbolTable.from_symbols([starts[i] for i in order], [sizes[i] for i in order],
                                         [names[i] for i in order])
        return cls(table, JitBlobs.of_dump(dump), origin)


def lineage(pid: int, parent: Mapping[int, int]) -> Iterator[int]:
    """``pid``, then the process it forked from, and so on (at most :data:`MAX_PARENTS`
    generations; a loop in hostile FORK records ends it): where a forked child's JIT code is
    found when its own map has none (it runs its parent's code but starts an empty map)."""
    seen: set[int] = set()
    p: int | None = pid
    while p is not None and p not in seen and len(seen) <= MAX_PARENTS:
        seen.add(p)
        yield p
        p = parent.get(p)
