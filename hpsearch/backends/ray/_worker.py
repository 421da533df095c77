"""The worker side of a Ray trial: `run_trial` in a Tune trainable, its reporter, and restarts from checkpoints.

Every evaluation reports ``objective``, ``step``, the eval metrics and the trial's record so far (one JSON
payload, ``hpsearch_record``), with the checkpoint folder when one was saved at that step and the search hands Tune
its checkpoints (``tune_checkpoints``). The trial's final
record is reported once more when it ends; a FAIL record is raised instead (in the error's message), so Tune
marks the trial errored (and may retry it) and no scheduler or searcher sees it as a result. The driver keeps the last record it received: the record `run_trial` produced.
Ray schedulers stop a trial by stopping its process, so the reporter never asks to prune.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, cast

from trainer import TrainerCallback

from ...errors import SearchConfigError, TrialFailed
from ...runner import run_trial
from ...trial import Trial, TrialRecord, TrialReporter, TrialState

if TYPE_CHECKING:
    from ...settings import TrialSettings

RECORD_KEY = "hpsearch_record"
#: A FAIL record travels in the error Tune stores for the trial (a result would reach schedulers and searchers),
#: on the last line of the message, after this marker.
RECORD_MARKER = "hpsearch-record: "
#: A configuration error found in a worker (a bad ``hp_name``) travels the same way: it stops the search.
CONFIG_ERROR_MARKER = "hpsearch-config-error: "
MAX_STEPS_KEY = "hpsearch_max_steps"
# Keys of a Tune result that are ours or Ray's bookkeeping, not eval metrics.
_OWN_KEYS = frozenset(
    {
        "objective",
        "step",
        "done",
        "trial_id",
        "experiment_id",
        "should_checkpoint",
        "experiment_tag",
        "__duplicate__",
    }
)


class TrialError(TrialFailed):
    """Raised inside the trainable for a FAIL trial, so that Tune marks it errored (and may retry it)."""


def tune_send(result: dict[str, Any], folder: str | None) -> None:
    from ray import tune

    tune.report(result, checkpoint=tune.Checkpoint.from_directory(folder) if folder else None)


def trial_number(trial_id: str) -> int:
    # Tune's ids are "<experiment>_<index>"; the index is the trial's number.
    try:
        return int(trial_id.rsplit("_", 1)[1])
    except (IndexError, ValueError):
        return 0


def ray_trial(settings: TrialSettings, trial_id: str, config: Mapping[str, Any]) -> Trial:
    """The `Trial` of a Tune trial: its active parameters; the native object is Tune's config dict."""
    return Trial(trial_id, trial_number(trial_id), settings.active_params(config), "ray", native=dict(config))


class RayReporter(TrialReporter):
    """Sends each evaluation, with the record so far, to Tune; ``send(result, folder)`` delivers one result
    (`tune.report` in a trial's own process, or the channel to the Tune trial for rank 0 of a distributed one)."""

    def __init__(
        self,
        facts: Mapping[str, Any],
        send: Callable[[dict[str, Any], str | None], None] = tune_send,
        checkpoints: bool = True,
    ) -> None:
        self.facts = dict(facts)  # node, node_ip, workers, restored_from: written into the record
        self.send = send
        # Hand each evaluation's checkpoint to Tune too (`_checks.tune_checkpoints`).
        self.checkpoints = checkpoints
        self.count = 0
        self.max_steps: int | None = None
        self.record: TrialRecord | None = None

    def start(self, record: TrialRecord) -> None:
        self.record = record
        if "node" in self.facts:
            record.node = self.facts["node"]
        record.extra.update({k: v for k, v in self.facts.items() if k != "node"})

    def payload(self) -> str:
        assert self.record is not None
        data = self.record.to_dict()
        if self.record.state is TrialState.RUNNING:
            # The time of this report: a scheduler that stops the trial's process now ends it here, and its cost
            # (measured until now, see `CostMeter.snapshot`) covers the same span as its duration.
            data["finished"] = datetime.now(timezone.utc).isoformat()
        return json.dumps(data, default=str)

    def report(self, objective: Any, step: int, metrics: Mapping[str, float], checkpoint: str | None) -> bool:
        result: dict[str, Any] = {k: v for k, v in metrics.items() if k not in _OWN_KEYS}
        result.update(objective=float(objective), step=int(step))
        result[RECORD_KEY] = self.payload()
        if self.max_steps is not None:
            result[MAX_STEPS_KEY] = self.max_steps
        folder = (
            checkpoint if self.checkpoints and checkpoint is not None and os.path.isdir(checkpoint) else None
        )
        self.count += 1
        self.send(result, folder)
        return False


class MaxSteps(TrainerCallback):
    """Tells the reporter the trial's planned number of steps, so the driver can tell a trial a scheduler stopped
    at its last evaluation (ASHA at ``max_t``: it ran every step, COMPLETE) from one stopped early (PRUNED)."""

    def __init__(self, reporter: RayReporter) -> None:
        self.reporter = reporter

    def on_train_begin(self, args, state, control, **kwargs):
        self.reporter.max_steps = int(state.max_steps)


def restart_point(checkpoint: Any, run_dir: str, trial_name: str) -> tuple[str, dict[str, Any]]:
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
        return local, {"restored_from": f"{origin}@{step}"}
    return local, {"resumed_from": f"{trial_name}@{step}"}


def node_facts() -> dict[str, Any]:
    import ray

    return {
        "node": ray.get_runtime_context().get_node_id(),
        "node_ip": ray.util.get_node_ip_address(),
        "worker_pid": os.getpid(),  # the same for the trials of one reused actor (``reuse_actors``)
    }


#: How long Tune waits for a finished trial's thread before it runs the next trial in the same actor
#: (``reuse_actors``). Tune's default, 2 s, is too short for a trial a scheduler stopped: the stop unwinds through
#: `run_trial`'s end (its record, trackers, memory release), and a reset that times out aborts the *next* trial
#: with an error. Read by Tune in this process, when it resets the actor; a user's own value is kept.
THREAD_TIMEOUT_S = "60"


def trainable(config: dict[str, Any], settings: TrialSettings, tune_checkpoints: bool = True) -> None:
    """One Tune trial: `run_trial` with a reporter that talks to Tune (handing it the checkpoint of each evaluation
    when ``tune_checkpoints``, see `_checks.tune_checkpoints`)."""
    from ray import tune

    os.environ.setdefault("TUNE_FUNCTION_THREAD_TIMEOUT_S", THREAD_TIMEOUT_S)
    trial_id = tune.get_context().get_trial_id()
    trial = ray_trial(settings, trial_id, config)
    facts = {**node_facts(), "ray_trial_id": trial_id}
    try:
        name = settings.trial_name(trial)
    except SearchConfigError as error:  # stops the search, as `run_trial` raising it does on other backends
        raise TrialError(f"{error}\n{CONFIG_ERROR_MARKER}{error}") from error
    except (
        Exception
    ):  # hp_name raised on this trial: `run_trial` records it FAIL, with its cost; the search goes on
        reporter = RayReporter(facts, checkpoints=tune_checkpoints)
        conclude(run_trial(settings, trial, reporter), reporter, trained=False)
        return
    resume = None
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        resume, restart = restart_point(checkpoint, os.path.join(settings.output_dir, name), name)
        facts.update(restart)
    reporter = RayReporter(facts, checkpoints=tune_checkpoints)
    start = checkpoint_step(resume) if resume is not None else 0
    record = run_trial(
        settings, trial, reporter, resume_from_checkpoint=resume, callbacks=[MaxSteps(reporter)]
    )
    if resume is not None:
        shutil.rmtree(resume, ignore_errors=True)
    conclude(record, reporter, trained=(record.last_step or 0) > start)


def checkpoint_step(folder: str) -> int:
    """The global step of the checkpoint in ``folder`` (0 when its trainer_state.json cannot be read)."""
    with (
        contextlib.suppress(OSError, ValueError, TypeError),
        open(os.path.join(folder, "trainer_state.json")) as f,
    ):
        return int(json.load(f).get("global_step") or 0)
    return 0


def conclude(record: TrialRecord, reporter: RayReporter, trained: bool = True) -> None:
    """After `run_trial`: report the final record, and fail the Tune trial for a FAIL record.

    A trial that reported nothing (``eval_strategy="no"``) reports its final evaluation first, so schedulers and
    search algorithms see its objective. The final report carries Tune's ``done``, so no scheduler acts on it.
    A trial restarted from a checkpoint at its last step (PBT's exploit of a finished donor, a retry after the end)
    trains nothing (``trained`` False) and sends only the final report: a result a scheduler can act on would let
    PBT exploit it again, and restart it again, for ever.
    """
    reporter.record = record
    if record.state is TrialState.FAIL:
        raise TrialError(f"{record.error or 'the trial failed'}\n{RECORD_MARKER}{reporter.payload()}")
    # The ray backend refuses multi-objective searches up front, so a Ray trial's objective is a single number.
    objective = float(cast(float, record.objective)) if record.objective is not None else math.nan
    if reporter.count == 0 and trained:
        last = record.intermediates[-1] if record.intermediates else None
        reporter.report(objective, record.last_step or 0, last.metrics if last else {}, None)
    reporter.send(
        {
            "objective": objective,
            "step": int(record.last_step or 0),
            "done": True,
            RECORD_KEY: reporter.payload(),
        },
        None,
    )
