"""Logging integrations chosen by ``TrainingArguments.report_to``, one private module each.

Each integration is a `TrainerCallback` that imports its library only when it first writes, so choosing
``report_to="none"`` (or never training) costs nothing and ``import trainer`` pulls in no tracker library. Only
the world main process writes. ``report_to`` is ``"none"`` (the default), ``"all"`` (every integration whose
library is installed) or a list of names; a name whose library is missing is an ImportError carrying the
install command, raised when the `Trainer` is built.

The experiment trackers (`TrackerCallback`: MLflow, W&B, Comet, Neptune, ClearML, DVCLive, CodeCarbon) run in
their offline/local modes unless their environment says otherwise, never stop training when they fail
(`tracker_errors` lists what failed), and end each run with a final state. A hyperparameter search calls
`close_trackers(trainer, state, objective)` when a trial ends (``"COMPLETE"``, ``"PRUNED"`` or ``"FAIL"``).
"""

from __future__ import annotations

from typing import Any

from .._callbacks import TrainerCallback
from ._base import STATES, TrackerCallback, install_hint
from ._clearml import ClearMLCallback
from ._codecarbon import CodeCarbonCallback
from ._comet import CometCallback
from ._dvclive import DVCLiveCallback
from ._jsonl import JsonlCallback
from ._mlflow import MLflowCallback, is_mlflow_available
from ._neptune import NeptuneCallback
from ._tensorboard import TensorBoardCallback, is_tensorboard_available
from ._wandb import WandbCallback

__all__ = [
    "INTEGRATIONS",
    "REFUSED",
    "STATES",
    "ClearMLCallback",
    "CodeCarbonCallback",
    "CometCallback",
    "DVCLiveCallback",
    "JsonlCallback",
    "MLflowCallback",
    "NeptuneCallback",
    "TensorBoardCallback",
    "TrackerCallback",
    "WandbCallback",
    "close_trackers",
    "get_available_reporting_integrations",
    "get_reporting_integration_callbacks",
    "is_mlflow_available",
    "is_tensorboard_available",
    "tracker_errors",
]

#: ``report_to`` name -> callback class.
INTEGRATIONS: dict[str, type[TrainerCallback]] = {
    "jsonl": JsonlCallback,
    "tensorboard": TensorBoardCallback,
    "mlflow": MLflowCallback,
    "wandb": WandbCallback,
    "comet_ml": CometCallback,
    "neptune": NeptuneCallback,
    "clearml": ClearMLCallback,
    "dvclive": DVCLiveCallback,
    "codecarbon": CodeCarbonCallback,
}

#: Integrations refused here: name -> (why, how to install it where it fits). See the README.
REFUSED: dict[str, tuple[str, str]] = {
    "aim": (
        "aim 3.29 (the release with wheels for this Python) requires filelock<4, while this stack runs filelock "
        "4.2 under torch, ray and huggingface_hub; installing aim would downgrade it, so it is not supported",
        "pip install 'aim>=3.29' in an environment of its own (e.g. to browse runs with `aim up`)",
    ),
}


def _is_available(name: str) -> bool:
    cls = INTEGRATIONS[name]
    if name == "jsonl":
        return True
    if name == "tensorboard":
        return is_tensorboard_available()
    return issubclass(cls, TrackerCallback) and cls.is_available()


def get_available_reporting_integrations() -> list[str]:
    """Names of the integrations usable here (``"jsonl"`` always, the others when their library is installed)."""
    return [name for name in INTEGRATIONS if _is_available(name)]


def get_reporting_integration_callbacks(report_to: str | list[str] | None) -> list[type[TrainerCallback]]:
    """The callback classes for ``report_to`` (``"none"``/None/[] -> none, ``"all"`` -> every available one).

    Raises ValueError for an unknown or refused name (with the reason) and ImportError (with the install
    command) for a named integration whose library is missing.
    """
    if report_to is None:
        names: list[str] = []
    elif isinstance(report_to, str):
        names = [report_to]
    else:
        names = list(report_to)
    names = [str(n).strip().lower() for n in names]
    if names in (["none"], []):
        return []
    if names == ["all"]:
        return [INTEGRATIONS[name] for name in get_available_reporting_integrations()]
    for name in names:
        if name in REFUSED:
            why, how = REFUSED[name]
            raise ValueError(f"report_to={report_to!r}: {name!r} is refused: {why}. To use it: {how}.")
    unknown = [n for n in names if n not in INTEGRATIONS]
    if unknown:
        raise ValueError(
            f"report_to={report_to!r} names unknown integrations {unknown}; use 'all', 'none' or a list of "
            f"{sorted(INTEGRATIONS)}."
        )
    for name in names:
        cls = INTEGRATIONS[name]
        disabled = getattr(cls, "disabled_reason", None)
        reason = disabled() if disabled is not None else None
        if reason:  # switched off by its environment (DISABLE_MLFLOW_INTEGRATION)
            raise ValueError(reason)
        if not _is_available(name):
            raise ImportError(install_hint(name, getattr(cls, "extra", None) or name))
    return [INTEGRATIONS[name] for name in dict.fromkeys(names)]


def _trackers(trainer_or_callbacks: Any) -> list[TrackerCallback]:
    handler = getattr(trainer_or_callbacks, "callback_handler", None)
    callbacks = handler.callbacks if handler is not None else trainer_or_callbacks
    return [cb for cb in callbacks if isinstance(cb, TrackerCallback)]


def close_trackers(
    trainer_or_callbacks: Any, state: str = "COMPLETE", objective: Any = None
) -> dict[str, Any]:
    """End every tracker run of a trainer (or of a list of callbacks) as ``state``, with ``objective``.

    ``state`` is ``"COMPLETE"``, ``"PRUNED"`` or ``"FAIL"`` (an enum whose value is one of them works too). The
    hook a hyperparameter search calls once per trial, after training, whether it finished, was pruned or
    raised; calling it again, or on a trainer without trackers, does nothing. Never raises for a tracker's fault.
    Returns the facts worth keeping with the trial: ``{"tracker_errors": [...]}`` when a tracker failed at any
    point of the run, else ``{}``.
    """
    trackers = _trackers(trainer_or_callbacks)
    for tracker in trackers:
        tracker.close(state, objective)
    errors = [error for tracker in trackers for error in tracker.errors]
    return {"tracker_errors": errors} if errors else {}


def tracker_errors(trainer_or_callbacks: Any) -> list[str]:
    """What the trackers of a trainer (or a list of callbacks) failed at: ``"<name> <what>: <error>"`` each,
    secrets masked. A tracker that fails is logged once and skipped; training goes on."""
    return [error for tracker in _trackers(trainer_or_callbacks) for error in tracker.errors]
