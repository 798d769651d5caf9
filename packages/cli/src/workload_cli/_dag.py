"""A workflow definition's DAG as text (``drafts show``, ``drafts approve``).

One line per task, in topological order — every task after the tasks it depends on, and among
the tasks free to go at the same point, the definition's order — with its action and what it
depends on::

    fetch      mock
    summarize  mock     depends on fetch

A compiled definition has no cycle and no unknown dependency; should a definition given here
have one anyway, its tasks that cannot be ordered come last, in the definition's order, marked.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from typing import Any

from workload_cli._review import shown

__all__ = ["dag_lines", "topological_order"]

_UNORDERED = "(on a cycle, or after an unknown task)"


def _key(task: Mapping[str, Any]) -> str:
    return str(task.get("key", ""))


def _depends_on(task: Mapping[str, Any]) -> list[str]:
    deps = task.get("depends_on")
    return [str(d) for d in deps] if isinstance(deps, list) else []


def _tasks(definition: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    tasks = definition.get("tasks")
    if not isinstance(tasks, list):
        return []
    return [t for t in tasks if isinstance(t, Mapping)]


def topological_order(
    tasks: Sequence[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """The tasks in topological order (ties: definition order), and those that cannot be.

    Returns:
        ``(ordered, unordered)``: ``unordered`` holds, in definition order, the tasks on a
        cycle or depending (directly or not) on a key no task has; empty for a compiled
        definition.
    """
    waiting = [set(_depends_on(t)) for t in tasks]
    dependents: dict[str, list[int]] = {}
    for index, deps in enumerate(waiting):
        for dep in deps:
            dependents.setdefault(dep, []).append(index)
    ready = [index for index, deps in enumerate(waiting) if not deps]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        index = heapq.heappop(ready)
        order.append(index)
        for later in dependents.get(_key(tasks[index]), []):
            waiting[later].discard(_key(tasks[index]))
            if not waiting[later]:
                heapq.heappush(ready, later)
    placed = set(order)
    return [tasks[i] for i in order], [t for i, t in enumerate(tasks) if i not in placed]


def dag_lines(definition: Mapping[str, Any]) -> list[str]:
    """The DAG of a definition, one line per task (see the module's docstring)."""
    ordered, unordered = topological_order(_tasks(definition))
    rows = [
        (shown(_key(t)), shown(t.get("action", "")), [shown(d) for d in _depends_on(t)], stuck)
        for stuck, tasks in ((False, ordered), (True, unordered))
        for t in tasks
    ]
    key_width = max((len(row[0]) for row in rows), default=0)
    action_width = max((len(row[1]) for row in rows), default=0)
    lines = []
    for key, action, deps, stuck in rows:
        after = f"depends on {', '.join(deps)}" if deps else ""
        line = f"{key.ljust(key_width)}  {action.ljust(action_width)}  {after}"
        lines.append(f"{line.rstrip()}  {_UNORDERED}" if stuck else line.rstrip())
    return lines
