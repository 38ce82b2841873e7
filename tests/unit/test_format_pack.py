"""The writer's msgpack encoder (profiler/format/pack.py) writes what msgpack writes."""

from __future__ import annotations

import math
import random
from typing import Any

import msgpack
import pytest

from profiler.format.pack import packb


def reference(obj: Any) -> bytes:
    data: bytes = msgpack.packb(obj, use_bin_type=True)
    return data


EDGE_INTS = [0, 1, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0xFFFFFFFF, 0x100000000, (1 << 64) - 1,
             -1, -32, -33, -0x80, -0x81, -0x8000, -0x8001, -0x80000000, -0x80000001, -(1 << 63)]
EDGE_LENGTHS = [0, 1, 15, 16, 31, 32, 255, 256, 65535, 65536]


@pytest.mark.parametrize("obj", [
    None, True, False, 0.0, -0.0, 1.5, -2.25e300, math.inf, -math.inf, 5e-324,
    *EDGE_INTS,
    *("x" * n for n in EDGE_LENGTHS), "é", "\u20ac" * 11, "\U0001f600",
    *(b"\x01" * n for n in EDGE_LENGTHS), bytearray(b"ab"), memoryview(b"abc"),
    *([7] * n for n in EDGE_LENGTHS), (1, "a", b"b"), [],
    *({i: i for i in range(n)} for n in EDGE_LENGTHS),
    {"kind": "kallsyms", "data": {"text": "x", "hidden": False, "starts": b"\0" * 16, "n": [1, -2, 3.5, None]}},
])
def test_pack_matches_msgpack(obj: Any) -> None:
    assert packb(obj) == reference(obj)


def random_value(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.randrange(9 if depth < 4 else 6)
    if pick == 0:
        return rng.choice([None, True, False])
    if pick == 1:
        n = rng.choice(EDGE_INTS) + rng.choice([0, 0, 1, -1])
        return n if -(1 << 63) <= n < 1 << 64 else 0
    if pick == 2:
        return rng.uniform(-1e9, 1e9)
    if pick == 3:
        return "".join(rng.choice("ab\u00e9\u20ac\U0001f600") for _ in range(rng.choice(EDGE_LENGTHS[:7])))
    if pick == 4:
        return rng.randbytes(rng.choice(EDGE_LENGTHS[:8]))
    if pick == 5:
        return rng.randrange(-(1 << 63), 1 << 64)
    if pick == 6:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(20))]
    if pick == 7:
        return tuple(random_value(rng, depth + 1) for _ in range(rng.randrange(5)))
    return {rng.choice(["a", "b", "path", 1, -5, b"k"]) if rng.random() < 0.5 else str(i): random_value(rng, depth + 1)
            for i in range(rng.randrange(20))}


def test_pack_matches_msgpack_on_random_values() -> None:
    rng = random.Random(15)
    for _ in range(500):
        value = random_value(rng)
        assert packb(value) == reference(value)


@pytest.mark.parametrize("obj", [object(), {1, 2}, 1 << 64, -(1 << 63) - 1, {"a": object()}])
def test_pack_refuses_what_msgpack_refuses(obj: Any) -> None:
    with pytest.raises((TypeError, OverflowError)):
        reference(obj)
    with pytest.raises((TypeError, OverflowError)):
        packb(obj)
