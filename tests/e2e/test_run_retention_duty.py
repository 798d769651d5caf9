"""Run retention as the service runs it (SPEC §5, §12): a cluster duty of the leader that
deletes old finished runs and counts them in ``workload_runs_purged_total``.

The service runs on a fake clock; the duty's pass interval is shortened (the container's
retention provider overridden with the settings' days), so the test waits on a condition, not
on an hour.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from dependency_injector import providers

from tests.plugins.live_api import LiveApi, settings
from tests.waiting import wait_until
from workload_api.container import Container
from workload_api.retention import RunRetention
from workload_api.settings import Settings
from workload_engine.clock import FakeClock

QUICK: dict[str, Any] = {"id": "quick", "tasks": [{"key": "a", "action": "mock"}]}
DAY = 86400.0
_keys = itertools.count()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def api_settings() -> Settings:
    return settings(run_retention_days=7)


@pytest.fixture
def api_overrides(clock: FakeClock, api_settings: Settings) -> Callable[[Container], None]:
    def override(container: Container) -> None:
        container.clock.override(providers.Object(clock))
        container.retention.override(
            providers.Singleton(
                RunRetention,
                container.store,
                container.clock,
                api_settings.run_retention_days,
                on_purged=container.metrics.provided.runs_purged.inc,
                interval=0.05,
            )
        )

    return override


def start(live_api: LiveApi) -> str:
    response = live_api.operator.post(
        "/api/v1/workflows/quick/versions/1/runs", headers={"Idempotency-Key": f"k-{next(_keys)}"}
    )
    assert response.status_code == 202, response.text
    run_id: str = response.json()["run_id"]
    return run_id


def purged_total(live_api: LiveApi) -> float:
    text = live_api.viewer.get("/metrics").text
    (line,) = [x for x in text.splitlines() if x.startswith("workload_runs_purged_total ")]
    return float(line.split()[1])


@pytest.mark.real_http
def test_the_leader_purges_old_finished_runs_and_counts_them(
    live_api: LiveApi, clock: FakeClock
) -> None:
    created = live_api.operator.post(
        "/api/v1/workflows", json=QUICK, headers={"Idempotency-Key": "wf"}
    )
    assert created.status_code == 201, created.text
    old = [start(live_api) for _ in range(3)]
    for run_id in old:
        assert live_api.wait_for_run(run_id)["status"] == "succeeded"
    assert purged_total(live_api) == 0
    clock.advance(8 * DAY)
    recent = start(live_api)
    live_api.wait_for_run(recent)

    def all_gone() -> bool:
        return all(live_api.viewer.get(f"/api/v1/runs/{r}").status_code == 404 for r in old)

    wait_until(all_gone, timeout=30, message="the old runs were not purged")
    assert live_api.viewer.get(f"/api/v1/runs/{recent}").json()["status"] == "succeeded"
    assert purged_total(live_api) == 3
    listed = live_api.viewer.get("/api/v1/runs").json()["items"]
    assert [run["run_id"] for run in listed] == [recent]
