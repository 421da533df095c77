"""An Accelerate-backed training loop in the shape of the Hugging Face `Trainer`."""

from ._argparser import DataclassArgumentParser
from ._argparser import DataclassArgumentParser as HfArgumentParser
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
from ._checkpoint import get_last_checkpoint
from ._debug import DebugUnderflowOverflow
from ._distributed_utils import DistributedTensorGatherer, torch_distributed_zero_first
from ._integrations import (
    JsonlCallback,
    MLflowCallback,
    TensorBoardCallback,
    get_reporting_integration_callbacks,
)
from ._optimization import create_optimizer, get_scheduler
from ._seq2seq import Seq2SeqTrainer, Seq2SeqTrainingArguments
from ._trainer import Trainer
from ._training_args import (
    IntervalStrategy,
    MixedPrecision,
    OptimizerNames,
    SaveStrategy,
    SchedulerType,
    TrainingArguments,
)
from ._utils import (
    EvalPrediction,
    PredictionOutput,
    TrainOutput,
    default_data_collator,
    enable_full_determinism,
    set_seed,
)

__all__ = [
    "Seq2SeqTrainer",
    "Seq2SeqTrainingArguments",
    "CallbackHandler",
    "DataclassArgumentParser",
    "DebugUnderflowOverflow",
    "DistributedTensorGatherer",
    "DefaultFlowCallback",
    "EarlyStoppingCallback",
    "EvalPrediction",
    "ExportableState",
    "HfArgumentParser",
    "IntervalStrategy",
    "JsonlCallback",
    "MLflowCallback",
    "MixedPrecision",
    "OptimizerNames",
    "PredictionOutput",
    "PrinterCallback",
    "ProgressCallback",
    "SaveStrategy",
    "SchedulerType",
    "TensorBoardCallback",
    "TrainOutput",
    "Trainer",
    "TrainerCallback",
    "TrainerControl",
    "TrainerState",
    "TrainingArguments",
    "create_optimizer",
    "default_data_collator",
    "enable_full_determinism",
    "get_last_checkpoint",
    "get_reporting_integration_callbacks",
    "get_scheduler",
    "set_seed",
    "torch_distributed_zero_first",
]
