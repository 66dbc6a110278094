"""Authoring tools: grammar (structural tags) for constrained decoding."""
