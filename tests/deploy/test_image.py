"""The image, built from the Dockerfile and run (SPEC §18; the ``packaging`` session).

Needs podman, runc and mmdebstrap (Debian packages, which ``.ci/run`` installs); without one of
them the tests skip, naming it. What this machine taught (ADR 0019 says more):

- No image registry is reachable, so the Dockerfile's two base images are replaced through its
  build arguments: ``PYTHON_IMAGE`` by Debian bookworm with its Python 3.11 (``mmdebstrap``
  from Debian's packages, imported into podman once and kept under a tag naming its contents),
  ``UV_IMAGE`` by an image holding the ``uv`` binary of the session (the same version as the
  Dockerfile's). Every instruction of the Dockerfile runs as written.
- podman runs with runc (crun refuses this machine's hybrid cgroup hierarchy) and with explicit
  ``nofile``/``nproc`` limits (raising them to podman's defaults is refused here), through a
  private ``containers.conf``. The build sees the host's CA bundle, which trusts this machine's
  TLS-intercepting egress proxy; the Dockerfile trusts the base image's CA store for that.
- ``--format docker``: the OCI image format has no HEALTHCHECK. podman runs health checks on
  systemd timers, absent here: ``podman healthcheck run`` runs the image's check once instead.

A PostgreSQL 15 container from Debian's packages stands in for the compose file's, in a pod with
the migration, the service and a worker, all from the image, as compose and Kubernetes run them.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import secrets
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.release import ROOT, release_version
from tests.waiting import wait_until

pytestmark = [pytest.mark.packaging, pytest.mark.timeout(1200)]

PYTHON_BASE = ("python3", "passwd", "ca-certificates")
POSTGRES_BASE = ("postgresql-15",)
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
DATABASE_URL = "postgresql://workload@127.0.0.1:5432/workload"
EXAMPLE_WORKER = "workload_worker.examples.textstats:worker"


class Podman:
    """podman with this test's configuration; every container it names is removed after."""

    def __init__(self, config: Path) -> None:
        self.env = {**os.environ, "CONTAINERS_CONF": str(config)}

    def __call__(
        self, *args: str, timeout: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["podman", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check:
            assert done.returncode == 0, f"podman {' '.join(args)}:\n{done.stdout}{done.stderr}"
        return done

    def exit_code(self, container: str) -> int:
        return int(self("inspect", container, "--format", "{{.State.ExitCode}}").stdout)


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Podman:
    missing = [tool for tool in ("podman", "runc", "mmdebstrap") if shutil.which(tool) is None]
    if missing:
        pytest.skip(
            f"{', '.join(missing)} not installed (Debian packages; .ci/run installs them): "
            "the image was neither built nor run here"
        )
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nofile = hard if 0 < hard < 65536 else 65536
    limits = f'"nofile={nofile}:{nofile}", "nproc=8192:8192"'
    config = tmp_path_factory.mktemp("podman") / "containers.conf"
    config.write_text(
        f'[containers]\ndefault_ulimits = [{limits}]\n\n[engine]\nruntime = "runc"\n',
        encoding="utf-8",
    )
    return Podman(config)


def _debian_image(podman: Podman, name: str, packages: tuple[str, ...]) -> str:
    """A Debian bookworm image with ``packages``, made once per machine (its tag names them)."""
    tag = (
        f"localhost/{name}:bookworm-{hashlib.sha256(' '.join(packages).encode()).hexdigest()[:12]}"
    )
    if podman("image", "exists", tag, check=False).returncode == 0:
        return tag
    include = ",".join(packages)
    rootfs = subprocess.Popen(
        ["mmdebstrap", "--quiet", "--variant=minbase", f"--include={include}", "bookworm", "-"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        imported = subprocess.run(
            ["podman", "import", "-", tag],
            stdin=rootfs.stdout,
            env=podman.env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    finally:
        assert rootfs.stdout is not None
        rootfs.stdout.close()
        errors = rootfs.communicate(timeout=600)[1]
    assert rootfs.returncode == 0, errors.decode(errors="replace")
    assert imported.returncode == 0, imported.stderr
    return tag


def _uv_image(podman: Podman, context: Path) -> str:
    """An image holding the session's uv binary at ``/uv``, as ghcr.io/astral-sh/uv does."""
    declared = _build_arg("UV_IMAGE").rsplit(":", 1)[1]
    found = shutil.which("uv", path=str(Path(sys.executable).parent))  # the session's uv wheel
    assert found is not None, "the packaging session installs uv beside its Python"
    binary = Path(found)
    version = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, check=True, timeout=30
    )
    assert version.stdout.split()[1] == declared, (version.stdout, declared)
    shutil.copy2(binary, context / "uv")
    (context / "Containerfile").write_text("FROM scratch\nCOPY uv /uv\n", encoding="utf-8")
    tag = f"localhost/workload-test-uv:{declared}"
    podman("build", "--quiet", "--tag", tag, str(context))
    return tag


def _build_arg(name: str) -> str:
    for line in (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines():
        if line.startswith(f"ARG {name}="):
            return line.split("=", 1)[1]
    raise AssertionError(f"the Dockerfile has no ARG {name}")


@pytest.fixture(scope="module")
def image(podman: Podman, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The Dockerfile built (every instruction as written) over this machine's stand-in bases."""
    python = _debian_image(podman, "workload-test-python", PYTHON_BASE)
    uv = _uv_image(podman, tmp_path_factory.mktemp("uv-image"))
    tag = f"localhost/workload:test-{secrets.token_hex(4)}"
    trust = ["--volume", f"{HOST_CA}:{HOST_CA}:ro"] if HOST_CA.exists() else []
    podman(
        "build",
        "--format=docker",
        "--layers=false",
        "--tag",
        tag,
        "--build-arg",
        f"PYTHON_IMAGE={python}",
        "--build-arg",
        f"UV_IMAGE={uv}",
        *trust,
        str(ROOT),
        timeout=900,
    )
    try:
        yield tag
    finally:
        podman("rmi", "--force", tag, check=False)
        podman("rmi", "--force", uv, check=False)


@pytest.fixture(scope="module")
def postgres_image(podman: Podman) -> str:
    return _debian_image(podman, "workload-test-postgres", POSTGRES_BASE)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _get(url: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=3) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except (urllib.error.URLError, OSError):
        return 0, b""


def test_image_runs_unprivileged_and_reports_its_versions(podman: Podman, image: str) -> None:
    version = podman("run", "--rm", "--no-healthcheck", image, "workload", "--version")
    lines = version.stdout.splitlines()
    # Every package of the workspace is in the image (nine, with the Anthropic adapter).
    packages = sorted(p.name for p in (Path(__file__).parents[2] / "packages").iterdir())
    assert sorted(line.split()[0] for line in lines) == [f"workload-{p}" for p in packages]
    assert lines[0] == f"workload-cli {release_version()}"
    assert all(line.endswith(f" {release_version()}") for line in lines)
    uid = podman("run", "--rm", "--no-healthcheck", image, "id", "-u").stdout.strip()
    assert uid == "10001"
    (inspected,) = json.loads(podman("image", "inspect", image).stdout)
    config = inspected["Config"]
    assert config["User"] == "10001:10001"
    assert config["Cmd"] == ["workload", "serve", "--host", "0.0.0.0"]
    assert "/readyz" in " ".join(inspected["Healthcheck"]["Test"])  # the docker format's
    assert config["Labels"]["org.opencontainers.image.version"] == release_version()
    # Nothing from the build stage: no source tree, no uv.
    podman("run", "--rm", "--no-healthcheck", image, "sh", "-c", "! test -e /src && ! which uv")


def test_image_serves_against_postgresql(podman: Podman, image: str, postgres_image: str) -> None:
    """A pod as compose runs it: PostgreSQL, the migration, the service and a worker."""
    pod, port = f"workload-test-{secrets.token_hex(4)}", _free_port()
    operator, worker_token = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    podman("pod", "create", "--name", pod, "--publish", f"127.0.0.1:{port}:8080")
    try:
        initdb = (
            "export PATH=/usr/lib/postgresql/15/bin:$PATH"
            " && initdb -D /tmp/pg -U workload --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null"
            " && exec postgres -D /tmp/pg -c listen_addresses=127.0.0.1 -k /tmp"
        )
        podman(
            "run",
            "-d",
            "--pod",
            pod,
            "--name",
            f"{pod}-pg",
            "--user",
            "postgres",
            postgres_image,
            "sh",
            "-c",
            initdb,
        )
        isready = ["exec", f"{pod}-pg", "/usr/lib/postgresql/15/bin/pg_isready", "-h", "127.0.0.1"]
        wait_until(lambda: podman(*isready, check=False).returncode == 0, timeout=60, interval=0.3)
        podman(
            "exec",
            f"{pod}-pg",
            "/usr/lib/postgresql/15/bin/createdb",
            "-h",
            "127.0.0.1",
            "-U",
            "workload",
            "workload",
        )

        # As Kubernetes runs them (deploy/kubernetes): a read-only root, the database URL from
        # the environment; the servers' init container waits on `migrate status` (exit 4 while
        # behind, 0 once the migration Job has run).
        base = ["run", "--pod", pod, "--no-healthcheck", "--read-only"]
        database = ["-e", f"WORKLOAD_DATABASE_URL={DATABASE_URL}"]
        status = [*base, "--rm", *database, image, "workload", "migrate", "status"]
        assert podman(*status, check=False).returncode == 4
        migrated = podman(*base, "--rm", *database, image, "workload", "migrate", "up")
        assert "applied 0001_initial" in migrated.stdout + migrated.stderr
        podman(*status)
        podman(
            "run",
            "-d",
            "--read-only",
            "--pod",
            pod,
            "--name",
            f"{pod}-serve",
            "-e",
            f"WORKLOAD_DATABASE_URL={DATABASE_URL}",
            "-e",
            f"WORKLOAD_OPERATOR_TOKENS={operator}",
            "-e",
            f"WORKLOAD_WORKER_TOKENS={worker_token}",
            image,
        )
        client = ["-e", "WORKLOAD_URL=http://127.0.0.1:8080"]
        podman(
            *base,
            "-d",
            "--name",
            f"{pod}-worker",
            *client,
            "-e",
            f"WORKLOAD_WORKER_TOKEN={worker_token}",
            image,
            "workload",
            "worker",
            EXAMPLE_WORKER,
        )

        readyz = f"http://127.0.0.1:{port}/readyz"
        wait_until(
            lambda: _get(readyz)[0] == 200,
            timeout=90,
            interval=0.3,
            message=lambda: str(podman("logs", f"{pod}-serve", check=False))[-4000:],
        )
        assert json.loads(_get(readyz)[1])["role"] == "leader"
        podman("healthcheck", "run", f"{pod}-serve")  # the image's HEALTHCHECK passes

        def workers() -> list[dict[str, object]]:
            code, body = _get(f"http://127.0.0.1:{port}/api/v1/workers", operator)
            items: list[dict[str, object]] = json.loads(body)["items"] if code == 200 else []
            return items

        (seen,) = wait_until(workers, timeout=30, interval=0.3)
        assert (seen["status"], "text_stats" in str(seen["actions"])) == ("active", True)

        demo = podman(
            *base,
            "--rm",
            *client,
            "-e",
            f"WORKLOAD_TOKEN={operator}",
            "-e",
            f"WORKLOAD_WORKER_TOKEN={worker_token}",
            image,
            "workload",
            "--output",
            "json",
            "demo",
            timeout=180,
        )
        assert json.loads(demo.stdout)["status"] == "succeeded", demo.stderr

        podman("stop", "--time", "30", f"{pod}-serve", f"{pod}-worker", timeout=90)
        served = podman("logs", f"{pod}-serve")
        logs = served.stdout + served.stderr
        assert podman.exit_code(f"{pod}-serve") == 0, logs[-4000:]
        assert "stopping on SIGTERM" in logs
        assert podman.exit_code(f"{pod}-worker") == 0
    finally:
        podman("pod", "rm", "--force", pod, check=False, timeout=120)


def test_image_default_command_serves_with_an_embedded_postgresql(
    podman: Podman, image: str
) -> None:
    """``docker run IMAGE`` with nothing else: development mode, as the non-root user."""
    name, port = f"workload-test-{secrets.token_hex(4)}", _free_port()
    podman("run", "-d", "--name", name, "--publish", f"127.0.0.1:{port}:8080", image)
    try:
        wait_until(
            lambda: _get(f"http://127.0.0.1:{port}/readyz")[0] == 200,
            timeout=120,
            interval=0.3,
            message=lambda: str(podman("logs", name, check=False))[-4000:],
        )
        podman("healthcheck", "run", name)
        podman("stop", "--time", "30", name, timeout=90)
        logs = podman("logs", name)
        assert podman.exit_code(name) == 0, logs.stderr[-4000:]
        assert "data directory: /var/lib/workload/data" in logs.stdout + logs.stderr
    finally:
        podman("rm", "--force", name, check=False)
