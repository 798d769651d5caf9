"""The Anthropic adapter against a real HTTP server (the fake Anthropic Messages one)."""
