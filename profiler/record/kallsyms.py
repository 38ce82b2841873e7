"""The kernel symbols a capture needs, from /proc/kallsyms, without numpy.

A full /proc/kallsyms snapshot is 5 MB of text (about 1 MB compressed): most of a short
capture's bytes, and tens of milliseconds to read, compress and write. A report needs only
the symbols that cover a kernel address some sample holds. So the recorder:

* at the start reads the head of /proc/kallsyms only: ``_text`` (for the synthesized kernel
  map) and whether ``kernel.kptr_restrict`` hides the addresses (:func:`read_head`);
* during the recording collects the distinct kernel addresses of kernel-mode samples, their
  ip and callchain (``StreamStats`` in :mod:`profiler.record.session`, see
  :class:`SampleSpan`);
* at the end reads /proc/kallsyms once and packs the symbols that cover those addresses
  (:func:`subset`), each with its exact extent, in the layout of ``profiler archive``'s
  kernel entry (``KernelSymbols.to_packed``: per table sorted starts and sizes as
  little-endian u64 bytes and one NUL-joined name blob). The kernel's own lines are kept for
  the current boot (:func:`cache_file`): a later recording whose addresses are all the
  kernel's own reads them instead (a mapped file: a look-up touches a few pages), and
  /proc/kallsyms not at all.

The symbols chosen are those :func:`profiler.symbols.kallsyms.parse_kallsyms` gives
for the same addresses (the tests check it): lines are read and symbols chosen by the rules
of :mod:`profiler.format.kallsyms` (text symbols only, one table for the kernel and one per
``[module]``, the last listed of several symbols at one address, each up to the next one's
start). An address goes to the kernel's table when it is within it, else to the module whose
span holds it.
"""

from __future__ import annotations

import bisect
import itertools
import mmap
import operator
import os
import struct
import sys
from collections.abc import Iterable

from profiler.format import abi as R
from profiler.format.kallsyms import TEXT_TYPES, all_zero, parse_line, table_end
from profiler.value import Frozen, Value

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any

    StrPath = str | os.PathLike[str]

KALLSYMS = "/proc/kallsyms"
PACKED_VERSION = 1  # profiler.symbols.table.PACKED_VERSION
_HEAD_CHUNK = 64 << 10


class Head(Frozen):
    """What the first lines of /proc/kallsyms say."""

    __slots__ = _fields = ("text_address", "hidden", "lines")

    def __init__(self, text_address: int | None, hidden: bool, lines: bytes) -> None:
        self.text_address = text_address  # ``_text``, or None when missing or hidden
        self.hidden = hidden  # every address reads as zero (kptr_restrict, or no privilege)
        self.lines = lines  # the whole lines of the first chunk read


def read_head(path: StrPath = KALLSYMS) -> Head:
    """``_text`` and the hidden flag, reading no further than needed (``_text`` is near the
    start: the kernel generates the file as it is read, so the rest costs nothing)."""
    seen = b""
    first = b""
    try:
        with open(path, "rb") as stream:
            while True:
                chunk = stream.read(_HEAD_CHUNK)
                if not chunk:
                    break
                seen = seen[seen.rfind(b"\n") + 1:] + chunk
                if not first:
                    first = chunk
                if _find_text(seen) is not None:
                    break
    except OSError:
        return Head(None, False, b"")
    lines = first[: first.rfind(b"\n") + 1] if b"\n" in first else first
    hidden = all_zero(lines)
    found = None if hidden else _find_text(seen)
    return Head(found or None, hidden, lines)


_HEX_TEXT = "0123456789abcdefABCDEF"


def _find_text(data: bytes) -> int | None:
    """The address of the first ``_text`` or ``_stext`` line of the kernel's own (as
    synth.kernel_text_address), lines read by :func:`profiler.format.kallsyms.parse_line`."""
    at = data.find(b"text")
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        if end < 0:
            end = len(data)
        parsed = parse_line(data[start:end])
        if parsed is not None and parsed[2] in (b"_text", b"_stext") and not parsed[3]:
            return parsed[0]
        at = data.find(b"text", end)
    return None


class SampleSpan(Frozen):
    """Where a SAMPLE record's ip and callchain are, the same for every event of a recording:
    ``ip`` the byte offset of the ip (or -1), ``callchain`` that of the callchain's ``nr``
    (or -1). None from :meth:`of` when the events disagree or a variable-size field comes
    first: then every word of a kernel-mode sample is looked at."""

    __slots__ = _fields = ("ip", "callchain")

    def __init__(self, ip: int, callchain: int) -> None:
        self.ip = ip
        self.callchain = callchain

    @classmethod
    def of(cls, layouts: Iterable[R.SampleLayout]) -> SampleSpan | None:
        spans = {cls._one(layout) for layout in layouts}
        if len(spans) != 1:
            return None
        return spans.pop()

    @classmethod
    def _one(cls, layout: R.SampleLayout) -> SampleSpan | None:
        offset, ip, chain = 8, -1, -1
        for f in layout.sample_fields:
            if f.bit == R.PERF_SAMPLE_IP:
                ip = offset
            elif f.bit == R.PERF_SAMPLE_CALLCHAIN:
                chain = offset
                break
            elif f.kind not in (R.KIND_U64, R.KIND_U32_PAIR):
                return None
            offset += 8
        return cls(ip, chain)


def kernel_floor(word_bits: int = 64 if sys.maxsize > 2**32 else 32) -> int:
    """Addresses at or above this are the kernel's (the upper half of the address space; on
    32-bit machines a superset: addresses without a kernel symbol are left out at the end)."""
    return 1 << (word_bits - 1)


# --- the subset -------------------------------------------------------------------------------


class _Table(Value):
    """One table's lines as one blob (``\\n``-separated), stably sorted by address
    (fixed-width lower-case hex sorts as the numbers do). Lines are found by bisecting byte
    offsets, so the kernel's 100k+ lines are never split one by one."""

    __slots__ = _fields = ("blob", "width")

    def __init__(self, blob: bytes | mmap.mmap, width: int) -> None:
        self.blob = blob
        self.width = width

    @classmethod
    def of(cls, blob: bytes | mmap.mmap, width: int) -> _Table:
        """The kernel lists a table sorted by address (its own look-ups bisect it): checked at
        256 evenly spaced lines; a table that fails is sorted."""
        step = max(len(blob) // 256, 1)
        probe = [blob[s : s + width] for s in sorted({_line_start(blob, off) for off in range(0, len(blob), step)})]
        if all(map(operator.le, probe, itertools.islice(probe, 1, None))):
            return cls(blob, width)
        return cls.sorted_lines([line for line in bytes(blob).split(b"\n") if line], width)

    @classmethod
    def sorted_lines(cls, lines: list[bytes], width: int) -> _Table:
        keys = [line[:width] for line in lines]
        order = sorted(range(len(keys)), key=keys.__getitem__)  # stable: aliases keep their order
        return cls(b"\n".join(lines[i] for i in order), width)

    def line(self, start: int) -> bytes:
        end = self.blob.find(b"\n", start)
        return self.blob[start : len(self.blob) if end < 0 else end]

    def next_start(self, start: int) -> int:
        """The start of the line after the one at ``start``, or -1."""
        end = self.blob.find(b"\n", start)
        return -1 if end < 0 or end + 1 >= len(self.blob) else end + 1

    def prev_start(self, start: int) -> int:
        return -1 if start <= 0 else _line_start(self.blob, start - 1)

    def last_at_most(self, address: int) -> int:
        """The start of the last line whose address is at most ``address``, or -1."""
        blob, width = self.blob, self.width
        key = b"%0*x" % (width, address)
        if not blob or blob[:width] > key:
            return -1
        lo, hi = 0, len(blob)  # lo: a line start at most the key; no line from hi on is
        while True:
            mid = (lo + hi) // 2
            at = blob.rfind(b"\n", lo, mid) + 1
            if at <= lo:
                at = blob.find(b"\n", mid, hi) + 1
                if at <= 0 or at >= hi:
                    return lo
            if blob[at : at + width] <= key:
                lo = at
            else:
                hi = at

    def text_from(self, start: int, step: int) -> int:
        """The first text line at or after (``step`` 1) or before (-1) ``start``, or -1."""
        while start >= 0 and not _is_text(self.line(start), self.width):
            start = self.next_start(start) if step > 0 else self.prev_start(start)
        return start

    def top_start(self) -> int | None:
        at = self.text_from(_line_start(self.blob, len(self.blob) - 1), -1) if self.blob else -1
        return None if at < 0 else int(self.blob[at : at + self.width], 16)

    def first_start(self) -> int | None:
        at = self.text_from(0, 1) if self.blob else -1
        return None if at < 0 else int(self.blob[at : at + self.width], 16)

    def symbol(self, address: int, end_of_table: int) -> tuple[int, int, bytes] | None:
        """(start, end, name) of the text symbol covering ``address``: the last text line at
        or below it (the last listed of its aliases), up to the next text line."""
        i = self.last_at_most(address)
        if i < 0:
            return None
        j = self.text_from(i, -1)
        if j < 0:
            return None
        width = self.width
        start = int(self.blob[j : j + width], 16)
        k = self.next_start(i)
        k = self.text_from(k, 1) if k >= 0 else -1
        end = int(self.blob[k : k + width], 16) if k >= 0 else end_of_table
        if not start <= address < end:
            return None
        return start, end, _name(self.line(j), width)


def _line_start(blob: bytes | mmap.mmap, offset: int) -> int:
    """The start of the line holding ``offset`` (a newline belongs to the line it ends)."""
    return blob.rfind(b"\n", 0, offset) + 1


def _is_text(line: bytes, width: int) -> bool:
    """A text symbol's line of the table's address width."""
    if line.find(b" ") != width:
        return False
    parsed = parse_line(line)
    return parsed is not None and parsed[1] in TEXT_TYPES


def _name(line: bytes, width: int) -> bytes:
    parsed = parse_line(line)
    return b"" if parsed is None else parsed[2]


def _tables(text: bytes | mmap.mmap) -> dict[str, _Table]:
    """The lines of each table: ``""`` the kernel, else the module's name. The kernel's lines
    come first (every module line ends in ``\\t[module]``) and stay one blob."""
    width = text.find(b" ")
    if width <= 0 or text.find(b"\n", 0, width) >= 0:
        return {}
    tab = text.find(b"\t")
    split = len(text) if tab < 0 else text.rfind(b"\n", 0, tab) + 1
    tables = {}
    kernel = _Table.of(text if split == len(text) else text[:split], width)
    if kernel.first_start() is not None:
        tables[""] = kernel
    groups: dict[str, list[bytes]] = {}
    for line in text[split:].split(b"\n"):
        if line.find(b" ") != width:
            continue  # malformed, or another address width: parse_kallsyms skips these too
        parsed = parse_line(line)
        if parsed is None:
            continue
        groups.setdefault(parsed[3].decode("utf-8", "surrogateescape"), []).append(line)
    for module, group in groups.items():
        if module and any(_is_text(line, width) for line in group):
            tables[module] = _Table.sorted_lines(group, width)
    return tables


def subset(text: bytes, addresses: Iterable[int]) -> dict[str, Any]:
    """``KernelSymbols.to_packed()`` data: the symbols of ``text`` (a /proc/kallsyms
    snapshot) that cover ``addresses``, each with its exact extent."""
    return _subset(_tables(text), addresses)


def _kernel_span(tables: dict[str, _Table]) -> tuple[int, int]:
    kernel = tables.get("")
    if kernel is None:
        return 0, 0
    return kernel.first_start() or 0, table_end(kernel.top_start() or 0)


def _subset(tables: dict[str, _Table], addresses: Iterable[int]) -> dict[str, Any]:
    ends = {m: table_end(t.top_start() or 0) for m, t in tables.items()}
    kernel_span = _kernel_span(tables)
    spans = sorted((t.first_start() or 0, ends[m], m) for m, t in tables.items() if m)
    chosen: dict[str, dict[int, tuple[int, bytes]]] = {}
    for address in sorted(set(addresses)):
        module: str | None = None
        if kernel_span[0] <= address < kernel_span[1]:
            module = ""
        else:
            pos = bisect.bisect_right(spans, (address, 1 << 64, "")) - 1
            if pos >= 0 and spans[pos][0] <= address < spans[pos][1]:
                module = spans[pos][2]
        if module is None:
            continue
        hit = tables[module].symbol(address, ends[module])
        if hit is not None:
            chosen.setdefault(module, {})[hit[0]] = (hit[1] - hit[0], hit[2])
    packed = {m: _pack(syms) for m, syms in chosen.items()}
    return {"all_zero": False, "kernel": packed.pop("", _pack({})), "modules": packed}


def _pack(symbols: dict[int, tuple[int, bytes]]) -> dict[str, Any]:
    starts = sorted(symbols)
    n = len(starts)
    return {
        "version": PACKED_VERSION,
        "count": n,
        "starts": struct.pack(f"<{n}Q", *starts),
        "sizes": struct.pack(f"<{n}Q", *(symbols[s][0] for s in starts)),
        "names": b"\0".join(symbols[s][1] for s in starts),
    }


def count(packed: dict[str, Any]) -> int:
    return int(packed["kernel"]["count"]) + sum(int(t["count"]) for t in packed["modules"].values())


def read_subset(addresses: Iterable[int], path: StrPath = KALLSYMS, *, head: Head | None = None,
                cache: StrPath | None = None) -> dict[str, Any] | None:
    """:func:`subset` of this machine's kallsyms, or None when it cannot be read or hides
    its addresses. No address, no reading: the tables are empty.

    ``cache`` (from :func:`cache_file`) keeps the kernel's own lines for this boot: with it,
    and the ``head`` read at the start showing the cached file's first lines, addresses that
    all fall in the kernel's own span are named without reading /proc/kallsyms (30 ms of
    kernel time per read here); any other address (a module, BPF) reads the file as usual."""
    addresses = set(addresses)
    if not addresses:
        return subset(b"", ())
    if cache is not None and head is not None:
        kept = _from_cache(cache, head.lines, addresses)
        if kept is not None:
            return kept
    try:
        with open(path, "rb") as stream:
            text = stream.read()
    except OSError:
        return None
    head_now = text[:_HEAD_CHUNK]
    if all_zero(head_now[: head_now.rfind(b"\n") + 1] or head_now):
        return None
    if cache is not None:
        _write_cache(cache, text)
    return subset(text, addresses)


# --- the kernel's own lines, kept for this boot -------------------------------------------------

BOOT_ID = "/proc/sys/kernel/random/boot_id"
_CACHE_PREFIX = "kernel-"


def cache_file(build_id: str | None, cache_root: StrPath | None = None) -> str | None:
    """Where this boot's kernel lines are kept: keyed by the kernel's build-id and the boot id
    (KASLR moves the kernel at each boot); None without either."""
    if not build_id:
        return None
    try:
        with open(BOOT_ID) as stream:
            boot = stream.read().strip()
    except OSError:
        return None
    if not (8 <= len(boot) <= 64 and not boot.strip(_HEX_TEXT + "-")):
        return None
    if not (2 <= len(build_id) <= 128 and not build_id.strip(_HEX_TEXT)):
        return None
    if cache_root is None:
        from profiler.cache import cache_root as root

        cache_root = root()
    return os.path.join(cache_root, "kallsyms", f"{_CACHE_PREFIX}{build_id}-{boot}.txt")


def _kernel_lines(text: bytes) -> bytes:
    """The kernel's own lines: those before the first module line."""
    tab = text.find(b"\t")
    return text if tab < 0 else text[: text.rfind(b"\n", 0, tab) + 1]


def _from_cache(cache: StrPath, first_lines: bytes, addresses: set[int]) -> dict[str, Any] | None:
    """The subset from the kept lines, if they start as /proc/kallsyms starts now and every
    address is in the kernel's own span. The file is mapped, not read: a look-up touches a
    few pages of it."""
    first_lines = _kernel_lines(first_lines)
    if not first_lines:
        return None
    try:
        with open(cache, "rb") as stream, mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as kept:
            if kept[: len(first_lines)] != first_lines:
                return None
            tables = _tables(kept)
            low, high = _kernel_span(tables)
            if not all(low <= a < high for a in addresses):
                return None
            return _subset(tables, addresses)
    except (OSError, ValueError):
        return None


def _write_cache(cache: StrPath, text: bytes) -> None:
    """The kernel's own lines (those before the first module line), mode 0600; the files of
    earlier boots are removed. Cache trouble is never an error."""
    kernel = _kernel_lines(text)
    try:
        if os.path.exists(cache):
            return
        directory, name = os.path.split(cache)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        for old in os.listdir(directory):
            if old.startswith(_CACHE_PREFIX) and old.endswith(".txt"):
                try:
                    os.unlink(os.path.join(directory, old))
                except FileNotFoundError:
                    pass
        tmp = os.path.join(directory, f".{name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with open(fd, "wb") as stream:
            stream.write(kernel)
        os.replace(tmp, cache)
    except OSError:
        pass
