"""Secrets in embedded mode (issue 33, finding E1; ADR 0024), with real processes.

The embedded PostgreSQL inherited the service's environment, so the model API key could be read
in its postmaster's ``/proc/<pid>/environ``; and the development tokens were printed at every
start. Now the postmaster starts with a cleaned environment, and the tokens are printed only by
the start that creates them (later starts name the file that holds them).
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.fault.conftest import Service, Services
from tests.fault.test_signals import postmaster_pid

MODEL_KEY = "sk-embedded-Qm4wZpKeyForTheModelOnly77"
OTHER_KEY = "other-secret-Vb93nKeyOfAnotherTool12"


def _output(service: Service) -> str:
    return service.stdout_path.read_text(errors="replace") + service.stderr()


def _stop(service: Service) -> None:
    service.signal(signal.SIGTERM)
    code = service.wait_exit(60)
    assert code == 0, f"exit code {code}\n{service.stderr_tail()}"


def test_the_embedded_postgres_sees_no_secret_and_tokens_print_once(
    services: Services, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    env = {
        "WORKLOAD_DATA_DIR": str(data_dir),
        "WORKLOAD_OPERATOR_TOKENS": "",  # none configured: development tokens are made
        "WORKLOAD_VIEWER_TOKENS": "",
        "WORKLOAD_WORKER_TOKENS": "",
        "WORKLOAD_OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "WORKLOAD_OPENAI_API_KEY": MODEL_KEY,
        "OTHER_TOOL_API_KEY": OTHER_KEY,
    }
    first = services.start(None, env=env)
    first.wait_ready(timeout=90)
    pid = postmaster_pid(data_dir)
    assert pid is not None
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    names = {entry.partition(b"=")[0].decode() for entry in environ if entry}
    assert "PATH" in names, names  # the read shows the postmaster's environment
    assert MODEL_KEY.encode() not in b"\0".join(environ)
    assert OTHER_KEY.encode() not in b"\0".join(environ)
    assert not [n for n in names if n.startswith("WORKLOAD_") or n.endswith("_API_KEY")], names

    stored = json.loads((data_dir / "credentials.json").read_text())
    tokens = [stored[k] for k in ("operator_token", "viewer_token", "worker_token")]
    assert all(token in _output(first) for token in tokens), first.stderr_tail()
    _stop(first)

    second = services.start(None, env=env)
    second.wait_ready(timeout=90)
    shown = _output(second)
    assert not [token for token in tokens if token in shown], second.stderr_tail()
    assert f"development tokens: in {data_dir / 'credentials.json'}" in shown, shown
    again = json.loads((data_dir / "credentials.json").read_text())
    assert [again[k] for k in ("operator_token", "viewer_token", "worker_token")] == tokens
    _stop(second)
