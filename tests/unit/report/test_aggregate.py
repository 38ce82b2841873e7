"""Flat profile semantics on hand-built captures with kernel frames named by the capture's
own kallsyms: self is the leaf, children counts each symbol once per sample, sort keys,
filters and percent limits; call trees per row."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from tests.support.report_capture import comm, kallsyms_text, kernel_sample, write_capture

from profiler.report.aggregate import ReportRows, aggregate
from profiler.report.callgraph import row_tree
from profiler.report.pipeline import load_profile
from profiler.report.profile import Profile
from profiler.report.options import Filters, LoadOptions, parse_time

STACKS = [  # (leaf-first frames, pid, cpu, count)
    (("k_leaf_a", "k_mid", "k_root"), 100, 0, 6),
    (("k_leaf_b", "k_mid", "k_root"), 100, 1, 2),
    (("k_recurse", "k_recurse", "k_recurse", "k_root"), 200, 0, 3),
    (("k_mid", "k_root"), 200, 1, 1),
]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFILER_CACHE_DIR", str(tmp_path / "cache"))


def build(tmp_path: Path, stacks: list[tuple[tuple[str, ...], int, int, int]] = STACKS) -> Path:
    recs: list[object] = [comm(100, 100, "alpha", 1), comm(200, 200, "beta", 1)]
    t = 10
    for frames, pid, cpu, count in stacks:
        for _ in range(count):
            t += 1_000_000
            recs.append(kernel_sample(frames, t, pid=pid, cpu=cpu))
    return write_capture(tmp_path / "agg.prof", recs, kallsyms=kallsyms_text())  # type: ignore[arg-type]


def load(path: Path, **filters: object) -> Profile:
    return load_profile(LoadOptions(input=str(path), filters=Filters(**filters)))  # type: ignore[arg-type]


def by_symbol(flat: ReportRows) -> dict[str, tuple[int, int]]:
    return {r.symbol or "": (r.self_samples, r.children_samples) for r in flat.rows}


def expected(stacks: list[tuple[tuple[str, ...], int, int, int]]) -> tuple[Counter[str], Counter[str]]:
    self_c: Counter[str] = Counter()
    child_c: Counter[str] = Counter()
    for frames, _, _, count in stacks:
        self_c[frames[0]] += count
        for name in set(frames):
            child_c[name] += count
    return self_c, child_c


def test_self_is_the_leaf_and_children_count_each_symbol_once(tmp_path: Path) -> None:
    flat = aggregate(load(build(tmp_path)), ("comm", "dso", "sym"), children=True)
    self_c, child_c = expected(STACKS)
    rows: dict[str, tuple[int, int]] = {}
    for r in flat.rows:  # the same symbol under two comms: add up
        s, c = rows.get(r.symbol or "", (0, 0))
        rows[r.symbol or ""] = (s + r.self_samples, c + r.children_samples)
    assert rows == {name: (self_c[name], child_c[name]) for name in child_c}
    assert flat.total_samples == sum(c for *_, c in STACKS)
    assert all(r.kernel and r.dso == "[kernel.kallsyms]" for r in flat.rows)


def test_rows_sorted_by_children_then_self_and_percent_of_total(tmp_path: Path) -> None:
    flat = aggregate(load(build(tmp_path)), ("sym",), children=True)
    weights = [(r.children_period, r.self_period) for r in flat.rows]
    assert weights == sorted(weights, reverse=True)
    root = flat.rows[0]
    assert root.symbol == "k_root" and flat.percent(root.children_period) == pytest.approx(100.0)


def test_no_children_rows_are_leaves_only(tmp_path: Path) -> None:
    flat = aggregate(load(build(tmp_path)), ("sym",), children=False)
    self_c, _ = expected(STACKS)
    assert by_symbol(flat) == {k: (v, 0) for k, v in self_c.items()}


def test_sort_by_comm_and_pid_and_cpu_split_rows(tmp_path: Path) -> None:
    prof = load(build(tmp_path))
    flat = aggregate(prof, ("comm", "pid"), children=False)
    got = {(r.comm, r.pid): r.self_samples for r in flat.rows}
    assert got == {("alpha", 100): 8, ("beta", 200): 4}
    flat = aggregate(prof, ("cpu",), children=False)
    assert {r.cpu: r.self_samples for r in flat.rows} == {0: 9, 1: 3}


def test_percent_limit_hides_small_rows(tmp_path: Path) -> None:
    prof = load(build(tmp_path))
    flat = aggregate(prof, ("sym",), children=False, percent_limit=20.0)
    assert {r.symbol for r in flat.rows} == {"k_leaf_a", "k_recurse"}


def test_sample_filters_and_leaf_filters(tmp_path: Path) -> None:
    path = build(tmp_path)
    assert load(path, comms=("beta",)).total_samples == 4
    assert load(path, pids=(100,)).total_samples == 8
    assert load(path, cpus=(1,)).total_samples == 3
    assert load(path, symbols=("k_leaf_b",)).total_samples == 2
    assert load(path, dsos=("[kernel.kallsyms]",)).total_samples == 12
    assert load(path, dsos=("libc.so.6",)).total_samples == 0
    # samples are 1 ms apart from t = 10 ns; the header's start is at 1 µs
    assert load(path, time=parse_time(",0.0035")).total_samples == 3


def test_percentages_relative_and_absolute(tmp_path: Path) -> None:
    prof = load(build(tmp_path), comms=("alpha",))
    flat = aggregate(prof, ("sym",), children=False, percentage="relative")
    assert sum(flat.percent(r.self_period) for r in flat.rows) == pytest.approx(100.0)
    absolute = aggregate(prof, ("sym",), children=False)  # perf's default
    assert sum(absolute.percent(r.self_period) for r in absolute.rows) == pytest.approx(
        100.0 * prof.total_period / prof.base_period)
    assert absolute.total_samples == prof.base_samples > prof.total_samples


def test_call_tree_caller_and_callee(tmp_path: Path) -> None:
    prof = load(build(tmp_path))
    flat = aggregate(prof, ("sym",), children=True, keep_stacks=True)
    names = {r.symbol: i for i, r in enumerate(flat.rows)}

    def label(fid: int) -> str:
        return prof.frame(fid).name()

    # the caller tree of k_mid spreads into its callees
    tree = row_tree(prof, flat, names["k_mid"], "caller", 0.0)
    assert [label(f) for f in tree[0].frames] == ["k_mid"]
    kids = {label(n.frames[0]): n.weight // 1000 for n in tree[0].children}
    assert kids == {"k_leaf_a": 6, "k_leaf_b": 2}
    # the leaf's tree shows how it was reached, root first
    tree = row_tree(prof, flat, names["k_leaf_a"], "caller", 0.0)
    assert [label(f) for f in tree[0].frames] == ["k_root", "k_mid", "k_leaf_a"]
    # callee order: from the symbol up to the root
    tree = row_tree(prof, flat, names["k_leaf_b"], "callee", 0.0)
    assert [label(f) for f in tree[0].frames] == ["k_leaf_b", "k_mid", "k_root"]


def test_threshold_prunes_light_branches(tmp_path: Path) -> None:
    prof = load(build(tmp_path))
    flat = aggregate(prof, ("sym",), children=True, keep_stacks=True)
    root = next(i for i, r in enumerate(flat.rows) if r.symbol == "k_root")
    full = row_tree(prof, flat, root, "caller", 0.0)
    pruned = row_tree(prof, flat, root, "caller", 20.0)  # 20 % of 12 samples = 2.4

    def weights(nodes: list) -> list[int]:  # type: ignore[type-arg]
        return [n.weight for n in nodes] + [w for n in nodes for w in weights(n.children)]

    assert min(weights(full)) < 2.4 * 1000
    assert min(weights(pruned)) >= 2.4 * 1000


def test_samples_without_callchains_use_the_ip(tmp_path: Path) -> None:
    path = build(tmp_path)
    no_chain = write_capture(tmp_path / "flat.prof", [kernel_sample(("k_leaf_a", "k_root"), 5)],
                             kallsyms=kallsyms_text(), callchain=False)
    prof = load(no_chain)
    assert not prof.has_callchains
    flat = aggregate(prof, ("sym",), children=True)  # ignored without callchains
    assert not flat.children and by_symbol(flat) == {"k_leaf_a": (1, 0)}
    assert path.exists()
