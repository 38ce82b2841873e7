"""Value classes without :mod:`dataclasses`.

Every ``profiler record`` pays for its imports in CPU time, and the recorder's start-up is most
of its CPU on a short recording: importing ``dataclasses`` (with ``inspect``, ``ast``, ``dis``
and ``tokenize``) cost about 10 ms, and each ``@dataclass`` about 1 ms more, generating and
compiling its methods at import. The classes the record path imports therefore write their
``__init__`` by hand and take equality, hashing, ``repr`` and ``replace`` from here, driven by
the field names they list in ``_fields`` (the order of their ``__init__`` parameters).

``Value`` compares and prints like a non-frozen dataclass (unhashable); ``Frozen`` also hashes
by its fields, as a frozen dataclass does. Nothing stops assignment to a ``Frozen``'s fields:
the code treats them as read-only, and mypy sees them as ordinary attributes.

For the same reason the modules of the record path import ``typing`` only for the type checker
(``TYPE_CHECKING = False`` at run time, which mypy reads as true): it cost about 5 ms, and with
``from __future__ import annotations`` their annotations never evaluate it. (The zstandard
package's ``__init__`` imports it too: profiler/format/container/codec.py loads its C backend alone.)
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar

    V = TypeVar("V", bound="Value")


class Value:
    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in self._fields])

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__qualname__}({args})"

    def replace(self: V, **changes: Any) -> V:
        """A copy with ``changes`` (``dataclasses.replace``)."""
        unknown = set(changes) - set(self._fields)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        values = {name: getattr(self, name) for name in self._fields}
        values.update(changes)
        return type(self)(**values)


class Frozen(Value):
    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self._values())
