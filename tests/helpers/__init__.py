"""Shared test helpers (synthetic speech, ...)."""
