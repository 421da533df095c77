"""Weights & Biases: one run per training; a search's trials are grouped under the search's name."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ._base import TrackerCallback, run_name, run_params, search_group

if TYPE_CHECKING:
    from .._callbacks import TrainerState
    from .._training_args import TrainingArguments


class WandbCallback(TrackerCallback):
    """Logs a run to Weights & Biases, offline unless ``WANDB_MODE`` says otherwise.

    Environment (as W&B reads it): ``WANDB_MODE`` (default here ``offline``: the run is written under
    ``<dir>/wandb/offline-run-*`` and can be uploaded later with ``wandb sync``), ``WANDB_PROJECT`` (default
    ``hpsearch``), ``WANDB_ENTITY``, ``WANDB_NAME`` (the run name outside a search; default ``run_name``),
    ``WANDB_RUN_GROUP``, ``WANDB_TAGS`` (comma-separated), ``WANDB_DIR`` (default ``output_dir``). System
    metrics, code and console capture are off. During a search each trial is a run named after the trial, in
    the group named after the search's output folder (unless ``WANDB_RUN_GROUP`` is set); the final state goes
    in the summary (``hpsearch/state``) and the tags, the objective in the summary (``objective``), and a
    failed trial's run exits with code 1 (W&B shows it failed).
    """

    name = "wandb"
    module = "wandb"
    extra = "wandb"

    _run: Any = None

    def _open(self, args: TrainingArguments, state: TrainerState) -> None:
        import wandb

        env = os.environ
        search = state.is_hyper_param_search
        tags = [t.strip() for t in env.get("WANDB_TAGS", "").split(",") if t.strip()]
        if search:
            tags.append("hpsearch-trial")
        init: dict[str, Any] = {
            "project": env.get("WANDB_PROJECT") or "hpsearch",
            "name": run_name(args, state) if search else env.get("WANDB_NAME") or run_name(args, state),
            "group": env.get("WANDB_RUN_GROUP") or (search_group(args) if search else None),
            "tags": tags or None,
            "config": run_params(args, state),
            "reinit": "create_new",  # several runs may be open in one process (trials in threads)
            "settings": wandb.Settings(
                x_disable_stats=True, console="off", save_code=False, silent=True, disable_git=True
            ),
        }
        # Passed explicitly, even when they come from the environment: W&B reads its environment once per process
        # (at its first run), so a variable set later would otherwise be ignored.
        init["mode"] = env.get("WANDB_MODE") or "offline"
        init["entity"] = env.get("WANDB_ENTITY") or None
        init["dir"] = env.get("WANDB_DIR") or args.output_dir
        os.makedirs(init["dir"], exist_ok=True)
        self._run = wandb.init(**init)

    def _log(self, metrics: dict[str, float], step: int) -> None:
        self._run.log(metrics, step=step)

    def _finish(self, final_state: str, objective: float | list[float] | None) -> None:
        run, self._run = self._run, None
        try:
            run.summary["hpsearch/state"] = final_state
            if objective is not None:
                run.summary["objective"] = objective
            if self._search:
                run.tags = (*(run.tags or ()), final_state.lower())
        finally:
            run.finish(exit_code=1 if final_state == "FAIL" else 0)

    def _run_attributes(self) -> tuple[str, ...]:
        return ("_run",)
