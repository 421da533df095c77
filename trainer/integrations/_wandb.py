"""Weights & Biases: one run per training; a search's trials are grouped under the search's name."""

from __future__ import annotations

import logging
import os
import tempfile
from typing import TYPE_CHECKING, Any

from ._base import TrackerCallback, announce_destination, run_name, run_params, search_group

if TYPE_CHECKING:
    from .._callbacks import TrainerState
    from .._training_args import TrainingArguments


logger = logging.getLogger(__name__)
_LOG_MODEL = {
    "": None,
    "false": None,
    "0": None,
    "checkpoint": "checkpoint",
    "end": "end",
    "true": "end",
    "1": "end",
}


def _log_model_setting() -> str | None:
    """``WANDB_LOG_MODEL`` as transformers reads it: "checkpoint" (each checkpoint), "end" (or "true": the final
    model), "false" (nothing)."""
    value = os.environ.get("WANDB_LOG_MODEL", "false")
    if value.strip().lower() not in _LOG_MODEL:
        raise ValueError(
            f"WANDB_LOG_MODEL={value!r} is not one of 'checkpoint', 'end', 'true', 'false'; set one of those or unset it."
        )
    return _LOG_MODEL[value.strip().lower()]


class WandbCallback(TrackerCallback):
    """Logs a run to Weights & Biases, offline unless ``WANDB_MODE`` says otherwise.

    Environment (as W&B reads it): ``WANDB_MODE`` (default here ``offline``: the run is written under
    ``<dir>/wandb/offline-run-*`` and can be uploaded later with ``wandb sync``), ``WANDB_PROJECT`` (default
    ``hpsearch``), ``WANDB_ENTITY``, ``WANDB_NAME`` (the run name outside a search; default ``run_name``),
    ``WANDB_RUN_GROUP``, ``WANDB_TAGS`` (comma-separated), ``WANDB_DIR`` (default ``output_dir``). System
    metrics, code and console capture are off. During a search each trial is a run named after the trial, in
    the group named after the search's output folder (unless ``WANDB_RUN_GROUP`` is set); the final state goes
    in the summary (``hpsearch/state``) and the tags, the objective in the summary (``objective``), and a
    failed trial's run exits with code 1 (W&B shows it failed). ``WANDB_LOG_MODEL`` (as transformers):
    ``checkpoint`` logs each saved checkpoint folder as a model artifact, ``end``/``true`` the final model (its
    weights and config) when training ends; offline they are kept in the run's folder and uploaded by ``wandb sync``.
    """

    name = "wandb"
    module = "wandb"
    extra = "wandb"

    _run: Any = None

    def __init__(self) -> None:
        self._log_model = _log_model_setting()  # a malformed value fails when the Trainer is built
        super().__init__()

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
        if init["mode"] == "offline":
            announce_destination(
                "W&B",
                f"an offline run under {os.path.join(init['dir'], 'wandb')}",
                "set WANDB_MODE=online to upload, or upload this run later with `wandb sync`",
                ("WANDB_API_KEY",),
            )
        self._run = wandb.init(**init)

    def on_save(self, args, state, control, **kwargs):
        if self._log_model == "checkpoint" and state.is_world_process_zero and self._run is not None:
            folder = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
            aliases = [f"epoch_{round(state.epoch or 0, 2)}", f"checkpoint_global_step_{state.global_step}"]
            self._guard("logging the checkpoint", self._log_folder, folder, aliases)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if (
            self._log_model == "end"
            and state.is_world_process_zero
            and self._run is not None
            and model is not None
        ):
            self._guard("logging the model", self._log_final_model, model)
        super().on_train_end(args, state, control, **kwargs)

    def _log_final_model(self, model: Any) -> None:
        from .._checkpoint import save_model_weights

        with tempfile.TemporaryDirectory() as folder:
            save_model_weights(model, folder)
            config: Any = getattr(model, "config", None)
            if callable(getattr(config, "save_pretrained", None)):
                config.save_pretrained(folder)
            self._log_folder(folder, ["final"], wait=True)

    def _log_folder(self, folder: str, aliases: list[str], wait: bool = False) -> None:
        import wandb

        artifact = wandb.Artifact(name=f"model-{self._run.id}", type="model")
        artifact.add_dir(folder)
        logger.info("W&B: logging %s as artifact model-%s.", folder, self._run.id)
        logged = self._run.log_artifact(artifact, aliases=aliases)
        if wait and self._run.settings.mode != "offline":
            logged.wait()  # the temporary folder goes away next

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
