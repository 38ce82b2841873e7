"""Target options shared by record and stat: ``-p``/``-t`` id lists and ``-C`` CPU lists
(a light module: ``profiler stat`` imports it without the recorder)."""

from __future__ import annotations

from profiler.errors import UsageError
from profiler.record.cpus import parse_cpu_list


def id_list_option(text: str | None, what: str) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise UsageError(f"{what} must be a comma-separated list of numbers, not {text!r}.") from None
    if any(v <= 0 for v in values):
        raise UsageError(f"{what} must list positive ids, not {text!r}.")
    return values


def cpu_list_option(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(parse_cpu_list(text))
    except ValueError:
        raise UsageError(f"-C {text!r} is not a CPU list such as 0-3,6.") from None
