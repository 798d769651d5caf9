"""The soak's processes: the service processes, each on its own path to PostgreSQL, and workers.

``--replicas N`` service processes (``serve-0`` … on ports of their own; ``--standby`` when
several coordinate through the lock, ``--replica`` when they all execute), each connected to
PostgreSQL through a :class:`~benchmarks.chaos.proxy.DatabaseProxy` of its own so that one can
be partitioned alone; ``--workers N`` workers (``worker-0`` …), worker ``i`` talking to service
``i mod N``. Every process has a supervisor that restarts it when it exits.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.chaos.cluster import DATABASE
from benchmarks.chaos.proxy import DatabaseProxy, ProxyLoop
from benchmarks.chaos.service import Exit, Launcher, Supervisor, free_port, readyz
from benchmarks.chaos.settings import Settings

__all__ = ["Fleet"]

_PG_SOCKET = ".s.PGSQL.5432"


class Fleet:
    """Every process the soak supervises, and the proxies between services and PostgreSQL."""

    def __init__(self, launcher: Launcher, sockets: Path, settings: Settings) -> None:
        self._loop = ProxyLoop()
        self._closed = False
        lifetime = settings.lifetime_seconds
        self.proxies = [
            DatabaseProxy(self._loop, str(sockets / _PG_SOCKET), free_port())
            for _ in range(settings.replicas)
        ]
        self.replicas: list[Supervisor] = []
        for index, proxy in enumerate(self.proxies):
            port = free_port()
            launch = _serve(launcher, proxy.url(DATABASE), port, index, settings.serve_flag)
            base_url = f"http://127.0.0.1:{port}"
            self.replicas.append(Supervisor(f"serve-{index}", launch, lifetime, base_url))
        self.workers = [
            Supervisor(
                f"worker-{index}",
                _worker(launcher, self.replicas[index % len(self.replicas)].base_url, index),
                lifetime,
            )
            for index in range(settings.workers)
        ]

    @property
    def base_urls(self) -> list[str]:
        """Every service process's URL."""
        return [replica.base_url for replica in self.replicas]

    @property
    def exits(self) -> list[Exit]:
        """Every exit of every supervised process, in time order."""
        return sorted((e for s in self.replicas + self.workers for e in s.exits), key=_at)

    def start(self, timeout: float) -> bool:
        """Start the services (the first alone, so that it leads), then the workers."""
        first, *others = self.replicas
        first.start()
        if not first.wait_ready(timeout):
            return False
        for replica in others:
            replica.start()
        for worker in self.workers:
            worker.start()
        return self.wait_ready(timeout)

    def wait_ready(self, timeout: float) -> bool:
        """Wait until every service is ready and every worker runs (False after ``timeout``)."""
        deadline = time.monotonic() + timeout
        for supervisor in self.replicas + self.workers:
            if not supervisor.wait_ready(max(0.1, deadline - time.monotonic())):
                return False
        return True

    def ready_generations(self) -> tuple[int, ...] | None:
        """Each process's generation while all are ready, else None (for stable readiness)."""
        generations: list[int] = []
        for supervisor in self.replicas + self.workers:
            generation, process = supervisor.current()
            if process is None or not supervisor.ready():
                return None
            generations.append(generation)
        return tuple(generations)

    def leader(self) -> int | None:
        """The index of the service process that leads (a standby pair), if one does now."""
        for index, replica in enumerate(self.replicas):
            status, body = readyz(replica.base_url)
            if status == 200 and body.get("role") == "leader":
                return index
        return None

    def stop(self) -> dict[str, int | None]:
        """SIGTERM every process (workers first), each exit code by name; close the proxies."""
        codes = {worker.name: worker.stop() for worker in self.workers}
        codes.update({replica.name: replica.stop() for replica in self.replicas})
        if not self._closed:
            self._closed = True
            for proxy in self.proxies:
                proxy.close()
            self._loop.close()
        return codes


def _serve(
    launcher: Launcher, url: str, port: int, index: int, flag: str | None
) -> Callable[[], subprocess.Popen[bytes]]:
    return lambda: launcher.serve(url, port, f"serve{index}", flag)


def _worker(launcher: Launcher, url: str, index: int) -> Callable[[], subprocess.Popen[bytes]]:
    return lambda: launcher.worker(url, f"worker{index}")


def _at(item: Exit) -> float:
    return item.at
