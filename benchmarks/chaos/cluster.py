"""The soak's own PostgreSQL cluster, from Debian's binaries, that it may stop and start again.

``initdb`` + ``pg_ctl`` from ``/usr/lib/postgresql/15/bin`` (package ``postgresql-15``), on a
Unix socket only (``listen_addresses=''``), in a directory the soak owns; as root every binary
runs as the ``postgres`` user (initdb refuses root), as ``tests/plugins/postgres.py`` does. The
cluster offers what the faults need: an immediate stop, a start on the same data directory, and
``pg_terminate_backend`` by ``application_name``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

__all__ = ["DATABASE", "POSTGRES_BIN", "Cluster", "ClusterError"]

POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")
DATABASE = "workload"
_INSTALL_HINT = (
    "the chaos soak needs the Debian PostgreSQL 15 server binaries in {bin}: "
    "apt-get install postgresql-15 (the project's .ci/run installs it)"
)


class ClusterError(RuntimeError):
    """The cluster could not be created, started or stopped."""


class Cluster:
    """One PostgreSQL cluster in ``root``: data in ``root/data``, socket in ``root/sockets``."""

    def __init__(self, root: Path, bin_dir: Path = POSTGRES_BIN) -> None:
        for tool in ("initdb", "pg_ctl"):
            if not (bin_dir / tool).is_file():
                raise ClusterError(_INSTALL_HINT.format(bin=bin_dir))
        self.bin_dir = bin_dir
        self.root = root
        self.data = root / "data"
        self.sockets = root / "sockets"
        self._as_postgres: list[str] = []

    @property
    def admin_url(self) -> str:
        """The ``postgres`` maintenance database, over the Unix socket."""
        return f"postgresql://postgres@/postgres?host={self.sockets}"

    @property
    def url(self) -> str:
        """The database the service uses."""
        return f"postgresql://postgres@/{DATABASE}?host={self.sockets}"

    def _run(self, *args: str, timeout: float = 120) -> None:
        # pg_ctl start leaves the postmaster holding inherited pipes: write to a file instead.
        with tempfile.TemporaryFile("w+") as out:
            result = subprocess.run(
                [*self._as_postgres, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
                check=False,
            )
            out.seek(0)
            output = out.read()
        if result.returncode != 0:
            raise ClusterError(f"{Path(args[0]).name} {' '.join(args[1:])}: {output.strip()}")

    def create(self) -> None:
        """initdb, start, and create the service's (empty) database."""
        self.sockets.mkdir(parents=True)
        if os.geteuid() == 0:  # initdb refuses to run as root
            for path in (self.root, self.sockets):
                shutil.chown(path, "postgres")
            self._as_postgres = ["runuser", "-u", "postgres", "--"]
        initdb = str(self.bin_dir / "initdb")
        self._run(initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self.start()
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))

    def _pg_ctl(self, *args: str) -> None:
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), *args)

    def start(self) -> None:
        """Start on the same data directory and socket; return once it accepts connections."""
        options = f"-c listen_addresses='' -k {self.sockets}"
        self._pg_ctl("-o", options, "-l", str(self.root / "log"), "-w", "-t", "60", "start")
        deadline = time.monotonic() + 30
        while not self.accepts():
            if time.monotonic() > deadline:
                raise ClusterError("PostgreSQL started but does not accept connections")
            time.sleep(0.1)

    def stop_immediately(self) -> None:
        """``pg_ctl stop -m immediate``: every backend dies at once, no checkpoint."""
        self._pg_ctl("-m", "immediate", "-w", "-t", "30", "stop")

    def stop(self) -> None:
        """A fast, clean stop (at the end of the soak)."""
        self._pg_ctl("-m", "fast", "-w", "-t", "30", "stop")

    def running(self) -> bool:
        """Whether the postmaster runs (``pg_ctl status``)."""
        try:
            self._pg_ctl("status")
        except ClusterError:
            return False
        return True

    def accepts(self) -> bool:
        """Whether a connection and ``SELECT 1`` succeed now."""
        try:
            with psycopg.connect(self.admin_url, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    def query(self, statement: str, params: Any = None, *, admin: bool = False) -> list[Any]:
        """Run one statement (on the service's database unless ``admin``); return its rows."""
        url = self.admin_url if admin else self.url
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description is not None else []

    def terminate_backends(self, application_name: str | None) -> int:
        """``pg_terminate_backend`` of the service database's client backends.

        Every one of them when ``application_name`` is None, else only those with that name.
        Returns how many were terminated.
        """
        rows = self.query(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            " AND (%s::text IS NULL OR application_name = %s::text)",
            (DATABASE, application_name, application_name),
            admin=True,
        )
        return int(rows[0][0])
