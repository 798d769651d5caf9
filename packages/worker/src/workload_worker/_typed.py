"""Typed handlers (SPEC §17): pydantic models in and out, and which action each handler serves.

A handler whose second parameter is annotated with a pydantic model gets its input validated
into that model; input that does not validate fails the attempt ``invalid_input``, not
retryable (:class:`~workload_worker.errors.InvalidInput`). A handler that returns a model has
it dumped as JSON, by alias as its JSON Schema names its fields (``model_json``). A handler
annotated ``dict`` (or not at all) gets and returns plain dicts, as before.

Annotations are resolved on first use, not when the handler is declared: with ``from
__future__ import annotations`` a model may be defined below its handler. An annotation that
does not resolve (a class local to a function, a name imported for type checking only) leaves
the handler a plain one, with a warning: a handler that worked before models existed keeps
working. It is looked up again at each use until it resolves: a model defined after a workflow
that already used the handler still validates the handler's input once it exists (the tool's
``parameters`` in that workflow stay ``{"type": "object"}``: define models first).

The module also remembers which action each declared handler serves, so that the workflow
builder can take a handler where the definition names an action (:func:`action_of`).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import types
import weakref
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from workload_worker._context import Context, JsonObject
from workload_worker._plain import model_json, schema_of
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
        self._warned = False

    @property
    def input_model(self) -> type[BaseModel] | None:
        """The pydantic model of the input, or None for a plain-dict handler.

        An annotation that does not resolve is looked up again at the next use (its model may
        be defined further down its module), and warned about once.
        """
        if self._input is _UNRESOLVED:
            try:
                self._input = _input_model(self.handler)
            except _Unresolved as unresolved:  # a plain handler, for now
                if not self._warned:
                    self._warned = True
                    cause = unresolved.__cause__
                    logger.warning(
                        "action %r: its input annotation %r does not resolve (%s: %s), so its "
                        "input is passed as a dict; define the model at module level, before "
                        "a workflow uses the handler, to have it validated",
                        self.action,
                        unresolved.annotation,
                        type(cause).__name__,
                        cause,
                    )
                return None
        model: type[BaseModel] | None = self._input  # type: ignore[assignment]
        return model

    def input_schema(self) -> JsonObject:
        """The JSON Schema of the input: the model's, else ``{"type": "object"}``."""
        model = self.input_model
        return {"type": "object"} if model is None else schema_of(model, "input model")

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
        return model_json(result)
    return result


def _input_model(handler: Callable[..., Any]) -> type[BaseModel] | None:
    """The model the second parameter is annotated with, if any.

    Raises:
        _Unresolved: A string annotation's evaluation failed.
    """
    try:
        parameters = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):  # no signature to read (a builtin): a plain handler
        return None
    if len(parameters) < 2:
        return None
    annotation = parameters[1].annotation
    if isinstance(annotation, str):
        annotation = _evaluated(annotation, handler)
    return _model_in(annotation)


def _model_in(annotation: object) -> type[BaseModel] | None:
    """The model ``M`` an annotation names: ``M``, ``Annotated[M, …]`` or ``M | None``.

    An input is never None, so ``M | None`` validates into ``M``; anything else is None.
    """
    if get_origin(annotation) is Annotated:
        return _model_in(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        members = [member for member in get_args(annotation) if member is not type(None)]
        return _model_in(members[0]) if len(members) == 1 else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _evaluated(annotation: str, handler: Callable[..., Any]) -> object:
    """A string annotation (``from __future__ import annotations``) in the handler's module."""
    function = inspect.unwrap(handler)
    if not inspect.isfunction(function) and not inspect.ismethod(function):
        function = getattr(type(function), "__call__", function)  # noqa: B004 - a callable object
    namespace = dict(getattr(inspect.unwrap(function), "__globals__", {}))
    try:
        # What typing.get_type_hints does, for the one annotation that matters here: the others
        # (``ctx: Context`` imported for type checking only) need not resolve.
        return eval(annotation, namespace)  # noqa: S307 - the user's own annotation, as typing does
    except Exception as exc:  # any error of evaluating it
        raise _Unresolved(annotation) from exc


class _Unresolved(Exception):
    """A handler's input annotation that does not resolve (its cause says why)."""

    def __init__(self, annotation: str) -> None:
        super().__init__(annotation)
        self.annotation = annotation
