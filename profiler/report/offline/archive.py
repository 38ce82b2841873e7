"""``profiler archive``: pack what symbolization needs into the capture itself.

For every DSO a sample's ip or callchain touches (executable, shared libraries, the vdso,
the kernel and its modules, JIT maps) one metadata frame of kind ``symbols`` is added::

    {"kind": "elf" | "vdso" | "kernel" | "jit", "path": str, "build_id": hex | None,
     "layout": ElfLayout.to_packed() | None,      # load segments: file offset -> vaddr
     "symtab": SymbolTable.to_packed(),           # elf, vdso, jit
     "kallsyms": KernelSymbols.to_packed(),       # kernel (modules inside)
     "pid": int,                                  # jit
     "coverage": "sampled" | "all", "source": where the archive found it}

Not whole binaries: by default only the symbols that cover a sampled address are kept
(``coverage: "sampled"``), each with its exact extent, and the result is checked: every
sampled address must resolve to the same symbol and offset as with the full table, else
that DSO's full table is packed instead. ``all_symbols=True`` packs full tables.

Symbols are found on the recording machine through :class:`SymbolSources` without its
packed step (``--symfs``, debug directories, the local file only when its build-id
matches). Re-running is harmless: a DSO already packed (same kind and build-id) is skipped.

Safety: the new capture is built in a temporary file beside the target (a copy of the
capture with the frames appended, or the stripped copy) and moved over it with one
``os.replace``. An interrupted or failed archive leaves the capture byte for byte as it
was. Appending in place would be cheaper but not safe: the trailer (the clean-end mark)
must be cut before appending, so a crash in between would leave a capture that looks like
an interrupted recording.
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
import tempfile
from dataclasses import field
from pathlib import Path
from typing import Any, TextIO

import msgpack
import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.errors import FormatError, ProfilerError, UsageError
from profiler.report.unwind_capture import unwind_capture
from profiler.report.unwind_samples import table_sources
from profiler.unwind.sources import META_KIND as UNWIND_META
from profiler.unwind.table import RuleTable
from profiler.format.container.codec import as_utf8
from profiler.format.container.layout import STDOUT
from profiler.format.container.reader import CaptureReader
from profiler.format.container.writer import CaptureWriter
from profiler.format.localfile import written_in_place
from profiler.report.offline.capture_dsos import DsoUse, scan_capture
from profiler.symbols.debuginfod import DebuginfodClient
from profiler.symbols.kallsyms import KernelSymbols
from profiler.names import KERNEL_DSO
from profiler.report.capture import Capture
from profiler.symbols.sources import (
    KIND_ELF,
    KIND_JIT,
    KIND_KERNEL,
    KIND_VDSO,
    SYMBOLS_META,
    SymbolSources,
    packed_key,
)
from profiler.cache import cache_dir
from profiler.report.offline.strip import write_stripped_copy
from profiler.symbols.dso import DsoSymbols
from profiler.symbols.srcline import line_table_of
from profiler.symbols.table import SymbolTable

U64 = npt.NDArray[np.uint64]


@dataclass(frozen=True)
class PackedDso:
    """One DSO the archive packed."""

    kind: str
    path: str
    build_id: str | None
    symbols: int
    bytes: int  # msgpack size of its frame's payload (before the container's zlib)
    source: str
    coverage: str


@dataclass
class ArchiveResult:
    """What ``archive_capture`` did: packed DSOs, skipped ones, and the bytes it added."""

    capture: Path
    output: Path
    packed: list[PackedDso] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    not_found: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    bytes_before: int = 0
    bytes_after: int = 0
    written: bool = False
    stripped: bool = False
    unwind_tables: list[str] = field(default_factory=list)  # DSOs whose unwind rules were packed

    @property
    def bytes_added(self) -> int:
        return self.bytes_after - self.bytes_before


@dataclass
class ArchivePlan:
    payloads: list[dict[str, Any]] = field(default_factory=list)
    packed: list[PackedDso] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    not_found: list[tuple[str, str]] = field(default_factory=list)


def archive_capture(
    path: str | os.PathLike[str],
    *,
    output: str | os.PathLike[str] | None = None,
    strip_paths: bool = False,
    symfs: str | os.PathLike[str] | None = None,
    debug_dirs: tuple[str, ...] | None = None,
    kallsyms_path: str | os.PathLike[str] | None = None,
    perf_map_dir: str | os.PathLike[str] = "/tmp",
    all_symbols: bool = False,
    debuginfod: DebuginfodClient | None = None,
) -> ArchiveResult:
    """Pack the symbols of every sampled DSO into the capture at ``path`` (or a copy at ``output``).

    Raises :class:`ProfilerError` with one sentence when the capture cannot be read or
    written; the capture is then unchanged.
    """
    src = Path(path)
    out = src if output is None else Path(output)
    if strip_paths and output is None:
        raise UsageError("--strip-paths writes a copy for sharing: name it with -o OUT.")
    in_place = _same_file(src, out)
    if in_place:
        if strip_paths:
            raise UsageError("--strip-paths writes a copy: -o must name another file than the capture.")
        check_writable(src)
    capture = Capture(str(src), stacks_apart=False)  # copied whole, stack copies and all
    reader = capture.reader
    if in_place and _is_perf_data(reader):
        reader.close()
        raise UsageError(f"{src} is a perf.data file: name the capture to write with -o OUT.")
    try:
        metadata = capture.symbol_metadata()
        existing = SymbolSources(metadata)
        finder = SymbolSources(metadata, symfs=symfs, debug_dirs=debug_dirs, kallsyms_path=kallsyms_path,
                               perf_map_dir=perf_map_dir, use_packed=False, debuginfod=debuginfod)
        data = capture.data
        jit = SymbolSources(metadata, symfs=symfs, debug_dirs=debug_dirs, perf_map_dir=perf_map_dir)
        unwound = unwind_capture(reader, data, table_sources(reader, None if symfs is None else str(symfs),
                                                             debug_dirs, use_packed=False), jit.jit_symbols)
        found = scan_capture(reader, data, lambda: finder.kernel()[0])
        finder.prefetch((u.path, u.build_id) for u in found.hit() if u.kind == KIND_ELF)
        plan = plan_archive(found.hit(), existing, finder, all_symbols)
        result = ArchiveResult(src, out, plan.packed, plan.already, plan.not_found,
                               bytes_before=reader.size, bytes_after=reader.size, stripped=strip_paths)
        frames = [(SYMBOLS_META, p) for p in plan.payloads]
        unwind = unwind_payloads(reader, unwound.tables, strip_paths)
        frames.extend((UNWIND_META, p) for p in unwind)
        result.unwind_tables = [str(p["path"]) for p in unwind]
        if in_place and not frames:
            return result
        result.bytes_after = _write(reader, src, out, frames, strip_paths, in_place)
        result.written = True
        return result
    finally:
        reader.close()


def check_writable(path: Path) -> None:
    """Fail early, before any work, when the capture cannot be written (mode, immutable flag)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ProfilerError(f"{path}: no such file.") from None
    except OSError as exc:
        raise ProfilerError(f"cannot archive into {path}: {exc.strerror or exc} "
                            f"(it needs write permission); the capture was left unchanged.") from None
    os.close(fd)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


# --- planning ---------------------------------------------------------------------------------


def plan_archive(uses: list[DsoUse], existing: SymbolSources, finder: SymbolSources,
                 all_symbols: bool = False) -> ArchivePlan:
    """The ``symbols`` payloads still missing from the capture for the DSOs in ``uses``."""
    plan = ArchivePlan()
    kernel_uses = [u for u in uses if u.kind == KIND_KERNEL]
    for use in uses:
        if use.kind == KIND_KERNEL:
            continue
        if _already_packed(use, existing):
            plan.already.append(use.path)
            continue
        payload, why = _pack_user(use, finder, all_symbols)
        if payload is None and use.kind == KIND_JIT and not use.anon:
            continue  # addresses in no map and no JIT map: perf's [unknown], nothing to look for
        _add(plan, use, payload, why)
    if kernel_uses:
        _plan_kernel(plan, kernel_uses, existing, finder, all_symbols)
    return plan


def _already_packed(use: DsoUse, existing: SymbolSources) -> bool:
    if use.kind == KIND_JIT:
        return packed_key(KIND_JIT, use.path, None, use.pid) in existing.packed_keys
    if use.kind == KIND_VDSO:
        return any(k.startswith(f"{KIND_VDSO}:") for k in existing.packed_keys)
    return existing.packed(use.kind, use.path, use.build_id) is not None


def _add(plan: ArchivePlan, use: DsoUse, payload: dict[str, Any] | None, why: str) -> None:
    if payload is None:
        plan.not_found.append((use.path, why))
        return
    try:
        size = len(msgpack.packb(payload, use_bin_type=True))
    except UnicodeEncodeError:  # a path that is not UTF-8: packed as the capture writer packs it
        payload = as_utf8(payload)
        size = len(msgpack.packb(payload, use_bin_type=True))
    count = int(payload.get("count", 0))
    plan.payloads.append(payload)
    plan.packed.append(PackedDso(use.kind, use.path, payload.get("build_id"), count, size,
                                 str(payload.get("source", "")), str(payload.get("coverage", ""))))


def _pack_user(use: DsoUse, finder: SymbolSources, all_symbols: bool) -> tuple[dict[str, Any] | None, str]:
    if use.kind == KIND_JIT:
        table, label = finder.jit(use.pid or 0)
        if table is None or not len(table):
            return None, "no JIT symbol map (perf-PID.map) found"
        symtab, coverage, count = subset_table(table, use.addrs, all_symbols)
        return {"kind": KIND_JIT, "path": use.path, "build_id": None, "pid": use.pid, "layout": None,
                "symtab": symtab, "count": count, "coverage": coverage, "source": label}, ""
    syms, label = finder.for_dso(use.path, use.build_id, use.content)
    if not syms.ok:
        return None, syms.message or label
    layout = syms.layout
    if layout is not None and layout.load_segments:
        vaddrs, found = layout.file_offsets_to_vaddrs(use.addrs)
        vaddrs = vaddrs[found]
    else:
        vaddrs = use.addrs
    symtab, coverage, count = subset_table(syms.table, _with_return_sites(vaddrs), all_symbols)
    build_id = use.build_id or (layout.build_id if layout is not None else None)
    kind = KIND_VDSO if use.kind == KIND_VDSO else KIND_ELF
    payload = {"kind": kind, "path": use.path, "build_id": build_id,
               "layout": None if layout is None else layout.to_packed(),
               "symtab": symtab, "count": count, "coverage": coverage, "source": label}
    if not build_id and use.content and ":" in use.content:  # the identity it was checked against
        size, _, digest = use.content.partition(":")
        payload["content"] = {"size": int(size), "digest": digest}
    lines = _packed_lines(syms, build_id, np.concatenate([_with_return_sites(vaddrs), _function_starts(syms, vaddrs)]))
    if lines is not None:
        payload["lines"] = lines
    return payload, ""


def _packed_lines(syms: DsoSymbols, build_id: str | None, vaddrs: U64) -> dict[str, Any] | None:
    """Source lines and inline chains at ``vaddrs`` (DWARF), or None without DWARF."""
    try:
        table = line_table_of(syms, build_id, cache_dir())
    except FormatError:
        return None
    if table is None:
        return None
    packed = table.to_packed(vaddrs.tolist())
    return packed if packed["functions"] else None


def _function_starts(syms: DsoSymbols, vaddrs: U64) -> U64:
    """The start addresses of the functions holding ``vaddrs``: exports give each function
    the line it starts at (pprof's start_line, speedscope's line)."""
    if syms.table is None or not len(syms.table):
        return np.zeros(0, np.uint64)
    idx, off = syms.table.lookup_many(vaddrs)
    hit = idx >= 0
    return np.unique(np.asarray(vaddrs, np.uint64)[hit] - off[hit])


def _with_return_sites(addrs: U64) -> U64:
    """The addresses and each one minus 1: a callchain's return address may be looked up
    as the call instruction's address by a reporter that adjusts it."""
    a = np.asarray(addrs, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return np.unique(np.concatenate([a, a[a > 0] - np.uint64(1)]))


def subset_table(table: SymbolTable, addrs: U64, all_symbols: bool) -> tuple[dict[str, Any], str, int]:
    """(packed table, coverage, symbol count): only the symbols covering ``addrs``, when
    that subset resolves every one of them exactly as the full table does."""
    if all_symbols or not len(table):
        return table.to_packed(), "all", len(table)
    idx, off = table.lookup_many(addrs)
    keep = np.unique(idx[idx >= 0])
    packed = table.to_packed(keep.tolist())
    small = SymbolTable.from_packed(packed)
    idx2, off2 = small.lookup_many(addrs)
    hit = idx >= 0
    same = (np.array_equal(hit, idx2 >= 0) and np.array_equal(off[hit], off2[hit])
            and np.array_equal(np.searchsorted(keep, idx[hit]), idx2[hit]))
    if not same:
        return table.to_packed(), "all", len(table)
    return packed, "sampled", int(keep.shape[0])


def _plan_kernel(plan: ArchivePlan, uses: list[DsoUse], existing: SymbolSources, finder: SymbolSources,
                 all_symbols: bool) -> None:
    kernel = next((u for u in uses if u.path == KERNEL_DSO), uses[0])
    if existing.packed(KIND_KERNEL, KERNEL_DSO, kernel.build_id) is not None or any(
            k.startswith(f"{KIND_KERNEL}:") for k in existing.packed_keys):
        plan.already.append(KERNEL_DSO)
        return
    ks, label, note = finder.kernel()
    merged = DsoUse(KIND_KERNEL, KERNEL_DSO, kernel.build_id, samples=max(u.samples for u in uses),
                    addrs=np.unique(np.concatenate([u.addrs for u in uses])))
    if ks is None:
        _add(plan, merged, None, note.rstrip("."))
        return
    packed, coverage, count = subset_kernel(ks, merged.addrs, all_symbols)
    payload = {"kind": KIND_KERNEL, "path": KERNEL_DSO, "build_id": kernel.build_id, "layout": None,
               "kallsyms": packed, "count": count, "coverage": coverage, "source": label}
    _add(plan, merged, payload, "")


def subset_kernel(ks: KernelSymbols, addrs: U64, all_symbols: bool) -> tuple[dict[str, Any], str, int]:
    """Kernel and module symbols covering ``addrs`` (checked as :func:`subset_table`)."""
    full = ks.to_packed()
    total = len(ks.kernel) + sum(len(t) for t in ks.modules.values())
    if all_symbols:
        return full, "all", total
    idx, _ = ks.kernel.lookup_many(addrs)
    keep_kernel = np.unique(idx[idx >= 0]).tolist()
    keep_mod: dict[str, list[int]] = {}
    for a in addrs[idx < 0].tolist():
        module = ks.module_for(int(a))
        if module is not None:
            i, _ = ks.modules[module].lookup_index(int(a))
            if i >= 0:
                keep_mod.setdefault(module, []).append(i)
    packed = {"all_zero": False, "kernel": ks.kernel.to_packed(keep_kernel),
              "modules": {m: ks.modules[m].to_packed(ix) for m, ix in keep_mod.items()}}
    small = KernelSymbols.from_packed(packed)
    if any(ks.lookup(int(a)) != small.lookup(int(a)) for a in addrs.tolist()):
        return full, "all", total
    return packed, "sampled", len(keep_kernel) + sum(len(set(v)) for v in keep_mod.values())


# --- writing ----------------------------------------------------------------------------------


def unwind_payloads(reader: CaptureReader, tables: dict[tuple[str, str | None], RuleTable],
                    strip: bool) -> list[dict[str, Any]]:
    """``unwind`` metadata for every DSO whose rule table unwinding used, except those the
    capture already carries (by build-id)."""
    have = {str(m.get("build_id")) for m in reader.metadata(UNWIND_META) if m.get("build_id")}
    out = []
    for (path, bid), table in sorted(tables.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        if bid and bid in have:
            continue
        shown = path.rsplit("/", 1)[-1] if strip and path.startswith("/") else path
        out.append({"path": shown, "build_id": bid, "arch": table.arch, "table": table.to_bytes()})
    return out


def _write(reader: CaptureReader, src: Path, out: Path, frames: list[tuple[str, dict[str, Any]]],
           strip: bool, in_place: bool) -> int:
    """Build the new capture in a temporary file beside ``out``, then ``os.replace`` it; a
    device or FIFO at ``out`` (``/dev/null``; ``-``, standard output) is not replaced but written with the new
    capture, which is then built in the temporary directory. Returns the capture's size."""
    try:
        special = str(out) == STDOUT or written_in_place(out)
    except OSError as exc:
        raise ProfilerError(f"cannot write {out}: {exc.strerror or exc}.") from None
    beside = Path(tempfile.gettempdir()) / out.name if special else out
    tmp = beside.with_name(f".{out.name}.archive-{os.getpid()}.tmp")
    try:
        if strip:
            frameless = list(reader.iter_metadata()) if _is_perf_data(reader) else []
            write_stripped_copy(reader, tmp, [*frameless, *frames])
        else:
            if _is_perf_data(reader):
                from profiler.format.perfdata.convert import write_capture

                write_capture(reader, tmp)  # a perf.data input becomes a capture
            else:
                _copy(src, tmp)
            writer = CaptureWriter.append_to(tmp)
            try:
                for kind, payload in frames:
                    writer.write_meta(kind, payload)
                if reader.clean_end:
                    writer.close(reader.trailer)
            finally:
                writer.abort()
        _settle(src if in_place else None, tmp)
        size = tmp.stat().st_size
        if special:
            _pour(tmp, out)
        else:
            os.replace(tmp, out)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    return size


def _pour(tmp: Path, out: Path) -> None:
    """The finished capture at ``tmp`` written into the device or FIFO ``out`` (``-``: standard
    output); tmp removed."""
    try:
        with open(tmp, "rb") as source:
            if str(out) == STDOUT:
                shutil.copyfileobj(source, sys.stdout.buffer)
                sys.stdout.buffer.flush()
            else:
                with open(out, "wb") as sink:
                    shutil.copyfileobj(source, sink)
    except OSError as exc:
        raise ProfilerError(f"cannot write {out}: {exc.strerror or exc}.") from None
    tmp.unlink()


def _is_perf_data(reader: CaptureReader) -> bool:
    return getattr(reader, "source_format", None) == "perf.data"


def _copy(src: Path, tmp: Path) -> None:
    try:
        shutil.copyfile(src, tmp)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise ProfilerError(f"the disk is full: cannot archive into {tmp.parent}; "
                                f"the capture was left unchanged.") from None
        raise ProfilerError(f"cannot write beside {tmp.parent / tmp.name.split('.archive-')[0][1:]}: "
                            f"{exc.strerror or exc}; the capture was left unchanged.") from None


def _settle(original: Path | None, tmp: Path) -> None:
    """Give the new file the original's mode and owner (or 0600), and flush it to disk."""
    try:
        if original is not None:
            st = original.stat()
            os.chmod(tmp, st.st_mode & 0o7777)
            if os.geteuid() == 0:
                os.chown(tmp, st.st_uid, st.st_gid)
        else:
            os.chmod(tmp, 0o600)
        fd = os.open(tmp, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise ProfilerError(f"cannot finish {tmp}: {exc.strerror or exc}; the capture was left unchanged.") from None


def render_result(result: ArchiveResult, stream: TextIO) -> None:
    """What was packed, skipped and not found, and the bytes added."""
    for p in result.packed:
        stream.write(f"packed  {p.kind:<6} {p.path}  ({p.symbols} symbols, {p.coverage}, {p.bytes} bytes, "
                     f"from {p.source})\n")
    for path in result.already:
        stream.write(f"already {path}\n")
    for path in result.unwind_tables:
        stream.write(f"packed  unwind {path}\n")
    for path, why in result.not_found:
        stream.write(f"missing {path}: {why}\n")
    stream.write(summary_line(result) + "\n")


def summary_line(result: ArchiveResult) -> str:
    """One line: how many DSOs were packed, into what, and the bytes added."""
    target = result.output
    if result.written:
        tables = f" and the unwind rules of {len(result.unwind_tables)}" if result.unwind_tables else ""
        return (f"[ profiler archive: packed {len(result.packed)} DSOs{tables} into {target} "
                f"({_size_change(result)}); {len(result.already)} already packed; "
                f"{len(result.not_found)} not found ]")
    return (f"[ profiler archive: nothing to add to {target}; {len(result.already)} already packed; "
            f"{len(result.not_found)} not found ]")


def _size_change(result: ArchiveResult) -> str:
    """``+3040 bytes``; for a stripped copy, whose paths got shorter, its size and the change."""
    added = result.bytes_added
    if result.stripped:
        return f"{result.bytes_after} bytes, {added:+d} against the capture"
    return f"{added:+d} bytes"


def not_found_sentence(result: ArchiveResult) -> str | None:
    """One sentence naming the DSOs that could not be packed, or None when all were."""
    if not result.not_found:
        return None
    names = ", ".join(path for path, _ in result.not_found[:5])
    more = f" and {len(result.not_found) - 5} more" if len(result.not_found) > 5 else ""
    return (f"could not pack the symbols of {len(result.not_found)} DSO"
            f"{'' if len(result.not_found) == 1 else 's'}: {names}{more} (see the 'missing' lines).")
