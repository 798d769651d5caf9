"""The SDK's blocking modules are derived from their async sources (ADR 0035), never edited.

``packages/sdk/sync_twins.py`` rewrites each ``_async_*.py`` it lists into its blocking twin;
the build hook runs it on every build (``uv sync`` included) and the derived files are not
tracked. Here: what is on disk is what the sources derive (an async source edited without
deriving again fails, saying the command to run), the derived files are ignored and untracked,
and the rewrite itself does what the ADR says, to the letter.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "packages" / "sdk"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sync_twins", PROJECT / "sync_twins.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


twins = _load()
PACKAGE: Path = PROJECT / twins.PACKAGE
DERIVED = sorted(PACKAGE / twins.twin(source) for source in twins.SOURCES)


def derive(source: str) -> str:
    text: str = twins.derive(textwrap.dedent(source))
    return text


def test_every_derived_module_on_disk_is_what_its_async_source_derives() -> None:
    stale = [
        path.name
        for path, text in twins.derived(PROJECT).items()
        if not path.exists() or path.read_text(encoding="utf-8") != text
    ]
    assert stale == [], (
        f"{', '.join(stale)} differ from what their async sources derive: an async source was "
        "edited without deriving again. Run `uv run python packages/sdk/sync_twins.py` (or "
        "`uv sync --all-packages --reinstall-package workload-sdk`); never edit a derived file"
    )


def test_a_twin_is_named_as_its_source_with_async_read_away() -> None:
    assert twins.twin("_async_run_task_resources.py") == "_run_task_resources.py"
    assert twins.twin("_async_sender.py") == "_sender.py"
    assert [path.name for path in DERIVED] == [
        "_approval_resources.py",
        "_client.py",
        "_pagination.py",
        "_resources.py",
        "_run_resources.py",
        "_run_task_resources.py",
        "_sender.py",
        "_worker_resources.py",
    ]


def test_every_async_module_of_the_sdk_is_a_source_of_a_twin() -> None:
    sources = sorted(path.name for path in PACKAGE.glob("_async_*.py"))
    assert sources == sorted(twins.SOURCES)
    assert len(DERIVED) == len(set(DERIVED)) == 8


def test_the_derived_modules_are_ignored_and_not_tracked_by_git() -> None:
    names = [str(path.relative_to(ROOT)) for path in DERIVED]
    tracked = subprocess.run(
        ["git", "ls-files", "--", *names], cwd=ROOT, capture_output=True, check=True, text=True
    ).stdout.split()
    assert tracked == []
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", "--", *names],
        cwd=ROOT,
        capture_output=True,
        check=True,
        text=True,
    ).stdout.split()
    assert ignored == names
    sources = [str(PACKAGE.relative_to(ROOT) / name) for name in sorted(twins.SOURCES)]
    assert subprocess.run(
        ["git", "ls-files", "--", *sources], cwd=ROOT, capture_output=True, check=True, text=True
    ).stdout.split() == sorted(sources)


def test_each_derived_module_says_where_it_comes_from() -> None:
    for source in twins.SOURCES:
        head = (PACKAGE / twins.twin(source)).read_text(encoding="utf-8").splitlines()[:2]
        assert f"Derived from {source}" in head[0]
        assert "uv run python packages/sdk/sync_twins.py" in head[1]


def test_async_and_await_go_and_the_space_after_them() -> None:
    source = """\
        async def get(self) -> int:
            value = (await self._fetch()).count
            async with self._sender.stream(x) as response:
                async for line in response.aiter_lines():
                    await asyncio.sleep(1)
            return await self.send(value)
    """
    assert derive(source) == textwrap.dedent("""\
        def get(self) -> int:
            value = (self._fetch()).count
            with self._sender.stream(x) as response:
                for line in response.iter_lines():
                    time.sleep(1)
            return self.send(value)
    """)


def test_the_names_become_their_blocking_twins_in_code() -> None:
    source = """\
        import asyncio
        from contextlib import asynccontextmanager
        from workload_sdk._async_sender import AsyncSender
        from workload_sdk.pagination import AsyncPager
        class AsyncRuns(AsyncRunTasks):
            def __init__(self, http: httpx.AsyncClient, t: httpx.AsyncBaseTransport) -> None: ...
            async def __aenter__(self) -> AsyncClient: ...
            async def __aexit__(self) -> None:
                await self._http.aclose()
                await response.aread()
    """
    assert derive(source) == textwrap.dedent("""\
        import time
        from contextlib import contextmanager
        from workload_sdk._sender import SyncSender
        from workload_sdk.pagination import Pager
        class Runs(RunTasks):
            def __init__(self, http: httpx.Client, t: httpx.BaseTransport) -> None: ...
            def __enter__(self) -> Client: ...
            def __exit__(self) -> None:
                self._http.close()
                response.read()
    """)


def test_an_async_iterator_becomes_an_iterator() -> None:
    source = """\
        class AsyncPager(AsyncIterator[T]):
            def __init__(self, fetch: AsyncFetch[T]) -> None: ...
            def __aiter__(self) -> AsyncPager[T]:
                return self
            async def __anext__(self) -> T:
                raise StopAsyncIteration
            async def to_list(self) -> list[T]:
                return [item async for item in self]
    """
    assert derive(source) == textwrap.dedent("""\
        class Pager(Iterator[T]):
            def __init__(self, fetch: Fetch[T]) -> None: ...
            def __iter__(self) -> Pager[T]:
                return self
            def __next__(self) -> T:
                raise StopIteration
            def to_list(self) -> list[T]:
                return [item for item in self]
    """)


def test_docstrings_strings_and_comments_are_rewritten_with_the_same_names() -> None:
    source = '''\
        """Both clients' runs: see :class:`~workload_sdk._async_run_resources.AsyncRuns`.

        Example:
            >>> async with AsyncClient() as client:
            ...     run = await client.runs.get("r")
            ...     async for event in client.runs.events(run.run_id):
            ...         print(event)
        """
        # the twin of AsyncPager; awaited calls, an asyncio.sleep
        NAME = f"AsyncClient(base_url={url!r})"
        OTHER = "AsyncRuns"
    '''
    assert derive(source) == textwrap.dedent('''\
        """Both clients' runs: see :class:`~workload_sdk._run_resources.Runs`.

        Example:
            >>> with Client() as client:
            ...     run = client.runs.get("r")
            ...     for event in client.runs.events(run.run_id):
            ...         print(event)
        """
        # the twin of Pager; awaited calls, an time.sleep
        NAME = f"Client(base_url={url!r})"
        OTHER = "Runs"
    ''')


def test_prose_words_that_are_not_names_of_the_map_are_left_as_they_are() -> None:
    source = """\
        AsyncX = AsyncY = 1  # Asynchronous, Asyncio, asynchronous, awaiting, _asyncish
        # ruff: noqa: ASYNC109
    """
    assert derive(source) == textwrap.dedent("""\
        X = Y = 1  # Asynchronous, Asyncio, asynchronous, awaiting, _asyncish
        # ruff: noqa: ASYNC109
    """)


@pytest.mark.parametrize(
    "source",
    [
        "await asyncio.gather(a, b)\nx = aiter_bytes\n",  # aiter_bytes: no rename
        "x = inspect.iscoroutinefunction(f) or is_async\n",
        "class C:\n    def __await__(self): ...\n",
        "asynchronous = awaiting = 1\n",
        "y = response.areadlines()\n",
    ],
)
def test_a_name_left_async_fails_the_derivation(source: str) -> None:
    with pytest.raises(ValueError, match="still names"):
        twins.derive(source, "module.py")


def test_a_derivation_that_fails_names_the_module_and_the_names() -> None:
    with pytest.raises(ValueError, match="still names") as raised:
        twins.derive("x = response.aiter_raw()\ny = awaitable\n", "_async_things.py")
    assert str(raised.value) == (
        "_async_things.py: the derived module still names aiter_raw, awaitable"
    )


@pytest.mark.parametrize(
    "source",
    ["", "\n", "x = 1", "x = '''\nawait\n'''\n", "def f():\n    return 1\n"],
    ids=["empty", "newline", "no-newline", "multi-line-string", "plain"],
)
def test_source_without_async_derives_unchanged_but_for_prose(source: str) -> None:
    expected = source.replace("await\n", "")
    assert twins.derive(source) == expected


def test_write_writes_only_what_changed(tmp_path: Path) -> None:
    package = tmp_path / twins.PACKAGE
    package.mkdir(parents=True)
    for source in twins.SOURCES:
        (package / source).write_text("async def f() -> None:\n    await g()\n")
    written = twins.write(tmp_path)
    assert written == sorted(package / twins.twin(source) for source in twins.SOURCES)
    client, sender = package / "_client.py", package / "_sender.py"
    text = client.read_text()
    assert text.endswith("def f() -> None:\n    g()\n")
    assert text.startswith("# Derived from _async_client.py")
    for path in written:
        os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    (package / "_async_sender.py").write_text("async def h() -> None: ...\n")
    twins.write(tmp_path)
    assert client.stat().st_mtime_ns == 1_000_000_000  # the same text: not written again
    assert sender.read_text().endswith("\ndef h() -> None: ...\n")
    assert sender.stat().st_mtime_ns != 1_000_000_000
