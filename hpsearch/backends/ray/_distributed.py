"""Distributed trials (``workers_per_trial=N``): each Tune trial drives a Ray Train ``TorchTrainer`` run.

With ``workers_per_trial=N`` each Tune trial drives a Ray Train v2 ``TorchTrainer`` run (Ray's recommended way to
run Train inside Tune) of N workers, gloo on CPU and NCCL on GPU, each given ``resources_per_trial``; the trial
itself reserves no CPU, and unless ``max_concurrent_trials`` is set, Tune runs as many trials as the cluster has
room for. Ray Train sets up the process group and the ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_*``
variables, so every worker runs the same `run_trial` and its Accelerator trains data-parallel. Rank 0 sends its
reports (the record included), checkpoint folders too, to the Tune trial, which forwards them with ``tune.report``:
schedulers, PBT, retries and restores see what a one-process trial sends. Across nodes, output_dir must be
storage every node shares, as Ray itself requires for multi-node storage.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...runner import run_trial
from ...trial import Trial, TrialState
from ._worker import (
    MaxSteps,
    RayReporter,
    TrialError,
    checkpoint_step,
    conclude,
    node_facts,
    ray_trial,
    restart_point,
    trial_number,
    tune_send,
)

if TYPE_CHECKING:
    from ...settings import TrialSettings

logger = logging.getLogger(__name__)

_TRAIN_STOP_TIMEOUT_S = 30.0


@dataclasses.dataclass
class Workers:
    """What a distributed trial needs: the payload's object-store reference and the Ray Train worker group."""

    settings: (
        Any  # ray.ObjectRef of the TrialSettings, put once by the driver and read by every trial and worker
    )
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


def distributed_trainable(config: dict[str, Any], workers: Workers) -> None:
    """One Tune trial run by ``workers.count`` Ray Train workers; this process only drives them and talks to Tune:
    it starts the Train run (`_train_run`) in a helper thread (`_TrainRun`), relays rank 0's results to Tune
    (`_Relay`), and ends the trial as the run ended."""
    import ray
    from ray import tune

    settings: TrialSettings = ray.get(workers.settings)
    trial_id = tune.get_context().get_trial_id()
    trial = ray_trial(settings, trial_id, config)
    name = settings.trial_name(trial)
    resume: str | None = None
    restart: dict[str, Any] = {}
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        # Copied next to the trial's outputs: every worker reads it (a shared output_dir across nodes).
        resume, restart = restart_point(checkpoint, os.path.join(settings.output_dir, name), name)
    channel = _Channel()
    loop_config = {
        "workers": workers,
        "trial_id": trial_id,
        "params": trial.params,
        "resume": resume,
        "extra": restart,
        "channel": channel,
    }
    run = _TrainRun(_train_run(settings, workers, name, loop_config), name)
    relay = _Relay(channel, run, name)
    run.thread.start()
    try:
        relay.relay()
    finally:
        run.stopper.stop()
    if resume is not None:
        shutil.rmtree(resume, ignore_errors=True)
    relay.conclude()


def _train_run(settings: TrialSettings, workers: Workers, name: str, loop_config: dict[str, Any]) -> Any:
    """The Ray Train ``TorchTrainer`` of one attempt of a distributed trial: ``workers.count`` workers running
    `_worker_loop`, gloo on CPU and NCCL on GPU, failing at once (Tune retries the whole trial)."""
    import ray.train
    from ray.train.torch import TorchConfig, TorchTrainer

    return TorchTrainer(
        _worker_loop,
        train_loop_config=loop_config,
        scaling_config=ray.train.ScalingConfig(
            num_workers=workers.count, use_gpu=workers.use_gpu, resources_per_worker=dict(workers.resources)
        ),
        torch_config=TorchConfig(backend="nccl" if workers.use_gpu else "gloo"),
        run_config=ray.train.RunConfig(
            # A fresh Train run for every attempt: a retry resumes from the Tune checkpoint, not from Train's state.
            name=f"{name}-{uuid.uuid4().hex[:8]}",
            storage_path=os.path.join(settings.output_dir, "ray_train"),
            # Tune retries the whole trial from its checkpoint (max_failures), as for single-process trials.
            failure_config=ray.train.FailureConfig(max_failures=0),
        ),
    )


class _TrainRun:
    """A distributed trial's Train run in a helper thread (Tune takes reports from the trial's own thread only),
    the error it ended with, and the stopper that ends it when the Tune trial stops first."""

    def __init__(self, trainer: Any, name: str) -> None:
        import threading

        self.trainer = trainer
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._fit, name=f"hpsearch-train-{name}", daemon=True)
        self.stopper = _TrainRunStopper(self.thread)

    def _fit(self) -> None:
        try:
            self.trainer.fit()
        except BaseException as error:  # re-raised by `_Relay.conclude`, in the trial's thread
            self.error = error


class _Relay:
    """The Tune trial's side of the `_Channel`: forwards rank 0's results to Tune until the Train run ends, then
    ends the trial as the run did (rank 0's failure, a worker's error, or the final result held back until then)."""

    def __init__(self, channel: _Channel, run: _TrainRun, name: str) -> None:
        self.channel = channel
        self.run = run
        self.name = name
        self.failure: str | None = None
        self.final: dict[str, Any] | None = None
        self.unseen_warned = False

    def relay(self) -> None:
        from ray.util.queue import Empty

        while True:
            try:
                kind, value, folder = self.channel.results.get(timeout=0.5)
            except Empty:
                if self.run.thread.is_alive():
                    continue
                if self.channel.results.empty():
                    break
                continue
            self._take(kind, value, folder)
            self.channel.acks.put(True)
        self.run.thread.join()

    def _take(self, kind: str, value: Any, folder: str | None) -> None:
        if kind == "placement_group":
            self.run.stopper.watch(value)
        elif kind == "error":
            self.failure = value
        elif value.get("done") is True:
            # Held until the Train run has ended: Tune stops a done trial at once, and a Train run cut short
            # leaves its placement group (its workers' CPUs) reserved.
            self.final = value
        else:
            tune_send(value, self._readable(folder))

    def _readable(self, folder: str | None) -> str | None:
        """``folder`` if this Tune trial can read it (rank 0 may have saved it on another node), else None."""
        if folder is None or os.path.isdir(folder):
            return folder
        if not self.unseen_warned:
            logger.warning(
                "Trial %s: rank 0 saved %s on another node, where this Tune trial cannot read it; its "
                "results go to Tune without checkpoints. Put output_dir on storage every node shares.",
                self.name,
                folder,
            )
            self.unseen_warned = True
        return None

    def conclude(self) -> None:
        if self.failure is not None:
            raise TrialError(self.failure)
        error = self.run.error
        if error is not None:
            lines = [line for line in str(error).strip().splitlines() if line.strip()]
            raise TrialError(
                f"a Ray Train worker of the trial failed: {lines[-1].strip() if lines else type(error).__name__}"
            ) from error
        if self.final is not None:
            tune_send(self.final, None)


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
    for key, value in (
        ("RANK", context.get_world_rank()),
        ("WORLD_SIZE", context.get_world_size()),
        ("LOCAL_RANK", context.get_local_rank()),
        ("LOCAL_WORLD_SIZE", context.get_local_world_size()),
        ("NODE_RANK", context.get_node_rank()),
    ):
        os.environ.setdefault(key, str(value))


def _worker_loop(config: dict[str, Any]) -> None:
    """Every Ray Train worker of a distributed trial: the same `run_trial`, data-parallel through accelerate.

    Ray Train has set up the process group (gloo or NCCL) before this runs, so the trial's Accelerator joins it
    (MULTI_CPU or MULTI_GPU), and the reporting callback reports from rank 0 and broadcasts its decisions.
    """
    import ray
    import ray.train

    _set_distributed_env()
    workers: Workers = config["workers"]
    settings: TrialSettings = ray.get(workers.settings)
    trial_id = config["trial_id"]
    trial = Trial(trial_id, trial_number(trial_id), dict(config["params"]), "ray")
    rank = ray.train.get_context().get_world_rank()
    channel: _Channel = config["channel"]
    facts: dict[str, Any] = {
        **node_facts(),
        "ray_trial_id": trial_id,
        "workers": workers.count,
        **config["extra"],
    }
    if rank == 0:
        channel.hello(ray.util.get_current_placement_group())
    reporter = RayReporter(facts, send=channel.send if rank == 0 else _rank_zero_only)
    start = checkpoint_step(config["resume"]) if config["resume"] is not None else 0
    record = run_trial(
        settings, trial, reporter, resume_from_checkpoint=config["resume"], callbacks=[MaxSteps(reporter)]
    )
    if rank != 0:
        if record.state is TrialState.FAIL:
            raise TrialError(record.error or "the trial failed")
        return
    try:
        conclude(record, reporter, trained=(record.last_step or 0) > start)
    except TrialError as error:
        channel.fail(str(error))
        raise


def _rank_zero_only(result: dict[str, Any], folder: str | None) -> None:
    raise RuntimeError("only rank 0 of a distributed trial reports to Tune")


def worker_resources(resources: Mapping[str, float]) -> dict[str, float]:
    """``resources_per_trial`` in Ray's resource names, as what each worker of a distributed trial gets."""
    names = {"cpu": "CPU", "gpu": "GPU"}
    out = {names.get(k, k): float(v) for k, v in resources.items()}
    out.setdefault("CPU", 1.0)
    return out


def fitting_trials(workers: Workers) -> int:
    """How many distributed trials the cluster can run at once (Tune would otherwise start trials whose Ray
    Train runs only wait for resources)."""
    import ray

    total = ray.cluster_resources()
    fits = [int(total.get(k, 0.0) // (v * workers.count)) for k, v in workers.resources.items() if v > 0]
    return max(1, min(fits)) if fits else 1
