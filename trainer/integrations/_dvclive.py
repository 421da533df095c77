"""DVCLive: plain local files per training (params.yaml, metrics.json, plots/metrics/*.tsv)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ._base import TrackerCallback, run_name, run_params

if TYPE_CHECKING:
    from .._callbacks import TrainerState
    from .._training_args import TrainingArguments


class DVCLiveCallback(TrackerCallback):
    """Logs a run with DVCLive into ``output_dir/dvclive`` (or ``DVCLIVE_DIR``), without DVC experiments.

    ``params.yaml`` holds the parameters, ``plots/metrics/<key>.tsv`` one row per logging step (keys grouped as
    ``train/``, ``eval/``, ``test/``), ``metrics.json`` the latest values plus, when the run ends,
    ``hpsearch_state`` and ``objective``. During a search each trial writes into its own folder (trials are
    grouped by the search's output folder, as on disk); ``DVC_EXP_NAME`` names the run for DVC, default the
    trial's name. Nothing is committed, pushed or sent (``save_dvc_exp=False``, no report), and unlike DVCLive on
    its own the callback never runs ``dvc init`` in the enclosing Git repository: DVC experiments are not made.
    """

    name = "dvclive"
    module = "dvclive"
    extra = "dvclive"
    unread_uploads = ("HF_DVCLIVE_LOG_MODEL",)

    _live: Any = None

    def _open(self, args: TrainingArguments, state: TrainerState) -> None:
        from dvclive import Live

        class LocalLive(Live):
            def _init_dvc(self) -> None:
                # DVCLive would run `dvc init` in the enclosing Git repository (and stage the files); a logging
                # callback must not change the user's repository, so this run is plain files only.
                self._dvc_file = self._init_dvc_file()

        folder = os.environ.get("DVCLIVE_DIR") or os.path.join(args.output_dir, "dvclive")
        self._live = LocalLive(
            dir=folder,
            save_dvc_exp=False,
            report=None,
            dvcyaml=None,
            exp_name=os.environ.get("DVC_EXP_NAME") or run_name(args, state),
        )
        params: dict[str, Any] = dict(run_params(args, state))
        self._live.log_params(params)

    def _log(self, metrics: dict[str, float], step: int) -> None:
        live = self._live
        live.step = step
        for key, value in metrics.items():
            name = key.replace("_", "/", 1) if key.startswith(("eval_", "test_")) else f"train/{key}"
            live.log_metric(name, value)
        live.make_summary()

    def _finish(self, final_state: str, objective: float | list[float] | None) -> None:
        live, self._live = self._live, None
        try:
            live.summary["hpsearch_state"] = final_state
            if objective is not None:
                live.summary["objective"] = objective
        finally:
            live.end()

    def _run_attributes(self) -> tuple[str, ...]:
        return ("_live",)
