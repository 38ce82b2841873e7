"""The decoder's record walk (views.RecordViews.record_offsets) in C against its numpy and
Python paths: the same offsets and the same warning on whole frames of small and of big
records and on damaged ones (a size of 0, one not a multiple of 8, one past the end, a ragged
tail)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from profiler.format.container.layout import FRAME_HEADER_SIZE
from profiler.format.container.scan import FileFrame
from profiler.format.decode.views import RecordViews
from profiler.native import kernels

needs_kernel = pytest.mark.skipif(kernels() is None, reason="the compiled kernels are not built")


def records(rng: np.random.Generator, count: int, big: bool) -> bytearray:
    out = bytearray()
    for _ in range(count):
        size = int(rng.choice([8 * 60, 8 * 1000])) if big else int(rng.integers(1, 12)) * 8
        body = rng.integers(0, 256, size - 8).astype(np.uint8).tobytes()
        out += struct.pack("<IHH", int(rng.choice([9, 3, 10])), 0, size) + body
    return out


def damaged(rng: np.random.Generator, data: bytearray) -> bytearray:
    out = bytearray(data)
    starts = [0]
    while starts[-1] < len(out):
        starts.append(starts[-1] + struct.unpack_from("<H", out, starts[-1] + 6)[0])
    at = int(rng.choice(starts[:-1]))
    how = int(rng.integers(0, 4))
    if how == 0:
        struct.pack_into("<H", out, at + 6, 0)
    elif how == 1:
        struct.pack_into("<H", out, at + 6, struct.unpack_from("<H", out, at + 6)[0] + 4)
    elif how == 2:
        struct.pack_into("<H", out, at + 6, 0xFFF8)
    else:
        del out[len(out) - int(rng.integers(1, 8)):]
    return out


@needs_kernel
@pytest.mark.parametrize("big", [False, True])
def test_the_compiled_walk_finds_what_the_numpy_and_python_walks_find(big: bool) -> None:
    rng = np.random.default_rng(7 + big)
    warned = 0
    for case in range(60):
        data = records(rng, int(rng.integers(1, 80)), big)
        if case % 2:
            data = damaged(rng, data)
        image = bytes(FRAME_HEADER_SIZE) + bytes(data) + bytes(-len(data) % 8)
        frame = FileFrame(1, 0, case, 0, memoryview(image)[FRAME_HEADER_SIZE:FRAME_HEADER_SIZE + len(data)])
        views = RecordViews(None, "<", memoryview(image))
        assert views.walk is not None
        got_warn: list[str] = []
        got = views.record_offsets(frame, got_warn)
        views.walk = None
        want_warn: list[str] = []
        want = views.record_offsets(frame, want_warn)
        assert got.tolist() == want.tolist()
        assert got_warn == want_warn
        if case % 2 == 0:
            assert not want_warn and len(want) > 0
        warned += bool(want_warn)
    assert warned >= 20  # most damage is seen (a size grown by 4 inside the last record may not be)
