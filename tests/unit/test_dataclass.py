"""profiler.dataclass.dataclass behaves as dataclasses.dataclass: the same repr text, equality,
hash and hashability, the same fields, init, frozenness and slots, on every kind of class the
package declares (plain, frozen, slots, kw_only, defaults and factories, fields left out of
repr/compare/hash, inheritance, methods written in the class body, recursion in repr)."""

from __future__ import annotations

import dataclasses
import pickle
import re
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from profiler.dataclass import dataclass as fast

Decorator = Callable[..., Any]


def define(dc: Decorator) -> dict[str, Any]:
    """The same classes made with one decorator or the other."""

    @dc
    class Plain:
        a: int
        b: str = "x"
        c: list[int] = dataclasses.field(default_factory=list)
        KIND: ClassVar[int] = 3

    @dc(frozen=True)
    class Frozen:
        a: int
        b: tuple[int, ...] = ()
        note: str = dataclasses.field(default="", compare=False)
        hidden: int = dataclasses.field(default=0, repr=False)
        unhashed: int = dataclasses.field(default=0, hash=False)
        hashed_only: int = dataclasses.field(default=0, compare=False, hash=True)

    @dc(slots=True)
    class Slotted:
        a: int
        b: int = dataclasses.field(default=0, kw_only=True)

    @dc(frozen=True, slots=True)
    class FrozenSlotted:
        a: int
        b: str = ""

    @dc(eq=False)
    class NoEq:
        a: int

    @dc(repr=False)
    class NoRepr:
        a: int

    @dc
    class Base:
        a: int

    @dc
    class Child(Base):
        b: int = 0

    @dc(frozen=True)
    class FrozenBase:
        a: int

    @dc(frozen=True)
    class FrozenChild(FrozenBase):
        b: int = 0

    @dc
    class OwnMethods:
        a: int

        def __repr__(self) -> str:
            return "own"

        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = None  # type: ignore[assignment]

    @dc(frozen=True)
    class OwnHash:
        a: int

        def __hash__(self) -> int:
            return 7

    @dc
    class Node:
        name: str
        next: Any = None

    @dc
    class Empty:
        pass

    @dc(order=True)
    class Ordered:
        a: int

    return locals()


STD, FAST = define(dataclasses.dataclass), define(fast)

# (class name, positional args of instance x, of a second instance y, and of one equal to x)
CASES = [
    ("Plain", (1, "y", [2]), (2,), (1, "y", [2])),
    ("Frozen", (1, (2,), "n", 5, 6, 7), (1, (2,), "other", 5, 6, 8), (1, (2,), "m", 9, 1, 7)),
    ("Slotted", (1,), (2,), (1,)),
    ("FrozenSlotted", (1, "z"), (1, "q"), (1, "z")),
    ("NoEq", (1,), (1,), (1,)),
    ("NoRepr", (1,), (2,), (1,)),
    ("Base", (1,), (2,), (1,)),
    ("Child", (1, 2), (1, 3), (1, 2)),
    ("FrozenBase", (1,), (2,), (1,)),
    ("FrozenChild", (1, 2), (1, 3), (1, 2)),
    ("OwnMethods", (1,), (2,), (1,)),
    ("OwnHash", (1,), (2,), (1,)),
    ("Empty", (), (), ()),
    ("Ordered", (1,), (2,), (1,)),
]


def observe(classes: dict[str, Any], name: str, x_args: tuple[Any, ...], y_args: tuple[Any, ...],
            same_args: tuple[Any, ...]) -> dict[str, Any]:
    cls = classes[name]
    x, y, same = cls(*x_args), cls(*y_args), cls(*same_args)

    def text(obj: object) -> str:  # without the class's qualified name and the object's address
        return re.sub(r" at 0x[0-9a-f]+", "", repr(obj).replace(cls.__qualname__, name))

    seen: dict[str, Any] = {
        "repr": text(x),
        "fields": [(f.name, f.repr, f.compare, f.hash, f.kw_only) for f in dataclasses.fields(cls)],
        "eq": (x == y, x == same, x != same, x == x, x.__eq__(object())),
        "hashable": cls.__hash__ is not None,
        "slots": hasattr(cls, "__slots__"),
        "match_args": getattr(cls, "__match_args__", None),
        "astuple": dataclasses.astuple(x) if name != "Empty" else (),
        "replace": text(dataclasses.replace(x)),
    }
    if seen["hashable"]:
        seen["hash"] = (hash(x) == hash(same), hash(x) == hash(cls(*x_args)))
    try:
        x.a = 5
        seen["frozen"] = False
    except dataclasses.FrozenInstanceError:
        seen["frozen"] = True
    except AttributeError:
        seen["frozen"] = "slots"
    return seen


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_same_behaviour_as_the_standard_library(case: tuple[Any, ...]) -> None:
    assert observe(FAST, *case) == observe(STD, *case)


def test_the_same_hash_values() -> None:
    args = (1, (2,), "n", 5, 6, 7)
    assert hash(FAST["Frozen"](*args)) == hash(STD["Frozen"](*args))
    assert hash(FAST["FrozenSlotted"](1, "z")) == hash(STD["FrozenSlotted"](1, "z"))
    assert hash(FAST["OwnHash"](1)) == 7


def test_a_recursive_repr_shows_dots() -> None:
    for classes in (STD, FAST):
        node = classes["Node"]("a")
        node.next = node
        assert repr(node).endswith("Node(name='a', next=...)")


def test_package_instances_pickle() -> None:
    """Worker processes get options and records through pickle."""
    from profiler.format.records import Comm
    from profiler.report.options import TimeRange

    for x in (TimeRange("s", 1.0, None), Comm(pid=1, tid=2, comm="a")):
        assert pickle.loads(pickle.dumps(x)) == x


def test_the_package_uses_it() -> None:
    """The report's classes get the shared methods (no generated __repr__/__eq__ per class)."""
    from profiler.report.options import ReportOptions

    assert ReportOptions.__eq__.__code__ is FAST["Plain"].__eq__.__code__
    assert ReportOptions.__repr__.__code__ is FAST["Plain"].__repr__.__code__


def test_methods_compiled_in_an_earlier_run_are_the_same(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run writes the methods it compiled (the cache beside the bytecode); the next one makes
    the same classes from them, compiling nothing, and they behave as the standard library's.
    A damaged or foreign cache file is ignored, and ``dataclasses`` keeps its own ``exec``."""
    import profiler.dataclass as module

    path = tmp_path / "__pycache__" / "methods.bin"
    monkeypatch.setattr(module.sys, "dont_write_bytecode", False)
    first = module._Compiled(str(path))
    monkeypatch.setattr(module, "_COMPILED", first)
    define(fast)
    assert first.added > 0 and not path.exists()
    first.save()
    assert path.exists() and first.added == 0
    assert "exec" not in vars(dataclasses)

    second = module._Compiled(str(path))
    monkeypatch.setattr(module, "_COMPILED", second)
    again = define(fast)
    assert second.added == 0  # every method came from the file
    for case in CASES:
        assert observe(again, *case) == observe(STD, *case)

    for damage in (b"", b"\x00garbage", path.read_bytes()[:100]):
        path.write_bytes(damage)
        broken = module._Compiled(str(path))
        monkeypatch.setattr(module, "_COMPILED", broken)
        made = define(fast)
        assert broken.added > 0
        assert observe(made, *CASES[1]) == observe(STD, *CASES[1])
    path.write_bytes(__import__("marshal").dumps({"magic": b"old!", "codes": {}}))
    assert module._Compiled(str(path))._load() == {}


def test_the_methods_file_forgets_old_classes(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``KEEP_METHODS`` entries (classes whose source has since changed), a run keeps only
    the methods it used: the file does not grow for ever."""
    import profiler.dataclass as module

    monkeypatch.setattr(module.sys, "dont_write_bytecode", False)
    monkeypatch.setattr(module, "KEEP_METHODS", 5)
    path = tmp_path / "methods.bin"
    run = module._Compiled(str(path))
    monkeypatch.setattr(module, "_COMPILED", run)
    define(fast)
    assert run.codes is not None
    run.codes["def old(): pass"] = compile("def old(): pass", "<string>", "exec")
    run.save()
    kept = module._Compiled(str(path))._load()
    assert "def old(): pass" not in kept and set(kept) == run.used
