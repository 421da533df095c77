"""An Accelerate-backed training loop in the shape of the Hugging Face `Trainer`."""

from ._argparser import DataclassArgumentParser
from ._callbacks import (
    CallbackHandler,
    DefaultFlowCallback,
    EarlyStoppingCallback,
    ExportableState,
    PrinterCallback,
    ProgressCallback,
    TrainerCallback,
    TrainerControl,
    TrainerState,
)
from ._optimization import get_scheduler
from ._trainer import Trainer
from ._training_args import IntervalStrategy, SaveStrategy, SchedulerType, TrainingArguments
from ._utils import (
    EvalPrediction,
    PredictionOutput,
    TrainOutput,
    default_data_collator,
    enable_full_determinism,
    set_seed,
)

__all__ = [
    "CallbackHandler",
    "DataclassArgumentParser",
    "DefaultFlowCallback",
    "EarlyStoppingCallback",
    "EvalPrediction",
    "ExportableState",
    "IntervalStrategy",
    "PredictionOutput",
    "PrinterCallback",
    "ProgressCallback",
    "SaveStrategy",
    "SchedulerType",
    "TrainOutput",
    "Trainer",
    "TrainerCallback",
    "TrainerControl",
    "TrainerState",
    "TrainingArguments",
    "default_data_collator",
    "enable_full_determinism",
    "get_scheduler",
    "set_seed",
]
