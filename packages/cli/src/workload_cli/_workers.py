"""``workload workers list`` and ``workload queues list``: what the remote workers are doing."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import typer

from workload_cli._output import Column
from workload_cli._session import Session, client_command
from workload_cli._views import QUEUE_COLUMNS, WORKER_COLUMNS
from workload_sdk import Client

__all__ = ["queues_app", "workers_app"]

T = TypeVar("T")

workers_app = typer.Typer(help="The workers the server has seen claim work.", no_args_is_help=True)
queues_app = typer.Typer(help="The queues of remote work.", no_args_is_help=True)


def _listing(
    fetch: Callable[[Client], Iterable[T]], columns: list[Column[T]]
) -> Callable[..., Any]:
    """A ``list`` command printing what ``fetch`` reads, in the chosen format."""

    @client_command
    def list_command(s: Session) -> None:
        s.out.listing(fetch(s.client), columns)

    return list_command


workers_app.command(
    "list",
    help="List the workers seen: status (active or gone), attempts in flight, queues, actions.",
)(_listing(lambda client: client.workers.list(limit=200), WORKER_COLUMNS))
queues_app.command(
    "list",
    help="List every queue with work or history: attempts queued and running, the oldest wait.",
)(_listing(lambda client: client.queues.list(), QUEUE_COLUMNS))
