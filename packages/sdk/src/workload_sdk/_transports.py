"""The transports the clients make: httpx's, checking idle connections cheaper on asyncio.

httpx's connection pool (httpcore) asks every idle connection, at every request it assigns and
every response it releases, whether its socket has become readable (the server closed it). On
asyncio, httpcore's stream answers through anyio's attribute lookup, which builds a mapping of
every socket attribute and calls ``getpeername()`` each time: with a worker's dozens of kept
connections, 12 % of its py-spy samples were those mappings. :class:`AsyncPoolTransport` gives the
pool streams that look their socket up once, when connected, and answer the same question with
the same ``poll()``; the blocking client's pool already reads its socket directly (ADR 0043).

A proxy named in the environment (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``) makes the
clients keep httpx's own transport, which routes through it. httpcore (and with it anyio) is
imported at the first client made, as httpx imports it.
"""

from __future__ import annotations

import urllib.request

import httpx

__all__ = ["AsyncPoolTransport", "PoolTransport", "environment_proxies"]


def environment_proxies() -> bool:
    """Whether the environment names a proxy for HTTP, HTTPS or all (httpx routes through it).

    The same three keys of ``urllib.request.getproxies()`` httpx reads; ``NO_PROXY`` alone
    routes nothing, and other schemes' proxies do not concern httpx.
    """
    found = urllib.request.getproxies()
    return any(found.get(scheme) for scheme in ("http", "https", "all"))


def PoolTransport(limits: httpx.Limits) -> httpx.HTTPTransport | None:  # noqa: N802 - twin
    """The blocking client's transport: httpx's own (None: httpx makes it, proxies included)."""
    return None


def AsyncPoolTransport(limits: httpx.Limits) -> httpx.AsyncBaseTransport | None:  # noqa: N802
    """The asyncio client's transport; None where the environment names a proxy."""
    if environment_proxies():
        return None
    from workload_sdk._kept_sockets import KeptSocketTransport  # noqa: PLC0415 - as httpx does

    return KeptSocketTransport(limits)
