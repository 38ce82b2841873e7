"""Where a DSO's symbols come from: one ordered chain, :class:`SymbolSources`.

For an ELF file recorded at ``path`` with build-id ``build_id`` the sources are asked in
this order, and the first that has the symbols wins:

1. ``packed``    — symbols packed into the capture by ``profiler archive`` (metadata kind
   ``symbols``), found by build-id (by path for a file that has none);
2. ``symfs``     — ``<symfs>/<path>`` (a sysroot, ``--symfs DIR``), used only when its
   build-id matches the recorded one;
3. ``debug-dir`` — ``<dir>/.build-id/<xx>/<rest>.debug`` in each debug directory
   (``--debug-dir``, default ``/usr/lib/debug``), whose build-id must match too;
4. ``local``     — the file at the recorded path on this machine, ONLY when its build-id
   matches (its separate debug file is then looked for in the debug directories);
   ``debuginfod``  — when steps 2-4 found no full symbols (only ``.dynsym``, or no file) and
   a :class:`DebuginfodClient` is given: the debug file a server has for the build-id
   (:meth:`SymbolSources.prefetch` fetches those of many DSOs in parallel first);
5. otherwise ``mismatch`` (a file was found but it is not the recorded one: one warning
   naming it, its frames ``[unknown]`` with their offset) or ``missing``.

Kernel symbols (:meth:`SymbolSources.kernel`): ``--kallsyms FILE`` overrides everything;
then kernel symbols packed by the archive, then the capture's kallsyms snapshot, then this
machine's ``/proc/kallsyms`` only when the running kernel's build-id is the recorded one.
The vdso (:meth:`SymbolSources.for_dso` with ``"[vdso]"``): packed symbols, then the vdso
image the recorder copied into the capture. JIT maps (:meth:`SymbolSources.jit`): packed,
``<symfs>/tmp/perf-PID.map``, then ``<perf_map_dir>/perf-PID.map`` (a text file has no
build-id to check).

Wiring (one object per report, called once per DSO; results are cached)::

    sources = SymbolSources(metadata_of(reader), symfs=opts.symfs, debug_dirs=opts.debug_dirs,
                            kallsyms_path=opts.kallsyms)
    syms, label = sources.for_dso(dso.path, dso.build_id)   # DsoSymbols, "packed"|...
    if syms.ok:   # syms.layout turns file offsets into ELF vaddrs, then
        idx, off = syms.lookup_many(vaddrs)                 # syms.table.name(i)
    ks, label, note = sources.kernel()                      # KernelSymbols | None
    table, label = sources.jit(pid)                         # SymbolTable | None
    report_warnings.extend(sources.warnings)                # one per mismatched DSO

A :class:`profiler.symbols.dso.DsoSymbols` is returned whatever happens: ``ok`` says
whether its table can be used; a mismatched file's layout is never handed out, so nothing
of the wrong binary can name a frame.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profiler.dataclass import dataclass
from profiler.errors import FormatError, ReportError
from profiler.format.buildid import is_build_id, kernel_build_id
from profiler.format.localfile import contained, open_regular
from profiler.format.recorded import content_key
from profiler.symbols.debugfile import DEFAULT_DEBUG_DIRS, build_id_path
from profiler.symbols.elf import ElfError, ElfFile
from profiler.symbols.elfheaders import ElfLayout, LoadSegment
from profiler.symbols.kallsyms import KernelSymbols, cached_kernel_symbols, load_kallsyms
from profiler.names import KERNEL_DSO
from profiler.symbols.perfmap import parse_perf_map, perf_map_path
from profiler.symbols.dso import (
    DsoSymbols,
    SymbolStatus,
    build_ids_match,
    load_dso_symbols,
    normalize_build_id,
)
from profiler.symbols.table import SymbolCandidates, SymbolTable
from profiler.names import VDSO

if TYPE_CHECKING:
    from profiler.symbols.debuginfod import DebuginfodClient
    from profiler.symbols.jitsources import JitBlobs, JitSymbols

PACKED, SYMFS, DEBUG_DIR, LOCAL, MISMATCH, MISSING = "packed", "symfs", "debug-dir", "local", "mismatch", "missing"
KALLSYMS_FILE = "kallsyms-file"
DEBUGINFOD = "debuginfod"
LABELS = (PACKED, SYMFS, DEBUG_DIR, DEBUGINFOD, LOCAL, MISMATCH, MISSING, KALLSYMS_FILE)
#: DsoSymbols.source values that mean "full symbols": no need to ask a debuginfod server.
_FULL_SOURCES = ("debug file", ".symtab")

SYMBOLS_META = "symbols"  # metadata kind written by ``profiler archive``
KIND_ELF, KIND_KERNEL, KIND_VDSO, KIND_JIT = "elf", "kernel", "vdso", "jit"

Metadata = Mapping[str, Sequence[Mapping[str, Any]]]


@dataclass(frozen=True)
class PackedEntry:
    """One ``symbols`` metadata frame: what symbolization needs of one DSO."""

    kind: str
    path: str
    build_id: str | None
    data: Mapping[str, Any]

    @property
    def key(self) -> str:
        """How the archive recognises an entry it already packed."""
        pid = self.data.get("pid")
        return packed_key(self.kind, self.path, self.build_id, pid if isinstance(pid, int) else None)


def packed_key(kind: str, path: str, build_id: str | None, pid: int | None = None) -> str:
    """``kind:build-id``; ``jit:pid:N`` for a JIT map; ``kind:path`` for a file without a build-id."""
    if kind == KIND_JIT and pid is not None:
        return f"{kind}:pid:{pid}"
    bid = normalize_build_id(build_id)
    return f"{kind}:{bid}" if bid else f"{kind}:{path}"


MAX_JIT_FILE = 256 << 20  # a perf map or jitdump is read up to this many bytes

SOURCE_KINDS = (SYMBOLS_META, "kallsyms", "kernel", "vdso")


def parse_packed(metadata: Metadata) -> tuple[list[PackedEntry], list[str]]:
    """Every well-formed ``symbols`` entry, and a warning for each damaged one."""
    entries: list[PackedEntry] = []
    warnings: list[str] = []
    for data in metadata.get(SYMBOLS_META, ()):
        kind, path = data.get("kind"), data.get("path")
        bid = data.get("build_id")
        if not isinstance(kind, str) or not isinstance(path, str) or not (bid is None or isinstance(bid, str)):
            warnings.append("the capture has a damaged packed-symbols frame; it was ignored.")
            continue
        entries.append(PackedEntry(kind, path, normalize_build_id(bid), data))
    return entries, warnings


class SymbolSources:
    """The ordered symbol-source chain for one capture (see the module docstring).

    ``capture`` is what the capture holds for symbols, as ``{kind: [payload, ...]}`` (kinds
    :data:`SOURCE_KINDS`: ``symbols``, ``kallsyms``, ``kernel``, ``vdso``; the report reads them
    with :func:`profiler.report.capture.metadata_of`), or None for no capture data: the chain
    needs no capture reader, so the recorder and commands without a capture can use it.
    ``use_packed=False`` skips symbols packed in the capture (what ``profiler archive``
    uses to find the files on the recording machine).
    """

    def __init__(
        self,
        capture: Metadata | None = None,
        *,
        symfs: str | os.PathLike[str] | None = None,
        debug_dirs: Sequence[str | os.PathLike[str]] | None = DEFAULT_DEBUG_DIRS,
        kallsyms_path: str | os.PathLike[str] | None = None,
        perf_map_dir: str | os.PathLike[str] = "/tmp",
        use_packed: bool = True,
        local_kallsyms: str | os.PathLike[str] = "/proc/kallsyms",
        debuginfod: DebuginfodClient | None = None,
    ) -> None:
        metadata: Metadata = capture or {}
        self.symfs = None if symfs is None else Path(symfs)
        self.debug_dirs = tuple(str(d) for d in (DEFAULT_DEBUG_DIRS if debug_dirs is None else debug_dirs))
        self.kallsyms_path = None if kallsyms_path is None else Path(kallsyms_path)
        self.perf_map_dir = Path(perf_map_dir)
        self.local_kallsyms = Path(local_kallsyms)
        self.warnings: list[str] = []
        entries, bad = parse_packed(metadata) if use_packed else ([], [])
        self.warnings.extend(bad)
        self._packed: dict[str, PackedEntry] = {e.key: e for e in entries}
        self._metadata = metadata
        self.debuginfod = debuginfod
        self._without_debuginfod: dict[tuple[str, str | None, str | None], tuple[DsoSymbols, str]] = {}
        self._dso_cache: dict[tuple[str, str | None, str | None], tuple[DsoSymbols, str]] = {}
        self._jit_cache: dict[int, JitSymbols | None] = {}
        self._kernel: tuple[KernelSymbols | None, str, str] | None = None

    # --- packed entries --------------------------------------------------------------

    @property
    def packed_keys(self) -> frozenset[str]:
        return frozenset(self._packed)

    def packed(self, kind: str, path: str, build_id: str | None) -> PackedEntry | None:
        """The packed entry of a DSO: by build-id (tolerating the kernel's zero padding), else by path."""
        found = self._packed.get(packed_key(kind, path, build_id))
        if found is not None or not build_id:
            return found
        for entry in self._packed.values():
            if entry.kind == kind and entry.build_id and build_ids_match(entry.build_id, build_id):
                return entry
        return None

    def _packed_symbols(self, entry: PackedEntry) -> DsoSymbols | None:
        try:
            table = SymbolTable.from_packed(entry.data["symtab"])
            layout_data = entry.data.get("layout")
            layout = None if layout_data is None else ElfLayout.from_packed(layout_data)
        except (FormatError, KeyError, TypeError, ValueError, OverflowError) as exc:
            self.warnings.append(f"the packed symbols of {entry.path} are damaged ({exc}); they were ignored.")
            return None
        lines = entry.data.get("lines")
        return DsoSymbols(Path(entry.path), SymbolStatus.OK, "", table, layout, None, PACKED,
                          lines if isinstance(lines, Mapping) else None)

    # --- ELF files and the vdso --------------------------------------------------------

    def for_dso(self, path: str, build_id: str | bytes | None,
                content: str | None = None) -> tuple[DsoSymbols, str]:
        """Symbols of the DSO recorded at ``path`` with ``build_id``, and where they came from.
        ``content`` (``Dso.content``) is what a file without a build-id must match."""
        bid = normalize_build_id(build_id)
        content = None if bid else content
        key = (path, bid, content)
        cached = self._dso_cache.get(key)
        if cached is None:
            cached = self._vdso(path, bid) if path == VDSO else self._elf(path, bid, content)
            self._dso_cache[key] = cached
        return cached

    def _elf(self, path: str, bid: str | None, content: str | None = None) -> tuple[DsoSymbols, str]:
        found = self._elf_here(path, bid, content)
        if self.debuginfod is None or not bid or _complete(*found):
            return found
        debug = self.debuginfod.fetch(bid)
        self._take_debuginfod_warnings()
        if debug is None:
            return found
        syms = load_dso_symbols(debug, bid, (), search_debug_files=False)
        if not syms.ok:
            return found
        return self._with_runtime_layout(syms, path, bid), DEBUGINFOD

    def prefetch(self, dsos: Iterable[tuple[str, str | bytes | None]]) -> None:
        """Fetch, in parallel, the debug files a debuginfod server should provide for these
        (path, build-id) pairs: those with no full symbols on this machine."""
        if self.debuginfod is None:
            return
        wanted = []
        for path, build_id in dsos:
            bid = normalize_build_id(build_id)
            if bid and path != VDSO and not _complete(*self._elf_here(path, bid)):
                wanted.append(bid)
        if wanted:
            self.debuginfod.fetch_all(wanted)
            self._take_debuginfod_warnings()

    def _take_debuginfod_warnings(self) -> None:
        if self.debuginfod is not None:
            for note in self.debuginfod.warnings:
                if note not in self.warnings:
                    self.warnings.append(note)

    def _elf_here(self, path: str, bid: str | None, content: str | None = None) -> tuple[DsoSymbols, str]:
        """The chain without debuginfod (cached): packed, symfs, debug dirs, local."""
        key = (path, bid, content)
        found = self._without_debuginfod.get(key)
        if found is None:
            found = self._elf_chain(path, bid, content)
            self._without_debuginfod[key] = found
        return found

    def _elf_chain(self, path: str, bid: str | None, content: str | None = None) -> tuple[DsoSymbols, str]:
        entry = self.packed(KIND_ELF, path, bid)
        if entry is not None and not bid and not _packed_content_matches(entry, content):
            entry = None  # packed for another file at that path
        got = None if entry is None else self._packed_symbols(entry)
        if got is not None:
            return got, PACKED
        mismatch: DsoSymbols | None = None
        for label, candidate, dirs, search in self._candidates(path, bid):
            syms = load_dso_symbols(candidate, bid, dirs, search_debug_files=search, expected_content=content)
            if label == DEBUG_DIR and syms.ok:
                return self._with_runtime_layout(syms, path, bid), label
            if label != DEBUG_DIR and syms.status in (SymbolStatus.OK, SymbolStatus.NO_SYMBOLS):
                return syms, label
            if syms.status is SymbolStatus.BUILD_ID_MISMATCH and mismatch is None:
                mismatch = syms
        if mismatch is not None:
            self.warnings.append(f"{mismatch.message}; its frames show as [unknown].")
            failed = DsoSymbols(Path(path), SymbolStatus.BUILD_ID_MISMATCH, mismatch.message, SymbolTable.empty())
            return failed, MISMATCH
        note = f"no symbols found for {path}" + (f" (build-id {bid})" if bid else "")
        return DsoSymbols(Path(path), SymbolStatus.MISSING, note, SymbolTable.empty()), MISSING

    def _candidates(self, path: str, bid: str | None) -> list[tuple[str, Path, tuple[str, ...], bool]]:
        """(label, file, debug dirs, search debug files?) in chain order after ``packed``."""
        found: list[tuple[str, Path, tuple[str, ...], bool]] = []
        absolute = path.startswith("/")
        under = self._under_symfs(path) if absolute else None
        if under is not None and self.symfs is not None:
            root_debug = str(self.symfs / "usr/lib/debug")
            found.append((SYMFS, under, (root_debug, *self.debug_dirs), True))
        if bid:
            for d in self.debug_dirs:
                found.append((DEBUG_DIR, build_id_path(d, bid), (), False))
        if absolute:
            found.append((LOCAL, Path(path), self.debug_dirs, True))
        return found

    def _with_runtime_layout(self, debug: DsoSymbols, path: str, bid: str | None) -> DsoSymbols:
        """A debug file's symbols with the runtime file's load segments.

        ``objcopy --only-keep-debug`` keeps the program headers but zeroes their file
        offsets and sizes, so they cannot turn file offsets into addresses. The runtime
        file (under ``--symfs`` or at the recorded path, same build-id) has the real ones;
        without it they are rebuilt as GNU ld lays files out (see :func:`rebuilt_layout`).
        """
        layout = None
        table = debug.table
        for candidate in self._runtime_paths(path):
            try:
                elf = ElfFile(candidate)
            except ElfError:
                continue
            if build_ids_match(elf.build_id, bid):
                layout = elf.layout
                table = _with_plt(table, elf)
                break
        if layout is None and debug.layout is not None:
            layout = rebuilt_layout(debug.layout)
        return DsoSymbols(Path(path), debug.status, debug.message, table, layout, debug.path, debug.source)

    def _runtime_paths(self, path: str) -> list[Path]:
        if not path.startswith("/"):
            return []
        under = self._under_symfs(path)
        return [*([] if under is None else [under]), Path(path)]

    def _under_symfs(self, recorded: str) -> Path | None:
        """The recorded path under ``--symfs``; None without one, or when the path would
        leave it (``/../outside``, a symlink pointing out): a capture names no file outside
        the roots the user gave."""
        if self.symfs is None:
            return None
        inside = contained(self.symfs, recorded)
        return None if inside is None else Path(inside)

    def _vdso(self, path: str, bid: str | None) -> tuple[DsoSymbols, str]:
        entry = self.packed(KIND_VDSO, path, bid) or self._only_packed(KIND_VDSO)
        got = None if entry is None else self._packed_symbols(entry)
        if got is not None:
            return got, PACKED
        image = self._vdso_image()
        if image is not None:
            syms = _symbols_of_image(image, bid)
            if syms.ok:
                return syms, PACKED
        if bid or self._same_release():  # perf.data: perf's build-id cache, or our own vdso
            # (without a recorded build-id, like the kernel: only on the recorded release)
            for local in (_perf_cache_file(VDSO, bid, "vdso") if bid else None, _own_vdso()):
                if local is not None:
                    syms = _symbols_of_image(local, bid)
                    if syms.ok:  # the build-id is the recorded one
                        return syms, LOCAL
        note = "the capture has no vdso image"
        return DsoSymbols(Path(path), SymbolStatus.MISSING, note, SymbolTable.empty()), MISSING

    def _only_packed(self, kind: str) -> PackedEntry | None:
        found = [e for e in self._packed.values() if e.kind == kind]
        return found[0] if len(found) == 1 else None

    def _vdso_image(self) -> bytes | None:
        for meta in reversed(list(self._metadata.get("vdso", ()))):
            image = meta.get("image")
            if isinstance(image, (bytes, bytearray)) and image:
                return bytes(image)
        return None

    # --- the kernel ----------------------------------------------------------------------

    def kernel(self) -> tuple[KernelSymbols | None, str, str]:
        """(kernel symbols or None, source label, note saying why there are none)."""
        if self._kernel is None:
            self._kernel = self._load_kernel()
        return self._kernel

    def kernel_build_id(self) -> str | None:
        for meta in reversed(list(self._metadata.get("kernel", ()))):
            bid = meta.get("build_id")
            if isinstance(bid, str) and bid:
                return normalize_build_id(bid)
        return None

    def _load_kernel(self) -> tuple[KernelSymbols | None, str, str]:
        if self.kallsyms_path is not None:
            return load_kallsyms(self.kallsyms_path), KALLSYMS_FILE, ""
        entry = self._only_packed(KIND_KERNEL)
        if entry is not None:
            try:
                return KernelSymbols.from_packed(entry.data["kallsyms"]), PACKED, ""
            except (FormatError, KeyError, TypeError, ValueError, OverflowError) as exc:
                self.warnings.append(f"the packed kernel symbols are damaged ({exc}); they were ignored.")
        note = "the capture has no kallsyms snapshot"
        snapshot = self._snapshot()
        if snapshot is not None:
            if not snapshot.all_zero and len(snapshot.kernel):
                return snapshot, PACKED, ""
            note = "kernel addresses were hidden when recording (kernel.kptr_restrict)"
        return self._local_kernel(note)

    def _snapshot(self) -> KernelSymbols | None:
        for meta in reversed(list(self._metadata.get("kallsyms", ()))):
            text = meta.get("text")
            if isinstance(text, bytes):
                text = text.decode("utf-8", "surrogateescape")
            if isinstance(text, str) and text:
                if meta.get("hidden"):
                    return KernelSymbols(SymbolTable.empty(), {}, all_zero=True)
                return cached_kernel_symbols(text)
        return None

    def _local_kernel(self, note: str) -> tuple[KernelSymbols | None, str, str]:
        """This machine's kallsyms, only for the very kernel that was recorded."""
        recorded = self.kernel_build_id()
        running = kernel_build_id()
        if recorded is None and self._same_release():
            # perf.data in pipe mode or from `perf record -z` records no build-ids: like perf,
            # use this machine's kernel, but only when it is the very release recorded
            self.warnings.append(f"the capture records no kernel build-id; kernel symbols come from "
                                 f"{self.local_kallsyms} because this machine runs the recorded release "
                                 f"{os.uname().release}.")
            return self._local_kallsyms(note)
        if recorded is None or running is None:
            return None, MISSING, f"{note}: kernel frames show as [unknown]."
        if not build_ids_match(running, recorded):
            return None, MISMATCH, (f"{note}, and this machine runs another kernel (build-id {running}, "
                                    f"recorded {recorded}): kernel frames show as [unknown].")
        return self._local_kallsyms(note)

    def _local_kallsyms(self, note: str) -> tuple[KernelSymbols | None, str, str]:
        try:
            ks = load_kallsyms(self.local_kallsyms)
        except ReportError:
            ks = None
        if ks is None or ks.all_zero or not len(ks.kernel):
            return (None, MISSING,
                    f"{note}, and {self.local_kallsyms} hides its addresses: kernel frames show as [unknown].")
        return ks, LOCAL, ""

    def _same_release(self) -> bool:
        releases = [m.get("release") for m in self._metadata.get("kernel", ())]
        return bool(releases) and releases[-1] == os.uname().release

    # --- JIT maps -------------------------------------------------------------------------

    def jit(self, pid: int) -> tuple[SymbolTable | None, str]:
        """The JIT symbols of process ``pid`` (``perf-PID.map``, ``jit-PID.dump``) and where they came from."""
        got = self.jit_symbols(pid)
        return (None, MISSING) if got is None else (got.table, got.origin)

    def jit_symbols(self, pid: int) -> JitSymbols | None:
        """Names and code of process ``pid``'s JIT files (cached): packed, else the files."""
        if pid not in self._jit_cache:
            self._jit_cache[pid] = self._load_jit(pid)
        return self._jit_cache[pid]

    def _load_jit(self, pid: int) -> JitSymbols | None:
        # JIT files are rare: their modules load only for a process that has some
        from profiler.symbols.jitdump import jitdump_path_name, parse_jitdump
        from profiler.symbols.jitsources import JitSymbols

        recorded = str(perf_map_path(pid))
        entry = self._packed.get(packed_key(KIND_JIT, recorded, None, pid))
        if entry is not None:
            got = self._packed_symbols(entry)
            if got is not None:
                return JitSymbols(got.table, self._packed_code(entry), PACKED)
        table, dump, label = None, None, MISSING
        for name in (perf_map_path(pid).name, jitdump_path_name(pid)):
            text, where = self._jit_file(f"/tmp/{name}")
            if text is None:
                continue
            label = where
            if name.endswith(".map"):
                table, bad = parse_perf_map(text.decode("utf-8", errors="surrogateescape"))
                if bad:
                    self.warnings.append(f"{self.perf_map_dir / name}: skipped {bad} malformed lines.")
                continue
            if not text:
                continue  # a process that wrote nothing (a forked child's buffer lost at os._exit)
            try:
                dump = parse_jitdump(text)
            except FormatError as exc:
                self.warnings.append(f"{self.perf_map_dir / name}: {exc}; ignored.")
                continue
            if dump.pid != pid:  # another process's file at this name: its code is not this one's
                self.warnings.append(f"{self.perf_map_dir / name}: written by process {dump.pid}, not {pid}; "
                                     "ignored.")
                dump = None
                continue
            if dump.skipped:
                self.warnings.append(f"{self.perf_map_dir / name}: skipped {dump.skipped} damaged records.")
        if table is None and dump is None:
            return None
        return JitSymbols.of(table, dump, label)

    def _jit_file(self, recorded: str) -> tuple[bytes | None, str]:
        """A JIT file's bytes under ``--symfs``, else in the perf-map directory."""
        places = [(LOCAL, self.perf_map_dir / Path(recorded).name)]
        under = self._under_symfs(recorded)
        if under is not None:
            places.insert(0, (SYMFS, under))
        for label, place in places:
            try:
                with open_regular(place) as fh:
                    return fh.read(MAX_JIT_FILE), label
            except OSError:
                continue
        return None, MISSING

    def _packed_code(self, entry: PackedEntry) -> JitBlobs:
        from profiler.symbols.jitsources import JitBlobs

        code = entry.data.get("code")
        if code is None:
            return JitBlobs()
        try:
            return JitBlobs.from_packed(code)
        except FormatError as exc:
            self.warnings.append(f"the packed JIT code of process {entry.data.get('pid')} is damaged ({exc}); "
                                 "its frames are unwound without it.")
            return JitBlobs()


class ChainSource:
    """The chain as one source of the reporter's ``SymbolResolver`` (``load(dso)``):
    ``SymbolResolver(..., sources=[ChainSource(sources)])``."""

    def __init__(self, sources: SymbolSources) -> None:
        self.sources = sources

    def load(self, dso: Any) -> DsoSymbols | None:
        """``dso`` has ``path`` and ``build_id`` (``profiler.report.maps.Dso``)."""
        if not (str(dso.path).startswith("/") or dso.path == VDSO or dso.build_id):
            return None
        syms, label = self.sources.for_dso(dso.path, dso.build_id, getattr(dso, "content", None))
        if label == MISMATCH:
            return None  # SymbolSources already warned, once: add ``sources.warnings`` to the report's
        return syms  # a MISSING result makes the resolver warn "no symbols for ..." once


def rebuilt_layout(layout: ElfLayout) -> ElfLayout:
    """Load segments whose file offsets were zeroed (a separate debug file), rebuilt on the
    assumption that file offsets follow virtual addresses from the first segment's page on,
    as GNU ld lays out executables and shared libraries. Segments with real sizes are kept."""
    if any(seg.p_filesz for seg in layout.load_segments if seg.executable):
        return layout
    base = min((seg.p_vaddr for seg in layout.load_segments), default=0) & ~0xFFF
    segments = tuple(
        LoadSegment(seg.p_vaddr, seg.p_vaddr - base, seg.p_memsz, seg.p_memsz, seg.p_flags)
        for seg in layout.load_segments
    )
    return ElfLayout(layout.build_id, layout.e_type, layout.machine, segments)


def _packed_content_matches(entry: PackedEntry, content: str | None) -> bool:
    """A packed entry without a build-id serves a DSO recorded with content identity
    ``content`` only when it was packed with that identity (None: any entry, as before)."""
    if content is None:
        return True
    packed = entry.data.get("content")
    return isinstance(packed, Mapping) and content_key(dict(packed)) == content


def _complete(syms: DsoSymbols, label: str) -> bool:
    """True when the chain found full symbols (a debug file, a ``.symtab``, packed ones),
    or found a file that is not the recorded one (nothing is fetched for a mismatch)."""
    if label == MISMATCH:
        return True
    if label in (PACKED, DEBUG_DIR) and syms.ok:
        return True
    return syms.ok and syms.source.startswith(_FULL_SOURCES)


def _perf_cache_file(name: str, bid: str, kind: str) -> bytes | None:
    """A file of perf's build-id cache (``$PERF_BUILDID_DIR``, else ``~/.debug``):
    ``<cache>/<name>/<build-id>/<kind>``, as ``perf record`` leaves it."""
    root = Path(os.environ.get("PERF_BUILDID_DIR") or Path.home() / ".debug")
    if not is_build_id(bid) or "/" in name or name in ("", ".", ".."):
        return None  # names from a capture never leave the cache
    try:
        with open_regular(root / name / bid / kind) as fh:
            return fh.read()
    except (OSError, ValueError):
        return None


def _own_vdso() -> bytes | None:
    """The bytes of this process's own ``[vdso]`` mapping (readable memory of ours)."""
    import ctypes

    try:
        with open("/proc/self/maps", encoding="ascii", errors="replace") as maps:
            for line in maps:
                if line.rstrip().endswith("[vdso]"):
                    lo, hi = (int(x, 16) for x in line.split(None, 1)[0].split("-"))
                    return ctypes.string_at(lo, hi - lo)
    except (OSError, ValueError):
        pass
    return None


def _symbols_of_image(image: bytes, bid: str | None) -> DsoSymbols:
    """Symbols of an in-memory ELF image (the vdso), through a private temporary file."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="profiler-vdso-") as tmp:
        path = Path(tmp) / "vdso.so"
        path.write_bytes(image)
        syms = load_dso_symbols(path, bid, (), search_debug_files=False)
    return DsoSymbols(Path(VDSO), syms.status, syms.message, syms.table, syms.layout, None, PACKED)


__all__ = [
    "ChainSource",
    "DEBUG_DIR",
    "KALLSYMS_FILE",
    "KERNEL_DSO",
    "LABELS",
    "LOCAL",
    "MISMATCH",
    "MISSING",
    "PACKED",
    "PackedEntry",
    "SYMFS",
    "SymbolSources",
    "VDSO",
    "packed_key",
]


def _with_plt(table: SymbolTable, runtime: ElfFile) -> SymbolTable:
    """A debug file's table with the runtime file's ``name@plt`` entries: the debug file's
    ``.plt`` holds no bytes (``--only-keep-debug``), so its stubs are named from the runtime
    file, as when the runtime file itself finds its debug file."""
    try:
        plt = runtime.plt_candidates()
    except ElfError:
        return table
    if not len(plt):
        return table
    n = len(table)
    own = SymbolCandidates.from_names(table.starts.tolist(), (table.ends - table.starts).tolist(),
                                      [table.raw_name(i) for i in range(n)])
    return SymbolTable.build(SymbolCandidates.concat([own, plt]))
