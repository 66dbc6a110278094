"""Integrations with other libraries: TRL (`trl`)."""
