"""One TLS context for every test client of this process."""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def shared_tls() -> ssl.SSLContext:
    """The context to pass as ``verify=`` to a test's httpx client or call.

    httpx builds a context of its own for each client and each module-level call such as
    ``httpx.get`` (it loads the CA bundle: 25-90 ms), even for a loopback ``http://`` service
    that never uses it; a live service's four clients made that a quarter of each ``postgres``
    test's setup.
    """
    return httpx.create_ssl_context()
