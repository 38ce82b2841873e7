"""chains_with_user_frames: each sample's new callchain is its recorded chain's kernel part, then
PERF_CONTEXT_USER and its unwound user frames (its whole recorded chain when nothing was
unwound), the same as made one sample at a time; made once per distinct pair."""

from __future__ import annotations

import random

import numpy as np
import pytest

from profiler.format.decode.chains import CONTEXT_USER, ChainStore
from profiler.format.decode.columns import SampleColumns
from profiler.report.userchains import chains_with_user_frames
from profiler.unwind.unwinder import UnwindResult

CONTEXT_KERNEL = (1 << 64) - 128


def reference(recorded: list[int], user: list[int]) -> list[int]:
    if not user:
        return recorded
    kernel = recorded[:recorded.index(CONTEXT_USER)] if CONTEXT_USER in recorded else recorded
    return [*kernel, CONTEXT_USER, *user]


@pytest.mark.parametrize("seed", range(5))
def test_each_sample_gets_its_kernel_part_and_its_unwound_frames(seed: int) -> None:
    rnd = random.Random(seed)
    kernel_chains = [[], [CONTEXT_KERNEL, 0xFFFFFFFF81000010], [CONTEXT_KERNEL, 0xFFFFFFFF81000020, 0xFFFFFFFF81000030],
                     [CONTEXT_KERNEL, 0xFFFFFFFF81000010, CONTEXT_USER, 0x401000], [CONTEXT_USER, 0x401010, 0x401020],
                     [0x401030], [CONTEXT_USER]]
    users = [[], [0x1000], [0x1000, 0x2000], [0x2000, 0x1000, 0x3000], [0x1000] * 5]
    n = 300
    recorded = [rnd.choice(kernel_chains) for _ in range(n)]
    unwound = [rnd.choice(users) for _ in range(n)]
    store = ChainStore()
    flat = np.asarray([w for c in recorded for w in c], dtype=np.uint64)
    lengths = np.asarray([len(c) for c in recorded], dtype=np.int64)
    chain_id = store.add(flat, np.cumsum(lengths) - lengths, lengths)
    z = np.zeros(n, dtype=np.int64)
    s = SampleColumns(event=z.astype(np.int16), ip=z.astype(np.uint64), pid=z.astype(np.int32),
                      tid=z.astype(np.int32), time=z.astype(np.uint64), cpu=z.astype(np.int32),
                      period=z.astype(np.uint64), misc=z.astype(np.uint16), seq=z, chain_id=chain_id,
                      chains=store.table())
    ulen = np.asarray([len(u) for u in unwound], dtype=np.int64)
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(ulen, out=start[1:])
    res = UnwindResult(start, np.asarray([w for u in unwound for w in u], dtype=np.uint64),
                       np.zeros(n, dtype=np.uint8))
    ids, table = chains_with_user_frames(s, res)
    assert [table.get(int(i)).tolist() for i in ids] == [reference(r, u) for r, u in zip(recorded, unwound)]
    # one id per distinct chain
    distinct = {tuple(reference(r, u)) for r, u in zip(recorded, unwound)}
    assert len(set(ids.tolist())) == len(distinct)
