"""Browser fixtures: Playwright (Python) driving Debian's chromium, headless, never downloaded.

``.ci/run`` installs the ``chromium`` package with apt when it is missing. Each test gets fresh
browser profiles (a user-data-dir under its ``tmp_path``) and a ``shots`` folder under its
``tmp_path`` (the test's artifact folder) for the screenshots of the pages it visits. Model
calls go through a gate a test may close (to look at a draft while it is generating).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dependency_injector import providers
from playwright.sync_api import Page, expect, sync_playwright

from tests.console.helpers import GatedModels
from workload_api.container import Container

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TIMEOUT_MS = 20_000
"""Every Playwright action and expectation gives up after this long."""

OpenPage = Callable[[str], Page]


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where a test keeps its screenshots (its artifact folder)."""
    folder = tmp_path / "shots"
    folder.mkdir()
    return folder


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[OpenPage]:
    """Opens a page in a fresh Chromium profile (one per name: separate cookies)."""
    if not CHROMIUM.exists():
        reason = (
            f"Debian's chromium is not installed at {CHROMIUM} "
            "(.ci/run installs it: apt-get install chromium)"
        )
        if os.environ.get("CI"):
            pytest.fail(reason)
        print(reason)
        pytest.skip(reason)
    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as playwright:
        contexts = []

        def open_page(name: str) -> Page:
            context = playwright.chromium.launch_persistent_context(
                tmp_path / f"profile-{re.sub(r'[^a-z0-9-]', '-', name)}",
                executable_path=str(CHROMIUM),
                headless=True,
                args=CHROMIUM_ARGS,
                timeout=TIMEOUT_MS,
                viewport={"width": 1280, "height": 900},
            )
            context.set_default_timeout(TIMEOUT_MS)
            contexts.append(context)
            return context.pages[0] if context.pages else context.new_page()

        try:
            yield open_page
        finally:
            for context in contexts:
                context.close()


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Model calls wait while this is clear (open by default): see ``GatedModels``."""
    opened = threading.Event()
    opened.set()
    yield opened
    opened.set()  # after the service stopped: no thread is left waiting


@pytest.fixture
def api_overrides(gate: threading.Event) -> Callable[[Container], None]:
    """The console's services answer models through the gate."""

    def override(container: Container) -> None:
        container.models.override(providers.Object(GatedModels(gate)))

    return override
