"""Optuna backend: a study (in memory, SQLite/PostgreSQL or a journal file) drives the trials."""

from ._adapter import OptunaBackend
from ._storage import redact_url

__all__ = ["OptunaBackend", "redact_url"]
