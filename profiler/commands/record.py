"""``profiler record``: the click command, built from the options in ``record_args``, which
also holds what the command does (the entry point runs most command lines without click)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from profiler.commands import record_args
from profiler.commands.record_args import FLAG, MULTIPLE, OPTIONAL, OPTIONS, Option


def _click_option(opt: Option) -> Callable[[Any], Any]:
    kind: dict[str, Any] = {"is_flag": True} if opt.kind == FLAG else {"type": opt.convert}
    if opt.kind == MULTIPLE:
        kind["multiple"] = True
    if opt.kind == OPTIONAL:  # --name alone means the default; not given: None
        kind.update(is_flag=False, flag_value=opt.default, default=None)
    elif opt.default is not None:
        kind.update(default=opt.default, show_default=True)
    return click.option(*opt.names, opt.dest, metavar=opt.metavar, help=opt.help, **kind)


def _command(command: tuple[str, ...], archive: bool, **kwargs: Any) -> None:
    """Run COMMAND (after --) or attach to processes, and record samples into a capture."""
    order = click.get_current_context().meta.get(_ORDER, [])
    record_args.run(command=command, archive=archive, filter_after=record_args.filter_positions(order), **kwargs)


_ORDER = "record: option order"


class _OrderedCommand(click.Command):
    """Keeps the order the options came in (``--filter`` applies to the ``-e`` before it)."""

    def make_parser(self, ctx: click.Context) -> Any:
        parser = super().make_parser(ctx)
        parse_args = parser.parse_args

        def keep_order(args: list[str]) -> Any:
            opts, rest, order = parse_args(args=args)
            ctx.meta[_ORDER] = [p.name for p in order]
            return opts, rest, order

        setattr(parser, "parse_args", keep_order)  # noqa: B010  (an attribute of one parser object)
        return parser


# as the decorators would stack: the argument below the options, the first option on top
_command = click.argument("command", nargs=-1, type=click.UNPROCESSED)(_command)
for _opt in reversed(OPTIONS):
    _command = _click_option(_opt)(_command)
command = click.command(
    "record",
    cls=_OrderedCommand,
    context_settings={"ignore_unknown_options": False, "allow_interspersed_args": False},
)(_command)
