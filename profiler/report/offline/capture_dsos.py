"""Which DSOs a capture's samples touch, with their build-ids: the input of ``profiler
buildids`` and ``profiler archive``.

Every sample contributes its ``ip`` and, when recorded, every callchain entry. The
``PERF_CONTEXT_*`` marker before an entry says whether it is a kernel or a user address
(perf_event.h: "PERF_CONTEXT_KERNEL ... PERF_CONTEXT_USER" mark where each part of the
chain starts); an entry before any marker, and a bare ``ip``, take the sample's cpumode
(``profiler.format.decode.chains.split_callchains``, the reporter's too). A guest's or the hypervisor's
addresses belong to no DSO of this machine and are not counted. User addresses are placed in
their process's maps at the sample's time (the reporter's
``replay``), giving (DSO, file offset); addresses in no file (anonymous memory, no map)
belong to the process's JIT map ``/tmp/perf-PID.map``. Kernel addresses go to the kernel,
split into modules when kernel symbols are known.

Nothing here depends on the machine that reads the capture: byte order and word size come
from the capture's header (through the format's decoder), never from the host.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import Any, TextIO

import numpy as np
import numpy.typing as npt

from profiler.dataclass import dataclass
from profiler.format.decode.chains import CONTEXT_KERNEL, CONTEXT_USER, cpumode_context, split_callchains
from profiler.format.decode.columns import CaptureData, SampleColumns
from profiler.format.decode.decoder import load_capture
from profiler.format.container.reader import CaptureReader
from profiler.symbols.kallsyms import KernelSymbols
from profiler.names import KERNEL_DSO
from profiler.report.maps import Dso
from profiler.symbols.perfmap import perf_map_path
from profiler.report.replay import replay
from profiler.symbols.sources import KIND_ELF, KIND_JIT, KIND_KERNEL, KIND_VDSO, VDSO, SymbolSources

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]


@dataclass
class DsoUse:
    """One DSO of the capture and the addresses its samples hit.

    ``addrs`` are file offsets for ELF files and the vdso, absolute addresses for the kernel
    and JIT maps; ``samples`` counts samples whose ip or callchain falls in the DSO.
    """

    kind: str  # "elf" | "vdso" | "kernel" | "jit"
    path: str
    build_id: str | None
    samples: int = 0
    addrs: U64 = field(default_factory=lambda: np.zeros(0, np.uint64))
    pid: int | None = None  # JIT maps: the process
    anon: bool = False  # JIT maps: some address lies in anonymous executable memory (not just in no map)
    content: str | None = None  # Dso.content: a file recorded without a build-id
    recorded_from: str = ""  # where the recorder read its identity (map_files, root, file, mmap2)

    @property
    def name(self) -> str:
        return self.path


@dataclass
class CaptureDsos:
    """Every DSO of a capture (mapped ELF files even when no sample hit them)."""

    dsos: list[DsoUse]
    total_samples: int
    kernel_build_id: str | None = None
    warnings: list[str] = field(default_factory=list)

    def hit(self) -> list[DsoUse]:
        return [d for d in self.dsos if d.samples > 0]



def sample_addresses(s: SampleColumns) -> tuple[I64, U64, npt.NDArray[np.bool_]]:
    """Every (sample index, address, kernel?) of ips and callchains on this machine: markers,
    and a guest's or the hypervisor's addresses, dropped (:func:`split_callchains`)."""
    n = len(s)
    own = np.arange(n, dtype=np.int64)
    ctx = cpumode_context(s.cpumode)
    ip_host = (ctx == CONTEXT_KERNEL) | (ctx == CONTEXT_USER)
    owner_ip, addr_ip, kernel_ip = own[ip_host], s.ip[ip_host].astype(np.uint64), (ctx == CONTEXT_KERNEL)[ip_host]
    if "callchain" not in s.has or not len(s) or not int(s.chain_len.sum()):
        return owner_ip, addr_ip, kernel_ip
    start, words = s.flat_chains()
    e = split_callchains(start, words, s.cpumode)
    host = e.host
    return (np.concatenate([owner_ip, e.owner[host]]), np.concatenate([addr_ip, e.addr[host]]).astype(np.uint64),
            np.concatenate([kernel_ip, e.kernel[host]]))


def scan_capture(reader: CaptureReader, data: CaptureData | None = None,
                 kernel_symbols: Callable[[], KernelSymbols | None] | None = None) -> CaptureDsos:
    """Every DSO of the capture with the samples and addresses that hit it."""
    data = data if data is not None else load_capture(reader)
    s = data.samples
    recorded = reader.build_ids()
    rep = replay(data.others, data.others_before, s.pid, s.tid, recorded)
    owner, addr, kernel = sample_addresses(s)
    origin = _recorded_origins(recorded)
    uses: dict[tuple[str, str, Any], DsoUse] = {}
    hits: list[tuple[I64, tuple[str, str, Any]]] = []  # (sample indices, key)

    def add(kind: str, path: str, bid: str | None, who: I64, addrs: U64, pid: int | None = None,
            anon: bool = False, content: str | None = None) -> None:
        key = (kind, path, pid if kind == KIND_JIT else (bid, content))
        use = uses.get(key)
        if use is None:
            use = uses[key] = DsoUse(kind, path, bid, pid=pid, content=content,
                                     recorded_from=origin.get((path, bid or content), ""))
        use.anon |= anon
        use.addrs = np.union1d(use.addrs, addrs).astype(np.uint64)
        hits.append((who, key))

    for dso in rep.dsos.dsos:  # every mapped file, hit or not
        kind = KIND_VDSO if dso.path == VDSO else KIND_ELF
        if dso.is_file or kind == KIND_VDSO:
            uses.setdefault((kind, dso.path, (dso.build_id, dso.content)),
                            DsoUse(kind, dso.path, dso.build_id, content=dso.content,
                                   recorded_from=origin.get((dso.path, dso.build_id or dso.content), "")))
    _user_hits(rep, s, owner[~kernel], addr[~kernel], add)
    kbid = _kernel_build_id(reader)
    k_owner, k_addr = owner[kernel], addr[kernel]
    if len(k_addr):
        ks = kernel_symbols() if kernel_symbols is not None else None
        for path, sel in _kernel_split(ks, k_addr):
            add(KIND_KERNEL, path, kbid if path == KERNEL_DSO else None, k_owner[sel], k_addr[sel])
    elif reader.metadata("kernel"):  # recorded with the kernel's metadata, no kernel address sampled
        uses.setdefault((KIND_KERNEL, KERNEL_DSO, kbid), DsoUse(KIND_KERNEL, KERNEL_DSO, kbid))
    _count_samples(uses, hits)
    order = sorted(uses.values(), key=lambda u: (-u.samples, u.kind, u.path))
    return CaptureDsos(order, len(s), kbid, list(data.warnings))


def _user_hits(rep: Any, s: SampleColumns, owner: I64, addr: U64,
               add: Callable[..., None]) -> None:
    if not len(addr):
        return
    gen = rep.sample_gen[owner]
    dso_ids = np.full(len(addr), -1, dtype=np.int64)
    offsets = addr.copy()
    for g in np.unique(gen).tolist():
        sel = np.flatnonzero(gen == g)
        dso_ids[sel], offsets[sel] = rep.snapshots[g].lookup_many(addr[sel])
    for d in np.unique(dso_ids).tolist():
        sel = np.flatnonzero(dso_ids == d)
        dso: Dso | None = rep.dsos[d] if d >= 0 else None
        if dso is not None and (dso.is_file or dso.path == VDSO):
            kind = KIND_VDSO if dso.path == VDSO else KIND_ELF
            add(kind, dso.path, dso.build_id, owner[sel], np.unique(offsets[sel]), content=dso.content)
            continue
        if dso is None or not dso.is_anon:
            continue  # in no mapping, or a pseudo one ([heap], [stack]): no file, no JIT map
        pids = s.pid[owner[sel]]
        for pid in np.unique(pids).tolist():
            mine = sel[pids == pid]
            add(KIND_JIT, str(perf_map_path(int(pid))), None, owner[mine], np.unique(addr[mine]), int(pid),
                anon=True)


def _recorded_origins(recorded: Any) -> dict[tuple[str, str | None], str]:
    """(path, build-id or content check) -> where the recorder read it, "+namespace" for a file
    read through a process's view that the recorder's own path did not show."""
    out: dict[tuple[str, str | None], str] = {}
    for found in getattr(recorded, "by_inode", {}).values():
        if found.source:
            out[(found.path, found.build_id or found.check)] = found.source + ("+namespace" if found.namespace else "")
    return out


def _kernel_split(ks: KernelSymbols | None, addrs: U64) -> list[tuple[str, npt.NDArray[np.bool_]]]:
    """Kernel addresses grouped by ``[kernel.kallsyms]`` and ``[module]``."""
    if ks is None or not ks.modules:
        return [(KERNEL_DSO, np.ones(len(addrs), dtype=bool))]
    idx, _ = ks.kernel.lookup_many(addrs)
    names = np.array([KERNEL_DSO if i >= 0 else f"[{ks.module_for(int(a)) or 'kernel.kallsyms'}]"
                      for i, a in zip(idx.tolist(), addrs.tolist())], dtype=object)
    return [(str(name), names == name) for name in sorted(set(names.tolist()))]


def _count_samples(uses: dict[tuple[str, str, Any], DsoUse], hits: list[tuple[I64, tuple[str, str, Any]]]) -> None:
    per_key: dict[tuple[str, str, Any], list[I64]] = {}
    for who, key in hits:
        per_key.setdefault(key, []).append(who)
    for key, parts in per_key.items():
        uses[key].samples = int(np.unique(np.concatenate(parts)).shape[0])


def _kernel_build_id(reader: CaptureReader) -> str | None:
    for meta in reversed(reader.metadata("kernel")):
        bid = meta.get("build_id")
        if isinstance(bid, str) and bid:
            return bid.lower()
    return None


# --- the buildids listing -----------------------------------------------------------------


@dataclass(frozen=True)
class BuildIdRow:
    """One line of ``profiler buildids``."""

    path: str
    kind: str
    build_id: str | None
    samples: int
    source: str
    content: str | None = None  # "<size>:<digest>" of a file recorded without a build-id
    recorded_from: str = ""  # map_files / root / file / mmap2, "+namespace" for a container's file

    @property
    def identity(self) -> str:
        """The build-id, else ``content:<digest, 16 hex>``, else ``-``."""
        if self.build_id:
            return self.build_id
        if self.content and ":" in self.content:
            return "content:" + self.content.partition(":")[2][:16]
        return self.content or "-"

    @property
    def shown_path(self) -> str:
        return f"{self.path}  (recorded from {self.recorded_from})" if self.recorded_from not in ("", "file", "mmap2") \
            else self.path


def build_id_rows(found: CaptureDsos, sources: SymbolSources) -> list[BuildIdRow]:
    """Each DSO with where its symbols come from on this machine."""
    rows = []
    for use in found.dsos:
        rows.append(BuildIdRow(use.path, use.kind, use.build_id, use.samples, source_label(use, sources),
                               use.content, use.recorded_from))
    return rows


def source_label(use: DsoUse, sources: SymbolSources) -> str:
    if use.kind == KIND_KERNEL:
        return sources.kernel()[1]
    if use.kind == KIND_JIT:
        return sources.jit(use.pid or 0)[1]
    return sources.for_dso(use.path, use.build_id, use.content)[1]


def render_build_ids(rows: list[BuildIdRow], stream: TextIO) -> None:
    """perf buildid-list's layout (build-id, path) with samples and the source added."""
    width = max([len(r.identity) for r in rows] + [8])
    stream.write(f"{'build-id':<{width}}  {'samples':>8}  {'source':<13}  dso\n")
    for r in rows:
        stream.write(f"{r.identity:<{width}}  {r.samples:>8}  {r.source:<13}  {r.shown_path}\n")


def rows_to_json(rows: list[BuildIdRow]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        row: dict[str, Any] = {"path": r.path, "kind": r.kind, "build_id": r.build_id, "samples": r.samples,
                               "source": r.source}
        if r.content:
            row["content"] = r.content
        if r.recorded_from:
            row["recorded_from"] = r.recorded_from
        out.append(row)
    return out
