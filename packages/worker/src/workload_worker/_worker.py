"""The :class:`Worker`: declare actions, then claim and run their attempts until stopped.

One ``serve()`` is a claim loop and a task per claimed attempt (see
:mod:`workload_worker._attempt`). The loop claims as many attempts as the worker has free slots,
only of the actions it declares, and waits on the server (a long poll) when there is no work.
Connection errors and 5xx answers never stop it: it waits (jittered exponential backoff) and
claims again. Stopping (a signal, :meth:`Worker.stop`) cuts off a claim waiting on the server at
once and claims no more, lets running handlers finish within the grace period, then cancels
them and reports them ``worker_shutdown``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import logging
import os
import threading
from collections.abc import Callable, Sequence
from math import inf
from typing import Any, TypeVar

import anyio
import anyio.abc

from workload_sdk import APIResponseValidationError, AsyncClient, ClaimedAttempt, WorkloadError
from workload_sdk.config import WORKER_TOKEN_ENV
from workload_worker._apply import ApplyOnStart
from workload_worker._attempt import SYNC_HANDLER_THREADS, Action, AttemptRunner
from workload_worker._backoff import Backoff, claim_failed
from workload_worker._context import Context
from workload_worker._salvage import fail_unreadable, salvage
from workload_worker._serving import LINGERING_RECHECK_SECONDS, Serving
from workload_worker._settings import (
    ACTION,
    BUILT_IN_ACTIONS,
    MAX_ACTIONS,
    WORKER_ID,
    checked_queues,
    default_worker_id,
    non_negative,
)
from workload_worker._signals import RunSignals
from workload_worker._typed import typed_handler
from workload_worker._workflow import Workflow
from workload_worker.errors import WorkerConfigError
from workload_worker.mcp_tools import McpConnections, McpServer, McpServerLost, mcp_server

__all__ = ["Handler", "Worker"]

logger = logging.getLogger("workload.worker")

Handler = Callable[[Context, Any], Any]
"""A handler: ``(ctx, input) -> dict`` (or pydantic models), a function or a coroutine function."""
H = TypeVar("H", bound=Handler)

MAX_CLAIM = 100  # the API's bound on max_attempts


class Worker:
    """Claims attempts of the actions it declares and runs their handlers.

    Args:
        queues: The queues to take work from.
        concurrency: How many attempts run at once (claims ask for the free slots only).
        url: The server; default ``WORKLOAD_URL``, else ``http://127.0.0.1:8080``.
        token: A worker token (role ``worker``); default ``WORKLOAD_WORKER_TOKEN``.
        worker_id: This worker's id (``^[A-Za-z0-9._-]{1,128}$``); default ``<host>-<pid>``.
        grace_seconds: On stop, how long running handlers may take to finish before they are
            cancelled and reported ``worker_shutdown`` (retryable).
        wait_seconds: How long one claim waits on the server for work (0-50).
        client: An SDK client to use instead of one made from ``url`` and ``token`` (e.g. with
            a test transport); the worker does not close it.
        backoff_initial_seconds: The first wait after a connection error or a 5xx.
        backoff_max_seconds: The longest wait between tries (the wait doubles, jittered).
        workflows: Workflows built with :class:`Workflow`, applied with ``apply_on_start``.
        apply_on_start: Apply ``workflows`` as serving starts (with neither of the next two
            nor ``WORKLOAD_TOKEN``: a warning, no write; a worker token never writes).
        operator_token: The operator token to apply with; default ``WORKLOAD_TOKEN``.
        operator_client: An SDK client holding an operator token, to apply with.

    Raises:
        WorkerConfigError: an argument the API would refuse.

    Example:
        >>> worker = Worker(queues=["default"], concurrency=8)
        >>> @worker.action("resize")
        ... async def resize(ctx: Context, input: dict) -> dict:
        ...     return {"size": input["size"] // 2}
        >>> worker.actions
        ['resize']
    """

    def __init__(
        self,
        queues: Sequence[str] = ("default",),
        concurrency: int = 8,
        *,
        url: str | None = None,
        token: str | None = None,
        worker_id: str | None = None,
        grace_seconds: float = 30.0,
        wait_seconds: float = 20.0,
        client: AsyncClient | None = None,
        backoff_initial_seconds: float = 0.5,
        backoff_max_seconds: float = 30.0,
        workflows: Sequence[Workflow] = (),
        apply_on_start: bool = False,
        operator_token: str | None = None,
        operator_client: AsyncClient | None = None,
    ) -> None:
        self._actions: dict[str, Action] = {}
        self._mcp: list[McpServer] = []
        self._mcp_lost: McpServer | None = None
        self._apply = ApplyOnStart.of(workflows, apply_on_start, operator_token, operator_client)
        self.workflows = self._apply.workflows
        self.queues: list[str] = []
        self.concurrency = 1
        self.url: str | None = None
        self.token: str | None = None
        self.client: AsyncClient | None = None
        self.configure(queues=queues, concurrency=concurrency, url=url, token=token, client=client)
        chosen = worker_id or default_worker_id()
        if not WORKER_ID.fullmatch(chosen):
            raise WorkerConfigError(f"worker_id {chosen!r} does not match {WORKER_ID.pattern}")
        self.worker_id = chosen
        self.grace_seconds = non_negative("grace_seconds", grace_seconds)
        if not 0 <= wait_seconds <= 50:
            raise WorkerConfigError("wait_seconds must be between 0 and 50")
        self.wait_seconds = wait_seconds
        Backoff(backoff_initial_seconds, backoff_max_seconds)  # checks them
        self._backoff = (backoff_initial_seconds, backoff_max_seconds)
        self._serving: Serving | None = None
        self._run_signals: RunSignals | None = None

    def configure(
        self,
        *,
        queues: Sequence[str] | None = None,
        concurrency: int | None = None,
        url: str | None = None,
        token: str | None = None,
        client: AsyncClient | None = None,
        operator_token: str | None = None,
    ) -> None:
        """Change settings before serving (what ``workload worker`` overrides); None keeps one.

        ``operator_token`` is the token ``apply_on_start`` applies the workflows with (the
        constructor's ``operator_token``); the worker's own ``token`` never writes definitions.

        Raises:
            WorkerConfigError: a value the API would refuse.
        """
        if queues is not None:
            self.queues = checked_queues(queues)
        if concurrency is not None:
            if isinstance(concurrency, bool) or concurrency < 1:
                raise WorkerConfigError("concurrency must be at least 1")
            self.concurrency = concurrency
        self.url = url or self.url
        self.token = token or self.token
        self.client = client or self.client
        if operator_token:
            self._apply = dataclasses.replace(self._apply, token=operator_token)

    @property
    def is_serving(self) -> bool:
        """Whether :meth:`serve` is running."""
        return self._serving is not None

    @property
    def in_flight(self) -> int:
        """How many claimed attempts are running or being reported now."""
        return 0 if self._serving is None else len(self._serving.active)

    @property
    def actions(self) -> list[str]:
        """The declared actions, sorted (what claims ask for)."""
        return sorted(self._actions)

    @property
    def mcp_servers(self) -> list[McpServer]:
        """The MCP servers declared with :meth:`mcp`, in order."""
        return list(self._mcp)

    def action(self, name: str) -> Callable[[H], H]:
        """Declare the handler of an action (a decorator); the function is returned as is.

        A coroutine function runs on the worker's event loop; a plain function runs in a
        thread (one per slot), so blocking code is fine there. Either takes ``(ctx, input)``
        and returns the output, a JSON object (a ``dict``), or either may be a pydantic model.

        Raises:
            WorkerConfigError: a name the API refuses (1-128 of ``A-Z a-z 0-9 . _ : -``), a
                built-in (``mock``, ``agent``) or already declared one, or a 257th action.
        """
        if not isinstance(name, str) or not ACTION.fullmatch(name):
            raise WorkerConfigError(f"action {name!r} does not match {ACTION.pattern}")
        if name in BUILT_IN_ACTIONS:
            raise WorkerConfigError(f"{name!r} is built in: it runs inside the control plane")
        if name in self._actions:
            raise WorkerConfigError(f"action {name!r} is already declared")
        if len(self._actions) >= MAX_ACTIONS:
            raise WorkerConfigError(f"a worker declares at most {MAX_ACTIONS} actions")

        def register(handler: H) -> H:
            if not callable(handler):
                raise WorkerConfigError(f"the handler of {name!r} is not callable")
            is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
                getattr(handler, "__call__", None)  # noqa: B004 - an object whose __call__ is async
            )
            self._actions[name] = Action(name, typed_handler(handler, name, is_async), is_async)
            return handler

        return register

    def mcp(
        self, name: str, command: Sequence[str] | None = None, *, url: str | None = None
    ) -> None:
        """Serve the tools of an MCP server as actions ``mcp.NAME.TOOL`` (ADR 0029).

        ``command`` (program and arguments) runs a server over stdio; ``url`` connects to one
        over streamable HTTP. It starts with serving (a server that does not start makes
        :meth:`serve` raise :class:`WorkerConfigError`). Needs ``workload-worker[mcp]``.

        Raises:
            WorkerConfigError: a bad or repeated name, not one of command and url, no ``mcp``.
        """
        server = mcp_server(name, command, url)
        if any(known.name == server.name for known in self._mcp):
            raise WorkerConfigError(f"MCP server {name!r} is already declared")
        self._mcp.append(server)

    # -- running ------------------------------------------------------------------------------

    @property
    def handlers_left_running(self) -> int:
        """How many sync handlers of this process still run in their threads.

        After :meth:`run` returns, these are handlers that ignored their cancellation (a
        ``time.sleep`` cannot be interrupted): their attempts were reported, but the interpreter
        waits for their threads before it exits. ``workload worker`` exits without waiting.
        """
        return len(SYNC_HANDLER_THREADS)

    def run(self) -> None:
        """Serve until SIGTERM or SIGINT (Ctrl-C), then stop gracefully; blocks.

        A second signal stops at once (handlers are cancelled and reported ``worker_shutdown``);
        the first one again within ``SAME_SIGNAL_SECONDS`` (0.5 s) is the same signal delivered
        twice. Signals are handled only in the main thread, from the call until it returns (one that
        arrives before the worker serves stops it as soon as it starts; one after it stopped is
        logged); elsewhere use :meth:`stop`.

        Raises:
            WorkerConfigError: nothing to serve, or no token.
        """
        if threading.current_thread() is not threading.main_thread():
            # The SDK's async client sleeps with asyncio: the worker runs on asyncio.
            anyio.run(self.serve, backend="asyncio")
            return
        signals = RunSignals()
        with signals.installed():
            self._run_signals = signals
            try:
                anyio.run(self.serve, backend="asyncio")
            finally:
                self._run_signals = None

    async def serve(self, *, handle_signals: bool = False) -> None:
        """Claim and run attempts until :meth:`stop` (or a signal, with ``handle_signals``).

        Cancelling the task that awaits it tears the worker down at once: each running attempt
        is reported (its outcome if known, else ``worker_shutdown``) on a best-effort basis.

        Raises:
            WorkerConfigError: nothing to serve, no token, already serving, or an MCP server
                that did not start.
            McpServerLost: an MCP server's connection was lost, so the worker stopped.
        """
        if self._serving is not None:
            raise WorkerConfigError("this worker is already serving")
        if not self._actions and not self._mcp:
            raise WorkerConfigError("no action declared: use @worker.action(name) or worker.mcp")
        token = self.token or os.environ.get(WORKER_TOKEN_ENV)
        if self.client is None and not token:
            raise WorkerConfigError(
                f"no worker token: pass token= or set {WORKER_TOKEN_ENV} "
                "(one of the tokens in the server's WORKLOAD_WORKER_TOKENS)"
            )
        serving = self._serving = Serving(self.grace_seconds)
        served: dict[str, Action] | WorkerConfigError = {}
        self._mcp_lost = None
        try:
            async with contextlib.AsyncExitStack() as stack:
                await serving.route_signals(stack, handle_signals, self._run_signals)
                client = await self._client(stack, token)
                if self._mcp and not serving.draining.is_set():  # refused: raised below
                    lost = functools.partial(self._lost, serving)
                    connections = McpConnections(self._mcp, lost)
                    serving.on_stop = connections.abort_start
                    served = await connections.start(self._actions, stack)
                    serving.on_stop = None
                    if serving.draining.is_set():  # stopped while the servers started
                        served = {}
                if isinstance(served, dict) and not serving.draining.is_set():
                    self._actions.update(served)
                    await self._serve(client, serving)
        finally:
            for action in served if isinstance(served, dict) else ():
                del self._actions[action]
            self._serving = None
        if isinstance(served, WorkerConfigError):
            raise served
        if self._mcp_lost is not None:
            raise McpServerLost(f"{self._mcp_lost.describe()}: connection lost; the worker stopped")

    async def _client(self, stack: contextlib.AsyncExitStack, token: str | None) -> AsyncClient:
        if self.client is not None:
            return self.client
        # The worker retries on its own terms: the client sends each call once. Every slot may
        # have a report and a heartbeat in flight, besides the claim: a heartbeat never waits
        # for a connection behind reports.
        try:
            client = AsyncClient(
                base_url=self.url,
                token=token,
                max_retries=0,
                max_connections=2 * self.concurrency + 1,
            )
        except ValueError as exc:  # a token no header can carry
            raise WorkerConfigError(str(exc)) from None
        return await stack.enter_async_context(client)

    def _lost(self, serving: Serving, server: McpServer) -> None:
        """An MCP server's connection was lost: stop (in the loop), raise when stopped."""
        self._mcp_lost = server
        serving.stop(now=False)

    def stop(self, *, now: bool = False) -> None:
        """Stop claiming; running handlers may finish within the grace period (from any thread).

        Args:
            now: Do not wait: cancel running handlers and report them ``worker_shutdown``.
        """
        serving = self._serving
        if serving is not None:
            serving.loop.call(functools.partial(serving.stop, now=now))

    async def _serve(self, client: AsyncClient, serving: Serving) -> None:
        logger.info(
            "worker %s: serving %s from queue(s) %s at %s, %d at a time",
            self.worker_id,
            ", ".join(self.actions),
            ", ".join(self.queues),
            client.base_url,
            self.concurrency,
        )
        limiter = anyio.CapacityLimiter(self.concurrency)
        refused = await self._apply.run(self.url or client.base_url, serving, self._new_backoff())
        async with anyio.create_task_group() as attempts:
            if refused is None:
                await self._claim_loop(client, serving, attempts, limiter)
            await serving.drain(attempts, self.worker_id)
        if refused is not None:
            raise refused  # out here: inside the task groups it would become an ExceptionGroup
        logger.info("worker %s: stopped", self.worker_id)

    def _new_backoff(self) -> Backoff:
        return Backoff(*self._backoff)

    async def _claim_loop(
        self,
        client: AsyncClient,
        serving: Serving,
        attempts: anyio.abc.TaskGroup,
        limiter: anyio.CapacityLimiter,
    ) -> None:
        backoff = self._new_backoff()
        # A server answering an empty claim at once (not the contract) must not make this spin.
        floor = min(1.0, max(self.wait_seconds, 0.1))
        while not serving.draining.is_set():
            # A sync handler abandoned while it runs keeps its slot until its thread returns.
            lingering = serving.lingering  # read once: a thread may return meanwhile
            free = self.concurrency - len(serving.active) - lingering
            if free <= 0:
                with anyio.move_on_after(LINGERING_RECHECK_SECONDS if lingering else inf):
                    await serving.wait_change()
                continue
            started = anyio.current_time()
            claimed: list[ClaimedAttempt] | None = None
            delay = 0.0
            with anyio.CancelScope() as scope:  # cancelled by a stop (Serving.stop)
                serving.claim_scope = scope
                try:
                    claimed = await client.attempts.claim(
                        self.worker_id,
                        self.queues,
                        self.actions,
                        max_attempts=min(free, MAX_CLAIM),
                        wait_seconds=self.wait_seconds,
                    )
                except APIResponseValidationError as exc:
                    found = salvage(exc)  # its attempts are leased to this worker already
                    if found is None:
                        delay = claim_failed(exc, backoff)
                    else:
                        claimed = found.attempts
                        for unreadable in found.unreadable:
                            attempts.start_soon(fail_unreadable, client, unreadable)
                except WorkloadError as exc:
                    delay = claim_failed(exc, backoff)
            serving.claim_scope = None
            if claimed is None:
                if not scope.cancelled_caught:
                    await serving.pause(delay)
                continue
            backoff.reset()
            for item in claimed:
                runner = AttemptRunner(
                    client,
                    item,
                    self._actions.get(item.action),
                    limiter=limiter,
                    backoff=self._new_backoff,
                    grace_seconds=self.grace_seconds,
                    worker_id=self.worker_id,
                    threads=serving,
                )
                serving.active.add(runner)
                attempts.start_soon(self._run_attempt, runner, serving)
            if not claimed:
                await serving.pause(floor - (anyio.current_time() - started))

    @staticmethod
    async def _run_attempt(runner: AttemptRunner, serving: Serving) -> None:
        try:
            await runner.run()
        finally:
            serving.active.discard(runner)
            serving.changed()

    def __repr__(self) -> str:
        return (
            f"Worker(worker_id={self.worker_id!r}, queues={self.queues!r}, "
            f"actions={self.actions!r}, concurrency={self.concurrency})"
        )
