"""Workload's ``openai:<model>`` adapter of the model port (SPEC §11).

Any OpenAI-compatible Chat Completions server with tool calling (OpenAI, vLLM, Ollama,
llama.cpp): :class:`OpenAIModels` serves the names ``openai:<model-name>`` with one shared
client; :func:`from_environment` reads where the server is. See ``docs/models.md``.
"""

from workload_model_openai._model import PREFIX, OpenAIModel, OpenAIModels, make_client
from workload_model_openai._settings import (
    API_KEY_VARIABLE,
    BASE_URL_VARIABLE,
    DEFAULT_API_KEY,
    DEFAULT_TIMEOUT_SECONDS,
    MAX_TIMEOUT_SECONDS,
    TIMEOUT_VARIABLE,
    OpenAIConfigError,
    OpenAISettings,
    from_environment,
)

__all__ = [
    "API_KEY_VARIABLE",
    "BASE_URL_VARIABLE",
    "DEFAULT_API_KEY",
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_TIMEOUT_SECONDS",
    "PREFIX",
    "TIMEOUT_VARIABLE",
    "OpenAIConfigError",
    "OpenAIModel",
    "OpenAIModels",
    "OpenAISettings",
    "from_environment",
    "make_client",
]
