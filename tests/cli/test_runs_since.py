"""``workload runs list --since`` (SPEC §8): a duration back from now or an RFC 3339 time.

The service runs on a fake clock set two hours in the past, so that some runs are "old" without
waiting: ``--since 1h`` leaves them out, ``--since 3h`` takes them in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from dependency_injector import providers
from pydantic import TypeAdapter

from tests.cli.conftest import Cli
from tests.plugins.live_api import OPERATOR_TOKEN, LiveApi
from workload_api.container import Container
from workload_engine.clock import FakeClock
from workload_sdk import Client, Run

QUICK: dict[str, Any] = {"id": "quick", "tasks": [{"key": "a", "action": "mock"}]}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime.now(UTC) - timedelta(hours=2))


@pytest.fixture
def api_overrides(clock: FakeClock) -> Callable[[Container], None]:
    def override(container: Container) -> None:
        container.clock.override(providers.Object(clock))

    return override


@pytest.fixture
def operator(live_api: LiveApi) -> Iterator[Client]:
    with live_api.sdk(OPERATOR_TOKEN) as client:
        yield client


def start(operator: Client, clock: FakeClock) -> Run:
    """A run, created a millisecond after the one before (the fake clock stands still)."""
    clock.advance(0.001)
    return operator.runs.start("quick", version=1)


def runs_of(cli: Cli, *args: str) -> list[str]:
    result = cli("runs", "list", *args, "-o", "json")
    assert result.exit_code == 0, result.output
    return [run.run_id for run in TypeAdapter(list[Run]).validate_json(result.stdout)]


def test_since_a_duration_or_a_time(cli: Cli, operator: Client, clock: FakeClock) -> None:
    operator.workflows.create(QUICK)
    old = [start(operator, clock) for _ in range(3)]
    clock.advance_to(datetime.now(UTC))
    new = [start(operator, clock) for _ in range(2)]

    assert runs_of(cli, "--since", "1h") == [r.run_id for r in new[::-1]]
    assert runs_of(cli, "--since", "30m") == [r.run_id for r in new[::-1]]
    assert runs_of(cli, "--since", "3h") == [r.run_id for r in (old + new)[::-1]]
    assert runs_of(cli, "--since", "1d", "--order", "asc") == [r.run_id for r in old + new]
    assert runs_of(cli, "--since", "1w", "--limit", "1") == [new[-1].run_id]
    # An RFC 3339 time is exclusive, as the API's created_after.
    after = old[0].created_at.isoformat()
    assert runs_of(cli, "--since", after) == [r.run_id for r in (old[1:] + new)[::-1]]
    assert runs_of(cli, "--since", after.replace("+00:00", "Z")) == runs_of(cli, "--since", after)
    # RFC 3339 (§5.6) allows a lower-case "t" and "z", as the API does.
    lower = after.replace("+00:00", "z").replace("T", "t")
    assert runs_of(cli, "--since", lower) == runs_of(cli, "--since", after)
