"""The Anthropic adapter stands alone: the domain and the anthropic client, nothing of the server.

The ``tests_model_anthropic`` nox session installs ``workload-model-anthropic`` (and the domain)
only and sets ``WORKLOAD_ONLY_PACKAGE=model-anthropic``; there the environment itself must hold
no other Workload package — not even the OpenAI adapter. Everywhere, importing the adapter must
load none of them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

OTHER_MODULES = (
    "workload_engine",
    "workload_store_postgres",
    "workload_api",
    "workload_cli",
    "workload_sdk",
    "workload_worker",
    "workload_model_openai",
    "openai",
    "psycopg",
    "psycopg_pool",
    "starlette",
    "uvicorn",
    "dependency_injector",
)


def test_importing_the_adapter_loads_only_the_domain_and_the_client() -> None:
    code = (
        "import json, sys, workload_model_anthropic; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout))
    assert {"workload_model_anthropic", "workload_domain", "anthropic"} <= loaded
    assert loaded.isdisjoint(OTHER_MODULES), loaded & set(OTHER_MODULES)


def test_the_adapter_alone_needs_no_other_package_installed() -> None:
    present = {m for m in OTHER_MODULES if importlib.util.find_spec(m) is not None}
    if os.environ.get("WORKLOAD_ONLY_PACKAGE") == "model-anthropic":
        assert present == set(), present  # in its own session: only the domain came along
    else:
        assert importlib.util.find_spec("workload_model_anthropic") is not None
        assert {"workload_api", "workload_model_openai"} <= present
