"""The sweep file of ``hpsearch run``: its schema, declared once, and the checks that turn it into a `SweepConfig`.

A sweep file names everything by import path, so the command needs no Python glue::

    model: examples.digits.model:model_init        # model factory (takes the trial if it has a parameter)
    data: examples.digits.model:datasets           # returns (train_dataset, eval_dataset)
    metrics: examples.digits.model:compute_metrics # optional compute_metrics
    objective: eval_accuracy                       # a metric name, a list of them, or module:function
    direction: maximize
    n_trials: 30
    output_dir: output                             # relative to this file; --output-dir overrides
    training_args: {num_train_epochs: 10, eval_strategy: epoch, ...}
    space: {learning_rate: {type: float, low: 1.0e-4, high: 0.3, log: true}, ...}
    backend: <name>                                # a registered backend; default: the first installed one
    backend_options:                               # what hyperparameter_search(**kwargs) takes for that backend
      sampler: {name: <Class>, seed: 0}             # {name: Class, **kwargs}: built from the option's modules
      storage: sqlite:///{output_dir}/study.db     # {output_dir} is replaced by the output folder
      trial_timeout: 600                           # the options every backend takes are here too

The top-level keys are the `SweepFile` model. ``training_args`` is checked against the fields of
`trainer.TrainingArguments`, and ``backend_options`` against the model `options_model` builds from the registry
(`SearchBackend.all_options`: the common options and the backend's own, each checked by its one declaration,
`hpsearch.options.Option`), so the file accepts exactly what `hyperparameter_search` accepts and refuses a value
with the same message. Every problem is a `ConfigError`
``file:line: key: message``, the line taken from the YAML node marks; the YAML itself is read with bounded alias
expansion, no recursive aliases and no duplicate keys (`hpsearch._yaml`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import logging
import os
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    create_model,
)

from . import _yaml
from ._sweep_errors import ConfigError, Lines, combine, located, show, unknown_key, validate
from ._sweep_resolve import (
    Problem,
    build_object,
    build_space,
    check_training_args,
    drop_other_backend_options,
    import_object,
    import_path,
    objective,
    resolve_path,
    substitute,
)
from .backends import backend_names, get_backend, resolve_backend
from .errors import BackendNotAvailable, HPSearchError, SearchConfigError
from .options import N_TRIALS
from .settings import COMMON_OPTIONS, Option

if TYPE_CHECKING:
    from .backends.base import SearchBackend

__all__ = ["KEYS", "ConfigError", "SweepConfig", "SweepFile", "load_sweep", "options_model"]

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------- the schema
def _key(what: str, expected: str, example: str | None = None, **kwargs: Any) -> Any:
    """A top-level key: what it is (docs, missing-key errors), what a value must be, and an example line."""
    extra: dict[str, Any] = {"expected": expected}
    if example is not None:
        extra["example"] = example
    return Field(description=what, json_schema_extra=extra, **kwargs)


def _known_backend(name: str) -> str:
    names = backend_names()
    if name.lower() in names:  # in any case, as hyperparameter_search(backend=...) takes it
        return name.lower()
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ValueError(f"unknown backend {name!r}; {hint}use one of {', '.join(names)}.")


_ImportPath = Annotated[StrictStr, Field(pattern=r"^[^:\s]+:[^:\s]+$")]
_Metric = Annotated[StrictStr, Field(min_length=1)]
_Direction = Annotated[StrictStr, Field(pattern=r"(?i)^(minimize|maximize|min|max)$")]
#: Checked by its one declaration, as `hyperparameter_search` checks it (same message).
_NTrials = Annotated[Any, AfterValidator(N_TRIALS.check)]


class _SweepKeys(BaseModel):
    """The top-level keys of a sweep file of its own (`SweepFile` adds the options every backend takes)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: _ImportPath = _key(
        "the model factory, as module:function",
        "an import path 'module:function'",
        "model: examples.digits.model:model_init",
    )
    data: _ImportPath = _key(
        "the data factory returning (train_dataset, eval_dataset)",
        "an import path 'module:function'",
        "data: examples.digits.model:datasets",
    )
    metrics: _ImportPath | None = _key(
        "compute_metrics, as module:function",
        "an import path 'module:function'",
        "metrics: examples.digits.model:compute_metrics",
        default=None,
    )
    processing_class: _ImportPath | None = _key(
        "the tokenizer or processor (Trainer's processing_class): an object, or a function or class called with no "
        "arguments that returns it",
        "an import path 'module:attr'",
        "processing_class: my_task.text:tokenizer",
        default=None,
    )
    data_collator: _ImportPath | None = _key(
        "the data collator: a collate function or object used as it is, or a class built with the processing_class "
        "(e.g. transformers:DataCollatorWithPadding)",
        "an import path 'module:attr'",
        "data_collator: transformers:DataCollatorWithPadding",
        default=None,
    )
    trainer: _ImportPath | None = _key(
        "the trainer factory: a trainer.Trainer subclass, or a function taking Trainer's keyword arguments (model_init, "
        "args, train_dataset, eval_dataset, compute_metrics, data_collator, processing_class) that returns a Trainer",
        "an import path 'module:attr'",
        "trainer: my_task.train:make_trainer",
        default=None,
    )
    objective: _Metric | Annotated[list[_Metric], Field(min_length=1)] | None = _key(
        "a metric name, a list of names, or module:function",
        "a metric name (e.g. eval_accuracy), a list of metric names (several objectives) or 'module:function'",
        "objective: eval_accuracy",
        default=None,
    )
    direction: _Direction | Annotated[list[_Direction], Field(min_length=1)] = _key(
        "minimize or maximize (or a list, one per objective)",
        "'minimize' or 'maximize' (or a list of them, one per objective)",
        "direction: maximize",
        default="minimize",
    )
    n_trials: _NTrials = _key(N_TRIALS.help, N_TRIALS.expected(), default=N_TRIALS.default)
    output_dir: Annotated[StrictStr, Field(min_length=1)] | None = _key(
        "where results go, relative to the sweep file", "a folder path", "output_dir: output", default=None
    )
    training_args: dict[str, Any] | None = _key(
        "TrainingArguments fields",
        "a mapping of TrainingArguments fields",
        "training_args: {num_train_epochs: 3, eval_strategy: epoch}",
        default=None,
    )
    space: Annotated[dict[str, Any], Field(min_length=1)] = _key(
        "the search space (portable spaces.SearchSpace form)",
        "a non-empty mapping of parameter names to domains",
        "space: {learning_rate: {type: float, low: 1.0e-5, high: 1.0e-3, log: true}}",
    )
    backend: Annotated[StrictStr, AfterValidator(_known_backend)] | None = _key(
        "the search backend (default: the first one installed)",
        "a backend name",
        f"backend: {backend_names()[0]}",
        default=None,
    )
    backend_options: dict[str, Any] | None = _key(
        "keyword arguments of hyperparameter_search for the backend",
        "a mapping of keyword arguments for the backend",
        "backend_options: {max_failed_trials: 5}",
        default=None,
    )
    torch_threads: Annotated[StrictInt, Field(ge=1, le=4096)] | None = _key(
        "torch intra-op threads (1 is fastest for tiny models on a busy machine)",
        "an integer from 1 to 4096",
        default=None,
    )


def _option_type(option: Option) -> Any:
    """The type of an option's key: any value, checked by the option's own declaration (`Option.check`, so the file
    is refused with the message `hyperparameter_search` gives) and kept as written."""
    return Annotated[Any, AfterValidator(_checked(option))]


def _checked(option: Option) -> Callable[[Any], Any]:
    def validate(value: Any) -> Any:
        if option.build_from and value is not None:
            # A file cannot hold an object, so an option built from modules takes {name: Class, ...} there instead.
            if not isinstance(value, dict):
                raise ValueError(f"expected {_option_expected(option)}, got {show(value)}.")
            return value
        option.check(value)
        return value

    return validate


def _option_expected(option: Option) -> str:
    words = (
        [f"{{name: Class, ...}} naming a class of {' or '.join(option.build_from)}"]
        if option.build_from
        else []
    )
    # What the file may hold besides the spec (a file cannot hold an object), with the declared bounds and choices.
    plain = dataclasses.replace(
        option, types=tuple(t for t in option.types if not (t is object and option.build_from)), classes=()
    )
    if plain.types:
        words.append(plain.expected())
    return f"{' or '.join(words)}, or null for the default ({option.help})"


def _common_key(option: Option) -> Any:
    """The top-level key of an option every backend takes (it may be given under backend_options instead)."""
    return (_option_type(option), _key(option.help, _option_expected(option), default=None))


#: The top-level keys: the sweep's own, then the options every backend takes (also accepted under backend_options).
SweepFile: type[_SweepKeys] = create_model(
    "SweepFile",
    __base__=_SweepKeys,
    **{name: _common_key(option) for name, option in COMMON_OPTIONS.items()},  # type: ignore[call-overload]
)

#: The top-level keys, in order.
KEYS: tuple[str, ...] = tuple(SweepFile.model_fields)


def options_model(backend: str) -> type[BaseModel]:
    """The schema of ``backend_options`` for ``backend``: every keyword argument `hyperparameter_search` accepts
    for it (`SearchBackend.all_options`), checked by `Option.check`; None is always allowed (the default)."""
    return _options_model(get_backend(backend))


def _options_model(backend_cls: type[SearchBackend]) -> type[BaseModel]:
    return _build_options_model(backend_cls.__name__, tuple(backend_cls.all_options().values()))


@cache  # by the options themselves, so that a backend whose options change gets a new model
def _build_options_model(title: str, options: tuple[Option, ...]) -> type[BaseModel]:
    # An option named like a BaseModel attribute (``copy``, ``validate``) gets another field name and its own alias.
    fields: dict[str, Any] = {
        (f"{name}_" if hasattr(BaseModel, name) else name): (
            _option_type(option),
            Field(default=None, alias=name),
        )
        for name, option in ((o.name, o) for o in options)
    }
    config = ConfigDict(extra="forbid", strict=True, protected_namespaces=(), arbitrary_types_allowed=True)
    return create_model(f"{title}Options", __config__=config, **fields)


@cache
def _training_args_model() -> type[BaseModel]:
    """The keys ``training_args`` may have (values are checked by `TrainingArguments` itself)."""
    from trainer import TrainingArguments

    names = [f.name for f in dataclasses.fields(TrainingArguments) if f.init and not f.name.startswith("_")]
    config = ConfigDict(extra="forbid", protected_namespaces=())
    fields: dict[str, Any] = {name: (Any, None) for name in names}
    return create_model("TrainingArgumentsKeys", __config__=config, **fields)


def _top_expected(name: str) -> tuple[str, str | None]:
    extra = SweepFile.model_fields[name].json_schema_extra
    assert isinstance(extra, dict)
    return str(extra["expected"]), extra.get("example")  # type: ignore[return-value]


def _top_unknown(key: str) -> str:
    close = difflib.get_close_matches(key, KEYS, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown key {key!r}; {hint}the keys are {', '.join(KEYS)}."


# ---------------------------------------------------------------------------------------------- the checked sweep
@dataclasses.dataclass
class SweepConfig:
    """A sweep file, checked and resolved (import paths imported, the space built, options instantiated)."""

    path: Path
    lines: Lines
    model: Callable[..., Any]
    data: Callable[[], Any]
    metrics: Callable[..., Any] | None
    objective: Any
    direction: str | list[str]
    n_trials: int
    output_dir: str
    training_args: dict[str, Any]
    space: Any
    backend: str
    backend_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    torch_threads: int | None = None
    processing_class: Any = (
        None  # what the file names (see `SweepFile.processing_class`), made by `build_trainer`
    )
    data_collator: Any = None
    trainer: Callable[..., Any] | None = None
    #: Whether backend_options name their store with {output_dir}: a fresh run may then replace an earlier one.
    owns_store: bool = False
    #: option -> (its ``{name: Class, ...}`` spec, the modules it is built from), to build it again.
    specs: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = dataclasses.field(default_factory=dict)

    def error(self, message: str, *keys: Any) -> ConfigError:
        return self.lines.error(message, *keys)

    def reseed(self, offset: int) -> list[str]:
        """Build every option with an integer ``seed`` again with ``seed + offset``; says what it did."""
        done = []
        for key, (spec, modules) in self.specs.items():
            seed = spec.get("seed")
            if isinstance(seed, int) and not isinstance(seed, bool):
                with located(self.lines):
                    self.backend_options[key] = build_object(
                        {**spec, "seed": seed + offset}, modules, "backend_options", key
                    )
                done.append(f"{key} seed {seed + offset}")
        return done


def _check_objective_count(sweep: _SweepKeys, lines: Lines) -> None:
    """One direction per objective (a module:function objective's count is known only when it runs)."""
    if isinstance(sweep.objective, str) and ":" in sweep.objective:
        return
    objectives = len(sweep.objective) if isinstance(sweep.objective, list) else 1
    directions = len(sweep.direction) if isinstance(sweep.direction, list) else 1
    if objectives != directions:
        raise lines.error(
            f"objective has {objectives} metric(s) but direction has {directions} entr{'y' if directions == 1 else 'ies'};"
            f" give one direction per objective, e.g. direction: {['maximize'] * objectives}.",
            "direction",
        )


def _read(path: Path) -> tuple[dict[str, Any], Lines]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"no such sweep file; check the path (current directory: {os.getcwd()}).", path=str(path)
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read the sweep file ({error}).", path=str(path)) from None
    try:
        data, root = _yaml.load(text)
    except _yaml.YAMLProblem as problem:
        raise ConfigError(problem.message, line=problem.line, path=str(path)) from None
    lines = Lines(str(path), root)
    if not isinstance(data, dict):
        example = "\n".join(
            f"  {_top_expected(k)[1]}" for k, f in SweepFile.model_fields.items() if f.is_required()
        )
        raise lines.error(f"a sweep file is a YAML mapping, got {show(data)}; start from e.g.\n{example}")
    for where, mapping in (((), data), (("backend_options",), data.get("backend_options"))):
        for key in mapping if isinstance(mapping, dict) else ():
            if key is None:  # `~:` or an empty key
                raise lines.error(
                    "a key must be a string, got null (`~` or nothing before the colon); write the "
                    "key's name, or remove the entry.",
                    *where,
                )
            if not isinstance(key, str):  # YAML reads `1:` as a number, which no key here is
                raise lines.error(
                    f'a key must be a string, got {show(key)}; quote it, e.g. "{key}", or remove it.',
                    *where,
                    str(key),
                )
    return data, lines


def _apply_override(data: dict[str, Any], lines: Lines, override: str | tuple[str, str]) -> None:
    """``KEY.PATH=VALUE`` into ``data``; a pair is (that override, the flag that gave it, e.g. ``--trial-workers``),
    which an error about the key names."""
    override, flag = override if isinstance(override, tuple) else (override, None)
    key, sep, text = override.partition("=")
    keys = tuple(k for k in key.strip().split("."))
    if not sep or not all(keys):
        raise ConfigError(
            f"--set {override!r}: expected KEY=VALUE with a dotted key, e.g. --set training_args.num_train_epochs=2."
        )
    try:
        value, _ = _yaml.load(text)
    except _yaml.YAMLProblem as problem:
        raise ConfigError(f"--set {override!r}: the value is not valid YAML ({problem.message})") from None
    target = data
    for i, part in enumerate(keys[:-1]):
        child = target.get(part)
        if child is None:
            child = target[part] = {}
        if not isinstance(child, dict):
            where = ".".join(keys[: i + 1])
            raise ConfigError(f"--set {override!r}: {where} is a {type(child).__name__}, not a mapping.")
        target = child
    target[keys[-1]] = value
    lines.overridden[keys] = flag or f"--set {'.'.join(keys)}=..."


def _backend(name: str | None, lines: Lines) -> type[SearchBackend]:
    try:
        if name is None:
            return resolve_backend(None)
        backend_cls = get_backend(name)
        backend_cls.ensure_available()
    except (SearchConfigError, BackendNotAvailable) as error:
        raise lines.error(str(error), "backend") from None
    except ImportError as error:  # the adapter module itself does not import: say so, not a traceback
        raise lines.error(
            f"the {name} backend cannot be loaded ({error}); reinstall hpsearch or use another backend.",
            "backend",
        ) from None
    return backend_cls


def _output_dir(sweep: _SweepKeys, lines: Lines, config_dir: Path, override: str | None) -> str:
    top = sweep.output_dir
    nested = (sweep.training_args or {}).get("output_dir")
    if top is not None and nested is not None and top != nested:
        raise lines.error(
            f"output_dir is given twice ({top!r} here and training_args.output_dir={nested!r}); keep one.",
            "training_args",
            "output_dir",
        )
    chosen, key = (top, ("output_dir",)) if top is not None else (nested, ("training_args", "output_dir"))
    if override is not None:
        lines.overridden[("output_dir",)] = "--output-dir"  # an error about it names the flag, not a line
        return os.path.abspath(override)  # a command-line path is relative to the current directory
    if chosen is None:
        return str((config_dir / "output").resolve())
    if not isinstance(chosen, str) or not chosen:
        raise lines.error(f"expected a folder path, got {show(chosen)}.", *key)
    # A path in the file is relative to the file, so the sweep writes to the same place from any directory.
    return str((config_dir / os.path.expanduser(chosen)).resolve())


def _training_args(raw: Mapping[str, Any], lines: Lines, output_dir: str) -> dict[str, Any]:
    model = _training_args_model()
    unknown = unknown_key(
        list(model.model_fields), "a TrainingArguments field", "see trainer.TrainingArguments for the fields."
    )
    validate(model, raw, lines, ("training_args",), lambda name: ("a value", None), unknown)
    kwargs = {k: v for k, v in raw.items() if k != "output_dir"}
    for name, inert in _SCRIPT_ONLY.items():
        if name in kwargs and kwargs[name] != inert:
            raise lines.error(
                f"{name}={kwargs[name]!r} is read by a training script, not by hpsearch run (every trial trains from "
                "scratch, then evaluates); remove it (--resume continues a sweep).",
                "training_args",
                name,
            )
    with located(lines):
        check_training_args(kwargs, output_dir)
    return kwargs


#: TrainingArguments fields that hold a path (a string value of a config field is its file).
TRAINING_ARG_PATHS = ("logging_dir", "fsdp_config", "accelerator_config", "deepspeed")


def _training_paths(raw: Mapping[str, Any], lines: Lines, config_path: Path) -> dict[str, Any]:
    """training_args with its paths relative to the sweep file's folder (--set values: to the current directory)."""
    out = dict(raw)
    for name in TRAINING_ARG_PATHS:
        if isinstance(out.get(name), str):
            base = (
                os.getcwd()
                if ("training_args", name) in lines.overridden
                else str(config_path.parent.resolve())
            )
            out[name] = resolve_path(out[name], base)
    return out


#: TrainingArguments fields only a script reads, with the value that asks it for nothing unusual.
_SCRIPT_ONLY: dict[str, Any] = {
    "resume_from_checkpoint": None,
    "do_predict": False,
    "overwrite_output_dir": False,
}


def _warn_shadowed(space: Any, training_args: Mapping[str, Any], lines: Lines) -> None:
    """A training argument the space searches (unconditionally) is replaced in every trial: say so (a warning, not an
    error: it is still the value of the Trainer built before the search, and configs often carry a default)."""
    for name in space or ():
        if name in training_args and not space[name].is_conditional:
            line = lines.line("training_args", name)
            logger.warning(
                "%s%s: training_args.%s=%r is replaced in every trial by the space's value; remove it from "
                "training_args (or make the space's parameter conditional, for which it is the inactive value).",
                lines.path,
                f":{line}" if line else "",
                name,
                training_args[name],
            )


def _check_options(backend_cls: type[SearchBackend], raw: Mapping[str, Any], lines: Lines) -> None:
    options = backend_cls.all_options()
    unknown = unknown_key(
        sorted(options),
        f"an option of the {backend_cls.name} backend",
        f"it accepts {', '.join(sorted(options))}.",
    )

    def expected(name: str) -> tuple[str, str | None]:
        return _option_expected(options[name]), None

    validate(_options_model(backend_cls), raw, lines, ("backend_options",), expected, unknown)


def _with_option_errors(error: ConfigError, data: Mapping[str, Any], lines: Lines) -> ConfigError:
    """The file's top-level errors and, when its backend is known, those of backend_options: all at once."""
    name, raw = data.get("backend"), data.get("backend_options")
    if not isinstance(raw, dict) or not (name is None or name in backend_names()):
        return error
    try:
        _check_options(resolve_backend(None) if name is None else get_backend(name), raw, lines)
    except ConfigError as more:
        return combine([error, more])
    except (HPSearchError, ImportError):  # no such backend installed: the top-level errors say enough for now
        pass
    return error


def _merge_common(
    sweep: _SweepKeys, data: Mapping[str, Any], lines: Lines
) -> tuple[dict[str, Any], dict[str, Any]]:
    """backend_options with the options every backend takes that the file gives at the top level, and where each
    option was written (its keys). Given in both places with different values, it is refused, unless one of them
    comes from the command line (--set, --warm-start), which wins."""
    options = dict(sweep.backend_options or {})
    where: dict[str, tuple[str, ...]] = {name: ("backend_options", name) for name in options}
    for name in COMMON_OPTIONS:
        if name not in data:
            continue
        top = getattr(sweep, name)
        if name in options and options[name] != top:
            if ("backend_options", name) in lines.overridden:
                continue
            if (name,) not in lines.overridden:
                raise lines.error(
                    f"{name} is given twice with different values ({top!r} here and backend_options.{name}="
                    f"{options[name]!r}); keep one of them.",
                    name,
                )
        options[name] = top
        where[name] = (name,)
    return options, where


def _resolve_paths(
    values: dict[str, Any],
    options: Mapping[str, Option],
    where: Mapping[str, tuple[str, ...]],
    lines: Lines,
    config_dir: Path,
) -> dict[str, Any]:
    """Every option declared a path (`Option.path`) relative to the sweep file's folder, as output_dir is; a value
    given on the command line (--set) relative to the current directory, as --output-dir is."""
    out = dict(values)
    for name, value in values.items():
        option = options.get(name)
        if option is None or not option.path or value is None:
            continue
        base = (
            os.getcwd() if where.get(name, ("backend_options", name)) in lines.overridden else str(config_dir)
        )
        out[name] = resolve_path(value, base)
    return out


def _backend_options(
    config: SweepConfig,
    backend_cls: type[SearchBackend],
    raw: dict[str, Any],
    resume: bool,
    where: Mapping[str, tuple[str, ...]] | None = None,
) -> None:
    lines = config.lines
    options = backend_cls.all_options()
    _check_options(backend_cls, raw, lines)
    values = substitute(dict(raw), config.output_dir)
    config.owns_store = values != raw  # some value named {output_dir}
    values = _resolve_paths(values, options, where or {}, lines, config.path.parent.resolve())
    try:
        values = backend_cls.sweep_options(values, resume=resume, sweep_name=config.path.stem)
    except SearchConfigError as error:
        key = "backend" if resume and not backend_cls.can_resume else "backend_options"
        raise lines.error(str(error), key) from None
    for name, option in options.items():
        spec = values.get(name)
        if option.build_from and isinstance(spec, Mapping):
            config.specs[name] = (dict(spec), option.build_from)
            with located(lines):
                values[name] = build_object(spec, option.build_from, "backend_options", name)
    config.backend_options = values


def load_sweep(
    path: str | os.PathLike[str],
    backend: str | None = None,
    n_trials: int | None = None,
    output_dir: str | None = None,
    resume: bool = False,
    overrides: Sequence[str | tuple[str, str]] = (),
) -> SweepConfig:
    """Read and check a sweep file; command-line values (when not None) override the file's.

    ``overrides`` are ``KEY.PATH=VALUE`` strings (``training_args.num_train_epochs=2``); each value is read
    as YAML (``2`` is an int, ``[1, 2]`` a list, ``"no"`` a string); an ``(override, flag)`` pair names the flag
    that gave it (``--trial-workers``) in errors. ``resume`` asks the backend to continue an
    earlier run (`SearchBackend.sweep_options`).

    Raises:
        ConfigError: for anything wrong, naming the key and its line.
    """
    config_path = Path(path)
    data, lines = _read(config_path)
    for override in overrides:
        _apply_override(data, lines, override)
    drop_other_backend_options(data, lines, backend)
    for key, flag, value in (("backend", "--backend", backend), ("n_trials", "--n-trials", n_trials)):
        if value is not None:
            data[key] = value
            lines.overridden[(key,)] = flag
    try:
        sweep = validate(SweepFile, data, lines, (), _top_expected, _top_unknown)
    except ConfigError as error:
        raise _with_option_errors(error, data, lines) from None
    assert isinstance(sweep, _SweepKeys)
    _check_objective_count(sweep, lines)

    # Imports made by name resolve against the current directory, as with `python -m` (a console script
    # does not put it on sys.path by itself).
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    backend_cls = _backend(sweep.backend, lines)
    out_dir = _output_dir(sweep, lines, config_path.parent, output_dir)
    config = _resolved(sweep, lines, config_path, backend_cls, out_dir)
    _warn_shadowed(config.space, config.training_args, lines)
    merged, where = _merge_common(sweep, data, lines)
    _backend_options(config, backend_cls, merged, resume, where)
    return config


@contextlib.contextmanager
def _beside_the_file(config_path: Path) -> Iterator[None]:
    """An import path whose module is not importable but lies beside the sweep file: say so, and where to run from
    (imports resolve against the current directory, as with ``python -m``; paths in the file against its folder)."""
    try:
        yield
    except Problem as problem:
        folder = config_path.parent.resolve()
        name = problem.missing_module
        if name is None or folder == Path.cwd().resolve():
            raise
        top = name.split(".")[0]
        if not ((folder / f"{top}.py").is_file() or (folder / top / "__init__.py").is_file()):
            raise
        command = f"cd {shlex.quote(str(folder))} && hpsearch run {shlex.quote(config_path.name)}"
        raise Problem(
            f"{problem.message[:-1]}; {top!r} is beside the sweep file, in {folder}: run from there ({command}).",
            *problem.keys,
        ) from None


def _resolved(
    sweep: _SweepKeys, lines: Lines, config_path: Path, backend_cls: type[SearchBackend], out_dir: str
) -> SweepConfig:
    """The checked keys resolved: the code they name imported, the space and the training arguments built (the
    backend options are added by `_backend_options`)."""
    with located(lines), _beside_the_file(config_path):
        return SweepConfig(
            path=config_path,
            lines=lines,
            model=import_path(sweep.model, "model"),
            data=import_path(sweep.data, "data"),
            metrics=import_path(sweep.metrics, "metrics") if sweep.metrics is not None else None,
            objective=objective(sweep.objective),
            processing_class=import_object(sweep.processing_class, "processing_class")
            if sweep.processing_class
            else None,
            data_collator=import_object(sweep.data_collator, "data_collator")
            if sweep.data_collator
            else None,
            trainer=import_path(sweep.trainer, "trainer") if sweep.trainer is not None else None,
            direction=sweep.direction,
            n_trials=sweep.n_trials,
            output_dir=out_dir,
            training_args=_training_args(
                _training_paths(sweep.training_args or {}, lines, config_path), lines, out_dir
            ),
            space=build_space(sweep.space),
            backend=backend_cls.name,
            torch_threads=sweep.torch_threads,
        )
