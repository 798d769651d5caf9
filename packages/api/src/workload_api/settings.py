"""Service configuration: every ``WORKLOAD_*`` setting, read once by the composition root."""

from __future__ import annotations

import importlib.util
import os
import re
import socket
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from workload_domain.retention import MAX_RETENTION_DAYS
from workload_domain.shards import MAX_SHARDS, check_replica_id
from workload_store_postgres.urls import check_database_url

__all__ = ["Settings"]

_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
Tokens = Annotated[tuple[SecretStr, ...], NoDecode]


def _default_http_parser() -> Literal["httptools", "h11"]:
    # httptools is a dependency of the package; h11 serves where it could not be installed.
    return "httptools" if importlib.util.find_spec("httptools") is not None else "h11"


class Settings(BaseSettings):
    """Configuration from the environment (``WORKLOAD_*``) or from explicit arguments."""

    model_config = SettingsConfigDict(env_prefix="WORKLOAD_", extra="ignore", frozen=True)

    database_url: str | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    data_dir: Path | None = None
    log_level: str = "INFO"
    viewer_tokens: Tokens = ()
    operator_tokens: Tokens = ()
    worker_tokens: Tokens = ()
    """Tokens of workers: they claim and report attempts, and do nothing else (SPEC §10)."""
    max_concurrent_attempts: int = Field(default=64, ge=1, le=10_000)
    standby: bool = False
    """Serve while another process leads, and take over when it goes (``--standby``, §14)."""
    replica: bool = False
    """Join the database's cluster of replicas that all execute (``--replica``, SPEC §16)."""
    replica_id: str | None = None
    """This process's name: its replica id (§16) and its attempts' ``executed_by`` (§6).
    Default: the host name and the pid (``host-1234``)."""
    shards: int | None = Field(default=None, ge=1, le=MAX_SHARDS)
    """The number of shards a database gets when it is first migrated (default 64, SPEC §16);
    after that it is fixed, and a different value is refused."""
    shard_handoff_seconds: float = Field(default=30.0, ge=0, le=3600)
    """How long a replica handing a shard over lets the attempts it executes finish (§16)."""
    lock_check_interval_seconds: float = Field(default=1.0, gt=0, le=3600)
    lease_check_interval_seconds: float = Field(default=1.0, gt=0, le=60)
    """How often the leader applies passed leases, start-to-close and schedule-to-start
    deadlines of remote attempts."""
    sweep_interval_seconds: float = Field(default=5.0, gt=0, le=5)
    """How often the leader adopts unfinished runs it does not execute (SPEC §14: ≤ 5 s)."""
    http_header_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    """A connection whose request headers are not complete this long after its first byte is
    closed (slow clients); long-polls and streams are not affected (they wait after it)."""
    http_parser: Literal["httptools", "h11"] = Field(default_factory=_default_http_parser)
    """The HTTP/1.1 parser: ``httptools`` (llhttp, the default) or ``h11`` (pure Python, the
    parser before ADR 0036). Both close slow headers and answer a malformed request 400."""
    http_body_timeout_seconds: float = Field(default=60.0, gt=0, le=3600)
    """A request's body must have arrived this long after its headers, else 408
    ``request_timeout`` and the connection is closed (slow clients, ADR 0024)."""
    http_max_connections: int = Field(default=1000, ge=1, le=100_000)
    """uvicorn's ``limit_concurrency``: past this many open connections (or requests in
    progress), a new request is answered 503 at once (ADR 0024)."""
    http_keepalive_seconds: float = Field(default=75.0, gt=0, le=300)
    """An idle kept-alive connection is closed after this long: longer than the pools of its
    clients keep one idle (httpx 5 s, proxies 60 s), so the client closes it first (ADR 0041)."""
    shutdown_grace_seconds: int = Field(default=10, ge=0, le=300)
    """On SIGTERM/SIGINT, in-flight requests get this long before they are cancelled."""
    openai_base_url: str | None = None
    """An OpenAI-compatible endpoint (ending in ``/v1``) for ``openai:<model>`` agents (§11)."""
    openai_api_key: SecretStr | None = None
    """Its key, if it needs one; never logged, never in a step or a resource."""
    model_endpoints: str | None = None
    """Named model endpoints (SPEC §11): a JSON object, or ``@path`` to a JSON or TOML file;
    read, with their keys, when the service starts (``workload_api.endpoints``, ADR 0027)."""
    model_timeout_seconds: float = Field(default=120.0, gt=0, le=3600)
    """The most one model call may take before the attempt fails ``model_unavailable``."""
    stream_keepalive_seconds: float = Field(default=15.0, gt=0, le=300)
    """An event stream with nothing to send sends a comment this often (SPEC §13: 15 s)."""
    stream_recheck_seconds: float = Field(default=5.0, gt=0, le=60)
    """An event stream re-reads its run this often even without an in-process wake-up (the
    safety net for commits made by another process)."""
    max_waiting_claims_per_worker: int = Field(default=16, ge=1, le=100_000)
    """Claims one worker id may hold at once in this process; past it, 429 (ADR 0025)."""
    max_waiting_claims_per_principal: int = Field(default=1024, ge=1, le=100_000)
    """Claims one worker token may hold at once in this process; past it, 429 (ADR 0025)."""
    max_streams_per_principal: int = Field(default=100, ge=1, le=100_000)
    """Event streams one token (or its console sessions) may hold open at once in this
    process; past it, 429 (ADR 0025)."""
    max_streams_per_run: int = Field(default=500, ge=1, le=100_000)
    """Event streams of one run open at once in this process; past it, 429 (ADR 0025)."""
    console_session_seconds: int = Field(default=28800, ge=60, le=604800)
    """How long a web console sign-in lasts (8 hours by default); caps every live session."""
    console_session_key: SecretStr | None = Field(default=None, min_length=32)
    """The key console session cookies are signed with (ADR 0022); None: a random key kept in
    the database. Changing it signs every browser out."""
    console_secure_cookies: bool | None = None
    """Give console cookies the Secure attribute: None follows the request's scheme (https)."""
    statement_timeout_ms: int = Field(default=5000, ge=100, le=600_000)
    pool_max_size: int = Field(default=10, ge=1, le=1000)
    pool_timeout_seconds: float = Field(default=5.0, gt=0, le=300)
    """How long a request waits for a pool connection (and the pool's first, at start-up)
    before it is answered 503. While PostgreSQL is known unreachable nothing waits (ADR 0021)."""
    run_retention_days: int | None = Field(default=None, ge=1, le=MAX_RETENTION_DAYS)
    """Delete terminal runs finished longer ago than this (SPEC §5); None keeps them forever."""
    metrics_public: bool = False
    """``GET /metrics`` without a token (else a viewer's or an operator's is needed, SPEC §12)."""

    @model_validator(mode="after")
    def _worker_tokens_apart(self) -> Settings:
        # A worker token may do only worker things: one that is also a viewer's or an
        # operator's would make its role ambiguous.
        workers = {t.get_secret_value() for t in self.worker_tokens}
        others = {t.get_secret_value() for t in (*self.viewer_tokens, *self.operator_tokens)}
        if workers & others:
            raise ValueError("a worker token must not also be a viewer or operator token")
        return self

    @model_validator(mode="after")
    def _one_mode(self) -> Settings:
        if self.replica and self.standby:
            raise ValueError("--replica and --standby are two modes (SPEC §16, §14): choose one")
        return self

    @field_validator("replica_id")
    @classmethod
    def _replica_id(cls, value: str | None) -> str | None:
        return None if value is None else check_replica_id(value)

    @property
    def process_name(self) -> str:
        """The replica id: ``WORKLOAD_REPLICA_ID``, else ``<host>-<pid>`` (made safe)."""
        if self.replica_id is not None:
            return self.replica_id
        host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:100] or "host"
        return f"{host}-{os.getpid()}"

    @field_validator("database_url")
    @classmethod
    def _parseable_url(cls, value: str | None) -> str | None:
        # A malformed URL is a configuration error (exit 2), not a database outage (exit 5).
        if value is not None and not value.strip():
            # `--database-url "$UNSET"` must not start the embedded development database
            raise ValueError("empty: give a PostgreSQL URL, or leave it unset (embedded mode)")
        return check_database_url(value) if value else value

    @field_validator("host")
    @classmethod
    def _named_host(cls, value: str) -> str:
        if not value.strip():  # uvicorn would listen on every interface
            raise ValueError(
                "empty: give the address to listen on, or leave it unset (127.0.0.1); "
                "0.0.0.0 listens on every interface"
            )
        return value

    @field_validator("data_dir", mode="before")
    @classmethod
    def _named_dir(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():  # Path("") is the current directory
            raise ValueError("empty: give a directory, or leave it unset (the user data dir)")
        return value

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in _LEVELS:
            raise ValueError(f"log level must be one of {', '.join(_LEVELS)}")
        return level

    @field_validator("viewer_tokens", "operator_tokens", "worker_tokens", mode="before")
    @classmethod
    def _split_tokens(cls, value: object) -> object:
        # Comma-separated, so that tokens can rotate: old and new are both valid for a while.
        if isinstance(value, str):
            return tuple(SecretStr(t.strip()) for t in value.split(",") if t.strip())
        return value
