"""The one call every adapter's model makes (``OneCallModel``), with a provider of test classes.

The real clients' errors are tested in each adapter's package against a fake server; here,
the mapping itself: which error becomes which failure, what propagates, what is chained.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from workload_domain.agent.adapters import (
    NOT_UNICODE,
    MalformedAnswer,
    OneCallModel,
    Provider,
    SharedClient,
)
from workload_domain.agent.llm import (
    Message,
    ModelFailure,
    ModelRejected,
    ModelRequest,
    ModelResponse,
    ModelUnavailable,
    Role,
)

KEY = "sk-Abcdefghijklmnop0123456789"


class _ClientError(Exception):
    pass


class _Timeout(_ClientError):
    pass


class _Connection(_ClientError):
    pass


class _Status(_ClientError):
    def __init__(self, status_code: int, message: object) -> None:
        super().__init__("status")
        self.status_code = status_code
        self.message = message


def _detail(error: _Status) -> object:
    return error.message


_PROVIDER = Provider("Test", "a test answer", _ClientError, _Timeout, _Connection, _Status, _detail)


@dataclass(frozen=True)
class _Settings:
    base_url: str = "http://user:pw@models.test:8080/v1?key=x"
    api_key: str = KEY
    timeout_seconds: float = 7.0


class _Client:
    def __init__(self, settings: _Settings) -> None:
        self.settings = settings
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1


class _Model(OneCallModel[_Client]):
    def __init__(
        self,
        model_name: str,
        *,
        base_url: str,
        api_key: str,
        timeout_seconds: float,
        client: _Client | None = None,
    ) -> None:
        settings = _Settings(base_url, api_key, timeout_seconds)
        super().__init__(model_name, settings, _PROVIDER, client=client, make_client=_Client)
        self.raises: BaseException | None = None
        self.calls = 0

    def _named(self) -> str:
        return f"test:{self.model_name}"

    async def _call(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self.raises is not None:
            raise self.raises
        return ModelResponse("hi", (), finish_reason="stop")


class _Models(SharedClient[_Client]):
    settings: _Settings

    def __init__(self) -> None:
        self.settings = _Settings()
        self._client = _Client(self.settings)


def _model(raises: BaseException | None = None) -> _Model:
    s = _Settings()
    model = _Model("m", base_url=s.base_url, api_key=s.api_key, timeout_seconds=7.0)
    model.raises = raises
    return model


def _request(model: str = "m") -> ModelRequest:
    return ModelRequest(model, (Message(Role.USER, "hello"),))


def _failure_of(error: BaseException) -> ModelFailure:
    model = _model(error)
    with pytest.raises(ModelFailure) as caught:
        asyncio.run(model.complete(_request()))
    assert model.calls == 1  # never repeated
    # Raised outside the handler: nothing of the client's error travels with it.
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None
    return caught.value


SERVER = "the model server at http://models.test:8080/v1"


@pytest.mark.parametrize(
    ("error", "kind", "message"),
    [
        (_Timeout(), ModelUnavailable, f"{SERVER} did not answer within 7 s"),
        (TimeoutError(), ModelUnavailable, f"{SERVER} did not answer within 7 s"),
        (_Connection(), ModelUnavailable, f"could not reach {SERVER}"),
        (_Status(503, f"down, {KEY}"), ModelUnavailable, f"{SERVER} failed (HTTP 503): down, ***"),
        (_Status(429, None), ModelUnavailable, f"{SERVER} is rate limiting (HTTP 429)"),
        (_Status(400, {"a": 1}), ModelRejected, f"{SERVER} rejected the request (HTTP 400)"),
        (_ClientError(KEY), ModelRejected, "the Test client failed (_ClientError)"),
        (
            MalformedAnswer("no"),
            ModelUnavailable,
            f"{SERVER} answered 200 without a test answer: no",
        ),
        (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogate"), ModelRejected, NOT_UNICODE),
    ],
    ids=lambda v: type(v).__name__,
)
def test_each_error_becomes_the_ports_failure_without_the_key(
    error: BaseException, kind: type[ModelFailure], message: str
) -> None:
    failure = _failure_of(error)
    assert type(failure) is kind
    assert str(failure) == message
    assert KEY not in str(failure)


@pytest.mark.parametrize("error", [ValueError("nan"), KeyError("x"), asyncio.CancelledError()])
def test_an_error_it_does_not_map_propagates_as_it_is(error: BaseException) -> None:
    model = _model(error)
    with pytest.raises(type(error)) as caught:
        asyncio.run(model.complete(_request()))
    assert caught.value is error


def test_an_answer_is_returned_and_a_request_for_another_model_never_sent() -> None:
    model = _model()
    assert asyncio.run(model.complete(_request())).content == "hi"
    with pytest.raises(ModelRejected, match=r"^a request for model 'other' was sent to test:m$"):
        asyncio.run(model.complete(_request("other")))
    assert model.calls == 1


def test_a_model_of_the_endpoint_shares_its_client_and_settings() -> None:
    async def scenario() -> None:
        async with _Models() as models:
            model = models._model(_Model, "m2")
            assert model._client is models._client
            assert model._settings == models.settings
            await model.aclose()
            assert models._client.closed == 0
        assert models._client.closed == 1
        own = _model()
        assert own._client.settings == _Settings()  # made by make_client, for its settings
        await own.aclose()
        assert own._client.closed == 1

    asyncio.run(scenario())
