"""What a backend adapter is: convert the space, drive the native loop, translate the native records."""

from __future__ import annotations

import abc
import importlib.util
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ..errors import BackendNotAvailable, SearchConfigError

if TYPE_CHECKING:
    from spaces import SearchSpace

    from ..results import SearchResult
    from ..runner import SearchContext

__all__ = ["SearchBackend", "TrialReporter"]


class TrialReporter(Protocol):
    """How a running trial talks to its backend (one per trial)."""

    def report(self, objective: Any, step: int, metrics: Mapping[str, float], checkpoint: str | None) -> bool:
        """Tell the backend the objective of an evaluation; return True when the trial should be pruned."""
        ...


class SearchBackend(abc.ABC):
    """Base of the Optuna, Ray and SigOpt adapters.

    The search calls, in order: `is_available` (when picking a backend), `check_kwargs` and `validate` (before
    any trial: every bad input fails here), `resolve_space` (a portable space is converted with
    `convert_space`; a native one is checked), then `run`, which drives the engine, calls
    ``hpsearch.runner.run_trial`` for each trial and returns the `SearchResult`. Everything else (parameters,
    objectives, pruning callback, failures, output layout) is shared.
    """

    name: ClassVar[str]
    #: The distribution that provides the engine, and what to install to get it.
    requirement: ClassVar[str]
    install_command: ClassVar[str]
    #: Backend-specific keyword arguments `hyperparameter_search` accepts.
    accepted_kwargs: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def is_available(cls) -> bool:
        return importlib.util.find_spec(cls.requirement) is not None

    @classmethod
    def ensure_available(cls) -> None:
        if not cls.is_available():
            raise BackendNotAvailable(
                f"The {cls.name} backend needs the {cls.requirement!r} package, which is not installed; run "
                f"`{cls.install_command}`."
            )

    @classmethod
    def check_kwargs(cls, kwargs: Mapping[str, Any]) -> None:
        unknown = sorted(set(kwargs) - cls.accepted_kwargs)
        if unknown:
            raise SearchConfigError(
                f"Unknown keyword argument(s) {unknown} for backend={cls.name!r}; it accepts "
                f"{sorted(cls.accepted_kwargs)} plus max_failed_trials, objective_scope and trial_timeout."
            )

    def __init__(self, ctx: SearchContext, kwargs: Mapping[str, Any]) -> None:
        self.ctx = ctx
        self.kwargs = dict(kwargs)

    def validate(self) -> None:  # noqa: B027 - an optional hook, a no-op unless a backend needs checks
        """Backend-specific checks of the kwargs against the trainer (e.g. a pruner needs evaluations)."""

    @abc.abstractmethod
    def convert_space(self, space: SearchSpace) -> Any:
        """The backend's native form of a portable space; `SearchConfigError` for what it cannot express."""

    def resolve_space(self, hp_space: Any) -> tuple[SearchSpace | None, Any]:
        """(portable space or None, native space) for what the user passed (None = the default space)."""
        from spaces import SearchSpace, default_space

        if hp_space is None:
            hp_space = default_space()
        if self.is_native_space(hp_space):
            return None, hp_space
        try:
            space = SearchSpace.coerce(hp_space)
        except (TypeError, ValueError) as error:
            raise SearchConfigError(f"hp_space: {error}") from error
        return space, self.convert_space(space)

    def is_native_space(self, hp_space: Any) -> bool:
        return callable(hp_space) and not isinstance(hp_space, Mapping)

    @abc.abstractmethod
    def run(self, n_trials: int, space: SearchSpace | None, native_space: Any) -> SearchResult:
        """Run the search and return every trial's record."""

    def settings(self) -> dict[str, Any]:
        """The backend settings worth keeping in the results (no secrets)."""
        return {k: _describe(v) for k, v in self.kwargs.items()}


def _describe(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_describe(v) for v in value]
    return type(value).__name__
