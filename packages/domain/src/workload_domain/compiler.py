"""Compilation of workflow definitions: validate everything, normalize, hash, index the graph.

:func:`compile_definition` is the only way a definition enters the system. It reports *every*
problem at once, each with a JSON Pointer path, and returns an immutable
:class:`CompiledWorkflow` that the engine schedules from.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from workload_domain.agent.spec import AGENT_ACTION, agent_problems
from workload_domain.definition import TaskSpec, WorkflowDefinition, validation_problems
from workload_domain.errors import InvalidDefinition, Problem, WorkflowIdMismatch, quoted
from workload_domain.jsonvalues import (
    JsonObject,
    canonical_json,
    json_problems,
    jsonb_value,
    pointer,
    sha256_tag,
)

__all__ = ["CompiledWorkflow", "compile_definition"]

_SECONDS_FIELDS = (
    "timeout_seconds",
    "heartbeat_timeout_seconds",
    "schedule_to_start_timeout_seconds",
)
_RETRY_NUMBER_FIELDS = ("initial_backoff_seconds", "backoff_multiplier", "max_backoff_seconds")


@dataclass(frozen=True, slots=True, eq=False)
class CompiledWorkflow:
    """A validated, normalized workflow definition with its task graph indexed.

    Attributes:
        definition: the normalized definition model.
        definition_hash: ``"sha256:" + hex`` of the canonical JSON of the normalized definition.
        task_keys: task keys in definition order; a task's index is its position here.
        index: task key → index.
        dependencies: for each task index, the indices it depends on.
        downstream: for each task index, the indices that depend on it directly.
        topological_order: every index, dependencies first; ties broken by definition order.
    """

    definition: WorkflowDefinition
    definition_hash: str
    canonical: bytes
    task_keys: tuple[str, ...]
    index: Mapping[str, int]
    dependencies: tuple[tuple[int, ...], ...]
    downstream: tuple[tuple[int, ...], ...]
    topological_order: tuple[int, ...]

    @property
    def workflow_id(self) -> str:
        """The workflow's id."""
        return self.definition.id

    @property
    def tasks(self) -> Sequence[TaskSpec]:
        """The normalized task specs in definition order."""
        return self.definition.tasks

    def task(self, key: str) -> TaskSpec:
        """Return the spec of the task with ``key``."""
        return self.definition.tasks[self.index[key]]

    def document(self) -> JsonObject:
        """Return a fresh copy of the normalized definition as a JSON object."""
        result: JsonObject = json.loads(self.canonical)
        return result

    def descendants(self, task: int) -> frozenset[int]:
        """Return every index transitively downstream of ``task`` (not ``task`` itself)."""
        seen: set[int] = set()
        stack = list(self.downstream[task])
        while stack:
            current = stack.pop()
            if current not in seen:
                seen.add(current)
                stack.extend(self.downstream[current])
        return frozenset(seen)


def compile_definition(
    raw: object,
    *,
    workflow_id: str | None = None,
    endpoints: Collection[str] | None = None,
) -> CompiledWorkflow:
    """Validate and normalize a workflow definition.

    Args:
        raw: the definition as parsed from JSON.
        workflow_id: when given (a new version under an existing workflow), the body's ``id``
            may be omitted and defaults to it; a different ``id`` is refused.
        endpoints: the names of the model endpoints configured on the server that compiles
            it: an agent task naming another is refused (SPEC §11). None: not checked (a
            stored version read back compiles whatever endpoints exist now).

    Raises:
        InvalidDefinition: with every problem found, each with a JSON Pointer path.
        WorkflowIdMismatch: the body's ``id``, a string, differs from ``workflow_id``.
    """
    if not isinstance(raw, Mapping):
        raise InvalidDefinition(
            "the workflow definition is invalid",
            (Problem("", "the definition must be a JSON object"),),
        )
    if workflow_id is not None:
        if "id" not in raw:
            raw = {"id": workflow_id, **raw}
        elif isinstance(raw["id"], str) and raw["id"] != workflow_id:  # else a wrong type
            raise WorkflowIdMismatch(
                f"the definition's id {quoted(raw['id'])} differs from the path's "
                f"{quoted(workflow_id)}"
            )

    problems: list[Problem] = []
    model: WorkflowDefinition | None = None
    try:
        model = WorkflowDefinition.model_validate(raw)
    except ValidationError as exc:
        problems.extend(validation_problems(exc))
    reported = {p.path for p in problems}
    # One problem per location: pydantic's word on a field stands when both checks object.
    problems.extend(p for p in _value_problems(raw, endpoints) if p.path not in reported)
    graph = _raw_graph(raw)
    problems.extend(_graph_problems(graph))
    if problems or model is None:
        problems = sorted(set(problems), key=lambda p: (_path_key(p.path), p.message))
        raise InvalidDefinition("the workflow definition is invalid", tuple(problems))
    return _build(model)


def _path_key(path: str) -> tuple[tuple[int, int | str], ...]:
    # Numeric segments sort numerically so that /tasks/10 comes after /tasks/9.
    return tuple((0, int(s)) if s.isascii() and s.isdigit() else (1, s) for s in path.split("/"))


def _value_problems(raw: Mapping[str, Any], endpoints: Collection[str] | None) -> list[Problem]:
    """Checks that pydantic cannot express: relations between fields and storable JSON."""
    problems: list[Problem] = []
    if isinstance(raw.get("description"), str):
        problems.extend(json_problems(raw["description"], ("description",)))
    tasks = raw.get("tasks")
    if not isinstance(tasks, list):
        return problems
    for i, task in enumerate(tasks):
        if not isinstance(task, Mapping):
            continue
        if isinstance(task.get("action"), str):
            problems.extend(json_problems(task["action"], ("tasks", i, "action")))
        if isinstance(task.get("input"), dict):
            problems.extend(json_problems(task["input"], ("tasks", i, "input")))
            if task.get("action") == AGENT_ACTION:
                problems.extend(agent_problems(task["input"], ("tasks", i, "input"), endpoints))
        retry = task.get("retry")
        if isinstance(retry, Mapping):
            initial = retry.get("initial_backoff_seconds", 1)
            maximum = retry.get("max_backoff_seconds", 60)
            if _is_number(initial) and _is_number(maximum) and maximum < initial and initial >= 0:
                problems.append(
                    Problem(
                        pointer(("tasks", i, "retry", "max_backoff_seconds")),
                        "must be greater than or equal to initial_backoff_seconds",
                    )
                )
    return problems


def _is_number(value: object) -> bool:
    # Only finite numbers are compared; NaN and infinities are reported on their own field.
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True, slots=True)
class _RawTask:
    position: int
    key: str
    depends_on: tuple[tuple[int, str], ...]  # (position in depends_on, key)


def _raw_graph(raw: Mapping[str, Any]) -> list[_RawTask]:
    """Extract whatever part of the graph is well-formed, so graph problems are reported too."""
    tasks = raw.get("tasks")
    if not isinstance(tasks, list):
        return []
    graph = []
    for i, task in enumerate(tasks):
        if not isinstance(task, Mapping) or not isinstance(task.get("key"), str):
            continue
        deps = task.get("depends_on", [])
        pairs = (
            tuple((j, d) for j, d in enumerate(deps) if isinstance(d, str))
            if isinstance(deps, list)
            else ()
        )
        graph.append(_RawTask(i, task["key"], pairs))
    return graph


def _graph_problems(graph: list[_RawTask]) -> list[Problem]:
    problems: list[Problem] = []
    first_at: dict[str, int] = {}
    for task in graph:
        if task.key in first_at:
            problems.append(
                Problem(
                    pointer(("tasks", task.position, "key")),
                    f"duplicate task key {quoted(task.key)} (first at /tasks/{first_at[task.key]})",
                )
            )
        else:
            first_at[task.key] = task.position

    edges: dict[str, list[str]] = {key: [] for key in first_at}
    for task in graph:
        seen: set[str] = set()
        for j, dep in task.depends_on:
            where = pointer(("tasks", task.position, "depends_on", j))
            if dep == task.key:
                problems.append(Problem(where, "a task cannot depend on itself"))
            elif dep not in first_at:
                problems.append(Problem(where, f"unknown task {quoted(dep)}"))
            elif dep in seen:
                problems.append(Problem(where, f"duplicate dependency {quoted(dep)}"))
            elif first_at[task.key] == task.position:
                edges[task.key].append(dep)
            seen.add(dep)

    for cycle in _cycles(edges):
        path = " -> ".join([*cycle, cycle[0]])
        problems.append(
            Problem(
                pointer(("tasks", first_at[cycle[0]], "depends_on")),
                f"dependency cycle: {path}",
            )
        )
    return problems


def _cycles(edges: dict[str, list[str]]) -> list[list[str]]:
    """Return one cycle per strongly connected component that has one (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, child_i = work.pop()
            if child_i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            children = edges[node]
            if child_i < len(children):
                work.append((node, child_i + 1))
                child = children[child_i]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    order = {key: i for i, key in enumerate(edges)}
    return [_cycle_in(sorted(c, key=order.__getitem__), edges) for c in components]


def _cycle_in(component: list[str], edges: dict[str, list[str]]) -> list[str]:
    """Follow dependencies inside the component from its first key until a key repeats.

    The result reads ``a -> b``: ``a`` depends on ``b``.
    """
    members = set(component)
    path = [component[0]]
    seen = {component[0]: 0}
    while True:
        current = path[-1]
        nxt = next(d for d in edges[current] if d in members)
        if nxt in seen:
            return path[seen[nxt] :]
        seen[nxt] = len(path)
        path.append(nxt)


def _normalize_number(value: float) -> float | int:
    # 30 and 30.0 mean the same; the canonical form must not tell them apart.
    return int(value) if float(value).is_integer() else value


def _build(model: WorkflowDefinition) -> CompiledWorkflow:
    document = model.model_dump(mode="json")
    for task in document["tasks"]:
        for field in _SECONDS_FIELDS:
            if task[field] is not None:
                task[field] = _normalize_number(task[field])
        for field in _RETRY_NUMBER_FIELDS:
            task["retry"][field] = _normalize_number(task["retry"][field])
    # Numbers in the form JSONB gives back (1e+20 → 100000000000000000000, -0.0 → 0.0): the
    # hash is of the definition every later read returns.
    document = jsonb_value(document)
    canonical = canonical_json(document)
    normalized = WorkflowDefinition.model_validate(document)

    keys = tuple(t.key for t in normalized.tasks)
    index = {key: i for i, key in enumerate(keys)}
    dependencies = tuple(tuple(index[d] for d in t.depends_on) for t in normalized.tasks)
    downstream_lists: list[list[int]] = [[] for _ in keys]
    for i, deps in enumerate(dependencies):
        for d in deps:
            downstream_lists[d].append(i)
    remaining = [len(deps) for deps in dependencies]
    ready = [i for i, n in enumerate(remaining) if n == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        current = heapq.heappop(ready)
        order.append(current)
        for nxt in downstream_lists[current]:
            remaining[nxt] -= 1
            if remaining[nxt] == 0:
                heapq.heappush(ready, nxt)
    return CompiledWorkflow(
        definition=normalized,
        definition_hash=sha256_tag(canonical),
        canonical=canonical,
        task_keys=keys,
        index=MappingProxyType(index),
        dependencies=dependencies,
        downstream=tuple(tuple(d) for d in downstream_lists),
        topological_order=tuple(order),
    )
