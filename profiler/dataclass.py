"""``dataclass`` with the same behaviour as the standard library's and a cheaper start-up.

Python 3.11's :func:`dataclasses.dataclass` writes the source of every generated method and
``exec``s it: about 0.1 ms per method, and a frozen class gets six (``__init__``, ``__repr__``,
``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``). A report creates about a hundred
classes at import: this was the larger part of the package's own import time.

Here the standard library still makes ``__init__`` (and a frozen class's ``__setattr__`` and
``__delattr__``, slots, ``__match_args__``, ``fields()``), but ``__repr__``, ``__eq__`` and
``__hash__`` are shared functions that read the fields through one ``operator.attrgetter`` made
per class, with the standard library's results: the same text (``Name(a=1, b='x')``, ``...``
for a recursive reference), the same comparison (the class must be the same, then the tuples of
the ``compare`` fields), the same hash (of the tuple of the hashed fields) and the same rules for
which of them a class gets (an explicit method in the class body wins; ``eq`` without
``frozen`` makes instances unhashable). ``order=True`` and ``unsafe_hash=True`` go to the
standard library unchanged. tests/unit/test_dataclass.py compares both on every kind of class.

The methods the standard library still writes (``__init__``; a frozen class's ``__setattr__``
and ``__delattr__``) are compiled once and kept between runs (:class:`_Compiled`): compiling
their source was half of what the classes cost at start-up, 27 ms of a report's 60 ms of its
own imports.

mypy sees the standard decorator (``TYPE_CHECKING``), so type checking is the standard one.
"""

from __future__ import annotations

import builtins
import dataclasses
import marshal
import os
import sys
from operator import attrgetter

_standard = dataclasses.dataclass

TYPE_CHECKING = False  # typing costs ~5 ms of start-up (profiler/value.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from dataclasses import dataclass as dataclass
    from typing import Any

    Values = Callable[[Any], tuple[Any, ...]]
else:

    def dataclass(cls=None, /, *, repr=True, eq=True, order=False, unsafe_hash=False, **options):
        """:func:`dataclasses.dataclass`, with shared ``__repr__``, ``__eq__`` and ``__hash__``."""

        def wrap(cls):
            return _process(cls, repr, eq, order, unsafe_hash, options)

        return wrap if cls is None else wrap(cls)


def _process(cls: type, want_repr: bool, want_eq: bool, order: bool, unsafe_hash: bool,
             options: dict[str, Any]) -> type:
    if order or unsafe_hash:
        return _standard(cls, repr=want_repr, eq=want_eq, order=order, unsafe_hash=unsafe_hash, **options)
    body = cls.__dict__
    class_hash = body.get("__hash__", dataclasses.MISSING)
    explicit_hash = not (class_hash is dataclasses.MISSING or (class_hash is None and "__eq__" in body))
    own_repr, own_eq = "__repr__" in body, "__eq__" in body
    _COMPILED.enter()
    try:
        cls = _standard(cls, repr=False, eq=False, **options)
    finally:
        _COMPILED.leave()
    fields = dataclasses.fields(cls)
    methods: dict[str, Any] = {}
    if want_repr and not own_repr:
        methods["__repr__"] = _repr_of([f.name for f in fields if f.repr], cls.__qualname__)
    if want_eq and not own_eq:
        methods["__eq__"] = _eq_of(_getter([f.name for f in fields if f.compare]))
    if want_eq and not explicit_hash:  # the standard library's rule (dataclasses._hash_action)
        hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
        methods["__hash__"] = _hash_of(_getter(hashed)) if options.get("frozen", False) else None
    for name, method in methods.items():
        setattr(cls, name, method)
    return cls


def _getter(names: list[str]) -> Values:
    """A function from an instance to the tuple of these fields' values."""
    if not names:
        return lambda self: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda self: (one(self),)
    return attrgetter(*names)


def _eq_of(values: Values) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _hash_of(values: Values) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(values(self))

    return __hash__


def _repr_of(names: list[str], qualname: str) -> Callable[[Any], str]:
    import _thread

    running: set[tuple[int, int]] = set()

    def __repr__(self: Any) -> str:
        key = id(self), _thread.get_ident()
        if key in running:
            return "..."
        running.add(key)
        try:
            return str(self.__class__.__qualname__) + "(" + ", ".join(
                f"{name}={getattr(self, name)!r}" for name in names) + ")"
        finally:
            running.discard(key)

    __repr__.__qualname__ = f"{qualname}.__repr__"
    return __repr__


class _Compiled:
    """The source the standard library writes for this package's classes, each text compiled
    once and kept between runs beside the package's bytecode, as Python keeps a module's
    (``__pycache__``, written unless ``sys.dont_write_bytecode``; the interpreter's magic number
    inside, so that another build never reads it). ``dataclasses`` runs the text through its
    module-level name ``exec``, which :meth:`enter` points here while one of our classes is
    made; the code is what ``compile`` gives for that text, so the methods are the same."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.codes: dict[str, Any] | None = None
        self.added = 0
        self.depth = 0
        self.used: set[str] = set()

    def enter(self) -> None:
        if self.codes is None:
            self.codes = self._load()
        self.depth += 1
        dataclasses.exec = self.exec  # type: ignore[attr-defined]

    def leave(self) -> None:
        self.depth -= 1
        if self.depth <= 0:
            self.depth = 0
            vars(dataclasses).pop("exec", None)  # the builtin again

    def exec(self, source: Any, globals: Any = None, locals: Any = None) -> None:  # noqa: A002
        codes = self.codes
        if not isinstance(source, str) or codes is None:
            builtins.exec(source, globals, locals)
            return
        code = codes.get(source)
        self.used.add(source)
        if code is None:
            code = codes[source] = compile(source, "<string>", "exec")
            if not self.added:
                import atexit

                atexit.register(self.save)
            self.added += 1
        builtins.exec(code, globals, locals)

    def _load(self) -> dict[str, Any]:
        from importlib.util import MAGIC_NUMBER
        from types import CodeType

        try:
            with open(self.path, "rb") as f:
                data = marshal.load(f)
        except (OSError, EOFError, ValueError, TypeError):
            return {}
        if not isinstance(data, dict) or data.get("magic") != MAGIC_NUMBER or not isinstance(data.get("codes"), dict):
            return {}
        return {k: v for k, v in data["codes"].items() if isinstance(k, str) and isinstance(v, CodeType)}

    def save(self) -> None:
        """Written at exit when a run compiled something new (atomically: a temporary file
        renamed; where the package's folder is not writable, not at all)."""
        if not self.added or self.codes is None or sys.dont_write_bytecode:
            return
        from importlib.util import MAGIC_NUMBER

        codes = self.codes
        if len(codes) > KEEP_METHODS:  # the source of classes since changed: keep this run's only
            codes = {k: v for k, v in codes.items() if k in self.used}
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(tmp, "wb") as f:
                marshal.dump({"magic": MAGIC_NUMBER, "codes": codes}, f)
            os.replace(tmp, self.path)
        except (OSError, ValueError):
            try:
                os.unlink(tmp)
            except OSError:
                pass
        self.added = 0


KEEP_METHODS = 2000  # methods kept in the file at most (the package makes about 300)
_COMPILED = _Compiled(os.path.join(os.path.dirname(__file__), "__pycache__",
                                   f"dataclass-methods.{sys.implementation.cache_tag}.bin"))
