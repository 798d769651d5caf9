"""The chaos soak's own parts, on their own: its settings, its database proxy, its monitor.

The soak (``nox -s chaos``) is too long for the default sessions; what decides whether its
verdicts can be trusted is tested here: that the proxy really holds bytes and connections during
a partition and delivers them after it, that an epoch going back or a takeover is seen in the
samples, and that every bad setting is refused with a message.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from benchmarks.chaos.faults import Fault
from benchmarks.chaos.monitor import Monitor, Sample
from benchmarks.chaos.proxy import DatabaseProxy, ProxyLoop
from benchmarks.chaos.report import _faults, error_line_findings, log_digest, service_findings
from benchmarks.chaos.service import Exit, free_port
from benchmarks.chaos.settings import (
    SERVICE_KINDS,
    WORKER_KINDS,
    SettingsError,
    fault_kinds,
    parse_settings,
)

# -- settings -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--workers", "-1"],
        ["--workers", "17"],
        ["--workers", "four"],
        ["--replicas", "0"],
        ["--replicas", "5"],
        ["--replicas", "1.5"],
        ["--minutes", "4"],
        ["--minutes", "16"],
        ["--seed", "x"],
        ["--lock-check", "fast"],
        ["--lock-check", "0.05"],
        ["--lock-check", "6"],
    ],
)
def test_a_bad_setting_is_refused_with_its_name(argv: list[str]) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings(argv, env={})
    name = argv[0].removeprefix("--")
    assert name in str(caught.value).lower()


def test_the_shape_decides_the_processes_and_the_faults() -> None:
    single = parse_settings([], env={})
    assert (single.workers, single.replicas, single.serve_flag) == (0, 1, None)
    assert fault_kinds(workers=0, replicas=1) == SERVICE_KINDS
    pair = parse_settings(["--workers", "4", "--replicas", "2", "--minutes", "10"], env={})
    assert (pair.workers, pair.replicas, pair.serve_flag) == (4, 2, "--standby")
    assert pair.fault_seconds == 600
    assert {w["id"] for w in pair.workflows} >= {"chaos-remote", "chaos-agent"}
    replicas = parse_settings(["--replicas", "3", "--replica"], env={})
    assert replicas.serve_flag == "--replica"
    # Environment first, the command line wins.
    from_env = parse_settings(["--workers", "2"], env={"CHAOS_WORKERS": "3", "CHAOS_REPLICAS": "2"})
    assert (from_env.workers, from_env.replicas) == (2, 2)


def test_the_lock_check_is_longer_when_processes_share_the_cores() -> None:
    assert parse_settings([], env={}).lock_check_interval_seconds == 0.2
    for argv in (["--workers", "1"], ["--replicas", "2"], ["--replica"]):
        assert parse_settings(argv, env={}).lock_check_interval_seconds == 0.5, argv
    chosen = parse_settings(["--replica", "--lock-check", "0.3"], env={})
    assert chosen.lock_check_interval_seconds == 0.3
    assert (
        parse_settings([], env={"CHAOS_LOCK_CHECK_SECONDS": "1"}).lock_check_interval_seconds == 1
    )


def test_a_smoke_run_injects_every_kind_once_and_a_full_run_twice() -> None:
    smoke = parse_settings(["--smoke", "--workers", "2"], env={})
    kinds = SERVICE_KINDS + WORKER_KINDS
    assert smoke.fault_count == len(kinds)
    full = parse_settings(["--workers", "4", "--replicas", "2", "--minutes", "10"], env={})
    assert full.fault_count >= 2 * len(kinds)


# -- the proxy ----------------------------------------------------------------------------------


@pytest.fixture
def echo_socket(tmp_path: Path) -> Iterator[str]:
    """A Unix-socket server (standing in for PostgreSQL) that echoes what it receives."""
    path = str(tmp_path / "echo.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield path
    stop.set()
    thread.join(timeout=5)
    server.close()


@pytest.fixture
def proxy(echo_socket: str) -> Iterator[DatabaseProxy]:
    loop = ProxyLoop()
    made = DatabaseProxy(loop, echo_socket, free_port())
    yield made
    made.close()
    loop.close()


def _connect(proxy: DatabaseProxy) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    conn.settimeout(5)
    return conn


def test_the_proxy_relays(proxy: DatabaseProxy) -> None:
    with _connect(proxy) as conn:
        conn.sendall(b"SELECT 1")
        assert conn.recv(100) == b"SELECT 1"


def test_a_partition_holds_bytes_and_new_connections_and_delivers_them_after(
    proxy: DatabaseProxy,
) -> None:
    with _connect(proxy) as before:
        before.sendall(b"ping")
        assert before.recv(100) == b"ping"
        proxy.partition()
        time.sleep(0.1)
        before.sendall(b"held")
        before.settimeout(0.5)
        with pytest.raises(TimeoutError):
            before.recv(100)  # nothing gets through: no answer, and no reset either
        during = _connect(proxy)  # accepted, as a SYN would be retransmitted, not refused
        during.sendall(b"new")
        during.settimeout(0.3)
        with pytest.raises(TimeoutError):
            during.recv(100)
        proxy.heal()
        before.settimeout(5)
        during.settimeout(5)
        assert before.recv(100) == b"held"  # delivered late, not lost
        assert during.recv(100) == b"new"
        during.close()


def test_latency_delays_each_exchange(proxy: DatabaseProxy) -> None:
    with _connect(proxy) as conn:
        proxy.delay(0.3)
        time.sleep(0.05)
        began = time.monotonic()
        conn.sendall(b"slow")
        assert conn.recv(100) == b"slow"
        slowed = time.monotonic() - began
        proxy.heal()
        time.sleep(0.05)
        began = time.monotonic()
        conn.sendall(b"fast")
        assert conn.recv(100) == b"fast"
        # Both directions are delayed: at least two delays, and none once healed.
        assert slowed >= 0.6
        assert time.monotonic() - began < 0.3


# -- the monitor --------------------------------------------------------------------------------


def _sample(at: float, epoch: int, leader: str | None, *shards: tuple[int, str | None]) -> Sample:
    return Sample(at, epoch, leader, tuple((i, e, o) for i, (e, o) in enumerate(shards)))


def test_an_epoch_going_back_is_a_regression() -> None:
    monitor = Monitor("postgresql://unused", replica_mode=True)
    monitor.samples = [
        _sample(1.0, 3, "h-1", (1, "h-1"), (4, "h-2")),
        _sample(2.0, 3, "h-1", (2, "h-2"), (4, "h-2")),
        _sample(3.0, 2, "h-1", (2, "h-2"), (3, "h-2")),
    ]
    assert monitor.regressions() == [["coordinator", 3, 2], [1, 4, 3]]


def test_a_takeover_is_when_every_shard_is_in_other_hands() -> None:
    monitor = Monitor("postgresql://unused", replica_mode=True)
    monitor.samples = [
        _sample(1.0, 0, None, (1, "host-100"), (1, "host-200")),
        _sample(2.0, 0, None, (1, "host-100"), (2, "host-200")),  # still one of pid 100's
        _sample(3.0, 0, None, (2, None), (2, "host-200")),  # one shard without a live owner
        _sample(4.0, 0, None, (3, "host-200"), (2, "host-200")),
    ]
    assert monitor.takeover(100, since=1.5, until=10) == 4.0
    assert monitor.takeover(100, since=1.5, until=3.5) is None
    # pid 10 is not pid 100: names are matched on the whole "-<pid>" suffix.
    assert monitor.takeover(10, since=0, until=10) == 1.0


def test_a_standby_takeover_is_when_another_process_leads() -> None:
    monitor = Monitor("postgresql://unused", replica_mode=False)
    monitor.samples = [
        _sample(1.0, 1, "host-100"),
        _sample(2.0, 1, None),  # the lease ran out: nobody leads
        _sample(3.0, 2, "host-200"),
    ]
    assert monitor.takeover(100, since=0.5, until=10) == 3.0


# -- report --------------------------------------------------------------------------------------


def test_a_crash_inside_a_fault_window_is_a_finding_a_kill_is_not() -> None:
    window = Fault("sigterm", injected_at=10.0, injection_ended_at=10.0, recovered_at=12.0)
    window.window_end = 13.0
    exits = [
        Exit(generation=1, pid=101, code=-9, at=11.0, name="serve-0"),  # the soak's SIGKILL
        Exit(generation=2, pid=102, code=5, at=11.5, name="serve-1"),  # a fail-stop
        Exit(generation=3, pid=103, code=-6, at=12.0, name="serve-2"),  # SIGABRT: a crash
    ]
    findings = service_findings([window], exits, {"serve-0": 0})
    assert findings == {"killed_by_a_signal_the_soak_did_not_send": [["serve-2", 103, -6]]}


def test_error_lines_of_the_service_are_findings(tmp_path: Path) -> None:
    log = tmp_path / "serve0-0001.err.log"
    log.write_text(
        '{"level": "warning", "message": "fail-stop: lost its shards: renewing failed"}\n'
        '{"level": "error", "message": "fail-stop: unhandled errors in a TaskGroup"}\n'
        '{"level": "info", "message": "request"}\n',
        encoding="utf-8",
    )
    digest = log_digest([log])
    assert digest["error_messages"] == {"fail-stop: unhandled errors in a TaskGroup": 1}
    assert error_line_findings(digest) == {
        "service_error_lines": [["fail-stop: unhandled errors in a TaskGroup", 1]]
    }
    quiet = tmp_path / "serve0-0002.err.log"
    quiet.write_text('{"level": "warning", "message": "fail-stop: lost"}\n', encoding="utf-8")
    assert error_line_findings(log_digest([quiet])) == {}


def test_a_second_serve_that_kept_running_is_a_finding_and_is_reported() -> None:
    """Its exit code is None (it was killed at the bound): a finding, and the table still sorts."""
    refused = Fault("second_serve", 1.0, recovered_at=2.0, detail={"second_exit_code": 3})
    kept = Fault("second_serve", 5.0, recovered_at=6.0, detail={"second_exit_code": None})
    findings = service_findings([refused, kept], [], {})
    assert findings == {"second_serve_not_refused": [{"second_exit_code": None}]}
    table = _faults(("second_serve",), [refused, kept], [], Monitor("http://127.0.0.1:9", False), 0)
    assert table["by_kind"]["second_serve"]["exit_codes"] == {"3": 1, "None": 1}
