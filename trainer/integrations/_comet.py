"""Comet: one experiment per training, an offline archive by default; a search's trials share a tag."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ._base import TrackerCallback, announce_destination, run_name, run_params, search_group

if TYPE_CHECKING:
    from .._callbacks import TrainerState
    from .._training_args import TrainingArguments

# Everything Comet would capture on its own (code, git, environment, console, framework hooks) stays off.
_QUIET = dict(
    auto_metric_logging=False,
    auto_param_logging=False,
    auto_output_logging=False,
    auto_log_co2=False,
    log_code=False,
    log_graph=False,
    log_env_details=False,
    log_env_gpu=False,
    log_env_host=False,
    log_env_cpu=False,
    log_env_network=False,
    log_env_disk=False,
    log_git_metadata=False,
    log_git_patch=False,
    display_summary_level=0,
)


class CometCallback(TrackerCallback):
    """Logs an experiment to Comet, offline unless ``COMET_MODE`` says otherwise.

    Environment: ``COMET_MODE`` (``OFFLINE`` by default here: the experiment is a zip archive in
    ``COMET_OFFLINE_DIRECTORY``, default ``output_dir/comet``, that ``comet upload`` sends later; ``ONLINE``
    needs ``COMET_API_KEY``; ``DISABLED`` logs nothing), ``COMET_PROJECT_NAME`` (default ``hpsearch``),
    ``COMET_WORKSPACE``. The experiment is named after the run (the trial during a search); a search's trials
    carry the tags ``hpsearch-trial`` and the search's output folder name, then their final state
    (``complete``/``pruned``/``fail``) as a tag and as the ``hpsearch_state`` "other" value, with
    ``objective`` beside it.
    """

    name = "comet_ml"
    module = "comet_ml"
    extra = "comet"
    unread_uploads = ("COMET_LOG_ASSETS",)

    _experiment: Any = None

    def _open(self, args: TrainingArguments, state: TrainerState) -> None:
        import comet_ml

        env = os.environ
        mode = (env.get("COMET_MODE") or "OFFLINE").upper()
        common: dict[str, Any] = dict(
            project_name=env.get("COMET_PROJECT_NAME") or "hpsearch",
            workspace=env.get("COMET_WORKSPACE") or None,
            disabled=mode == "DISABLED",
            **_QUIET,
        )
        if mode == "ONLINE":
            experiment: Any = comet_ml.Experiment(**common)
        else:
            folder = env.get("COMET_OFFLINE_DIRECTORY") or os.path.join(args.output_dir, "comet")
            os.makedirs(folder, exist_ok=True)
            experiment = comet_ml.OfflineExperiment(offline_directory=folder, **common)
            if mode == "OFFLINE":
                announce_destination(
                    "Comet",
                    f"an offline archive in {folder}",
                    "set COMET_MODE=ONLINE to upload, or `comet upload` the archive later",
                    ("COMET_API_KEY",),
                )
        self._experiment = experiment
        experiment.set_name(run_name(args, state))
        if state.is_hyper_param_search:
            experiment.add_tags(["hpsearch-trial", search_group(args)])
        experiment.log_parameters(run_params(args, state))

    def _log(self, metrics: dict[str, float], step: int) -> None:
        self._experiment.log_metrics(metrics, step=step)

    def _finish(self, final_state: str, objective: float | list[float] | None) -> None:
        experiment, self._experiment = self._experiment, None
        try:
            experiment.log_other("hpsearch_state", final_state)
            if objective is not None:
                experiment.log_other("objective", objective)
            if self._search:
                experiment.add_tag(final_state.lower())
        finally:
            experiment.end()

    def _run_attributes(self) -> tuple[str, ...]:
        return ("_experiment",)
