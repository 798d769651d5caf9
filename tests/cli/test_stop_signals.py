"""``StopSignals``: SIGTERM and SIGINT over a service command's life (``workload_cli._stop``).

The process-level behaviour (exit 0 at every point of ``workload serve``) is in
``tests/fault/test_signals.py``; these check the phases' rules in this process, with real
signals sent to itself.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import pytest

from workload_cli._stop import Interrupted, StopSignals


@pytest.fixture
def stops() -> StopSignals:
    return StopSignals(logging.getLogger("test.stop"))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_deferred_step_is_not_interrupted_and_the_stop_follows_it(
    stops: StopSignals, signum: signal.Signals
) -> None:
    seen: dict[str, object] = {}

    def step() -> None:
        with stops.deferred():
            os.kill(os.getpid(), signum)
            # Blocked, not only deferred: the programs the step starts inherit the mask, so a
            # signal to the process group does not kill them either.
            seen["blocked"] = signum in signal.pthread_sigmask(signal.SIG_BLOCK, [])
            seen["received"] = stops.received
            seen["finished"] = True

    with stops.installed(), pytest.raises(Interrupted) as raised:
        step()
    assert seen == {"blocked": True, "received": None, "finished": True}
    assert raised.value.signum == signum
    assert signum not in signal.pthread_sigmask(signal.SIG_BLOCK, []), "still blocked"


def test_a_signal_outside_any_phase_interrupts_at_once(stops: StopSignals) -> None:
    def busy() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler runs between two bytecodes
            pass

    with stops.installed(), pytest.raises(Interrupted):
        busy()


def test_a_phase_entered_after_a_signal_is_stopped_by_it(stops: StopSignals) -> None:
    """The signal came while the previous phase ended (its stop reached nobody)."""
    delivered: list[signal.Signals] = []
    with stops.installed():
        with pytest.raises(Interrupted), stops.deferred():
            os.kill(os.getpid(), signal.SIGTERM)

        async def phase() -> None:
            with stops.routed(delivered.append):
                await asyncio.sleep(0)  # the stop runs as the loop's next callback
                await asyncio.sleep(0)

        asyncio.run(phase())
    assert delivered == [signal.SIGTERM]


def test_after_closing_a_signal_stops_nothing(stops: StopSignals) -> None:
    delivered: list[signal.Signals] = []
    with stops.installed():
        stops.closing()
        os.kill(os.getpid(), signal.SIGINT)  # logged, not raised

        async def phase() -> None:
            with stops.routed(delivered.append):
                await asyncio.sleep(0)

        asyncio.run(phase())
    assert delivered == []
