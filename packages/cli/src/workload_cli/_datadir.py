"""Where the data directory and the development credentials file are.

Shared by ``serve`` (which writes ``credentials.json`` in embedded mode) and the client commands
(which read it). Imports nothing of the server, so the client commands may use it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["CREDENTIALS_FILE", "DATA_DIR_ENV", "credentials_path", "data_dir", "default_data_dir"]

CREDENTIALS_FILE = "credentials.json"
DATA_DIR_ENV = "WORKLOAD_DATA_DIR"


def default_data_dir() -> Path:
    """The user data directory of the platform (e.g. ``~/.local/share/workload``)."""
    import platformdirs  # noqa: PLC0415 - only when a command needs the directory

    return Path(platformdirs.user_data_dir("workload", appauthor=False))


def data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The data directory: ``WORKLOAD_DATA_DIR``, else the platform's user data directory."""
    env = os.environ if environ is None else environ
    configured = env.get(DATA_DIR_ENV)
    return (Path(configured) if configured else default_data_dir()).expanduser().resolve()


def credentials_path(directory: Path) -> Path:
    """The development credentials file of a data directory."""
    return directory / CREDENTIALS_FILE
