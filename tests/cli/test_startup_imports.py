"""``workload serve``'s own modules import none of what the service loads on first use.

The service's side (its wiring, ``/readyz``, the first console page) is
``tests/api/test_startup_imports.py``; this is the CLI's: the ``workload`` app and the server
commands, imported in a fresh interpreter as ``workload serve`` imports them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.api.test_startup_imports import DEFERRED


def test_the_serve_command_imports_nothing_deferred() -> None:
    code = f"""
import json, sys
import workload_cli.main, workload_cli._server
print(json.dumps(sorted(m for m in {DEFERRED!r} if m in sys.modules)))
"""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("WORKLOAD_", "OTEL_"))}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=clean,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []
