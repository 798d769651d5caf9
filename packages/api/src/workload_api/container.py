"""The composition root: every part of the service is built here, and only here.

``workload serve``, the test fixtures, the benchmarks and ``workload run-local`` all take their
objects from a :class:`Container`; they differ only by overrides (STYLE 7): the in-memory store
and no lock for a local run or the in-process tests (:func:`use_memory_store`), a fake clock in
tests. Nothing connects or reads the environment at import time; resources open and close in
the one lifecycle (:class:`~workload_api.lifecycle.Service`).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable

from dependency_injector import containers, providers

from workload_api.app import create_app
from workload_api.auth import Authenticator
from workload_api.console import NAV, Console, Sessions
from workload_api.coordinator import Coordinator
from workload_api.endpoints import ANTHROPIC_PACKAGE, ModelEndpoint, configured_endpoints
from workload_api.lifecycle import Service
from workload_api.membership import Membership
from workload_api.readiness import Readiness
from workload_api.retention import RunRetention
from workload_api.service_key import ServiceKey
from workload_api.settings import Settings
from workload_api.telemetry import Metrics, ServiceTelemetry, tracer_provider_from_env
from workload_api.usecases import (
    ApprovalUseCases,
    DraftUseCases,
    EventStreams,
    RunUseCases,
    StatusUseCases,
    UseCases,
    WorkerUseCases,
    WorkflowUseCases,
)
from workload_domain.agent.spec import AGENT_ACTION
from workload_domain.ports import Clock, Store
from workload_domain.telemetry import Telemetry
from workload_engine.agent import AgentExecutor
from workload_engine.approvals import ApprovalDecisions
from workload_engine.clock import SystemClock
from workload_engine.definitions import DefinitionCache
from workload_engine.drafting import DraftWriter
from workload_engine.engine import Engine
from workload_engine.local import LocalExecutors
from workload_engine.memory import InMemoryStore
from workload_engine.mock_executor import MockExecutor
from workload_engine.model_router import ClosableModels, EndpointAdapters, ModelRouter
from workload_engine.remote import RemoteAttempts
from workload_engine.signals import StepSignal, WorkSignal
from workload_store_postgres.lock import PostgresCoordinatorLock
from workload_store_postgres.notifications import PostgresNotifications
from workload_store_postgres.shard_leases import PostgresShardLeases
from workload_store_postgres.store import PostgresStore

__all__ = ["Container", "use_memory_store"]


def _database_url(settings: Settings) -> str:
    if not settings.database_url:
        raise ValueError("WORKLOAD_DATABASE_URL (or --database-url) is required")
    return settings.database_url


def _store(settings: Settings, clock: Clock, telemetry: Telemetry) -> PostgresStore:
    store = PostgresStore(
        _database_url(settings),
        max_size=settings.pool_max_size,
        pool_timeout_seconds=settings.pool_timeout_seconds,
        statement_timeout_ms=settings.statement_timeout_ms,
        clock=clock,
        verify_schema=True,
        telemetry=telemetry,
        expected_shards=settings.shards,
    )
    # Replicas tell each other what they wrote (SPEC §14, §16).
    store.announce(settings.standby or settings.replica)
    return store


def _store_unreachable(store: Store) -> Callable[[str], None] | None:
    """Where a standby reports PostgreSQL unreachable: the PostgreSQL store (ADR 0021).

    It then refuses what needs PostgreSQL at once. None for the in-memory store.
    """
    return store.unreachable if isinstance(store, PostgresStore) else None


def _adapters(endpoint: ModelEndpoint, timeout_seconds: float) -> ClosableModels:
    """The adapters of ``endpoint``: made, and their package imported, at its first model.

    The ``openai`` package takes a third of a second to import; a service whose tasks use no
    endpoint never loads it. ``anthropic`` endpoints use ``workload_model_anthropic`` (checked
    to be installed at start-up), whose ``AnthropicModels`` takes the same arguments as
    ``OpenAIModels``.
    """
    key = endpoint.api_key.get_secret_value() if endpoint.api_key else None
    if endpoint.provider == "openai":
        from workload_model_openai import DEFAULT_API_KEY, OpenAIModels  # noqa: PLC0415 - lazy

        assert endpoint.base_url is not None  # required of openai endpoints
        return OpenAIModels(endpoint.base_url, key or DEFAULT_API_KEY, timeout_seconds)
    anthropic = importlib.import_module(ANTHROPIC_PACKAGE)
    arguments: dict[str, object] = {"timeout_seconds": timeout_seconds}
    if endpoint.base_url is not None:
        arguments["base_url"] = endpoint.base_url
    if key is not None:
        arguments["api_key"] = key
    made: ClosableModels = anthropic.AnthropicModels(**arguments)
    return made


def _endpoint_providers(endpoints: tuple[ModelEndpoint, ...]) -> dict[str, str]:
    """Each endpoint's provider kind, for the GenAI spans (``local`` → ``openai``)."""
    return {e.name: e.provider for e in endpoints}


def _models(endpoints: tuple[ModelEndpoint, ...], timeout: float) -> ModelRouter:
    """``mock`` and every configured endpoint (SPEC §11), each made at its first model."""
    return ModelRouter(
        {
            e.name: EndpointAdapters(e.provider, functools.partial(_adapters, e, timeout))
            for e in endpoints
        }
    )


def _lock(settings: Settings) -> PostgresCoordinatorLock | None:
    if settings.replica:
        return None  # a replica joins its cluster instead (SPEC §16)
    return PostgresCoordinatorLock(
        _database_url(settings),
        # A leader renews its lease at every lock check; a standby replaces one whose lease ran
        # out (frozen or partitioned) after three missed checks (SPEC §14).
        lease_seconds=3 * settings.lock_check_interval_seconds,
        take_over_stale=settings.standby,
        leader=settings.process_name,
    )


def _shard_leases(settings: Settings) -> PostgresShardLeases | None:
    """A replica's membership of its cluster (``--replica``, SPEC §16); None otherwise."""
    if not settings.replica:
        return None
    return PostgresShardLeases(
        _database_url(settings),
        settings.process_name,
        # As a leader's: three missed renewals, and another replica may take the shards.
        lease_seconds=3 * settings.lock_check_interval_seconds,
    )


def _membership(
    *,
    settings: Settings,
    leases: PostgresShardLeases | None,
    engine: Engine,
    store: PostgresStore,
    readiness: Readiness,
    notifications: PostgresNotifications | None,
    metrics: Metrics,
) -> Membership | None:
    if leases is None:
        return None
    return Membership(
        leases=leases,
        engine=engine,
        store=store,
        readiness=readiness,
        notifications=notifications,
        check_interval=settings.lock_check_interval_seconds,
        handoff_seconds=settings.shard_handoff_seconds,
        on_takeover=metrics.shard_takeovers.inc,
    )


def _notifications(settings: Settings, store: PostgresStore) -> PostgresNotifications:
    """What other replicas announce (SPEC §14).

    Every process listens: a leader started without ``--standby`` may still have ``--standby``
    replicas, whose API writes (runs, cancels, worker reports) it must hear. It announces its
    own writes from the moment it hears one of them (a standby says it is there as it starts);
    a standby announces from the start.
    """
    return PostgresNotifications(
        _database_url(settings),
        senders=store,
        present=settings.standby,
        on_replica=lambda: store.announce(True),
        sharded=settings.replica,
    )


def _retention(
    settings: Settings, store: Store, clock: Clock, metrics: Metrics
) -> RunRetention | None:
    """The run retention duty (SPEC §5), when ``WORKLOAD_RUN_RETENTION_DAYS`` is set."""
    days = settings.run_retention_days
    if days is None:
        return None
    return RunRetention(store, clock, days, on_purged=metrics.runs_purged.inc)


class Container(containers.DeclarativeContainer):
    """Providers of the service's parts."""

    settings = providers.Dependency(instance_of=Settings)
    clock = providers.Singleton(SystemClock)
    # Observability (SPEC §12): the OTEL_* variables are read when the provider is built.
    tracer_provider = providers.Singleton(tracer_provider_from_env)
    metrics = providers.Singleton(Metrics)
    # The endpoints' keys are read from the environment here, when the service is wired.
    endpoints = providers.Singleton(configured_endpoints, settings=settings)
    telemetry = providers.Singleton(
        ServiceTelemetry,
        metrics=metrics,
        tracer_provider=tracer_provider,
        endpoint_providers=providers.Callable(_endpoint_providers, endpoints),
    )
    store = providers.Singleton(_store, settings=settings, clock=clock, telemetry=telemetry)
    lock = providers.Singleton(_lock, settings=settings)
    shard_leases = providers.Singleton(_shard_leases, settings=settings)
    notifications = providers.Singleton(_notifications, settings=settings, store=store)
    work_signal = providers.Singleton(WorkSignal)
    step_signal = providers.Singleton(StepSignal)
    mock_executor = providers.Singleton(MockExecutor, clock=clock)
    models = providers.Singleton(
        _models, endpoints=endpoints, timeout=settings.provided.model_timeout_seconds
    )
    # What a definition may name (SPEC §11): the endpoints the models are routed to.
    endpoint_names = models.provided.names
    agent_executor = providers.Singleton(
        AgentExecutor,
        journal=store,
        models=models,
        clock=clock,
        tools=mock_executor,
        work_signal=work_signal,
        step_signal=step_signal,
        telemetry=telemetry,
    )
    executor = providers.Singleton(
        LocalExecutors, mock_executor, agent_executor, resumable=frozenset({AGENT_ACTION})
    )
    definitions = providers.Singleton(DefinitionCache, store=store)
    engine = providers.Singleton(
        Engine,
        store=store,
        executor=executor,
        clock=clock,
        max_concurrent_attempts=settings.provided.max_concurrent_attempts,
        definitions=definitions,
        work_signal=work_signal,
        step_signal=step_signal,
        resumable_actions=executor.provided.resumable,
        telemetry=telemetry,
        executor_id=settings.provided.process_name,
    )
    remote = providers.Singleton(RemoteAttempts, store=store, engine=engine)
    decisions = providers.Singleton(ApprovalDecisions, store=store, engine=engine)
    workflows = providers.Singleton(
        WorkflowUseCases,
        store=store,
        definitions=definitions,
        clock=clock,
        endpoints=endpoint_names,
    )
    runs = providers.Singleton(
        RunUseCases,
        store=store,
        engine=engine,
        definitions=definitions,
        clock=clock,
        telemetry=telemetry,
    )
    workers = providers.Singleton(
        WorkerUseCases,
        store=store,
        remote=remote,
        signal=engine.provided.work_signal,
        clock=clock,
        telemetry=telemetry,
        changes=engine.provided.changes,
        max_waiting_per_worker=settings.provided.max_waiting_claims_per_worker,
        max_waiting_per_principal=settings.provided.max_waiting_claims_per_principal,
    )
    streams = providers.Singleton(
        EventStreams,
        store=store,
        changes=engine.provided.changes,
        keepalive=settings.provided.stream_keepalive_seconds,
        recheck=settings.provided.stream_recheck_seconds,
        max_per_principal=settings.provided.max_streams_per_principal,
        max_per_run=settings.provided.max_streams_per_run,
    )
    readiness = providers.Singleton(Readiness)
    retention = providers.Singleton(
        _retention, settings=settings, store=store, clock=clock, metrics=metrics
    )
    membership = providers.Singleton(
        _membership,
        settings=settings,
        leases=shard_leases,
        engine=engine,
        store=store,
        readiness=readiness,
        notifications=notifications,
        metrics=metrics,
    )
    status = providers.Singleton(
        StatusUseCases, store=store, clock=clock, readiness=readiness, metrics=metrics
    )
    approvals = providers.Singleton(ApprovalUseCases, store=store, decisions=decisions)
    draft_writer = providers.Singleton(
        DraftWriter,
        store=store,
        models=models,
        clock=clock,
        telemetry=telemetry,
        endpoints=endpoint_names,
    )
    drafts = providers.Singleton(
        DraftUseCases, store=store, writer=draft_writer, clock=clock, endpoints=endpoint_names
    )
    usecases = providers.Singleton(
        UseCases,
        workflows=workflows,
        runs=runs,
        workers=workers,
        approvals=approvals,
        drafts=drafts,
        status=status,
        streams=streams,
    )
    service_key = providers.Singleton(
        ServiceKey, store=store, configured=settings.provided.console_session_key
    )
    authenticator = providers.Singleton(
        Authenticator,
        viewers=settings.provided.viewer_tokens,
        operators=settings.provided.operator_tokens,
        workers=settings.provided.worker_tokens,
        key=service_key,
    )
    sessions = providers.Singleton(
        Sessions,
        store=store,
        authenticator=authenticator,
        clock=clock,
        max_age=settings.provided.console_session_seconds,
        secure=settings.provided.console_secure_cookies,
    )
    console = providers.Singleton(
        Console, usecases=usecases, sessions=sessions, clock=clock, nav=providers.Object(NAV)
    )
    app = providers.Singleton(
        create_app,
        usecases=usecases,
        authenticator=authenticator,
        readiness=readiness,
        telemetry=telemetry,
        metrics_public=settings.provided.metrics_public,
        console=console,
        body_timeout=settings.provided.http_body_timeout_seconds,
    )
    service = providers.Singleton(
        Service,
        store=store,
        lock=lock,
        engine=engine,
        clock=clock,
        readiness=readiness,
        remote=remote,
        decisions=decisions,
        drafts=draft_writer,
        models=models,
        notifications=notifications,
        standby=settings.provided.standby,
        lock_check_interval=settings.provided.lock_check_interval_seconds,
        lease_check_interval=settings.provided.lease_check_interval_seconds,
        sweep_interval=settings.provided.sweep_interval_seconds,
        telemetry=telemetry,
        membership=membership,
        handoff_seconds=settings.provided.shard_handoff_seconds,
        on_unreachable=providers.Callable(_store_unreachable, store=store),
        retention=retention,
    )
    coordinator = providers.Factory(
        Coordinator,
        service=service,
        app=app,
        host=settings.provided.host,
        port=settings.provided.port,
        header_timeout=settings.provided.http_header_timeout_seconds,
        http_parser=settings.provided.http_parser,
        keepalive_timeout=settings.provided.http_keepalive_seconds,
        max_connections=settings.provided.http_max_connections,
        shutdown_grace=settings.provided.shutdown_grace_seconds,
    )


def use_memory_store(container: Container) -> Container:
    """Override the database with the in-memory store and no coordinator lock.

    For ``workload run-local`` and the in-process tests: the same wiring, no PostgreSQL.
    """
    container.store.override(
        providers.Singleton(InMemoryStore, clock=container.clock, telemetry=container.telemetry)
    )
    container.lock.override(providers.Object(None))
    container.notifications.override(providers.Object(None))
    container.shard_leases.override(providers.Object(None))
    return container
