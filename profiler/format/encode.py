"""Encoding of kernel records: :func:`encode` writes a record of :mod:`profiler.format.records`
as the kernel would have (header, body, ``sample_id`` trailer), byte for byte the inverse of
``records.decode_record``. Tests and fixture builders use it; the recorder writes the kernel's
own bytes and encodes its synthesized records with :mod:`profiler.format.abi`."""

from __future__ import annotations

from profiler.format.abi import (
    BODY_SPECS,
    FIXED_KINDS,
    KIND_BRANCH,
    KIND_CALLCHAIN,
    KIND_RAW,
    KIND_READ,
    KIND_REGS,
    KIND_STACK,
    PERF_FORMAT_GROUP,
    PERF_FORMAT_ID,
    PERF_FORMAT_LOST,
    PERF_FORMAT_TOTAL_TIME_ENABLED,
    PERF_FORMAT_TOTAL_TIME_RUNNING,
    PERF_RECORD_MISC_COMM_EXEC,
    PERF_RECORD_MISC_MMAP_BUILD_ID,
    PERF_SAMPLE_BRANCH_HW_INDEX,
    SampleField,
    SampleLayout,
    Writer,
    encode_fields,
    finish,
    opt,
    write_fixed,
    write_namespaces,
    write_sample_id,
)
from profiler.format.records import (
    Comm,
    Mmap2,
    Namespaces,
    Read,
    ReadValues,
    Record,
    Sample,
    TextPoke,
    UnknownRecord,
)


def _encode_read(w: Writer, values: ReadValues, read_format: int) -> None:
    has_id = bool(read_format & PERF_FORMAT_ID)
    has_lost = bool(read_format & PERF_FORMAT_LOST)
    times = []
    if read_format & PERF_FORMAT_TOTAL_TIME_ENABLED:
        times.append(opt(values.time_enabled))
    if read_format & PERF_FORMAT_TOTAL_TIME_RUNNING:
        times.append(opt(values.time_running))
    if read_format & PERF_FORMAT_GROUP:
        w.u64(len(values.values), *times)
        for value, ident, lost in values.values:
            w.u64(value)
            if has_id:
                w.u64(opt(ident))
            if has_lost:
                w.u64(opt(lost))
    else:
        value, ident, lost = values.values[0] if values.values else (0, None, None)
        w.u64(value, *times)
        if has_id:
            w.u64(opt(ident))
        if has_lost:
            w.u64(opt(lost))



def _encode_variable(w: Writer, s: Sample, f: SampleField, shape: int) -> None:
    if f.kind == KIND_READ:
        _encode_read(w, s.read or ReadValues(), shape)
    elif f.kind == KIND_CALLCHAIN:
        chain = s.callchain or ()
        w.u64(len(chain), *chain)
    elif f.kind == KIND_RAW:
        # The kernel pads raw data so that u32 size + data is a multiple of 8.
        data = s.raw or b""
        data = data + b"\0" * (-(len(data) + 4) % 8)
        w.u32(len(data))
        w.raw(data)
    elif f.kind == KIND_BRANCH:
        entries = s.branch_stack or ()
        w.u64(len(entries))
        if shape & PERF_SAMPLE_BRANCH_HW_INDEX:
            w.u64(opt(s.branch_hw_idx))
        for e in entries:
            w.u64(e.from_ip, e.to_ip, e.flags)
    elif f.kind == KIND_REGS:
        abi = opt(getattr(s, f.attrs[0]))
        w.u64(abi)
        if abi:
            w.u64(*(getattr(s, f.attrs[1]) or ()))
    elif f.kind == KIND_STACK:
        data = s.stack_user or b""
        w.u64(len(data))
        if data:
            w.raw(data)
            w.u64(opt(s.stack_user_dyn_size))
    else:  # KIND_AUX
        data = s.aux or b""
        w.u64(len(data))
        w.raw(data)


def _encode_sample(w: Writer, s: Sample, layout: SampleLayout) -> None:
    for f in layout.sample_fields:
        if f.kind in FIXED_KINDS:
            write_fixed(w, s, f)
        else:
            _encode_variable(w, s, f, layout.shape(f))
    w.pad8()


def _encode_special_body(w: Writer, rec: Record, layout: SampleLayout) -> None:
    """The body of a record that is not of a fixed layout (:data:`BODY_SPECS`)."""
    if isinstance(rec, Mmap2):  # the build-id form of its union
        bid = (rec.build_id or b"")[:20]
        w.u32(rec.pid, rec.tid)
        w.u64(rec.addr, rec.len, rec.pgoff)
        w.raw(bytes([len(bid), 0, 0, 0]) + bid + b"\0" * (20 - len(bid)))
        w.u32(rec.prot, rec.flags)
        w.cstr(rec.filename)
    elif isinstance(rec, Read):
        w.u32(rec.pid, rec.tid)
        _encode_read(w, rec.values, layout.read_format)
    elif isinstance(rec, Namespaces):
        write_namespaces(w, rec)
    elif isinstance(rec, TextPoke):
        w.u64(rec.addr)
        w.u16(rec.old_len, rec.new_len)
        w.raw(rec.bytes)
        w.pad8()
    else:
        assert isinstance(rec, UnknownRecord)
        w.raw(rec.body)
        w.pad8()


def _fixed_layout(rec: Record) -> bool:
    if isinstance(rec, UnknownRecord):
        return False
    if isinstance(rec, Mmap2):
        return rec.build_id is None
    return rec.TYPE in BODY_SPECS


def encode(rec: Record, layout: SampleLayout) -> bytes:
    """Encode ``rec`` exactly as the kernel would write it for an event with ``layout``.

    The sample_id trailer is written when ``layout.sample_id_all`` is set (fields missing from
    ``rec.sample_id`` are written as zero)."""
    if _fixed_layout(rec):
        exec_bit = PERF_RECORD_MISC_COMM_EXEC if isinstance(rec, Comm) and rec.exec else 0
        return encode_fields(rec.TYPE, rec.misc | exec_bit, rec, layout)
    w = Writer(layout.byte_order)
    rtype = rec.type if isinstance(rec, UnknownRecord) else rec.TYPE
    misc = rec.misc
    if isinstance(rec, Sample):
        _encode_sample(w, rec, layout)
    else:
        _encode_special_body(w, rec, layout)
        write_sample_id(w, rec.sample_id, layout)
        if isinstance(rec, Mmap2):
            misc |= PERF_RECORD_MISC_MMAP_BUILD_ID
    return finish(w, rtype, misc, layout)
