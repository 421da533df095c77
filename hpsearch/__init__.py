"""Hyperparameter search for PyTorch training: Optuna, Ray Tune and SigOpt behind one call.

Importing this package imports no search backend; each adapter imports its library when it is used.
"""

from .api import (
    BestRun,
    HPSearchBackend,
    default_hp_space_optuna,
    default_hp_space_ray,
    default_hp_space_sigopt,
    hyperparameter_search,
)
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
from .trial import Evaluation, Trial, TrialRecord, TrialState

__all__ = [
    "BackendNotAvailable",
    "BestRun",
    "Evaluation",
    "HPSearchBackend",
    "HPSearchError",
    "SearchConfigError",
    "SearchResult",
    "TooManyFailedTrials",
    "Trial",
    "TrialFailed",
    "TrialRecord",
    "TrialState",
    "default_compute_objective",
    "default_hp_space_optuna",
    "default_hp_space_ray",
    "default_hp_space_sigopt",
    "hyperparameter_search",
    "run_trial",
]
__version__ = "0.1.0"
