"""Test doubles that stand in for outside services (fake OpenAI and Anthropic model servers)."""
