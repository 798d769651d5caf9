"""A coordinator refuses a database replicas used moments ago (SPEC §16: modes do not mix).

Replicas hold the coordinator lock in shared mode, so a coordinator cannot take it while one
runs. But replicas that all died at once (each fail-stopped, their machine lost) hold nothing
while their supervisors restart them: only their rows in ``replicas`` say they used the
database. A coordinator started then would take the database from them, and they would refuse
it when they come back. So a coordinator (plain or ``--standby``) also refuses the database
while a replica's lease runs, or ran out less than :data:`REPLICA_RESTART_GRACE_SECONDS` ago.
A replica that stopped on SIGTERM deleted its row: the database is free for a coordinator at
once (operations.md, going back from replicas to a standby pair).
"""

from __future__ import annotations

from workload_domain.errors import ModeConflict
from workload_store_postgres._session import Conn, fetch_one

__all__ = ["REPLICA_RESTART_GRACE_SECONDS", "refuse_recent_replicas"]

REPLICA_RESTART_GRACE_SECONDS = 30
"""How long after a replica's lease ran out a coordinator still refuses the database."""

_REPLICAS_USED_IT = (
    "replicas (`workload serve --replica`) used this database less than "
    f"{REPLICA_RESTART_GRACE_SECONDS} s ago and may be restarting; a coordinator cannot run "
    "beside them (stop them with SIGTERM, or wait until none has been seen for "
    f"{REPLICA_RESTART_GRACE_SECONDS} s)"
)
_RECENT_REPLICAS = """
SELECT EXISTS (
    SELECT 1 FROM replicas WHERE lease_expires_at > now() - make_interval(secs => %(grace)s)
)
"""


async def refuse_recent_replicas(conn: Conn) -> None:
    """Raise ``ModeConflict`` when a replica was live within the grace (see the module)."""
    exists = await fetch_one(conn, "SELECT to_regclass('replicas') IS NOT NULL", {})
    if not (exists and exists[0]):
        return  # a database migrated before replicas existed (migration 0008)
    row = await fetch_one(conn, _RECENT_REPLICAS, {"grace": REPLICA_RESTART_GRACE_SECONDS})
    if row and row[0]:
        raise ModeConflict(_REPLICAS_USED_IT, mode_in_use="replicas")
