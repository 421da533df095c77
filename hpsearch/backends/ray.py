"""Ray Tune adapter: a `tune.Tuner` drives the trials, locally or on a Ray cluster.

How the shared machinery maps onto Tune:

- **Space.** Portable domains become Tune domains. Ray's integer upper bounds are exclusive, so
  ``Int(low, high)`` is ``tune.randint(low, high + 1)`` (``lograndint`` likewise); a stepped domain is
  ``qrandint``/``quniform`` (whose bound is inclusive) when ``low`` is a multiple of the step, because Ray
  quantizes to multiples of ``q``, and otherwise ``tune.choice`` over the grid. A conditional parameter is a
  ``tune.sample_from`` that draws only when its parents' values activate it and gives ``None`` otherwise; the
  trainable recomputes which parameters are active with the portable space, so an inactive parameter is
  absent from ``trial.params`` while an active ``None`` choice stays. Search algorithms other than Tune's
  default cannot read ``sample_from``, so they are refused with a conditional space. A Ray-native
  ``hp_space`` (a dict of ``tune.*`` domains, or the Hugging Face form: a callable returning one when called
  with ``None``) is passed through.
- **Shipping.** The trainer goes to the object store once through ``tune.with_parameters``, without its
  model, optimizer and accelerator (each trial calls ``model_init`` and builds its own accelerator). A piece
  that cannot be pickled is named before anything starts.
- **Reports.** Every evaluation reports ``objective``, ``step`` and the eval metrics, with the checkpoint
  folder when one was saved at that step. Ray schedulers stop a trial by stopping its actor, so the reporter
  never asks to prune. A trial that ends on its own sends one last report marked ``hpsearch_done`` (and
  Tune's ``done``, so no scheduler acts on it): a trial that ended without it and without an error was
  stopped early and is recorded PRUNED.
- **Restarts.** When Tune restarts a trial with a checkpoint (a retry after a crash, a restored experiment,
  or PBT's exploit), the trial resumes from it. A checkpoint of another trial (PBT) brings its weights and
  step but not its optimizer and scheduler state, so the trial's new hyperparameters (learning rate, ...) take
  effect; ``extra["restored_from"]`` says from which trial and step. Its learning-rate schedule restarts.
- **Records.** A Tune callback in the driver turns each finished trial's results into a `TrialRecord` and
  hands it to ``ctx.finish`` while the search runs; after ``Tuner.fit`` the `ResultGrid` is translated once
  more so that trials restored from an earlier run are included. ``node`` is the Ray node id the trial last
  ran on (``extra["node_ip"]`` its address).
- **Distributed trials.** With ``workers_per_trial=N`` each Tune trial drives a Ray Train v2 ``TorchTrainer`` run
  (Ray's recommended way to run Train inside Tune) of N workers, gloo on CPU and NCCL on GPU, each given
  ``resources_per_trial``; the trial itself reserves no CPU, and unless ``max_concurrent_trials`` is set, Tune
  runs as many trials as the cluster has room for. Ray Train sets up the process group and the
  ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_*`` variables, so every worker runs the same `run_trial` and its
  Accelerator trains data-parallel (MULTI_CPU or MULTI_GPU). Rank 0 sends its reports, checkpoint folders
  included, to the Tune trial, which forwards them with ``tune.report``: schedulers, PBT, retries and restores see
  what a one-process trial sends. Records carry ``extra["workers"]``; ``node`` is rank 0's node. Across nodes,
  output_dir must be storage every node shares (checkpoints are read where the Tune trial runs and resumed by
  every worker), as Ray itself requires for multi-node storage.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import shutil
import socket
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, cast

from trainer import TrainerCallback

from ..errors import SearchConfigError, TooManyFailedTrials, TrialFailed
from ..runner import SearchContext, check_param_names, run_trial
from ..trial import Evaluation, Trial, TrialRecord, TrialState
from .base import SearchBackend

if TYPE_CHECKING:
    from spaces import SearchSpace

    from ..results import SearchResult

__all__ = ["RayBackend"]

logger = logging.getLogger(__name__)

_SCOPES = ("last", "all", "avg", "last-5-avg", "last-10-avg")
_CONNECT_TIMEOUT_S = 10.0
_MAX_GRID = 10_000
_DEFAULT_NAME = "hpsearch"
# Keys of a Tune result that are ours or Ray's bookkeeping, not eval metrics.
_OWN_KEYS = frozenset({"objective", "step", "done", "trial_id", "experiment_id", "should_checkpoint",
                       "experiment_tag", "__duplicate__"})
_PREFIX = "hpsearch_"
_TRAIN_STOP_TIMEOUT_S = 30.0
_DRIVER_MEMORY = 1 << 20  # bytes of Ray's logical memory a distributed trial's driver asks for (see run)


class _TrialError(TrialFailed):
    """Raised inside the trainable for a FAIL trial, so that Tune marks it errored (and may retry it)."""


# ---------------------------------------------------------------------------------------------- worker side
@dataclasses.dataclass
class _Payload:
    """What every trial needs, shipped once to the object store (no model, no locks, no accelerator)."""

    trainer: Any
    compute_objective: Callable[..., Any]
    objective_name: str
    directions: list[str]
    output_dir: str
    hp_name: Callable[[Trial], str] | None
    objective_scope: str
    space: SearchSpace | None

    def context(self) -> SearchContext:
        # Failures are counted by the driver, which sees every trial; a worker never stops the search.
        return SearchContext(
            trainer=self.trainer,
            compute_objective=self.compute_objective,
            objective_name=self.objective_name,
            directions=self.directions,
            output_dir=self.output_dir,
            hp_name=self.hp_name,
            max_failed_trials=1 << 30,
            objective_scope=self.objective_scope,
        )

    def params(self, config: Mapping[str, Any]) -> dict[str, Any]:
        if self.space is None:
            return dict(config)
        # Walk the space parents-first so an inactive parent also deactivates its children.
        params: dict[str, Any] = {}
        for name in self.space.order:
            if name in config and self.space.is_active(name, params):
                params[name] = config[name]
        return params


def _tune_send(result: dict[str, Any], folder: str | None) -> None:
    from ray import tune

    tune.report(result, checkpoint=tune.Checkpoint.from_directory(folder) if folder else None)


class _RayReporter:
    """Sends each evaluation to Tune (with its checkpoint folder); Tune's schedulers stop trials themselves.

    ``send(result, folder)`` delivers one result: `tune.report` in a trial's own process, or the channel to the
    Tune trial for rank 0 of a distributed trial.
    """

    def __init__(self, extra: Mapping[str, Any], send: Callable[[dict[str, Any], str | None], None] = _tune_send) -> None:
        self.extra = dict(extra)
        self.count = 0
        self.send = send

    def report(self, objective: Any, step: int, metrics: Mapping[str, float], checkpoint: str | None) -> bool:
        result = {k: v for k, v in metrics.items() if k not in _OWN_KEYS}
        result.update(self.extra, objective=float(objective), step=int(step))
        folder = checkpoint if checkpoint is not None and os.path.isdir(checkpoint) else None
        self.count += 1
        self.send(result, folder)
        return False


def _trial_number(trial_id: str) -> int:
    # Tune's ids are "<experiment>_<index>"; the index is the trial's number.
    try:
        return int(trial_id.rsplit("_", 1)[1])
    except (IndexError, ValueError):
        return 0


def _restart_point(checkpoint: Any, run_dir: str, trial_name: str) -> tuple[str, dict[str, Any]]:
    """A local copy of the checkpoint Tune restarts this trial from, and what it was.

    Tune may hand over a checkpoint on another node or in cloud storage, so it is always copied. One from
    another trial (PBT's exploit) keeps weights, step and RNG state but drops the optimizer and scheduler state:
    they carry the donor's learning rate, which would silently undo the new hyperparameters.
    """
    os.makedirs(run_dir, exist_ok=True)
    for old in os.listdir(run_dir):
        if old.startswith(".restore-"):
            shutil.rmtree(os.path.join(run_dir, old), ignore_errors=True)
    local = os.path.join(run_dir, f".restore-{uuid.uuid4().hex[:8]}")
    checkpoint.to_directory(local)
    origin, step = None, None
    with contextlib.suppress(OSError, ValueError), open(os.path.join(local, "training_args.json")) as f:
        origin = json.load(f).get("run_name")
    with contextlib.suppress(OSError, ValueError), open(os.path.join(local, "trainer_state.json")) as f:
        step = json.load(f).get("global_step")
    if origin is not None and origin != trial_name:
        for file in ("optimizer.pt", "scheduler.pt", "scaler.pt"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(local, file))
        return local, {f"{_PREFIX}restored_from": f"{origin}@{step}"}
    return local, {f"{_PREFIX}resumed_from": f"{trial_name}@{step}"}


class _MaxSteps(TrainerCallback):
    """Adds the trial's planned number of steps to its reports, so the driver can tell a stopped trial.

    A scheduler may stop a trial at its last evaluation (ASHA at ``max_t``), before the trial's end marker:
    such a trial still ran every step and is COMPLETE. Shared, not copied, by the trial's clone of the trainer.
    """

    def __init__(self, reporter: _RayReporter) -> None:
        self.reporter = reporter

    def __deepcopy__(self, memo: dict) -> _MaxSteps:
        return self

    def on_train_begin(self, args, state, control, **kwargs):
        self.reporter.extra[f"{_PREFIX}max_steps"] = int(state.max_steps)


def _with_callback(trainer: Any, callback: TrainerCallback) -> Any:
    import copy

    from trainer import CallbackHandler

    own = copy.copy(trainer)
    own.callback_handler = CallbackHandler([*trainer.callback_handler.callbacks, callback], None, None, None)
    return own


def _trainable(config: dict[str, Any], payload: _Payload) -> None:
    """One Tune trial: `run_trial` with a reporter that talks to Tune."""
    import ray
    from ray import tune

    ctx = payload.context()
    trial_id = tune.get_context().get_trial_id()
    trial = Trial(trial_id, _trial_number(trial_id), payload.params(config), "ray")
    name = ctx.trial_name(trial)
    runtime = ray.get_runtime_context()
    extra: dict[str, Any] = {
        f"{_PREFIX}name": name,
        f"{_PREFIX}node": runtime.get_node_id(),
        f"{_PREFIX}node_ip": ray.util.get_node_ip_address(),
    }
    resume = None
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        resume, restart = _restart_point(checkpoint, os.path.join(ctx.output_dir, name), name)
        extra.update(restart)
    reporter = _RayReporter(extra)
    ctx.trainer = _with_callback(ctx.trainer, _MaxSteps(reporter))
    record = run_trial(ctx, trial, reporter, resume_from_checkpoint=resume)
    if resume is not None:
        shutil.rmtree(resume, ignore_errors=True)
    _conclude(record, reporter)


def _conclude(record: TrialRecord, reporter: _RayReporter) -> None:
    """After `run_trial`: fail the Tune trial, or send its last result and the marker of a trial that ended itself."""
    if record.state is TrialState.FAIL:
        raise _TrialError(record.error or "the trial failed")
    # RayBackend refuses multi-objective searches up front, so a Ray trial's objective is a single number.
    objective = float(cast(float, record.objective)) if record.objective is not None else math.nan
    if reporter.count == 0:
        # No evaluation during training (eval_strategy="no"): the final one is the trial's only result.
        last = record.intermediates[-1] if record.intermediates else None
        reporter.report(objective, record.last_step or 0, last.metrics if last else {}, None)
    # The marker of a trial that ran to its end; `done` makes Tune stop it without asking the scheduler.
    reporter.send({
        **reporter.extra,
        "objective": objective,
        "step": int(record.last_step or 0),
        "done": True,
        f"{_PREFIX}done": True,
        f"{_PREFIX}last_step": int(record.last_step or 0),
    }, None)


# ---------------------------------------------------------------------------------------------- distributed trials
@dataclasses.dataclass
class _Workers:
    """What a distributed trial needs: the payload's object-store reference and the Ray Train worker group."""

    payload: Any  # ray.ObjectRef of the _Payload, put once by the driver and read by every trial and worker
    count: int
    resources: dict[str, float]  # per worker, in Ray's names (CPU, GPU, custom)

    @property
    def use_gpu(self) -> bool:
        return self.resources.get("GPU", 0) > 0


class _Channel:
    """Rank 0 of a distributed trial -> its Tune trial: each result waits until Tune took it (and its checkpoint).

    Ray Train v2's ``ray.train.report`` is a barrier that every rank must reach equally often, while the shared
    reporting callback reports from rank 0 alone; and its Tune bridge forwards metrics without the checkpoint,
    which PBT, retries and ``Tuner.restore`` need. So rank 0 hands results to the Tune trial through a queue
    and waits for the acknowledgment: the checkpoint folder stays in place until Tune copied it.
    """

    def __init__(self) -> None:
        from ray.util.queue import Queue

        self.results = Queue(actor_options={"num_cpus": 0})
        self.acks = Queue(actor_options={"num_cpus": 0})

    def _put(self, kind: str, value: Any, folder: str | None = None) -> None:
        self.results.put((kind, value, folder))
        self.acks.get()

    def hello(self, placement_group: Any) -> None:
        self._put("placement_group", placement_group)

    def send(self, result: dict[str, Any], folder: str | None) -> None:
        self._put("result", result, folder)

    def fail(self, error: str) -> None:
        self._put("error", error)


def _distributed_trainable(config: dict[str, Any], workers: _Workers) -> None:
    """One Tune trial run by ``workers.count`` Ray Train workers; this process only drives them and talks to Tune."""
    import threading

    import ray
    import ray.train
    from ray import tune
    from ray.train.torch import TorchConfig, TorchTrainer
    from ray.util.queue import Empty

    payload: _Payload = ray.get(workers.payload)
    ctx = payload.context()
    trial_id = tune.get_context().get_trial_id()
    params = payload.params(config)
    name = ctx.trial_name(Trial(trial_id, _trial_number(trial_id), dict(params), "ray"))
    resume: str | None = None
    restart: dict[str, Any] = {}
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        # Copied next to the trial's outputs: every worker reads it (a shared output_dir across nodes).
        resume, restart = _restart_point(checkpoint, os.path.join(ctx.output_dir, name), name)
    channel = _Channel()
    trainer = TorchTrainer(
        _worker_loop,
        train_loop_config={"workers": workers, "trial_id": trial_id, "params": params, "resume": resume,
                           "extra": restart, "channel": channel},
        scaling_config=ray.train.ScalingConfig(
            num_workers=workers.count, use_gpu=workers.use_gpu, resources_per_worker=dict(workers.resources)
        ),
        torch_config=TorchConfig(backend="nccl" if workers.use_gpu else "gloo"),
        run_config=ray.train.RunConfig(
            # A fresh Train run for every attempt: a retry resumes from the Tune checkpoint, not from Train's state.
            name=f"{name}-{uuid.uuid4().hex[:8]}",
            storage_path=os.path.join(payload.output_dir, "ray_train"),
            # Tune retries the whole trial from its checkpoint (max_failures), as for single-process trials.
            failure_config=ray.train.FailureConfig(max_failures=0),
        ),
    )
    outcome: dict[str, BaseException] = {}

    def fit() -> None:
        try:
            trainer.fit()
        except BaseException as error:  # re-raised below, in the trial's thread
            outcome["error"] = error

    # Tune takes reports from this thread only, so the Train run goes to a helper thread.
    thread = threading.Thread(target=fit, name=f"hpsearch-train-{name}", daemon=True)
    stopper = _TrainRunStopper(thread)
    thread.start()
    failure: str | None = None
    final: dict[str, Any] | None = None
    unseen_warned = False
    try:
        while True:
            try:
                kind, value, folder = channel.results.get(timeout=0.5)
            except Empty:
                if thread.is_alive():
                    continue
                if channel.results.empty():
                    break
                continue
            if kind == "placement_group":
                stopper.watch(value)
            elif kind == "error":
                failure = value
            elif value.get(f"{_PREFIX}done") is True:
                # Held until the Train run has ended: Tune stops a done trial at once, and a Train run cut short
                # leaves its placement group (its workers' CPUs) reserved.
                final = value
            else:
                if folder is not None and not os.path.isdir(folder):
                    if not unseen_warned:
                        logger.warning(
                            "Trial %s: rank 0 saved %s on another node, where this Tune trial cannot read it; its "
                            "results go to Tune without checkpoints. Put output_dir on storage every node shares.",
                            name, folder,
                        )
                        unseen_warned = True
                    folder = None
                _tune_send(value, folder)
            channel.acks.put(True)
        thread.join()
    finally:
        stopper.stop()
    if resume is not None:
        shutil.rmtree(resume, ignore_errors=True)
    if failure is not None:
        raise _TrialError(failure)
    if "error" in outcome:
        error = outcome["error"]
        lines = [line for line in str(error).strip().splitlines() if line.strip()]
        raise _TrialError(
            f"a Ray Train worker of the trial failed: {lines[-1].strip() if lines else type(error).__name__}"
        ) from error
    if final is not None:
        _tune_send(final, None)


class _TrainRunStopper:
    """Ends a distributed trial's Train run when its Tune trial stops first (a scheduler, an error, the end).

    Tune stops a trial by ending its process, which takes the Train controller and workers with it but not their
    placement group: Ray keeps that until the driver exits, unless Ray Train's cleaner can see through the State
    API (a dashboard) that the controller died. So the trial removes it itself, on its way out (``atexit`` runs
    when Tune ends the actor), and waits briefly for the controller to wind down.
    """

    def __init__(self, thread: Any) -> None:
        self.thread = thread
        self.placement_group: Any = None
        self.registered = False

    def watch(self, placement_group: Any) -> None:
        import atexit

        self.placement_group = placement_group
        if not self.registered:
            atexit.register(self.stop)
            self.registered = True

    def stop(self) -> None:
        import atexit

        if self.registered:
            atexit.unregister(self.stop)
            self.registered = False
        if self.placement_group is None or not self.thread.is_alive():
            return
        from ray.util.placement_group import remove_placement_group

        with contextlib.suppress(Exception):
            remove_placement_group(self.placement_group)
        self.thread.join(timeout=_TRAIN_STOP_TIMEOUT_S)


def _set_distributed_env() -> None:
    """The torch.distributed variables accelerate reads, for whichever of them Ray Train did not set."""
    import ray.train

    context = ray.train.get_context()
    for key, value in (("RANK", context.get_world_rank()), ("WORLD_SIZE", context.get_world_size()),
                       ("LOCAL_RANK", context.get_local_rank()), ("LOCAL_WORLD_SIZE", context.get_local_world_size()),
                       ("NODE_RANK", context.get_node_rank())):
        os.environ.setdefault(key, str(value))


def _worker_loop(config: dict[str, Any]) -> None:
    """Every Ray Train worker of a distributed trial: the same `run_trial`, data-parallel through accelerate.

    Ray Train has set up the process group (gloo or NCCL) before this runs, so the trial's Accelerator joins it
    (MULTI_CPU or MULTI_GPU), and the reporting callback reports from rank 0 and broadcasts its decisions.
    """
    import ray
    import ray.train

    _set_distributed_env()
    workers: _Workers = config["workers"]
    payload: _Payload = ray.get(workers.payload)
    ctx = payload.context()
    trial_id = config["trial_id"]
    trial = Trial(trial_id, _trial_number(trial_id), dict(config["params"]), "ray")
    name = ctx.trial_name(trial)
    rank = ray.train.get_context().get_world_rank()
    channel: _Channel = config["channel"]
    extra: dict[str, Any] = {
        f"{_PREFIX}name": name,
        f"{_PREFIX}node": ray.get_runtime_context().get_node_id(),
        f"{_PREFIX}node_ip": ray.util.get_node_ip_address(),
        f"{_PREFIX}workers": workers.count,
        **config["extra"],
    }
    if rank == 0:
        channel.hello(ray.util.get_current_placement_group())
    reporter = _RayReporter(extra, send=channel.send if rank == 0 else _rank_zero_only)
    ctx.trainer = _with_callback(ctx.trainer, _MaxSteps(reporter))
    record = run_trial(ctx, trial, reporter, resume_from_checkpoint=config["resume"])
    if rank != 0:
        if record.state is TrialState.FAIL:
            raise _TrialError(record.error or "the trial failed")
        return
    try:
        _conclude(record, reporter)
    except _TrialError as error:
        channel.fail(str(error))
        raise


def _rank_zero_only(result: dict[str, Any], folder: str | None) -> None:
    raise RuntimeError("only rank 0 of a distributed trial reports to Tune")


# ---------------------------------------------------------------------------------------------- driver side
_current: _Recorder | None = None  # the search running in this driver (Tune pickles callbacks: they look it up)


class _Recorder:
    """Collects each trial's results in the driver and records the trial when Tune says it ended."""

    def __init__(self, backend: RayBackend) -> None:
        self.backend = backend
        self.results: dict[str, list[dict[str, Any]]] = {}
        self.started: dict[str, datetime] = {}
        self.failure: TooManyFailedTrials | None = None
        self.recorded: set[str] = set()

    def finish(self, trial: Any, error: str | None) -> None:
        trial_id = trial.trial_id
        record = self.backend._record(
            trial_id, trial.config, self.results.get(trial_id, []), error, getattr(trial, "path", None),
            started=self.started.get(trial_id), finished=_now(),
        )
        self.recorded.add(trial_id)
        try:
            self.backend.ctx.finish(record)
        except TooManyFailedTrials as failure:
            self.failure = failure  # raised after Tune stopped every trial (see _StopAll)


def _tune_callback_class() -> type:
    return _lazy("_HPSearchCallback")


def _stopper_class() -> type:
    return _lazy("_StopAll")


def __getattr__(name: str) -> Any:
    # Tune pickles the callback and the stopper with the experiment (and unpickles them on restore); they
    # subclass Ray's classes, which this module may not import eagerly, so they are built on first access and
    # pickled by reference to this module.
    if name in ("_HPSearchCallback", "_StopAll"):
        return _lazy(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _lazy(name: str) -> type:
    cls = globals().get(name)
    if cls is None:
        cls = _build_callback() if name == "_HPSearchCallback" else _build_stopper()
        cls.__module__ = __name__
        cls.__qualname__ = name
        globals()[name] = cls
    return cls


def _build_callback() -> type:
    from ray import tune

    class _HPSearchCallback(tune.Callback):
        """Forwards Tune's trial events to the running search (stateless, so Tune may pickle it)."""

        def on_trial_start(self, iteration, trials, trial, **info):
            if _current is not None:
                _current.started.setdefault(trial.trial_id, _now())

        def on_trial_result(self, iteration, trials, trial, result, **info):
            if _current is not None:
                _current.results.setdefault(trial.trial_id, []).append(_plain(result))

        def on_trial_complete(self, iteration, trials, trial, **info):
            if _current is not None:
                _current.finish(trial, None)

        def on_trial_error(self, iteration, trials, trial, **info):
            if _current is not None:
                _current.finish(trial, _trial_error(trial))

    return _HPSearchCallback


def _build_stopper() -> type:
    from ray import tune

    class _StopAll(tune.stopper.Stopper):
        """The user's ``stop`` plus stopping everything after too many failed trials in a row."""

        def __init__(self, user: Any) -> None:
            self.user = user

        def __call__(self, trial_id, result):
            user = self.user
            if user is None:
                return False
            if isinstance(user, Mapping):
                return any(k in result and result[k] >= v for k, v in user.items())
            return bool(user(trial_id, result))

        def stop_all(self):
            if _current is not None and _current.failure is not None:
                return True
            return bool(getattr(self.user, "stop_all", lambda: False)())

    return _StopAll


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _plain(result: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "config"}


def _trial_error(trial: Any) -> str:
    error = None
    # Tune writes the error to the driver's staging folder just before on_trial_error and copies it to storage
    # (where `get_error` reads) only at its next sync, so the staging file is the one that exists by now.
    with contextlib.suppress(Exception), open(trial.error_file) as f:
        error = f.read() or None
    if error is None:
        with contextlib.suppress(Exception):
            error = trial.get_error()
    text = str(error) if error is not None else "the trial errored"
    lines = [line for line in text.strip().splitlines() if line.strip()]
    # Ray wraps the exception in its own traceback; its last line is the trial's error.
    return lines[-1].strip() if lines else text


def _ran_to_end(results: Sequence[Mapping[str, Any]], evaluations: list[Evaluation]) -> bool:
    planned = next((_as_float(r.get(f"{_PREFIX}max_steps")) for r in reversed(results)
                    if _as_float(r.get(f"{_PREFIX}max_steps")) is not None), None)
    return planned is not None and bool(evaluations) and evaluations[-1].step >= planned


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _as_float(value: Any) -> float | None:
    if _missing(value) or isinstance(value, bool | str):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


class RayBackend(SearchBackend):
    name = "ray"
    requirement = "ray"
    install_command = "pip install 'hpsearch[ray]'"
    accepted_kwargs = frozenset({
        "address", "resources_per_trial", "max_concurrent_trials", "scheduler", "search_alg", "storage_path",
        "name", "max_failures", "keep_checkpoints_num", "checkpoint_score_attr", "time_budget_s", "stop",
        "scope", "resume", "workers_per_trial",
    })

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        from ray.tune.schedulers import FIFOScheduler, TrialScheduler
        from ray.tune.search import SearchAlgorithm, Searcher

        kw = self.kwargs
        ctx = self.ctx
        args = ctx.trainer.args
        if ctx.n_objectives > 1:
            raise SearchConfigError(
                f"direction={ctx.directions}: Ray Tune optimizes one metric, so the ray backend cannot run a "
                "multi-objective search; pass one direction (combine the objectives in compute_objective) or use "
                "backend='optuna'."
            )
        address = kw.get("address")
        if address is not None and (not isinstance(address, str) or not address):
            raise SearchConfigError(f"address must be a string such as 'auto' or '127.0.0.1:6379', got {address!r}.")
        resources = kw.get("resources_per_trial")
        if resources is not None:
            if not isinstance(resources, Mapping) or not resources:
                raise SearchConfigError(
                    f"resources_per_trial must be a dict such as {{'cpu': 1, 'gpu': 0.5}}, got {resources!r}."
                )
            for key, value in resources.items():
                if not isinstance(key, str) or isinstance(value, bool) or not isinstance(value, int | float) \
                        or value < 0:
                    raise SearchConfigError(
                        f"resources_per_trial[{key!r}]={value!r}: each resource must be a number >= 0 "
                        "(fractional GPUs such as 0.5 are allowed)."
                    )
        for key, minimum in (("max_concurrent_trials", 1), ("max_failures", -1), ("keep_checkpoints_num", 1),
                             ("workers_per_trial", 1)):
            value = kw.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < minimum):
                raise SearchConfigError(f"{key} must be an integer >= {minimum} (or None), got {value!r}.")
        if (kw.get("workers_per_trial") or 1) > 1:
            self._check_distributed()
        budget = kw.get("time_budget_s")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int | float) or budget <= 0):
            raise SearchConfigError(f"time_budget_s must be a positive number of seconds, got {budget!r}.")
        for key in ("name", "checkpoint_score_attr"):
            value = kw.get(key)
            if value is not None and (not isinstance(value, str) or not value or (os.sep in value and key == "name")):
                raise SearchConfigError(f"{key} must be a non-empty string (a folder name for name), got {value!r}.")
        storage = kw.get("storage_path")
        if storage is not None and (not isinstance(storage, str | os.PathLike) or not os.fspath(storage)):
            raise SearchConfigError(f"storage_path must be a folder path or a URI such as 's3://...', got {storage!r}.")
        stop = kw.get("stop")
        from ray.tune.stopper import Stopper

        if stop is not None and not isinstance(stop, Mapping | Stopper) and not callable(stop):
            raise SearchConfigError(
                f"stop must be a dict of result thresholds, a ray.tune.stopper.Stopper or a callable "
                f"(trial_id, result) -> bool, got {stop!r}."
            )
        scope = kw.get("scope")
        if scope is not None and scope not in _SCOPES:
            raise SearchConfigError(f"scope={scope!r} must be one of {list(_SCOPES)}.")
        if scope not in (None, "all") and ctx.objective_scope == "best":
            raise SearchConfigError(
                f"objective_scope='best' and scope={scope!r} disagree on which evaluation is a trial's objective; "
                "drop one of them (scope='all' is the same as objective_scope='best')."
            )
        resume = kw.get("resume")
        if resume is not None and not isinstance(resume, bool | str | os.PathLike):
            raise SearchConfigError(f"resume must be True/False or an experiment folder, got {resume!r}.")
        scheduler = kw.get("scheduler")
        if scheduler is not None:
            if not isinstance(scheduler, TrialScheduler):
                raise SearchConfigError(
                    f"scheduler must be a ray.tune.schedulers.TrialScheduler (ASHAScheduler(), ...), got {scheduler!r}."
                )
            self._check_unset_metric("scheduler", scheduler)
            # ASHA and the other schedulers subclass FIFOScheduler: only plain FIFO needs no intermediate results.
            if type(scheduler) is not FIFOScheduler and _strategy(args.eval_strategy) == "no":
                raise SearchConfigError(
                    f"scheduler={type(scheduler).__name__} needs intermediate results, but eval_strategy='no' never "
                    "evaluates during training; set eval_strategy='epoch' or 'steps' (or drop the scheduler)."
                )
            if _is_pbt(scheduler) and _strategy(args.save_strategy) == "no":
                raise SearchConfigError(
                    f"scheduler={type(scheduler).__name__} restarts trials from each other's checkpoints, but "
                    "save_strategy='no' saves none; set save_strategy to eval_strategy's value."
                )
        search_alg = kw.get("search_alg")
        if search_alg is not None:
            if not isinstance(search_alg, Searcher | SearchAlgorithm):
                raise SearchConfigError(
                    f"search_alg must be a ray.tune.search.Searcher (e.g. OptunaSearch()), got {search_alg!r}."
                )
            self._check_unset_metric("search_alg", search_alg)
            if self._conditional:
                raise SearchConfigError(
                    f"search_alg={type(search_alg).__name__} cannot read conditional parameters "
                    f"({sorted(self._conditional)}), which the ray backend expresses with tune.sample_from; drop "
                    "search_alg (Tune's random search handles them) or give a space without conditions."
                )
        self._check_picklable()

    def _check_distributed(self) -> None:
        from ray.train.v2._internal.constants import V2_ENABLED_ENV_VAR, is_v2_enabled

        n = self.kwargs["workers_per_trial"]
        if not is_v2_enabled():
            raise SearchConfigError(
                f"workers_per_trial={n} runs each trial as a Ray Train run, which needs Ray Train v2 (Ray's "
                f"default), but {V2_ENABLED_ENV_VAR}={os.environ.get(V2_ENABLED_ENV_VAR)!r} turned it off; unset it "
                "or set it to 1."
            )
        import torch.distributed

        if not torch.distributed.is_available():
            raise SearchConfigError(
                f"workers_per_trial={n} needs torch.distributed, which this torch build lacks; use "
                "workers_per_trial=1 or a torch build with distributed support."
            )

    def _check_unset_metric(self, key: str, obj: Any) -> None:
        metric = getattr(obj, "metric", None) or getattr(obj, "_metric", None)
        mode = getattr(obj, "mode", None) or getattr(obj, "_mode", None)
        if metric or mode:
            raise SearchConfigError(
                f"{key}={type(obj).__name__} was built with metric={metric!r}, mode={mode!r}; the search sets "
                f"them (metric='objective', mode from direction), and Tune refuses them twice. Build it without "
                "metric and mode."
            )

    @property
    def _conditional(self) -> set[str]:
        space = getattr(self, "_space", None)
        return {n for n in space if space[n].is_conditional} if space is not None else set()

    def _payload(self, space: SearchSpace | None) -> _Payload:
        from trainer import CallbackHandler

        trainer = self.ctx.trainer
        shipped = _strip(trainer, CallbackHandler)
        ctx = self.ctx
        return _Payload(
            trainer=shipped,
            compute_objective=ctx.compute_objective,
            objective_name=ctx.objective_name,
            directions=list(ctx.directions),
            output_dir=os.path.abspath(ctx.output_dir),
            hp_name=ctx.hp_name,
            objective_scope=ctx.objective_scope,
            space=space,
        )

    def _check_picklable(self) -> None:
        """Name the piece of the trainer (or of the search) that cannot go to Ray's object store."""
        from ray import cloudpickle

        payload = self._payload(getattr(self, "_space", None))
        try:
            cloudpickle.dumps(payload)
            return
        except Exception as error:  # find the culprit to name it
            first = error
        for attr, value in vars(payload.trainer).items():
            try:
                cloudpickle.dumps(value)
            except Exception as error:
                raise SearchConfigError(
                    f"The trainer's {attr!r} ({type(value).__name__}) cannot be pickled, so it cannot be sent to Ray "
                    f"workers: {error}. Make it picklable (e.g. load data inside a picklable Dataset, use a "
                    "module-level function instead of a closure over a lock/file/connection)."
                ) from error
        for field in dataclasses.fields(payload):
            if field.name == "trainer":
                continue
            try:
                cloudpickle.dumps(getattr(payload, field.name))
            except Exception as error:
                raise SearchConfigError(
                    f"The search's {field.name} cannot be pickled, so it cannot be sent to Ray workers: {error}."
                ) from error
        raise SearchConfigError(f"The trainer cannot be pickled for Ray workers: {first}") from first

    def settings(self) -> dict[str, Any]:
        out = super().settings()
        for key in ("scheduler", "search_alg"):
            if key in self.kwargs:
                out[key] = type(self.kwargs[key]).__name__
        return out

    # ------------------------------------------------------------------ space
    def is_native_space(self, hp_space: Any) -> bool:
        from ray.tune.search.sample import Domain

        if isinstance(hp_space, Mapping):
            # tune.grid_search(...) is a plain {"grid_search": [...]} dict, not a Domain.
            return any(isinstance(v, Domain) or (isinstance(v, Mapping) and set(v) == {"grid_search"})
                       for v in hp_space.values())
        return callable(hp_space)

    def resolve_space(self, hp_space: Any) -> tuple[SearchSpace | None, Any]:
        self._space: SearchSpace | None = None
        if hp_space is not None and self.is_native_space(hp_space):
            native = hp_space(None) if callable(hp_space) and not isinstance(hp_space, Mapping) else hp_space
            if not isinstance(native, Mapping):
                raise SearchConfigError(
                    f"hp_space(None) must return a dict of Ray Tune domains (tune.uniform(...), ...), got "
                    f"{type(native).__name__}: {native!r}."
                )
            self._check_native_names(native)
            return None, dict(native)
        space, native = super().resolve_space(hp_space)
        self._space = space
        return space, native

    def _check_native_names(self, native: Mapping[str, Any]) -> None:
        check_param_names(native, self.ctx.trainer)

    def convert_space(self, space: SearchSpace) -> dict[str, Any]:
        """Tune domains for the space (Ray's integer upper bounds are exclusive: ``high + 1``)."""
        from ray import tune

        out: dict[str, Any] = {}
        for name in space.order:
            domain = space[name]
            native = _domain(name, domain)
            if domain.is_conditional:
                native = tune.sample_from(_ConditionalSample(space, name, native))
            out[name] = native
        return out

    # ------------------------------------------------------------------ run
    def _connect(self) -> bool:
        """Connect to (or start) Ray; True when this search started it and must shut it down."""
        import ray

        address = self.kwargs.get("address")
        if address is not None and address not in ("auto", "local") and not address.startswith("ray://"):
            _probe(address)
        if ray.is_initialized():
            return False
        if address is None:
            ray.init(
                num_cpus=os.cpu_count(),
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
                log_to_driver=False,
                configure_logging=False,
            )
            return True
        try:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
        except Exception as error:  # Ray raises ConnectionError, RuntimeError, ValueError...
            raise SearchConfigError(
                f"address={address!r}: could not connect to a Ray cluster ({type(error).__name__}: {error}). Start "
                "one with `ray start --head`, or leave address unset to start a local Ray."
            ) from error
        return False

    def _storage(self) -> tuple[str, str]:
        kw = self.kwargs
        storage = kw.get("storage_path")
        storage = os.fspath(storage) if storage is not None else os.path.join(self.ctx.output_dir, "ray_results")
        if "://" not in storage:
            storage = os.path.abspath(storage)
        return storage, kw.get("name") or _DEFAULT_NAME

    def run(self, n_trials: int, space: SearchSpace | None, native_space: Any) -> SearchResult:
        global _current
        import ray
        from ray import tune

        ctx = self.ctx
        kw = self.kwargs
        assert ctx.result is not None
        started = self._connect()
        recorder = _Recorder(self)
        _current = recorder
        try:
            payload = self._payload(space)
            resources = dict(kw.get("resources_per_trial") or {"cpu": 1})
            workers = kw.get("workers_per_trial") or 1
            if workers > 1:
                # The Tune trial only drives its Ray Train workers (Ray's own advice), so it takes no CPU: the
                # workers may use every CPU. Tune refuses an all-zero request, hence a token of logical memory.
                spec = _Workers(ray.put(payload), workers, _worker_resources(resources))
                self._concurrency = _fitting_trials(spec)
                trainable = tune.with_resources(
                    tune.with_parameters(_distributed_trainable, workers=spec), {"memory": _DRIVER_MEMORY}
                )
            else:
                trainable = tune.with_resources(tune.with_parameters(_trainable, payload=payload), resources)
            storage, name = self._storage()
            experiment = os.path.join(storage, name)
            resume = kw.get("resume")
            if resume:
                path = experiment if resume is True else os.path.abspath(os.fspath(resume))
                if not tune.Tuner.can_restore(path):
                    raise SearchConfigError(
                        f"resume={resume!r}: there is no Ray Tune experiment to restore in {path!r}; run without "
                        "resume first, or pass the experiment folder (storage_path/name)."
                    )
                tuner = tune.Tuner.restore(path, trainable=trainable, resume_errored=True)
            else:
                tuner = tune.Tuner(
                    trainable,
                    param_space=dict(native_space),
                    tune_config=self._tune_config(n_trials),
                    run_config=self._run_config(storage, name),
                )
            grid = tuner.fit()
            ctx.result.native = grid
            self._translate(grid)
        finally:
            _current = None
            if started:
                ray.shutdown()
        if recorder.failure is not None:
            raise recorder.failure
        return ctx.result

    def _tune_config(self, n_trials: int) -> Any:
        from ray import tune

        kw = self.kwargs
        return tune.TuneConfig(
            metric="objective",
            mode="max" if self.ctx.directions[0] == "maximize" else "min",
            num_samples=n_trials,
            scheduler=kw.get("scheduler"),
            search_alg=kw.get("search_alg"),
            max_concurrent_trials=kw.get("max_concurrent_trials") or getattr(self, "_concurrency", None),
            time_budget_s=kw.get("time_budget_s"),
        )

    def _run_config(self, storage: str, name: str) -> Any:
        from ray import tune

        kw = self.kwargs
        score = kw.get("checkpoint_score_attr")
        order = "max" if self.ctx.directions[0] == "maximize" else "min"
        if score is not None and score.startswith("min-"):  # Ray's legacy "min-<metric>" form
            score, order = score[4:], "min"
        return tune.RunConfig(
            name=name,
            storage_path=storage,
            stop=_stopper_class()(kw.get("stop")),
            callbacks=[_tune_callback_class()()],
            failure_config=tune.FailureConfig(max_failures=kw.get("max_failures") or 0),
            checkpoint_config=tune.CheckpointConfig(
                num_to_keep=kw.get("keep_checkpoints_num"),
                checkpoint_score_attribute=score if score is not None or kw.get("keep_checkpoints_num") is None
                else "objective",
                checkpoint_score_order=order,
            ),
            verbose=0,
        )

    # ------------------------------------------------------------------ records
    def _scope(self) -> str:
        return self.kwargs.get("scope") or ("all" if self.ctx.objective_scope == "best" else "last")

    def _choose(self, evaluations: list[Evaluation]) -> tuple[float | None, Evaluation | None]:
        scored: list[tuple[float, Evaluation]] = [
            (e.objective, e) for e in evaluations if isinstance(e.objective, float) and math.isfinite(e.objective)
        ]
        if not scored:
            return None, None
        scope = self._scope()
        if scope == "all":
            best_value, best = scored[0]
            for value, e in scored[1:]:
                if self.ctx.better(value, best_value):
                    best_value, best = value, e
            return best_value, best
        if scope == "last":
            return scored[-1]
        window = {"avg": len(scored), "last-5-avg": 5, "last-10-avg": 10}[scope]
        values = [value for value, _ in scored[-window:]]
        return sum(values) / len(values), scored[-1][1]

    def _params(self, config: Mapping[str, Any]) -> dict[str, Any]:
        space = getattr(self, "_space", None)
        if space is None:
            return dict(config)
        params: dict[str, Any] = {}
        for name in space.order:
            if name in config and space.is_active(name, params):
                params[name] = config[name]
        return params

    def _record(
        self,
        trial_id: str,
        config: Mapping[str, Any],
        results: Sequence[Mapping[str, Any]],
        error: str | None,
        trial_path: str | None,
        started: datetime | None = None,
        finished: datetime | None = None,
    ) -> TrialRecord:
        final = next((r for r in reversed(results) if r.get(f"{_PREFIX}done") is True), None)
        evaluations: list[Evaluation] = []
        checkpoints: dict[int, str] = {}
        extra: dict[str, Any] = {}
        for r in results:
            for key in ("restored_from", "resumed_from"):
                value = r.get(_PREFIX + key)
                if isinstance(value, str) and value and value not in extra.setdefault(key, []):
                    extra[key].append(value)
            if r.get(f"{_PREFIX}done") is True or (_as_float(r.get("objective")) is None and "step" not in r):
                continue
            step = int(_as_float(r.get("step")) or 0)
            metrics = {}
            for key, value in r.items():
                if key in _OWN_KEYS or key.startswith(_PREFIX) or key in _RAY_KEYS:
                    continue
                number = _as_float(value)
                if number is not None:
                    metrics[key] = number
            evaluations.append(Evaluation(step=step, epoch=_as_float(r.get("epoch")), objective=_as_float(
                r.get("objective")), metrics=metrics))
            folder = r.get("checkpoint_dir_name")
            if isinstance(folder, str) and folder and trial_path:
                checkpoints[step] = os.path.join(trial_path, folder)
        extra = {k: v for k, v in extra.items() if v}
        last = results[-1] if results else {}
        if isinstance(last.get(f"{_PREFIX}node_ip"), str):
            extra["node_ip"] = last[f"{_PREFIX}node_ip"]
        extra["ray_trial_id"] = trial_id
        workers = next((_as_float(r.get(f"{_PREFIX}workers")) for r in reversed(results)
                        if _as_float(r.get(f"{_PREFIX}workers")) is not None), None)
        if workers is not None:
            extra["workers"] = int(workers)
        objective, chosen = self._choose(evaluations)
        if error is not None:
            state = TrialState.FAIL
        elif final is not None or _ran_to_end(results, evaluations):
            state = TrialState.COMPLETE
        else:
            state = TrialState.PRUNED  # ended without our marker and without an error: a scheduler stopped it
        if state is TrialState.COMPLETE and objective is None:
            state, error = TrialState.FAIL, "the objective is not finite"
        checkpoint = checkpoints.get(chosen.step) if chosen is not None else None
        if checkpoint is not None and not os.path.isdir(checkpoint):
            checkpoint = None  # removed by keep_checkpoints_num
        name = last.get(f"{_PREFIX}name") if isinstance(last.get(f"{_PREFIX}name"), str) else None
        if name is None:
            try:
                name = self.ctx.trial_name(Trial(trial_id, _trial_number(trial_id), dict(config), "ray"))
            except Exception:
                name = f"run-{trial_id}"
        if started is None and results:
            first = results[0]
            ts = _as_float(first.get("timestamp"))
            if ts is not None:
                started = datetime.fromtimestamp(ts - (_as_float(first.get("time_this_iter_s")) or 0.0), timezone.utc)
        if finished is None and results:
            ts = _as_float(last.get("timestamp"))
            finished = datetime.fromtimestamp(ts, timezone.utc) if ts is not None else None
        last_step = final.get(f"{_PREFIX}last_step") if final is not None else None
        if last_step is None and evaluations:
            last_step = evaluations[-1].step
        return TrialRecord(
            trial_id=trial_id,
            number=_trial_number(trial_id),
            name=name,
            state=state,
            params=self._params(config),
            objective=objective,
            started=started,
            finished=finished,
            intermediates=evaluations,
            last_step=int(last_step) if last_step is not None else None,
            checkpoint=checkpoint,
            node=last.get(f"{_PREFIX}node") if isinstance(last.get(f"{_PREFIX}node"), str) else None,
            error=error,
            extra=extra,
        )

    def _translate(self, grid: Any) -> None:
        """Records for every trial of the ResultGrid (those this run did not see: restored from a previous run)."""
        ctx = self.ctx
        assert ctx.result is not None
        seen = {r.trial_id: r for r in ctx.result.records}
        analysis = getattr(grid, "_experiment_analysis", None)
        trials = list(getattr(analysis, "trials", None) or [])
        records: list[TrialRecord] = []
        for i in range(len(grid)):
            result = grid[i]
            trial = trials[i] if i < len(trials) else None
            trial_id = trial.trial_id if trial is not None else (result.metrics or {}).get("trial_id")
            if trial_id is None:
                continue
            record = seen.get(trial_id)
            if record is None or record.state is TrialState.RUNNING:
                frame = result.metrics_dataframe
                rows = [] if frame is None else [
                    {k: v for k, v in row.items() if not _missing(v)} for row in frame.to_dict("records")
                ]
                error = None
                if result.error is not None:
                    lines = [line for line in str(result.error).strip().splitlines() if line.strip()]
                    error = lines[-1].strip() if lines else repr(result.error)
                record = self._record(trial_id, result.config or {}, rows, error, result.path)
            records.append(record)
        known = {r.trial_id for r in records}
        records.extend(r for r in ctx.result.records if r.trial_id not in known)
        ctx.result.records[:] = records
        ctx.result.finished = _now()
        if records:
            ctx.result.save(ctx.output_dir)


_RAY_KEYS = frozenset({
    "training_iteration", "time_total_s", "episodes_total", "timesteps_total", "node_ip", "hostname", "pid",
    "time_this_iter_s", "timestamp", "date", "time_since_restore", "timesteps_since_restore",
    "iterations_since_restore", "config", "checkpoint_dir_name",
})


def _worker_resources(resources: Mapping[str, float]) -> dict[str, float]:
    """``resources_per_trial`` in Ray's resource names, as what each worker of a distributed trial gets."""
    names = {"cpu": "CPU", "gpu": "GPU"}
    out = {names.get(k, k): float(v) for k, v in resources.items()}
    out.setdefault("CPU", 1.0)
    return out


def _fitting_trials(workers: _Workers) -> int:
    """How many distributed trials the cluster can run at once (Tune would otherwise start trials whose Ray
    Train runs only wait for resources)."""
    import ray

    total = ray.cluster_resources()
    fits = [int(total.get(k, 0.0) // (v * workers.count)) for k, v in workers.resources.items() if v > 0]
    return max(1, min(fits)) if fits else 1


def _strategy(value: Any) -> str:
    return str(getattr(value, "value", value))


def _is_pbt(scheduler: Any) -> bool:
    from ray.tune.schedulers import PopulationBasedTraining

    return isinstance(scheduler, PopulationBasedTraining)


def _strip(trainer: Any, handler_cls: type) -> Any:
    """A shallow copy of the trainer without the model, optimizer and accelerator (never shipped to workers)."""
    import copy

    shipped = copy.copy(trainer)
    shipped.model = None
    shipped.model_wrapped = None
    shipped.optimizer = None
    shipped.lr_scheduler = None
    shipped.accelerator = None
    shipped._accelerator_key = None
    shipped.callback_handler = handler_cls(list(trainer.callback_handler.callbacks), None, None, None)
    return shipped


def _probe(address: str) -> None:
    """Fail within seconds for an address nothing listens on (``ray.init`` would retry for minutes)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise SearchConfigError(
            f"address={address!r} is not 'auto', 'ray://host:port' or 'host:port' (e.g. '127.0.0.1:6379')."
        )
    try:
        with socket.create_connection((host, int(port)), timeout=_CONNECT_TIMEOUT_S):
            pass
    except OSError as error:
        raise SearchConfigError(
            f"address={address!r}: no Ray cluster answers there ({error.strerror or error}); check the address "
            "printed by `ray start --head`, or leave address unset to start a local Ray."
        ) from error


def _domain(name: str, domain: Any) -> Any:
    """The Tune domain of one portable domain (conditions are handled by the caller)."""
    from ray import tune

    from spaces import Categorical, Fixed, Float, Int

    if isinstance(domain, Fixed):
        return domain.value
    if isinstance(domain, Categorical):
        return tune.choice(list(domain.choices))
    if isinstance(domain, Int):
        if domain.log:
            return tune.lograndint(domain.low, domain.high + 1)  # exclusive upper bound
        if domain.step == 1:
            return tune.randint(domain.low, domain.high + 1)  # exclusive upper bound
        if domain.low % domain.step == 0:
            return tune.qrandint(domain.low, domain.high, domain.step)  # inclusive for q > 1
        return tune.choice(list(range(domain.low, domain.high + 1, domain.step)))
    if isinstance(domain, Float):
        if domain.step is None:
            return tune.loguniform(domain.low, domain.high) if domain.log else tune.uniform(domain.low, domain.high)
        k = domain.low / domain.step
        if abs(k - round(k)) <= 1e-9 * max(1.0, abs(k)):
            return tune.quniform(domain.low, domain.high, domain.step)  # quantization: inclusive upper bound
        n = round((domain.high - domain.low) / domain.step)
        if n + 1 > _MAX_GRID:
            raise SearchConfigError(
                f"hp_space parameter {name!r}: Ray quantizes to multiples of the step, and low={domain.low} is not "
                f"one of step={domain.step}; the grid has {n + 1} values, too many for tune.choice. Make low a "
                "multiple of step."
            )
        return tune.choice([min(domain.low + i * domain.step, domain.high) for i in range(n + 1)])
    raise SearchConfigError(f"hp_space parameter {name!r}: the ray backend cannot express {domain!r}.")


class _ConditionalSample:
    """``tune.sample_from`` body: a draw when the parents activate the parameter, else None (dropped later)."""

    def __init__(self, space: SearchSpace, name: str, native: Any) -> None:
        self.space = space
        self.name = name
        self.native = native
        ancestors: list[str] = []
        todo = [name]
        while todo:
            for parent in space[todo.pop()].when or {}:
                if parent not in ancestors:
                    ancestors.append(parent)
                    todo.append(parent)
        self.ancestors = [n for n in space.order if n in ancestors]

    def __call__(self, spec: Any) -> Any:
        from ray.tune.search.sample import Domain

        # Only the ancestors are read: Tune resolves them first and retries while one is unresolved.
        values = {n: spec.config[n] for n in self.ancestors}
        active: dict[str, Any] = {}
        for n in self.ancestors:
            if self.space.is_active(n, active):
                active[n] = values[n]
        if not self.space.is_active(self.name, active):
            return None
        return self.native.sample() if isinstance(self.native, Domain) else self.native
