"""The agent runtime's domain (SPEC §11): the model port, agent task specs, the step journal."""
