"""SPEC §3 on real PostgreSQL: what is hashed and answered before storage is what JSONB returns.

JSONB stores numbers as ``numeric``: ``1e+20`` comes back as ``100000000000000000000`` (an
integer), ``-0.0`` as ``0.0``. Definitions and run inputs are normalized to that form first
(``jsonvalues.jsonb_value``), so ``definition_hash`` is the hash of the definition every read
returns, and a run's input reads back as the 202 answered it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from psycopg.types.json import Jsonb

from tests.json_values import AWKWARD_FLOATS, AWKWARD_INTS, json_objects
from workload_domain.compiler import compile_definition
from workload_domain.events import EventType
from workload_domain.ids import uuid7
from workload_domain.jsonvalues import canonical_json, jsonb_value, sha256_tag
from workload_domain.records import (
    EventRecord,
    NewRun,
    NewVersion,
    RunRecord,
    TaskRecord,
    VersionRecord,
    WorkflowRecord,
)
from workload_domain.statuses import RunStatus, TaskStatus
from workload_store_postgres.store import PostgresStore

T0 = datetime(2026, 3, 1, tzinfo=UTC)

AWKWARD: dict[str, Any] = {
    "floats": list(AWKWARD_FLOATS),
    "ints": list(AWKWARD_INTS),
    "nested": {"big": 1e20, "neg_zero": -0.0, "small": 1e-7, "deep": [[-1e300, 5e-324]]},
}


def definition(task_input: dict[str, Any], workflow_id: str = "numbers") -> dict[str, Any]:
    return {"id": workflow_id, "tasks": [{"key": "a", "action": "mock", "input": task_input}]}


def through_jsonb(conn: psycopg.Connection[Any], value: Any) -> Any:
    """``value`` stored as JSONB and read back, as the store writes and reads its columns."""
    row = conn.execute("SELECT %s::jsonb", (Jsonb(value),)).fetchone()
    assert row is not None
    return row[0]


def test_the_normalized_definition_and_its_hash_survive_jsonb(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:

        @settings(max_examples=200, deadline=None, derandomize=True)
        @given(task_input=json_objects)
        def check(task_input: dict[str, Any]) -> None:
            compiled = compile_definition(definition(task_input))
            stored = through_jsonb(conn, compiled.document())
            assert canonical_json(stored) == compiled.canonical
            assert sha256_tag(canonical_json(stored)) == compiled.definition_hash
            # Compiling what was read back (the definition cache does) gives the same hash.
            assert compile_definition(stored).definition_hash == compiled.definition_hash

        check()


def test_a_normalized_run_input_survives_jsonb(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:

        @settings(max_examples=200, deadline=None, derandomize=True)
        @given(run_input=json_objects)
        def check(run_input: dict[str, Any]) -> None:
            normalized = jsonb_value(run_input)
            assert canonical_json(through_jsonb(conn, normalized)) == canonical_json(normalized)

        check()


def test_without_normalization_jsonb_changes_these_numbers(database_url: str) -> None:
    """Why the normalization exists: the raw floats do not survive (the bug it fixes)."""
    with psycopg.connect(database_url) as conn:
        for value in (1e20, -1e16, 1.2345678901234568e20, -0.0):
            assert canonical_json(through_jsonb(conn, [value])) != canonical_json([value])
            assert canonical_json(through_jsonb(conn, [value])) == canonical_json(
                jsonb_value([value])
            )
        for value in (1e-7, 5e-324, 5.0, 9999999999999998.0, 2**64 + 1):
            assert canonical_json(through_jsonb(conn, [value])) == canonical_json([value])


@pytest.mark.anyio
async def test_versions_and_runs_read_back_as_written(database_url: str) -> None:
    async with PostgresStore(database_url, max_size=2) as store:
        compiled = compile_definition(definition(AWKWARD))
        document = compiled.document()
        assert json.dumps(document).count("e+") == 0  # no float left that JSONB rewrites
        created = await store.create_workflow(
            WorkflowRecord("numbers", 1, "", T0, T0),
            VersionRecord("numbers", 1, compiled.definition_hash, 1, T0, document),
        )
        assert isinstance(created, VersionRecord)
        new = NewVersion("numbers", compiled.definition_hash, 1, T0, document, "")
        v2 = await store.create_version(new)
        assert isinstance(v2, VersionRecord)
        for number in (1, 2):
            got = await store.get_version("numbers", number)
            assert sha256_tag(canonical_json(got.definition)) == compiled.definition_hash
            assert canonical_json(got.definition) == compiled.canonical
        listed = (await store.page_versions("numbers", None, 10)).items
        assert [canonical_json(v.definition) for v in listed] == [compiled.canonical] * 2

        run_input = jsonb_value(AWKWARD)
        run_id = uuid7(int(T0.timestamp() * 1000), b"\x00" * 10)
        run = RunRecord(run_id, "numbers", 1, RunStatus.PENDING, 1, run_input, False, T0, T0)
        task = TaskRecord("a", 0, TaskStatus.PENDING, (), 0, 1)
        await store.create_run(NewRun(run, (task,), (EventRecord(1, EventType.RUN_CREATED, T0),)))
        read = await store.get_run(run_id)
        assert canonical_json(read.input) == canonical_json(run_input)
