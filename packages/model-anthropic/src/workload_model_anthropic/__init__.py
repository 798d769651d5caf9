"""Workload's Anthropic adapter of the model port (SPEC §11, amended 2026-12-01).

The Claude Messages API through the official ``anthropic`` client, retries off:
:class:`AnthropicModels` serves the models ``<endpoint>:<model-name>`` of one endpoint with one
shared client. See ``docs/models.md`` and ADR 0028.
"""

from workload_model_anthropic._model import (
    ENDPOINT_NAME,
    AnthropicModel,
    AnthropicModels,
    make_client,
)
from workload_model_anthropic._settings import (
    DEFAULT_API_KEY,
    DEFAULT_BASE_URL,
    DEFAULT_TIMEOUT_SECONDS,
    MAX_TIMEOUT_SECONDS,
    AnthropicConfigError,
    AnthropicSettings,
)
from workload_model_anthropic._wire import ANSWER_TOOL, DEFAULT_MAX_OUTPUT_TOKENS

__all__ = [
    "ANSWER_TOOL",
    "DEFAULT_API_KEY",
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_OUTPUT_TOKENS",
    "DEFAULT_TIMEOUT_SECONDS",
    "ENDPOINT_NAME",
    "MAX_TIMEOUT_SECONDS",
    "AnthropicConfigError",
    "AnthropicModel",
    "AnthropicModels",
    "AnthropicSettings",
    "make_client",
]
