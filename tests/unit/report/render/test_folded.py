"""Tally stacks: escaping, kind suffixes, unknown frames, thread labels, merging, sorting.

The golden file is re-blessed with ``PROFILER_BLESS=1 pytest tests/unit/report/render/test_folded.py``.
"""

from __future__ import annotations

import io
import os

from hypothesis import given
from hypothesis import strategies as st
import pytest

from profiler.report.model import Frame, ProfileMeta, StackSet, StackSample
from profiler.report.render.folded import FoldedOptions, fold_stacks, render_folded, write

from tests.support.paths import GOLDEN



def user(name: str, dso: str = "app") -> Frame:
    return Frame(name, dso, "user")


def kernel(name: str) -> Frame:
    return Frame(name, "[kernel.kallsyms]", "kernel")


def stack(*frames: Frame, comm: str = "app", pid: int = 10, tid: int = 10, samples: int = 1,
          period: int | None = None) -> StackSample:
    return StackSample(comm, pid, tid, tuple(frames), samples,
                       samples * 1000 if period is None else period)


def lines(stacks: list[StackSample], **options: object) -> dict[str, int]:
    return dict(fold_stacks(stacks, FoldedOptions(**options)))  # type: ignore[arg-type]


def assert_golden(name: str, text: str) -> None:
    """Compare ``text`` with tests/golden/<name>; PROFILER_BLESS=1 rewrites the file."""
    path = GOLDEN / name
    if os.environ.get("PROFILER_BLESS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden file {path}: run with PROFILER_BLESS=1"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs: re-bless if intended"


def test_frames_joined_root_first_after_comm() -> None:
    out = lines([stack(user("_start"), user("main"), user("leaf"), samples=3)])
    assert out == {"app;_start;main;leaf": 3}


def test_semicolon_in_names_becomes_colon_and_line_breaks_spaces() -> None:
    out = lines([stack(user("operator;()"), user("a\nb\x1ec\u2028d"), comm="we;ird")])
    assert out == {"we:ird;operator:();a b c d": 1}


def test_spaces_in_comm_become_underscores_but_stay_in_symbols() -> None:
    out = lines([stack(user("f(int, char)"), comm="Web Content")])
    assert out == {"Web_Content;f(int, char)": 1}


def test_kernel_and_jit_suffixes() -> None:
    out = lines([stack(user("main"), Frame("jitted", "[jit]", "jit"), kernel("do_syscall_64"))])
    assert out == {"app;main;jitted_[j];do_syscall_64_[k]": 1}
    plain = lines([stack(user("main"), kernel("do_syscall_64"))], annotate_kind=False)
    assert plain == {"app;main;do_syscall_64": 1}


def test_unknown_frames_default_and_as_dso() -> None:
    frames = (user("main"), Frame("[unknown]", "libc.so.6", "user"),
              Frame("[unknown]", "[kernel.kallsyms]", "kernel"), Frame("", "[unknown]", "unknown"))
    assert lines([stack(*frames)]) == {"app;main;[unknown];[unknown]_[k];[unknown]": 1}
    assert lines([stack(*frames)], unknown_as_dso=True) == {
        "app;main;[libc.so.6];[kernel.kallsyms]_[k];[unknown]": 1
    }


def test_pid_and_tid_in_first_frame() -> None:
    s = [stack(user("main"), pid=42, tid=43)]
    assert lines(s, include_pid=True) == {"app-42;main": 1}
    assert lines(s, include_tid=True) == {"app-42/43;main": 1}
    assert lines(s, include_pid=True, include_tid=True) == {"app-42/43;main": 1}
    assert lines(s, include_comm=False) == {"main": 1}


def test_identical_lines_after_renaming_are_merged() -> None:
    stacks = [
        stack(user("main"), user("a;b"), tid=1, samples=2),
        stack(user("main"), user("a:b"), tid=2, samples=5),
        stack(user("main"), user("a:b"), tid=3, samples=7),
    ]
    assert lines(stacks) == {"app;main;a:b": 14}
    assert lines(stacks, include_tid=True) == {
        "app-10/1;main;a:b": 2,
        "app-10/2;main;a:b": 5,
        "app-10/3;main;a:b": 7,
    }


def test_weight_by_period_and_zero_weights_dropped() -> None:
    stacks = [stack(user("main"), samples=2, period=500), stack(user("idle"), samples=1, period=0)]
    assert lines(stacks, weight="period") == {"app;main": 500}
    assert lines(stacks) == {"app;idle": 1, "app;main": 2}


def test_lines_sorted_whatever_the_input_order() -> None:
    stacks = [stack(user(n), samples=i + 1) for i, n in enumerate(["zeta", "alpha", "Mid", "beta"])]
    folded = fold_stacks(stacks)
    assert [line for line, _ in folded] == sorted(line for line, _ in folded)
    assert fold_stacks(list(reversed(stacks))) == folded


def test_render_writes_one_line_per_stack() -> None:
    out = io.StringIO()
    render_folded([("a;b", 3), ("a;c", 10)], out)
    assert out.getvalue() == "a;b 3\na;c 10\n"


names = st.text(alphabet=st.characters(codec="utf-8"), max_size=8)
frames = st.builds(Frame, names, st.sampled_from(["app", "libc.so.6", "[kernel.kallsyms]"]),
                   st.sampled_from(["user", "kernel", "jit", "unknown"]))
stacks_strategy = st.lists(
    st.builds(StackSample, names, st.integers(1, 4), st.integers(1, 4),
              st.lists(frames, max_size=6).map(tuple), st.integers(0, 50), st.integers(0, 10**6)),
    max_size=30,
)


@pytest.mark.slow  # make check leaves it out; make test runs it
@given(stacks_strategy)
def test_folding_keeps_total_weight_and_line_shape(stacks: list[StackSample]) -> None:
    out = io.StringIO()
    write(StackSet(ProfileMeta("t", "t", "cpu-clock", 0, 0, True), stacks), out, FoldedOptions(include_tid=True))
    text = out.getvalue()
    total = 0
    for row in text.splitlines():
        body, _, count = row.rpartition(" ")
        assert body and int(count) > 0
        total += int(count)
    assert total == sum(s.samples for s in stacks)
    assert len(text.splitlines()) == len(text.split("\n")) - 1  # no stray line breaks


def test_golden_folded() -> None:
    libc = "libc.so.6"
    stacks = [
        stack(user("_start"), user("__libc_start_main", libc), user("main"), user("heavy"),
              samples=600),
        stack(user("_start"), user("__libc_start_main", libc), user("main"), user("light"),
              samples=200),
        stack(user("_start"), user("__libc_start_main", libc), user("main"), user("light"),
              user("memcpy", libc), tid=11, samples=100),
        stack(user("_start"), user("main"), user("write", libc), kernel("entry_SYSCALL_64"),
              kernel("do_syscall_64"), samples=90),
        stack(Frame("[unknown]", libc, "user"), samples=10),
        stack(user("std::map<int, int>::find(int const&)"), user("cb;1"), comm="worker 2",
              pid=20, tid=21, samples=5),
    ]
    out = io.StringIO()
    write(StackSet(ProfileMeta("t", "t", "cpu-clock", 0, 0, True), stacks), out, FoldedOptions(include_pid=True))
    assert_golden("folded/basic.folded", out.getvalue())


def parse_diff_folded(text: str) -> tuple[dict[str, int], dict[str, int]]:
    """flamegraph.pl's two-column form back into each side's folded counts (0: not on that side)."""
    before: dict[str, int] = {}
    after: dict[str, int] = {}
    for row in text.splitlines():
        line, base, new = row.rsplit(" ", 2)
        for side, count in ((before, int(base)), (after, int(new))):
            if count:
                side[line] = count
    return before, after


def test_diff_folded_has_every_stack_of_either_side_and_parses_back_to_both() -> None:
    base = [stack(user("main"), user("old name"), samples=3), stack(user("main"), kernel("k"), samples=2),
            stack(user("main"), samples=1, tid=11)]
    new = [stack(user("main"), kernel("k"), samples=5), stack(user("main"), user("new"), samples=4, period=9)]
    from profiler.report.render.folded import diff_folded, render_diff_folded

    for options in (FoldedOptions(), FoldedOptions(weight="period", include_tid=True)):
        out = io.StringIO()
        render_diff_folded(diff_folded(base, new, options), out)
        assert parse_diff_folded(out.getvalue()) == (dict(fold_stacks(base, options)), dict(fold_stacks(new, options)))
    rows = diff_folded(base, new)
    assert rows == [("app;main", 1, 0), ("app;main;k_[k]", 2, 5), ("app;main;new", 0, 4), ("app;main;old name", 3, 0)]
