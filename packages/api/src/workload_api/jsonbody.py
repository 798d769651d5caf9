"""Strict request bodies (SPEC §6): media type, size, UTF-8, one JSON object, no duplicates/NaN."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from workload_api.jsonresponse import render_json
from workload_api.problems import HttpProblem
from workload_domain.errors import Problem
from workload_domain.jsonvalues import MAX_JSON_DEPTH, DuplicateKey, json_problems, strict_loads

__all__ = ["MAX_BODY_BYTES", "parse_json", "parse_json_object", "read_json_object", "read_limited"]

MAX_BODY_BYTES = 1024 * 1024


async def read_limited(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The body, refused with 413 beyond ``limit`` bytes (:data:`MAX_BODY_BYTES`: 1 MiB)."""
    declared = request.headers.get("content-length")
    size_said = f"{limit // 1024 // 1024} MiB" if limit % (1024 * 1024) == 0 else f"{limit} bytes"
    too_large = HttpProblem(
        413, "payload_too_large", f"the request body is larger than {size_said}"
    )
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def _is_json_media_type(content_type: str | None) -> bool:
    if not content_type:
        return False
    media, _, params = content_type.partition(";")
    if media.strip().lower() != "application/json":
        return False
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() != "utf-8":
            return False
    return True


async def read_json_object(request: Request, *, optional: bool = False) -> dict[str, Any] | None:
    """Read the body as one strict JSON object.

    Args:
        request: the request.
        optional: an empty body is allowed (and needs no content type); returns None.

    Raises:
        HttpProblem: 413 over 1 MiB, 415 not ``application/json``, 400 ``invalid_json``.
    """
    body = await read_limited(request)
    if not body and optional:
        return None
    coding = request.headers.get("content-encoding", "identity").strip().lower()
    if coding not in ("", "identity"):
        # RFC 9110 §15.5.16: a content coding we do not decode is refused, never read as JSON.
        raise HttpProblem(
            415, "unsupported_media_type", "request bodies must not be content-coded (identity)"
        )
    if not _is_json_media_type(request.headers.get("content-type")):
        raise HttpProblem(
            415, "unsupported_media_type", "request bodies must be application/json (UTF-8)"
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise HttpProblem(400, "invalid_json", "the body is not valid UTF-8") from None
    return parse_json_object(text)


def _has_lone_surrogate(value: Any) -> bool:
    r"""Whether a parsed value holds a lone surrogate (a "\ud800" escape): no Unicode text.

    orjson refuses such a string while encoding (ADR 0031), several times faster than the
    stdlib's encoder; what orjson refuses for another reason (an integer beyond 64 bits) is
    encoded by the stdlib, as before.
    """
    if render_json(value) is not None:
        return False
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_json_object(text: str) -> dict[str, Any]:
    """Parse one strict JSON object (no duplicate keys, no NaN/Infinity, bounded nesting).

    Raises:
        HttpProblem: 400 ``invalid_json``.
    """
    value = parse_json(text)
    if not isinstance(value, dict):
        raise HttpProblem(400, "invalid_json", "the body must be one JSON object")
    return value


def parse_json(text: str, *, what: str = "the body") -> Any:
    """Parse one strict JSON value, as the store can hold it.

    No duplicate keys, no NaN/Infinity (nor numbers that only parse to them), no lone
    surrogates, bounded nesting; ``what`` names the text in the problem's detail.

    Raises:
        HttpProblem: 400 ``invalid_json``.
    """
    try:
        value = strict_loads(text)
    except DuplicateKey as exc:
        raise HttpProblem(400, "invalid_json", str(exc)) from None
    except RecursionError:
        raise HttpProblem(400, "invalid_json", f"{what} is nested too deeply") from None
    except ValueError:
        raise HttpProblem(400, "invalid_json", f"{what} is not valid JSON") from None
    if _has_lone_surrogate(value):
        raise HttpProblem(
            400, "invalid_json", f"{what} escapes a lone UTF-16 surrogate (not Unicode text)"
        )
    deep = [p for p in json_problems(value, max_depth=MAX_JSON_DEPTH + 4) if "nesting" in p.message]
    if deep:
        raise HttpProblem(
            400,
            "invalid_json",
            f"{what} is nested too deeply",
            problems=[Problem(deep[0].path, deep[0].message)],
        )
    return value
