"""Two captures read for a comparison (``flamegraph --diff``, ``export --diff``): BASE and NEW.

Each side walks the one report pipeline (:func:`profiler.report.pipeline.load_stacks`) with
the command's options, on the same event: ``--event``'s when given (both captures must have
it), else NEW's first event that BASE has too. What cannot be compared is one sentence
(a :class:`~profiler.errors.ReportError`): a capture that cannot be opened, no event in
common, a side with no samples.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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


def _event_names(path: str, callchains: bool) -> list[str]:
    capture = Capture(path, callchains)
    try:
        return capture.names
    finally:
        capture.close()


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
    in_base = {_plain(name) for name in base}
    for name in new:
        if _plain(name) in in_base:
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
    event = common_event(base, _event_names(base, options.callchains), new, _event_names(new, options.callchains),
                         options.filters.event)
    sides = []
    for label, path in (("BASE", base), ("NEW", new)):
        try:
            sides.append(load_stacks(replace(options, input=path, filters=replace(options.filters, event=event)),
                                     _labelled(warn, label), locations, what))
        except NoSamples as exc:
            raise NoSamples(f"{label}: {exc}") from None  # which side is empty
    return StackPair(base=sides[0], new=sides[1], event=event)
