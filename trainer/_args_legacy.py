"""transformers 4.x `TrainingArguments` names and the Hub options, resolved before the other fields are validated.

4.x names (``no_cuda``, ``per_gpu_*_batch_size``, ``adafactor``, ``fsdp_min_num_params``,
``fsdp_transformer_layer_cls_to_wrap``, ``torchdynamo``, ``push_to_hub_token``/``_organization``/``_model_id``) are
mapped onto the field that replaced them with a `FutureWarning`, as transformers 4.x did, then consumed (reset to
their default) so that a later ``replace`` of the new field is not overridden by the old one again. What cannot be
mapped is refused naming the replacement.

The Hub options (``hub_*``) only act when ``push_to_hub=True``, which is refused (no Hub here): without it
transformers ignores them too, so they are accepted, checked and inert. Their tokens never reach ``to_dict`` (and so
neither ``training_args.json``, the trackers nor ``repr``): `redact` replaces them.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._validation import _as_bool, _as_int, _fail

if TYPE_CHECKING:
    from ._training_args import TrainingArguments

HUB_STRATEGIES = ("end", "every_save", "checkpoint", "all_checkpoints")


@dataclass(kw_only=True)
class LegacyFields:
    """The `TrainingArguments` fields this module resolves (keyword-only: after the others in ``__init__``).

    Attributes:
        no_cuda, use_mps_device, per_gpu_train_batch_size, per_gpu_eval_batch_size, adafactor, fsdp_min_num_params,
            fsdp_transformer_layer_cls_to_wrap, torchdynamo, push_to_hub_model_id, push_to_hub_organization,
            push_to_hub_token: transformers 4.x names, mapped onto ``use_cpu``, ``per_device_*_batch_size``,
            ``optim="adafactor"``, ``fsdp_config``, ``torch_compile_backend``, ``hub_*`` with a FutureWarning (or
            refused naming the replacement), then reset to their defaults.
        hub_model_id, hub_strategy, hub_token, hub_private_repo, hub_always_push, hub_revision: checked and inert, as
            transformers leaves them without ``push_to_hub``; tokens are written as ``<HUB_TOKEN>``.
    """

    no_cuda: bool = False
    use_mps_device: bool = False
    per_gpu_train_batch_size: int | None = None
    per_gpu_eval_batch_size: int | None = None
    adafactor: bool = False
    fsdp_min_num_params: int = 0
    fsdp_transformer_layer_cls_to_wrap: str | None = None
    torchdynamo: str | None = None
    push_to_hub_model_id: str | None = None
    push_to_hub_organization: str | None = None
    push_to_hub_token: str | None = None
    hub_model_id: str | None = None
    hub_strategy: str = "every_save"
    hub_token: str | None = None
    hub_private_repo: bool | None = None
    hub_always_push: bool = False
    hub_revision: str | None = None

    @property
    def place_model_on_device(self) -> bool | None:
        """transformers' hook for a subclass: None lets the trainer decide; a subclass answering True or False must
        agree with `Trainer.place_model_on_device` (accelerate's rule), which the Trainer checks when it is built."""
        return None


SECRET_FIELDS = ("hub_token", "push_to_hub_token")


def _warn(old: str, new: str) -> None:
    warnings.warn(
        f"{old} is deprecated (transformers 4.x; removed in 5); pass {new} instead.",
        FutureWarning,
        stacklevel=5,
    )


def resolve(args: TrainingArguments) -> None:
    """Map every 4.x name set to a non-default value onto its replacement, then reset it."""
    _devices(args)
    for kind in ("train", "eval"):
        old = f"per_gpu_{kind}_batch_size"
        value = getattr(args, old)
        if value is not None:
            _move(args, old, f"per_device_{kind}_batch_size", _as_int(old, value, minimum=1))
            setattr(args, old, None)
    if _as_bool("adafactor", args.adafactor):
        _move(args, "adafactor", "optim", "adafactor", shown=True)
        args.adafactor = False
    if args.torchdynamo is not None:
        if not isinstance(args.torchdynamo, str) or not args.torchdynamo:
            _fail(
                "torchdynamo",
                args.torchdynamo,
                "a backend name or None",
                "pass torch_compile_backend='inductor'",
            )
        _move(
            args, "torchdynamo", "torch_compile_backend", args.torchdynamo
        )  # a backend implies torch_compile
        args.torchdynamo = None
    _fsdp_wrapping(args)
    _hub(args)


def _move(args: TrainingArguments, old: str, new: str, value: Any, shown: Any = None) -> None:
    """``new = value`` for the 4.x field ``old`` (given as ``shown``, else ``value``), as transformers 4.x did: the old
    name wins, and the warning says so when it replaces another value of the new one."""
    import dataclasses

    current = getattr(args, new)
    default = {f.name: f.default for f in dataclasses.fields(args)}.get(new)
    replaced = (
        ""
        if current in (value, default, None)
        else f" (it replaces {new}={getattr(current, 'value', current)!r})"
    )
    warnings.warn(
        f"{old}={value if shown is None else shown!r} is deprecated (transformers 4.x; removed in 5); pass "
        f"{new}={value!r} instead{replaced}.",
        FutureWarning,
        stacklevel=5,
    )
    setattr(args, new, value)


def _devices(args: TrainingArguments) -> None:
    if _as_bool("no_cuda", args.no_cuda):
        _warn("no_cuda=True", "use_cpu=True")
        args.use_cpu = True
        args.no_cuda = False
    if _as_bool("use_mps_device", args.use_mps_device):
        import torch

        if not torch.backends.mps.is_available():
            raise ValueError(
                "use_mps_device=True asks for Apple's MPS device, which this machine does not have (and transformers "
                "4.x deprecated the flag: the MPS device is used by default where it exists); remove use_mps_device, "
                "or pass use_cpu=True to train on the CPU."
            )
        _warn("use_mps_device=True", "nothing (the MPS device is used by default where it exists)")
        args.use_mps_device = False


def _fsdp_wrapping(args: TrainingArguments) -> None:
    """``fsdp_min_num_params`` and ``fsdp_transformer_layer_cls_to_wrap`` into ``fsdp_config``, as 4.x moved them."""
    moved: dict[str, Any] = {}
    minimum = _as_int("fsdp_min_num_params", args.fsdp_min_num_params, minimum=0)
    if minimum:
        moved["min_num_params"] = minimum
    layers = args.fsdp_transformer_layer_cls_to_wrap
    if layers is not None:
        if not (isinstance(layers, str) and layers) and not (isinstance(layers, list) and layers):
            _fail(
                "fsdp_transformer_layer_cls_to_wrap",
                layers,
                "a class name (or a comma-separated list) or None",
                "pass fsdp_config={'transformer_layer_cls_to_wrap': ['BertLayer']}",
            )
        moved["transformer_layer_cls_to_wrap"] = layers
    if not moved:
        return
    from ._fsdp import _config

    config = _config(args.fsdp_config)  # a dict with fsdp_ prefixes removed; a JSON path is read
    for key, value in moved.items():
        _warn(f"fsdp_{key}={value!r}", f"fsdp_config={{'{key}': {value!r}}}")
        if key in config and config[key] != value:
            raise ValueError(
                f"fsdp_{key}={value!r} and fsdp_config[{key!r}]={config[key]!r} disagree; pass only fsdp_config."
            )
        config[key] = value
    args.fsdp_config = config
    args.fsdp_min_num_params = 0
    args.fsdp_transformer_layer_cls_to_wrap = None


def _hub(args: TrainingArguments) -> None:
    """The Hub options: type-checked and inert (push_to_hub=True is refused in `_args_compat`)."""
    if args.push_to_hub_token is not None:
        _warn("push_to_hub_token", "hub_token")
        args.hub_token = args.push_to_hub_token
        args.push_to_hub_token = None
    organization, model_id = args.push_to_hub_organization, args.push_to_hub_model_id
    if model_id is not None and organization is None:
        raise ValueError(
            f"push_to_hub_model_id={model_id!r} without push_to_hub_organization: transformers 4.x then asks the Hub "
            "for your user name to build hub_model_id, and this trainer does not contact the Hub; pass "
            f"hub_model_id='<user>/{model_id}' instead (inert without push_to_hub, which is not supported)."
        )
    if organization is not None:
        name = model_id if model_id is not None else os.path.basename(os.path.normpath(str(args.output_dir)))
        _warn("push_to_hub_organization" + ("/push_to_hub_model_id" if model_id else ""), "hub_model_id")
        args.hub_model_id = f"{organization}/{name}"
        args.push_to_hub_organization = args.push_to_hub_model_id = None
    for name in ("hub_model_id", "hub_token", "hub_revision"):
        value = getattr(args, name)
        if value is not None and (not isinstance(value, str) or not value):
            _fail(
                name, "<hidden>" if name == "hub_token" else value, "a non-empty string or None", "pass one"
            )
    strategy = str(getattr(args.hub_strategy, "value", args.hub_strategy)).strip().lower()
    if strategy not in HUB_STRATEGIES:
        _fail(
            "hub_strategy",
            args.hub_strategy,
            f"one of {', '.join(map(repr, HUB_STRATEGIES))}",
            "pass one of those",
        )
    args.hub_strategy = strategy
    args.hub_private_repo = _as_bool("hub_private_repo", args.hub_private_repo, allow_none=True)
    args.hub_always_push = _as_bool("hub_always_push", args.hub_always_push)


def without_secrets(args: TrainingArguments) -> TrainingArguments:
    """A shallow copy of ``args`` whose tokens are placeholders: what ``training_args.bin`` pickles."""
    import copy

    clone = copy.copy(args)
    for name, value in redact({name: getattr(args, name) for name in SECRET_FIELDS}).items():
        object.__setattr__(clone, name, value)
    return clone


def redact(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` (a ``to_dict``) with each set token replaced by a placeholder, as transformers writes them."""
    for name in SECRET_FIELDS:
        if values.get(name) is not None:
            values[name] = f"<{name.upper()}>"
    return values
