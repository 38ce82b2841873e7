"""Counting mode (``profiler stat``): counters read with read(2), not sampled.

The pieces, one job each: :mod:`options` (what to count, validated), :mod:`counters` (open
perf_event_open counters through the recorder's binding, in groups, per CPU or per task, and
read ``struct read_format``), :mod:`values` (scaling for multiplexing, sums, run-to-run
statistics), :mod:`metrics` (perf's derived lines), :mod:`model` (rows as plain data),
:mod:`runner` (the workload, wall time, repeats, intervals) and :mod:`render` (perf stat's
text, CSV and JSON layouts on a stream the caller gives).
"""
