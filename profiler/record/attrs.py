"""Optional parts of an event's attr: DWARF stack sampling, cgroup sampling, ``--off-cpu``'s
user-space switch-outs."""

from __future__ import annotations

import os

from profiler.format import abi as R

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from profiler.format.attr import perf_event_attr


def add_dwarf_sampling(attr: perf_event_attr, stack_size: int) -> None:
    """``--call-graph dwarf``, as perf asks for it: the user registers the unwinder starts
    from (REGS_USER, every general-purpose register of this architecture) and ``stack_size``
    bytes of user stack from the stack pointer up (STACK_USER); the kernel's own callchain
    is kept for kernel frames only (``exclude_callchain_user``)."""
    from profiler.format.regs import regs_mask  # only --call-graph dwarf needs the register tables

    attr.sample_type |= R.PERF_SAMPLE_CALLCHAIN | R.PERF_SAMPLE_REGS_USER | R.PERF_SAMPLE_STACK_USER
    attr.sample_regs_user = regs_mask(os.uname().machine)
    attr.sample_stack_user = stack_size
    attr.exclude_callchain_user = 1


def add_cgroup_sampling(attr: perf_event_attr, tracking: bool) -> None:
    """``--all-cgroups``, as perf: every sample carries its task's cgroup id
    (PERF_SAMPLE_CGROUP, "the cgroup id of the task" in perf_event.h) and the tracking event
    asks for PERF_RECORD_CGROUP ("attr.cgroup": a record with the id and path of each cgroup
    created while recording; those that exist already are synthesized, synth.cgroup_records)."""
    attr.sample_type |= R.PERF_SAMPLE_CGROUP
    if tracking:
        attr.cgroup = 1


def user_space_switch_outs(attr: perf_event_attr) -> None:
    """``--off-cpu``'s switch-outs: the thread's user-space stack only, as perf's own
    ``--off-cpu`` records it (``BPF_F_USER_STACK``). The kernel's part, walked at every context
    switch from the scheduler down to the system call (about ten frames), cost the ping-pong of
    ``make bench-offcpu`` more than the rest of its recording together (docs/offcpu.md, "What
    it costs"); ``--off-cpu-kernel`` keeps it. With ``--call-graph dwarf`` the kernel's
    callchain held only the kernel part: it is not asked for at all."""
    if attr.sample_type & R.PERF_SAMPLE_STACK_USER:
        attr.sample_type &= ~R.PERF_SAMPLE_CALLCHAIN
        attr.exclude_callchain_user = 0
    else:
        attr.exclude_callchain_kernel = 1
