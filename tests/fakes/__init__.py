"""Test doubles that stand in for outside services (a fake OpenAI-compatible server)."""
