"""Voice Service: a self-hostable, multi-tenant HTTP API for speech."""

__version__ = "1.0.0"
