"""The search's exceptions: a bad configuration stops before any work, a failed trial is recorded and skipped."""

from __future__ import annotations

__all__ = ["BackendNotAvailable", "HPSearchError", "SearchConfigError", "TooManyFailedTrials", "TrialFailed"]


class HPSearchError(Exception):
    """Base of every error the search raises on its own."""


class SearchConfigError(HPSearchError, ValueError):
    """An argument of the search is invalid; raised before any trial starts."""


class BackendNotAvailable(HPSearchError, ImportError):
    """The backend's library is not installed; the message carries the install command."""


class TrialFailed(HPSearchError):
    """A trial failed (it raised, or its objective was NaN/inf): it is recorded FAIL and the search goes on."""


class TooManyFailedTrials(HPSearchError, RuntimeError):
    """``max_failed_trials`` consecutive trials failed: the search stops, quoting the failures."""
