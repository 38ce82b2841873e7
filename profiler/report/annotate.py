"""``profiler annotate``: per-instruction and per-source-line shares of one function.

The samples whose sampled address lies in the function (its leaf function, inlined code
included) are counted per instruction address, weighted by period (perf annotate's
"local period"). The function's machine code is read from the binary on this machine
whose build-id is the recorded one (``--symfs`` first, then the recorded path: a packed
archive has symbols and lines, never code) and disassembled with ``capstone`` in AT&T
syntax, as objdump prints it for perf. Source lines come from the DSO's line table
(DWARF, or packed by ``profiler archive``); when the source file is readable here, its
text is shown too.

:func:`annotate_function` builds plain data (:class:`Annotation`); :func:`render_annotation`
writes perf annotate ``--stdio``'s layout.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import field
from pathlib import Path
from typing import TextIO

import numpy as np

from profiler.dataclass import dataclass
from profiler.errors import ReportError
from profiler.report.profile import Profile
from profiler.symbols.dso import build_ids_match
from profiler.symbols.elf import ElfError, ElfFile
from profiler.symbols.srcline import Chain

_CAPSTONE_ARCH = {"EM_X86_64": ("CS_ARCH_X86", "CS_MODE_64"), "EM_386": ("CS_ARCH_X86", "CS_MODE_32"),
                  "EM_AARCH64": ("CS_ARCH_ARM64", "CS_MODE_ARM")}


@dataclass(frozen=True)
class Instruction:
    addr: int  # ELF virtual address
    mnemonic: str
    operands: str
    period: int
    samples: int
    chain: Chain  # inline chain at this address (innermost first), () without lines


@dataclass
class Annotation:
    """One function's disassembly with its samples."""

    symbol: str
    dso: str
    dso_path: str
    event: str
    start: int
    end: int
    total_period: int  # of the samples in this function
    total_samples: int
    instructions: list[Instruction] = field(default_factory=list)
    lines: list[tuple[str, int, int]] = field(default_factory=list)  # (file:line, period, samples), hottest first
    sources: dict[str, list[str]] = field(default_factory=dict)  # readable source files' lines

    def percent(self, period: int) -> float:
        return 100.0 * period / self.total_period if self.total_period else 0.0


def annotate_function(profile: Profile, symbol: str, symfs: str | None = None) -> Annotation:
    """The :class:`Annotation` of the function named ``symbol`` (raw or demangled name; the
    hottest if several DSOs have one). ReportError when it has no samples or no code here."""
    frame_id = _hottest_frame(profile, symbol)
    resolver = profile.resolver
    fr = profile.frame(frame_id)
    if resolver is None or fr.kind != "user":
        raise ReportError(f"cannot annotate {symbol}: only functions of user-space ELF files can be "
                          f"disassembled (this one is in {fr.dso}).")
    dso_id = resolver.dso_id_of(fr.dso_path)
    syms = None if dso_id is None else resolver.dso_symbols(dso_id)
    if dso_id is None or syms is None:
        raise ReportError(f"cannot annotate {symbol}: no symbols for {fr.dso_path}.")
    sym_idx = next(i for i in range(len(syms.table)) if syms.table.name(i) == fr.symbol)
    start, end = int(syms.table.starts[sym_idx]), int(syms.table.ends[sym_idx])
    addrs, periods = _samples_in(profile, frame_id)
    code, machine = _code(fr.dso_path, resolver.dsos[dso_id].build_id, start, end, symfs)
    lines = resolver.line_table(dso_id)
    ann = Annotation(fr.name(profile.demangle), fr.dso, fr.dso_path, profile.event, start, end,
                     int(periods.sum()), int(addrs.shape[0]))
    by_addr_period: Counter[int] = Counter()
    by_addr_count: Counter[int] = Counter()
    for a, p in zip(addrs.tolist(), periods.tolist()):
        by_addr_period[a] += p
        by_addr_count[a] += 1
    for addr, mnemonic, operands in _disassemble(code, start, machine):
        chain = lines.lookup(addr) if lines is not None else ()
        ann.instructions.append(Instruction(addr, mnemonic, operands, by_addr_period[addr],
                                            by_addr_count[addr], chain))
    ann.lines = _line_shares(ann.instructions)
    ann.sources = _read_sources(ann.instructions)
    return ann


def _hottest_frame(profile: Profile, symbol: str) -> int:
    leaf = profile.leaf_frames()
    weights = np.bincount(leaf[profile.stack], weights=profile.samples.period.astype(np.float64),
                          minlength=len(profile.frames)) if len(profile.stack) else np.zeros(len(profile.frames))
    candidates = [i for i, fr in enumerate(profile.frames.frames)
                  if fr.symbol is not None and not fr.inlined and symbol in (fr.symbol, fr.name(True))]
    if not candidates:
        raise ReportError(f"no samples in a function named {symbol!r}.")
    best = max(candidates, key=lambda i: (weights[i], -i))
    if weights[best] == 0:
        raise ReportError(f"no samples in a function named {symbol!r}.")
    return best


def _samples_in(profile: Profile, frame_id: int) -> tuple[np.ndarray, np.ndarray]:
    """(address, period) of every sample whose leaf function is ``frame_id``."""
    leaf = profile.leaf_frames()
    first = profile.stack_start[:-1]
    stack_addr = profile.stack_table.shown[first] if len(first) else np.zeros(0, np.uint64)
    mask = leaf[profile.stack] == frame_id
    return stack_addr[profile.stack[mask]], profile.samples.period[mask].astype(np.int64)


def _code(path: str, build_id: str | None, start: int, end: int, symfs: str | None) -> tuple[bytes, str]:
    """The bytes of ``[start, end)`` from the recorded binary (build-id checked), and its machine."""
    candidates = ([Path(symfs) / path.lstrip("/")] if symfs else []) + [Path(path)]
    for candidate in candidates:
        try:
            elf = ElfFile(candidate)
        except ElfError:
            continue
        if not build_ids_match(elf.build_id, build_id):
            continue
        for seg in elf.load_segments:
            if seg.p_vaddr <= start and end <= seg.p_vaddr + seg.p_filesz:
                offset = start - seg.p_vaddr + seg.p_offset
                with open(candidate, "rb") as stream:
                    stream.seek(offset)
                    return stream.read(end - start), elf.machine
    raise ReportError(f"cannot annotate: the code of {path} (build-id {build_id or 'unknown'}) is not on this "
                      f"machine (an archive carries symbols and lines, not code); use --symfs.")


def _disassemble(code: bytes, start: int, machine: str) -> list[tuple[int, str, str]]:
    import capstone

    arch = _CAPSTONE_ARCH.get(machine)
    if arch is None:
        raise ReportError(f"cannot disassemble {machine} code.")
    md = capstone.Cs(getattr(capstone, arch[0]), getattr(capstone, arch[1]))
    if arch[0] == "CS_ARCH_X86":
        md.syntax = capstone.CS_OPT_SYNTAX_ATT
    out: list[tuple[int, str, str]] = []
    pos = 0
    while pos < len(code):
        got = [(i.address, i.mnemonic, i.op_str, i.size) for i in md.disasm(code[pos:], start + pos)]
        for addr, mnemonic, ops, _ in got:
            out.append((addr, mnemonic, ops))
        pos += sum(g[3] for g in got)
        if pos < len(code):  # undecodable byte: show it and go on
            out.append((start + pos, "(bad)", f"{code[pos]:#04x}"))
            pos += 1
    return out


def _line_shares(instructions: list[Instruction]) -> list[tuple[str, int, int]]:
    period: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for ins in instructions:
        if ins.period and ins.chain and ins.chain[0].srcline:
            key = ins.chain[0].srcline or ""
            period[key] += ins.period
            count[key] += ins.samples
    return sorted(((k, p, count[k]) for k, p in period.items()), key=lambda r: (-r[1], r[0]))


def _read_sources(instructions: list[Instruction]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for ins in instructions:
        for fr in ins.chain:
            if fr.file and fr.file not in out:
                try:
                    if os.path.getsize(fr.file) < 8 << 20:
                        out[fr.file] = Path(fr.file).read_text(errors="replace").splitlines()
                except OSError:
                    out[fr.file] = []
    return out


def render_annotation(out: TextIO, ann: Annotation) -> None:
    """perf annotate --stdio's layout: a summary of the hottest source lines, then each
    instruction with its percent, source lines interleaved where they change."""
    title = (f" Percent |\tSource code & Disassembly of {ann.dso} for {ann.event} "
             f"({ann.total_samples} samples, percent: local period)")
    out.write(title + "\n" + "-" * (len(title) + 8) + "\n")
    if ann.lines:
        out.write("         :\tSource lines (percent of the function's samples):\n")
        for text, period, samples in ann.lines:
            out.write(f"  {ann.percent(period):6.2f} :\t{text} ({samples} samples)\n")
        out.write("         :\n")
    out.write(f"         :\t{ann.start:016x} <{ann.symbol}>:\n")
    last: tuple[str, ...] = ()
    for ins in ann.instructions:
        where = tuple(f"{fr.function}:{fr.srcline}" for fr in ins.chain)
        if ins.chain and where != last:
            _write_source(out, ins.chain, ann.sources)
            last = where
        pct = f"{ann.percent(ins.period):8.2f}"
        out.write(f"{pct} :   {ins.addr:x}:   {ins.mnemonic:<6} {ins.operands}".rstrip() + "\n")


def _write_source(out: TextIO, chain: Chain, sources: dict[str, list[str]]) -> None:
    inner = chain[0]
    if len(chain) > 1:
        out.write(f"         :\t{inner.function}() inlined into {chain[-1].function}()\n")
    text = ""
    lines = sources.get(inner.file) or []
    if 0 < inner.line <= len(lines):
        text = "   " + lines[inner.line - 1].strip()
    out.write(f"         :\t{inner.srcline}{text}\n")
