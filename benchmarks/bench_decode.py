"""Decode benchmark: records per second for ~1M synthetic SAMPLE records with callchains.

    make bench-decode          (or: python benchmarks/bench_decode.py [--samples N])

Writes a capture of N samples (depth-12 callchains, two CPUs, 5000 records a frame) with the
format's own encoder, then times the bulk (columnar) decoder and, on a slice, the exact
per-record decoder. Target (issue: capture file format): bulk path >= 2 M records/s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profiler.format import records as R  # noqa: E402

from profiler.format.encode import encode
from profiler.format.attr import attr_to_dict, new_attr  # noqa: E402
from profiler.format.decode.decoder import load_capture  # noqa: E402
from profiler.format.container.reader import CaptureReader  # noqa: E402
from profiler.format.container.writer import CaptureWriter  # noqa: E402
from profiler.format.header import make_header  # noqa: E402

SAMPLE_TYPE = (R.PERF_SAMPLE_IP | R.PERF_SAMPLE_TID | R.PERF_SAMPLE_TIME | R.PERF_SAMPLE_CPU
               | R.PERF_SAMPLE_PERIOD | R.PERF_SAMPLE_CALLCHAIN)


def write_capture(path: Path, n: int, depth: int = 12, per_frame: int = 5000) -> None:
    attr = new_attr(type=1, config=0, sample_type=SAMPLE_TYPE, sample_id_all=1, freq=1,
                    sample_period=4000)
    layout = R.SampleLayout.from_attr(attr_to_dict(attr))
    header = make_header([{"name": "cpu-clock", "attr": attr_to_dict(attr), "ids": [1]}])
    # A few hundred distinct stacks, like a real program; encoded once, reused with new times.
    templates = []
    for k in range(400):
        chain = (R.PERF_CONTEXT_USER,) + tuple(0x401000 + 0x40 * ((k * 7 + j * 13) % 300)
                                               for j in range(depth))
        templates.append(bytearray(encode(R.Sample(
            ip=chain[1], pid=1000 + k % 3, tid=1000 + k % 5, time=0, cpu=0, res=0,
            period=250000, callchain=chain, misc=R.PERF_RECORD_MISC_USER), layout)))
    writer = CaptureWriter.create(path, header)
    t = 1_000_000
    written = 0
    while written < n:
        count = min(per_frame, n - written)
        cpu = (written // per_frame) % 2
        parts = []
        for i in range(count):
            rec = templates[(written + i) * 31 % len(templates)]
            t += 250_000
            rec[24:32] = t.to_bytes(8, "little")  # TIME follows IP and TID
            rec[32:36] = cpu.to_bytes(4, "little")
            parts.append(bytes(rec))
        writer.write_raw(cpu, b"".join(parts))
        written += count
        if written % (per_frame * 2) == 0:
            writer.write_round()
    writer.close({"samples": n})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.prof"
        t0 = time.perf_counter()
        write_capture(path, args.samples)
        write_s = time.perf_counter() - t0
        size = os.path.getsize(path)
        bulk_times = []
        for _ in range(args.runs):
            reader = CaptureReader.open(path)
            t0 = time.perf_counter()
            data = load_capture(reader)
            bulk_times.append(time.perf_counter() - t0)
            assert len(data.samples) == args.samples
            del data
            reader.close()
        reader = CaptureReader.open(path)
        exact_n = min(100_000, args.samples)
        t0 = time.perf_counter()
        for k, _ in enumerate(reader.iter_records()):
            if k + 1 >= exact_n:
                break
        exact_s = time.perf_counter() - t0
    median = statistics.median(bulk_times)
    print(f"capture: {args.samples} samples, callchain depth 12, {size / 1e6:.1f} MB "
          f"({size / args.samples:.1f} bytes/sample), written in {write_s:.1f} s")
    print(f"bulk decode:  median {median:.3f} s of {args.runs} runs (best {min(bulk_times):.3f} s) "
          f"= {args.samples / median / 1e6:.2f} M records/s   (target >= 2 M records/s)")
    print(f"exact decode: {exact_n / exact_s / 1e6:.2f} M records/s (one Python object per record)")


if __name__ == "__main__":
    main()
