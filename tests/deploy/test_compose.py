"""compose.yaml's `app` profile (SPEC §18): the service from the image, as replicas (SPEC §16).

Validated by Debian's ``docker-compose`` (1.29: ``config`` checks the file against the Compose
schema without a Docker engine; ``.ci/run`` installs it), then its invariants asserted on the
YAML: a one-shot migration before two ``--replica`` services, a worker of the shipped example
that holds no database URL and no other role's token, everything on the loopback, Prometheus
pointed at both replicas.
"""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.release import ROOT
from workload_worker import Worker

COMPOSE = ROOT / "compose.yaml"
APP = {"migrate", "replica-1", "replica-2", "worker"}
_FROM_ENV = re.compile(r"^\$\{(WORKLOAD_[A-Z_]+):-[^}]+\}$")


def services() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))[
        "services"
    ]
    return found


def _compose_config(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    validator = shutil.which("docker-compose")
    if validator is None:
        pytest.skip(
            "docker-compose is not installed (Debian's docker-compose; .ci/run installs it): "
            "compose.yaml was not checked against the Compose schema here"
        )
    return subprocess.run(
        [validator, "--project-directory", str(directory), "--file", "compose.yaml", *args],
        cwd=directory,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_docker_compose_accepts_every_profile() -> None:
    profiles = ("--profile", "app", "--profile", "observability", "--profile", "ha")
    done = _compose_config(ROOT, *profiles, "config", "--quiet")
    assert done.returncode == 0, done.stderr
    listed = _compose_config(ROOT, *profiles, "config", "--services")
    assert set(listed.stdout.split()) >= APP | {"postgres", "prometheus"}


def test_docker_compose_refuses_a_broken_file(tmp_path: Path) -> None:
    """The validator validates: the same file with one service's key misspelt is refused."""
    broken = COMPOSE.read_text(encoding="utf-8").replace("    depends_on:", "    depend_on:", 1)
    (tmp_path / "compose.yaml").write_text(broken, encoding="utf-8")
    done = _compose_config(tmp_path, "--profile", "app", "config", "--quiet")
    assert done.returncode != 0
    assert "depend_on" in done.stderr


def test_the_app_profile_runs_the_image() -> None:
    app = {name: s for name, s in services().items() if "app" in s.get("profiles", [])}
    assert set(app) == APP
    images = {s["image"] for s in app.values()}
    assert len(images) == 1, images
    assert all(s["build"]["context"] == "." for s in app.values())


def test_migrations_run_once_before_the_replicas() -> None:
    found = services()
    migrate = found["migrate"]
    assert migrate["command"] == ["workload", "migrate", "up"]
    assert migrate["restart"] == "no"
    assert migrate["healthcheck"] == {"disable": True}
    assert migrate["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert set(migrate["environment"]) == {"WORKLOAD_DATABASE_URL"}
    assert "@postgres:5432/" in migrate["environment"]["WORKLOAD_DATABASE_URL"]
    for name in ("replica-1", "replica-2"):
        assert found[name]["depends_on"] == {
            "postgres": {"condition": "service_healthy"},
            "migrate": {"condition": "service_completed_successfully"},
        }


@pytest.mark.parametrize("name", ["replica-1", "replica-2"])
def test_replicas(name: str) -> None:
    replica = services()[name]
    assert replica["command"] == ["workload", "serve", "--host", "0.0.0.0", "--replica"]
    assert "healthcheck" not in replica  # the image's HEALTHCHECK on /readyz
    environment = replica["environment"]
    assert (
        environment["WORKLOAD_DATABASE_URL"]
        == services()["migrate"]["environment"]["WORKLOAD_DATABASE_URL"]
    )
    tokens = {k: v for k, v in environment.items() if k.endswith("_TOKENS")}
    assert set(tokens) == {
        "WORKLOAD_OPERATOR_TOKENS",
        "WORKLOAD_VIEWER_TOKENS",
        "WORKLOAD_WORKER_TOKENS",
    }
    assert all(_FROM_ENV.match(value) for value in tokens.values()), tokens
    assert replica["networks"]["default"]["aliases"] == ["workload"]
    (published,) = replica["ports"]
    assert re.fullmatch(r"127\.0\.0\.1:808[01]:8080", published)


def test_the_replicas_publish_distinct_ports_that_prometheus_scrapes() -> None:
    found = services()
    published = {found[name]["ports"][0].rsplit(":", 1)[0] for name in ("replica-1", "replica-2")}
    assert len(published) == 2
    config = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text("utf-8"))
    (job,) = config["scrape_configs"]
    targets = {t for group in job["static_configs"] for t in group["targets"]}
    assert published <= targets


def test_the_worker_runs_the_shipped_example_with_its_token_only() -> None:
    found = services()
    worker = found["worker"]
    program, command, target = worker["command"]
    assert (program, command) == ("workload", "worker")
    module, _, attribute = target.partition(":")
    assert isinstance(getattr(importlib.import_module(module), attribute), Worker)
    assert module.startswith("workload_worker.")  # shipped in a package, not a checkout
    environment = worker["environment"]
    assert set(environment) == {"WORKLOAD_URL", "WORKLOAD_WORKER_TOKEN"}
    assert environment["WORKLOAD_URL"] == "http://workload:8080"  # either replica
    # The token from the environment, the same variable the replicas accept it from.
    token = environment["WORKLOAD_WORKER_TOKEN"]
    assert _FROM_ENV.match(token)
    assert token == found["replica-1"]["environment"]["WORKLOAD_WORKER_TOKENS"]
    assert worker["healthcheck"] == {"disable": True}  # a worker serves no HTTP
    assert set(worker["depends_on"]) == {"replica-1", "replica-2"}


def test_every_published_port_is_on_the_loopback() -> None:
    for name, service in services().items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port}"
