"""The Prometheus metrics of SPEC §12, in a registry of their own (one per service).

Counters and histograms are updated as things happen (requests, commits, claims, model calls);
gauges of the database's state (queues, active runs and workers, pending approvals) are read
from the store when ``/metrics`` is scraped (:meth:`Metrics.refresh`). Labels are
low-cardinality only: never a run, attempt or worker id; ``route`` is the route template and
``method`` one of the HTTP methods (anything else is ``other``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from workload_domain.statuses import AttemptStatus, RunStatus
from workload_domain.workers import Activity, QueueStats

__all__ = ["HTTP_BUCKETS", "SCHEDULE_TO_START_BUCKETS", "Metrics", "http_method", "status_class"]

HTTP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Request latencies: reads answer in about a millisecond, writes in a few (one commit); the
upper buckets hold workers' long-polling claims (up to 50 s: ``+Inf`` above 30)."""
SCHEDULE_TO_START_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
)  # fmt: skip
"""Queued → claimed: milliseconds with an idle waiting worker (SPEC §15: p50 ≤ 20 ms), up to an
hour for a queue nobody serves."""

_NAMESPACE = "workload"
"""Every metric's name starts ``workload_``."""
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_RUN_ENDS = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELED)
_ATTEMPT_ENDS = (
    AttemptStatus.SUCCEEDED,
    AttemptStatus.FAILED,
    AttemptStatus.TIMED_OUT,
    AttemptStatus.CANCELED,
    AttemptStatus.INTERRUPTED,
)
_KINDS = ("mock", "agent", "remote", "tool")
_M = TypeVar("_M", Counter, Histogram)


class _Children(Generic[_M]):
    """A labelled counter's or histogram's children, by their label values, kept at hand.

    ``labels()`` checks its arguments, converts each to ``str`` and takes a lock at every call:
    ≈ 7,000 instructions, where a dictionary lookup is a few hundred; the four a run makes were
    ≈ 28,000 of the ≈ 72,000 its metrics cost (callgrind, a loop of the calls). The children
    are the metric's own, so nothing here holds a series the registry does not; the metrics
    kept this way are never cleared (the queue gauges, which are, are not).
    """

    __slots__ = ("_children", "_metric")

    def __init__(self, metric: _M) -> None:
        self._metric: _M = metric
        self._children: dict[tuple[str, ...], _M] = {}

    def __call__(self, *values: str) -> _M:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._metric.labels(*values)
        return child


def http_method(method: str) -> str:
    """The ``method`` label: a standard method, or ``other`` (clients choose the string)."""
    return method if method in _METHODS else "other"


def status_class(status: int) -> str:
    """``2xx``, ``3xx``, ``4xx`` or ``5xx`` (a 499, a client that hung up, is ``4xx``)."""
    return f"{min(max(status // 100, 2), 5)}xx"


class Metrics:
    """Every metric of the service, registered in :attr:`registry`."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        counter, gauge, histogram = self._counter, self._gauge, self._histogram
        self.http_requests = counter(
            "http_requests",
            "HTTP requests answered, by route template, method and status class.",
            "route",
            "method",
            "status_class",
        )
        self.http_duration = histogram(
            "http_request_duration_seconds",
            "Time to answer an HTTP request, by route template and method.",
            HTTP_BUCKETS,
            "route",
            "method",
        )
        self.runs_started = counter("runs_started", "Runs started (event run.started).")
        self.runs_finished = counter("runs_finished", "Runs finished, by final status.", "status")
        self.attempts_finished = counter(
            "attempts_finished",
            "Attempts ended (canceled and interrupted ones too), by status and kind "
            "(mock, agent, remote, tool).",
            "status",
            "kind",
        )
        self.queue_depth = gauge(
            "queue_depth", "Queued, unclaimed remote attempts, by queue.", "queue"
        )
        self.queue_oldest_age = gauge(
            "queue_oldest_age_seconds",
            "Age of the oldest queued attempt, by queue (0 when none is queued).",
            "queue",
        )
        self.schedule_to_start = histogram(
            "schedule_to_start_seconds",
            "Time from an attempt being queued to a worker claiming it, by queue.",
            SCHEDULE_TO_START_BUCKETS,
            "queue",
        )
        self.leases_expired = counter(
            "leases_expired",
            "Remote attempts interrupted because their lease ran out (lease_expired).",
        )
        self.runs_purged = counter(
            "runs_purged",
            "Finished runs deleted by retention (WORKLOAD_RUN_RETENTION_DAYS), with their rows.",
        )
        self.workers_active = gauge(
            "workers_active", "Workers seen within the last 90 seconds or holding work."
        )
        self.leader = gauge(
            "coordinator_leader",
            "1 while this process holds the coordinator lock and executes runs, else 0.",
        )
        self.epoch = gauge(
            "coordinator_epoch",
            "The coordinator epoch this process leads in (0 until fenced epochs exist).",
        )
        self.shards_owned = gauge(
            "shards_owned",
            "Shards whose runs this process executes (a replica's; all of them while leading).",
        )
        self.shard_takeovers = counter(
            "shard_takeovers",
            "Shards this replica took (each in a new epoch) and recovered (SPEC §16).",
        )
        self.replicas_live = gauge(
            "replicas_live",
            "Live members of the cluster this process sees (a leader alone counts 1).",
        )
        self.runs_active = gauge("runs_active", "Runs not yet terminal (all processes).")
        self.db_pool = gauge(
            "db_pool_connections",
            "Connections of this process's database pool, by state (idle, used).",
            "state",
        )
        self.database_up = gauge(
            "database_up", "1 if the database answered this scrape's reads, else 0."
        )
        self.model_calls = counter(
            "model_calls",
            "Model calls of the agent runtime, by provider and outcome.",
            "provider",
            "outcome",
        )
        self.model_tokens = counter(
            "model_tokens",
            "Tokens of model calls, by provider and direction (input, output).",
            "provider",
            "direction",
        )
        self.approvals_pending = gauge("approvals_pending", "Approvals waiting for a decision.")
        self.approvals_oldest_age = gauge(
            "approvals_oldest_pending_age_seconds",
            "Age of the approval waiting longest for a decision (0 when none waits).",
        )
        self._requests = _Children(self.http_requests)
        self._durations = _Children(self.http_duration)
        self._runs_finished = _Children(self.runs_finished)
        self._attempts_finished = _Children(self.attempts_finished)
        self._schedule_to_start = _Children(self.schedule_to_start)
        self._model_calls = _Children(self.model_calls)
        self._model_tokens = _Children(self.model_tokens)
        # Known label values start at zero, so that rates and alerts see a series at once.
        for status in _RUN_ENDS:
            self.runs_finished.labels(status.value)
        for attempt_status in _ATTEMPT_ENDS:
            for kind in _KINDS:
                self.attempts_finished.labels(attempt_status.value, kind)

    def _counter(self, name: str, documentation: str, *labels: str) -> Counter:
        return Counter(name, documentation, labels, namespace=_NAMESPACE, registry=self.registry)

    def _gauge(self, name: str, documentation: str, *labels: str) -> Gauge:
        return Gauge(name, documentation, labels, namespace=_NAMESPACE, registry=self.registry)

    def _histogram(
        self, name: str, documentation: str, buckets: Sequence[float], *labels: str
    ) -> Histogram:
        return Histogram(
            name,
            documentation,
            labels,
            namespace=_NAMESPACE,
            registry=self.registry,
            buckets=buckets,
        )

    def request(self, route: str, method: str, status: int, seconds: float) -> None:
        """One HTTP request answered."""
        label = http_method(method)
        self._requests(route, label, status_class(status)).inc()
        self._durations(route, label).observe(seconds)

    def run_finished(self, status: str) -> None:
        """A run ended with ``status``."""
        self._runs_finished(status).inc()

    def attempt_finished(self, status: str, kind: str) -> None:
        """An attempt of ``kind`` (or a tool call: ``tool``) ended with ``status``."""
        self._attempts_finished(status, kind).inc()

    def claimed(self, queue: str, waited: float) -> None:
        """An attempt of ``queue`` was claimed ``waited`` seconds after it was queued."""
        self._schedule_to_start(queue).observe(waited)

    def model_call(
        self, provider: str, outcome: str, input_tokens: int | None, output_tokens: int | None
    ) -> None:
        """A model call of ``provider`` ended (``ok`` or ``error``), with its tokens if known."""
        self._model_calls(provider, outcome).inc()
        if input_tokens:
            self._model_tokens(provider, "input").inc(input_tokens)
        if output_tokens:
            self._model_tokens(provider, "output").inc(output_tokens)

    def refresh(
        self,
        *,
        queues: Sequence[QueueStats] | None,
        activity: Activity | None,
        now: datetime,
        leading: bool,
        epoch: int | None,
        connections: Mapping[str, int],
        shards_owned: int = 0,
        replicas_live: int = 0,
    ) -> None:
        """Set the gauges from what a scrape read (``None``: the database did not answer)."""
        self.leader.set(1 if leading else 0)
        self.epoch.set(epoch or 0)
        self.shards_owned.set(shards_owned)
        self.replicas_live.set(replicas_live)
        for state, count in connections.items():
            self.db_pool.labels(state).set(count)
        self.database_up.set(0 if queues is None or activity is None else 1)
        if queues is not None:
            self._queues(queues, now)
        if activity is not None:
            self.runs_active.set(activity.runs_active)
            self.workers_active.set(activity.workers_active)
            self.approvals_pending.set(activity.approvals_pending)
            self.approvals_oldest_age.set(_age(activity.oldest_approval_requested_at, now))

    def _queues(self, queues: Iterable[QueueStats], now: datetime) -> None:
        # Cleared first: a queue that vanished has no series left behind.
        self.queue_depth.clear()
        self.queue_oldest_age.clear()
        for q in queues:
            self.queue_depth.labels(q.queue).set(q.queued)
            self.queue_oldest_age.labels(q.queue).set(_age(q.oldest_queued_at, now))

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


def _age(since: datetime | None, now: datetime) -> float:
    """Seconds from ``since`` to ``now`` (0 for none, never negative: clocks differ)."""
    return 0.0 if since is None else max((now - since).total_seconds(), 0.0)
