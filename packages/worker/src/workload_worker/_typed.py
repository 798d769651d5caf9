"""Typed handlers (SPEC §17): pydantic models in and out, and which action each handler serves.

A handler whose second parameter is annotated with a pydantic model gets its input validated
into that model; input that does not validate fails the attempt ``invalid_input``, not
retryable (:class:`~workload_worker.errors.InvalidInput`). A handler that returns a model has
it dumped as JSON (``model_dump(mode="json")``). A handler annotated ``dict`` (or not at all)
gets and returns plain dicts, as before.

Annotations are resolved on first use, not when the handler is declared: with ``from
__future__ import annotations`` a model may be defined below its handler. An annotation that
does not resolve then (a class local to a function, a name imported for type checking only)
leaves the handler a plain one, with a warning: a handler that worked before models existed
keeps working.

The module also remembers which action each declared handler serves, so that the workflow
builder can take a handler where the definition names an action (:func:`action_of`).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from workload_worker._context import Context, JsonObject
from workload_worker.errors import DefinitionError, InvalidInput

__all__ = ["TypedHandler", "action_of", "typed_handler"]

logger = logging.getLogger("workload.worker")

_MAX_REPORTED = 10
_UNRESOLVED = object()

# handler -> {action name: its TypedHandler}. Weak: the Worker that declared a handler holds it.
_DECLARED: weakref.WeakKeyDictionary[Any, dict[str, TypedHandler]] = weakref.WeakKeyDictionary()


class TypedHandler:
    """A declared handler with the models of its annotations: what the worker calls.

    Calling it (``(ctx, input)``, as the worker does) validates the input into the input model
    (if any), calls the handler, and dumps a returned model. For a coroutine function the call
    returns a coroutine.

    Attributes:
        handler: The function as the user wrote it.
        action: The action it was declared for.
        is_async: Whether it is a coroutine function (run on the loop, else in a thread).
    """

    def __init__(self, handler: Callable[..., Any], action: str, is_async: bool) -> None:
        self.handler = handler
        self.action = action
        self.is_async = is_async
        self._input: object = _UNRESOLVED

    @property
    def input_model(self) -> type[BaseModel] | None:
        """The pydantic model of the input, or None for a plain-dict handler."""
        if self._input is _UNRESOLVED:
            self._input = _input_model(self.handler, self.action)
        model: type[BaseModel] | None = self._input  # type: ignore[assignment]
        return model

    def input_schema(self) -> JsonObject:
        """The JSON Schema of the input: the model's, else ``{"type": "object"}``."""
        model = self.input_model
        return {"type": "object"} if model is None else model.model_json_schema()

    def __call__(self, ctx: Context, data: JsonObject) -> Any:
        argument = self._validated(data)
        if self.is_async:
            return self._awaited(self.handler(ctx, argument))
        return _dumped(self.handler(ctx, argument))

    async def _awaited(self, pending: Awaitable[object]) -> object:
        return _dumped(await pending)

    def _validated(self, data: JsonObject) -> Any:
        model = self.input_model
        if model is None:
            return data
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_input=False, include_context=False)
            raise InvalidInput(
                f"the input is not a valid {model.__name__}: {validation_problems(exc)}",
                [dict(e) for e in errors],
            ) from None

    def __repr__(self) -> str:
        return f"TypedHandler({self.action!r}, {self.handler!r})"


def validation_problems(exc: ValidationError) -> str:
    """What a validation error says, a problem each (the first ten), never the values.

    The values may be secrets, and the message is stored and shown (an attempt's error, a
    definition refused by ``workload workflows apply``).
    """
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '(input)'}: {e['msg']}"
        for e in errors[:_MAX_REPORTED]
    )
    more = f" (and {len(errors) - _MAX_REPORTED} more)" if len(errors) > _MAX_REPORTED else ""
    return problems + more


def typed_handler(handler: Callable[..., Any], action: str, is_async: bool) -> TypedHandler:
    """Wrap a handler declared for ``action``, and remember that it serves it."""
    typed = TypedHandler(handler, action, is_async)
    # Not weak-referenceable or not hashable: the builder then needs the action's name.
    with contextlib.suppress(TypeError):
        _DECLARED.setdefault(handler, {})[action] = typed
    return typed


def _declared(handler: object) -> dict[str, TypedHandler]:
    try:
        return _DECLARED.get(handler) or {}
    except TypeError:
        return {}


def action_of(handler: Callable[..., Any]) -> TypedHandler:
    """The declaration of a handler (for the builder), if it serves exactly one action.

    Raises:
        DefinitionError: no worker declares it, or it serves several actions.
    """
    declared = _declared(handler)
    name = getattr(handler, "__name__", repr(handler))
    if not declared:
        raise DefinitionError(
            f"handler {name!r} is not declared on any worker: decorate it with "
            "@worker.action(name) first, or give the action's name instead"
        )
    if len(declared) > 1:
        raise DefinitionError(
            f"handler {name!r} serves several actions ({', '.join(sorted(declared))}): "
            "give the action's name instead"
        )
    return next(iter(declared.values()))


def _dumped(result: object) -> object:
    """A returned model as JSON; anything else as it is (the worker checks it is a dict)."""
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json")
    return result


def _input_model(handler: Callable[..., Any], action: str) -> type[BaseModel] | None:
    try:
        parameters = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):  # no signature to read (a builtin): a plain handler
        return None
    if len(parameters) < 2:
        return None
    annotation = parameters[1].annotation
    if isinstance(annotation, str):
        annotation = _evaluated(annotation, handler, action)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _evaluated(annotation: str, handler: Callable[..., Any], action: str) -> object:
    """A string annotation (``from __future__ import annotations``) in the handler's module."""
    function = inspect.unwrap(handler)
    if not inspect.isfunction(function) and not inspect.ismethod(function):
        function = getattr(type(function), "__call__", function)  # noqa: B004 - a callable object
    namespace = dict(getattr(inspect.unwrap(function), "__globals__", {}))
    try:
        # What typing.get_type_hints does, for the one annotation that matters here: the others
        # (``ctx: Context`` imported for type checking only) need not resolve.
        return eval(annotation, namespace)  # noqa: S307 - the user's own annotation, as typing does
    except Exception as exc:  # any error of evaluating it: the handler stays a plain one
        logger.warning(
            "action %r: its input annotation %r does not resolve (%s: %s), so its input is "
            "passed as a dict; define the model at module level to have it validated",
            action,
            annotation,
            type(exc).__name__,
            exc,
        )
        return None
