"""What ``workload workflows apply`` applies: a JSON file, or the ``Workflow`` objects of a module.

``FILE`` is a JSON definition (``-``: standard input); ``MODULE`` a Python module whose every
:class:`workload_worker.Workflow` is applied, in the order the module defines them;
``MODULE:ATTRIBUTE`` one ``Workflow``, or a list or tuple of them. An existing file is a file;
a target with a ``:``, or a dotted name, is a module; anything else (a ``/``, a ``.json``
suffix) is a file that cannot be read. Every definition is built and checked here, before
anything is sent, so that bad input writes nothing. The worker SDK is imported only for a
module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workload_cli._inputs import read_object_file
from workload_cli._session import UsageError
from workload_cli._targets import import_target, resolve, split_target

if TYPE_CHECKING:
    from workload_worker import Workflow

__all__ = ["Source", "definitions_to_apply"]

_MODULE = re.compile(r"^[A-Za-z_][\w.]*$")


@dataclass(frozen=True, slots=True)
class Source:
    """One definition to apply and where it came from (for messages)."""

    label: str
    definition: dict[str, Any]


def definitions_to_apply(target: str) -> list[Source]:
    """The definitions ``FILE``, ``-``, ``MODULE`` or ``MODULE:ATTRIBUTE`` names, checked.

    Raises:
        UsageError: a file that cannot be read, is not a JSON object or has no ``id``; a module
            that does not import; an attribute that is missing or not a ``Workflow`` (or a list
            of them); a module without any; two workflows with the same id.
    """
    path = Path(target)
    if target == "-" or path.is_file():
        if path.suffix == ".py" and target != "-":
            raise UsageError(
                f"{target} is a Python file: name its module instead "
                f"(workload workflows apply {path.stem} or {path.stem}:ATTRIBUTE)"
            )
        return [_from_file(target)]
    if path.suffix.lower() == ".json" or not (":" in target or _MODULE.fullmatch(target)):
        return [_from_file(target)]  # says why it cannot be read
    return _from_module(target)


def _from_file(target: str) -> Source:
    definition = read_object_file(target)
    workflow_id = definition.get("id")
    if not isinstance(workflow_id, str) or not workflow_id:
        raise UsageError(
            f'{target}: the definition has no "id" (a non-empty string), and apply names '
            "the workflow by it"
        )
    return Source(target, definition)


def _from_module(target: str) -> list[Source]:
    from workload_worker import Workflow  # noqa: PLC0415 - only a module target needs it

    module_name, attribute = split_target(target)
    module = import_target(module_name)
    if attribute:
        found = resolve(module, module_name, attribute)
        workflows = _workflows(found, Workflow)
        if workflows is None:
            raise UsageError(
                f"{target!r} is a {type(found).__name__}, not a workload_worker.Workflow "
                "(or a list of them)"
            )
    else:
        workflows = _unique(v for v in vars(module).values() if isinstance(v, Workflow))
        if not workflows:
            raise UsageError(f"module {module_name!r} holds no workload_worker.Workflow")
    ids = [w.id for w in workflows]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise UsageError(f"{target!r}: workflow id(s) {', '.join(twice)} defined twice")
    return [_source(target, workflow) for workflow in workflows]


def _workflows(found: object, kind: type[Workflow]) -> list[Workflow] | None:
    """``found`` as a list of workflows, or None if it is not one (nor a sequence of them)."""
    if isinstance(found, kind):
        return [found]
    if isinstance(found, list | tuple) and found and all(isinstance(w, kind) for w in found):
        return _unique(found)
    return None


def _unique(workflows: Any) -> list[Workflow]:
    """The workflows once each (a module may bind one under two names), in order."""
    seen: list[Workflow] = []
    for workflow in workflows:
        if not any(workflow is s for s in seen):
            seen.append(workflow)
    return seen


def _source(target: str, workflow: Workflow) -> Source:
    try:
        definition = workflow.definition()
    except Exception as exc:  # the builder refuses what it cannot turn into JSON
        raise UsageError(
            f"{target!r}: workflow {workflow.id!r} has no definition: {type(exc).__name__}: {exc}"
        ) from None
    return Source(f"{target} ({workflow.id})", definition)
