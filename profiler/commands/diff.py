"""``profiler diff BASE NEW [NEW...]``: perf diff's comparison of captures (ours, perf.data or a
mix), and ``--fail-on`` for CI."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

import click

from profiler.commands._common import warn
from profiler.commands._profile_opts import load_options, profile_options
from profiler.errors import ProfilerError, ReportError, UsageError
from profiler.format.container.layout import DEFAULT_CAPTURE
from profiler.tables import TABLE_FORMATS


class GateFailed(ProfilerError):
    """A --fail-on rule is broken (exit 1)."""


@click.command("diff")
@click.argument("captures", nargs=-1, required=True, metavar="BASE NEW [NEW...]")
@profile_options
@click.option("-c", "--compute", default="delta-abs", show_default=True, metavar="METHOD",
              help="The new files' column: delta (share change in points), delta-abs (the same, sorted by "
                   "its absolute value), ratio (period ratio) or wdiff:W1,W2 (NEW period × W2 − BASE period × W1).")
@click.option("-p", "--period", "show_period", is_flag=True, help="Show each file's period too.")
@click.option("-F", "--formula", "show_formula", is_flag=True, help="Show how each value is computed.")
@click.option("-s", "--sort", "sort", default="dso,sym", show_default=True, metavar="KEYS",
              help="Row keys: dso, sym, comm, pid, tid, cpu, srcline (rows match by these texts, "
                   "so two builds of a program compare).")
@click.option("-o", "--order", type=int, default=1, show_default=True,
              help="Sort by the column of this new file (1 = the first after the baseline).")
@click.option("--percentage", type=click.Choice(["absolute", "relative"]), default="absolute", show_default=True,
              help="With filters, shares of the whole capture (absolute) or of what the filters keep.")
@click.option("-b", "--baseline-only", is_flag=True,
              help="Only the baseline's rows that a new file has too; the Baseline column is then of "
                   "their total (as perf diff -b).")
@click.option("--shares", type=click.Choice(["own", "baseline"]), default="own", show_default=True,
              help="What a new file's shares (and deltas) are of: its own total period (perf diff's), or "
                   "the baseline's (period-normalised: a row whose period did not change shows 0 even "
                   "when the total changed).")
@click.option("-t", "--field-separator", "sep", metavar="SEP",
              help="Join the text output's columns with SEP, as perf diff -t does.")
@click.option("--repeats", type=int, default=1, show_default=True, metavar="N",
              help="Each side is N captures of the same run: BASE1..BASEN NEW1..NEWN. Their periods are "
                   "summed, and --fail-on uses their spread.")
@click.option("--fail-on", "fail_on", metavar="RULES",
              help="Exit 1 when a rule is broken, naming the rows that broke it: 'any>+2pp' (a row's share "
                   "grew by more than 2 points), 'sym:parse_*>+5%' (a matching row's share grew by more "
                   "than 5 % of itself), 'dso:GLOB>...', 'total>+3%' (the total period), '<' for "
                   "decreases; comma-separated. With --repeats, a change must also exceed K times the "
                   "larger side's standard deviation over its repeats.")
@click.option("--noise-k", type=float, default=3.0, show_default=True, metavar="K",
              help="How many standard deviations of the repeats a change must exceed to fail.")
@click.option("--format", "fmt", type=click.Choice(["text", *TABLE_FORMATS]), default="text", show_default=True,
              help="perf diff's text, or a table through tabulate: markdown (for a pull-request comment), "
                   "github, simple.")
def command(captures: tuple[str, ...], compute: str, show_period: bool, show_formula: bool, sort: str,
            order: int, percentage: str, baseline_only: bool, shares: str, sep: str | None, repeats: int,
            fail_on: str | None, noise_k: float, fmt: str, **kwargs: Any) -> None:
    """Compare captures as perf diff does: BASE's share of each row (Baseline) and each NEW's
    change (Delta), rows matched by DSO and symbol name. With --repeats N, each side is N
    captures; --fail-on turns the comparison into an exit code for CI (the gate uses the
    repeats' spread, so noise does not fail a build: a row fails only when its change exceeds
    the rule's threshold AND --noise-k times the larger side's standard deviation).

    Without --event, every event of BASE gets a section, as in perf diff; the gate checks each."""
    from profiler.report.diff import Compute, build_diff
    from profiler.report.diffgate import check, parse_rules
    from profiler.report.render import difftable

    if kwargs["input_"] != DEFAULT_CAPTURE:
        raise UsageError("diff takes its captures as arguments (BASE NEW), not -i.")
    comp = Compute.parse(compute)
    keys = _parse_sort(sort)
    rules = parse_rules(fail_on) if fail_on is not None else None
    groups = _groups(captures, repeats)
    if sep is not None and (fmt != "text" or not sep):
        raise UsageError("-t takes a non-empty separator, for the text output (--format text).")
    sections = [build_diff(event, keys, sides, comp, order, show_period, show_formula,
                           baseline_only=baseline_only, shares=shares)
                for event, sides in _load_sections(groups, load_options(kwargs), keys, percentage)]
    if fmt in TABLE_FORMATS:
        difftable.write_markdown_sections(sections, sys.stdout, fmt)
    else:
        difftable.write_sections(sections, sys.stdout, sep)
    sys.stdout.flush()
    if rules is None:
        return
    broken = []
    for data in sections:
        for b in check(data, rules, noise_k):
            broken.append(b)
            where = f"{data.event}: " if len(sections) > 1 else ""
            click.echo(f"profiler: gate: {where}{b.sentence()}", err=True)
    if broken:
        raise GateFailed(f"the gate failed: {len(broken)} breach{'es' if len(broken) > 1 else ''} of "
                         f"--fail-on '{fail_on}'.")
    click.echo(f"profiler: gate: passed ({len(rules)} rule{'s' if len(rules) > 1 else ''}, no row broke one).",
               err=True)


def _parse_sort(text: str) -> tuple[str, ...]:
    from profiler.report.diff import DIFF_SORT_KEYS
    from profiler.report.options import parse_sort

    keys = parse_sort(text)
    bad = [k for k in keys if k not in DIFF_SORT_KEYS]
    if bad or not keys:
        raise UsageError(f"--sort {text!r}: keys are {', '.join(DIFF_SORT_KEYS)}.")
    return keys


def _groups(captures: tuple[str, ...], repeats: int) -> list[tuple[str, ...]]:
    """The captures cut into sides of ``repeats`` each: the baseline first."""
    if repeats < 1:
        raise UsageError("--repeats is the number of captures per side, at least 1.")
    if len(captures) % repeats:
        raise UsageError(f"--repeats {repeats}: {len(captures)} captures do not make sides of {repeats} each.")
    groups = [captures[i:i + repeats] for i in range(0, len(captures), repeats)]
    if len(groups) < 2:
        raise UsageError("diff needs a baseline and at least one capture to compare with it "
                         f"({len(captures)} given{f' with --repeats {repeats}' if repeats > 1 else ''}).")
    return groups


def _load_sections(groups: list[tuple[str, ...]], load: Any, keys: tuple[str, ...],
                   percentage: str) -> list[tuple[str, list[Any]]]:
    """Every capture through the report pipeline, aggregated like ``perf report --no-children``:
    one section per event compared (``--event``'s, else every event of BASE in its order, as
    perf diff prints them). The first event of BASE that every capture has must have samples
    in each; a capture without one of the others is an empty side of that section."""
    from profiler.report.aggregate import aggregate
    from profiler.report.diff import side_of
    from profiler.report.pipeline import Capture, load_profile, require_samples

    paths = [p for g in groups for p in g]
    opened = [Capture(p, callchains=False) for p in paths]
    _check_arch(paths, opened)
    wanted = [load.filters.event] if load.filters.event else [str(n) for n in opened[0].sampled_names]
    first = 0 if load.filters.event else wanted.index(_common_event(paths, opened))
    opts = replace(load, callchains=False, inline=False, srclines="srcline" in keys)
    flats: list[list[Any]] = [[] for _ in wanted]
    names = ["" for _ in wanted]
    said: set[str] = set()
    for path, cap in zip(paths, opened):
        for n, event in enumerate(wanted):
            name = _event_of(path, cap, event, required=n == first)
            if name is None:
                flats[n].append(None)
                continue
            names[n] = names[n] or name
            profile = load_profile(replace(opts, input=path), cap, name, keep_cpu="cpu" in keys)
            for w in profile.warnings:
                if w not in said:
                    said.add(w)
                    warn(f"{path}: {w}")
            if n == first:  # the first common event must have samples everywhere; the others show what they have
                require_samples(path, profile.event, profile.recorded_samples, profile.total_samples, opts.filters,
                                "compare")
            flats[n].append(aggregate(profile, keys, children=False, percentage=percentage))
        cap.close()
    sections = []
    for name, per_capture in zip(names, flats):
        sides, i = [], 0
        for g in groups:
            sides.append(side_of(g, per_capture[i:i + len(g)]))
            i += len(g)
        sections.append((name, sides))
    return sections


def _check_arch(paths: list[str], opened: list[Any]) -> None:
    archs = [c.arch for c in opened]
    for path, arch in zip(paths[1:], archs[1:]):
        if arch and archs[0] and arch != archs[0]:
            raise ReportError(f"{paths[0]} was recorded on {archs[0]} and {path} on {arch}: "
                              f"profiles of different architectures do not compare.")


def _base_name(event: str) -> str:
    return event.split(":", 1)[0]


def _common_event(paths: list[str], opened: list[Any]) -> str:
    """The first event of BASE that every other capture has (modifiers such as ``:ppp`` aside)."""
    for name in opened[0].sampled_names:
        if all(any(_base_name(n) == _base_name(name) for n in c.names) for c in opened[1:]):
            return str(name)
    base = set(map(_base_name, opened[0].names))
    other = next((i for i, c in enumerate(opened[1:], 1) if not set(map(_base_name, c.names)) & base),
                 len(opened) - 1)
    raise ReportError(f"{paths[0]} has events {', '.join(opened[0].names)} and {paths[other]} has "
                      f"{', '.join(opened[other].names)}: no event in common to compare.")


def _event_of(path: str, cap: Any, wanted: str, required: bool = True) -> str | None:
    """The capture's name of event ``wanted`` (modifiers aside); None when it has none and the
    event is not ``required``."""
    from profiler.report.capture import select_event

    try:
        return str(cap.event_names[select_event(cap.event_names, wanted)])  # offcpu, wall too
    except ReportError:
        same = [n for n in cap.names if _base_name(n) == _base_name(wanted)]
        if same:
            return str(same[0])
        if not required:
            return None
        raise ReportError(f"{path} has no event {wanted!r} (it has {', '.join(cap.names)}): "
                          f"nothing to compare.") from None


for _param in command.params:  # the captures are arguments: the shared -i has no use here
    if isinstance(_param, click.Option) and _param.name == "input_":
        _param.hidden = True
