"""Neptune: one run per training, offline by default; a search's trials share a tag and a group tag."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ._base import TrackerCallback, announce_destination, run_name, run_params, search_group

if TYPE_CHECKING:
    from .._callbacks import TrainerState
    from .._training_args import TrainingArguments

_ENV_LOCK = threading.Lock()


class NeptuneCallback(TrackerCallback):
    """Logs a run to Neptune (client 1.x), offline unless ``NEPTUNE_MODE`` says otherwise.

    Environment (as Neptune reads it): ``NEPTUNE_MODE`` (``offline`` by default here: operations are queued
    under ``NEPTUNE_DATA_DIRECTORY/offline/``, default ``output_dir/.neptune``, and ``neptune sync`` uploads
    them), ``NEPTUNE_PROJECT``, ``NEPTUNE_API_TOKEN`` (online only; never logged). The run is named after the
    run (the trial during a search); parameters go under ``parameters/``, logs under ``train/``, ``eval/`` and
    ``test/`` by prefix. A search's trials carry the tags ``hpsearch-trial`` and the search's output folder name
    (also in ``sys/group_tags``), then their final state as a tag and in ``hpsearch/state``, with
    ``hpsearch/objective``; a failed trial sets ``sys/failed``.
    """

    name = "neptune"
    module = "neptune"
    extra = "neptune"

    _run: Any = None

    def _open(self, args: TrainingArguments, state: TrainerState) -> None:
        import neptune

        tags = ["hpsearch-trial", search_group(args)] if state.is_hyper_param_search else []
        with _ENV_LOCK, _data_directory(os.path.join(args.output_dir, ".neptune")):
            run = self._init_run(neptune, args, state, tags)
        self._run = run
        if state.is_hyper_param_search:
            run["sys/group_tags"].add([search_group(args)])
        run["parameters"] = run_params(args, state)
        if (os.environ.get("NEPTUNE_MODE") or "offline") == "offline":
            announce_destination(
                "Neptune",
                "offline files under NEPTUNE_DATA_DIRECTORY (default output_dir/.neptune)",
                "set NEPTUNE_MODE=async to upload, or `neptune sync` later",
                ("NEPTUNE_API_TOKEN",),
            )

    @staticmethod
    def _init_run(neptune: Any, args: TrainingArguments, state: TrainerState, tags: list[str]) -> Any:
        env = os.environ
        return neptune.init_run(
            mode=env.get("NEPTUNE_MODE") or "offline",
            project=env.get("NEPTUNE_PROJECT") or None,
            name=run_name(args, state),
            tags=tags,
            capture_hardware_metrics=False,
            capture_stdout=False,
            capture_stderr=False,
            capture_traceback=False,
            source_files=[],
            git_ref=False,
        )

    def _log(self, metrics: dict[str, float], step: int) -> None:
        for key, value in metrics.items():
            path = key.replace("_", "/", 1) if key.startswith(("eval_", "test_")) else f"train/{key}"
            self._run[path].append(value, step=step)

    def _finish(self, final_state: str, objective: float | list[float] | None) -> None:
        run, self._run = self._run, None
        try:
            run["hpsearch/state"] = final_state
            if objective is not None:
                run["hpsearch/objective"] = objective if not isinstance(objective, list) else str(objective)
            if self._search:
                run["sys/tags"].add(final_state.lower())
            if final_state == "FAIL":
                run["sys/failed"] = True
        finally:
            run.stop()

    def _run_attributes(self) -> tuple[str, ...]:
        return ("_run",)


@contextmanager
def _data_directory(default: str) -> Iterator[None]:
    """Neptune reads its data folder from ``NEPTUNE_DATA_DIRECTORY`` only (default: the working directory);
    unless the user set it, point it at the run's folder while the run opens."""
    if os.environ.get("NEPTUNE_DATA_DIRECTORY"):
        yield
        return
    os.environ["NEPTUNE_DATA_DIRECTORY"] = os.path.abspath(default)
    try:
        yield
    finally:
        os.environ.pop("NEPTUNE_DATA_DIRECTORY", None)
