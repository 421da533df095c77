"""`TrialSettings`: everything a worker needs to run one trial anywhere, frozen and picklable.

The settings are built once by `hyperparameter_search` and handed to the backend, which hands them (in process,
or pickled to a remote worker) to `run_trial` with each trial. They hold the rules every backend shares: how a
trial is named, how metrics become the objective, and which evaluation is the trial's objective (the scope).
The options every backend accepts (`COMMON_OPTIONS`) are declared here too, with their checks.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._files import RESULT_FILES
from .errors import SearchConfigError
from .objective import to_objective

if TYPE_CHECKING:
    from spaces import SearchSpace
    from trainer import Trainer

    from .trial import Evaluation, Trial

__all__ = ["COMMON_OPTIONS", "OBJECTIVE_SCOPES", "Option", "TrialSettings", "check_common_options"]

#: Which evaluation of a trial is its objective: the last one, the best one, the mean of all of them, or the
#: mean of the last 5 / 10 (the checkpoint is the one of the last evaluation for the means).
OBJECTIVE_SCOPES = ("last", "best", "avg", "last-5-avg", "last-10-avg")
#: The longest folder name (in UTF-8 bytes) that common file systems allow (ext4, XFS, APFS, NTFS: 255).
NAME_MAX = 255


@dataclass(frozen=True)
class Option:
    """One keyword argument a backend accepts, as the API and the sweep file see it.

    ``types`` are the Python types a value may have (after a sweep file is read; None is always accepted and
    means the default); ``build_from`` names the modules whose classes a sweep file may build with
    ``{name: Class, **kwargs}`` (e.g. a sampler); ``help`` says what it does; ``path`` says that a string value
    is a file or folder path (or a ``sqlite:///`` URL), which a sweep file gives relative to its own folder.
    """

    name: str
    types: tuple[type, ...]
    help: str
    build_from: tuple[str, ...] = ()
    path: bool = False
    #: Whether `hpsearch run` takes it as a flag of its own (``--trial-workers N``), besides ``--set``.
    cli_flag: bool = False
    #: Whether it sets how many trials run at once in threads: refused beside ``trial_workers``, which does that.
    concurrency: bool = False

    def expected(self) -> str:
        """What a value must be, in words ("true or false", "an integer or a number", ...)."""
        words: list[str] = []
        for t in self.types:
            word = "any value" if t is object else _WORDS.get(t, f"a {t.__name__}")
            if word not in words and not (t is int and float in self.types):
                words.append(word)
        return " or ".join(words)

    def check(self, value: Any) -> None:
        """Refuse a value of another type than ``types`` (the sweep file's schema refuses the same): a bool where
        none is declared (Python's bool is an int), a non-finite number; None (the default) always passes."""
        if value is None or object in self.types:
            return
        # numpy's integers and floats count as int and float (numbers' ABCs), a bool only where one is declared.
        accepted = tuple(_NUMBERS.get(t, t) for t in self.types)
        ok = isinstance(value, accepted) and not (isinstance(value, bool) and bool not in self.types)
        if ok and isinstance(value, numbers.Real) and not math.isfinite(float(value)):
            raise SearchConfigError(
                f"{self.name}={value!r} must be a finite number ({self.help}); pass e.g. 60, or "
                "None for the default."
            )
        if not ok:
            raise SearchConfigError(
                f"{self.name}={value!r} ({type(value).__name__}) must be {self.expected()} ({self.help}), or None for "
                "the default."
            )


_NUMBERS: dict[type, type] = {int: numbers.Integral, float: numbers.Real}
_WORDS: dict[type, str] = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "a list",
    tuple: "a list",
    dict: "a mapping",
    type: "a class",
}


def _check_max_failed(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SearchConfigError(
            f"max_failed_trials must be an integer >= 1, got {value!r}; pass e.g. max_failed_trials=3.",
            about="max_failed_trials",
        )
    return value


def _check_scope(value: Any) -> str:
    if value not in OBJECTIVE_SCOPES:
        raise SearchConfigError(
            f"objective_scope={value!r} must be one of {list(OBJECTIVE_SCOPES)}.", about="objective_scope"
        )
    return str(value)


def _check_timeout(value: Any) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not value > 0
        or not math.isfinite(value)
    ):
        raise SearchConfigError(
            f"trial_timeout must be a positive, finite number of seconds or None, got {value!r}; pass e.g. "
            "trial_timeout=600 (or None for no limit).",
            about="trial_timeout",
        )
    if value > _LONGEST_TIMEOUT_S:
        raise SearchConfigError(
            f"trial_timeout={value!r} seconds is longer than a trial's timer can count (at most "
            f"{_LONGEST_TIMEOUT_S:.0e} s, ~31 years); pass None for no limit.",
            about="trial_timeout",
        )
    return float(value)


_LONGEST_TIMEOUT_S = 1e9


def _check_positive_int(name: str, example: int) -> Callable[[Any], int | None]:
    def check(value: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SearchConfigError(
                f"{name} must be an integer >= 1 or None, got {value!r}; pass e.g. {name}={example}.",
                about=name,
            )
        return int(value)

    return check


def _check_budget(name: str) -> Callable[[Any], float | None]:
    def check(value: Any) -> float | None:
        if value is None:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not value > 0
            or not math.isfinite(value)
        ):
            raise SearchConfigError(
                f"{name} must be a positive, finite number or None, got {value!r}; pass e.g. {name}=2.",
                about=name,
            )
        return float(value)

    return check


def _check_warm_start(value: Any) -> Any:
    import os

    from .results import SearchResult  # light: pandas is imported only by its dataframe views

    items = value if isinstance(value, list | tuple) else [value]
    for item in items:
        if value is not None and not isinstance(item, str | os.PathLike | SearchResult):
            raise SearchConfigError(
                f"warm_start={item!r}: expected the output_dir of an earlier search, a SearchResult, or a list of them.",
                about="warm_start",
            )
    return value


def _check_mode(value: Any) -> str:
    if value not in ("inform", "evaluate"):
        raise SearchConfigError(
            f"warm_start_mode={value!r} must be 'inform' or 'evaluate'.", about="warm_start_mode"
        )
    return str(value)


def _check_top_k(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SearchConfigError(
            f"warm_start_top_k must be an integer >= 1, got {value!r}; pass e.g. warm_start_top_k=5.",
            about="warm_start_top_k",
        )
    return value


def _check_defaults(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise SearchConfigError(
            f"warm_start_defaults must be a dict of parameter name -> value, got {value!r}; pass e.g. {{'dropout': 0.1}}.",
            about="warm_start_defaults",
        )
    return dict(value)


def _check_reevaluate(name: str, example: int) -> Callable[[Any], int | None]:
    def check(value: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SearchConfigError(
                f"{name} must be an integer >= 1, got {value!r}; pass e.g. {name}={example} (or remove both "
                "reevaluate_top_k and reevaluate_seeds for no re-evaluation).",
                about=name,
            )
        return value

    return check


#: Options every backend accepts, with their defaults and checks (the sweep file takes the same names).
COMMON_OPTIONS: dict[str, tuple[Option, Any, Callable[[Any], Any]]] = {
    "max_failed_trials": (
        Option("max_failed_trials", (int,), "consecutive failed trials that stop the search"),
        3,
        _check_max_failed,
    ),
    "objective_scope": (
        Option(
            "objective_scope",
            (str,),
            f"which evaluation is a trial's objective: {', '.join(OBJECTIVE_SCOPES)}",
        ),
        "last",
        _check_scope,
    ),
    "trial_timeout": (
        Option("trial_timeout", (int, float), "seconds after which a trial is stopped and recorded FAIL"),
        None,
        _check_timeout,
    ),
    "max_device_hours": (
        Option(
            "max_device_hours",
            (int, float),
            "stop starting trials once the trials used this many device-hours",
        ),
        None,
        _check_budget("max_device_hours"),
    ),
    "max_energy_kwh": (
        Option(
            "max_energy_kwh",
            (int, float),
            "stop starting trials once the trials used this much energy (kWh, measured by CodeCarbon)",
        ),
        None,
        _check_budget("max_energy_kwh"),
    ),
    "trial_workers": (
        Option(
            "trial_workers",
            (int,),
            "trials run at once, each in a worker process of its own on this machine "
            "(isolated, killed at trial_timeout); unset: trials run in this process",
            cli_flag=True,
        ),
        None,
        _check_positive_int("trial_workers", 2),
    ),
    "trial_worker_max_trials": (
        Option(
            "trial_worker_max_trials",
            (int,),
            "trials a worker process runs before it is replaced by a fresh one "
            "(with trial_workers; unset: replaced only after a failed trial)",
        ),
        None,
        _check_positive_int("trial_worker_max_trials", 10),
    ),
    "warm_start": (
        Option(
            "warm_start",
            (str, list, object),
            "earlier searches (output_dir, SearchResult or a list) to start from",
            path=True,
        ),
        None,
        _check_warm_start,
    ),
    "warm_start_mode": (
        Option(
            "warm_start_mode",
            (str,),
            "'inform' (tell the engine the earlier trials) or 'evaluate' (train the best again first)",
        ),
        "inform",
        _check_mode,
    ),
    "warm_start_top_k": (
        Option("warm_start_top_k", (int,), "how many of the best earlier trials 'evaluate' trains again"),
        5,
        _check_top_k,
    ),
    "warm_start_defaults": (
        Option("warm_start_defaults", (dict,), "values of parameters the earlier searches did not have"),
        {},
        _check_defaults,
    ),
    "reevaluate_top_k": (
        Option(
            "reevaluate_top_k",
            (int,),
            "after the search, how many of the best configurations train again with "
            "reevaluate_seeds more seeds (the best run is then the best mean; see hpsearch.reevaluate)",
        ),
        None,
        _check_reevaluate("reevaluate_top_k", 3),
    ),
    "reevaluate_seeds": (
        Option(
            "reevaluate_seeds",
            (int,),
            "how many more seeds each re-evaluated configuration trains with "
            "(TrainingArguments.seed and data_seed: seed+1 .. seed+S)",
        ),
        None,
        _check_reevaluate("reevaluate_seeds", 2),
    ),
}


def check_common_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Pop the common options from ``kwargs``: their checked values (defaults filled in)."""
    out = {}
    for name, (_, default, check) in COMMON_OPTIONS.items():
        value = kwargs.pop(name, default)
        out[name] = default if value is None and default is not None else check(value)
    return out


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
        return to_objective(self.compute_objective(dict(metrics)), self.n_objectives)

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
