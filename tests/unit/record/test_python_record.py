"""--python: the environment a recorded command gets, and -g's switch to DWARF stacks for a
Python interpreter (profiler/record/python.py)."""

from __future__ import annotations

import os

from profiler.commands.record_args import options_from_cli, parse
from profiler.record.options import RecordOptions
from profiler.record.python import (
    JIT_VAR,
    PERF_VAR,
    PYTHON_STACK_SIZE,
    is_python_command,
    python_call_graph,
    python_environment,
)


def test_environment_per_mode() -> None:
    base = {"PATH": "/bin"}
    assert python_environment("auto", True, base) == {"PATH": "/bin", PERF_VAR: "1"}
    assert python_environment("auto", False, base) is None  # no call graphs: nothing to gain
    assert python_environment("perf", False, base) == {"PATH": "/bin", PERF_VAR: "1"}
    assert python_environment("jit", True, base) == {"PATH": "/bin", JIT_VAR: "1"}
    assert python_environment("off", True, base) is None
    assert python_environment("auto", True, {PERF_VAR: "0"}) is None  # the user's own setting stays


def test_python_commands_by_name_or_link(tmp_path: os.PathLike[str]) -> None:
    assert all(is_python_command((name,), None) for name in ("python", "python3", "python3.12", "python3.13d"))
    assert not any(is_python_command((name,), None) for name in ("python2", "pythonista", "sh", "perl"))
    link = os.path.join(tmp_path, "app")
    os.symlink("/usr/bin/python3.11", link)
    assert is_python_command(("app",), link)
    assert not is_python_command((), None)


def test_dash_g_becomes_dwarf_for_python_and_says_why() -> None:
    size, note = python_call_graph("auto", ("python3",), None, None, False)
    assert size == PYTHON_STACK_SIZE and note is not None and "no frame pointers" in note
    assert python_call_graph("off", ("python3",), None, None, False) == (None, None)
    assert python_call_graph("auto", ("sh",), None, None, False) == (None, None)
    size, note = python_call_graph("auto", ("python3",), None, 8192, False)  # dwarf without a size
    assert size == PYTHON_STACK_SIZE and note is not None
    assert python_call_graph("auto", ("python3",), None, 8192, True) == (8192, None)  # dwarf,8192: as asked


def options(args: list[str]) -> RecordOptions:
    kwargs = parse(args)
    assert kwargs is not None
    command = kwargs.pop("command")
    kwargs.pop("archive")
    return options_from_cli(tuple(command), **kwargs)


def test_record_command_line() -> None:
    opts = options(["-g", "-q", "-o", "x.prof", "--", "python3", "fixtures/python/stacks.py"])
    assert opts.python == "auto" and opts.dwarf_stack_size == PYTHON_STACK_SIZE
    off = options(["-g", "-q", "--python", "off", "-o", "x.prof", "--", "python3", "fixtures/python/stacks.py"])
    assert off.dwarf_stack_size is None
    assert options(["-g", "-q", "-o", "x.prof", "--", "true"]).dwarf_stack_size is None
