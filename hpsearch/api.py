"""`hyperparameter_search`: validate everything, pick the backend, run, return the best run(s)."""

from __future__ import annotations

import enum
import importlib.metadata
import logging
import os
import platform
import shutil
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, NamedTuple

from .errors import HPSearchError, SearchConfigError
from .objective import resolve_compute_objective
from .runner import SearchContext, argument_fields, build_trial_args, check_param_names
from .trial import Trial, TrialRecord

if TYPE_CHECKING:
    from spaces import SearchSpace
    from trainer import Trainer

    from .backends.base import SearchBackend
    from .results import SearchResult

__all__ = [
    "BestRun",
    "HPSearchBackend",
    "default_hp_space_optuna",
    "default_hp_space_ray",
    "default_hp_space_sigopt",
    "hyperparameter_search",
]

logger = logging.getLogger(__name__)

_COMMON_KWARGS = ("max_failed_trials", "objective_scope", "trial_timeout")


class HPSearchBackend(str, enum.Enum):
    OPTUNA = "optuna"
    RAY = "ray"
    SIGOPT = "sigopt"

    def __str__(self) -> str:
        return self.value


class BestRun(NamedTuple):
    """The best trial of a search (one per Pareto-optimal trial for several objectives).

    ``checkpoint`` is the checkpoint whose evaluation gave ``objective`` (None if the trial saved none);
    ``run_summary`` is the whole search as a `SearchResult`.
    """

    run_id: str
    objective: float | list[float]
    hyperparameters: dict[str, Any]
    run_summary: SearchResult | None = None
    checkpoint: str | None = None
    name: str | None = None


def _backend_class(backend: HPSearchBackend) -> type[SearchBackend]:
    if backend is HPSearchBackend.OPTUNA:
        from .backends.optuna import OptunaBackend

        return OptunaBackend
    if backend is HPSearchBackend.RAY:
        from .backends.ray import RayBackend

        return RayBackend
    from .backends.sigopt import SigOptBackend

    return SigOptBackend


def _resolve_backend(backend: Any) -> type[SearchBackend]:
    if backend is None:
        for candidate in HPSearchBackend:
            cls = _backend_class(candidate)
            if cls.is_available():
                return cls
        raise SearchConfigError(
            "No search backend is installed; install one, e.g. `pip install 'hpsearch[optuna]'` "
            "(or hpsearch[ray], hpsearch[sigopt])."
        )
    try:
        member = HPSearchBackend(str(getattr(backend, "value", backend)).lower())
    except ValueError:
        raise SearchConfigError(
            f"backend={backend!r} is not a known backend; use one of {[b.value for b in HPSearchBackend]} or None."
        ) from None
    cls = _backend_class(member)
    cls.ensure_available()
    return cls


def _directions(direction: Any) -> list[str]:
    values = [direction] if isinstance(direction, str) else direction
    if not isinstance(values, list | tuple) or not values:
        raise SearchConfigError(
            f"direction={direction!r} must be 'minimize', 'maximize' or a non-empty list of them."
        )
    out = []
    for value in values:
        text = str(getattr(value, "value", value)).lower() if isinstance(value, str | enum.Enum) else None
        aliases = {"min": "minimize", "max": "maximize", "minimize": "minimize", "maximize": "maximize"}
        if text not in aliases:
            raise SearchConfigError(
                f"direction={direction!r}: {value!r} is not 'minimize' or 'maximize'; pass one of them (or a list)."
            )
        out.append(aliases[text])
    return out


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SearchConfigError(f"{name} must be an integer >= {minimum}, got {value!r}; pass e.g. {name}=3.")
    return value


def _domain_probes(domain: Any) -> list[Any]:
    from spaces import Categorical, Fixed, Float, Int

    if isinstance(domain, Float | Int):
        return [domain.low, domain.high]
    if isinstance(domain, Categorical):
        return list(domain.choices)
    if isinstance(domain, Fixed):
        return [domain.value]
    return []


def check_space_against_trainer(space: SearchSpace, trainer: Trainer) -> None:
    """Every parameter must be an argument (with valid values at its bounds) or reachable by ``model_init(trial)``."""
    check_param_names(space, trainer)
    fields = argument_fields()
    for name in space:
        if name not in fields:
            continue
        for value in _domain_probes(space[name]):
            try:
                build_trial_args(trainer.args, {name: value}, trainer.args.output_dir, "probe")
            except (ValueError, TypeError) as error:
                raise SearchConfigError(
                    f"hp_space parameter {name!r} can take {value!r}, which TrainingArguments rejects: {error}"
                ) from error


def _versions(backend: str) -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("hpsearch", "torch", "accelerate", {"optuna": "optuna", "ray": "ray", "sigopt": "sigopt"}[backend]):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def _probe_writable(output_dir: str) -> str | None:
    """Fail now, not after an hour of training, if results cannot be written; returns the first folder it created."""
    # The first folder the probe creates: removed again if the probe fails, so a refused search leaves nothing.
    created = None
    path = os.path.abspath(output_dir)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        created, path = path, os.path.dirname(path)
    try:
        os.makedirs(output_dir, exist_ok=True)
        probe = os.path.join(output_dir, f".hpsearch-probe-{uuid.uuid4().hex}")
        try:
            with open(probe, "wb") as f:
                f.write(b"0" * 4096)
                f.flush()
                os.fsync(f.fileno())
        finally:
            if os.path.exists(probe):
                os.remove(probe)
    except OSError as error:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise SearchConfigError(
            f"output_dir={output_dir!r} is not writable ({error.strerror or error}); choose a writable folder "
            "with free space via TrainingArguments(output_dir=...)."
        ) from error
    return created


def _remove_if_empty(folder: str | None) -> None:
    """Remove a folder tree the probe created if nothing was written into it (a search refused at start)."""
    if folder is None or not os.path.isdir(folder):
        return
    if not any(files for _, _, files in os.walk(folder)):
        shutil.rmtree(folder, ignore_errors=True)


def hyperparameter_search(
    trainer: Trainer,
    hp_space: Any = None,
    compute_objective: Callable[[dict[str, float]], Any] | str | None = None,
    n_trials: int = 20,
    direction: str | list[str] = "minimize",
    backend: str | HPSearchBackend | None = None,
    hp_name: Callable[[Trial], str] | None = None,
    **kwargs: Any,
) -> BestRun | list[BestRun]:
    """Search the hyperparameters of ``trainer`` (which must have a ``model_init``).

    ``hp_space`` is a portable space (`spaces.SearchSpace` or a dict of `spaces` domains; works with every backend),
    the backend's native form (Optuna: ``callable(trial) -> dict``), or None for the default space.
    ``compute_objective`` is a callable on the metrics, a metric name, or None (`default_compute_objective`).
    ``direction`` is 'minimize', 'maximize' or a list of them (several objectives: the Pareto front is returned as a
    list of `BestRun`). ``backend`` None takes the first installed of optuna, ray, sigopt. ``hp_name(trial)``
    names each trial's folder and record. Every backend also accepts ``max_failed_trials`` (consecutive
    failures that stop the search, default 3), ``objective_scope`` ('last' evaluation, default, or 'best') and
    ``trial_timeout`` (seconds; a trial running longer is stopped and recorded FAIL);
    other keyword arguments go to the backend (an unknown one is an error naming the accepted ones).
    """
    from trainer import Trainer

    if not isinstance(trainer, Trainer):
        raise SearchConfigError(f"trainer must be a trainer.Trainer, got {type(trainer).__name__}.")
    if trainer.model_init is None:
        raise SearchConfigError(
            "hyperparameter_search needs a Trainer built with model_init (each trial trains a fresh model); "
            "pass Trainer(model_init=...) instead of model=..."
        )
    n_trials = _check_int("n_trials", n_trials, 1)
    directions = _directions(direction)
    if hp_name is not None and not callable(hp_name):
        raise SearchConfigError(f"hp_name must be a callable taking the trial and returning a name, got {hp_name!r}.")
    max_failed_trials = _check_int("max_failed_trials", kwargs.pop("max_failed_trials", 3), 1)
    objective_scope = kwargs.pop("objective_scope", "last")
    if objective_scope not in ("last", "best"):
        raise SearchConfigError(f"objective_scope={objective_scope!r} must be 'last' or 'best'.")
    trial_timeout = kwargs.pop("trial_timeout", None)
    if trial_timeout is not None and (
        isinstance(trial_timeout, bool) or not isinstance(trial_timeout, int | float) or not trial_timeout > 0
    ):
        raise SearchConfigError(f"trial_timeout must be a positive number of seconds or None, got {trial_timeout!r}.")
    backend_cls = _resolve_backend(backend)
    backend_cls.check_kwargs(kwargs)
    objective_fn, objective_name = resolve_compute_objective(compute_objective)

    output_dir = trainer.args.output_dir
    ctx = SearchContext(
        trainer=trainer,
        compute_objective=objective_fn,
        objective_name=objective_name,
        directions=directions,
        output_dir=output_dir,
        hp_name=hp_name,
        max_failed_trials=max_failed_trials,
        objective_scope=objective_scope,
        trial_timeout=trial_timeout,
    )
    adapter = backend_cls(ctx, kwargs)
    space, native_space = adapter.resolve_space(hp_space)
    if space is not None:
        check_space_against_trainer(space, trainer)
    adapter.validate()
    created = _probe_writable(output_dir)

    from .results import SearchResult

    ctx.result = SearchResult(
        backend=backend_cls.name,
        directions=directions,
        records=[],
        space=space.to_dict() if space is not None else None,
        n_trials=n_trials,
        objective=objective_name,
        started=datetime.now(timezone.utc),
        output_dir=output_dir,
        settings=adapter.settings(),
        versions=_versions(backend_cls.name),
    )
    try:
        result = adapter.run(n_trials, space, native_space)
    except SearchConfigError:
        # Raised by a check only the run can make (e.g. Ray's address): leave no empty folder behind.
        _remove_if_empty(created)
        raise
    except KeyboardInterrupt:
        result = ctx.result
        result.save(output_dir)
        if not any(r.state.value == "COMPLETE" for r in result.records):
            raise
        logger.warning("Search interrupted: returning the best of the %d trials finished so far.", len(result.records))
    return best_runs(result)


def _best_run(record: TrialRecord, result: SearchResult) -> BestRun:
    assert record.objective is not None
    return BestRun(
        run_id=record.trial_id,
        objective=record.objective,
        hyperparameters=dict(record.params),
        run_summary=result,
        checkpoint=record.checkpoint,
        name=record.name,
    )


def best_runs(result: SearchResult) -> BestRun | list[BestRun]:
    if len(result.directions) > 1:
        return [_best_run(r, result) for r in result.best_trials]
    best = result.best_trial
    if best is None:
        counts = result.counts()
        errors = "; ".join(f"{r.name}: {r.error}" for r in result.records if r.error)[:2000]
        raise HPSearchError(
            f"No trial completed ({counts}); nothing to return. {('Errors: ' + errors) if errors else ''}".strip()
        )
    return _best_run(best, result)


# ---------------------------------------------------------------------------------------------- defaults
def default_hp_space_optuna(trial: Any) -> dict[str, Any]:
    """The default space written with Optuna's ``trial.suggest_*`` (as transformers users write it)."""
    return {
        "learning_rate": trial.suggest_float("learning_rate", 1e-6, 1e-4, log=True),
        "num_train_epochs": trial.suggest_int("num_train_epochs", 1, 5),
        "seed": trial.suggest_int("seed", 1, 40),
        "per_device_train_batch_size": trial.suggest_categorical("per_device_train_batch_size", [4, 8, 16, 32, 64]),
    }


def default_hp_space_ray(trial: Any = None) -> dict[str, Any]:
    """The default space as Ray Tune domains (Ray's integer upper bounds are exclusive, hence 6 and 41)."""
    from ray import tune

    return {
        "learning_rate": tune.loguniform(1e-6, 1e-4),
        "num_train_epochs": tune.choice(list(range(1, 6))),
        "seed": tune.randint(1, 41),
        "per_device_train_batch_size": tune.choice([4, 8, 16, 32, 64]),
    }


def default_hp_space_sigopt(trial: Any = None) -> list[dict[str, Any]]:
    """The default space as SigOpt parameters (categorical values are strings, mapped back by the adapter)."""
    return [
        {"bounds": {"min": 1e-6, "max": 1e-4}, "name": "learning_rate", "type": "double", "transformation": "log"},
        {"bounds": {"min": 1, "max": 5}, "name": "num_train_epochs", "type": "int"},
        {"bounds": {"min": 1, "max": 40}, "name": "seed", "type": "int"},
        {
            "categorical_values": ["4", "8", "16", "32", "64"],
            "name": "per_device_train_batch_size",
            "type": "categorical",
        },
    ]

