"""The sync and async twins are one surface (SPEC §8, STYLE 28): a drift fails here.

``Client`` and ``AsyncClient`` must have the same public methods and the same resources, and each
resource the same public methods as its twin, with the same parameters (names, kinds, defaults,
annotations) and the same return annotations once ``Async`` is read away (``AsyncPager[Run]`` is
the twin of ``Pager[Run]``, ``httpx.AsyncClient`` of ``httpx.Client``). Each public method's
docstring is the same too, with the same words read away (and ``await``, ``async for``,
``async with`` read as their blocking selves): a user reading either twin learns the same
arguments, results and errors. The async twin's methods are awaited (or async-iterated); the sync
twin's never are.
"""

from __future__ import annotations

import inspect
import re
import typing
from typing import Any

import pytest

from workload_sdk import AsyncClient, Client

_ASYNC = re.compile(r"\b(?:Async|Sync)(?=[A-Z])")
_AWAIT = re.compile(r"\bawait\s+|\basync\s+(?=for\b|with\b)")


def _plain(annotation: Any) -> str:
    """An annotation as text, with ``Async`` (and ``Sync``: the senders) read away."""
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    return _ASYNC.sub("", text)


def _doc(function: Any) -> str:
    """A docstring, dedented, with ``Async`` and the awaiting words read away."""
    return _AWAIT.sub("", _ASYNC.sub("", inspect.getdoc(function) or ""))


def _shape(function: Any) -> list[tuple[str, str, str, str]]:
    signature = inspect.signature(function)
    shape = [
        (p.name, p.kind.name, repr(p.default), _plain(p.annotation))
        for p in signature.parameters.values()
    ]
    return [*shape, ("return", "", "", _plain(signature.return_annotation))]


def _public(cls: type[Any]) -> dict[str, Any]:
    # Inherited methods too: a resource may be split into parts (``Runs(RunTasks)``).
    own = {k: v for klass in reversed(cls.__mro__[:-1]) for k, v in vars(klass).items()}
    return {
        name: value
        for name, value in own.items()
        if callable(value) and (not name.startswith("_") or name == "__init__")
    }


def _is_async(function: Any) -> bool:
    if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
        return True
    # A listing returns an AsyncPager at once: iterated with ``async for``.
    return str(inspect.signature(function).return_annotation).startswith("AsyncPager[")


def drift(sync: type[Any], twin: type[Any]) -> list[str]:
    """Every difference between a sync class and its async twin, as sentences."""
    problems: list[str] = []
    mine, theirs = _public(sync), _public(twin)
    problems += [f"{twin.__name__} lacks {name}" for name in sorted(set(mine) - set(theirs))]
    problems += [f"{sync.__name__} lacks {name}" for name in sorted(set(theirs) - set(mine))]
    for name in sorted(set(mine) & set(theirs)):
        if _shape(mine[name]) != _shape(theirs[name]):
            problems.append(
                f"{name}: {sync.__name__}{inspect.signature(mine[name])} != "
                f"{twin.__name__}{inspect.signature(theirs[name])}"
            )
        if name.startswith("_") or name in {"close"}:
            continue
        if not _doc(mine[name]):
            problems.append(f"{sync.__name__}.{name} has no docstring")
        if _doc(mine[name]) != _doc(theirs[name]):
            problems.append(f"{name}: the docstrings of {sync.__name__} and {twin.__name__} differ")
        if inspect.iscoroutinefunction(mine[name]) or inspect.isasyncgenfunction(mine[name]):
            problems.append(f"{sync.__name__}.{name} is async")
        if not _is_async(theirs[name]):
            problems.append(f"{twin.__name__}.{name} is not awaited")
    return problems


def _resources(cls: type[Any]) -> dict[str, type[Any]]:
    return dict(typing.get_type_hints(cls))


def _pairs() -> list[tuple[type[Any], type[Any]]]:
    sync, twin = _resources(Client), _resources(AsyncClient)
    assert set(sync) == set(twin), "the clients group their endpoints differently"
    return [(Client, AsyncClient), *((sync[name], twin[name]) for name in sorted(sync))]


def test_the_clients_have_the_same_resources() -> None:
    assert sorted(_resources(Client)) == sorted(_resources(AsyncClient))
    assert len(_resources(Client)) >= 9


@pytest.mark.parametrize(("sync", "twin"), _pairs(), ids=lambda c: c.__name__)
def test_every_public_method_has_the_same_signature_and_docstring_in_both_twins(
    sync: type[Any], twin: type[Any]
) -> None:
    assert drift(sync, twin) == []


def test_the_comparison_sees_a_drift() -> None:
    class Things:
        def get(self, thing_id: str, *, deadline: float | None = None) -> int:
            raise NotImplementedError

        def only_sync(self) -> None:
            raise NotImplementedError

    class AsyncThings:
        async def get(self, thing_id: str, *, deadline: float | None = 1.0) -> int:
            raise NotImplementedError

        def both(self) -> None:
            raise NotImplementedError

    class Things2:
        def get(self, thing_id: str) -> int:
            """One thing; ``AsyncThings2`` iterates with ``async for``."""
            raise NotImplementedError

    class AsyncThings2:
        def get(self, thing_id: str) -> int:  # not awaited
            """One thing; ``Things2`` iterates with ``for``."""
            raise NotImplementedError

    problems = drift(Things, AsyncThings)
    assert "AsyncThings lacks only_sync" in problems
    assert "Things lacks both" in problems
    assert any(p.startswith("get: Things(") for p in problems)  # the default differs
    assert drift(Things2, AsyncThings2) == ["AsyncThings2.get is not awaited"]


def test_the_comparison_sees_a_docstring_drift() -> None:
    class Things:
        def get(self, thing_id: str) -> int:
            """One thing.

            Raises:
                NotFound: no such thing.
            """
            raise NotImplementedError

        def put(self, thing_id: str) -> None:
            raise NotImplementedError

    class AsyncThings:
        async def get(self, thing_id: str) -> int:
            """One thing (see :meth:`Things.get`)."""
            raise NotImplementedError

        async def put(self, thing_id: str) -> None:
            raise NotImplementedError

    assert drift(Things, AsyncThings) == [
        "get: the docstrings of Things and AsyncThings differ",
        "Things.put has no docstring",
    ]
