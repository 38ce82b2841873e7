"""Options and helpers shared by the subcommands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from profiler.format.container.layout import DEFAULT_CAPTURE

F = TypeVar("F", bound=Callable[..., Any])



def input_option(func: F) -> F:
    """``-i/--input FILE``: the capture to read (default ./profile.prof, like perf.data)."""
    return click.option(
        "-i", "--input", "input_path", default=DEFAULT_CAPTURE, show_default=True,
        metavar="FILE", help="Capture file to read.",
    )(func)


def warn(message: str) -> None:
    click.echo(f"profiler: warning: {message}", err=True)
