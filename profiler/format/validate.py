"""Untrusted values of a capture checked at the boundary: the header, the events' attrs, and
the payloads of the metadata kinds this format defines.

A capture may come from anywhere (a damaged disk, a hand-made file, a fuzzer), and msgpack
hands back whatever it holds: a string where an int belongs, NaN, a map, an int of 2**64. So
the reader checks every field it uses once, here, with its type and range, and the rest of
the code can rely on them:

* the header: a bad field refuses the capture with one ``FormatError`` sentence naming it;
* a metadata payload: a bad field makes that payload damaged (the reader skips the frame and
  warns); a bad entry of a list (one build-id among many) is dropped on its own.

Fields that are absent keep their defaults; keys this reader does not know are ignored (a
newer minor version may add them), never used unchecked.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

from profiler.errors import FormatError
from profiler.format.attr import perf_event_attr
from profiler.format.buildid import is_build_id

TYPE_CHECKING = False  # typing costs every recording ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from typing import Any

U16, U32, U64 = (1 << 16) - 1, (1 << 32) - 1, (1 << 64) - 1
MAX_EVENTS = 4096
MAX_IDS = 1 << 20  # kernel ids of one event: one per (CPU, thread) opened
MAX_CPUS = 1 << 16
MAX_TEXT = 4096  # a host name, an event name, one command-line word


def _attr_ranges() -> dict[str, tuple[int, int]]:
    """(min, max) of every ``struct perf_event_attr`` field, from the ctypes layout."""
    ranges: dict[str, tuple[int, int]] = {}
    for entry in perf_event_attr._fields_:
        name, ctype = entry[0], entry[1]
        bits = entry[2] if len(entry) > 2 else 8 * ctypes.sizeof(ctype)
        signed = ctype in (ctypes.c_int32, ctypes.c_int64, ctypes.c_int16)
        ranges[name] = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return ranges


ATTR_RANGES = _attr_ranges()


def is_int(value: Any, lo: int = 0, hi: int = U64) -> bool:
    """An integer (not a bool, not a float) within [lo, hi]."""
    return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi


def is_text(value: Any, limit: int = MAX_TEXT) -> bool:
    return isinstance(value, str) and len(value) <= limit




def describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# --- the header ------------------------------------------------------------------------------


class _HeaderCheck:
    def __init__(self, where: str, header: dict[str, Any]) -> None:
        self.where = where
        self.header = header

    def fail(self, field: str, what: str, value: Any) -> FormatError:
        return FormatError(f"{self.where} has a damaged header: {field} must be {what}, not {describe(value)}.")

    def optional(self, key: str, ok: Callable[[Any], bool], what: str) -> None:
        if key in self.header and not ok(self.header[key]):
            raise self.fail(key, what, self.header[key])


def _int_list(limit: int, lo: int = 0, hi: int = U64) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, list) and len(v) <= limit and all(is_int(x, lo, hi) for x in v)


def _text_list(v: Any) -> bool:
    return isinstance(v, list) and len(v) <= 1 << 16 and all(is_text(x, 1 << 16) for x in v)


def check_header(where: str, header: Any) -> None:
    """Raise one FormatError sentence unless ``header`` is a well-formed capture header."""
    if not isinstance(header, dict):
        raise FormatError(f"{where} has a header that is not a map.")
    c = _HeaderCheck(where, header)
    events = header.get("events")
    if not isinstance(events, list) or not events:
        raise FormatError(f"{where} has a header without events.")
    if len(events) > MAX_EVENTS:
        raise c.fail("events", f"at most {MAX_EVENTS} events", f"{len(events)} events")
    for index, event in enumerate(events):
        _check_event(c, index, event)
    c.optional("byte_order", lambda v: v in ("little", "big"), "'little' or 'big'")
    c.optional("word_size", lambda v: v in (4, 8), "4 or 8")
    c.optional("page_size", lambda v: is_int(v, 512, 1 << 30) and v & (v - 1) == 0, "a power of two")
    c.optional("nr_cpus", lambda v: is_int(v, 1, MAX_CPUS), f"a number of CPUs up to {MAX_CPUS}")
    c.optional("online_cpus", _int_list(MAX_CPUS, 0, MAX_CPUS), "a list of CPU numbers")
    for key in ("start_time_ns", "start_perf_clock_ns"):
        c.optional(key, lambda v: is_int(v, 0, (1 << 63) - 1), "a time in nanoseconds")
    c.optional("clockid", lambda v: is_int(v, -(1 << 31), (1 << 31) - 1), "a clock id")
    for key in ("hostname", "kernel_release", "arch", "tool_version"):
        c.optional(key, is_text, "a short string")
    c.optional("cmdline", _text_list, "a list of strings")
    c.optional("format_version", _int_list(2, 0, U16), "[major, minor]")
    if "target" in header:
        _check_target(c, header["target"])


def _check_event(c: _HeaderCheck, index: int, event: Any) -> None:
    if not isinstance(event, dict) or not isinstance(event.get("attr"), dict):
        raise FormatError(f"{c.where} has an event without its perf_event_attr.")
    if "name" in event and not is_text(event["name"]):
        raise c.fail(f"the name of event {index}", "a short string", event["name"])
    for name, value in event["attr"].items():
        limits = ATTR_RANGES.get(name) if isinstance(name, str) else None
        if limits is not None and not is_int(value, *limits):
            raise c.fail(f"attr.{name} of event {index}", f"an integer from {limits[0]} to {limits[1]}", value)
    ids = event.get("ids", [])
    if not _int_list(MAX_IDS)(ids):
        raise c.fail(f"the ids of event {index}", "a list of 64-bit ids", ids)


def _check_target(c: _HeaderCheck, target: Any) -> None:
    if target is None:
        return
    if not isinstance(target, dict):
        raise c.fail("target", "a map", target)
    checks: dict[str, tuple[Callable[[Any], bool], str]] = {
        "command": (lambda v: v is None or _text_list(v), "a list of strings"),
        "pids": (_int_list(1 << 20, 0, U32), "a list of process ids"),
        "tids": (_int_list(1 << 20, 0, U32), "a list of thread ids"),
        "system_wide": (lambda v: isinstance(v, bool), "true or false"),
        "cpus": (lambda v: v is None or _int_list(MAX_CPUS, 0, MAX_CPUS)(v), "a list of CPU numbers"),
    }
    for key, (ok, what) in checks.items():
        if key in target and not ok(target[key]):
            raise c.fail(f"target.{key}", what, target[key])


# --- metadata payloads ------------------------------------------------------------------------


class MetaError(ValueError):
    """A metadata payload of the wrong shape (the reader skips it with a warning)."""


def _need(data: dict[str, Any], key: str, ok: Callable[[Any], bool], what: str, required: bool = False) -> None:
    if key not in data:
        if required:
            raise MetaError(f"it lacks {key}")
        return
    if not ok(data[key]):
        raise MetaError(f"{key} must be {what}, not {describe(data[key])}")


def _text_or_bytes(limit: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, (str, bytes)) and len(v) <= limit


def _build_id_entry(entry: Any) -> bool:
    if not isinstance(entry, dict) or not is_text(entry.get("path")) or not entry["path"]:
        return False
    if entry.get("build_id") is not None and not is_build_id(entry["build_id"]):
        return False
    if "source" in entry and not is_text(entry["source"], 64):
        return False
    for key, hi in (("maj", U32), ("min", U32), ("ino", U64), ("ino_generation", U64)):
        if key in entry and not is_int(entry[key], 0, hi):
            return False
    content = entry.get("content")
    if content is not None and not (isinstance(content, dict) and is_text(content.get("digest"), 128)
                                    and is_int(content.get("size"), 0, U64)):
        return False
    return all(key not in entry or isinstance(entry[key], bool) for key in ("replaced", "namespace"))


def _check_buildids(data: dict[str, Any]) -> list[str]:
    entries = data.get("entries", [])
    if not isinstance(entries, list):
        raise MetaError(f"entries must be a list, not {describe(entries)}")
    good = [e for e in entries if _build_id_entry(e)]
    dropped = len(entries) - len(good)
    data["entries"] = good
    return [f"{dropped} damaged build-id entries were ignored."] if dropped else []


def _check_kernel(data: dict[str, Any]) -> list[str]:
    _need(data, "build_id", lambda v: v is None or is_build_id(v), "hex or nil")
    _need(data, "release", is_text, "a string")
    return []


def _check_kallsyms(data: dict[str, Any]) -> list[str]:
    _need(data, "text", _text_or_bytes(1 << 30), "text")
    _need(data, "kptr_restrict", lambda v: is_int(v, -1, 2), "-1, 0, 1 or 2")
    _need(data, "hidden", lambda v: isinstance(v, bool), "true or false")
    return []


def _check_modules(data: dict[str, Any]) -> list[str]:
    _need(data, "text", _text_or_bytes(1 << 30), "text")
    return []


def _check_vdso(data: dict[str, Any]) -> list[str]:
    _need(data, "image", lambda v: isinstance(v, bytes) and len(v) <= 1 << 24, "bytes (at most 16 MiB)")
    _need(data, "arch", is_text, "a string")
    return []


def _check_lost(data: dict[str, Any]) -> list[str]:
    _need(data, "per_cpu", lambda v: isinstance(v, dict) and all(
        is_int(k, 0, MAX_CPUS) and is_int(n) for k, n in v.items()), "a map of CPU to count")
    return []


def _check_stats(data: dict[str, Any]) -> list[str]:
    for key, value in list(data.items()):
        if not isinstance(key, str) or not _plain_number_tree(value):
            del data[key]
    return []


def _plain_number_tree(value: Any, depth: int = 0) -> bool:
    """Free-form statistics: finite numbers, or maps of them (one level)."""
    if is_int(value, -(1 << 63), U64):
        return True
    if isinstance(value, float):
        return value == value and abs(value) != float("inf")
    if isinstance(value, dict) and depth == 0:
        return all(isinstance(k, str) and _plain_number_tree(v, 1) for k, v in value.items())
    return False


META_CHECKS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "buildids": _check_buildids,
    "kernel": _check_kernel,
    "kallsyms": _check_kallsyms,
    "modules": _check_modules,
    "vdso": _check_vdso,
    "lost": _check_lost,
    "stats": _check_stats,
}


def check_meta(kind: str, data: dict[str, Any]) -> list[str]:
    """Check (and trim) the payload of a known metadata kind in place; warnings for what was
    dropped. Raises MetaError when the payload as a whole is unusable."""
    check = META_CHECKS.get(kind)
    return check(data) if check is not None else []


def check_trailer(trailer: Any) -> dict[str, Any]:
    """The trailer's statistics: a map of names to plain numbers (anything else dropped)."""
    if not isinstance(trailer, dict):
        return {}
    return {k: v for k, v in trailer.items() if isinstance(k, str) and _plain_number_tree(v)}
