"""The JSON-lines log: ``output_dir/log_history.jsonl`` mirrors ``state.log_history``."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._callbacks import TrainerCallback, json_default

if TYPE_CHECKING:
    from .._training_args import TrainingArguments


class JsonlCallback(TrainerCallback):
    """Appends every log line (the dicts of ``state.log_history``) to ``output_dir/log_history.jsonl``.

    The file mirrors the run's ``log_history``: when training begins it is rewritten from ``state.log_history``
    (empty for a fresh run, the checkpoint's history after a resume, so lines logged after the last checkpoint
    of an interrupted run are not duplicated), then each log appends one JSON object per line.
    """

    file_name = "log_history.jsonl"

    def _path(self, args: TrainingArguments) -> str:
        return os.path.join(args.output_dir, self.file_name)

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        os.makedirs(args.output_dir, exist_ok=True)
        path = self._path(args)
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            for entry in state.log_history:
                f.write(_json_line(entry))
        os.replace(tmp, path)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or logs is None:
            return
        os.makedirs(args.output_dir, exist_ok=True)
        # The trainer appends {**logs, "step": ...} to log_history just before this event; write that same dict.
        entry = state.log_history[-1] if state.log_history else {**logs, "step": state.global_step}
        with open(self._path(args), "a", encoding="utf-8") as f:
            f.write(_json_line(entry))


def _json_line(entry: Mapping[str, Any]) -> str:
    return json.dumps(dict(entry), default=json_default, allow_nan=True) + "\n"
