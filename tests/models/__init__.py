"""The model adapters against real HTTP servers (the fake OpenAI-compatible one)."""
