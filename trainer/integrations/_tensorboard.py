"""TensorBoard event files under ``args.logging_dir``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .._callbacks import TrainerCallback, TrainerState
from ..redact import redact, safe_params
from . import _base
from ._base import install_hint, numeric_logs, scalar

if TYPE_CHECKING:
    from .._training_args import TrainingArguments

logger = logging.getLogger(__name__)


def is_tensorboard_available() -> bool:
    """Whether the ``tensorboard`` package (needed by ``torch.utils.tensorboard``) is installed."""
    return _base._installed("tensorboard")  # looked up at call time (tests replace it)


class TensorBoardCallback(TrainerCallback):
    """Writes scalars per step to TensorBoard event files under ``args.logging_dir`` (world main process only).

    Keys are grouped as TensorBoard does best: ``eval_loss`` -> ``eval/loss``, ``test_*`` -> ``test/*`` and the
    rest (``loss``, ``learning_rate``, ...) -> ``train/*``. The arguments are written once per writer, as text
    and as hparams. ``tb_writer`` may be a ready ``SummaryWriter`` (then its folder is used as is).
    """

    def __init__(self, tb_writer: Any = None) -> None:
        if not is_tensorboard_available() and tb_writer is None:
            raise ImportError(install_hint("tensorboard"))
        self.tb_writer = tb_writer
        self._own_writer = tb_writer is None
        self._args_logged = False

    def _init_writer(self, args: TrainingArguments) -> None:
        if self.tb_writer is not None:
            return
        from torch.utils.tensorboard import SummaryWriter

        self.tb_writer = SummaryWriter(log_dir=args.logging_dir)
        self._own_writer = True
        self._args_logged = False

    def _log_args_once(self, args: TrainingArguments, state: TrainerState) -> None:
        if self._args_logged:
            return
        self._args_logged = True
        self.tb_writer.add_text("args", "```json\n" + redact(args.to_json_string()) + "```")
        try:
            from torch.utils.tensorboard.summary import hparams

            params = dict(args.to_sanitized_dict())
            for key, value in (state.trial_params or {}).items():
                number = scalar(value)
                params[f"trial/{key}"] = number if number is not None else str(value)
            exp, ssi, sei = hparams(safe_params(params), {})  # no secret-named parameter, no secret value
            writer = self.tb_writer._get_file_writer()
            for summary in (exp, ssi, sei):
                writer.add_summary(summary)
        except Exception as error:  # hparams are a convenience; never fail a run over them
            logger.warning("TensorBoard: could not write the hparams summary (%s).", error)

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        self._init_writer(args)
        self._log_args_once(args, state)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        self._init_writer(args)  # evaluate() after train() closed the writer opens a new one
        for key, value in numeric_logs(logs, self).items():
            self.tb_writer.add_scalar(_tb_tag(key), value, state.global_step)
        self.tb_writer.flush()

    def on_train_end(self, args, state, control, **kwargs):
        if self.tb_writer is not None and self._own_writer:
            self.tb_writer.close()
            self.tb_writer = None

    def __deepcopy__(self, memo: dict[int, Any]) -> TensorBoardCallback:
        # Trials get copies of the callbacks; an open writer (threads, file handles) cannot be copied, nor shared.
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        if self._own_writer:
            clone.tb_writer = None
            clone._args_logged = False
        return clone


def _tb_tag(key: str) -> str:
    for prefix in ("eval_", "test_"):
        if key.startswith(prefix):
            return f"{prefix[:-1]}/{key[len(prefix) :]}"
    return f"train/{key}"
