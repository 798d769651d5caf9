"""Geometry of the console's pictures: a DAG in layers, and a timeline of attempts.

Both are drawn as inline SVG by the templates (no script, no inline style: attributes and CSS
classes only, so the Content-Security-Policy stays strict); this module only computes where
things go. A DAG is laid out by longest path from its roots (a task sits one layer right of its
deepest dependency), in definition order within a layer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["MAX_DRAWN_TASKS", "Dag", "Timeline", "dag", "timeline"]

MAX_DRAWN_TASKS = 300
"""Beyond this many tasks the DAG is not drawn (the task table still lists every task)."""

NODE_W, NODE_H, GAP_X, GAP_Y, PAD = 150, 34, 60, 14, 10


@dataclass(frozen=True, slots=True)
class Node:
    """A task's box."""

    key: str
    status: str
    x: int
    y: int
    label: str


@dataclass(frozen=True, slots=True)
class Edge:
    """A dependency: from the right side of ``source`` to the left side of ``target``."""

    source: str
    target: str
    path: str


@dataclass(frozen=True, slots=True)
class Dag:
    """A laid-out DAG (or ``too_large`` to draw)."""

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    width: int
    height: int
    too_large: bool = False
    node_w: int = NODE_W
    node_h: int = NODE_H


def _label(key: str) -> str:
    return key if len(key) <= 20 else key[:19] + "…"


def dag(tasks: Sequence[Mapping[str, Any]]) -> Dag:
    """Lay out tasks (``key``, ``depends_on``, optional ``status``) in definition order."""
    if len(tasks) > MAX_DRAWN_TASKS:
        return Dag((), (), 0, 0, too_large=True)
    order = [str(t["key"]) for t in tasks]
    deps = {str(t["key"]): [str(d) for d in t.get("depends_on", [])] for t in tasks}
    layer: dict[str, int] = {}

    def depth(key: str, seen: frozenset[str] = frozenset()) -> int:
        if key not in layer:
            parents = [d for d in deps.get(key, []) if d in deps and d not in seen]
            layer[key] = 1 + max((depth(d, seen | {key}) for d in parents), default=-1)
        return layer[key]

    for key in order:
        depth(key)
    rows: dict[int, int] = {}
    nodes: dict[str, Node] = {}
    for task, key in zip(tasks, order, strict=True):
        column = layer[key]
        row = rows.get(column, 0)
        rows[column] = row + 1
        x = PAD + column * (NODE_W + GAP_X)
        y = PAD + row * (NODE_H + GAP_Y)
        nodes[key] = Node(key, str(task.get("status", "defined")), x, y, _label(key))
    edges = []
    for key in order:
        target = nodes[key]
        for dep in deps[key]:
            source = nodes.get(dep)
            if source is None:
                continue
            x1, y1 = source.x + NODE_W, source.y + NODE_H // 2
            x2, y2 = target.x, target.y + NODE_H // 2
            bend = (x2 - x1) // 2
            path = f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}"
            edges.append(Edge(dep, key, path))
    width = PAD * 2 + (max(layer.values(), default=0) + 1) * (NODE_W + GAP_X) - GAP_X
    height = PAD * 2 + max(rows.values(), default=1) * (NODE_H + GAP_Y) - GAP_Y
    return Dag(tuple(nodes.values()), tuple(edges), width, height)


@dataclass(frozen=True, slots=True)
class Bar:
    """One attempt on the timeline (coordinates in the SVG's units)."""

    task_key: str
    attempt: int
    status: str
    x: float
    y: float
    width: float
    title: str


@dataclass(frozen=True, slots=True)
class Timeline:
    """Every attempt as a bar, one row per task, on a shared time axis."""

    rows: tuple[tuple[str, float], ...]
    bars: tuple[Bar, ...]
    width: int
    height: int
    seconds: float


ROW_H, LABEL_W, AXIS_W = 22, 150, 600


def _time(value: Any) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def timeline(
    tasks: Sequence[Mapping[str, Any]], attempts: Sequence[Mapping[str, Any]], now: datetime
) -> Timeline:
    """Bars from each attempt's start to its end (``now`` while it runs), rows in task order."""
    position = {str(t["task_key"]): n for n, t in enumerate(tasks)}
    keys = sorted({str(a["task_key"]) for a in attempts}, key=lambda k: position.get(k, 0))
    spans = []
    for a in attempts:
        start = _time(a.get("started_at"))
        if start is None:
            continue
        end = _time(a.get("finished_at")) or now
        spans.append((a, start, max(end, start)))
    if not spans:
        return Timeline((), (), LABEL_W + AXIS_W, ROW_H, 0.0)
    origin = min(s for _, s, _ in spans)
    total = max((e - origin).total_seconds() for _, _, e in spans) or 1.0
    row_of = {k: n for n, k in enumerate(keys)}
    bars = []
    for a, start, end in spans:
        x = LABEL_W + (start - origin).total_seconds() / total * AXIS_W
        width = max((end - start).total_seconds() / total * AXIS_W, 3.0)
        took = (end - start).total_seconds()
        title = f"{a['task_key']} attempt {a['attempt']}: {a['status']} ({took:.3f} s)"
        y = row_of[str(a["task_key"])] * ROW_H + 3
        bars.append(
            Bar(str(a["task_key"]), int(a["attempt"]), str(a["status"]), x, y, width, title)
        )
    rows = tuple((k, row_of[k] * ROW_H + ROW_H / 2 + 4) for k in keys)
    return Timeline(rows, tuple(bars), LABEL_W + AXIS_W + 10, len(keys) * ROW_H + 4, total)
