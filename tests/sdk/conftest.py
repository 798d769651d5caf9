"""Fixtures of the SDK's tests: a blocking client over the fake API of :mod:`tests.sdk.fakes`."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.sdk.counting_server import CountingServer, serving
from tests.sdk.fakes import BASE, FakeApi
from workload_sdk import Client


@pytest.fixture
def api() -> FakeApi:
    """The fake API, answering every operation with a canned resource."""
    return FakeApi()


@pytest.fixture
def client(api: FakeApi) -> Client:
    """A client of the fake API with the token ``tok``."""
    return Client(base_url=BASE, token="tok", transport=api.transport)


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy in the environment (httpx would route the clients' requests through it)."""
    for name in list(os.environ):
        if name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)


@pytest.fixture
def server() -> Iterator[CountingServer]:
    """A real HTTP server on 127.0.0.1 that counts connections and holds each GET's answer."""
    with serving(CountingServer()) as served:
        yield served
