"""profiler: a sampling profiler for Linux (record / report split, like perf)."""

__version__ = "0.1.0"
