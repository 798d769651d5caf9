"""``WORKLOAD_MODEL_ENDPOINTS`` read at start-up (SPEC §11, ADR 0027): what it accepts, what not.

Every refusal names the problem (the variable, the endpoint, the field) and never quotes a key:
the keys here are recognizable, and no message may contain one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import SecretStr

from workload_api.endpoints import (
    ENDPOINTS_VARIABLE,
    EndpointConfigError,
    ModelEndpoint,
    configured_endpoints,
    model_endpoints,
)
from workload_api.settings import Settings

KEY = "sk-endpoint-Xq7RecognizableKey-0042"
ENVIRON = {"LOCAL_KEY": KEY, "EMPTY_KEY": "   ", "BAD_KEY": "sk key with spaces"}


def read(
    raw: str | None,
    *,
    openai_base_url: str | None = None,
    openai_api_key: SecretStr | None = None,
) -> tuple[ModelEndpoint, ...]:
    return model_endpoints(
        raw,
        ENVIRON,
        openai_base_url=openai_base_url,
        openai_api_key=openai_api_key,
        installed=lambda _: True,
    )


def test_a_json_object_defines_named_endpoints_with_keys_from_their_variables() -> None:
    raw = json.dumps(
        {
            "local": {"provider": "openai", "base_url": "http://127.0.0.1:11434/v1"},
            "hosted": {
                "provider": "openai",
                "base_url": "https://api.example.com/v1",
                "api_key_env": "LOCAL_KEY",
            },
            "claude": {"provider": "anthropic", "api_key_env": "LOCAL_KEY"},
        }
    )
    local, hosted, claude = read(raw)
    assert local == ModelEndpoint("local", "openai", "http://127.0.0.1:11434/v1", None)
    assert (hosted.name, hosted.provider, hosted.base_url) == (
        "hosted",
        "openai",
        "https://api.example.com/v1",
    )
    assert hosted.api_key is not None
    assert hosted.api_key.get_secret_value() == KEY
    assert (claude.provider, claude.base_url) == ("anthropic", None)
    assert KEY not in repr((local, hosted, claude))


def test_the_section_11_variables_still_define_the_endpoint_openai() -> None:
    raw = json.dumps({"local": {"provider": "openai", "base_url": "http://127.0.0.1:1/v1"}})
    endpoints = read(raw, openai_base_url="http://127.0.0.1:2/v1", openai_api_key=SecretStr(KEY))
    assert [e.name for e in endpoints] == ["local", "openai"]
    openai = endpoints[1]
    assert openai.base_url == "http://127.0.0.1:2/v1"
    assert openai.api_key is not None
    assert openai.api_key.get_secret_value() == KEY
    # Alone, as before the amendment; and an empty key is no key (local servers need none).
    [alone] = read(None, openai_base_url="http://127.0.0.1:2/v1", openai_api_key=SecretStr(""))
    assert alone == ModelEndpoint("openai", "openai", "http://127.0.0.1:2/v1", None)


def test_an_openai_entry_is_the_endpoint_openai_when_the_variables_are_unset() -> None:
    raw = json.dumps({"openai": {"provider": "openai", "base_url": "http://127.0.0.1:3/v1"}})
    assert [e.base_url for e in read(raw)] == ["http://127.0.0.1:3/v1"]


@pytest.mark.parametrize("raw", [None, "", "   ", "{}"], ids=["unset", "empty", "blank", "none"])
def test_no_endpoints(raw: str | None) -> None:
    assert read(raw) == ()


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_a_file_holds_them_as_json_or_toml(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"endpoints{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps({"local": {"provider": "openai", "base_url": "http://h/v1"}}))
    else:
        path.write_text('[local]\nprovider = "openai"\nbase_url = "http://h/v1"\n')
    assert read(f"@{path}") == (ModelEndpoint("local", "openai", "http://h/v1", None),)


def _entry(**fields: object) -> str:
    return json.dumps({"local": {"provider": "openai", "base_url": "http://h/v1", **fields}})


@pytest.mark.parametrize(
    ("raw", "complaint"),
    [
        pytest.param("{", "is not valid JSON (line 1, column 2)", id="bad-json"),
        pytest.param("[]", "must be a JSON (or TOML) object", id="array"),
        pytest.param('"local"', "must be a JSON (or TOML) object", id="string"),
        pytest.param("null", "must be a JSON (or TOML) object", id="null"),
        pytest.param('{"a": {}, "a": {}}', "is not valid JSON: duplicate", id="duplicate-name"),
        pytest.param('{"Local": {}}', "endpoint name 'Local' must match", id="upper-case"),
        pytest.param('{"1st": {}}', "endpoint name '1st' must match", id="digit-first"),
        pytest.param('{"": {}}', "endpoint name '' must match", id="empty-name"),
        pytest.param(json.dumps({"a" * 33: {}}), "must match", id="name-too-long"),
        pytest.param('{"a:b": {}}', "endpoint name 'a:b' must match", id="colon"),
        pytest.param('{"mock": {"provider": "openai"}}', "'mock' is the mock model's", id="mock"),
        pytest.param('{"local": "openai"}', "endpoint 'local' must be an object", id="not-object"),
        pytest.param(
            '{"local": {"provider": "gemini"}}',
            "endpoint 'local': provider must be one of openai, anthropic",
            id="unknown-provider",
        ),
        pytest.param(
            '{"local": {"provider": "openai"}}',
            "an openai endpoint needs a base_url",
            id="openai-without-url",
        ),
        pytest.param(_entry(api_key=KEY), "unknown field(s) 'api_key'", id="key-pasted-in"),
        pytest.param(_entry(model="x"), "unknown field(s) 'model'", id="unknown-field"),
        pytest.param(_entry(base_url="ftp://h/v1"), "base_url must be an http", id="ftp"),
        pytest.param(_entry(base_url="127.0.0.1/v1"), "base_url must be an http", id="no-scheme"),
        pytest.param(_entry(base_url="http://h:99999/v1"), "base_url must be", id="bad-port"),
        pytest.param(_entry(base_url="http://h/v 1"), "spaces or control characters", id="space"),
        pytest.param(_entry(base_url=5), "base_url must be an http", id="number"),
        pytest.param(_entry(base_url="http://h/" + "a" * 2000), "base_url must", id="long"),
        pytest.param(_entry(api_key_env="NOT_SET"), "NOT_SET is not set", id="key-unset"),
        pytest.param(_entry(api_key_env="EMPTY_KEY"), "EMPTY_KEY is not set", id="key-empty"),
        pytest.param(_entry(api_key_env="BAD_KEY"), "must be printable ASCII", id="key-spaces"),
        pytest.param(_entry(api_key_env="A-B"), "an environment variable's name", id="bad-var"),
        pytest.param(_entry(api_key_env=1), "an environment variable's name", id="var-number"),
        pytest.param(
            json.dumps({f"e{i}": {"provider": "anthropic"} for i in range(65)}),
            "defines more than 64",
            id="too-many",
        ),
    ],
)
def test_a_malformed_configuration_is_refused_naming_the_problem(raw: str, complaint: str) -> None:
    with pytest.raises(EndpointConfigError) as caught:
        read(raw)
    assert complaint in str(caught.value)
    assert KEY not in str(caught.value)


def test_openai_defined_twice_is_refused() -> None:
    raw = json.dumps({"openai": {"provider": "openai", "base_url": "http://h/v1"}})
    with pytest.raises(EndpointConfigError, match="'openai' is defined twice"):
        read(raw, openai_base_url="http://other/v1")


@pytest.mark.parametrize(
    ("url", "key", "complaint"),
    [
        ("ftp://h/v1", None, "WORKLOAD_OPENAI_BASE_URL: base_url must be an http"),
        ("http://h/v1", "sk bad key", "WORKLOAD_OPENAI_API_KEY must be printable ASCII"),
    ],
    ids=["url", "key"],
)
def test_the_section_11_variables_are_checked_at_start_up(
    url: str, key: str | None, complaint: str
) -> None:
    with pytest.raises(EndpointConfigError, match=complaint):
        read(None, openai_base_url=url, openai_api_key=None if key is None else SecretStr(key))


def test_an_anthropic_endpoint_without_its_adapter_installed_is_refused() -> None:
    raw = json.dumps({"claude": {"provider": "anthropic", "api_key_env": "LOCAL_KEY"}})
    with pytest.raises(EndpointConfigError, match="install workload-model-anthropic"):
        model_endpoints(raw, ENVIRON, installed=lambda package: False)
    openai_only = _entry()  # no anthropic endpoint: the package is not asked for
    asked: list[str] = []

    def installed(package: str) -> bool:
        asked.append(package)
        return False

    model_endpoints(openai_only, ENVIRON, installed=installed)
    assert asked == []


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        (None, "cannot read"),
        (b"\xff\xfe", "is not UTF-8 text"),
        (b"{", "is not valid JSON"),
        (b"x" * ((1 << 20) + 1), "is larger than"),
    ],
    ids=["missing", "binary", "bad-json", "oversized"],
)
def test_an_unreadable_file_is_refused(
    tmp_path: Path, content: bytes | None, complaint: str
) -> None:
    path = tmp_path / "endpoints.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(EndpointConfigError, match=complaint) as caught:
        read(f"@{path}")
    assert ENDPOINTS_VARIABLE in str(caught.value)


def test_a_bad_toml_file_says_where(tmp_path: Path) -> None:
    path = tmp_path / "endpoints.toml"
    path.write_text(f'[local]\nprovider = "openai"\napi_key = {KEY}\n')
    with pytest.raises(EndpointConfigError, match="is not valid TOML") as caught:
        read(f"@{path}")
    assert "line 3" in str(caught.value)
    assert KEY not in str(caught.value)


def test_a_directory_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(EndpointConfigError, match="cannot read"):
        read(f"@{tmp_path}")


def test_the_service_reads_them_from_its_settings_and_the_environment() -> None:
    settings = Settings(
        model_endpoints=_entry(api_key_env="LOCAL_KEY"), openai_base_url="http://o/v1"
    )
    endpoints = configured_endpoints(settings, ENVIRON)
    assert [(e.name, e.base_url) for e in endpoints] == [
        ("local", "http://h/v1"),
        ("openai", "http://o/v1"),
    ]
    with pytest.raises(EndpointConfigError, match="LOCAL_KEY is not set"):
        configured_endpoints(settings, {})
