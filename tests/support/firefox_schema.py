"""A structural validator of the Firefox Profiler's processed profile format, version 57.

Written from the format's documentation in the firefox-devtools/profiler repository
(docs-developer/processed-profile-format.md, src/types/profile.ts, CHANGELOG-formats.md):
required keys and their types, every table's columns as long as its ``length``, every index
inside the table it points into, stack prefixes forming a tree, a grey default category,
subcategory 0 in every category, strings in ``shared.stringArray``. profiler.firefox.com
itself cannot be loaded offline, so this is what the tests check an export against.
"""

from __future__ import annotations

from typing import Any

VERSION = 57

META_REQUIRED = {"interval": (int, float), "startTime": (int, float), "processType": int, "product": str,
                 "stackwalk": int, "version": int, "preprocessedProfileVersion": int, "markerSchema": list}
THREAD_REQUIRED = {"processType": str, "processStartupTime": (int, float), "registerTime": (int, float),
                   "pausedRanges": list, "name": str, "isMainThread": bool, "pid": str, "tid": (int, str)}
TABLES = {
    "stackTable": ("frame", "prefix"),
    "frameTable": ("address", "inlineDepth", "category", "subcategory", "func", "nativeSymbol",
                   "innerWindowID", "line", "column"),
    "funcTable": ("name", "isJS", "relevantForJS", "resource", "fileName", "lineNumber", "columnNumber"),
    "resourceTable": ("lib", "name", "host", "type"),
    "nativeSymbols": ("libIndex", "address", "name", "functionSize"),
    "markers": ("data", "name", "startTime", "endTime", "phase", "category"),
}
LIB_KEYS = {"arch": str, "name": str, "path": str, "debugName": str, "debugPath": str, "breakpadId": str}
COLORS = {"transparent", "purple", "green", "orange", "yellow", "lightblue", "blue", "brown", "magenta",
          "red", "lightred", "darkgrey", "grey"}


class Invalid(AssertionError):
    pass


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise Invalid(what)


def _typed(obj: dict[str, Any], spec: dict[str, Any], where: str) -> None:
    for key, kind in spec.items():
        _check(key in obj, f"{where}: missing {key}")
        _check(isinstance(obj[key], kind) and not (kind is int and isinstance(obj[key], bool)),
               f"{where}.{key}: {type(obj[key]).__name__}")


def _index(value: Any, size: int, where: str, nullable: bool = False, minus_one: bool = False) -> None:
    if value is None:
        _check(nullable, f"{where}: null")
        return
    if value == -1 and minus_one:
        return
    _check(isinstance(value, int) and not isinstance(value, bool) and 0 <= value < size,
           f"{where}: index {value!r} outside 0..{size - 1}")


def validate(profile: dict[str, Any]) -> None:
    """Raise Invalid with the first violation found."""
    _check(set(profile) >= {"meta", "libs", "threads", "shared"}, "top-level keys")
    meta = profile["meta"]
    _typed(meta, META_REQUIRED, "meta")
    _check(meta["preprocessedProfileVersion"] == VERSION, "preprocessedProfileVersion")
    cats = meta.get("categories")
    _check(isinstance(cats, list) and cats, "meta.categories")
    for c in cats:
        _check(c.get("color") in COLORS and isinstance(c.get("name"), str), f"category {c}")
        _check(isinstance(c.get("subcategories"), list) and len(c["subcategories"]) >= 1, f"subcategories {c}")
    _check(any(c["color"] == "grey" for c in cats), "a grey default category")
    strings = profile["shared"].get("stringArray")
    _check(isinstance(strings, list) and all(isinstance(x, str) for x in strings), "shared.stringArray")
    libs = profile["libs"]
    for i, lib in enumerate(libs):
        _typed(lib, LIB_KEYS, f"libs[{i}]")
        _check("codeId" in lib, f"libs[{i}].codeId")
    for t, thread in enumerate(profile["threads"]):
        _thread(thread, f"threads[{t}]", len(strings), len(libs), cats)


def _columns(table: dict[str, Any], cols: tuple[str, ...], where: str) -> int:
    n = table.get("length")
    _check(isinstance(n, int) and n >= 0, f"{where}.length")
    for col in cols:
        _check(isinstance(table.get(col), list) and len(table[col]) == n, f"{where}.{col}: not {n} long")
    return int(n)


def _thread(th: dict[str, Any], where: str, nstr: int, nlib: int, cats: list[dict[str, Any]]) -> None:
    _typed(th, THREAD_REQUIRED, where)
    size = {name: _columns(th[name], cols, f"{where}.{name}") for name, cols in TABLES.items()}
    st, fr, fn, rs, ns = (th[k] for k in ("stackTable", "frameTable", "funcTable", "resourceTable", "nativeSymbols"))
    for i in range(size["stackTable"]):
        _index(st["frame"][i], size["frameTable"], f"{where}.stackTable.frame[{i}]")
        p = st["prefix"][i]
        _check(p is None or (isinstance(p, int) and 0 <= p < i), f"{where}.stackTable.prefix[{i}] = {p}")
    for i in range(size["frameTable"]):
        _index(fr["func"][i], size["funcTable"], f"{where}.frameTable.func[{i}]")
        _index(fr["nativeSymbol"][i], size["nativeSymbols"], f"{where}.frameTable.nativeSymbol[{i}]", True)
        cat = fr["category"][i]
        _index(cat, len(cats), f"{where}.frameTable.category[{i}]", nullable=True)
        if cat is not None:
            _index(fr["subcategory"][i], len(cats[cat]["subcategories"]), f"{where}.frameTable.subcategory[{i}]")
        _check(isinstance(fr["address"][i], int), f"{where}.frameTable.address[{i}]")
        _check(fr["inlineDepth"][i] >= 0, f"{where}.frameTable.inlineDepth[{i}]")
    for i in range(size["funcTable"]):
        _index(fn["name"][i], nstr, f"{where}.funcTable.name[{i}]")
        _index(fn["resource"][i], size["resourceTable"], f"{where}.funcTable.resource[{i}]", minus_one=True)
        _index(fn["fileName"][i], nstr, f"{where}.funcTable.fileName[{i}]", nullable=True)
        _check(isinstance(fn["isJS"][i], bool) and isinstance(fn["relevantForJS"][i], bool), f"{where} isJS")
    for i in range(size["resourceTable"]):
        _index(rs["lib"][i], nlib, f"{where}.resourceTable.lib[{i}]", nullable=True)
        _index(rs["name"][i], nstr, f"{where}.resourceTable.name[{i}]")
    for i in range(size["nativeSymbols"]):
        _index(ns["libIndex"][i], nlib, f"{where}.nativeSymbols.libIndex[{i}]")
        _index(ns["name"][i], nstr, f"{where}.nativeSymbols.name[{i}]")
    _samples(th["samples"], where, size["stackTable"])


def _samples(s: dict[str, Any], where: str, nstacks: int) -> None:
    n = s.get("length")
    _check(isinstance(n, int), f"{where}.samples.length")
    _check(("time" in s) != ("timeDeltas" in s), f"{where}.samples: time or timeDeltas")
    times = s.get("time", s.get("timeDeltas"))
    _check(isinstance(times, list) and len(times) == n, f"{where}.samples times")
    _check(isinstance(s.get("stack"), list) and len(s["stack"]) == n, f"{where}.samples.stack")
    _check(s.get("weightType") in ("samples", "tracing-ms", "bytes"), f"{where}.samples.weightType")
    _check(s.get("weight") is None or len(s["weight"]) == n, f"{where}.samples.weight")
    for i, k in enumerate(s["stack"]):
        _index(k, nstacks, f"{where}.samples.stack[{i}]", nullable=True)
    if "timeDeltas" in s:
        _check(all(d >= 0 for d in times[1:]), f"{where}.samples.timeDeltas: time goes back")
    else:
        _check(all(b >= a for a, b in zip(times, times[1:])), f"{where}.samples.time: not sorted")
    if "threadCPUDelta" in s:
        _check(len(s["threadCPUDelta"]) == n, f"{where}.samples.threadCPUDelta")
