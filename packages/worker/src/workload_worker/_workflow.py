"""The workflow builder (SPEC §17): a definition written in Python, next to its handlers.

:class:`Workflow` collects tasks (:meth:`Workflow.task`, :meth:`Workflow.agent`) and returns
the §3 definition with :meth:`Workflow.definition` — plain data, in the normalized form the
server stores (every default explicit, numbers as the server writes them), so that applying it
to a server that has it already answers "unchanged" and :meth:`Workflow.definition_hash` is the
server's ``definition_hash``.

Every §3/§10 task field is a keyword of ``task`` and ``agent`` (:class:`TaskOptions`); the
retry policy's fields are keywords too (``max_attempts=3`` is ``retry={"max_attempts": 3}``).
The builder checks what only it can know — a handler no worker declares, a task key used twice,
a dependency on another workflow's task — and leaves every other check to the server's
compiler, which reports all problems at once (an unknown dependency, a cycle, a bound).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

from pydantic import BaseModel, ValidationError

from workload_worker._agent import AGENT_ACTION, ToolLike, agent
from workload_worker._plain import canonical_hash, json_copy, jsonb_value, normalized_number
from workload_worker._typed import action_of, validation_problems
from workload_worker.errors import DefinitionError

__all__ = ["RETRY_DEFAULTS", "TASK_DEFAULTS", "TaskHandle", "TaskOptions", "Workflow"]

RETRY_DEFAULTS: dict[str, float] = {
    "max_attempts": 1,
    "initial_backoff_seconds": 1,
    "backoff_multiplier": 2,
    "max_backoff_seconds": 60,
}
"""A task's retry policy when none is given (SPEC §3)."""
TASK_DEFAULTS: dict[str, Any] = {
    "timeout_seconds": 300,
    "queue": "default",
    "heartbeat_timeout_seconds": 30,
    "schedule_to_start_timeout_seconds": None,
}
"""A task's fields when not given (SPEC §3, §10); ``input`` {} and ``depends_on`` [] too."""


class TaskOptions(TypedDict, total=False):
    """The task fields ``Workflow.task`` and ``Workflow.agent`` take as keywords.

    ``retry`` is the whole policy; ``max_attempts``, ``initial_backoff_seconds``,
    ``backoff_multiplier`` and ``max_backoff_seconds`` set one field of it each (giving a field
    both ways is an error).
    """

    depends_on: Sequence[TaskHandle | str]
    timeout_seconds: float
    retry: Mapping[str, float]
    max_attempts: int
    initial_backoff_seconds: float
    backoff_multiplier: float
    max_backoff_seconds: float
    queue: str
    heartbeat_timeout_seconds: float
    schedule_to_start_timeout_seconds: float | None


_OPTIONS = frozenset(TaskOptions.__annotations__)


@dataclass(frozen=True, slots=True, eq=False)
class TaskHandle:
    """A task added to a workflow: give it to ``depends_on`` of later tasks.

    Attributes:
        workflow_id: The workflow it belongs to.
        key: The task's key.
        action: The action it runs (``agent`` for an agent task).
        output_type: For an agent task with ``output_type=``, the model its ``structured``
            output parses into (``handle.output_type.model_validate(output["structured"])``).
    """

    workflow: Workflow = field(repr=False)
    key: str
    action: str
    output_type: type[BaseModel] | None = None

    @property
    def workflow_id(self) -> str:
        """The id of the workflow the task belongs to."""
        return self.workflow.id


class Workflow:
    """A workflow definition built in code (SPEC §3, §17).

    Args:
        id: The workflow's id (``^[a-z0-9][a-z0-9._-]{0,62}$``).
        description: Optional text.

    Example:
        >>> etl = Workflow("etl", description="fetch and summarize")
        >>> a = etl.task("fetch", "fetch", input={"url": "https://example.org"}, max_attempts=3)
        >>> b = etl.task("summarize", "summarize", depends_on=[a], queue="etl")
        >>> etl.definition()["tasks"][1]["depends_on"]
        ['fetch']
    """

    def __init__(self, id: str, *, description: str = "") -> None:
        self.id = id
        self.description = description
        self._tasks: list[tuple[TaskHandle, dict[str, Any]]] = []

    @property
    def tasks(self) -> tuple[TaskHandle, ...]:
        """The tasks added so far, in order."""
        return tuple(handle for handle, _ in self._tasks)

    def task(
        self,
        key: str,
        action: Callable[..., Any] | str,
        *,
        input: Mapping[str, Any] | BaseModel | None = None,
        **options: Unpack[TaskOptions],
    ) -> TaskHandle:
        """Add a task that runs ``action``.

        Args:
            key: The task's key, unique in the workflow.
            action: A handler declared with ``@worker.action(name)`` (its action's name is
                used), or an action's name (``"mock"``, ``"agent"``, a remote action).
            input: The task's input: a JSON object, or a model (dumped as JSON). For a typed
                handler it is validated into the handler's input model now (``{}`` if None).
            **options: Any task field of :class:`TaskOptions`.

        Returns:
            The task's handle, for ``depends_on``.

        Raises:
            TypeError: an unknown keyword, or a retry field given twice.
            DefinitionError: the key is used already, the handler is not declared on any
                worker, the input does not validate into its model, or a dependency is a
                task of another workflow.
        """
        data = {} if input is None else json_copy(input, "input")
        if isinstance(action, str):
            name = action
        elif callable(action):
            declared = action_of(action)
            name = declared.action
            if declared.input_model is not None:  # what the handler will be given, exactly
                _check_input(declared.input_model, data, self.id, key)
        else:
            raise DefinitionError(
                f"task {key!r}: the action must be a handler or an action's name",
                workflow_id=self.id,
            )
        return self._add(key, name, data, options)

    def agent(
        self,
        key: str,
        *,
        model: str,
        prompt: str,
        instructions: str | None = None,
        tools: Sequence[ToolLike] = (),
        budget: Mapping[str, Any] | None = None,
        model_settings: Mapping[str, Any] | None = None,
        output_type: type[BaseModel] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        script: Sequence[Mapping[str, Any]] | None = None,
        **options: Unpack[TaskOptions],
    ) -> TaskHandle:
        """Add an ``agent`` task (SPEC §11): a model-and-tools loop run by the control plane.

        The agent arguments are those of :func:`~workload_worker.agent` (tools from declared
        handlers, ``output_type`` a model); ``options`` any task field of :class:`TaskOptions`.

        Returns:
            The task's handle (with ``output_type``).

        Raises:
            TypeError: an unknown keyword.
            DefinitionError: as :meth:`task` and :func:`~workload_worker.agent` say.
        """
        spec = agent(
            model=model,
            prompt=prompt,
            instructions=instructions,
            tools=tools,
            budget=budget,
            model_settings=model_settings,
            output_type=output_type,
            output_schema=output_schema,
            script=script,
        )
        return self._add(key, AGENT_ACTION, spec, options, output_type=output_type)

    def definition(self) -> dict[str, Any]:
        """The definition (SPEC §3), normalized as the server stores it: what ``PUT`` takes."""
        document = {
            "id": self.id,
            "description": self.description,
            "tasks": [task for _, task in self._tasks],
        }
        normalized: dict[str, Any] = jsonb_value(document)  # a copy, numbers as stored
        return normalized

    def definition_hash(self) -> str:
        """The server's ``definition_hash`` of :meth:`definition` (``"sha256:" + hex``)."""
        return canonical_hash(self.definition())

    def _add(
        self,
        key: str,
        action: str,
        input: dict[str, Any],
        options: Mapping[str, Any],
        *,
        output_type: type[BaseModel] | None = None,
    ) -> TaskHandle:
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise TypeError(f"task {key!r}: unknown keyword(s) {', '.join(unknown)}")
        if any(handle.key == key for handle, _ in self._tasks):
            raise DefinitionError(
                f"task key {key!r} is used already in workflow {self.id!r}", workflow_id=self.id
            )
        depends_on = options.get("depends_on", ())
        if isinstance(depends_on, str | TaskHandle):
            raise DefinitionError(f"task {key!r}: depends_on is a list", workflow_id=self.id)

        def number(name: str) -> Any:
            return normalized_number(options.get(name, TASK_DEFAULTS[name]))

        task = {  # in the server's order of fields
            "key": key,
            "action": action,
            "input": input,
            "depends_on": [self._dependency(key, d) for d in depends_on],
            "timeout_seconds": number("timeout_seconds"),
            "retry": _retry(key, options),
            "queue": options.get("queue", TASK_DEFAULTS["queue"]),
            "heartbeat_timeout_seconds": number("heartbeat_timeout_seconds"),
            "schedule_to_start_timeout_seconds": number("schedule_to_start_timeout_seconds"),
        }
        handle = TaskHandle(self, key, action, output_type)
        self._tasks.append((handle, task))
        return handle

    def _dependency(self, key: str, dependency: TaskHandle | str) -> str:
        if isinstance(dependency, TaskHandle):
            if dependency.workflow is not self:
                raise DefinitionError(
                    f"task {key!r} depends on {dependency.key!r} of workflow "
                    f"{dependency.workflow_id!r}: a dependency is a task of the same workflow",
                    workflow_id=self.id,
                )
            return dependency.key
        return dependency

    def __repr__(self) -> str:
        return f"Workflow({self.id!r}, tasks={[h.key for h in self.tasks]!r})"


def _retry(key: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The whole retry policy: the defaults, then ``retry=``, then the single-field keywords."""
    given = dict(options.get("retry") or {})
    unknown = sorted(set(given) - set(RETRY_DEFAULTS))
    if unknown:
        raise DefinitionError(f"task {key!r}: unknown retry field(s) {', '.join(unknown)}")
    for name in RETRY_DEFAULTS:
        if name in options:
            if name in given:
                raise TypeError(f"task {key!r}: {name} is given both alone and in retry=")
            given[name] = options[name]
    return {name: normalized_number(given.get(name, d)) for name, d in RETRY_DEFAULTS.items()}


def _check_input(model: type[BaseModel], data: dict[str, Any], workflow: str, key: str) -> None:
    try:
        model.model_validate(data)
    except ValidationError as exc:
        raise DefinitionError(
            f"task {key!r}: the input is not a valid {model.__name__}: {validation_problems(exc)}",
            workflow_id=workflow,
        ) from None
