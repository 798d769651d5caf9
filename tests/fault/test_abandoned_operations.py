"""An abandoned operation on a dedicated session never kills the process (found by the soak).

The chaos soak in replica mode saw replicas die with SIGABRT (exit -6) around faults: a lock
check or a lease renewal that outlasted its bound was abandoned by closing its connection while
the operation still ran, and libuv (uvloop) aborts the process when it then applies a watch to
the closed descriptor (``epoll_ctl``: ``EBADF``). Now abandoning shuts the socket down and
closes the connection once the operation has ended. A real process on uvloop abandons twenty
operations against a real PostgreSQL, with a busy loop beside them; before the fix it aborted
within the first few.
"""

from __future__ import annotations

import subprocess
import sys

from tests.fault.conftest import PgCluster

COUNT = 20


def test_abandoning_operations_never_aborts_the_process(pg: PgCluster) -> None:
    url = pg.create_database()
    result = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-m", "tests.fault.abandoning", url, str(COUNT)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert result.stdout.strip() == f"abandoned {COUNT}", result.stdout
    assert result.stderr == "", result.stderr
