"""The load: client threads that start runs (and cancel a few) until told to stop.

The clients spread their requests over every service process: each request goes to the next
one in turn, and a retry to the one after it (a process down is one the clients go around).
Each client sends ``POST /api/v1/workflows/{id}/versions/1/runs`` with an ``Idempotency-Key`` of
its own and RETRIES the same request with the same key until it gets a definitive answer: a 2xx
or a 4xx (a 5xx or no answer at all means "try again"). A run is *acknowledged* when a 2xx names
it. About ``cancel_fraction`` of acknowledged runs then get ``POST /runs/{id}/cancel``, retried
the same way with a key of its own. Every answer (or transport error) is logged with the
monotonic times it was sent and received, so the report can tell a 503 inside a fault window
from a 5xx outside one. Every loop is bounded by a count and a deadline.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx

from benchmarks.chaos.settings import OPERATOR_TOKEN, PROBE_WORKFLOW, Settings

__all__ = ["Load", "Response"]

_MAX_TRIES = 1_000


@dataclass(frozen=True)
class Response:
    """One HTTP exchange: ``status`` is None when no answer came (refused, reset, timeout)."""

    operation: str  # "start" | "cancel" | "setup"
    key: str
    sent: float
    received: float
    status: int | None
    error: str | None = None
    body: Any = None  # only kept for 5xx, for the report's examples


@dataclass
class Ledger:
    """What the clients were told, shared by every thread (guarded by ``lock``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    responses: list[Response] = field(default_factory=list)
    acknowledged: dict[str, str] = field(default_factory=dict)  # key → first run id
    paths: dict[str, str] = field(default_factory=dict)  # key → the path it was sent to
    run_ids_by_key: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    rejected: dict[str, int] = field(default_factory=dict)  # key → 4xx status
    undetermined: list[str] = field(default_factory=list)  # keys never answered definitively
    cancels: dict[str, int] = field(default_factory=dict)  # run id → definitive status

    def log(self, response: Response) -> None:
        """Append one exchange."""
        with self.lock:
            self.responses.append(response)


class _Clients:
    """One HTTP client per service process; each request goes to the next process in turn."""

    def __init__(self, base_urls: list[str], timeout: float, first: int) -> None:
        headers = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
        self._clients = [
            httpx.Client(base_url=url, headers=headers, timeout=timeout) for url in base_urls
        ]
        self._turn = first

    def next(self) -> httpx.Client:
        client = self._clients[self._turn % len(self._clients)]
        self._turn += 1
        return client

    def __enter__(self) -> _Clients:
        return self

    def __exit__(self, *_: object) -> None:
        for client in self._clients:
            client.close()


class Load:
    """Starts ``settings.clients`` threads against ``base_urls``; :meth:`stop` ends them."""

    def __init__(self, base_urls: list[str], settings: Settings) -> None:
        self.base_urls = base_urls
        self.settings = settings
        self.ledger = Ledger()
        self._stop = threading.Event()
        self._deadline = time.monotonic() + settings.lifetime_seconds
        self._threads = [
            threading.Thread(target=self._client, args=(i,), name=f"client-{i}", daemon=True)
            for i in range(settings.clients)
        ]

    def _http(self, first: int = 0) -> _Clients:
        return _Clients(self.base_urls, self.settings.request_timeout_seconds, first)

    def request(
        self, clients: _Clients, operation: str, path: str, key: str, body: Any = None
    ) -> Response | None:
        """POST ``path`` with ``key`` until a 2xx or 4xx; None if none came before the deadline."""
        deadline = time.monotonic() + self.settings.request_deadline_seconds
        pause = 0.1
        for _ in range(_MAX_TRIES):
            sent = time.monotonic()
            try:
                answer = clients.next().post(path, json=body, headers={"Idempotency-Key": key})
            except httpx.HTTPError as exc:
                response = Response(
                    operation, key, sent, time.monotonic(), None, type(exc).__name__
                )
            else:
                status = answer.status_code
                payload = _json(answer)
                response = Response(operation, key, sent, time.monotonic(), status, None, payload)
                if status < 500:
                    self.ledger.log(Response(operation, key, sent, response.received, status))
                    return response
            self.ledger.log(response)
            if time.monotonic() + pause > deadline:
                break
            time.sleep(pause)
            pause = min(pause * 1.5, 1.0)
        return None

    def setup(self) -> None:
        """Create the workflows (retried like everything else); raise if one is refused."""
        with self._http() as client:
            for definition in (*self.settings.workflows, PROBE_WORKFLOW):
                key = f"chaos-setup-{definition['id']}"
                answer = self.request(client, "setup", "/api/v1/workflows", key, definition)
                if answer is None or answer.status not in (201, 409):
                    raise RuntimeError(f"creating {definition['id']} answered {answer}")

    def start(self) -> None:
        """Start the client threads (they stop by themselves after ``lifetime_seconds``)."""
        self._deadline = time.monotonic() + self.settings.lifetime_seconds
        for thread in self._threads:
            thread.start()

    def _client(self, index: int) -> None:
        rng = random.Random(self.settings.seed * 1_000 + index)
        workflows = self.settings.workflows
        with self._http(index) as client:
            for n in range(self.settings.max_runs_per_client):
                if self._stop.is_set() or time.monotonic() > self._deadline:
                    return
                workflow = workflows[(index + n) % len(workflows)]["id"]
                key = f"chaos-{self.settings.seed}-{index}-{n}"
                path = f"/api/v1/workflows/{workflow}/versions/1/runs"
                run_id = self._start_run(client, path, key)
                if run_id is not None and rng.random() < self.settings.cancel_fraction:
                    self._stop.wait(rng.uniform(0, 0.4))  # running, retrying, or just finished
                    self._cancel(client, run_id, f"chaos-cancel-{self.settings.seed}-{index}-{n}")
                self._stop.wait(self.settings.client_pause_seconds)

    def acknowledge(self, key: str, path: str, run_id: str) -> None:
        """Record a run started outside the clients (the probe's), to be checked like theirs."""
        with self.ledger.lock:
            self.ledger.run_ids_by_key[key].add(run_id)
            self.ledger.acknowledged.setdefault(key, run_id)
            self.ledger.paths[key] = path

    def _start_run(self, client: _Clients, path: str, key: str) -> str | None:
        answer = self.request(client, "start", path, key)
        with self.ledger.lock:
            if answer is None:
                self.ledger.undetermined.append(key)
                return None
            if answer.status is None or answer.status >= 300:
                self.ledger.rejected[key] = answer.status or 0
                return None
        run_id = str(answer.body.get("run_id")) if isinstance(answer.body, dict) else ""
        self.acknowledge(key, path, run_id)
        return run_id

    def _cancel(self, client: _Clients, run_id: str, key: str) -> None:
        answer = self.request(client, "cancel", f"/api/v1/runs/{run_id}/cancel", key)
        if answer is not None and answer.status is not None:
            with self.ledger.lock:
                self.ledger.cancels[run_id] = answer.status

    def stop(self, timeout: float) -> bool:
        """Stop starting runs; wait for requests in flight. False if a thread outlived it."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)


def _json(answer: httpx.Response) -> Any:
    try:
        return answer.json()
    except ValueError:
        return answer.text[:200]
