"""Hyperparameter search for PyTorch training: every registered engine behind one call.

Importing this package imports no search engine; each backend adapter imports its library when it is used.
``default_hp_space_<backend>`` is each backend's native default space (as transformers names them).
"""

from typing import Any

from .api import BestRun, HPSearchBackend, hyperparameter_search
from .backends import backend_names, get_backend, register_backend
from .errors import (
    BackendNotAvailable,
    HPSearchError,
    SearchConfigError,
    TooManyFailedTrials,
    TrialFailed,
)
from .objective import default_compute_objective
from .results import SearchResult
from .runner import run_trial
from .session import SearchSession
from .settings import TrialSettings
from .trial import Evaluation, Trial, TrialRecord, TrialState

_DEFAULT_SPACE_PREFIX = "default_hp_space_"

__all__ = [
    "BackendNotAvailable",
    "BestRun",
    "Evaluation",
    "HPSearchBackend",
    "HPSearchError",
    "SearchConfigError",
    "SearchResult",
    "SearchSession",
    "TooManyFailedTrials",
    "Trial",
    "TrialFailed",
    "TrialRecord",
    "TrialSettings",
    "TrialState",
    "backend_names",
    "default_compute_objective",
    "get_backend",
    "hyperparameter_search",
    "register_backend",
    "run_trial",
    *(_DEFAULT_SPACE_PREFIX + name for name in backend_names()),
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # hpsearch.report / hpsearch.dashboard after a plain `import hpsearch` (imported on first use: they need plotly).
    if name in ("report", "dashboard"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    # default_hp_space_<backend>: the adapter's own default space, looked up (not imported) on first use.
    if name.startswith(_DEFAULT_SPACE_PREFIX) and name[len(_DEFAULT_SPACE_PREFIX) :] in backend_names():
        return get_backend(name[len(_DEFAULT_SPACE_PREFIX) :]).default_space
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
