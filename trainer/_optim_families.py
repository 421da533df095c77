"""The optimizers LLM fine-tuning scripts name in ``optim`` beyond torch's: bitsandbytes' 8-bit/32-bit/paged AdamW,
Lion, RMSprop and AdEMAMix, schedule-free AdamW/SGD/RAdam, GaLore (with ``optim_target_modules``), and transformers
4's ``adamw_hf``; each built from its real library as transformers' Trainer builds it. The names this trainer
cannot run are refused with what is missing (`REFUSED`), when the arguments are validated.
"""

from __future__ import annotations

import importlib.util
import re
import warnings
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    from ._training_args import TrainingArguments

__all__ = [
    "BNB",
    "FAMILIES",
    "GALORE",
    "NEEDS_CUDA",
    "REFUSED",
    "SCHEDULE_FREE",
    "check_optim",
    "family_cls_and_kwargs",
    "galore_groups",
    "own_options",
]

# bitsandbytes (its CPU backend runs them here; "paged" memory only differs on a CUDA device).
BNB = (
    "adamw_bnb_8bit",
    "adamw_8bit",
    "paged_adamw_32bit",
    "paged_adamw_8bit",
    "lion_8bit",
    "lion_32bit",
    "paged_lion_32bit",
    "paged_lion_8bit",
    "rmsprop_bnb",
    "rmsprop_bnb_8bit",
    "rmsprop_bnb_32bit",
    "ademamix",
    "ademamix_8bit",
    "paged_ademamix_32bit",
    "paged_ademamix_8bit",
)
SCHEDULE_FREE = ("schedule_free_adamw", "schedule_free_sgd", "schedule_free_radam")
GALORE = ("galore_adamw", "galore_adamw_8bit", "galore_adafactor")
FAMILIES = BNB + SCHEDULE_FREE + GALORE
_LIBRARY = {
    **dict.fromkeys(BNB, "bitsandbytes"),
    **dict.fromkeys(SCHEDULE_FREE, "schedulefree"),
    **dict.fromkeys(GALORE, "galore_torch"),
}
_PIP = {"bitsandbytes": "bitsandbytes", "schedulefree": "schedulefree", "galore_torch": "galore-torch"}

_LAYERWISE = (
    "steps each parameter inside its backward hook (no gradient accumulation, clipping or one optimizer "
    "step), which this loop does not run"
)
REFUSED: dict[str, str] = {
    "adamw_anyprecision": "needs torchdistx's AnyPrecisionAdamW, and torchdistx has no release for this torch on "
    "PyPI; use 'adamw_torch' (with bf16=True for bf16 training)",
    "galore_adamw_layerwise": f"layer-wise GaLore {_LAYERWISE}; use 'galore_adamw'",
    "galore_adamw_8bit_layerwise": f"layer-wise GaLore {_LAYERWISE}; use 'galore_adamw_8bit'",
    "galore_adafactor_layerwise": f"layer-wise GaLore {_LAYERWISE}; use 'galore_adafactor'",
    "apollo_adamw": "needs apollo-torch (not installed; it is not on the package index this project installs from); "
    "use 'galore_adamw' for a low-rank optimizer",
    "apollo_adamw_layerwise": f"needs apollo-torch, and layer-wise APOLLO {_LAYERWISE}",
    "lomo": "LOMO fuses the update into backward (its own training step, no optimizer.step); not supported by this "
    "loop; use 'adamw_8bit' or 'galore_adamw' to save optimizer memory",
    "adalomo": "AdaLomo fuses the update into backward (its own training step); not supported by this loop",
    "grokadamw": "needs grokadamw (not installed: `pip install grokadamw`), which this project does not ship",
    "stable_adamw": "needs torch-optimi (not installed: `pip install torch-optimi`), which this project does not ship",
    "adamw_torch_4bit": "needs torchao's low-bit optimizers (torchao is not installed, and they target CUDA); use "
    "'adamw_8bit' (bitsandbytes, runs on the CPU too)",
    "adamw_torch_8bit": "needs torchao's low-bit optimizers (torchao is not installed, and they target CUDA); use "
    "'adamw_8bit' (bitsandbytes, runs on the CPU too)",
    "adamw_torch_xla": "needs a TPU and torch_xla; use 'adamw_torch'",
    "adamw_torch_npu_fused": "needs an Ascend NPU and torch_npu; use 'adamw_torch'",
}

# Run from their libraries only on a CUDA GPU.
NEEDS_CUDA: dict[str, str] = {
    "galore_adamw_8bit": "runs galore-torch's GaLoreAdamW8bit, whose projection step calls CUDA; use 'galore_adamw' on "
    "the CPU",
}


def check_optim(args: TrainingArguments) -> None:
    """Refuse an ``optim`` this trainer cannot run (naming what is missing) and ``optim_target_modules`` without an
    optimizer that reads it; warn for ``adamw_hf``."""
    optim = str(getattr(args.optim, "value", args.optim))
    if optim in REFUSED:
        raise ValueError(f"optim={optim!r} is not supported: it {REFUSED[optim]}.")
    if optim in NEEDS_CUDA and not torch.cuda.is_available():
        raise ValueError(
            f"optim={optim!r} is not supported here: it {NEEDS_CUDA[optim]}, and no CUDA GPU is visible."
        )
    library = _LIBRARY.get(optim)
    if library is not None and importlib.util.find_spec(library) is None:
        raise ImportError(
            f"optim={optim!r} needs {library}, which is not installed; run `pip install {_PIP[library]}` "
            "(or `pip install 'hpsearch[optimizers]'`), or pass optim='adamw_torch'."
        )
    if args.optim_target_modules is not None and optim not in GALORE:
        raise ValueError(
            f"optim_target_modules={args.optim_target_modules!r} is only read by the GaLore optimizers {GALORE}, but "
            f"optim={optim!r}; remove it or pick one of those."
        )
    if optim in GALORE and args.optim_target_modules is None:
        raise ValueError(
            f"optim={optim!r} needs optim_target_modules: the linear layers it projects (a list of module-name "
            "parts, a regular expression, or 'all-linear'); pass e.g. optim_target_modules=['attn', 'mlp']."
        )
    if optim == "adamw_hf":
        warnings.warn(
            "optim='adamw_hf' (transformers 4's own AdamW, removed in transformers 5) runs torch's AdamW: its eps is "
            "added to the bias-corrected second moment (transformers' added eps before the correction, so an eps "
            "larger by 1/sqrt(1 - beta2^step) early on). Pass optim='adamw_torch'.",
            FutureWarning,
            stacklevel=3,
        )


def family_cls_and_kwargs(
    optim: str, args: TrainingArguments, adam: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """The class and keyword arguments (besides lr and optim_args) of a bitsandbytes, schedule-free or GaLore
    optimizer, as transformers' Trainer builds them. ``adam``: the betas and eps of the Adam settings."""
    if optim in BNB:
        return _bnb(optim, args, adam)
    if optim in SCHEDULE_FREE:
        import schedulefree

        kwargs: dict[str, Any] = {"weight_decay": args.weight_decay}
        if optim == "schedule_free_sgd":
            return schedulefree.SGDScheduleFree, {**kwargs, "warmup_steps": args.warmup_steps}
        if optim == "schedule_free_adamw":
            return schedulefree.AdamWScheduleFree, {**kwargs, **adam, "warmup_steps": args.warmup_steps}
        return schedulefree.RAdamScheduleFree, {**kwargs, **adam}
    import galore_torch

    classes = {
        "galore_adamw": galore_torch.GaLoreAdamW,
        "galore_adamw_8bit": galore_torch.GaLoreAdamW8bit,
        "galore_adafactor": galore_torch.GaLoreAdafactor,
    }
    if optim == "galore_adafactor":
        return classes[optim], {"scale_parameter": False, "relative_step": False}
    return classes[optim], dict(adam)


def _bnb(optim: str, args: TrainingArguments, adam: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    from bitsandbytes import optim as bnb

    kwargs: dict[str, Any] = {"optim_bits": 8 if "8bit" in optim else 32}
    if "rmsprop" not in optim:
        kwargs["is_paged"] = "paged" in optim
    if "ademamix" in optim:
        return bnb.AdEMAMix, {**kwargs, "betas": (*adam["betas"], 0.9999), "eps": adam["eps"]}
    if "lion" in optim:
        return bnb.Lion, {**kwargs, "betas": adam["betas"]}
    if "rmsprop" in optim:
        return bnb.RMSprop, kwargs
    return bnb.AdamW, {**kwargs, **adam}


_GALORE_OPTIONS = {
    "rank": (int, 128),
    "update_proj_gap": (int, 200),
    "scale": (float, 0.25),
    "proj_type": (str, "std"),
}


def own_options(optim: str) -> tuple[str, ...]:
    """``optim_args`` keys an optimizer family reads besides its class's constructor (GaLore's projection)."""
    return tuple(_GALORE_OPTIONS) if optim in GALORE else ()


def galore_groups(model: nn.Module, args: TrainingArguments, options: dict[str, Any]) -> list[dict[str, Any]]:
    """GaLore's two parameter groups: the weights of the targeted linear layers (with GaLore's rank,
    update_proj_gap, scale and proj_type, taken out of ``options``) and every other trainable parameter."""
    targets = args.optim_target_modules
    galore = {key: kind(options.pop(key, default)) for key, (kind, default) in _GALORE_OPTIONS.items()}
    names = {
        f"{name}.weight"
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and _targeted(name, targets)
    }
    if not names:
        raise ValueError(
            f"optim_target_modules={targets!r} matches no nn.Linear module of {type(model).__name__}; pass parts of "
            "its linear layers' names (model.named_modules()), a regular expression, or 'all-linear'."
        )
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    return [
        {"params": [p for n, p in trainable if n not in names], "weight_decay": args.weight_decay},
        {"params": [p for n, p in trainable if n in names], "weight_decay": args.weight_decay, **galore},
    ]


def _targeted(name: str, targets: str | list[str] | None) -> bool:
    if isinstance(targets, str):
        return targets.replace("_", "-") == "all-linear" or re.fullmatch(targets, name) is not None
    return any(target in name for target in targets or ())
