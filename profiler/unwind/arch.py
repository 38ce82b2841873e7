"""The registers the unwinder follows, per architecture, as "columns".

Column 0 is always the return-address column of the CFI, column 1 the stack pointer; the
others are the callee-saved registers whose save slots the CFI describes (the caller's
values of caller-saved registers are lost at a call, so no CFI rule can recover them).
"""

from __future__ import annotations

from profiler.dataclass import dataclass
from profiler.format.regs import AARCH64, X86_64, PerfRegs

RA, SP = 0, 1


@dataclass(frozen=True)
class ArchColumns:
    """An architecture's registers as the unwinder's columns."""

    regs: PerfRegs
    dwarf: tuple[int, ...]  # DWARF register number of each column
    fp: int  # column of the frame pointer (rbp / x29)
    ra_is_register: bool  # aarch64: the return address lives in x30 at a leaf
    ra_mask: int  # bits of a return address that are an address (aarch64 PAC bits cleared)

    @property
    def arch(self) -> str:
        return self.regs.arch

    @property
    def count(self) -> int:
        return len(self.dwarf)

    def column_of(self, dwarf_reg: int) -> int | None:
        try:
            return self.dwarf.index(dwarf_reg)
        except ValueError:
            return None


# x86_64: return address (16), rsp (7), rbp (6), rbx (3), r12-r15 (12-15).
X86_64_COLUMNS = ArchColumns(X86_64, (16, 7, 6, 3, 12, 13, 14, 15), fp=2,
                             ra_is_register=False, ra_mask=(1 << 64) - 1)
# aarch64: x30 (lr, the return address column), sp (31), x29 (fp), x19-x28.
AARCH64_COLUMNS = ArchColumns(AARCH64, (30, 31, 29, *range(19, 29)), fp=2,
                              ra_is_register=True, ra_mask=(1 << 56) - 1)

COLUMNS = {"x86_64": X86_64_COLUMNS, "aarch64": AARCH64_COLUMNS}


def columns_for(arch: str) -> ArchColumns | None:
    return COLUMNS.get({"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch))
