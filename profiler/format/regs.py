"""User registers of PERF_SAMPLE_REGS_USER, per architecture.

The kernel writes the registers selected by ``attr.sample_regs_user`` in the order of their
bit numbers (``enum perf_event_x86_regs`` in arch/x86/include/uapi/asm/perf_regs.h,
``enum perf_event_arm_regs`` in arch/arm64/include/uapi/asm/perf_regs.h). A sample's
``abi`` word is PERF_SAMPLE_REGS_ABI_NONE (0: no registers, e.g. a kernel thread) or 32/64.

The unwinder works on DWARF register numbers (the psABI's numbering, used by CFI);
``PerfRegs.dwarf`` maps each one it follows to its perf register bit.
"""

from __future__ import annotations

from profiler.dataclass import dataclass

PERF_SAMPLE_REGS_ABI_NONE = 0
PERF_SAMPLE_REGS_ABI_32 = 1
PERF_SAMPLE_REGS_ABI_64 = 2


@dataclass(frozen=True)
class PerfRegs:
    """An architecture's register facts for sampling and unwinding."""

    arch: str
    mask: int  # sample_regs_user that `perf record --call-graph dwarf` asks for
    ip: int  # perf register bit of the instruction pointer
    sp: int  # ... of the stack pointer
    dwarf: dict[int, int]  # DWARF register number -> perf register bit, for the unwinder
    ra_column: int  # DWARF column of the return address in CIEs
    sp_column: int  # DWARF number of the stack pointer

    def index_of(self, bit: int, mask: int) -> int | None:
        """Position of perf register ``bit`` among a sample's registers (``mask`` sampled)."""
        if not mask >> bit & 1:
            return None
        return bin(mask & ((1 << bit) - 1)).count("1")


# x86_64: AX 0, BX 1, CX 2, DX 3, SI 4, DI 5, BP 6, SP 7, IP 8, FLAGS 9, CS 10, SS 11,
# DS..GS 12-15 (not sampled, like perf: 0xff0fff), R8..R15 16-23.
# DWARF (x86-64 psABI 3.6.2): rax 0, rdx 1, rcx 2, rbx 3, rsi 4, rdi 5, rbp 6, rsp 7,
# r8..r15 8-15, return address 16.
X86_64 = PerfRegs(
    arch="x86_64",
    mask=0xFF0FFF,
    ip=8,
    sp=7,
    dwarf={0: 0, 1: 3, 2: 2, 3: 1, 4: 4, 5: 5, 6: 6, 7: 7,
           **{8 + k: 16 + k for k in range(8)}},
    ra_column=16,
    sp_column=7,
)

# aarch64: X0..X28 0-28, X29 (fp) 29, LR 30, SP 31, PC 32. DWARF: x0..x30 0-30, sp 31.
AARCH64 = PerfRegs(
    arch="aarch64",
    mask=(1 << 33) - 1,
    ip=32,
    sp=31,
    dwarf={k: k for k in range(32)},
    ra_column=30,
    sp_column=31,
)

BY_ARCH = {"x86_64": X86_64, "amd64": X86_64, "aarch64": AARCH64, "arm64": AARCH64}


def arch_regs(arch: str) -> PerfRegs | None:
    return BY_ARCH.get(arch)


def regs_mask(arch: str) -> int:
    """The sample_regs_user to ask for on ``arch`` (``uname -m``); 0 when unknown."""
    regs = arch_regs(arch)
    return regs.mask if regs is not None else 0
