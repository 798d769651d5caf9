"""The SDK stands alone: installed by itself, it imports, and nothing of the server comes along.

The ``tests_sdk`` nox session installs only ``workload-sdk`` (httpx + pydantic) and sets
``WORKLOAD_ONLY_PACKAGE=sdk``; there the environment itself must hold no server package. In the
full workspace the server packages are installed, so only what importing the SDK loads is checked.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

SERVER_MODULES = (
    "workload_domain",
    "workload_engine",
    "workload_store_postgres",
    "workload_api",
    "workload_cli",
    "psycopg",
    "psycopg_pool",
    "starlette",
    "uvicorn",
    "dependency_injector",
)


def test_importing_the_sdk_loads_only_httpx_and_pydantic() -> None:
    code = (
        "import json, sys, workload_sdk; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout))
    assert "workload_sdk" in loaded
    assert {"httpx", "pydantic"} <= loaded
    assert loaded.isdisjoint(SERVER_MODULES), loaded & set(SERVER_MODULES)


def test_the_sdk_alone_needs_no_server_package_installed() -> None:
    alone = os.environ.get("WORKLOAD_ONLY_PACKAGE") == "sdk"
    present = {m for m in SERVER_MODULES if importlib.util.find_spec(m) is not None}
    if alone:
        # In the SDK's own session: installing it brought nothing of the server.
        assert present == set(), present
    else:
        # In the full workspace the server is installed too; the SDK still imports.
        assert importlib.util.find_spec("workload_sdk") is not None
        assert "workload_api" in present
