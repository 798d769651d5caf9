"""The shipped observability files (SPEC §12): alert rules, dashboard, compose profile.

``promtool`` (Debian's ``prometheus`` package, which ``.ci/run`` installs) checks the rules,
runs their unit tests (``alerts.test.yml``) and checks the Prometheus configuration; the tests
that need it skip, saying why, only where it is not installed. The rest needs nothing: every
metric the rules and the dashboard query exists, every alert has its runbook.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from workload_api.telemetry import Metrics

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
ALERTS = PROMETHEUS / "alerts.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "workload.json"
RUNBOOKS = ROOT / "docs" / "observability.md"
COMPOSE = ROOT / "compose.yaml"
# The alerts SPEC §12 names, and ours for each.
SPEC_ALERTS = {
    "no coordinator leader": "WorkloadNoCoordinatorLeader",
    "queue age high": "WorkloadQueueAgeHigh",
    "lease expiries spiking": "WorkloadLeaseExpiriesSpiking",
    "5xx ratio": "WorkloadHigh5xxRatio",
    "database unavailable": "WorkloadDatabaseUnavailable",
    "approvals waiting long": "WorkloadApprovalsWaitingLong",
}
_METRIC = re.compile(r"\bworkload_[a-z_]+\b")


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip(
            "promtool is not installed (Debian's prometheus package; .ci/run installs it): "
            "the rules were not checked here"
        )
    return subprocess.run(
        [promtool, *args], capture_output=True, text=True, cwd=ROOT, check=False, timeout=120
    )


@pytest.mark.parametrize(
    "args",
    [
        ("check", "rules", "deploy/prometheus/alerts.yml"),
        ("test", "rules", "deploy/prometheus/alerts.test.yml"),
        ("check", "config", "deploy/prometheus/prometheus.yml"),
    ],
    ids=["check-rules", "test-rules", "check-config"],
)
def test_promtool_accepts(args: tuple[str, ...]) -> None:
    done = _promtool(*args)
    assert done.returncode == 0, done.stdout + done.stderr


def _rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    return [rule for group in document["groups"] for rule in group["rules"]]


def _exposed() -> set[str]:
    """Every sample name the service can expose (``_total``, ``_bucket``, …)."""
    names: set[str] = set()
    for family in Metrics().registry.collect():
        names.add(family.name)
        suffixes = {
            "counter": ("_total", "_created"),
            "histogram": ("_bucket", "_count", "_sum", "_created"),
            "gauge": ("",),
        }[family.type]
        names.update(family.name + suffix for suffix in suffixes)
    return names


def test_the_alerts_spec_names_exist() -> None:
    names = {rule["alert"] for rule in _rules()}
    missing = {what: name for what, name in SPEC_ALERTS.items() if name not in names}
    assert not missing, missing


@pytest.mark.parametrize("rule", _rules(), ids=lambda rule: rule["alert"])
def test_every_alert_has_its_runbook(rule: dict[str, Any]) -> None:
    anchor = rule["alert"].lower()
    assert rule["annotations"]["runbook_url"] == f"docs/observability.md#{anchor}"
    headings = {
        line.lstrip("#").strip().lower()
        for line in RUNBOOKS.read_text(encoding="utf-8").splitlines()
        if line.startswith("### ")
    }
    assert anchor in headings, f"docs/observability.md has no '### {rule['alert']}' runbook"
    assert rule["labels"]["severity"] in {"critical", "warning"}
    assert rule["annotations"]["summary"]


def test_every_alert_is_unit_tested() -> None:
    document = yaml.safe_load((PROMETHEUS / "alerts.test.yml").read_text(encoding="utf-8"))
    tested = {case["alertname"] for test in document["tests"] for case in test["alert_rule_test"]}
    untested = {rule["alert"] for rule in _rules()} - tested
    assert not untested, sorted(untested)


def test_no_leader_means_nothing_executes_runs() -> None:
    """Replicas take no lock (SPEC §16): the alert must also ask whether any shard is owned."""
    (rule,) = (r for r in _rules() if r["alert"] == "WorkloadNoCoordinatorLeader")
    assert "workload_coordinator_leader" in rule["expr"]
    assert "workload_shards_owned" in rule["expr"]


def test_the_rules_and_the_dashboard_query_only_exposed_metrics() -> None:
    exposed = _exposed()
    queried = set(_METRIC.findall(ALERTS.read_text(encoding="utf-8")))
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    for panel in panels:
        for target in panel["targets"]:
            queried.update(_METRIC.findall(target["expr"]))
    assert queried, "no metric queried"
    assert queried <= exposed, sorted(queried - exposed)


@pytest.mark.parametrize(
    ("subject", "metric"),
    [
        ("queue depth", "workload_queue_depth"),
        ("queue age", "workload_queue_oldest_age_seconds"),
        ("throughput by status", "workload_runs_finished_total"),
        ("latency", "workload_http_request_duration_seconds_bucket"),
        ("lease expiries", "workload_leases_expired_total"),
        ("workers", "workload_workers_active"),
        ("leader", "workload_coordinator_leader"),
        ("shards owned", "workload_shards_owned"),
        ("model tokens", "workload_model_tokens_total"),
    ],
    ids=lambda value: str(value).replace(" ", "-"),
)
def test_the_dashboard_shows(subject: str, metric: str) -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert any(metric in expr for expr in exprs), f"no panel shows {subject}"


def test_the_dashboard_is_importable() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert (dashboard["uid"], dashboard["title"]) == ("workload", "Workload")
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    for panel in dashboard["panels"]:
        position = panel["gridPos"]
        assert position["x"] + position["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def test_the_compose_profile_binds_the_loopback_only() -> None:
    services = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]
    profiled = {name for name, s in services.items() if "observability" in s.get("profiles", [])}
    assert profiled == {"prometheus", "grafana", "jaeger"}
    for name in profiled:
        service = services[name]
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port}"
    assert "--web.listen-address=127.0.0.1:9090" in services["prometheus"]["command"]
    assert services["grafana"]["environment"]["GF_SERVER_HTTP_ADDR"] == "127.0.0.1"
