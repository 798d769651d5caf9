"""``evolve`` is ``dataclasses.replace``: the same copies, the same errors, for every record.

It copies a frozen, slotted dataclass without running its ``__init__``; these tests compare it
with ``dataclasses.replace`` field by field on every such class of the domain, and check that
the classes where that shortcut would differ (a ``__post_init__``, an ``InitVar``, a field
outside ``__init__``, no slots, not frozen) are copied by ``replace`` itself.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from dataclasses import InitVar, dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

import pytest

import workload_domain
from workload_domain.agent.journal import StepRecord
from workload_domain.evolve import _COPIERS, _copier, _replace, evolve
from workload_domain.records import AttemptRecord, RunCommit, RunRecord, RunSnapshot, TaskRecord
from workload_domain.statuses import AttemptStatus, RunStatus, TaskStatus

NOW = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
LATER = datetime(2026, 12, 4, 11, 0, tzinfo=UTC)


def _domain_dataclasses() -> list[type]:
    found: dict[str, type] = {}
    for module in pkgutil.walk_packages(workload_domain.__path__, "workload_domain."):
        loaded = importlib.import_module(module.name)
        for value in vars(loaded).values():
            if (
                isinstance(value, type)
                and dataclasses.is_dataclass(value)
                and value.__module__.startswith("workload_domain")
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[name] for name in sorted(found)]


DOMAIN_DATACLASSES = _domain_dataclasses()


def run() -> RunRecord:
    return RunRecord(
        run_id="run-1",
        workflow_id="wf",
        version=2,
        status=RunStatus.RUNNING,
        revision=3,
        input={"a": [1, 2]},
        cancel_requested=False,
        created_at=NOW,
        updated_at=NOW,
        started_at=NOW,
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )


def task() -> TaskRecord:
    return TaskRecord(
        task_key="a",
        status=TaskStatus.PENDING,
        position=0,
        attempt_count=0,
        max_attempts=3,
        depends_on=("b",),
    )


def attempt() -> AttemptRecord:
    return AttemptRecord("a", 1, AttemptStatus.RUNNING, NOW, attempt_id="att-1")


def fields_of(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def test_there_are_records_to_compare() -> None:
    assert {RunRecord, TaskRecord, AttemptRecord} <= set(DOMAIN_DATACLASSES)
    assert len(DOMAIN_DATACLASSES) > 30


@pytest.mark.parametrize("record", [run(), task(), attempt()], ids=type)
def test_each_field_changed_alone_gives_what_replace_gives(record: Any) -> None:
    for name, value in fields_of(record).items():
        changed = object() if value is not None else "set"
        ours = evolve(record, **{name: changed})
        theirs = dataclasses.replace(record, **{name: changed})
        assert type(ours) is type(theirs)
        assert fields_of(ours) == fields_of(theirs)
        assert getattr(ours, name) is changed
        assert fields_of(record)[name] is value  # the original is untouched


@pytest.mark.parametrize("record", [run(), task(), attempt()], ids=type)
def test_a_copy_is_a_new_equal_frozen_record(record: Any) -> None:
    copy = evolve(record)
    assert copy == record
    assert copy is not record
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.__setattr__(dataclasses.fields(copy)[0].name, "x")


def test_several_changes_and_the_fields_of_a_run() -> None:
    ended = evolve(run(), status=RunStatus.SUCCEEDED, finished_at=LATER, revision=4)
    assert ended == dataclasses.replace(
        run(), status=RunStatus.SUCCEEDED, finished_at=LATER, revision=4
    )
    assert ended.status is RunStatus.SUCCEEDED
    assert ended.input == {"a": [1, 2]}


@pytest.mark.parametrize("record", [run(), task(), attempt()], ids=type)
def test_an_unknown_field_is_refused_as_replace_refuses_it(record: Any) -> None:
    with pytest.raises(TypeError):
        dataclasses.replace(record, no_such_field=1)
    with pytest.raises(TypeError, match="no_such_field"):
        evolve(record, no_such_field=1)


HOT_RECORDS = (RunRecord, TaskRecord, AttemptRecord, RunSnapshot, RunCommit, StepRecord)
"""The records the engine copies on its hot paths (``WorkingRun``, remote reports)."""


def test_the_hot_records_take_the_shortcut() -> None:
    for cls in HOT_RECORDS:
        assert _copier(cls) is not _replace, cls


@pytest.mark.parametrize("cls", DOMAIN_DATACLASSES, ids=lambda c: c.__qualname__)
def test_a_domain_dataclass_takes_it_only_with_the_init_dataclass_wrote(cls: type) -> None:
    if _copier(cls) is _replace:
        return
    init = cls.__dict__["__init__"]
    assert init.__code__.co_filename == "<string>"
    assert not hasattr(cls, "__post_init__")
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_a_commit_and_a_snapshot_copy_as_replace_copies_them() -> None:
    commit = RunCommit(expected_revision=3, run=run(), tasks=(task(),), attempts=(attempt(),))
    assert evolve(commit, announce=True) == dataclasses.replace(commit, announce=True)
    snapshot = RunSnapshot(run(), (task(),), (attempt(),), last_sequence=4)
    later = evolve(snapshot, last_sequence=9, live_attempts=())
    assert later == dataclasses.replace(snapshot, last_sequence=9, live_attempts=())


@dataclass(frozen=True, slots=True)
class Checked:
    low: int
    high: int

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError("low above high")


@dataclass(frozen=True, slots=True)
class WithInitVar:
    value: int
    scale: InitVar[int] = 1
    scaled: int = field(init=False, default=0)

    def __post_init__(self, scale: int) -> None:
        object.__setattr__(self, "scaled", self.value * scale)


@dataclass(frozen=True)
class NoSlots:
    value: int


@dataclass(frozen=True, slots=True, init=False)
class OwnInit:
    value: int

    def __init__(self, value: int) -> None:
        object.__setattr__(self, "value", abs(value))


@dataclass(frozen=True, slots=True)
class NoInitVarUse:
    value: int
    unused: InitVar[int] = 0


@dataclass(frozen=True, slots=True)
class WithClassVar:
    value: int
    LIMIT: ClassVar[int] = 3


@dataclass(frozen=True, slots=True)
class Base:
    value: int


class OwnInitSubclass(Base):
    __slots__ = ()

    def __init__(self, value: int) -> None:
        super().__init__(abs(value))


@dataclass(frozen=True, slots=True)
class NamedLikeTheCopier:
    obj: int
    changes: int
    new: int


@dataclass(slots=True)
class NotFrozen:
    value: int


def test_a_post_init_still_runs() -> None:
    with pytest.raises(ValueError, match="low above high"):
        evolve(Checked(1, 2), low=3)
    assert evolve(Checked(1, 2), high=5) == Checked(1, 5)


def test_an_init_var_is_left_to_replace() -> None:
    """``replace`` runs ``__post_init__`` with the InitVar's default unless it is given."""
    assert evolve(WithInitVar(2, 3), value=4) == dataclasses.replace(WithInitVar(2, 3), value=4)
    assert evolve(WithInitVar(2, 3), value=4).scaled == 4
    assert evolve(WithInitVar(2), value=4, scale=3).scaled == 12
    assert _COPIERS[WithInitVar] is _replace


def test_an_init_of_its_own_still_runs() -> None:
    assert evolve(OwnInit(1), value=-5).value == 5
    assert evolve(OwnInitSubclass(1), value=-5).value == 5
    assert _COPIERS[OwnInit] is _replace
    assert _COPIERS[OwnInitSubclass] is _replace
    assert _copier(Base) is not _replace


def test_class_and_init_variables_are_left_to_replace() -> None:
    assert evolve(NoInitVarUse(1), value=2) == NoInitVarUse(2)
    assert evolve(WithClassVar(1), value=2) == WithClassVar(2)
    assert _COPIERS[NoInitVarUse] is _replace
    assert _COPIERS[WithClassVar] is _replace


def test_fields_named_like_the_copiers_own_names() -> None:
    copy = evolve(NamedLikeTheCopier(1, 2, 3), changes=20, obj=10)
    assert copy == NamedLikeTheCopier(10, 20, 3)
    assert _COPIERS[NamedLikeTheCopier] is not _replace


@pytest.mark.parametrize("obj", [NoSlots(1), NotFrozen(1)], ids=type)
def test_other_dataclasses_are_copied_by_replace(obj: Any) -> None:
    copy = evolve(obj, value=2)
    assert copy == type(obj)(2)
    assert _COPIERS[type(obj)] is _replace


def test_a_non_dataclass_is_refused_as_replace_refuses_it() -> None:
    with pytest.raises(TypeError):
        evolve(object())  # type: ignore[type-var]
