"""The ray backend's checks of its options, and of what must travel to Ray workers, before any trial."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...errors import SearchConfigError

if TYPE_CHECKING:
    from ...settings import TrialSettings

logger = logging.getLogger(__name__)

#: Ray's ``scope`` (which results are a trial's objective) as the shared ``objective_scope``.
SCOPES = {
    "last": "last",
    "all": "best",
    "avg": "avg",
    "last-5-avg": "last-5-avg",
    "last-10-avg": "last-10-avg",
}


def validate(kw: Mapping[str, Any], settings: TrialSettings, conditional: set[str]) -> None:
    from ray.tune.schedulers import FIFOScheduler

    args = settings.trainer.args
    if settings.n_objectives > 1:
        raise SearchConfigError(
            f"direction={list(settings.directions)}: Ray Tune optimizes one metric, so the ray backend cannot run a "
            "multi-objective search; pass one direction (combine the objectives in compute_objective) or use "
            "backend='optuna'.",
            about="direction",
        )
    if (kw.get("workers_per_trial") or 1) > 1:
        _check_distributed(kw["workers_per_trial"])
    reuse_actors(kw)
    _check_tune_checkpoints(kw)
    scheduler = kw.get("scheduler")
    if scheduler is not None:
        _check_unset_metric("scheduler", scheduler)
        # ASHA and the other schedulers subclass FIFOScheduler: only plain FIFO needs no intermediate results.
        if type(scheduler) is not FIFOScheduler and strategy(args.eval_strategy) == "no":
            raise SearchConfigError(
                f"scheduler={type(scheduler).__name__} needs intermediate results, but eval_strategy='no' never "
                "evaluates during training; set eval_strategy='epoch' or 'steps' (or drop the scheduler).",
                about="scheduler",
            )
        if is_pbt(scheduler) and strategy(args.save_strategy) == "no":
            raise SearchConfigError(
                f"scheduler={type(scheduler).__name__} restarts trials from each other's checkpoints, but "
                "save_strategy='no' saves none; set save_strategy to eval_strategy's value.",
                about="scheduler",
            )
    search_alg = kw.get("search_alg")
    if search_alg is not None:
        _check_unset_metric("search_alg", search_alg)
        if conditional:
            raise SearchConfigError(
                f"search_alg={type(search_alg).__name__} cannot read conditional parameters "
                f"({sorted(conditional)}), which the ray backend expresses with tune.sample_from; drop "
                "search_alg (Tune's random search handles them) or give a space without conditions.",
                about="search_alg",
            )


def reuse_actors(kw: Mapping[str, Any]) -> bool:
    """Whether Tune runs a trial in the actor (the process) of a finished one: by default for trials of one
    process. A trial of several processes (``workers_per_trial > 1``) drives a Ray Train run whose workers are
    actors of their own, started per trial, so reusing the trial's actor would save nothing: it stays off and
    ``True`` is refused rather than accepted without an effect."""
    value = kw.get("reuse_actors")
    workers = kw.get("workers_per_trial") or 1
    if workers > 1:
        if value:
            raise SearchConfigError(
                f"reuse_actors=True with workers_per_trial={workers}: a trial of several processes starts its Ray "
                "Train workers for itself, so there is no process to reuse; drop reuse_actors (or set it to False).",
                about="reuse_actors",
            )
        return False
    return True if value is None else bool(value)


#: The options under which something reads Tune's copies of the trials' checkpoints (see `tune_checkpoints`).
_CHECKPOINT_READERS = ("keep_checkpoints_num", "checkpoint_score_attr")


def tune_checkpoints(kw: Mapping[str, Any], nodes: int) -> bool:
    """Whether a trial hands the checkpoint it saved at an evaluation to Tune too (``tune.report(checkpoint=...)``).

    Tune copies each such checkpoint into its storage and asks the trial's actor for it once more before the trial
    may go on (a second round trip to the driver per evaluation), and Tune's release tests of its own overhead hand it
    none. So by default a trial hands them only where something reads Tune's copies: a PBT scheduler (a trial
    restarts from another's), retries (``max_failures``: from the trial's own), ``resume`` (after a killed driver,
    unfinished trials restart from their last one), ``keep_checkpoints_num`` / ``checkpoint_score_attr`` (Tune
    ranks them), a trial of several processes, or a cluster of more than one node (a trial on another node
    reaches the driver's records only through Tune's copy). Else the trial's own checkpoint folders
    (``output_dir/run-*/checkpoint-*``) are the only ones. ``tune_checkpoints`` True or False says it outright."""
    value = kw.get("tune_checkpoints")
    if value is not None:
        return bool(value)
    return bool(
        is_pbt(kw.get("scheduler"))
        or kw.get("max_failures")
        or kw.get("resume")
        or any(kw.get(name) is not None for name in _CHECKPOINT_READERS)
        or (kw.get("workers_per_trial") or 1) > 1
        or nodes > 1
    )


def _check_tune_checkpoints(kw: Mapping[str, Any]) -> None:
    """``tune_checkpoints=False`` is refused where Tune's copies are what an option acts on."""
    if kw.get("tune_checkpoints") is not False:
        return
    readers = [name for name in _CHECKPOINT_READERS if kw.get(name) is not None]
    if is_pbt(kw.get("scheduler")):
        readers.insert(0, f"scheduler={type(kw['scheduler']).__name__}")
    if (kw.get("workers_per_trial") or 1) > 1:
        readers.append(f"workers_per_trial={kw['workers_per_trial']}")
    if readers:
        raise SearchConfigError(
            f"tune_checkpoints=False with {', '.join(readers)}: that reads the checkpoints the trials hand to Tune, "
            "and with tune_checkpoints=False they hand none; drop tune_checkpoints (or set it to True).",
            about="tune_checkpoints",
        )


def resources(value: Mapping[str, Any]) -> Mapping[str, Any]:
    """The rule of ``resources_per_trial``: finite amounts >= 0, and some resource asked for."""
    for key, amount in value.items():
        if (
            not isinstance(key, str)
            or isinstance(amount, bool)
            or not isinstance(amount, int | float)
            or not math.isfinite(amount)
            or amount < 0
        ):
            raise SearchConfigError(
                f"resources_per_trial[{key!r}]={amount!r}: each resource must be a finite number >= 0 "
                "(fractional GPUs such as 0.5 are allowed); pass e.g. {'cpu': 1, 'gpu': 0.5}."
            )
    if not any(value.values()):
        raise SearchConfigError(
            f"resources_per_trial={dict(value)!r} asks for nothing, and a trial needs some resource to be "
            "placed; ask for at least part of one, e.g. {'cpu': 1}."
        )
    return value


def folder_name(value: str) -> str:
    """The rule of ``name``: the experiment's folder under storage_path ("." or ".." would put Tune's files beside
    others)."""
    if os.sep in value or value in (".", ".."):
        raise SearchConfigError(
            f"name={value!r} must be a non-empty string (a folder name under storage_path, without {os.sep!r}, not "
            "'.' or '..'); pass e.g. name='hpsearch'."
        )
    return value


def _check_distributed(n: int) -> None:
    try:
        from ray.train.v2._internal.constants import V2_ENABLED_ENV_VAR, is_v2_enabled
    except ImportError:  # a private module: a Ray that moved it is read through the variable it documents
        V2_ENABLED_ENV_VAR = "RAY_TRAIN_V2_ENABLED"

        def is_v2_enabled() -> bool:
            return os.environ.get(V2_ENABLED_ENV_VAR, "1").strip().lower() not in ("0", "false", "no", "off")

    if not is_v2_enabled():
        raise SearchConfigError(
            f"workers_per_trial={n} runs each trial as a Ray Train run, which needs Ray Train v2 (Ray's "
            f"default), but {V2_ENABLED_ENV_VAR}={os.environ.get(V2_ENABLED_ENV_VAR)!r} turned it off; unset it "
            "or set it to 1.",
            about="workers_per_trial",
        )
    import torch.distributed

    if not torch.distributed.is_available():
        raise SearchConfigError(
            f"workers_per_trial={n} needs torch.distributed, which this torch build lacks; use "
            "workers_per_trial=1 or a torch build with distributed support.",
            about="workers_per_trial",
        )


def _check_unset_metric(key: str, obj: Any) -> None:
    metric = getattr(obj, "metric", None) or getattr(obj, "_metric", None)
    mode = getattr(obj, "mode", None) or getattr(obj, "_mode", None)
    if metric or mode:
        raise SearchConfigError(
            f"{key}={type(obj).__name__} was built with metric={metric!r}, mode={mode!r}; the search sets "
            f"them (metric='objective', mode from direction), and Tune refuses them twice. Build it without "
            "metric and mode.",
            about=key,
        )


def strategy(value: Any) -> str:
    return str(getattr(value, "value", value))


def is_pbt(scheduler: Any) -> bool:
    if scheduler is None:
        return False
    from ray.tune.schedulers import PopulationBasedTraining

    return isinstance(scheduler, PopulationBasedTraining)


def objective_scope(kw: Mapping[str, Any], settings: TrialSettings) -> str:
    """The shared ``objective_scope`` that Ray's ``scope`` asks for (refused when the two disagree)."""
    scope = kw.get("scope")
    if scope is None:
        return settings.objective_scope
    if settings.objective_scope != "last" and SCOPES[scope] != settings.objective_scope:
        raise SearchConfigError(
            f"objective_scope={settings.objective_scope!r} and scope={scope!r} disagree on which evaluation is a "
            f"trial's objective; drop one of them (scope={scope!r} is objective_scope={SCOPES[scope]!r}).",
            about="objective_scope",
        )
    return SCOPES[scope]


def check_scope_given(kwargs: Mapping[str, Any]) -> None:
    """``objective_scope`` and ``scope`` both given must agree, also when objective_scope is its default 'last'
    (which `objective_scope` cannot tell from unset)."""
    given, scope = kwargs.get("objective_scope"), kwargs.get("scope")
    if given is not None and scope in SCOPES and SCOPES[scope] != given:
        raise SearchConfigError(
            f"objective_scope={given!r} and scope={scope!r} disagree on which evaluation is a trial's objective "
            f"(scope={scope!r} is objective_scope={SCOPES[scope]!r}); drop one of them.",
            about="objective_scope",
        )


def check_picklable(settings: TrialSettings) -> None:
    """Name the piece of the trainer (or of the search) that cannot go to Ray's object store."""
    import dataclasses

    from ray import cloudpickle

    try:
        cloudpickle.dumps(settings)
        return
    except Exception as error:  # find the culprit to name it
        first = error
    for attr, value in vars(settings.trainer).items():
        try:
            cloudpickle.dumps(value)
        except Exception as error:
            raise SearchConfigError(
                f"The trainer's {attr!r} ({type(value).__name__}) cannot be pickled, so it cannot be sent to Ray "
                f"workers: {error}. Make it picklable (e.g. load data inside a picklable Dataset, use a "
                "module-level function instead of a closure over a lock/file/connection)."
            ) from error
    for field in dataclasses.fields(settings):
        if field.name == "trainer":
            continue
        try:
            cloudpickle.dumps(getattr(settings, field.name))
        except Exception as error:
            raise SearchConfigError(
                f"The search's {field.name} cannot be pickled, so it cannot be sent to Ray workers: {error}."
            ) from error
    raise SearchConfigError(f"The trainer cannot be pickled for Ray workers: {first}") from first


def check_fits(resources: Mapping[str, Any], local: bool) -> None:
    """A trial's ``resources_per_trial`` must fit on one node, or Tune waits for such a node for ever: refused for a
    local Ray the search started (nothing can add a node to it), a warning on a cluster (an autoscaler may)."""
    import ray

    wanted = {_RAY_NAMES.get(key.lower(), key): float(value) for key, value in resources.items() if value}
    nodes = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive")]
    if not nodes or any(all(node.get(k, 0.0) >= v for k, v in wanted.items()) for node in nodes):
        return
    most = {k: max(node.get(k, 0.0) for node in nodes) for k in wanted}
    problem = (
        f"resources_per_trial={dict(resources)!r}: no node of the Ray cluster has that much for one trial "
        f"(the most one node has: {most})"
    )
    if local:
        raise SearchConfigError(f"{problem}; ask for at most that (a trial runs on one node).")
    logger.warning("%s; its trials wait until a node that has it joins the cluster.", problem)


#: resources_per_trial's names as Ray's nodes report them.
_RAY_NAMES = {"cpu": "CPU", "gpu": "GPU"}
