"""The worker against a fake control plane: claims, handlers, heartbeats, leases, reports."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
from typing import Any

import anyio
import httpx
import pytest

from tests.waiting import wait_until
from tests.worker.conftest import MakeWorker, eventually, serving
from tests.worker.fake_server import FakeControlPlane, lease_lost, problem
from workload_worker import Context, NonRetryableError

pytestmark = pytest.mark.anyio


class Refused(NonRetryableError):
    """A handler's own non-retryable error."""


async def test_async_and_sync_handlers_complete_with_their_output(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker()
    threads: dict[str, int] = {}

    @worker.action("double")
    async def double(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        threads["async"] = threading.get_ident()
        return {"value": input["n"] * 2, "key": ctx.idempotency_key}

    @worker.action("shout")
    def shout(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        threads["sync"] = threading.get_ident()
        return {"text": input["text"].upper(), "seen": [ctx.run_input, ctx.upstream, ctx.attempt]}

    a = fake.add("double", {"n": 21}, run_id="run-7", task_key="twice")
    b = fake.add("shout", {"text": "hi"}, run_input={"doc": 7}, upstream={"a": {"x": 1}})
    async with serving(worker):
        await eventually(lambda: fake.recorded(a.attempt_id) and fake.recorded(b.attempt_id))
    assert (a.status, a.output) == ("succeeded", {"value": 42, "key": "run-7:twice"})
    assert (b.status, b.output) == (
        "succeeded",
        {"text": "HI", "seen": [{"doc": 7}, {"a": {"x": 1}}, 1]},
    )
    assert threads["async"] == threading.get_ident()  # on the event loop
    assert threads["sync"] != threading.get_ident()  # in a thread
    assert fake.claims[0]["actions"] == ["double", "shout"]  # only what it declares
    assert fake.claims[0]["queues"] == ["default"]
    assert {a.worker_id, b.worker_id} == {"w-test"}


async def test_claims_ask_only_for_the_free_slots(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker(concurrency=3)
    gates: dict[str, anyio.Event] = {}
    open_all = False

    @worker.action("hold")
    async def hold(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        gates[ctx.attempt_id] = anyio.Event()
        if not open_all:
            await gates[ctx.attempt_id].wait()
        return {}

    attempts = [fake.add("hold") for _ in range(5)]
    async with serving(worker):
        await eventually(lambda: len(gates) == 3, message="three handlers run")
        assert [c["max_attempts"] for c in fake.claims] == [3]  # full: no claim in flight
        assert worker.in_flight == 3
        gates[attempts[0].attempt_id].set()
        await eventually(lambda: len(gates) == 4, message="a freed slot is filled")
        assert [c["max_attempts"] for c in fake.claims] == [3, 1]
        open_all = True
        for gate in list(gates.values()):
            gate.set()
        await eventually(lambda: all(fake.recorded(a.attempt_id) for a in attempts))
    assert all(c["max_attempts"] <= 3 for c in fake.claims)


async def test_a_tool_call_runs_its_action_with_the_arguments(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker()
    seen: list[tuple[str, str | None, str | None, dict[str, Any]]] = []

    @worker.action("search")
    async def search(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        seen.append((ctx.kind, ctx.tool_call_id, ctx.tool, input))
        return {"hits": 1, "key": ctx.idempotency_key}

    call = fake.add("search", {"q": "lease"}, kind="tool_call", tool_call_id="call-9")
    async with serving(worker):
        await eventually(lambda: fake.recorded(call.attempt_id))
    assert seen == [("tool_call", "call-9", "t", {"q": "lease"})]
    assert call.output == {"hits": 1, "key": f"run-1:{call.task_key}:call-9"}


# -- heartbeats --------------------------------------------------------------------------------


async def test_heartbeats_every_third_of_the_lease(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker()

    @worker.action("slow")
    async def slow(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        await eventually(lambda: len(fake.beats_of(ctx.attempt_id)) >= 5, message="5 heartbeats")
        return {"ok": True}

    attempt = fake.add("slow", heartbeat_timeout=0.6)
    async with serving(worker):
        await eventually(lambda: fake.recorded(attempt.attempt_id))
    # Renewed in time all along: a lease that had lapsed would have refused the completion.
    assert attempt.status == "succeeded"
    beats = fake.beats_of(attempt.attempt_id)
    times = [fake.claim_times[0], *(b.at for b in beats)]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert all(gap >= 0.17 for gap in gaps), gaps  # about 0.2 s apart, not flooding
    assert all(b.status == 200 and b.progress is None for b in beats)


async def test_a_heartbeat_that_hangs_is_sent_again_while_the_lease_holds(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    # A heartbeat waited for the client's timeout (30 s) whatever the lease: one that hung (a
    # half-open connection, a frozen replica) lost a lease of up to 30 s that the next one
    # would have kept. It is given up after an interval (a third of the lease, here 1 s) and
    # sent again at once, with the rest of the lease to spare.
    worker = make_worker()

    def renewed(attempt_id: str) -> int:
        return sum(b.status == 200 for b in fake.beats_of(attempt_id))

    @worker.action("slow")
    async def slow(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        await eventually(lambda: renewed(ctx.attempt_id) >= 3, message="3 heartbeats renewed")
        return {"ok": True}

    attempt = fake.add("slow", heartbeat_timeout=3.0)
    fake.stall("heartbeat", 60.0)  # the first one hangs
    async with serving(worker):
        await eventually(lambda: fake.recorded(attempt.attempt_id) or attempt.status != "running")
    assert attempt.status == "succeeded"
    assert renewed(attempt.attempt_id) >= 3


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_context_heartbeat_sends_progress_soon(
    fake: FakeControlPlane, make_worker: MakeWorker, kind: str
) -> None:
    worker = make_worker()

    def sent(attempt_id: str) -> bool:
        return any(b.progress == {"done": 1} for b in fake.beats_of(attempt_id))

    if kind == "async":

        @worker.action("step")
        async def step(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
            ctx.heartbeat({"done": 1})
            await eventually(lambda: sent(ctx.attempt_id), message="progress sent")
            return {}

    else:

        @worker.action("step")
        def step_sync(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
            ctx.heartbeat({"done": 1})
            wait_until(lambda: sent(ctx.attempt_id), message="progress sent")
            return {}

    # A long lease: the heartbeat is the one the handler asked for, not the regular one.
    attempt = fake.add("step", heartbeat_timeout=60)
    async with serving(worker):
        await eventually(lambda: fake.recorded(attempt.attempt_id))
    assert attempt.progress == {"done": 1}
    assert attempt.status == "succeeded"


async def test_progress_over_the_limit_is_dropped_and_the_lease_kept(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker()

    @worker.action("big")
    async def big(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        ctx.heartbeat({"blob": "x" * 70_000})
        await eventually(
            lambda: [b.status for b in fake.beats_of(ctx.attempt_id)][:2] == [413, 200]
        )
        return {}

    attempt = fake.add("big", heartbeat_timeout=60)
    async with serving(worker):
        await eventually(lambda: fake.recorded(attempt.attempt_id))
    assert attempt.status == "succeeded"
    assert attempt.progress is None


# -- leases lost and timeouts -----------------------------------------------------------------


async def test_lease_lost_on_heartbeat_cancels_the_handler_and_drops_its_result(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker()
    contexts: list[Context] = []
    cancelled = anyio.Event()

    @worker.action("long")
    async def long(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        contexts.append(ctx)
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        return {}

    attempt = fake.add("long", heartbeat_timeout=0.3)
    async with serving(worker):
        await eventually(lambda: contexts)
        fake.cancel(attempt.attempt_id)  # the run is canceled: the next heartbeat learns it
        with anyio.fail_after(5):
            await cancelled.wait()
        await eventually(lambda: worker.in_flight == 0)
    [ctx] = contexts
    assert ctx.cancelled.is_set()
    assert ctx.cancel_reason == "lease_lost"
    assert fake.beats_of(attempt.attempt_id)[-1].status == 409
    assert fake.reports_of(attempt.attempt_id) == []  # the result is dropped, never reported


async def test_a_sync_handler_sees_cancelled_and_its_late_result_is_dropped(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker()
    finished = threading.Event()

    @worker.action("loop")
    def loop(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        wait_until(ctx.cancelled.is_set, message="cancelled")
        finished.set()
        return {"late": True}

    attempt = fake.add("loop", heartbeat_timeout=0.3)
    async with serving(worker):
        await eventually(lambda: fake.beats_of(attempt.attempt_id))
        fake.cancel(attempt.attempt_id)
        await eventually(finished.is_set, message="the thread saw cancelled")
        await eventually(lambda: worker.in_flight == 0)
    assert fake.reports_of(attempt.attempt_id) == []


async def test_timeout_at_cancels_the_handler_without_a_report(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker()
    contexts: list[Context] = []

    @worker.action("stuck")
    async def stuck(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        contexts.append(ctx)
        await anyio.sleep_forever()
        return {}

    attempt = fake.add("stuck", timeout=0.3, heartbeat_timeout=60)
    async with serving(worker):
        await eventually(lambda: contexts and contexts[0].cancelled.is_set(), message="cancelled")
        await eventually(lambda: worker.in_flight == 0)
    assert contexts[0].cancel_reason == "timed_out"
    # The server times the attempt out itself; the worker only stops and says nothing.
    assert fake.reports_of(attempt.attempt_id) == []


async def test_a_sync_handler_that_ignores_its_cancellation_keeps_its_slot(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    # A thread cannot be cancelled: one whose attempt timed out but which goes on running
    # holds its slot of `concurrency` until it returns, so threads never pile up.
    worker = make_worker(concurrency=1, grace_seconds=0.1)
    lock = threading.Lock()
    running = peak = 0
    release = threading.Event()

    @worker.action("deaf")
    def deaf(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        release.wait(10)  # ignores ctx.cancelled
        with lock:
            running -= 1
        return {}

    first = fake.add("deaf", timeout=0.2, heartbeat_timeout=60)
    others = [fake.add("deaf", timeout=0.2, heartbeat_timeout=60) for _ in range(3)]
    async with serving(worker):
        await eventually(lambda: worker.in_flight == 0, message="the first attempt abandoned")
        await anyio.sleep(0.5)  # several claim rounds: none may take another attempt
        assert [a.status for a in others] == ["queued"] * 3
        release.set()  # the deaf thread returns: its slot is free, the others run
        await eventually(lambda: all(a.status == "succeeded" for a in others))
    assert peak == 1
    assert first.status != "succeeded"


def test_a_heartbeat_while_the_workers_loop_is_stopped_does_not_wait_for_it(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    # An application that drives the worker's loop itself may stop it (`run_until_complete`
    # of something else returns) while a sync handler runs: the handler's ctx.heartbeat()
    # wakes the heartbeat loop for later, and goes on at once rather than wait for the loop.
    worker = make_worker(concurrency=1)
    started, release, beaten = threading.Event(), threading.Event(), threading.Event()

    @worker.action("slow")
    def slow(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        started.set()
        release.wait(10)
        ctx.heartbeat({"step": 1})
        beaten.set()
        return {"ok": True}

    attempt = fake.add("slow", heartbeat_timeout=60)

    async def serve() -> None:
        async with serving(worker):
            await anyio.sleep_forever()

    async def handler_started() -> None:
        await eventually(started.is_set, message="the handler started")

    async def finish() -> None:
        await eventually(lambda: attempt.status == "succeeded", message="reported")
        main.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await main

    loop = asyncio.new_event_loop()
    try:
        main = loop.create_task(serve())
        loop.run_until_complete(handler_started())  # the loop stops, the handler runs on
        release.set()
        assert beaten.wait(5), "ctx.heartbeat() waited for a loop that does not run"
        loop.run_until_complete(finish())  # the loop runs again: the attempt is reported
    finally:
        release.set()
        loop.close()


async def test_an_unreadable_claim_item_is_failed_and_the_others_run(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    # One item out of step with this worker's SDK (upstream null) made the whole answer
    # unreadable: every attempt in it stayed leased to this worker, run by nobody, until its
    # lease ran out. The readable ones run; the other is failed at once, retryable.
    worker = make_worker(concurrency=4)

    @worker.action("echo")
    async def echo(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        return {"echo": input}

    good = fake.add("echo", {"n": 1})
    bad = fake.add("echo", {"n": 2})
    bad.upstream = None  # type: ignore[assignment]
    async with serving(worker):
        await eventually(lambda: fake.recorded(good.attempt_id) and fake.recorded(bad.attempt_id))
    assert good.output == {"echo": {"n": 1}}
    report = fake.recorded(bad.attempt_id)
    assert report is not None
    assert report.route == "fail"
    error = report.body["error"]
    assert (error["code"], error["retryable"]) == ("unreadable_claim", True)
    assert "upstream" in error["message"]


# -- outcomes ------------------------------------------------------------------------------------


async def _fails_with_value_error(ctx: Context, input: dict[str, Any]) -> Any:
    raise ValueError("bad input")


def _fails_refused(ctx: Context, input: dict[str, Any]) -> Any:
    raise Refused("will never work")


async def _fails_with_a_code(ctx: Context, input: dict[str, Any]) -> Any:
    raise NonRetryableError("no such document", code="document_not_found")


def _returns_a_list(ctx: Context, input: dict[str, Any]) -> Any:
    return [1, 2]


async def _returns_no_json(ctx: Context, input: dict[str, Any]) -> Any:
    return {"when": {1, 2}}


def _fails_at_length(ctx: Context, input: dict[str, Any]) -> Any:
    raise RuntimeError("x" * 10_000)


OUTCOMES = [
    ("exception", _fails_with_value_error, "ValueError", "bad input", True),
    ("non-retryable", _fails_refused, "Refused", "will never work", False),
    ("non-retryable-code", _fails_with_a_code, "document_not_found", "no such document", False),
    ("not-a-dict", _returns_a_list, "invalid_output", "returned list", False),
    ("not-json", _returns_no_json, "invalid_output", "not JSON", False),
    ("long-message", _fails_at_length, "RuntimeError", "x" * 100, True),
]


@pytest.mark.parametrize(
    ("handler", "code", "message", "retryable"),
    [case[1:] for case in OUTCOMES],
    ids=[case[0] for case in OUTCOMES],
)
async def test_failures_are_reported_with_code_message_and_retryable(
    fake: FakeControlPlane,
    make_worker: MakeWorker,
    handler: Any,
    code: str,
    message: str,
    retryable: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    worker = make_worker()
    worker.action("act")(handler)
    attempt = fake.add("act")
    async with serving(worker):
        await eventually(lambda: fake.recorded(attempt.attempt_id))
    assert attempt.status == "failed"
    assert attempt.error is not None
    assert (attempt.error["code"], attempt.error["retryable"]) == (code, retryable)
    assert message in attempt.error["message"]
    assert len(attempt.error["message"]) <= 2000
    assert f"attempt {attempt.attempt_id}" in caplog.text


async def test_an_action_the_worker_does_not_serve_is_failed_retryable(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker()
    worker.action("known")(_fails_with_value_error)
    stray = fake.add("other")  # a server bug: it hands out an action nobody claimed
    item = fake._hand_out(stray, "w-test")
    fake.script("claim", httpx.Response(200, json={"attempts": [item]}))
    async with serving(worker):
        await eventually(lambda: fake.recorded(stray.attempt_id))
    assert stray.error == {
        "code": "unknown_action",
        "message": "this worker does not serve 'other'",
        "retryable": True,
    }


# -- reports ---------------------------------------------------------------------------------------


async def test_a_report_is_repeated_after_connection_errors_and_5xx(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker()
    worker.action("ok")(_ok)
    fake.script("complete", httpx.ConnectError("refused"), problem(503, "unavailable"))
    attempt = fake.add("ok")
    async with serving(worker):
        await eventually(lambda: fake.recorded(attempt.attempt_id))
    completes = [r for r in fake.requests if r.url.path.endswith("/complete")]
    assert len(completes) == 3
    assert len({r.content for r in completes}) == 1  # the same report each time
    assert attempt.output == {"ok": True}


async def test_a_report_the_server_could_not_record_now_is_sent_again(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    # 503 unavailable (Retry-After) is what a server answers a report it could not record now;
    # 409 revision_conflict is what an older one answered a report that met others on its run.
    # Neither recorded anything and the lease holds: the same report is sent again.
    worker = make_worker(backoff_initial_seconds=0.02, backoff_max_seconds=0.08)
    worker.action("ok")(_ok)
    busy = problem(503, "unavailable")
    busy.headers["Retry-After"] = "1"
    fake.script("complete", problem(409, "revision_conflict"), busy)
    attempt = fake.add("ok")
    async with serving(worker):
        await eventually(lambda: fake.recorded(attempt.attempt_id))
    completes = [r for r in fake.requests if r.url.path.endswith("/complete")]
    assert len(completes) == 3
    assert len({r.content for r in completes}) == 1
    assert attempt.output == {"ok": True}


async def test_a_report_answered_lease_lost_is_dropped_not_repeated(
    fake: FakeControlPlane, make_worker: MakeWorker, caplog: pytest.LogCaptureFixture
) -> None:
    worker = make_worker()
    worker.action("ok")(_ok)
    fake.script("complete", lease_lost("expired"))
    fake.add("ok")
    async with serving(worker):
        await eventually(lambda: [r for r in fake.requests if r.url.path.endswith("/complete")])
        await eventually(lambda: worker.in_flight == 0)
    assert len([r for r in fake.requests if r.url.path.endswith("/complete")]) == 1
    assert "lease lost (expired)" in caplog.text


async def _ok(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True}


# -- the server unreachable ---------------------------------------------------------------------


async def test_claims_back_off_on_connection_errors_and_5xx_then_recover(
    fake: FakeControlPlane, make_worker: MakeWorker, caplog: pytest.LogCaptureFixture
) -> None:
    worker = make_worker(backoff_initial_seconds=0.02, backoff_max_seconds=0.08)
    worker.action("ok")(_ok)
    failures: list[httpx.Response | Exception] = [httpx.ConnectError("refused")] * 3
    failures += [problem(503, "unavailable"), problem(500, "internal"), httpx.ReadTimeout("slow")]
    fake.script("claim", *failures)
    attempt = fake.add("ok")
    async with serving(worker):
        await eventually(lambda: fake.recorded(attempt.attempt_id))
        assert worker.is_serving  # never crashed
    claims = [r for r in fake.requests if r.url.path.endswith("/claim")]
    assert len(claims) >= 7
    assert caplog.text.count("claim failed") == 6


async def test_a_claim_refused_for_a_cap_waits_its_retry_after_then_recovers(
    fake: FakeControlPlane, make_worker: MakeWorker, caplog: pytest.LogCaptureFixture
) -> None:
    # ADR 0025: past a cap on waiting claims the server answers 429 with Retry-After (a
    # restarted worker's old claim may still be waiting there). The worker waits as asked,
    # longer than its own backoff, and claims again; it never stops serving.
    worker = make_worker(backoff_initial_seconds=0.01, backoff_max_seconds=0.02)
    worker.action("ok")(_ok)
    capped = problem(429, "too_many_requests", limit="per_worker")
    capped.headers["Retry-After"] = "1"
    fake.script("claim", capped, capped)
    attempt = fake.add("ok")
    started = anyio.current_time()
    async with serving(worker):
        await eventually(lambda: fake.recorded(attempt.attempt_id))
        assert worker.is_serving
    # Two refusals, each followed by a wait of at least its Retry-After, before the claim
    # that got the work.
    assert fake.claim_times[0] - started >= 2.0
    assert caplog.text.count("claim refused for now (429") == 2
    assert "claim refused:" not in caplog.text  # a cap is no error of the worker's
    assert attempt.output == {"ok": True}


async def test_a_refused_claim_is_logged_and_backed_off(
    fake: FakeControlPlane, make_worker: MakeWorker, caplog: pytest.LogCaptureFixture
) -> None:
    worker = make_worker()
    worker.action("ok")(_ok)
    fake.token = "another"
    async with serving(worker):
        await eventually(lambda: len(fake.requests) >= 3, message="claims go on")
        assert worker.is_serving
    assert "claim refused (401)" in caplog.text


# -- stopping -----------------------------------------------------------------------------------


async def test_stop_drains_running_handlers_and_claims_no_more(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker(grace_seconds=10, concurrency=1)  # busy: no claim in flight
    gate = anyio.Event()
    started: list[str] = []

    @worker.action("hold")
    async def hold(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        started.append(ctx.attempt_id)
        await gate.wait()
        return {"drained": True}

    first = fake.add("hold", heartbeat_timeout=0.6)
    async with serving(worker, stop_now=False):
        await eventually(lambda: started)
        worker.stop()
        later = fake.add("hold")  # arrives while the worker drains
        await eventually(lambda: len(fake.beats_of(first.attempt_id)) >= 3, message="beats on")
        assert worker.is_serving
        gate.set()
    assert first.output == {"drained": True}
    assert later.status == "queued"  # never claimed


async def test_stopping_cuts_off_a_waiting_claim_while_handlers_keep_their_grace(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    # A claim waiting on the server would keep an idle worker up to wait_seconds: it is cut
    # off at once (the server hands nothing to a worker that hung up); handlers still drain.
    worker = make_worker(grace_seconds=10, concurrency=2, wait_seconds=20)
    gate = anyio.Event()
    started: list[str] = []

    @worker.action("hold")
    async def hold(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        started.append(ctx.attempt_id)
        await gate.wait()
        return {"drained": True}

    first = fake.add("hold", heartbeat_timeout=0.6)
    async with serving(worker, stop_now=False):
        await eventually(lambda: started and len(fake.claims) == 2, message="a claim waits")
        worker.stop()
        await eventually(lambda: fake.hung_up == 1, message="the waiting claim is cut off")
        late = fake.add("hold")  # no claim is waiting any more: nobody takes it
        await eventually(lambda: len(fake.beats_of(first.attempt_id)) >= 2, message="beats on")
        assert worker.is_serving  # the running handler keeps its grace period
        gate.set()
    assert first.output == {"drained": True}
    assert late.status == "queued"
    assert fake.answered == [1]  # the first claim's; none after the stop
    assert len(fake.claims) == 2


async def test_after_the_grace_period_handlers_are_cancelled_and_reported_worker_shutdown(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker(grace_seconds=0.3)
    started: list[str] = []

    @worker.action("async")
    async def forever(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        started.append(ctx.attempt_id)
        await anyio.sleep_forever()
        return {}

    @worker.action("sync")
    def forever_sync(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        started.append(ctx.attempt_id)
        wait_until(ctx.cancelled.is_set, message="cancelled")
        return {}

    attempts = [fake.add("async"), fake.add("sync")]
    async with serving(worker, stop_now=False):
        await eventually(lambda: len(started) == 2)
    for attempt in attempts:
        assert attempt.status == "failed"
        assert attempt.error is not None
        assert (attempt.error["code"], attempt.error["retryable"]) == ("worker_shutdown", True)


async def test_stop_now_skips_the_grace_period(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker(grace_seconds=600)
    worker.action("forever")(_forever)
    attempt = fake.add("forever")
    with anyio.fail_after(10):
        async with serving(worker, stop_now=True):
            await eventually(lambda: worker.in_flight == 1)
    assert attempt.error is not None
    assert attempt.error["code"] == "worker_shutdown"


async def test_cancelling_serve_reports_running_attempts(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker()
    worker.action("forever")(_forever)
    attempt = fake.add("forever")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(worker.serve)
        await eventually(lambda: worker.in_flight == 1)
        tasks.cancel_scope.cancel()
    assert not worker.is_serving
    assert attempt.error is not None
    assert attempt.error["code"] == "worker_shutdown"


async def _forever(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    await anyio.sleep_forever()
    return {}


async def test_logs_go_to_the_workload_worker_logger(
    fake: FakeControlPlane, make_worker: MakeWorker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="workload.worker")
    worker = make_worker()
    worker.action("ok")(_ok)
    attempt = fake.add("ok")
    async with serving(worker):
        await eventually(lambda: fake.recorded(attempt.attempt_id))
    names = {record.name for record in caplog.records}
    assert names == {"workload.worker"}
    assert f"attempt {attempt.attempt_id} (ok run-1/{attempt.task_key}#1): completed" in caplog.text
    assert attempt.lease_token is not None
    assert all(attempt.lease_token not in record.getMessage() for record in caplog.records)


# A file name read with surrogateescape: not UTF-8, so not sendable as it is.
_UNSENDABLE = b"caf\xe9.txt".decode("utf-8", "surrogateescape")


async def test_text_that_cannot_be_sent_never_stops_the_worker(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker(concurrency=4)

    @worker.action("output")
    async def bad_output(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        return {"file": _UNSENDABLE}

    @worker.action("raise")
    async def bad_message(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        raise NonRetryableError(f"cannot read {_UNSENDABLE}: a\x00b", code="bad_input")

    @worker.action("progress")
    def bad_progress(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        ctx.heartbeat({"at": _UNSENDABLE, _UNSENDABLE: [1.5, float("inf")], "n": {1, 2}})
        wait_until(lambda: fake.beats_of(ctx.attempt_id), message="progress sent")
        return {"ok": True}

    output = fake.add("output")
    message = fake.add("raise")
    progress = fake.add("progress", heartbeat_timeout=60)
    async with serving(worker):
        await eventually(lambda: all(fake.recorded(a.attempt_id) for a in (output, message)))
        await eventually(lambda: fake.recorded(progress.attempt_id))
        later = fake.add("output")  # the worker still serves
        await eventually(lambda: fake.recorded(later.attempt_id))
    assert (output.status, output.error and output.error["code"]) == ("failed", "invalid_output")
    assert message.status == "failed"
    assert message.error == {
        "code": "bad_input",
        "message": "cannot read caf\ufffd.txt: a\ufffdb",
        "retryable": False,
    }
    assert progress.status == "succeeded"
    assert progress.progress == {"at": "caf\ufffd.txt", "caf\ufffd.txt": [1.5, None], "n": "{1, 2}"}
