"""``profiler export``: folded stacks, speedscope JSON, pprof, Firefox Profiler."""

from __future__ import annotations

from typing import Any, cast

import click

from profiler.commands._common import warn
from profiler.commands._output import open_binary_output, open_output
from profiler.commands._profile_opts import load_options, profile_options

EXPORT_FORMATS = ("folded", "speedscope", "pprof", "firefox", "otlp")


@click.command("export")
@profile_options
@click.option("-f", "--format", "format_", type=click.Choice(EXPORT_FORMATS), required=True,
              help="folded: one line per stack for flamegraph.pl/inferno; speedscope: JSON for speedscope; "
                   "pprof: gzipped profile.proto for go tool pprof, Pyroscope, Parca; firefox: the "
                   "Firefox Profiler's processed format (profiler.firefox.com, Load a file); otlp: "
                   "OpenTelemetry profiles (v1development) as protobuf, symbolized, with timestamps.")
@click.option("-o", "--output", default="-", show_default=True, help="File to write ('-' for stdout).")
@click.option("--weight", type=click.Choice(["samples", "period"]), default=None,
              help="Weight by sample count or period (default: samples for folded, period for speedscope).")
@click.option("--with-pid", is_flag=True, help="folded: put the pid in the first frame (comm-PID).")
@click.option("--with-tid", is_flag=True, help="folded: put pid and tid in the first frame (comm-PID/TID).")
@click.option("--unknown-as-dso", is_flag=True, help="folded: name unresolved frames by their DSO.")
@click.option("--per", type=click.Choice(["thread", "process"]), default="thread", show_default=True,
              help="speedscope: one profile per thread or per process.")
@click.option("--diff", nargs=2, metavar="BASE NEW", default=None,
              help="folded: both captures' stacks as 'stack BASE_COUNT NEW_COUNT' lines (flamegraph.pl's "
                   "difffolded form); -i is not used. For pprof, export each capture and use "
                   "go tool pprof -diff_base.")
@click.option("--json", "as_json", is_flag=True, help="otlp: OTLP/JSON instead of protobuf.")
def command(format_: str, output: str, weight: str | None, with_pid: bool, with_tid: bool,
            unknown_as_dso: bool, per: str, diff: tuple[str, str] | None, as_json: bool, **kwargs: Any) -> None:
    """Export a capture's stacks for other viewers. pprof, firefox and otlp carry every event
    of the capture (or the one --event names)."""
    if diff is not None:
        from profiler.errors import UsageError

        if format_ == "pprof":
            raise UsageError("--diff is for -f folded: export each capture with -f pprof and compare them with "
                             "'go tool pprof -diff_base BASE.pb.gz NEW.pb.gz'.")
        if format_ != "folded":
            raise UsageError(f"--diff is for -f folded, not -f {format_}.")
    if as_json and format_ != "otlp":
        from profiler.errors import UsageError

        raise UsageError(f"--json is for -f otlp (-f {format_} has one encoding).")
    if format_ == "pprof":
        _pprof(output, kwargs)
        return
    if format_ == "otlp":
        _otlp(output, as_json, kwargs)
        return
    if format_ == "firefox":
        _firefox(output, kwargs)
        return
    from profiler.report.model import Weight, default_weight
    from profiler.report.render import folded, speedscope
    from profiler.report.pipeline import load_stacks

    def folded_options(event: str | None) -> folded.FoldedOptions:
        chosen = weight or (default_weight(event) if event is not None else "samples")
        return folded.FoldedOptions(weight=cast(Weight, chosen), include_pid=with_pid, include_tid=with_tid,
                                    unknown_as_dso=unknown_as_dso)

    if diff is not None:
        from profiler.report.pair import load_stack_pair

        pair = load_stack_pair(load_options(kwargs), diff[0], diff[1], warn, what="export")
        lines = folded.diff_folded(pair.base.stacks, pair.new.stacks, folded_options(pair.new.meta.event))
        with open_output(output) as stream:
            folded.render_diff_folded(lines, stream)
        return
    profile = load_stacks(load_options(kwargs), warn, locations=format_ == "speedscope")  # source files
    with open_output(output) as stream:
        if format_ == "folded":
            folded.write(profile, stream, folded_options(profile.meta.event))
        else:
            speedscope.write(profile, stream, speedscope.SpeedscopeOptions(
                weight=cast(Weight, weight or "period"), per=cast(speedscope.ProfilePer, per),
                thread_names=profile.meta.thread_names))


def _pprof(output: str, kwargs: dict[str, Any]) -> None:
    from profiler.report.pipeline import load_events
    from profiler.report.profile import stack_profile
    from profiler.report.render.pprof import PprofInput, write_pprof

    options = load_options(kwargs)
    profiles = load_events(options, warn)
    data = PprofInput(profiles=[stack_profile(p, locations=True) for p in profiles],
                      comments=[f"capture {options.input}"])
    with open_binary_output(output) as stream:
        write_pprof(data, stream)


def _firefox(output: str, kwargs: dict[str, Any]) -> None:
    from profiler.report.pipeline import load_events
    from profiler.report.profile import stack_profile
    from profiler.report.render.firefox import FirefoxInput, write_firefox

    profiles = load_events(load_options(kwargs), warn)
    data = FirefoxInput([stack_profile(p, locations=True, timeline=True) for p in profiles], profiles[0].header)
    with open_output(output) as stream:
        write_firefox(data, stream)


def _otlp(output: str, as_json: bool, kwargs: dict[str, Any]) -> None:
    from profiler.report.pipeline import load_events
    from profiler.report.profile import stack_profile
    from profiler.report.render.otlp import OtlpInput, write_otlp

    profiles = load_events(load_options(kwargs), warn)
    data = OtlpInput([stack_profile(p, locations=True, timeline=True) for p in profiles], profiles[0].header)
    with open_binary_output(output) as stream:
        write_otlp(data, stream, json=as_json)
