"""Parameter application, shared by every backend: which parameters are arguments, and the trial's arguments.

A space's parameters are either `TrainingArguments` fields (replaced in the trial's arguments, with their values
coerced to the field's type) or read by ``model_init(trial)``. Both portable spaces (checked before any trial)
and native ones (checked on the values they give) go through `check_param_names` and `check_argument_values`.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .errors import SearchConfigError

if TYPE_CHECKING:
    from spaces import SearchSpace
    from trainer import Trainer, TrainingArguments

__all__ = [
    "RESERVED_PARAMS",
    "argument_fields",
    "argument_types",
    "build_trial_args",
    "check_argument_values",
    "check_epochs_not_ignored",
    "check_param_names",
    "check_space_against_trainer",
    "domain_values",
]

# Arguments the search sets per trial itself: a space may not choose them.
RESERVED_PARAMS = frozenset({"output_dir", "logging_dir", "run_name", "overwrite_output_dir"})


def argument_types(cls: type | None = None) -> dict[str, Any]:
    """Field name -> type hint of a `TrainingArguments` class (default the base; a trainer's own subclass such as
    `Seq2SeqTrainingArguments` adds its fields)."""
    if cls is None:
        from trainer import TrainingArguments

        cls = TrainingArguments
    return _argument_types(cls)


@functools.lru_cache(maxsize=8)
def _argument_types(cls: Any) -> dict[str, Any]:
    # Cached: resolving the hints took ~2 ms a trial.
    hints = typing.get_type_hints(cls)
    return {
        f.name: hints.get(f.name) for f in dataclasses.fields(cls) if f.init and not f.name.startswith("_")
    }


def argument_fields(cls: type | None = None) -> set[str]:
    return set(argument_types(cls))


def _coerce(name: str, value: Any, hint: Any) -> Any:
    """Make a sampled value fit the argument's type (an Int 3 for a float field, 4.0 for an int field)."""
    args = typing.get_args(hint)
    base = {t for t in (args or (hint,)) if t is not type(None)}
    if isinstance(value, bool) or value is None:
        return value
    if int in base and float not in base and isinstance(value, float):
        if not value.is_integer():
            raise SearchConfigError(
                f"Parameter {name!r} is an integer argument of TrainingArguments, but the space gave {value!r}; "
                "use spaces.Int for it."
            )
        return int(value)
    if float in base and isinstance(value, int):
        return float(value)
    if hasattr(value, "item") and not isinstance(value, str):  # numpy scalars
        return value.item()
    return value


def check_param_names(names: Iterable[Any], trainer: Trainer) -> None:
    """Every parameter must be a `TrainingArguments` field or reachable by ``model_init(trial)``, and none reserved."""
    fields = argument_fields(type(trainer.args))
    takes_trial = trainer.model_init_takes_trial
    for name in names:
        if not isinstance(name, str):
            raise SearchConfigError(f"hp_space keys must be parameter names (str), got {name!r}.")
        if name in RESERVED_PARAMS:
            raise SearchConfigError(
                f"hp_space parameter {name!r} is reserved: the search sets it for every trial "
                f"(reserved: {sorted(RESERVED_PARAMS)}); rename the parameter (rename it e.g. to {name + '_'!r}).",
                about=("hp_space", name),
            )
        if name not in fields and not takes_trial:
            raise SearchConfigError(
                f"hp_space parameter {name!r} is not a TrainingArguments field and model_init takes no trial, so "
                f"nothing would use it; give model_init a `trial` parameter and read trial[{name!r}], or remove it.",
                about=("hp_space", name),
            )


def check_epochs_not_ignored(names: Iterable[Any], trainer: Trainer) -> None:
    """A space that searches num_train_epochs needs the trainer's max_steps unset (or searched too): max_steps
    decides how long a trial trains, and the searched epochs would change nothing."""
    names = set(names)
    if "num_train_epochs" in names and "max_steps" not in names and trainer.args.max_steps > 0:
        raise SearchConfigError(
            f"hp_space searches num_train_epochs, but max_steps={trainer.args.max_steps} decides how long every "
            "trial trains (num_train_epochs is then ignored, as in transformers); set max_steps=-1 to search the "
            "epochs, or remove num_train_epochs from hp_space.",
            about=("hp_space", "num_train_epochs"),
        )


def build_trial_args(
    base: TrainingArguments, params: Mapping[str, Any], output_dir: str, run_name: str
) -> TrainingArguments:
    """The trial's arguments: ``base`` with every parameter that names an argument replaced (re-validated)."""
    types = argument_types(type(base))
    overrides = {
        k: _coerce(k, v, types[k]) for k, v in params.items() if k in types and k not in RESERVED_PARAMS
    }
    overrides["output_dir"] = output_dir
    overrides["run_name"] = run_name
    return base.replace(**overrides)  # re-checks only what changed where that is enough


def domain_values(domain: Any) -> list[Any]:
    """The values a domain is checked with: a number's bounds, every choice, a fixed value."""
    from spaces import Categorical, Fixed, Float, Int

    if isinstance(domain, Float | Int):
        return [domain.low, domain.high]
    if isinstance(domain, Categorical):
        return list(domain.choices)
    if isinstance(domain, Fixed):
        return [domain.value]
    return []


#: Arguments whose value must be positive for a trial to train at all (0 epochs trains nothing).
_POSITIVE = frozenset({"num_train_epochs"})
#: Arguments whose (truthy) values need a trial trained by several processes: known before training.
_NEEDS_PROCESSES = frozenset({"fsdp"})


def check_space_against_trainer(space: SearchSpace, trainer: Trainer, processes: int | None = None) -> None:
    """Every parameter must be an argument (with valid values at its bounds, usable by a trial of ``processes``
    processes: default this process's world size) or reachable by ``model_init(trial)``."""
    from spaces import Float

    from ._dist import world_size

    processes = world_size() if processes is None else processes

    check_param_names(space, trainer)
    types = argument_types(type(trainer.args))
    for name in space:
        if name not in types:
            continue
        domain = space[name]
        base = {t for t in (typing.get_args(types[name]) or (types[name],)) if t is not type(None)}
        if isinstance(domain, Float) and base == {int}:
            raise SearchConfigError(
                f"hp_space parameter {name!r} is {domain!r}, a Float domain, but TrainingArguments.{name} is an "
                f"integer; use spaces.Int({int(domain.low)}, {int(domain.high)}) (or Categorical of integers).",
                about=("hp_space", name),
            )
        if name in _POSITIVE and not (name == "num_train_epochs" and trainer.args.max_steps > 0):
            low = min(
                (v for v in domain_values(domain) if isinstance(v, int | float) and not isinstance(v, bool)),
                default=None,
            )
            if low is not None and low <= 0:
                raise SearchConfigError(
                    f"hp_space parameter {name!r} can take {low!r}, but a trial needs {name} > 0 to train; start "
                    f"the domain above 0 (e.g. {type(domain).__name__}(1, ...)), or set max_steps.",
                    about=("hp_space", name),
                )
        check_argument_values(name, domain_values(domain), trainer, processes)


def check_argument_values(
    name: str, values: Iterable[Any], trainer: Trainer, processes: int | None = None
) -> None:
    """Every one of ``values`` that parameter ``name`` can take must be a value its `TrainingArguments` field takes
    (and usable by a trial of ``processes`` processes); a name that is no argument is not checked here."""
    from ._dist import world_size

    if name not in argument_types(type(trainer.args)):
        return
    processes = world_size() if processes is None else processes
    for value in values:
        try:
            build_trial_args(trainer.args, {name: value}, trainer.args.output_dir, "probe")
        except (ValueError, TypeError) as error:
            raise SearchConfigError(
                f"hp_space parameter {name!r} can take {value!r}, which TrainingArguments rejects: {error}",
                about=("hp_space", name),
            ) from error
        if name in _NEEDS_PROCESSES and value and processes < 2:
            raise SearchConfigError(
                f"hp_space parameter {name!r} can take {value!r}, but {name}={value!r} needs a trial trained by "
                "several processes (`accelerate launch`/torchrun, or an engine's workers_per_trial) and this search "
                f"trains each trial in one process, so every such trial would fail; remove {value!r} from the "
                "domain, or launch the search that way.",
                about=("hp_space", name),
            )
