"""Analyses over decoded runs (metrics against a reference, the logit lens, ...)."""
