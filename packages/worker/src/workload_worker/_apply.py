"""``Worker(workflows=[...], apply_on_start=True)``: apply the definitions when serving starts.

Applying writes definitions, which only an operator may do: the worker applies with an operator
token (``operator_token=``, else ``WORKLOAD_TOKEN``), never with its worker token. Without one
it applies nothing and says so in a warning, and serves all the same: the module that declares
the workflows runs on worker machines that hold a worker token only, and one place (a deploy
step, a developer's machine) holding an operator token applies them.

Each definition is applied by content (``client.workflows.apply``, SPEC §6 ``PUT``): a new
version when it changed, none when the server has it already, logged ``created`` or
``unchanged``. A refusal (an invalid definition, a token that may not write) stops the worker
with :class:`~workload_worker.errors.WorkflowApplyError`; no answer or a 5xx is tried again
with backoff, like a claim, until it is answered or the worker is stopped.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

import anyio

from workload_sdk import (
    TOKEN_ENV,
    APIConnectionError,
    AsyncClient,
    ServerError,
    WorkloadError,
    new_idempotency_key,
)
from workload_worker._backoff import Backoff
from workload_worker._serving import Serving
from workload_worker._workflow import Workflow
from workload_worker.errors import WorkerConfigError, WorkflowApplyError

__all__ = ["ApplyOnStart"]

logger = logging.getLogger("workload.worker")


@dataclass(frozen=True, slots=True)
class ApplyOnStart:
    """The workflows a worker applies when it starts, and how it reaches the server to do so.

    Attributes:
        workflows: The workflows (applied in this order).
        enabled: ``apply_on_start``: without it the workflows are only listed.
        token: An operator token; None reads ``WORKLOAD_TOKEN``.
        client: An SDK client holding an operator token, instead of one made from ``token``.
    """

    workflows: tuple[Workflow, ...] = ()
    enabled: bool = False
    token: str | None = None
    client: AsyncClient | None = None

    @classmethod
    def of(
        cls,
        workflows: Sequence[Workflow],
        enabled: bool,
        token: str | None,
        client: AsyncClient | None,
    ) -> ApplyOnStart:
        """Checked settings.

        Raises:
            WorkerConfigError: something that is not a :class:`Workflow`, or an id used twice.
        """
        if isinstance(workflows, Workflow):
            workflows = [workflows]
        for workflow in workflows:
            if not isinstance(workflow, Workflow):
                raise WorkerConfigError(f"workflows takes Workflow objects, not {workflow!r}")
        ids = [w.id for w in workflows]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise WorkerConfigError(f"workflow id(s) {', '.join(twice)} given twice")
        return cls(tuple(workflows), enabled, token, client)

    async def run(self, url: str | None, serving: Serving, backoff: Backoff) -> Exception | None:
        """Apply every workflow; the refusal that stops the worker, or None.

        A stop (``serving.draining``) ends it early, with None.
        """
        if not self.enabled or not self.workflows:
            return None
        ids = ", ".join(w.id for w in self.workflows)
        token = self.token or os.environ.get(TOKEN_ENV)
        if self.client is None and not token:
            logger.warning(
                "apply_on_start: no operator token (give operator_token= or set %s): "
                "workflow(s) %s not applied; a worker token never writes definitions",
                TOKEN_ENV,
                ids,
            )
            return None
        async with contextlib.AsyncExitStack() as stack:
            client = self.client
            if client is None:
                client = AsyncClient(base_url=url, token=token, max_retries=0)
                await stack.enter_async_context(client)
            for workflow in self.workflows:
                refused = await _apply(client, workflow, serving, backoff)
                if refused is not None or serving.draining.is_set():
                    return refused
        return None


async def _apply(
    client: AsyncClient, workflow: Workflow, serving: Serving, backoff: Backoff
) -> Exception | None:
    definition = workflow.definition()
    key = new_idempotency_key()  # the same for every try: a retried apply is one write
    while not serving.draining.is_set():
        with anyio.CancelScope() as scope:  # a stop cuts a try short (Serving.stop)
            serving.claim_scope = scope
            try:
                applied = await client.workflows.apply(definition, idempotency_key=key)
            except (APIConnectionError, ServerError) as exc:
                logger.warning("workflow %s: apply failed (%s); trying again", workflow.id, exc)
            except WorkloadError as exc:  # refused: an invalid definition, a token (401, 403)
                return WorkflowApplyError(workflow.id, exc)
            else:
                backoff.reset()
                outcome = "created" if applied.created else "unchanged"
                logger.info("workflow %s: version %d %s", workflow.id, applied.version, outcome)
                return None
            finally:
                serving.claim_scope = None
        if not scope.cancelled_caught:
            await serving.pause(backoff.next_delay())
    return None
