"""The composition root: every adapter of the service is built here, and only here.

Tests swap adapters with ``container.<provider>.override(...)`` (an in-memory store, a fake
clock); nothing connects or reads the environment at import time.
"""

from __future__ import annotations

from dependency_injector import containers, providers

from workload_api.auth import Authenticator
from workload_api.service import ControlPlane
from workload_api.settings import Settings
from workload_engine.clock import SystemClock
from workload_engine.engine import Engine
from workload_engine.mock_executor import MockExecutor
from workload_store_postgres.store import PostgresStore

__all__ = ["Container"]


def _store(settings: Settings, clock: SystemClock) -> PostgresStore:
    if not settings.database_url:
        raise ValueError("WORKLOAD_DATABASE_URL (or --database-url) is required")
    return PostgresStore(
        settings.database_url,
        max_size=settings.pool_max_size,
        statement_timeout_ms=settings.statement_timeout_ms,
        clock=clock,
    )


class Container(containers.DeclarativeContainer):
    """Providers of the service's parts."""

    settings = providers.Dependency(instance_of=Settings)
    clock = providers.Singleton(SystemClock)
    store = providers.Singleton(_store, settings=settings, clock=clock)
    executor = providers.Singleton(MockExecutor, clock=clock)
    engine = providers.Singleton(
        Engine,
        store=store,
        executor=executor,
        clock=clock,
        max_concurrent_attempts=settings.provided.max_concurrent_attempts,
    )
    authenticator = providers.Singleton(
        Authenticator,
        viewers=settings.provided.viewer_tokens,
        operators=settings.provided.operator_tokens,
    )
    control_plane = providers.Singleton(ControlPlane, store=store, engine=engine, clock=clock)
