"""`TrialSettings`: everything a worker needs to run one trial anywhere, frozen and picklable.

The settings are built once by `hyperparameter_search` and handed to the backend, which hands them (in process,
or pickled to a remote worker) to `run_trial` with each trial. They hold the rules every backend shares: how a
trial is named, how metrics become the objective, and which evaluation is the trial's objective (the scope).
The options every backend accepts (`COMMON_OPTIONS`) are declared in `hpsearch.options` (re-exported here).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._files import RESULT_FILES
from .errors import SearchConfigError
from .objective import objective_from_metrics
from .options import COMMON_OPTIONS, OBJECTIVE_SCOPES, Option, check_common_options

if TYPE_CHECKING:
    from spaces import SearchSpace
    from trainer import Trainer

    from .trial import Evaluation, Trial

__all__ = ["COMMON_OPTIONS", "OBJECTIVE_SCOPES", "Option", "TrialSettings", "check_common_options"]

#: The longest folder name (in UTF-8 bytes) that common file systems allow (ext4, XFS, APFS, NTFS: 255).
NAME_MAX = 255


@dataclass(frozen=True)
class TrialSettings:
    """What every trial of one search needs, on any process or machine.

    ``trainer`` is the trainer's recipe (`trainer.Trainer.recipe`: no model, optimizer or accelerator);
    ``space`` the portable space (None for a native one); ``output_dir`` is absolute.
    """

    trainer: Trainer
    compute_objective: Callable[[Mapping[str, float]], Any]
    objective_name: str
    directions: tuple[str, ...]
    output_dir: str
    backend: str
    hp_name: Callable[[Trial], str] | None = None
    objective_scope: str = "last"
    trial_timeout: float | None = None
    space: SearchSpace | None = None
    #: Whether each trial measures its energy with CodeCarbon (see `hpsearch._cost`).
    measure_energy: bool = False

    @property
    def n_objectives(self) -> int:
        return len(self.directions)

    def objective_of(self, metrics: Mapping[str, float]) -> float | list[float]:
        return objective_from_metrics(self.compute_objective, metrics, self.n_objectives)

    def trial_name(self, trial: Trial) -> str:
        """The trial's folder and record name: ``run-<id>``, or what ``hp_name(trial)`` returns."""
        if self.hp_name is None:
            return f"run-{trial.id}"
        name = self.hp_name(trial)
        separators = {os.sep, os.altsep or os.sep, "\0"}
        if not isinstance(name, str) or not name or any(c in name for c in separators) or name in (".", ".."):
            raise SearchConfigError(
                f"hp_name(trial) must return a non-empty folder name without {os.sep!r} or a NUL character, got "
                f"{name!r}."
            )
        try:
            size = len(name.encode("utf-8"))
        except UnicodeEncodeError as error:
            raise SearchConfigError(
                f"hp_name(trial) returned {name!r}, which cannot be written as a file name or in search.json "
                f"({error.reason}: {name[error.start : error.end]!r} at position {error.start}); return a name of "
                "valid characters, e.g. f'run-{trial.number}'."
            ) from None
        if size > NAME_MAX:
            raise SearchConfigError(
                f"hp_name(trial) returned a name of {size} bytes ({name[:40]!r}...), longer than the {NAME_MAX} bytes "
                "a folder name may have; return a shorter name, e.g. f'run-{trial.number}'."
            )
        if name in RESULT_FILES or name.startswith("."):
            raise SearchConfigError(
                f"hp_name(trial) returned {name!r}, which names one of the search's own files in output_dir "
                f"({', '.join(sorted(RESULT_FILES))}, and hidden files); return another name, e.g. "
                "f'run-{trial.number}'."
            )
        return name

    def better(self, a: float, b: float) -> bool:
        return a > b if self.directions[0] == "maximize" else a < b

    def active_params(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The parameters of ``values`` that the portable space makes active (parents first); all of them for a
        native space. An inactive parent deactivates its children."""
        if self.space is None:
            return dict(values)
        params: dict[str, Any] = {}
        for name in self.space.order:
            if name in values and self.space.is_active(name, params):
                params[name] = values[name]
        return params

    def choose(self, evaluations: Sequence[Evaluation]) -> tuple[float | list[float] | None, int | None]:
        """(objective, step of its evaluation) by ``objective_scope``; (None, None) without a finite evaluation."""
        scored = [e for e in evaluations if e.objective is not None and _finite(e.objective)]
        if not scored:
            return None, None
        scope = self.objective_scope
        if scope == "best" and self.n_objectives == 1:
            chosen = scored[0]
            for e in scored[1:]:
                if self.better(e.objective, chosen.objective):  # type: ignore[arg-type]  # one objective: floats
                    chosen = e
            return chosen.objective, chosen.step
        if scope in ("last", "best"):
            return scored[-1].objective, scored[-1].step
        window = scored if scope == "avg" else scored[-int(scope.split("-")[1]) :]
        if self.n_objectives == 1:
            values = [float(e.objective) for e in window]  # type: ignore[arg-type]
            return sum(values) / len(values), scored[-1].step
        columns = zip(*(e.objective for e in window))  # type: ignore[misc]
        return [sum(c) / len(window) for c in columns], scored[-1].step


def _finite(objective: Any) -> bool:
    values = objective if isinstance(objective, list) else [objective]
    return all(isinstance(v, int | float) and math.isfinite(v) for v in values)
