"""Where CPython keeps what the Python reader needs: struct offsets per version.

3.13 and later describe themselves: ``_PyRuntime`` starts with ``_Py_DebugOffsets``
(cookie ``xdebugpy``, then the version as ``PY_VERSION_HEX`` and the offsets of the runtime,
interpreter, thread, frame, code, bytes and str structures), read by :func:`from_debug_offsets`.
3.11 and 3.12 do not: their tables here were derived from the installed headers (``offsetof``
compiled with ``Py_BUILD_CORE`` against ``include/python3.1x/internal``, x86_64 and aarch64
alike: LP64, no padding differences) and are checked against the real interpreters in
``tests/unit/record/test_pyreader.py``. Frames owned by the C stack (3.12+: the shim frame
an entry into the interpreter pushes, ``FRAME_OWNED_BY_CSTACK``) are not Python code.
"""

from __future__ import annotations

import struct

from profiler.value import Value

COOKIE = b"xdebugpy"
OWNED_BY_CSTACK = 3


class Offsets(Value):
    """The offsets (bytes) and sizes the reader follows, for one CPython version."""

    __slots__ = _fields = (
        "version", "interpreters_head", "interp_threads_head", "tstate_next", "tstate_native_thread_id",
        "tstate_cframe", "cframe_current_frame", "tstate_current_frame", "frame_code", "frame_previous",
        "frame_instr", "frame_owner", "code_filename", "code_qualname", "code_linetable", "code_firstlineno",
        "code_adaptive", "bytes_size", "bytes_sval", "str_length", "str_state", "ascii_size", "compact_size",
    )

    version: int
    interpreters_head: int
    interp_threads_head: int
    tstate_next: int
    tstate_native_thread_id: int
    tstate_cframe: int
    cframe_current_frame: int
    tstate_current_frame: int
    frame_code: int
    frame_previous: int
    frame_instr: int
    frame_owner: int
    code_filename: int
    code_qualname: int
    code_linetable: int
    code_firstlineno: int
    code_adaptive: int
    bytes_size: int
    bytes_sval: int
    str_length: int
    str_state: int
    ascii_size: int
    compact_size: int

    def __init__(self, **values: int) -> None:
        for name in self._fields:
            setattr(self, name, values.get(name, -1))


_COMMON = dict(interpreters_head=40, tstate_next=8, tstate_cframe=56, tstate_current_frame=-1,
               code_filename=112, code_qualname=128, code_linetable=136, bytes_size=16, bytes_sval=32,
               str_length=16, str_state=32)

TABLES: dict[tuple[int, int], Offsets] = {
    (3, 11): Offsets(version=0x030B0000, interp_threads_head=16, tstate_native_thread_id=160,
                     cframe_current_frame=8, frame_code=32, frame_previous=48, frame_instr=56, frame_owner=69,
                     code_firstlineno=72, code_adaptive=184, ascii_size=48, compact_size=72, **_COMMON),
    (3, 12): Offsets(version=0x030C0000, interp_threads_head=72, tstate_native_thread_id=144,
                     cframe_current_frame=0, frame_code=0, frame_previous=8, frame_instr=56, frame_owner=70,
                     code_firstlineno=68, code_adaptive=192, ascii_size=40, compact_size=56, **_COMMON),
}

# _Py_DebugOffsets of 3.13 (Include/internal/pycore_runtime.h): u64 fields after the cookie
_DEBUG_FIELDS = (
    "version", "free_threaded",
    "rt_size", "rt_finalizing", "interpreters_head",
    "is_size", "is_id", "is_next", "interp_threads_head", "is_gc", "is_modules", "is_sysdict", "is_builtins",
    "is_ceval_gil", "is_gil", "is_gil_enabled", "is_gil_locked", "is_gil_holder",
    "ts_size", "ts_prev", "tstate_next", "ts_interp", "tstate_current_frame", "ts_thread_id",
    "tstate_native_thread_id", "ts_datastack", "ts_status",
    "fr_size", "frame_previous", "frame_code", "frame_instr", "fr_localsplus", "frame_owner",
    "co_size", "code_filename", "co_name", "code_qualname", "code_linetable", "code_firstlineno", "co_argcount",
    "co_lpnames", "co_lpkinds", "code_adaptive",
    "ob_size", "ob_type",
    "ty_size", "ty_name", "ty_repr", "ty_flags",
    "tu_size", "tu_item", "tu_obsize",
    "li_size", "li_item", "li_obsize",
    "di_size", "di_keys", "di_values",
    "fl_size", "fl_fval",
    "lo_size", "lo_tag", "lo_digit",
    "by_size", "bytes_size", "bytes_sval",
    "un_size", "str_state", "str_length", "ascii_size",
)
DEBUG_SIZE = 8 + 8 * len(_DEBUG_FIELDS)
MAX_OFFSET = 1 << 16  # no structure the reader follows is larger: a bigger offset is damage


def from_debug_offsets(raw: bytes) -> Offsets | None:
    """The offsets a 3.13+ ``_PyRuntime`` declares (``raw``: its first :data:`DEBUG_SIZE`
    bytes), or None when it is not ``_Py_DebugOffsets``, is free-threaded (another frame
    layout) or declares an offset no structure has."""
    if len(raw) < DEBUG_SIZE or raw[:8] != COOKIE:
        return None
    values = dict(zip(_DEBUG_FIELDS, struct.unpack_from(f"={len(_DEBUG_FIELDS)}Q", raw, 8)))
    if values["free_threaded"] or values["version"] >> 16 < 0x030D:
        return None
    picked = {name: values[name] for name in Offsets._fields if name in values}
    if any(v >= MAX_OFFSET for k, v in picked.items() if k != "version"):
        return None
    return Offsets(**picked, tstate_cframe=-1, cframe_current_frame=-1,
                   compact_size=values["ascii_size"] + 16)


def for_version(major: int, minor: int) -> Offsets | None:
    """The table of a version without debug offsets (3.11, 3.12), or None."""
    return TABLES.get((major, minor))
