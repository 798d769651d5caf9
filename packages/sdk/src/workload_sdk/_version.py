"""The SDK's version (sent in the ``User-Agent`` header)."""

__version__ = "0.1.0"
