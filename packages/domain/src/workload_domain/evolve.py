"""``evolve``: ``dataclasses.replace`` for the domain's frozen, slotted records, cheaper.

A run's plan copies its run, task and attempt records with changes about nine times a run
(``WorkingRun``), and ``dataclasses.replace`` costs ≈ 46,000 instructions for a 14-field
:class:`~workload_domain.records.RunRecord`: its loop over the fields' metadata, then the
frozen ``__init__``, which sets each field through ``object.__setattr__``. ``evolve`` makes, once
a class, a function that allocates the copy and sets each slot through its descriptor:
≈ 16,000 (``benchmarks/hotpath_bench.py``).

It applies where that is the same thing as ``replace``: a frozen dataclass with slots, made by
the ``__init__`` that ``@dataclass`` wrote for it (no ``__init__``, ``__new__`` or metaclass of
its own, no ``__post_init__``), whose fields are all ``__init__`` parameters (no ``InitVar``,
``ClassVar`` or ``init=False`` field): an ``__init__`` that only sets the fields. Any other class
is copied by ``dataclasses.replace`` itself. A name that is
not a field raises ``TypeError``, as ``replace`` does. For the type checker ``evolve`` *is*
``dataclasses.replace``, so mypy checks the changes' names and types at every call.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

__all__ = ["evolve"]

_Copier = Callable[[Any, dict[str, Any]], Any]
_COPIERS: dict[type, _Copier] = {}


def _replace(obj: Any, changes: dict[str, Any]) -> Any:
    return dataclasses.replace(obj, **changes)


def _member_setters(cls: type, names: tuple[str, ...]) -> list[Callable[[Any, Any], None]] | None:
    """Each field's slot setter, or None where a field is not a plain slot of ``cls``."""
    setters = []
    for name in names:
        descriptor = getattr(cls, name, None)
        if type(descriptor) is not types.MemberDescriptorType:
            return None
        setters.append(descriptor.__set__)
    return setters


def _generated_init(cls: type) -> bool:
    """Whether ``cls`` is made by its own ``__init__``, the one ``@dataclass`` wrote for it.

    A class that writes its own ``__init__`` (which ``@dataclass`` keeps), ``__new__`` or
    metaclass may do more than set the fields; ``dataclass`` compiles the one it writes from
    text, so its code's file is ``<string>``.
    """
    init = cls.__dict__.get("__init__")
    code = getattr(init, "__code__", None)
    new: object = cls.__new__
    return (
        code is not None
        and code.co_filename == "<string>"
        and new is object.__new__
        and type(cls) is type
    )


def _copier(cls: type) -> _Copier:
    """The fastest faithful copier of ``cls``'s instances (see the module's docstring)."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not (params.frozen and params.init) or "__slots__" not in cls.__dict__:
        return _replace
    if not _generated_init(cls) or hasattr(cls, "__post_init__"):
        return _replace
    fields = dataclasses.fields(cls)
    if len(fields) != len(cls.__dataclass_fields__):  # type: ignore[attr-defined]
        return _replace  # a ClassVar or an InitVar: kept simple, left to replace
    if not all(f.init for f in fields):
        return _replace
    names = tuple(f.name for f in fields)
    setters = _member_setters(cls, names)
    if setters is None:
        return _replace
    known = frozenset(names)
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_known": known}
    lines = ["def copy(obj, changes):"]
    lines.append("    if not changes.keys() <= _known:")
    lines.append("        _unknown(_cls, changes)")
    lines.append("    new = _new(_cls)")
    for index, (name, setter) in enumerate(zip(names, setters, strict=True)):
        namespace[f"_set{index}"] = setter
        lines.append(
            f"    _set{index}(new, changes[{name!r}] if {name!r} in changes else obj.{name})"
        )
    lines.append("    return new")
    namespace["_unknown"] = _unknown
    exec("\n".join(lines), namespace)  # noqa: S102 - names come from the class's fields only
    copier: _Copier = namespace["copy"]
    return copier


def _unknown(cls: type, changes: dict[str, Any]) -> None:
    known = {f.name for f in dataclasses.fields(cls)}
    names = ", ".join(sorted(set(changes) - known))
    raise TypeError(f"{cls.__name__} has no field {names}")


def _evolve(obj: Any, /, **changes: Any) -> Any:
    """A copy of the dataclass instance ``obj`` with ``changes`` (``dataclasses.replace``)."""
    cls = type(obj)
    copier = _COPIERS.get(cls)
    if copier is None:
        copier = _COPIERS[cls] = _copier(cls)
    return copier(obj, changes)


if TYPE_CHECKING:
    from dataclasses import replace as evolve
else:
    evolve = _evolve
