"""``workload serve`` refuses model endpoints it cannot use: exit 2 at start-up, naming why.

Real processes (SPEC §7: 2 for usage or configuration). Each starts with a database URL no
server listens on: the endpoints are checked before anything connects, so each exits 2 at
once, and a configuration that passed would fail differently (5, the database).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_serve_errors import _serve

KEY = "sk-serve-Hn27RecognizableKey-5Tz8"
NOWHERE = "postgresql://workload@127.0.0.1:1/workload"


def _endpoints(**entry: object) -> str:
    return json.dumps({"local": {"provider": "openai", "base_url": "http://h/v1", **entry}})


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        pytest.param('{"local": ', "WORKLOAD_MODEL_ENDPOINTS is not valid JSON", id="bad-json"),
        pytest.param("[1]", "must be a JSON (or TOML) object", id="not-object"),
        pytest.param('{"Bad": {}}', "endpoint name 'Bad' must match", id="bad-name"),
        pytest.param(
            '{"local": {"provider": "bard"}}', "provider must be one of", id="unknown-provider"
        ),
        pytest.param(_endpoints(api_key=KEY), "unknown field(s) 'api_key'", id="unknown-key"),
        pytest.param(
            _endpoints(api_key_env="WORKLOAD_TEST_UNSET_KEY"),
            "its key variable WORKLOAD_TEST_UNSET_KEY is not set",
            id="key-unset",
        ),
        pytest.param("@/nonexistent/endpoints.toml", "cannot read", id="missing-file"),
    ],
)
def test_serve_exits_2_naming_the_problem(tmp_path: Path, value: str, complaint: str) -> None:
    done = _serve(
        tmp_path,
        "--database-url",
        NOWHERE,
        env={"WORKLOAD_MODEL_ENDPOINTS": value, "OTHER_KEY": KEY},
    )
    assert done.returncode == 2, done.stderr
    assert "error: invalid model endpoints" in done.stderr
    assert complaint in done.stderr
    assert "Traceback" not in done.stderr
    assert KEY not in done.stderr + done.stdout


def test_a_malformed_toml_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "endpoints.toml"
    path.write_text(f'[local]\nprovider = "openai"\nkey = {KEY}\n', encoding="utf-8")
    done = _serve(tmp_path, "--database-url", NOWHERE, env={"WORKLOAD_MODEL_ENDPOINTS": f"@{path}"})
    assert done.returncode == 2, done.stderr
    assert "is not valid TOML" in done.stderr
    assert KEY not in done.stderr


def test_openai_defined_twice_is_refused(tmp_path: Path) -> None:
    done = _serve(
        tmp_path,
        "--database-url",
        NOWHERE,
        env={
            "WORKLOAD_MODEL_ENDPOINTS": json.dumps(
                {"openai": {"provider": "openai", "base_url": "http://a/v1"}}
            ),
            "WORKLOAD_OPENAI_BASE_URL": "http://b/v1",
            "WORKLOAD_OPENAI_API_KEY": KEY,
        },
    )
    assert done.returncode == 2, done.stderr
    assert "the endpoint 'openai' is defined twice" in done.stderr
    assert KEY not in done.stderr
