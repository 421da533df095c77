"""`hyperparameter_search`: validate everything, build the settings and the session, run, return the best run(s).

This module names no backend: the registry (`hpsearch.backends`) resolves ``backend=`` to an adapter, and the
adapter declares its options, default space and version.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import logging
import os
import platform
import shutil
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from spaces import Fixed

from ._best import BestRun, best_runs
from ._cost import start_energy, wants_energy
from ._params import check_epochs_not_ignored, check_space_against_trainer
from .backends import backend_names, resolve_backend
from .backends.base import installed_version
from .errors import SearchConfigError
from .executor import check_trial_workers, make_executor
from .objective import resolve_compute_objective
from .options import N_TRIALS
from .reevaluate import check_reevaluation
from .settings import COMMON_OPTIONS, TrialSettings, check_common_options

if TYPE_CHECKING:
    from spaces import SearchSpace
    from trainer import Trainer

    from .backends.base import SearchBackend
    from .session import SearchSession, TrialEndHook
    from .trial import Trial

__all__ = ["BestRun", "HPSearchBackend", "hyperparameter_search"]

logger = logging.getLogger(__name__)


class _BackendName(str, enum.Enum):
    def __str__(self) -> str:
        return str(self.value)


#: The registered backends as an enum (one member per registered name, upper-cased), as transformers names them.
HPSearchBackend = _BackendName("HPSearchBackend", {name.upper(): name for name in backend_names()})  # type: ignore[call-overload]


def _directions(direction: Any) -> list[str]:
    values = [direction] if isinstance(direction, str | enum.Enum) else direction
    if not isinstance(values, list | tuple) or not values:
        raise SearchConfigError(
            f"direction={direction!r} must be 'minimize', 'maximize' or a non-empty list of them.",
            about="direction",
        )
    out = []
    for value in values:
        # A str enum by its value; an engine's own direction enum (an int enum) by its name.
        if isinstance(value, enum.Enum):
            value = value.value if isinstance(value.value, str) else value.name
        text = value.lower() if isinstance(value, str) else None
        aliases = {"min": "minimize", "max": "maximize", "minimize": "minimize", "maximize": "maximize"}
        if text not in aliases:
            raise SearchConfigError(
                f"direction={direction!r}: {value!r} is not 'minimize' or 'maximize'; pass one of them (or a list).",
                about="direction",
            )
        out.append(aliases[text])
    return out


def _python_scalar(value: Any) -> Any:
    """A numpy scalar (``np.int64(3)`` from a grid, ``np.float32``, ``np.bool_``) as the Python number it holds, so
    that every check below and every backend sees ints, floats and bools, and the results save as JSON; any other
    value as it is."""
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return value.item()
    return value


def _versions(backend_cls: type[SearchBackend]) -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("hpsearch", "torch", "accelerate"):
        version = installed_version(dist)
        if version is not None:
            out[dist] = version
    engine = backend_cls.version()
    if engine is not None:
        out[backend_cls.distribution or backend_cls.requirement] = engine
    return out


def _probe_writable(output_dir: str) -> str | None:
    """Fail now, not after an hour of training, if results cannot be written; returns the first folder it created."""
    from ._files import RESULT_FILES

    for name in RESULT_FILES:  # a folder (or a device, a socket) where the search writes a results file
        path = os.path.join(output_dir, name)
        if os.path.lexists(path) and not os.path.isfile(path):
            kind = (
                "folder" if os.path.isdir(path) else "special file" if os.path.exists(path) else "broken link"
            )
            raise SearchConfigError(
                f"output_dir={output_dir!r} has a {kind} named {name!r}, where the search writes its results "
                f"({', '.join(RESULT_FILES)}); move it away, or choose another output_dir via "
                "TrainingArguments(output_dir=...).",
                about="output_dir",
            )
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
            "with free space via TrainingArguments(output_dir=...).",
            about="output_dir",
        ) from error
    return created


def _output_dir(value: Any) -> str:
    """The search's folder: ``~`` expanded; characters that would change a storage URL built from it refused."""
    text = os.path.expanduser(os.fspath(value))
    bad = [c for c in "?#" if c in text]
    if bad:
        raise SearchConfigError(
            f"output_dir={os.fspath(value)!r} contains {bad[0]!r}, which a storage URL built from it (e.g. "
            "'sqlite:///{output_dir}/study.db') would read as the start of a query or fragment, moving the study "
            "elsewhere; choose a folder name without '?' and '#'.",
            about="output_dir",
        )
    return text


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
    backend: Any = None,
    hp_name: Callable[[Trial], str] | None = None,
    dashboard: bool = False,
    dashboard_port: int = 0,
    on_trial_end: Callable[..., None] | list[Callable[..., None]] | None = None,
    **kwargs: Any,
) -> BestRun | list[BestRun]:
    """Search the hyperparameters of ``trainer`` (which must have a ``model_init``).

    ``hp_space`` is a portable space (`spaces.SearchSpace` or a dict of `spaces` domains; works with every backend),
    the backend's native form (e.g. a callable taking the engine's trial), or None for the default space.
    ``compute_objective`` is a callable on the metrics, a metric name, or None (`default_compute_objective`).
    ``direction`` is 'minimize', 'maximize' or a list of them (several objectives: the Pareto front is returned as a
    list of `BestRun`). ``backend`` is a registered backend name (``hpsearch.backends.backend_names()``); None takes
    the first installed one. ``hp_name(trial)`` names each trial's folder and record; it gets the same `Trial` as
    ``model_init`` on every backend (a mapping of the parameters). Every backend also accepts ``max_failed_trials``
    (consecutive failures that stop the search, default 3), ``objective_scope`` ('last' evaluation, default,
    'best', 'avg', 'last-5-avg', 'last-10-avg') and ``trial_timeout`` (seconds; a trial running longer is stopped
    and recorded FAIL); other keyword arguments go to the backend (an unknown one is an error naming the accepted ones).
    ``dashboard=True`` serves the live dashboard of this search on 127.0.0.1 (``dashboard_port``, 0 = any free port)
    from a daemon thread and prints its address. ``on_trial_end(session, record)`` (a callable or a list of them) is
    called after each trial is recorded and saved, in the driver (e.g. a display; one that raises is logged).
    """
    _check_trainer(trainer)
    # numpy scalars as Python numbers, before any check: n_trials=np.int64(3) from an array is a valid count.
    n_trials, dashboard_port = _python_scalar(n_trials), _python_scalar(dashboard_port)
    kwargs = {key: _python_scalar(value) for key, value in kwargs.items()}
    n_trials, directions = _check_arguments(
        hp_space, n_trials, direction, compute_objective, hp_name, dashboard, dashboard_port
    )
    backend_cls, common = _check_options(backend, kwargs)
    reevaluation = check_reevaluation(
        common["reevaluate_top_k"],
        common["reevaluate_seeds"],
        n_trials,
        common["reevaluate_when"],
        common["reevaluate_folds"],
    )
    settings = _settings(trainer, backend_cls, compute_objective, directions, hp_name, common)
    adapter = backend_cls(settings, kwargs, trial_workers=common["trial_workers"])
    if reevaluation is not None:
        reevaluation.check_backend(adapter, common["trial_workers"])
        reevaluation = reevaluation.resolve_folds(int(trainer.args.seed))
    space, native_space = adapter.resolve_space(hp_space)
    if space is not None:
        _check_space(space, hp_space, trainer, adapter)
        if reevaluation is not None:
            reevaluation.check_space(space)
    adapter.validate()  # an adapter may map its own options onto its settings (e.g. a scope)
    _check_scope(adapter.settings)
    adapter.prepare(**{k: common[k] for k in ("warm_start", *_WARM_START_OPTIONS)})
    # Before any trial: the backend can hand trials to workers, and the settings can be pickled for them.
    check_trial_workers(adapter.settings, common["trial_workers"], common["trial_worker_max_trials"], adapter)
    output_dir = _output_dir(trainer.args.output_dir)
    _check_earlier_search(output_dir, adapter)
    planned = adapter.planned_trials(n_trials, native_space)
    session = _open_session(adapter, space, n_trials, planned, output_dir, common, _hooks(on_trial_end))
    if reevaluation is not None:
        session.result.settings["reevaluate"] = reevaluation.describe(adapter.settings)
    _run(adapter, session, native_space, common, reevaluation, dashboard, dashboard_port)
    return best_runs(session.result)


def _check_trainer(trainer: Any) -> None:
    """A trainer a search can run: built with ``model_init``, a train and an eval dataset."""
    from trainer import Trainer

    if not isinstance(trainer, Trainer):
        raise SearchConfigError(f"trainer must be a trainer.Trainer, got {type(trainer).__name__}.")
    if trainer.model_init is None:
        raise SearchConfigError(
            "hyperparameter_search needs a Trainer built with model_init (each trial trains a fresh model); "
            "pass Trainer(model_init=...) instead of model=..."
        )
    if trainer.eval_dataset is None:
        raise SearchConfigError(
            "hyperparameter_search needs an eval_dataset: every trial's objective comes from an evaluation; pass "
            "Trainer(eval_dataset=...)."
        )
    if trainer.train_dataset is None:
        raise SearchConfigError(
            "hyperparameter_search needs a train_dataset: every trial trains a model; pass Trainer(train_dataset=...)."
        )
    try:
        # Validated whole once: the fields of a trainer's arguments can be set after they were built (transformers
        # allows it), and a trial's copy re-checks only the fields it changes.
        dataclasses.replace(trainer.args)
    except (ValueError, TypeError) as error:
        raise SearchConfigError(
            f"trainer.args (its TrainingArguments, as they are now: a field set after they were built is checked "
            f"here) are not valid: {error}",
            about="args",
        ) from None
    for name, dataset in _sized_datasets(trainer):
        try:
            empty = len(dataset) == 0
        except (TypeError, NotImplementedError):  # a dataset that does not know its length (a stream)
            continue
        if empty:
            argument = name.partition("[")[0]
            article = "an" if argument[0] in "aeiou" else "a"
            raise SearchConfigError(
                f"{name}={dataset!r:.80} has no examples, so no trial "
                f"could {'train' if argument == 'train_dataset' else 'be evaluated'}; pass {article} {argument} "
                "with at least one example (Trainer(...) or trainer." + argument + " = ...).",
                about=argument,
            )


def _sized_datasets(trainer: Trainer) -> list[tuple[str, Any]]:
    """(name, dataset) of the trainer's datasets that know their length: the train dataset, the eval dataset, and
    each dataset of a dict of eval datasets (an empty dict is itself one)."""
    named: list[tuple[str, Any]] = [("train_dataset", trainer.train_dataset)]
    evaluation = trainer.eval_dataset
    if isinstance(evaluation, Mapping) and evaluation:
        named += [(f"eval_dataset[{key!r}]", dataset) for key, dataset in evaluation.items()]
    else:
        named.append(("eval_dataset", evaluation))
    return [(name, dataset) for name, dataset in named if hasattr(dataset, "__len__")]


def _check_arguments(
    hp_space: Any,
    n_trials: Any,
    direction: Any,
    compute_objective: Any,
    hp_name: Any,
    dashboard: Any,
    dashboard_port: Any,
) -> tuple[int, list[str]]:
    """`hyperparameter_search`'s own arguments: (n_trials, the directions normalised)."""
    if isinstance(hp_space, Mapping) and not hp_space:
        raise SearchConfigError(
            "hp_space={} has no parameter to search; pass at least one, or None for the default space."
        )
    n_trials = N_TRIALS.check(n_trials)
    directions = _directions(direction)
    if hp_name is not None and not callable(hp_name):
        raise SearchConfigError(
            f"hp_name must be a callable taking the trial and returning a name, got {hp_name!r}."
        )
    _check_takes("hp_name", hp_name, "the trial")
    _check_takes("compute_objective", compute_objective, "the metrics dict")
    _check_dashboard(dashboard, dashboard_port)
    if len(directions) > 1 and not callable(compute_objective):
        raise SearchConfigError(
            f"direction={directions} asks for {len(directions)} objectives, but compute_objective="
            f"{compute_objective!r} gives one value; pass a callable returning {len(directions)} numbers (one per "
            "direction), or a single direction."
        )
    return n_trials, directions


def _check_options(backend: Any, kwargs: dict[str, Any]) -> tuple[type[SearchBackend], dict[str, Any]]:
    """(the backend's adapter class, the common options with their defaults) for ``backend=`` and the keyword
    arguments; an unknown or ill-typed one is refused."""
    warm_options = sorted(k for k in _WARM_START_OPTIONS if kwargs.get(k) is not None)
    # What the user set, defaults aside.
    explicit = {k: kwargs[k] for k in COMMON_OPTIONS if kwargs.get(k) is not None}
    common = check_common_options(kwargs)
    backend_cls = resolve_backend(backend)
    if (
        "warm_start_mode" not in warm_options
        and common["warm_start_mode"] not in backend_cls.warm_start_modes[:1]
    ):
        # The default mode is 'inform' where the engine can be told earlier trials; else its first (random: evaluate).
        common["warm_start_mode"] = (backend_cls.warm_start_modes or (common["warm_start_mode"],))[0]
    _check_warm_start_options(common, warm_options)
    backend_cls.check_options({**kwargs, **explicit})  # a backend option may contradict a common one given
    if common["max_energy_kwh"] is not None and not wants_energy(True):
        raise SearchConfigError(
            f"max_energy_kwh={common['max_energy_kwh']} needs CodeCarbon to measure energy, which is not installed; "
            "run `pip install 'hpsearch[codecarbon]'` (or drop max_energy_kwh)."
        )
    return backend_cls, common


def _settings(
    trainer: Trainer,
    backend_cls: type[SearchBackend],
    compute_objective: Any,
    directions: list[str],
    hp_name: Any,
    common: dict[str, Any],
) -> TrialSettings:
    """The frozen, picklable settings every trial runs with (the adapter adds the portable space)."""
    objective_fn, objective_name = resolve_compute_objective(compute_objective)
    return TrialSettings(
        trainer=trainer.recipe(),
        compute_objective=objective_fn,
        objective_name=objective_name,
        directions=tuple(directions),
        output_dir=os.path.abspath(_output_dir(trainer.args.output_dir)),
        backend=backend_cls.name,
        hp_name=hp_name,
        objective_scope=common["objective_scope"],
        trial_timeout=common["trial_timeout"],
        measure_energy=wants_energy(common["max_energy_kwh"] is not None),
    )


def _check_space(space: SearchSpace, hp_space: Any, trainer: Trainer, adapter: SearchBackend) -> None:
    """A portable space every trial can train with (the default space, ``hp_space=None``, is not checked here)."""
    if hp_space is not None:
        check_epochs_not_ignored(space, trainer)
        if all(isinstance(space[name], Fixed) for name in space):
            raise SearchConfigError(
                f"hp_space has no parameter to search: every one is fixed ({', '.join(space)}), so every trial would "
                "train the same configuration; give at least one a range (spaces.Float, Int or Categorical), or set "
                "fixed values in TrainingArguments or model_init."
            )
    check_space_against_trainer(space, trainer, adapter.processes_per_trial())


def _check_scope(settings: TrialSettings) -> None:
    if settings.objective_scope == "best" and settings.n_objectives > 1:
        raise SearchConfigError(
            f"objective_scope='best' picks a trial's best evaluation, which several objectives (direction="
            f"{list(settings.directions)}) do not define; use 'last', 'avg', 'last-5-avg' or 'last-10-avg'."
        )


def _open_session(
    adapter: SearchBackend,
    space: SearchSpace | None,
    n_trials: int,
    planned: int,
    output_dir: str,
    common: dict[str, Any],
    hooks: list[TrialEndHook],
) -> SearchSession:
    """The driver's ledger, with the empty results it fills (``planned``: `SearchBackend.planned_trials`, kept in
    the settings where it is not ``n_trials``)."""
    from .results import SearchResult
    from .session import SearchSession

    settings = adapter.settings
    result = SearchResult(
        backend=adapter.name,
        directions=list(settings.directions),
        records=[],
        space=space.to_dict() if space is not None else None,
        n_trials=n_trials,
        objective=settings.objective_name,
        started=datetime.now(timezone.utc),
        output_dir=output_dir,
        settings={
            **adapter.describe(),
            "objective_scope": settings.objective_scope,
            **({"planned_trials": planned} if planned != n_trials else {}),
        },
        versions=_versions(type(adapter)),
    )
    return SearchSession(
        settings,
        result,
        n_trials,
        max_failed_trials=common["max_failed_trials"],
        max_device_hours=common["max_device_hours"],
        max_energy_kwh=common["max_energy_kwh"],
        trial_end_hooks=hooks,
    )


def _hooks(on_trial_end: Any) -> list[TrialEndHook]:
    hooks = (
        on_trial_end
        if isinstance(on_trial_end, list | tuple)
        else []
        if on_trial_end is None
        else [on_trial_end]
    )
    if not all(callable(hook) for hook in hooks):
        raise SearchConfigError(
            f"on_trial_end must be a callable (session, record) or a list of them, got {on_trial_end!r}."
        )
    for hook in hooks:  # a hook that cannot take them would only log an error after every trial
        _check_takes("on_trial_end", hook, "the session, the trial's record", count=2)
    return list(hooks)


def _run(
    adapter: SearchBackend,
    session: SearchSession,
    native_space: Any,
    common: dict[str, Any],
    reevaluation: Any,
    dashboard: bool,
    dashboard_port: int,
) -> None:
    """The search itself, in output_dir (probed first): the backend's trials, then the re-evaluations. Ctrl-C after
    a completed trial returns what finished; a search that fails before writing anything leaves no folder behind."""
    settings, result = adapter.settings, session.result
    output_dir = result.output_dir
    assert output_dir is not None  # set by _open_session
    created = _probe_writable(output_dir)
    if settings.measure_energy and (startup := start_energy()) is not None:
        result.settings["energy_startup_s"] = round(startup, 3)  # the search's cost, not its first trial's
    stop_dashboard = None
    try:
        if dashboard:
            stop_dashboard = _start_dashboard(output_dir, dashboard_port)
        # Read before the backend runs: an engine that rebuilds the results from its own store drops them.
        earlier = (
            reevaluation.earlier_runs(session) if reevaluation and adapter.continues_earlier_run() else []
        )
        if reevaluation is not None and reevaluation.when == "during":  # the search loop runs them
            from ._intensify import Intensification

            session.intensification = Intensification(reevaluation, session, earlier, adapter.replay_trial)
        with make_executor(settings, common["trial_workers"], common["trial_worker_max_trials"]) as executor:
            adapter.run(session, native_space, executor)
            if reevaluation is not None and reevaluation.when == "end":  # on the search's executor as well
                reevaluation.run(session, earlier, adapter.replay_trial, executor)
    except KeyboardInterrupt:
        session.save()
        if not any(r.state.value == "COMPLETE" for r in result.records):
            raise
        hint = (
            f"; the same call with {adapter.resume_hint} continues it (the running trial trains again)"
            if adapter.can_resume and adapter.resume_hint
            else ""
        )
        logger.warning(
            "Search interrupted: returning the best of the %d trials finished so far%s.",
            len(result.records),
            hint,
        )
    except BaseException:
        # A check only the run can make (e.g. a cluster address), the dashboard's port, or an engine's own error
        # before any trial: leave no empty folder behind.
        _remove_if_empty(created)
        raise
    finally:
        if stop_dashboard is not None:
            stop_dashboard()  # the port is free for the next search's dashboard


def _start_dashboard(output_dir: str, port: int) -> Callable[[], None]:
    from .dashboard import start_in_background

    url, stop = start_in_background(output_dir, port=port)
    print(
        f"hpsearch dashboard: {url} (it stops when the search returns; `hpsearch dashboard {output_dir}` serves it "
        "after)",
        flush=True,
    )
    return stop


_WARM_START_OPTIONS = ("warm_start_mode", "warm_start_top_k", "warm_start_defaults")


def _check_warm_start_options(common: dict[str, Any], given: list[str]) -> None:
    """The warm-start settings do something only with ``warm_start``, and ``warm_start_top_k`` only in 'evaluate'."""
    if common["warm_start"] is None and given:
        others = f" (and {', '.join(given[1:])})" if given[1:] else ""
        raise SearchConfigError(
            f"{given[0]}={common[given[0]]!r}{others} needs warm_start (the earlier searches to start from), without "
            "which it does nothing; pass warm_start=... or remove it.",
            about=given[0],
        )
    if "warm_start_top_k" in given and common["warm_start_mode"] != "evaluate":
        raise SearchConfigError(
            f"warm_start_top_k={common['warm_start_top_k']} needs warm_start_mode='evaluate' (which trains the best "
            f"earlier trials again); warm_start_mode={common['warm_start_mode']!r} tells the engine every earlier "
            "trial. Pass warm_start_mode='evaluate' or remove warm_start_top_k.",
            about="warm_start_top_k",
        )


def _check_takes(name: str, function: Any, what: str, count: int = 1) -> None:
    """A callable the search calls with ``count`` positional arguments must accept them (found now, not after a
    trial trained)."""
    if not callable(function) or isinstance(function, type):
        return
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin or C callable without a signature: it is called as is
        return
    try:
        signature.bind(*[object()] * count)
    except TypeError as error:
        words = {1: ("one argument", "one parameter"), 2: ("two arguments", "two parameters")}[count]
        raise SearchConfigError(
            f"{name}={getattr(function, '__qualname__', function)!r} cannot be called with {words[0]} ({what}): "
            f"{error}; give it exactly {words[1]}.",
            about=name,
        ) from None


def _check_dashboard(dashboard: Any, port: Any) -> None:
    if not isinstance(dashboard, bool):
        raise SearchConfigError(f"dashboard must be True or False, got {dashboard!r}.", about="dashboard")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise SearchConfigError(
            f"dashboard_port must be an integer from 0 to 65535 (0: any free port), got {port!r}.",
            about="dashboard_port",
        )
    if port and not dashboard:
        raise SearchConfigError(
            f"dashboard_port={port} is the live dashboard's port, but dashboard=False; pass dashboard=True, or remove "
            "dashboard_port.",
            about="dashboard_port",
        )


def _check_earlier_search(output_dir: str, adapter: SearchBackend) -> None:
    """Refuse to write over an earlier search's results, unless this call continues that very search (its backend
    says so, e.g. its store holds the earlier trials, and it is the same backend and the same search): its
    search.json and its trials' checkpoints would otherwise be replaced (a finished trial is never deleted
    implicitly)."""
    from . import _dist
    from ._files import SEARCH_FILE
    from .results import SearchResult
    from .session import identity_differences, search_identity

    if not os.path.isfile(os.path.join(output_dir, SEARCH_FILE)):
        return
    if not _dist.is_main_process():
        return  # the main process of a launched search checks (the others may start after its first save)
    continues = adapter.continues_earlier_run()
    hint = adapter.resume_hint  # how to continue it: only for the same search
    try:
        earlier = SearchResult.load(output_dir)
    except (ValueError, OSError) as error:
        if continues:
            return  # the backend's own store holds the search (and rebuilds its results), or it refuses the file
        what = f"a {SEARCH_FILE} this search cannot read ({error})"
    else:
        if not earlier.records:
            return
        if all(r.extra.get("config_error") for r in earlier.records):
            # It stopped at once on a setting no trial can satisfy (a misspelt metric name) and holds nothing else:
            # the leftovers of a setup mistake, which the corrected search replaces.
            logger.warning(
                "output_dir=%r holds a search that stopped on a setting error (%s); this search replaces it.",
                output_dir,
                earlier.records[-1].error,
            )
            return
        count = len(earlier.records)
        what = (
            f"an earlier search ({count} trial{'s' if count != 1 else ''}, backend={earlier.backend!r}, "
            f"objective {earlier.objective!r})"
        )
        stored = {
            "directions": earlier.directions,
            "objective": earlier.objective,
            "space": earlier.space,
            "objective_scope": earlier.settings.get("objective_scope"),
        }
        problems = identity_differences(stored, search_identity(adapter.settings))
        if earlier.backend != adapter.name:
            problems.insert(0, f"backend {earlier.backend!r} (this search: {adapter.name!r})")
        if continues and not problems:
            return
        if continues:
            raise SearchConfigError(
                f"output_dir={output_dir!r} holds an earlier search that this one cannot continue: it has "
                f"{'; '.join(problems)}. Continuing it would mix results of different searches, so nothing was "
                "started; give this search another output_dir (TrainingArguments(output_dir=...)), or the same "
                "backend, direction, objective and hp_space as the earlier one.",
                about="output_dir",
            )
        if problems:
            hint = None
    again = f", or continue it ({hint})" if hint else ""
    raise SearchConfigError(
        f"output_dir={output_dir!r} holds {what}; this search would replace its results and its trials' "
        "checkpoints, so nothing was started. Give this search another output_dir (TrainingArguments(output_dir=...)), "
        f"delete that folder to start over{again}.",
        about="output_dir",
    )
