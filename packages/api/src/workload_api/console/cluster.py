"""The cluster (SPEC §16, §14): the live replicas and the shards each owns, and this process.

What ``GET /api/v1/cluster`` answers (a coordinator leading alone is its one member, owning
every shard), with what ``GET /api/v1/status`` says of the process that served the page: its
role (leader, standby or replica), its coordinator epoch, its replica id. Viewers may read it.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.responses import Response
from starlette.routing import Route

from workload_api.console._web import Console, View

__all__ = ["routes", "shard_ranges"]


def shard_ranges(shards: Iterable[int]) -> str:
    """Shard numbers as runs of consecutive ones: ``0–3, 8, 10–11``."""
    runs: list[list[int]] = []
    for shard in sorted(shards):
        if runs and shard == runs[-1][1] + 1:
            runs[-1][1] = shard
        else:
            runs.append([shard, shard])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in runs) or "none"


async def cluster_page(view: View) -> Response:
    usecases = view.console.usecases.status
    cluster = await usecases.cluster()
    status = await usecases.status()
    replicas = [{**r, "ranges": shard_ranges(r["shards"])} for r in cluster["replicas"]]
    return await view.render(
        "cluster.html",
        shards_total=cluster["shards_total"],
        replicas=replicas,
        this={k: status[k] for k in ("status", "role", "epoch", "replica_id")},
    )


def routes(console: Console) -> list[Route]:
    """The cluster page."""
    return [console.page("/ui/cluster", cluster_page)]
