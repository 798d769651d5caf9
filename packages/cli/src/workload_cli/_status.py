"""``workload status``: the service at a glance, on one screen (SPEC §12).

Role and epoch of the process that answers, whether it is ready, runs not yet terminal,
workers seen lately, approvals waiting, and every queue with its work — one request
(``GET /api/v1/status``).
"""

from __future__ import annotations

import typer
from pydantic import BaseModel

from workload_cli._options import OutputOption, TokenOption, UrlOption
from workload_cli._session import session
from workload_cli._views import QUEUE_COLUMNS

__all__ = ["status"]


class _Summary(BaseModel):
    role: str
    epoch: int | None
    status: str
    runs_active: int
    workers_active: int
    approvals_pending: int


def status(
    ctx: typer.Context,
    *,
    url: UrlOption = None,
    token: TokenOption = None,
    output: OutputOption = None,
) -> None:
    """Show the service at a glance (viewer).

    Leader or standby, epoch, readiness, active runs and workers, pending approvals, queues.
    """
    with session(ctx, output, url=url, token=token) as s:
        current = s.client.status()
        if s.out.is_json:
            s.out.json(current.model_dump(mode="json"))
            return
        s.out.resource(_Summary.model_validate(current.model_dump()))
        s.out.echo("")
        s.out.listing(current.queues, QUEUE_COLUMNS)
