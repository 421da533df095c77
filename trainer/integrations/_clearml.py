"""ClearML: one task per training, an offline session by default; a search's trials share a sub-project."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from ._base import TrackerCallback, announce_destination, run_name, run_params, search_group

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from .._callbacks import TrainerState
    from .._training_args import TrainingArguments

_FALSE = ("0", "false", "no", "off")


class ClearMLCallback(TrackerCallback):
    """Logs a task to ClearML, as an offline session unless ``CLEARML_OFFLINE_MODE`` is ``0``/``false``.

    Environment: ``CLEARML_OFFLINE_MODE`` (offline by default here: the session is a folder and a zip under
    ClearML's cache, ``CLEARML_CACHE_DIR/offline/`` (default ``~/.clearml/cache``), that
    ``Task.import_offline_session`` uploads later; the folder is `offline_folder`), ``CLEARML_PROJECT`` (default
    ``hpsearch``), ``CLEARML_TASK`` (the task name outside a search; default ``run_name``). Framework hooks,
    argument parsing, console and resource monitoring are off. During a search each trial is a task named after
    the trial in the sub-project ``<project>/<search output folder>``; its final state is a tag and the
    parameter ``hpsearch/state``, its objective the parameter ``hpsearch/objective`` and a single value. ClearML
    keeps one task per process, so trials running in threads of one process cannot each have a task.
    """

    name = "clearml"
    module = "clearml"
    extra = "clearml"
    unread_uploads = ("CLEARML_LOG_MODEL",)

    _task: Any = None

    offline_folder: str | None = None

    def _open(self, args: TrainingArguments, state: TrainerState) -> None:
        from clearml import Task

        env = os.environ
        # ClearML reports from a forked process by default; forked next to torch's threads it can stall closing
        # the task for minutes. Report from this process instead.
        if hasattr(
            Task, "_report_subprocess_enabled"
        ):  # a private switch: set only where this release has it
            Task._report_subprocess_enabled = False  # type: ignore[assignment]
        else:
            logger.warning(
                "This clearml has no Task._report_subprocess_enabled; it reports from a forked process, "
                "which can stall closing a run next to torch's threads."
            )
        if (env.get("CLEARML_OFFLINE_MODE") or "1").strip().lower() not in _FALSE:
            Task.set_offline(offline_mode=True)
        project = env.get("CLEARML_PROJECT") or "hpsearch"
        search = state.is_hyper_param_search
        if search:
            project = f"{project}/{search_group(args)}"
        task: Any = Task.init(
            project_name=project,
            task_name=run_name(args, state) if search else env.get("CLEARML_TASK") or run_name(args, state),
            tags=["hpsearch-trial"] if search else None,
            reuse_last_task_id=False,
            continue_last_task=False,
            auto_connect_frameworks=False,
            auto_connect_arg_parser=False,
            auto_connect_streams=False,
            auto_resource_monitoring=False,
        )
        self._task = task
        if Task.is_offline():
            self.offline_folder = str(task.get_offline_mode_folder())
            announce_destination(
                "ClearML",
                f"an offline session in {self.offline_folder}",
                "set CLEARML_OFFLINE_MODE=0 to upload, or import the session later "
                "(Task.import_offline_session)",
                ("CLEARML_API_ACCESS_KEY", "CLEARML_API_SECRET_KEY"),
            )
        task.connect(run_params(args, state), name="Args")

    def _log(self, metrics: dict[str, float], step: int) -> None:
        logger = self._task.get_logger()
        for key, value in metrics.items():
            title, series = key.split("_", 1) if key.startswith(("eval_", "test_")) else ("train", key)
            logger.report_scalar(title=title, series=series, value=value, iteration=step)

    def _flush(self) -> None:
        self._task.flush(wait_for_uploads=False)

    def _finish(self, final_state: str, objective: float | list[float] | None) -> None:
        task, self._task = self._task, None
        try:
            task.set_parameter("hpsearch/state", final_state)
            if objective is not None:
                task.set_parameter("hpsearch/objective", objective)
                if not isinstance(objective, list):
                    task.get_logger().report_single_value("objective", objective)
            if self._search:
                task.add_tags([final_state.lower()])
            if final_state == "FAIL":
                task.mark_failed(status_reason="the trial failed", force=True)
            elif final_state == "PRUNED":
                task.mark_stopped(force=True, status_message="pruned")
        finally:
            task.close()

    def _run_attributes(self) -> tuple[str, ...]:
        return ("_task",)
