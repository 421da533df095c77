"""`TrainingArguments`: the validated, serialisable configuration of one training run.

The field names, meanings and defaults follow Hugging Face transformers' ``TrainingArguments`` so that
code and configs written for it carry over. Everything is checked in ``__post_init__``, which also runs
again on ``dataclasses.replace`` (that is how a hyperparameter trial overrides fields), so a bad trial
value fails when the trial's arguments are built rather than deep inside the training loop.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from . import _args_compat, _args_legacy
from ._args_legacy import LegacyFields
from ._args_setters import ArgumentSetters
from ._validation import (
    _as_bool,
    _as_dict,
    _as_enum,
    _as_float,
    _as_int,
    _as_steps,
    _as_str,
    _default_logging_dir,
    _fail,
    _jsonable,
    _parse_size,
    _StrEnum,
)

__all__ = [
    "IntervalStrategy",
    "MixedPrecision",
    "OptimizerNames",
    "SaveStrategy",
    "SchedulerType",
    "TrainingArguments",
]


class IntervalStrategy(_StrEnum):
    """When to evaluate or log: never, every ``*_steps`` optimizer steps, or at the end of every epoch."""

    NO = "no"
    STEPS = "steps"
    EPOCH = "epoch"


class SaveStrategy(_StrEnum):
    """When to save a checkpoint; ``best`` saves whenever ``metric_for_best_model`` reaches a new best."""

    NO = "no"
    STEPS = "steps"
    EPOCH = "epoch"
    BEST = "best"


class SchedulerType(_StrEnum):
    """Learning-rate schedules understood by :func:`trainer.get_scheduler`."""

    LINEAR = "linear"
    COSINE = "cosine"
    COSINE_WITH_RESTARTS = "cosine_with_restarts"
    POLYNOMIAL = "polynomial"
    CONSTANT = "constant"
    CONSTANT_WITH_WARMUP = "constant_with_warmup"
    INVERSE_SQRT = "inverse_sqrt"
    REDUCE_ON_PLATEAU = "reduce_lr_on_plateau"
    COSINE_WITH_MIN_LR = "cosine_with_min_lr"
    WARMUP_STABLE_DECAY = "warmup_stable_decay"


class MixedPrecision(_StrEnum):
    """Mixed-precision mode handed to ``accelerate.Accelerator(mixed_precision=...)``."""

    NO = "no"
    FP16 = "fp16"
    BF16 = "bf16"


class OptimizerNames(_StrEnum):
    """Optimizers understood by :func:`trainer.create_optimizer`."""

    ADAMW_TORCH = "adamw_torch"
    ADAMW_TORCH_FUSED = "adamw_torch_fused"
    ADAM = "adam"
    SGD = "sgd"
    ADAGRAD = "adagrad"
    RMSPROP = "rmsprop"
    ADAFACTOR = "adafactor"
    # transformers' other names: run from their libraries or refused with the reason (see trainer/_optim_families.py).
    ADAMW_HF = "adamw_hf"
    ADAMW_ANYPRECISION = "adamw_anyprecision"
    ADAMW_BNB = "adamw_bnb_8bit"
    ADAMW_8BIT = "adamw_8bit"
    PAGED_ADAMW = "paged_adamw_32bit"
    PAGED_ADAMW_8BIT = "paged_adamw_8bit"
    LION = "lion_32bit"
    LION_8BIT = "lion_8bit"
    PAGED_LION = "paged_lion_32bit"
    PAGED_LION_8BIT = "paged_lion_8bit"
    RMSPROP_BNB = "rmsprop_bnb"
    RMSPROP_8BIT = "rmsprop_bnb_8bit"
    RMSPROP_32BIT = "rmsprop_bnb_32bit"
    ADEMAMIX = "ademamix"
    ADEMAMIX_8BIT = "ademamix_8bit"
    PAGED_ADEMAMIX = "paged_ademamix_32bit"
    PAGED_ADEMAMIX_8BIT = "paged_ademamix_8bit"
    SCHEDULE_FREE_ADAMW = "schedule_free_adamw"
    SCHEDULE_FREE_SGD = "schedule_free_sgd"
    SCHEDULE_FREE_RADAM = "schedule_free_radam"
    GALORE_ADAMW = "galore_adamw"
    GALORE_ADAMW_8BIT = "galore_adamw_8bit"
    GALORE_ADAFACTOR = "galore_adafactor"
    GALORE_ADAMW_LAYERWISE = "galore_adamw_layerwise"
    GALORE_ADAMW_8BIT_LAYERWISE = "galore_adamw_8bit_layerwise"
    GALORE_ADAFACTOR_LAYERWISE = "galore_adafactor_layerwise"
    APOLLO_ADAMW = "apollo_adamw"
    APOLLO_ADAMW_LAYERWISE = "apollo_adamw_layerwise"
    LOMO = "lomo"
    ADALOMO = "adalomo"
    GROKADAMW = "grokadamw"
    STABLE_ADAMW = "stable_adamw"
    ADAMW_TORCH_4BIT = "adamw_torch_4bit"
    ADAMW_TORCH_8BIT = "adamw_torch_8bit"
    ADAMW_TORCH_XLA = "adamw_torch_xla"
    ADAMW_TORCH_NPU_FUSED = "adamw_torch_npu_fused"


_LOG_LEVELS = ("debug", "info", "warning", "error", "critical", "passive")
# The integrations of trainer.integrations.INTEGRATIONS (kept literal: the arguments import no integration), plus
# "aim", which trainer.integrations refuses with its reason when the Trainer is built.
_REPORT_TO = (
    "all",
    "none",
    "tensorboard",
    "mlflow",
    "jsonl",
    "wandb",
    "comet_ml",
    "neptune",
    "clearml",
    "dvclive",
    "codecarbon",
    "aim",
)
# numpy seeds (used by accelerate's set_seed) must fit in 32 unsigned bits.
_MAX_SEED = 2**32 - 1

# Fields whose value __post_init__ may fill in from other fields. They are recorded in `_derived` so that a
# `dataclasses.replace` that changes an input (output_dir, logging_steps, ...) re-derives them instead of
# keeping a value computed from the old input.
_DERIVABLE = (
    "logging_dir",
    "run_name",
    "eval_steps",
    "metric_for_best_model",
    "greater_is_better",
    "mixed_precision",
    "do_eval",
    "torch_compile",
    "torch_compile_backend",
    "dataloader_pin_memory",
)

#: The real numbers checked alone (their bounds): no other check, derivation or compatibility rule reads them.
#: A `replace` that changes only these and the folder fields (`_PATH_FIELDS`) re-checks just what it changed.
_STANDALONE_NUMBERS: dict[str, dict[str, Any]] = {
    "learning_rate": {"minimum": 0.0},
    "weight_decay": {"minimum": 0.0},
    "adam_beta1": {"minimum": 0.0, "maximum": 1.0, "maximum_inclusive": False},
    "adam_beta2": {"minimum": 0.0, "maximum": 1.0, "maximum_inclusive": False},
    "adam_epsilon": {"minimum": 0.0},
    "max_grad_norm": {"minimum": 0.0},
    "num_train_epochs": {"minimum": 0.0},
    "warmup_ratio": {"minimum": 0.0, "maximum": 1.0},
}
#: The fields `_check_paths_and_names` checks and derives from one another (and nothing else reads).
_PATH_FIELDS = frozenset({"output_dir", "logging_dir", "run_name"})
_QUICK_REPLACE = frozenset(_STANDALONE_NUMBERS) | _PATH_FIELDS


@dataclass
class TrainingArguments(ArgumentSetters, LegacyFields):
    """Arguments of one training run (names, meanings and defaults as in transformers' TrainingArguments).

    Attributes:
        output_dir: Folder for checkpoints and outputs; None means ``"trainer_output"``.
        overwrite_output_dir: For the script (as in transformers): whether it may reuse a non-empty ``output_dir``.
        eval_strategy: When to evaluate: ``"no"``, ``"steps"`` (every ``eval_steps``) or ``"epoch"``.
        eval_steps: Steps between evaluations (ratio of total steps if in (0, 1)); None or 0 -> ``logging_steps``.
        eval_delay: Epochs or steps (per ``eval_strategy``) to wait before the first evaluation.
        per_device_train_batch_size: Training batch size per device (per process).
        per_device_eval_batch_size: Evaluation batch size per device (per process).
        gradient_accumulation_steps: Batches whose gradients are summed before each optimizer step.
        eval_accumulation_steps: Prediction steps to accumulate on device before moving to CPU; None = all.
        learning_rate: Peak learning rate of the optimizer (reached after warmup).
        weight_decay: Decoupled weight decay for every parameter except biases and normalisation weights.
        adam_beta1: Beta1 of the Adam-family optimizers, in [0, 1).
        adam_beta2: Beta2 of the Adam-family optimizers, in [0, 1).
        adam_epsilon: Epsilon of the Adam-family optimizers.
        max_grad_norm: Gradient clipping norm; 0 disables clipping.
        num_train_epochs: Epochs to train (may be fractional); ignored when ``max_steps > 0``.
        max_steps: Total optimizer steps to train; -1 means use ``num_train_epochs``.
        lr_scheduler_type: Learning-rate schedule, one of :class:`SchedulerType`.
        lr_scheduler_kwargs: Extra keyword arguments of the schedule (e.g. ``{"num_cycles": 2}``).
        warmup_ratio: Fraction of the total steps used for linear warmup (used when ``warmup_steps`` is 0).
        warmup_steps: Warmup steps (>= 1) or a ratio of total steps (in (0, 1)); overrides ``warmup_ratio``.
        log_level: Level of the "trainer" loggers on the main process: debug, info, warning, error, critical or
            passive (leave it as it is).
        logging_dir: TensorBoard/log folder; None -> ``output_dir/runs/<YYYY-mm-dd_HH-MM-SS>_<hostname>``.
        logging_strategy: When to log: ``"no"``, ``"steps"`` (every ``logging_steps``) or ``"epoch"``.
        logging_first_step: Also log (and evaluate, if evaluating by steps) at the first step.
        logging_steps: Steps between logs (ratio of total steps if in (0, 1)).
        logging_nan_inf_filter: Drop NaN/inf losses from the logged running loss.
        save_strategy: When to checkpoint: ``"no"``, ``"steps"``, ``"epoch"`` or ``"best"``.
        save_steps: Steps between checkpoints (ratio of total steps if in (0, 1)).
        save_total_limit: Most checkpoints kept in ``output_dir`` (the best one is always kept); None = all.
        save_only_model: Checkpoint only the model weights (no optimizer/scheduler/RNG state: no resume).
        restore_callback_states_from_checkpoint: Restore stateful callbacks' state when resuming.
        use_cpu: Train on the CPU even when an accelerator is available.
        seed: Random seed set at the start of training.
        data_seed: Seed of the data samplers; None means ``seed``.
        full_determinism: Also switch on PyTorch's deterministic algorithms (slower).
        mixed_precision: ``"no"``, ``"fp16"`` (CUDA only) or ``"bf16"``; set by ``fp16``/``bf16`` too.
        dataloader_num_workers: Worker processes per dataloader; 0 loads in the main process.
        dataloader_drop_last: Drop the last incomplete batch.
        dataloader_pin_memory: Use pinned memory in the dataloaders; ``use_cpu=True`` turns it off (as transformers).
        dataloader_persistent_workers: Keep dataloader workers alive between epochs (needs workers > 0).
        dataloader_multiprocessing_context, dataloader_in_order: The loaders' worker start method ("fork", "spawn",
            "forkserver"; None: torch's) and whether workers' batches keep their order (both need workers > 0).
        dataloader_prefetch_factor: Batches prefetched per worker; None is PyTorch's default (needs workers > 0).
        remove_unused_columns: Drop dataset columns the model's ``forward`` does not accept.
        label_names: Keys of the input batch that hold the labels; None = the model's default.
        load_best_model_at_end: Load the best checkpoint (by ``metric_for_best_model``) when training ends.
        metric_for_best_model: Metric that ranks checkpoints; None -> ``"loss"`` when loading the best model.
        greater_is_better: Whether a larger metric is better; None -> False for names ending in "loss".
        prediction_loss_only: During evaluation return only the loss, not predictions.
        batch_eval_metrics: Call ``compute_metrics`` per batch (with ``compute_result``) instead of once.
        optim: Optimizer, one of :class:`OptimizerNames`.
        optim_args: Extra keyword arguments of the optimizer (e.g. ``{"momentum": 0.9}`` for sgd).
        report_to: Logging integrations (str or list): "none" (the default; None means the default), "all" (every
            installed one) or names among "jsonl", "tensorboard", "mlflow", "wandb", "comet_ml", "neptune",
            "clearml", "dvclive", "codecarbon" (see ``trainer.integrations``).
        disable_tqdm: Hide progress bars; None -> False.
        run_name: Name of the run in the logging integrations; None -> ``output_dir``.
        skip_memory_metrics: Skip the memory profiler metrics (they slow training down).
        include_num_input_tokens_seen: Count the input tokens trained on in ``state.num_input_tokens_seen`` (and
            the logs): "all" (or True) the elements of ``input_ids``, "non_padding" those its attention mask keeps,
            "no" (or False; the default) none. Stored as "all", "non_padding" or "no", as transformers does.
        average_tokens_across_devices: Sum the label tokens of all processes into num_items_in_batch (as transformers).
        max_checkpoint_shard_size: Largest safetensors shard: int bytes or a string like "5GB"/"500MB".
        save_on_each_node: Save checkpoints on every node, not just the main one (no shared filesystem).

    Fields of a ported Hugging Face script (same names and meanings; see README "Differences from transformers"):
        log_level_replica: Logger level on the other processes (``log_level``'s choices); default "warning".
        log_on_each_node: Main-process log level on the first process of every node, not only of the first node.
        fp16, bf16: Shorthands for ``mixed_precision="fp16"``/``"bf16"`` (fp16 needs a CUDA GPU).
        fp16_full_eval, bf16_full_eval: Cast the model to that dtype for evaluate()/predict() outside training.
        tf32: Allow TF32 matmuls on Ampere+ GPUs (True needs one); None leaves torch's setting.
        half_precision_backend: "auto" or "cpu_amp": torch's native autocast through accelerate (no apex).
        do_train, do_eval, do_predict, resume_from_checkpoint, local_rank: Stored for the script, which reads them.
        use_cache: Set on the model's config (``config.use_cache``) by the Trainer, as transformers does.
        evaluation_strategy: Deprecated alias of ``eval_strategy`` (warns).
        label_smoothing_factor: Label smoothing of the cross-entropy on the model's logits, in [0, 1).
        include_for_metrics: What `compute_metrics` also receives: "inputs" and/or "loss".
        include_inputs_for_metrics: Deprecated; same as ``include_for_metrics=["inputs"]``.
        eval_do_concat_batches: Concatenate predictions across batches (False: a list of per-batch arrays).
        eval_use_gather_object: Gather evaluation outputs as Python objects; a single process gathers nothing, so
            it changes nothing there (as in transformers); refused when evaluating on several processes.
        torch_empty_cache_steps: Empty the accelerator's memory cache every this many optimizer steps (None: never).
        ignore_data_skip: When resuming, start the epoch's data from its beginning instead of skipping batches.
        past_index: Index of the model output fed back as ``mems`` on the next step (-1: none).
        jit_mode_eval: Refused (no torch.jit tracing).
        ddp_backend, ddp_timeout: Process-group backend and timeout (seconds) when launched on several processes.
        ddp_find_unused_parameters, ddp_bucket_cap_mb, ddp_broadcast_buffers, ddp_static_graph: DDP options.
        accelerator_config: accelerate data-loader options: split_batches, dispatch_batches, even_batches,
            non_blocking (dict, JSON string or JSON file path).
        dispatch_batches, split_batches: The same two options as fields.
        debug: "underflow_overflow" reports the first module whose output holds inf/nan, and stops training.
        include_tokens_per_second: Add ``train_tokens_per_second`` to the training metrics.
        save_safetensors: Must be True: weights are only written as safetensors.
        push_to_hub: Must be False: this trainer does not push to the Hugging Face Hub.
        hub_*, no_cuda, per_gpu_*_batch_size and the other transformers 4.x names: see `LegacyFields`.
        activation_checkpointing: Call the model's ``activation_checkpointing_enable`` (transformers 5) or
            ``gradient_checkpointing_enable`` (with ``activation_checkpointing_kwargs``) before training; a model
            with neither is refused. ``gradient_checkpointing(_kwargs)`` are transformers 5's older names of both:
            used when the new name is unset, then kept equal to it (whichever a ``replace`` changes wins).
        eval_on_start: Evaluate once before the first training step (needs an evaluation dataset).
        train_sampling_strategy: Training order: "random", "sequential" or "group_by_length" (neighbours of similar
            lengths, less padding); ``group_by_length=True`` is transformers 4's spelling of the last.
        length_column_name: Dataset column holding each example's length for ``group_by_length``.
        neftune_noise_alpha: NEFTune: uniform noise of scale ``alpha / sqrt(sequence length x hidden size)`` added to
            the input embeddings during training (the model needs ``get_input_embeddings``).
        optim_target_modules: the linear layers a GaLore ``optim`` projects (parts of module names, a regular
            expression, or "all-linear"); refused with any other optimizer.
        deepspeed: a DeepSpeed config (dict or JSON path), handed to accelerate; needs the ``deepspeed`` package
            (refused with the install command otherwise).
        fsdp: Shard the model with FSDP through accelerate (several processes): True, or options among "full_shard",
            "shard_grad_op", "offload", "auto_wrap" (FSDP1 on GPUs also "no_shard", "hybrid_shard*"); see README.
        fsdp_config: FSDP settings (dict or JSON path; transformers' keys, ``fsdp_`` prefix optional) plus
            ``version`` (2 by default) and ``state_dict_type``; filled in from ``accelerate launch``'s FSDP config.
        auto_find_batch_size: On an out-of-memory error, halve ``per_device_train_batch_size`` and train again.
        torch_compile: Compile the model with ``torch.compile`` (through accelerate) before training;
            ``torch_compile_backend`` (default "inductor") and ``torch_compile_mode`` set either imply it.

    Every field is validated in ``__post_init__``, which also runs again on ``dataclasses.replace`` /
    :meth:`replace`. Values that were filled in from other fields (``logging_dir``, ``run_name``,
    ``eval_steps``, ``metric_for_best_model``, ``greater_is_better``) are re-derived when those fields change
    in a replace, unless the replace also sets them to a new value.
    """

    output_dir: str = "trainer_output"
    overwrite_output_dir: bool = False
    eval_strategy: IntervalStrategy | str = "no"
    eval_steps: float | None = None
    eval_delay: float = 0
    per_device_train_batch_size: int = 8
    per_device_eval_batch_size: int = 8
    gradient_accumulation_steps: int = 1
    eval_accumulation_steps: int | None = None
    learning_rate: float = 5e-5
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-8
    max_grad_norm: float = 1.0
    num_train_epochs: float = 3.0
    max_steps: int = -1
    lr_scheduler_type: SchedulerType | str = "linear"
    lr_scheduler_kwargs: dict[str, Any] = field(default_factory=dict)
    warmup_ratio: float = 0.0
    warmup_steps: float = 0
    log_level: Literal["debug", "info", "warning", "error", "critical", "passive"] = "passive"
    logging_dir: str | None = None
    logging_strategy: IntervalStrategy | str = "steps"
    logging_first_step: bool = False
    logging_steps: float = 500
    logging_nan_inf_filter: bool = True
    save_strategy: SaveStrategy | str = "steps"
    save_steps: float = 500
    save_total_limit: int | None = None
    save_only_model: bool = False
    restore_callback_states_from_checkpoint: bool = False
    use_cpu: bool = False
    seed: int = 42
    data_seed: int | None = None
    full_determinism: bool = False
    mixed_precision: MixedPrecision | str = "no"
    dataloader_num_workers: int = 0
    dataloader_drop_last: bool = False
    dataloader_pin_memory: bool = True
    dataloader_persistent_workers: bool = False
    dataloader_prefetch_factor: int | None = None
    remove_unused_columns: bool = True
    label_names: list[str] | None = None
    load_best_model_at_end: bool = False
    metric_for_best_model: str | None = None
    greater_is_better: bool | None = None
    prediction_loss_only: bool = False
    batch_eval_metrics: bool = False
    optim: OptimizerNames | str = "adamw_torch"
    optim_args: dict[str, Any] | str = field(default_factory=dict)
    report_to: str | list[str] | None = "none"
    disable_tqdm: bool | None = None
    run_name: str | None = None
    skip_memory_metrics: bool = True
    include_num_input_tokens_seen: bool | str = "no"
    average_tokens_across_devices: bool = True
    max_checkpoint_shard_size: str | int = "5GB"
    save_on_each_node: bool = False
    log_level_replica: Literal["debug", "info", "warning", "error", "critical", "passive"] = "warning"
    log_on_each_node: bool = True
    fp16: bool = False
    bf16: bool = False
    fp16_full_eval: bool = False
    bf16_full_eval: bool = False
    tf32: bool | None = None
    half_precision_backend: str = "auto"
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    resume_from_checkpoint: str | None = None
    evaluation_strategy: IntervalStrategy | str | None = None
    label_smoothing_factor: float = 0.0
    include_for_metrics: list[str] = field(default_factory=list)
    include_inputs_for_metrics: bool = False
    eval_do_concat_batches: bool = True
    eval_use_gather_object: bool = False
    torch_empty_cache_steps: int | None = None
    ignore_data_skip: bool = False
    past_index: int = -1
    jit_mode_eval: bool = False
    ddp_backend: str | None = None
    ddp_timeout: int = 1800
    ddp_find_unused_parameters: bool | None = None
    ddp_bucket_cap_mb: int | None = None
    ddp_broadcast_buffers: bool | None = None
    accelerator_config: dict[str, Any] | str = field(default_factory=dict)
    dispatch_batches: bool | None = None
    split_batches: bool = False
    debug: str | list[str] = ""
    include_tokens_per_second: bool = False
    save_safetensors: bool = True
    push_to_hub: bool = False
    activation_checkpointing: bool | None = None
    activation_checkpointing_kwargs: dict[str, Any] | str | None = None
    gradient_checkpointing: bool | None = None
    gradient_checkpointing_kwargs: dict[str, Any] | str | None = None
    eval_on_start: bool = False
    torch_compile: bool = False
    torch_compile_backend: str | None = None
    torch_compile_mode: str | None = None
    auto_find_batch_size: bool = False
    group_by_length: bool = False
    train_sampling_strategy: str = "random"
    dataloader_multiprocessing_context: str | None = None
    dataloader_in_order: bool = True
    ddp_static_graph: bool | None = None
    use_cache: bool = False
    local_rank: int = -1
    length_column_name: str = "length"
    neftune_noise_alpha: float | None = None
    optim_target_modules: str | list[str] | None = None
    deepspeed: str | dict[str, Any] | None = None
    fsdp: bool | str | list[str] | None = ""
    fsdp_config: dict[str, Any] | str | None = None
    # Private bookkeeping: {field name: value __post_init__ derived for it}. It is an init field (not
    # init=False) on purpose: dataclasses.replace passes init fields along, which is the only way the new
    # instance can tell a derived value (re-derive it) from one the user chose (keep it). Not serialised.
    _derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Validate and normalise every field, and derive the defaults that depend on others. A re-validation
        (`replace`, a trial's overrides) derives anew what was derived last time and not changed since."""
        previous = self._derived if isinstance(self._derived, dict) else {}
        run_folder = self._forget_derived(previous)
        derived: dict[str, Any] = {}
        _args_compat.before(self, derived, previous)
        self._check_paths_and_names(derived, run_folder)
        self._check_choices()
        self._check_flags()
        self._check_counts()
        self._check_numbers()
        self._check_containers()
        self._derive_dependent_defaults(derived)
        _args_compat.after(self, derived, previous)
        self._check_consistency()
        self._derived = derived

    def _forget_derived(self, previous: dict[str, Any]) -> str | None:
        """Unset the fields still equal to what the last validation derived (the caller did not choose them), so
        that they are derived anew; return the timestamped logging folder's name to keep."""
        run_folder = None
        for name in _DERIVABLE:
            # Still equal to what was derived last time -> it was not chosen by the caller: derive it anew.
            if name in previous and getattr(self, name) == previous[name]:
                if name == "logging_dir" and isinstance(previous[name], str):
                    # Keep the timestamped folder name so that re-validating the same arguments is a no-op.
                    run_folder = os.path.basename(previous[name])
                setattr(self, name, None)
        return run_folder

    def _check_paths_and_names(self, derived: dict[str, Any], run_folder: str | None) -> None:
        """Output and logging folders ("~" expanded) and the run name."""
        # "~" expanded, as transformers does (os.makedirs would otherwise create a folder named "~").
        self.output_dir = os.path.expanduser(
            _as_str("output_dir", self.output_dir, allow_none=True, path=True) or "trainer_output"
        )
        self.logging_dir = _as_str("logging_dir", self.logging_dir, allow_none=True, path=True)
        self.logging_dir = None if self.logging_dir is None else os.path.expanduser(self.logging_dir)
        if self.logging_dir is None:
            self.logging_dir = derived["logging_dir"] = _default_logging_dir(self.output_dir, run_folder)
        self.run_name = _as_str("run_name", self.run_name, allow_none=True)
        if self.run_name is None:
            self.run_name = derived["run_name"] = self.output_dir

    def _check_choices(self) -> None:
        """The enum fields and the log level."""
        self.eval_strategy = _as_enum("eval_strategy", self.eval_strategy, IntervalStrategy)
        self.logging_strategy = _as_enum("logging_strategy", self.logging_strategy, IntervalStrategy)
        self.save_strategy = _as_enum("save_strategy", self.save_strategy, SaveStrategy)
        self.lr_scheduler_type = _as_enum("lr_scheduler_type", self.lr_scheduler_type, SchedulerType)
        self.optim = _as_enum("optim", self.optim, OptimizerNames)
        self.mixed_precision = _as_enum("mixed_precision", self.mixed_precision, MixedPrecision)
        if not isinstance(self.log_level, str) or self.log_level.strip().lower() not in _LOG_LEVELS:
            _fail(
                "log_level",
                self.log_level,
                f"one of {', '.join(map(repr, _LOG_LEVELS))}",
                "pass one of those",
            )
        self.log_level = cast(Any, self.log_level.strip().lower())

    def _check_flags(self) -> None:
        """The boolean fields."""
        for name in (
            "overwrite_output_dir",
            "logging_first_step",
            "logging_nan_inf_filter",
            "save_only_model",
            "restore_callback_states_from_checkpoint",
            "use_cpu",
            "full_determinism",
            "dataloader_drop_last",
            "dataloader_pin_memory",
            "dataloader_persistent_workers",
            "remove_unused_columns",
            "load_best_model_at_end",
            "prediction_loss_only",
            "batch_eval_metrics",
            "skip_memory_metrics",
            "average_tokens_across_devices",
            "save_on_each_node",
        ):
            setattr(self, name, _as_bool(name, getattr(self, name)))
        self.disable_tqdm = bool(_as_bool("disable_tqdm", self.disable_tqdm, allow_none=True))
        self.greater_is_better = _as_bool("greater_is_better", self.greater_is_better, allow_none=True)

    def _check_counts(self) -> None:
        """The integer fields: batch sizes, accumulation, max_steps, limits, seeds, loader workers."""
        self.per_device_train_batch_size = _as_int(
            "per_device_train_batch_size", self.per_device_train_batch_size, minimum=1
        )
        self.per_device_eval_batch_size = _as_int(
            "per_device_eval_batch_size", self.per_device_eval_batch_size, minimum=1
        )
        self.gradient_accumulation_steps = _as_int(
            "gradient_accumulation_steps", self.gradient_accumulation_steps, minimum=1
        )
        self.eval_accumulation_steps = _as_int(
            "eval_accumulation_steps", self.eval_accumulation_steps, minimum=1, allow_none=True
        )
        self.max_steps = _as_int("max_steps", self.max_steps)
        if self.max_steps == 0 or self.max_steps < -1:
            _fail(
                "max_steps",
                self.max_steps,
                "-1 (train for num_train_epochs) or a positive integer",
                "pass -1 or 1 or more",
            )
        self.save_total_limit = _as_int("save_total_limit", self.save_total_limit, minimum=1, allow_none=True)
        self.seed = _as_int("seed", self.seed, minimum=0, maximum=_MAX_SEED)
        self.data_seed = _as_int("data_seed", self.data_seed, minimum=0, maximum=_MAX_SEED, allow_none=True)
        self.dataloader_num_workers = _as_int(
            "dataloader_num_workers", self.dataloader_num_workers, minimum=0
        )
        self.dataloader_prefetch_factor = _as_int(
            "dataloader_prefetch_factor", self.dataloader_prefetch_factor, minimum=1, allow_none=True
        )

    def _check_numbers(self) -> None:
        """The real numbers, and the step counts (integers, or ratios of the total when in (0, 1))."""
        for name, bounds in _STANDALONE_NUMBERS.items():
            setattr(self, name, _as_float(name, getattr(self, name), **bounds))
        self.eval_delay = _as_float("eval_delay", self.eval_delay, minimum=0.0)

        # --- step counts (ints, or ratios of the total when in (0, 1)) ---
        self.warmup_steps = _as_steps("warmup_steps", self.warmup_steps, allow_zero=True)
        self.logging_steps = _as_steps("logging_steps", self.logging_steps, allow_zero=True)
        self.save_steps = _as_steps("save_steps", self.save_steps, allow_zero=True)
        self.eval_steps = _as_steps("eval_steps", self.eval_steps, allow_zero=True, allow_none=True)

    def _check_containers(self) -> None:
        """Lists, dicts and sizes."""
        self.lr_scheduler_kwargs = _as_dict("lr_scheduler_kwargs", self.lr_scheduler_kwargs)
        self.report_to = self._normalise_report_to(self.report_to)
        self.label_names = self._normalise_label_names(self.label_names)
        _parse_size("max_checkpoint_shard_size", self.max_checkpoint_shard_size)
        self.metric_for_best_model = _as_str(
            "metric_for_best_model", self.metric_for_best_model, allow_none=True
        )

    def _derive_dependent_defaults(self, derived: dict[str, Any]) -> None:
        """The defaults that depend on other fields: eval_steps, metric_for_best_model, greater_is_better."""
        # eval_steps 0 is unset too, as in transformers.
        if self.eval_strategy == IntervalStrategy.STEPS and not self.eval_steps:
            if self.logging_steps == 0:
                raise ValueError(
                    f"eval_strategy='steps' needs eval_steps, got eval_steps={self.eval_steps} and logging_steps=0 "
                    "to fall back on; pass eval_steps (e.g. 500) or a logging_steps > 0."
                )
            self.eval_steps = derived["eval_steps"] = self.logging_steps
        if self.metric_for_best_model is None and self.load_best_model_at_end:
            self.metric_for_best_model = derived["metric_for_best_model"] = "loss"
        if self.greater_is_better is None and self.metric_for_best_model is not None:
            self.greater_is_better = derived["greater_is_better"] = not self.metric_for_best_model.endswith(
                "loss"
            )

    # ------------------------------------------------------------------------------------------------------

    @staticmethod
    def _normalise_report_to(value: Any) -> list[str]:
        accepted = ", ".join(map(repr, _REPORT_TO))
        fix = f"pass one of {accepted} or a list of them"
        if value is None:  # the default
            return []
        if isinstance(value, str):
            entries = [value]
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            entries = list(value)
        else:
            _fail("report_to", value, "a string or a list of strings", fix)
        entries = [e.strip().lower() for e in entries]
        unknown = [e for e in entries if e not in _REPORT_TO]
        if unknown:
            _fail("report_to", value, f"made of {accepted}", f"remove {unknown!r}")
        if ("none" in entries or "all" in entries) and len(set(entries)) > 1:
            _fail(
                "report_to",
                value,
                "'none', 'all' or a list of integrations",
                "pass 'none' or 'all' alone, or a list of specific integrations",
            )
        if entries == ["none"]:
            return []
        return list(dict.fromkeys(entries))  # drop duplicates, keep order

    @staticmethod
    def _normalise_label_names(value: Any) -> list[str] | None:
        if value is None:
            return None
        if isinstance(value, str):
            _fail("label_names", value, "a list of strings", f"pass [{value!r}]")
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
            _fail("label_names", value, "a list of non-empty strings or None", 'pass e.g. ["labels"]')
        return list(value)

    def _check_consistency(self) -> None:
        """Constraints between fields (each field is already well-typed here)."""
        if self.logging_strategy == IntervalStrategy.STEPS and self.logging_steps == 0:
            raise ValueError(
                "logging_steps must be > 0 when logging_strategy='steps', got 0; pass e.g. logging_steps=500 "
                "or logging_strategy='no'."
            )
        if self.save_strategy == SaveStrategy.STEPS and self.save_steps == 0:
            raise ValueError(
                "save_steps must be > 0 when save_strategy='steps', got 0; pass e.g. save_steps=500 "
                "or save_strategy='no'."
            )
        if self.save_strategy == SaveStrategy.BEST:
            if self.eval_strategy == IntervalStrategy.NO:
                raise ValueError(
                    "save_strategy='best' saves when an evaluation finds a new best, but eval_strategy='no'; "
                    "pass eval_strategy='steps' or 'epoch'."
                )
            if self.metric_for_best_model is None:
                raise ValueError(
                    "`args.metric_for_best_model` must be provided when using 'best' save_strategy: "
                    "save_strategy='best' needs metric_for_best_model, got None; pass e.g. "
                    "metric_for_best_model='loss' (or load_best_model_at_end=True, which defaults it to 'loss')."
                )
        if (
            self.lr_scheduler_type == SchedulerType.REDUCE_ON_PLATEAU
            and self.eval_strategy == IntervalStrategy.NO
        ):
            raise ValueError(
                "lr_scheduler_type reduce_lr_on_plateau requires an eval strategy: it lowers the rate when an "
                "evaluation's metric stops improving; pass eval_strategy='steps' or 'epoch'."
            )
        if self.load_best_model_at_end:
            if self.eval_strategy == IntervalStrategy.NO:
                raise ValueError(
                    "load_best_model_at_end=True needs evaluations, but eval_strategy='no'; pass "
                    "eval_strategy='steps' or 'epoch' (and the same save_strategy)."
                )
            if self.save_strategy != SaveStrategy.BEST and str(self.save_strategy) != str(self.eval_strategy):
                raise ValueError(
                    "load_best_model_at_end=True needs save_strategy equal to eval_strategy (or 'best'), got "
                    f"save_strategy={str(self.save_strategy)!r} and eval_strategy={str(self.eval_strategy)!r}; "
                    f"pass save_strategy={str(self.eval_strategy)!r}."
                )
            if self.save_strategy == SaveStrategy.STEPS:
                self._check_save_steps_multiple()
        if self.mixed_precision == MixedPrecision.FP16:
            import torch  # lazy: only this check needs torch

            if self.use_cpu or not torch.cuda.is_available():
                where = "use_cpu=True" if self.use_cpu else "no CUDA GPU is available"
                raise ValueError(
                    f"mixed_precision='fp16' needs a CUDA GPU, got mixed_precision='fp16' but {where}; pass "
                    "mixed_precision='bf16' (supported on CPU) or 'no'."
                )
        if self.dataloader_num_workers == 0:
            if self.dataloader_prefetch_factor is not None:
                raise ValueError(
                    f"dataloader_prefetch_factor only applies with worker processes, got "
                    f"dataloader_prefetch_factor={self.dataloader_prefetch_factor} and dataloader_num_workers=0; "
                    "pass dataloader_num_workers >= 1 or dataloader_prefetch_factor=None."
                )
            if self.dataloader_persistent_workers:
                raise ValueError(
                    "dataloader_persistent_workers only applies with worker processes, got "
                    "dataloader_persistent_workers=True and dataloader_num_workers=0; pass "
                    "dataloader_num_workers >= 1 or dataloader_persistent_workers=False."
                )

    def _check_save_steps_multiple(self) -> None:
        eval_steps, save_steps = self.eval_steps, self.save_steps
        assert eval_steps is not None  # filled in by __post_init__ for eval_strategy='steps'
        if (eval_steps < 1) != (save_steps < 1):
            raise ValueError(
                "load_best_model_at_end=True needs save_steps and eval_steps both as step counts or both as "
                f"ratios, got save_steps={save_steps} and eval_steps={eval_steps}; pass both as ints or both "
                "in (0, 1)."
            )
        quotient = save_steps / eval_steps
        if quotient < 1 - 1e-9 or abs(quotient - round(quotient)) > 1e-9 * max(1.0, quotient):
            raise ValueError(
                "load_best_model_at_end=True needs save_steps to be a round multiple of eval_steps (so that "
                f"every checkpoint has an evaluation), got save_steps={save_steps} and eval_steps={eval_steps}; "
                f"pass save_steps={eval_steps} or a multiple of it."
            )

    # ------------------------------------------------------------------------------------------------------
    # Convenience API
    # ------------------------------------------------------------------------------------------------------

    def replace(self, **changes: Any) -> TrainingArguments:
        """A validated copy with ``changes`` applied (same as ``dataclasses.replace(self, **changes)``).

        A copy that changes only stand-alone numbers and the folders (a search trial's learning rate, output folder
        and run name) re-checks only those, as `__post_init__` would, instead of every field: this object was
        validated whole and nothing else can have changed. Any other change re-validates the copy whole.
        """
        if (
            changes.keys() <= _QUICK_REPLACE
            and type(self).__post_init__ is TrainingArguments.__post_init__
            and isinstance(self._derived, dict)
        ):
            return self._replace_checked(changes)
        return dataclasses.replace(self, **changes)

    def _replace_checked(self, changes: dict[str, Any]) -> TrainingArguments:
        clone = copy.copy(self)
        for name, value in vars(self).items():  # containers not shared, as a validation rebuilds them
            if isinstance(value, list | dict):
                setattr(clone, name, copy.copy(value))
        for name, value in changes.items():
            bounds = _STANDALONE_NUMBERS.get(name)
            setattr(clone, name, value if bounds is None else _as_float(name, value, **bounds))
        derived = dict(self._derived)
        if changes.keys() & _PATH_FIELDS:
            # As __post_init__: what was derived from the old folder and not chosen since is derived anew.
            run_folder = None
            for name in ("logging_dir", "run_name"):
                if name in derived and getattr(clone, name) == derived[name]:
                    if name == "logging_dir" and isinstance(derived[name], str):
                        run_folder = os.path.basename(derived[name])
                    setattr(clone, name, None)
                derived.pop(name, None)
            clone._check_paths_and_names(derived, run_folder)
        clone._derived = derived
        return clone

    @property
    def train_batch_size(self) -> int:
        """Training batch size of one process (each process drives one device)."""
        return self.per_device_train_batch_size

    @property
    def eval_batch_size(self) -> int:
        """Evaluation batch size of one process (each process drives one device)."""
        return self.per_device_eval_batch_size

    # --- the process this runs in (transformers' names; accelerate's PartialState answers) ---
    @property
    def _state(self) -> Any:
        """accelerate's process state, set up (when it is not yet) the way the trainer's Accelerator would: a
        script may ask for ``device`` or ``main_process_first`` before it builds the Trainer, and the process
        group must still get ``ddp_backend`` and ``ddp_timeout``."""
        from datetime import timedelta

        from ._precision import process_state

        kwargs: dict[str, Any] = {"timeout": timedelta(seconds=self.ddp_timeout)}
        if self.ddp_backend is not None:
            kwargs["backend"] = self.ddp_backend
        return process_state(self, **kwargs)

    @property
    def device(self) -> Any:
        """The torch.device this process trains on (``cpu`` with ``use_cpu=True``)."""
        import torch

        return torch.device("cpu") if self.use_cpu else self._state.device

    @property
    def n_gpu(self) -> int:
        """GPUs this process uses: 1 on a GPU, 0 on CPU (one process drives one device; no DataParallel)."""
        return 1 if self.device.type == "cuda" else 0

    @property
    def world_size(self) -> int:
        return int(self._state.num_processes)

    @property
    def process_index(self) -> int:
        return int(self._state.process_index)

    @property
    def local_process_index(self) -> int:
        return int(self._state.local_process_index)

    @property
    def should_log(self) -> bool:
        """Whether this process logs at ``log_level`` (else ``log_level_replica``)."""
        return self.local_process_index == 0 if self.log_on_each_node else self.process_index == 0

    @property
    def should_save(self) -> bool:
        """Whether this process writes checkpoints: the main one, or each node's first with save_on_each_node."""
        return self.local_process_index == 0 if self.save_on_each_node else self.process_index == 0

    def get_process_log_level(self) -> int:
        """The ``logging`` level of this process: ``log_level`` where `should_log`, else ``log_level_replica``;
        "passive" leaves the level the "trainer" logger already has."""
        import logging

        name = self.log_level if self.should_log else self.log_level_replica
        if name == "passive":
            return logging.getLogger("trainer").getEffectiveLevel()
        return int(getattr(logging, name.upper()))

    def main_process_first(self, local: bool = True, desc: str = "work") -> Any:
        """Context manager: the main process (of each node with ``local``) runs the block first, the others after
        it (e.g. a dataset ``map`` whose cache the others then read)."""
        state = self._state
        return state.local_main_process_first() if local else state.main_process_first()

    @property
    def max_checkpoint_shard_bytes(self) -> int:
        """``max_checkpoint_shard_size`` in bytes."""
        return _parse_size("max_checkpoint_shard_size", self.max_checkpoint_shard_size)

    def get_warmup_steps(self, num_training_steps: int) -> int:
        """Warmup steps for a run of ``num_training_steps`` optimizer steps.

        ``warmup_steps >= 1`` is used as is; otherwise the ratio is ``warmup_steps`` if it is in (0, 1), else
        ``warmup_ratio``, and the result is ``ceil(ratio * num_training_steps)``.
        """
        num_training_steps = _as_int("num_training_steps", num_training_steps, minimum=0)
        if self.warmup_steps >= 1:
            return int(self.warmup_steps)
        ratio = self.warmup_steps if self.warmup_steps > 0 else self.warmup_ratio
        return math.ceil(ratio * num_training_steps)

    def resolve_steps(self, value: float, num_training_steps: int) -> int:
        """A ``*_steps`` value as a step count: ints (>= 1) as is, ratios in (0, 1) as ``ceil(ratio * total)``.

        A ratio always gives at least 1 step.
        """
        num_training_steps = _as_int("num_training_steps", num_training_steps, minimum=0)
        steps = _as_steps("value", value, allow_zero=False)
        if steps >= 1:
            return int(steps)
        return max(1, math.ceil(steps * num_training_steps))

    def to_dict(self) -> dict[str, Any]:
        """The public fields as a JSON-safe dict (enums as their string values; Hub tokens as placeholders)."""
        return _args_legacy.redact(
            {
                f.name: _jsonable(getattr(self, f.name))
                for f in sorted(
                    dataclasses.fields(self), key=lambda f: f.kw_only is True
                )  # in __init__'s order
                if f.init and not f.name.startswith("_")
            }
        )

    def to_json_string(self, indent: int | None = 2) -> str:
        """``to_dict()`` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False) + "\n"

    def to_sanitized_dict(self) -> dict[str, bool | int | float | str]:
        """``to_dict()`` with every value a scalar (lists, dicts and None become strings), for hparams loggers."""
        return {
            key: value if isinstance(value, (bool, int, float, str)) else str(value)
            for key, value in self.to_dict().items()
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainingArguments:
        """Build (and validate) arguments from a dict such as ``to_dict()``'s; unknown keys raise ValueError."""
        if not isinstance(data, Mapping):
            raise ValueError(
                f"from_dict needs a dict of field values, got {type(data).__name__}; pass a dict."
            )
        known = [f.name for f in dataclasses.fields(cls) if f.init and not f.name.startswith("_")]
        unknown = [key for key in data if key not in known]
        if unknown:
            hints = []
            for key in unknown:
                close = difflib.get_close_matches(str(key), known, n=1)
                hints.append(f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key))
            raise ValueError(
                f"Unknown TrainingArguments field(s): {', '.join(hints)}; remove them. "
                f"Accepted fields: {', '.join(known)}."
            )
        return cls(**dict(data))

    def __repr__(self) -> str:
        body = ",\n".join(f"    {key}={value!r}" for key, value in self.to_dict().items())
        return f"{type(self).__name__}(\n{body}\n)"

    __str__ = __repr__
