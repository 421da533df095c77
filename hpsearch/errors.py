"""The search's exceptions: a bad configuration stops before any work, a failed trial is recorded and skipped."""

from __future__ import annotations

__all__ = [
    "BackendNotAvailable",
    "HPSearchError",
    "MissingMetric",
    "SearchConfigError",
    "TooManyFailedTrials",
    "TrialFailed",
]


class HPSearchError(Exception):
    """Base of every error the search raises on its own."""


class SearchConfigError(HPSearchError, ValueError):
    """An argument of the search is invalid; raised before any trial starts.

    ``about`` says which argument, where the raiser knows it: the name of a `hyperparameter_search` argument or
    backend option (``("pruner",)``), or ``("hp_space", name)`` for one parameter of the space; ``()`` when the
    error is about no one argument. `hpsearch run` points at the sweep file's key from it.
    """

    def __init__(self, *args: object, about: str | tuple[str, ...] = ()) -> None:
        super().__init__(*args)
        self.about: tuple[str, ...] = (about,) if isinstance(about, str) else tuple(about)


class BackendNotAvailable(HPSearchError, ImportError):
    """The backend's library is not installed; the message carries the install command."""


class TrialFailed(HPSearchError):
    """A trial failed (it raised, or its objective was NaN/inf): it is recorded FAIL and the search goes on."""


class MissingMetric(TrialFailed, KeyError):
    """compute_objective read a metric the evaluation did not return: a `KeyError`, as the user's function raised,
    whose message names the metrics there are (printed as it is, not quoted as a key)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class TooManyFailedTrials(HPSearchError, RuntimeError):
    """``max_failed_trials`` consecutive trials failed: the search stops, quoting the failures."""
