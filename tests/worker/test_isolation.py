"""The worker SDK stands alone: installed with the SDK only, nothing of the server comes along.

The ``tests_worker`` nox session installs ``workload-sdk`` and ``workload-worker`` only and sets
``WORKLOAD_ONLY_PACKAGE=worker``; there the environment itself must hold no server package.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

from tests.sdk.test_isolation import SERVER_MODULES


def test_importing_the_worker_loads_only_the_sdk_and_anyio() -> None:
    code = (
        "import json, sys, workload_worker; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout))
    assert {"workload_worker", "workload_sdk", "anyio"} <= loaded
    assert loaded.isdisjoint(SERVER_MODULES), loaded & set(SERVER_MODULES)


def test_the_worker_alone_needs_no_server_package_installed() -> None:
    present = {m for m in SERVER_MODULES if importlib.util.find_spec(m) is not None}
    if os.environ.get("WORKLOAD_ONLY_PACKAGE") == "worker":
        assert present == set(), present  # in its own session: only the SDK came along
    else:
        assert importlib.util.find_spec("workload_worker") is not None
        assert "workload_api" in present
