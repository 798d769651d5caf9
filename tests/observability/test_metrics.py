"""``GET /metrics`` (SPEC §12): every metric, exact counter deltas after a scripted workload,
low-cardinality labels only, and who may read it.

In-process on the in-memory store, and again over real HTTP and PostgreSQL (``real_http``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.console.helpers import create as create_definition
from tests.console.helpers import create_draft, deployer, generated, pending_approval, script
from tests.console.helpers import start as start_run
from tests.observability.scrape import Labels, Samples, deltas, parse, scrape
from tests.plugins.live_api import (
    OPERATOR_TOKEN,
    VIEWER_TOKEN,
    WORKER_TOKEN,
    LiveApi,
    in_process,
    settings,
)
from tests.waiting import wait_until
from workload_api.container import Container, use_memory_store

V1 = "/api/v1"
_keys = itertools.count()
RUNS_ROUTE = "/api/v1/workflows/{workflow_id}/versions/{version}/runs"
CANCEL_ROUTE = "/api/v1/runs/{run_id}/cancel"

# Every metric SPEC §12 lists, with its Prometheus type.
SPEC_METRICS = {
    "workload_http_requests": "counter",
    "workload_http_request_duration_seconds": "histogram",
    "workload_runs_started": "counter",
    "workload_runs_finished": "counter",
    "workload_attempts_finished": "counter",
    "workload_queue_depth": "gauge",
    "workload_queue_oldest_age_seconds": "gauge",
    "workload_schedule_to_start_seconds": "histogram",
    "workload_leases_expired": "counter",
    "workload_workers_active": "gauge",
    "workload_coordinator_leader": "gauge",
    "workload_coordinator_epoch": "gauge",
    "workload_runs_active": "gauge",
    "workload_db_pool_connections": "gauge",
    "workload_model_calls": "counter",
    "workload_model_tokens": "counter",
    "workload_approvals_pending": "gauge",
    # Not named by the SPEC: what its "approvals waiting long" alert reads.
    "workload_approvals_oldest_pending_age_seconds": "gauge",
    "workload_runs_purged": "counter",  # §5 (amended 2026-12-01), §12
}


def idem() -> dict[str, str]:
    return {"Idempotency-Key": f"metrics-{next(_keys)}"}


def create(api: LiveApi, workflow_id: str, *tasks: dict[str, Any]) -> None:
    body = {"id": workflow_id, "tasks": list(tasks)}
    response = api.operator.post(f"{V1}/workflows", json=body, headers=idem())
    assert response.status_code == 201, response.text


def start(api: LiveApi, workflow_id: str) -> str:
    response = api.operator.post(f"{V1}/workflows/{workflow_id}/versions/1/runs", headers=idem())
    assert response.status_code == 202, response.text
    run_id: str = response.json()["run_id"]
    return run_id


def claim(api: LiveApi, worker_id: str) -> list[dict[str, Any]]:
    body = {"queues": ["default"], "actions": ["resize"], "wait_seconds": 1}
    response = api.worker.post(f"{V1}/workers/{worker_id}/claim", json=body, timeout=30)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["attempts"]
    return items


def run_workload(api: LiveApi) -> None:
    """Two plain successes, a retry, a lease expiry then a success, and a cancel."""
    create(api, "ok", {"key": "a", "action": "mock"})
    create(
        api,
        "flaky",
        {
            "key": "a",
            "action": "mock",
            "input": {"fail_first": 1},
            "retry": {"max_attempts": 2, "initial_backoff_seconds": 0},
        },
    )
    create(
        api,
        "remote",
        {
            "key": "r",
            "action": "resize",
            "heartbeat_timeout_seconds": 0.3,
            "retry": {"max_attempts": 2, "initial_backoff_seconds": 0},
        },
    )
    create(api, "slow", {"key": "a", "action": "mock", "input": {"sleep_ms": 60_000}})

    done = [start(api, "ok"), start(api, "ok"), start(api, "flaky")]
    for run_id in done:
        assert api.wait_for_run(run_id)["status"] == "succeeded"

    remote = start(api, "remote")
    (first,) = wait_until(lambda: claim(api, "w-silent"), message="attempt 1 not queued")
    assert first["attempt"] == 1  # this worker never heartbeats: its lease runs out
    (second,) = wait_until(lambda: claim(api, "w-live"), message="attempt 2 not queued")
    assert second["attempt"] == 2
    body = {"lease_token": second["lease_token"], "output": {}}
    answer = api.worker.post(f"{V1}/attempts/{second['attempt_id']}/complete", json=body)
    assert answer.status_code == 200, answer.text
    assert api.wait_for_run(remote)["status"] == "succeeded"

    slow = start(api, "slow")
    wait_until(
        lambda: api.viewer.get(f"{V1}/runs/{slow}/tasks/a").json()["status"] == "running",
        message="the slow task did not start",
    )
    canceled = api.operator.post(f"{V1}/runs/{slow}/cancel", headers=idem())
    assert canceled.status_code == 202, canceled.text
    assert api.wait_for_run(slow)["status"] == "canceled"


def _workload_counters(changed: Samples) -> dict[str, float]:
    """The changed samples of the run/attempt/lease/claim counters, spelled as PromQL does."""
    names = (
        "workload_runs_started_total",
        "workload_runs_finished_total",
        "workload_attempts_finished_total",
        "workload_leases_expired_total",
        "workload_schedule_to_start_seconds_count",
        "workload_model_calls_total",
        "workload_model_tokens_total",
    )
    return {
        _promql(name, labels): value for (name, labels), value in changed.items() if name in names
    }


def _promql(name: str, labels: Labels) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in labels)
    return f"{name}{{{inner}}}" if inner else name


@pytest.mark.real_http
def test_counters_move_by_exactly_what_the_workload_did(live_api: LiveApi) -> None:
    before = scrape(live_api.viewer)
    run_workload(live_api)
    # The cancel's commit and the runner's last commit may land after the answer: wait for the
    # counters to settle on what the store says happened.
    expected = {
        "workload_runs_started_total": 5,
        'workload_runs_finished_total{status="succeeded"}': 4,
        'workload_runs_finished_total{status="canceled"}': 1,
        'workload_attempts_finished_total{kind="mock",status="succeeded"}': 3,
        'workload_attempts_finished_total{kind="mock",status="failed"}': 1,
        'workload_attempts_finished_total{kind="mock",status="canceled"}': 1,
        'workload_attempts_finished_total{kind="remote",status="interrupted"}': 1,
        'workload_attempts_finished_total{kind="remote",status="succeeded"}': 1,
        "workload_leases_expired_total": 1,
        'workload_schedule_to_start_seconds_count{queue="default"}': 2,
    }

    def settled() -> dict[str, float] | None:
        found = _workload_counters(deltas(before, scrape(live_api.viewer)))
        return found if found == expected else None

    wait_until(
        settled,
        timeout=10,
        message=lambda: (
            f"counters moved by {_workload_counters(deltas(before, scrape(live_api.viewer)))}"
        ),
    )
    after = scrape(live_api.viewer)
    changed = deltas(before, after)
    requests = {
        (dict(labels)["route"], dict(labels)["method"], dict(labels)["status_class"]): value
        for (name, labels), value in changed.items()
        if name == "workload_http_requests_total"
        and dict(labels)["method"] == "POST"
        and dict(labels)["route"] != "/api/v1/workers/{worker_id}/claim"
    }
    assert requests == {
        ("/api/v1/workflows", "POST", "2xx"): 4,
        (RUNS_ROUTE, "POST", "2xx"): 5,
        (CANCEL_ROUTE, "POST", "2xx"): 1,
        ("/api/v1/attempts/{attempt_id}/complete", "POST", "2xx"): 1,
    }
    timed = (
        "workload_http_request_duration_seconds_count",
        (("method", "POST"), ("route", RUNS_ROUTE)),
    )
    assert changed[timed] == 5
    # The gauges, read from the store at the scrape: nothing left to do, both workers seen.
    assert after[("workload_runs_active", ())] == 0
    assert after[("workload_workers_active", ())] == 2
    assert after[("workload_queue_depth", (("queue", "default"),))] == 0
    assert after[("workload_queue_oldest_age_seconds", (("queue", "default"),))] == 0
    assert after[("workload_coordinator_leader", ())] == 1
    epoch = live_api.container.readiness().epoch
    assert after[("workload_coordinator_epoch", ())] == (0 if epoch is None else epoch)
    assert live_api.backend == "memory" or (epoch is not None and epoch >= 1)
    assert after[("workload_database_up", ())] == 1
    assert after[("workload_approvals_pending", ())] == 0
    if live_api.backend == "postgres":
        pool = {
            dict(labels)["state"]
            for (name, labels) in after
            if name == "workload_db_pool_connections"
        }
        assert pool == {"idle", "used"}


def test_every_metric_of_the_spec_is_exposed_with_its_type(live_api: LiveApi) -> None:
    response = live_api.viewer.get("/metrics")
    assert response.status_code == 200
    types = {f.name: f.type for f in text_string_to_metric_families(response.text)}
    missing = {n: t for n, t in SPEC_METRICS.items() if types.get(n) != t}
    assert not missing, f"missing or mistyped: {missing}"
    # Before any model call or approval: no model samples, and no approval pending.
    samples = parse(response.text)
    assert not [k for k in samples if k[0].startswith("workload_model_")]
    assert samples[("workload_approvals_pending", ())] == 0


def test_pending_approvals_are_counted_by_the_gauge_and_the_status(live_api: LiveApi) -> None:
    """SPEC §12: workload_approvals_pending, and workload status's pending approvals."""

    def pending_now() -> tuple[float, int]:
        gauge = parse(live_api.viewer.get("/metrics").text)[("workload_approvals_pending", ())]
        status = live_api.viewer.get(f"{V1}/status").json()["approvals_pending"]
        return gauge, status

    def oldest_age() -> float:
        samples = parse(live_api.viewer.get("/metrics").text)
        return samples[("workload_approvals_oldest_pending_age_seconds", ())]

    assert pending_now() == (0, 0)
    assert oldest_age() == 0
    create_definition(live_api, deployer())
    asked = [pending_approval(live_api, start_run(live_api, "deployer")) for _ in range(2)]
    assert pending_now() == (2, 2)
    first = oldest_age()
    assert first > 0
    assert wait_until(lambda: oldest_age() > first, timeout=10, message="the oldest one ages")
    decided = live_api.operator.post(
        f"{V1}/approvals/{asked[0]['approval_id']}/decision",
        json={"decision": "approve", "arguments_digest": asked[0]["arguments_digest"]},
        headers=idem(),
    )
    assert decided.status_code == 200, decided.text
    assert pending_now() == (1, 1)


def test_queue_gauges_show_waiting_work(live_api: LiveApi) -> None:
    create(live_api, "unserved", {"key": "r", "action": "nobody-serves-this", "queue": "gpu"})
    run_ids = [start(live_api, "unserved") for _ in range(3)]

    def depth() -> Samples | None:
        samples = scrape(live_api.viewer)
        return samples if samples.get(("workload_queue_depth", (("queue", "gpu"),))) == 3 else None

    samples = wait_until(depth, message="the queue depth never reached 3")
    assert samples[("workload_runs_active", ())] == 3
    assert samples[("workload_workers_active", ())] == 0

    def aged() -> float | None:
        age = scrape(live_api.viewer)[("workload_queue_oldest_age_seconds", (("queue", "gpu"),))]
        return age if age > 0 else None

    wait_until(aged, message="the oldest queued attempt has no age")
    for run_id in run_ids:
        assert (
            live_api.operator.post(f"{V1}/runs/{run_id}/cancel", headers=idem()).status_code == 202
        )
    wait_until(
        lambda: scrape(live_api.viewer)[("workload_queue_depth", (("queue", "gpu"),))] == 0,
        message="canceled attempts still counted as queued",
    )


# -- labels are never ids ------------------------------------------------------------------------

_UUID = re.compile(
    r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"
)
_LONG_HEX = re.compile(r"[0-9a-fA-F]{16,}")
_NUMBER = re.compile(r"^[+-]?[0-9]+(\.[0-9]+)?$")
# Bucket bounds are numbers by Prometheus's design, not ids.
_NUMERIC_BY_DESIGN = frozenset({"le", "quantile"})


def looks_like_an_id(label: str, value: str) -> bool:
    """A label value that is an id (UUIDs, long hex, numbers) rather than a category."""
    if label in _NUMERIC_BY_DESIGN:
        return False
    return bool(_UUID.search(value) or _LONG_HEX.search(value) or _NUMBER.match(value))


@pytest.mark.parametrize(
    ("label", "value", "is_id"),
    [
        ("route", "/api/v1/runs/{run_id}", False),
        ("route", "/api/v1/runs/0194d6a3-0e5c-7b8e-9c2d-4f6a8b0c1d2e", True),
        ("route", "/api/v1/runs/0194d6a30e5c7b8e9c2d4f6a8b0c1d2e", True),
        ("worker", "a1b2c3d4e5f60718", True),
        ("attempt", "3", True),
        ("status_class", "2xx", False),
        ("queue", "default", False),
        ("le", "0.005", False),
    ],
    ids=["template", "uuid", "uuid-hex", "long-hex", "number", "status-class", "queue", "bucket"],
)
def test_the_id_detector(label: str, value: str, is_id: bool) -> None:
    assert looks_like_an_id(label, value) is is_id


@pytest.mark.real_http
def test_no_label_value_looks_like_an_id(live_api: LiveApi) -> None:
    run_workload(live_api)
    # Requests whose paths hold ids, paths no route matches, and methods nobody defined.
    run_id = "0194d6a3-0e5c-7b8e-9c2d-4f6a8b0c1d2e"
    assert live_api.viewer.get(f"{V1}/runs/{run_id}").status_code == 404
    assert live_api.viewer.get(f"/no/such/{run_id}/path/12345").status_code == 404
    # A method no HTTP parser knows is refused before the app (httptools) or by it (h11); one
    # the parser reads and no route defines reaches the app and its metrics as "other".
    assert live_api.viewer.request("BREW", f"{V1}/runs/{run_id}").status_code in {400, 405}
    assert live_api.viewer.request("PROPFIND", f"{V1}/runs/{run_id}").status_code == 405
    samples = scrape(live_api.viewer)
    found = [
        (name, label, value)
        for (name, labels) in samples
        for label, value in labels
        if looks_like_an_id(label, value)
    ]
    assert not found, found
    routes = {
        dict(labels)["route"]
        for (name, labels) in samples
        if name == "workload_http_requests_total"
    }
    assert f"{V1}/runs/{{run_id}}" in routes
    assert "<unmatched>" in routes
    methods = {
        dict(labels)["method"]
        for (name, labels) in samples
        if name == "workload_http_requests_total"
    }
    assert methods <= {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"}
    assert "other" in methods


# -- who may read ----------------------------------------------------------------------------------


@pytest.fixture
def public_metrics_api() -> Iterator[LiveApi]:
    container = use_memory_store(Container(settings=settings(metrics_public=True)))
    with in_process(container) as api:
        yield api


@pytest.mark.parametrize(
    ("token", "status"),
    [
        (None, 401),
        ("not-a-token", 401),
        (WORKER_TOKEN, 403),
        (VIEWER_TOKEN, 200),
        (OPERATOR_TOKEN, 200),
    ],
    ids=["anonymous", "bad-token", "worker", "viewer", "operator"],
)
def test_metrics_need_a_viewer(live_api: LiveApi, token: str | None, status: int) -> None:
    response = live_api.client(token).get("/metrics")
    assert response.status_code == status, response.text
    if status == 401:
        assert response.headers["www-authenticate"].startswith('Bearer realm="workload"')
        assert response.json()["code"] == "unauthenticated"


def test_metrics_can_be_public(public_metrics_api: LiveApi) -> None:
    response = public_metrics_api.anonymous.get("/metrics")
    assert response.status_code == 200
    assert ("workload_coordinator_leader", ()) in parse(response.text)


def test_a_drafts_model_calls_count_as_model_calls(live_api: LiveApi) -> None:
    """SPEC §12's model metrics count every model call: a draft's too (SPEC §11)."""
    before = scrape(live_api.viewer)
    valid = {"id": "nightly", "tasks": [{"key": "fetch", "action": "mock"}]}
    draft_id = create_draft(live_api, [{"content": "not a definition"}, *script(valid)])
    draft = generated(live_api, draft_id)
    assert draft["status"] == "ready", draft
    usage = draft["usage"]
    assert usage["model_calls"] == 2
    changed = deltas(before, scrape(live_api.viewer))
    assert changed[("workload_model_calls_total", (("outcome", "ok"), ("provider", "mock")))] == 2
    tokens = {
        dict(labels)["direction"]: value
        for (name, labels), value in changed.items()
        if name == "workload_model_tokens_total"
    }
    assert tokens == {"input": usage["input_tokens"], "output": usage["output_tokens"]}
