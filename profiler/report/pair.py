"""Two captures read for a comparison (``flamegraph --diff``, ``export --diff``): BASE and NEW.

Each side walks the one report pipeline (:func:`profiler.report.pipeline.load_stacks`) with
the command's options, on the same event: ``--event``'s when given (both captures must have
it), else BASE's first event that NEW has too (modifiers such as ``:ppp`` aside), as
``profiler diff`` chooses. What cannot be compared is one sentence (a
:class:`~profiler.errors.ReportError`): a capture that cannot be opened, captures of
different architectures, no event in common, a side with no samples.
"""

from __future__ import annotations

from dataclasses import replace

from profiler.dataclass import dataclass
from profiler.errors import ReportError
from profiler.report.capture import Capture, select_event
from profiler.report.model import StackSet
from profiler.report.options import LoadOptions
from profiler.report.pipeline import NoSamples, Warn, load_stacks


@dataclass(frozen=True)
class StackPair:
    """Both sides of a comparison, on the same event."""

    base: StackSet
    new: StackSet
    event: str


def _opened(path: str, callchains: bool) -> tuple[list[str], str]:
    """The capture's event names and architecture."""
    capture = Capture(path, callchains)
    try:
        return capture.event_names, capture.arch  # the offcpu and wall pseudo-events too
    finally:
        capture.close()


def check_arch(base_path: str, base_arch: str, new_path: str, new_arch: str) -> None:
    """A ReportError when both captures name their architecture and the two differ."""
    if base_arch and new_arch and base_arch != new_arch:
        raise ReportError(f"{base_path} was recorded on {base_arch} and {new_path} on {new_arch}: "
                          f"profiles of different architectures do not compare.")


def _plain(name: str) -> str:
    return name.split(":", 1)[0].strip()


def common_event(base_path: str, base: list[str], new_path: str, new: list[str], wanted: str | None) -> str:
    """The event both captures are read on (see the module docstring)."""
    if wanted is not None:
        for path, names in ((base_path, base), (new_path, new)):
            try:
                select_event(names, wanted)
            except ReportError:
                raise ReportError(f"{path} has no event {wanted!r} (it has {', '.join(names) or 'none'}): "
                                  f"both captures need it to compare.") from None
        return wanted
    in_new = {_plain(name) for name in new}
    for name in base:
        if _plain(name) in in_new:
            return _plain(name)
    raise ReportError(f"no event in common to compare: {base_path} has {', '.join(base) or 'none'}, "
                      f"{new_path} has {', '.join(new) or 'none'}.")


def _labelled(warn: Warn, label: str) -> Warn:
    """``warn`` with each message saying which side it is about."""
    return lambda message: warn(f"{label}: {message}")


def load_stack_pair(options: LoadOptions, base: str, new: str, warn: Warn, locations: bool = False,
                    what: str = "compare") -> StackPair:
    """BASE's and NEW's stacks on their common event, each loaded with ``options``
    (its ``input`` replaced by the side's path); warnings and "no samples" start with the
    side's name."""
    (base_names, base_arch), (new_names, new_arch) = _opened(base, options.callchains), _opened(new, options.callchains)
    check_arch(base, base_arch, new, new_arch)
    event = common_event(base, base_names, new, new_names, options.filters.event)
    sides = []
    for label, path in (("BASE", base), ("NEW", new)):
        try:
            sides.append(load_stacks(replace(options, input=path, filters=replace(options.filters, event=event)),
                                     _labelled(warn, label), locations, what))
        except NoSamples as exc:
            raise NoSamples(f"{label}: {exc}") from None  # which side is empty
    return StackPair(base=sides[0], new=sides[1], event=event)
