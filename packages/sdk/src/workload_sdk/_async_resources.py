"""The workflow endpoints of both clients: ``client.workflows`` and ``client.versions``.

Every public method of every resource also takes two per-call options (one
:class:`~workload_sdk._base_client.CallOptions`): ``timeout=``, seconds or an
:class:`httpx.Timeout` for each HTTP request of the call (None keeps the client's), and
``extra_headers=``, headers added to each request of the call (a listing's every page, a retried
read's every try). The waits (``runs.wait``, ``runs.result``, ``runs.stream_events``) keep
``timeout=`` for the deadline of the whole wait.

``create`` is a POST write: it takes an ``idempotency_key``. When it is not given a fresh one (a
random UUID) is generated, and the write is sent exactly once: the SDK never retries a POST by
itself. If a write fails without an answer (:class:`~workload_sdk.APIConnectionError`) it may or
may not have been applied; retry it with the key the exception carries (``exc.idempotency_key``)
and the server answers the original outcome instead of writing twice (the resource as it was when
first written: a replayed cancel shows the run at that time).

``workflows.apply`` is a ``PUT``, idempotent by content on the server, and a write here like
the others: sent once, with an ``Idempotency-Key`` (given or generated), so that a retry with
``exc.idempotency_key`` replays the first answer, ``created`` included.
"""

# ruff: noqa: ASYNC109 - ``timeout=`` is each call's HTTP timeout, in both clients (SPEC §8):
# the same surface, not a cancellation scope.
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workload_sdk import _requests
from workload_sdk._async_pagination import AsyncListing, paged
from workload_sdk._async_sender import AsyncSender
from workload_sdk._base_client import ExtraHeaders, RequestTimeout
from workload_sdk._requests import ApiRequest
from workload_sdk.models import AppliedVersion, Page, Version, VersionSummary, Workflow
from workload_sdk.pagination import AsyncPager

__all__ = ["AsyncVersions", "AsyncWorkflows"]


class AsyncWorkflows(AsyncListing[Workflow]):
    """Workflows: the ids under which immutable versions are created; listed oldest first."""

    def _page_request(self, limit: int | None, cursor: str | None) -> ApiRequest[Page[Workflow]]:
        return _requests.list_workflows(limit, cursor)

    async def create(
        self,
        definition: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Version:
        """Create a workflow and its version 1.

        Args:
            definition: The workflow definition (``id``, ``tasks``, optional ``description``).
            idempotency_key: The write's ``Idempotency-Key``; generated when not given. Pass
                the same key to retry this write safely.
            timeout: This call's HTTP timeout (None: the client's).
            extra_headers: Headers added to this call's request.

        Returns:
            Version 1, with its normalized definition.

        Raises:
            InvalidRequest: ``invalid_definition``, with every problem in ``errors``.
            Conflict: ``workflow_exists``, or ``idempotency_key_reused`` (the key was used for
                another request).
        """
        request = _requests.create_workflow(definition, idempotency_key)
        return await self._sender.send(request, timeout, extra_headers)

    async def apply(
        self,
        definition: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> AppliedVersion:
        """Apply a definition by content: a new version only when it differs from the latest.

        ``PUT /workflows/{id}`` under the definition's own ``id``: a new workflow gets version 1,
        a changed definition the next version, the latest version's definition nothing (the
        server compares normalized definitions, so key order and defaults do not count).
        Concurrent identical applies create one version.

        Like every write it is sent once, never retried by the SDK, with an
        ``Idempotency-Key`` (a new one unless given): after
        :class:`~workload_sdk.APIConnectionError` send it again with ``exc.idempotency_key``
        and the first answer is replayed, ``created`` included (a retry without the key would
        say ``created=False`` for the version the lost try made).

        Args:
            definition: The workflow definition; its ``id`` names the workflow.
            idempotency_key: The ``Idempotency-Key`` to send (default: a new random one).
            timeout: This call's HTTP timeout (None: the client's).
            extra_headers: Headers added to this call's request.

        Returns:
            The latest version after the apply, with ``created`` (True: 201, this call created
            it; False: 200, nothing was written).

        Raises:
            TypeError: the definition is not a mapping.
            ValueError: the definition has no ``id``.
            InvalidRequest: ``invalid_definition``, with every problem in ``errors``.
            Forbidden: the token may not write definitions (a viewer's or a worker's).
            Conflict: ``idempotency_key_reused`` (the key was used for another request).
        """
        request = _requests.apply_workflow(definition, idempotency_key)
        version, response = await self._sender.send_with_response(request, timeout, extra_headers)
        return AppliedVersion.of(version, created=response.status_code == 201)

    async def get(
        self,
        workflow_id: str,
        *,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Workflow:
        """One workflow.

        Raises:
            NotFound: ``workflow_not_found``.
        """
        request = _requests.get_workflow(workflow_id)
        return await self._sender.send(request, timeout, extra_headers)


class AsyncVersions:
    """Versions: immutable, numbered definitions of a workflow."""

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    async def create(
        self,
        workflow_id: str,
        definition: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Version:
        """Create the next version of a workflow.

        Args:
            workflow_id: The workflow.
            definition: The new definition; its ``id`` may be omitted (it defaults to
                ``workflow_id``).
            idempotency_key: The write's ``Idempotency-Key``; generated when not given. Pass
                the same key to retry this write safely.
            timeout: This call's HTTP timeout (None: the client's).
            extra_headers: Headers added to this call's request.

        Returns:
            The new version, with its normalized definition.

        Raises:
            InvalidRequest: ``invalid_definition`` or ``workflow_id_mismatch``.
            NotFound: ``workflow_not_found``.
        """
        request = _requests.create_version(workflow_id, definition, idempotency_key)
        return await self._sender.send(request, timeout, extra_headers)

    def list(
        self,
        workflow_id: str,
        *,
        limit: int | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> AsyncPager[VersionSummary]:
        """Every version of a workflow, by number, fetched page by page as you iterate."""
        return paged(
            self.list_page, workflow_id, limit=limit, timeout=timeout, extra_headers=extra_headers
        )

    async def list_page(
        self,
        workflow_id: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Page[VersionSummary]:
        """One page of a workflow's versions (summaries, without definitions)."""
        request = _requests.list_versions(workflow_id, limit, cursor)
        return await self._sender.send(request, timeout, extra_headers)

    async def get(
        self,
        workflow_id: str,
        version: int,
        *,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Version:
        """One version with its normalized definition.

        Raises:
            NotFound: ``workflow_not_found`` or ``version_not_found``.
        """
        request = _requests.get_version(workflow_id, version)
        return await self._sender.send(request, timeout, extra_headers)
