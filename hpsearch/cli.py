"""The ``hpsearch`` command: ``hpsearch run SWEEP.yaml`` and ``hpsearch report OUTPUT_DIR [OUTPUT_DIR ...]``.

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
    backend: optuna
    backend_options:
      sampler: {name: TPESampler, seed: 0}          # {name: Class, **kwargs}: built from the backend's library
      pruner: {name: HyperbandPruner, min_resource: 1}
      storage: sqlite:///{output_dir}/study.db     # {output_dir} is replaced by the output folder

Exit codes: 0 done, 1 the search (or a report) failed, 2 the command or the sweep file is wrong (the message
names the key and its line in the file, and the fix; no traceback), 130 interrupted before any trial completed.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib
import inspect
import logging
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from .errors import BackendNotAvailable, HPSearchError, SearchConfigError

__all__ = ["ConfigError", "SweepConfig", "load_sweep", "main"]

logger = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_INTERRUPTED = 0, 1, 2, 130
BACKENDS = ("optuna", "ray", "sigopt")
_OUTPUT_DIR_TOKEN = "{output_dir}"

# key -> (required, what it is, an example). The order is the order of the docs and of error listings.
_KEYS: dict[str, tuple[bool, str, str]] = {
    "model": (True, "the model factory, as module:function", "model: examples.digits.model:model_init"),
    "data": (True, "the data factory returning (train_dataset, eval_dataset)", "data: examples.digits.model:datasets"),
    "metrics": (False, "compute_metrics, as module:function", "metrics: examples.digits.model:compute_metrics"),
    "objective": (False, "a metric name, a list of names, or module:function", "objective: eval_accuracy"),
    "direction": (False, "minimize or maximize (or a list, one per objective)", "direction: maximize"),
    "n_trials": (False, "how many trials to run", "n_trials: 30"),
    "output_dir": (False, "where results go, relative to the sweep file", "output_dir: output"),
    "training_args": (False, "TrainingArguments fields", "training_args: {num_train_epochs: 3}"),
    "space": (True, "the search space (portable spaces.SearchSpace form)",
              "space: {learning_rate: {type: float, low: 1.0e-5, high: 1.0e-3, log: true}}"),
    "backend": (False, "optuna, ray or sigopt", "backend: optuna"),
    "backend_options": (False, "keyword arguments for the backend", "backend_options: {pruner: {name: MedianPruner}}"),
    "torch_threads": (False, "torch intra-op threads (1 is fastest for tiny models on a busy machine)",
                      "torch_threads: 1"),
}

# backend -> option -> the modules whose classes ``{name: Class, ...}`` may name.
_OBJECT_OPTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "optuna": {"sampler": ("optuna.samplers",), "pruner": ("optuna.pruners",)},
    "ray": {"scheduler": ("ray.tune.schedulers",), "search_alg": ("ray.tune.search",)},
    "sigopt": {},
}


class _Loader(yaml.SafeLoader):
    """A safe loader that also reads ``1e-5`` as a float (YAML 1.1 wants ``1.0e-5``; people write ``1e-5``)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


# ---------------------------------------------------------------------------------------------- errors
class ConfigError(SearchConfigError):
    """A problem in the sweep file or the command line: says where (file:line and key), what, and the fix."""

    def __init__(self, message: str, key: str | None = None, line: int | None = None, path: str | None = None):
        self.problem = message
        self.key = key
        self.line = line
        self.path = path
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(f"{where}{key + ': ' if key else ''}{message}")


class _Lines:
    """Line numbers (1-based) of every key of a YAML document, from the composed node tree."""

    def __init__(self, path: str, root: yaml.Node | None) -> None:
        self.path = path
        self._lines: dict[tuple[Any, ...], int] = {}
        #: Keys set by ``--set`` on the command line: an error about them points there, not at a line.
        self.overridden: set[tuple[Any, ...]] = set()
        if root is not None:
            self._lines[()] = root.start_mark.line + 1
            self._walk(root, ())

    def _walk(self, node: yaml.Node, prefix: tuple[Any, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                path = (*prefix, key)
                self._lines.setdefault(path, key_node.start_mark.line + 1)
                self._walk(value_node, path)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                path = (*prefix, i)
                self._lines.setdefault(path, item.start_mark.line + 1)
                self._walk(item, path)

    def line(self, *keys: Any) -> int | None:
        """The line of ``keys`` or of its nearest ancestor present in the file."""
        keys_t = tuple(keys)
        while keys_t:
            if keys_t in self._lines:
                return self._lines[keys_t]
            keys_t = keys_t[:-1]
        return self._lines.get(())

    def has(self, *keys: Any) -> bool:
        return tuple(keys) in self._lines

    def error(self, message: str, *keys: Any) -> ConfigError:
        key = ".".join(str(k) for k in keys) if keys else None
        for i in range(len(keys), 0, -1):
            if tuple(keys[:i]) in self.overridden:
                where = ".".join(str(k) for k in keys[:i])
                return ConfigError(f"{message} (set by --set {where}=...)", key=key, path=self.path)
        return ConfigError(message, key=key, line=self.line(*keys), path=self.path)


# ---------------------------------------------------------------------------------------------- the sweep file
@dataclasses.dataclass
class SweepConfig:
    """A sweep file, checked and resolved (import paths imported, the space built, options instantiated)."""

    path: Path
    lines: _Lines
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
    backend_options: dict[str, Any]
    torch_threads: int | None
    owns_storage: bool = False
    sampler_spec: Any = None

    def error(self, message: str, *keys: Any) -> ConfigError:
        return self.lines.error(message, *keys)


def _parse_yaml(path: Path) -> tuple[Any, _Lines]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"no such sweep file; check the path (current directory: {os.getcwd()}).",
                          path=str(path)) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read the sweep file ({error}).", path=str(path)) from None
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        problem = getattr(error, "problem", None) or str(error)
        raise ConfigError(
            f"invalid YAML: {problem}; fix the syntax (indentation, colons, quotes) at this line.",
            line=None if mark is None else mark.line + 1,
            path=str(path),
        ) from None
    finally:
        loader.dispose()
    lines = _Lines(str(path), root)
    if not isinstance(data, Mapping):
        example = "\n".join(f"  {example}" for required, _, example in _KEYS.values() if required)
        raise lines.error(
            f"a sweep file is a YAML mapping, got {type(data).__name__}; start from e.g.\n{example}"
        )
    return data, lines


def _import_path(value: Any, lines: _Lines, *keys: Any) -> Callable[..., Any]:
    """The callable a ``module:function`` string names (``module:Class.method`` works too)."""
    key = ".".join(map(str, keys))
    example = _KEYS.get(str(keys[0]), (False, "", f"{key}: package.module:function"))[2]
    if not isinstance(value, str) or value.count(":") != 1 or not all(value.split(":")):
        raise lines.error(
            f"expected an import path 'module:function', got {type(value).__name__} {value!r}; write e.g. "
            f"`{example}`.",
            *keys,
        )
    module_name, _, attr_path = value.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or module_name
        hint = (
            f"module {missing!r} is not importable from the current directory ({os.getcwd()}) nor installed; "
            "check the spelling, run from the folder that contains the package, or install it"
        )
        if missing != module_name and not module_name.startswith(f"{missing}."):
            hint = f"importing {module_name!r} failed because {missing!r} is missing; install it"
        raise lines.error(f"cannot import {value!r}: {hint}.", *keys) from None
    except Exception as error:
        raise lines.error(
            f"importing module {module_name!r} raised {type(error).__name__}: {error}; fix that module.", *keys
        ) from None
    target: Any = module
    for part in attr_path.split("."):
        if not hasattr(target, part):
            names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
            close = difflib.get_close_matches(part, names, n=1)
            suggestion = f"did you mean {module_name}:{close[0]}? " if close else ""
            raise lines.error(
                f"cannot import {value!r}: module {module_name!r} has no attribute {attr_path!r}; {suggestion}"
                f"it defines {', '.join(names[:12]) or 'no public callables'}.",
                *keys,
            )
        target = getattr(target, part)
    if not callable(target):
        raise lines.error(f"{value!r} is a {type(target).__name__}, not a function; name a callable.", *keys)
    return target


def _check_int(value: Any, minimum: int, lines: _Lines, *keys: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise lines.error(f"expected an integer >= {minimum}, got {type(value).__name__} {value!r}.", *keys)
    return value


def _substitute(value: Any, output_dir: str) -> Any:
    if isinstance(value, str):
        return value.replace(_OUTPUT_DIR_TOKEN, output_dir)
    if isinstance(value, list):
        return [_substitute(v, output_dir) for v in value]
    if isinstance(value, Mapping):
        return {k: _substitute(v, output_dir) for k, v in value.items()}
    return value


def _resolve_output_dir(data: Mapping[str, Any], lines: _Lines, config_dir: Path, override: str | None) -> str:
    top = data.get("output_dir")
    nested = data.get("training_args", {}).get("output_dir") if isinstance(data.get("training_args"), Mapping) else None
    if top is not None and nested is not None and top != nested:
        raise lines.error(
            f"output_dir is given twice ({top!r} here and training_args.output_dir={nested!r}); keep one.",
            "training_args", "output_dir",
        )
    chosen, key = (top, ("output_dir",)) if top is not None else (nested, ("training_args", "output_dir"))
    if override is not None:
        return os.path.abspath(override)  # a command-line path is relative to the current directory
    if chosen is None:
        return str((config_dir / "output").resolve())
    if not isinstance(chosen, str | os.PathLike) or not str(chosen):
        raise lines.error(f"expected a folder path, got {type(chosen).__name__} {chosen!r}.", *key)
    # A path in the file is relative to the file, so the sweep writes to the same place from any directory.
    return str((config_dir / os.path.expanduser(str(chosen))).resolve())


def _training_args(data: Mapping[str, Any], lines: _Lines, output_dir: str) -> dict[str, Any]:
    from trainer import TrainingArguments

    raw = data.get("training_args", {})
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise lines.error(
            f"expected a mapping of TrainingArguments fields, got {type(raw).__name__} {raw!r}; write e.g. "
            "`training_args: {num_train_epochs: 3, eval_strategy: epoch}`.",
            "training_args",
        )
    fields = {f.name for f in dataclasses.fields(TrainingArguments) if f.init and not f.name.startswith("_")}
    for key in raw:
        if key not in fields:
            close = difflib.get_close_matches(str(key), sorted(fields), n=1)
            hint = f"did you mean {close[0]!r}?" if close else "see trainer.TrainingArguments for the fields."
            raise lines.error(f"{key!r} is not a TrainingArguments field; {hint}", "training_args", key)
    kwargs = {k: v for k, v in raw.items() if k != "output_dir"}
    try:
        TrainingArguments(output_dir=output_dir, **kwargs)
    except (TypeError, ValueError) as error:
        message = str(error)
        culprit = next((k for k in kwargs if re.match(rf"^{re.escape(str(k))}\b", message)), None)
        if culprit is None:
            culprit = next((k for k in kwargs if re.search(rf"\b{re.escape(str(k))}\b", message)), None)
        keys = ("training_args", culprit) if culprit is not None else ("training_args",)
        raise lines.error(message, *keys) from None
    return kwargs


def _space(data: Mapping[str, Any], lines: _Lines) -> Any:
    from spaces import SearchSpace

    raw = data["space"]
    if not isinstance(raw, Mapping) or not raw:
        raise lines.error(
            f"expected a non-empty mapping of parameter names to domains, got {type(raw).__name__} {raw!r}; write "
            f"e.g. `{_KEYS['space'][2]}`.",
            "space",
        )
    try:
        return SearchSpace.from_dict(raw)
    except (TypeError, ValueError) as error:
        message = str(error)
        culprit = next((n for n in raw if f"'{n}'" in message or f'"{n}"' in message), None)
        if culprit is None:  # find the domain that fails on its own
            for name, spec in raw.items():
                try:
                    SearchSpace.from_dict({name: {k: v for k, v in spec.items() if k != "when"}}
                                          if isinstance(spec, Mapping) else {name: spec})
                except (TypeError, ValueError):
                    culprit = name
                    break
        keys = ("space", culprit) if culprit is not None else ("space",)
        raise lines.error(message, *keys) from None


def _objective(value: Any, lines: _Lines) -> Any:
    if value is None:
        return None
    if isinstance(value, str) and ":" in value:
        return _import_path(value, lines, "objective")
    if isinstance(value, str) and value:
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return _MetricVector(list(value))
    raise lines.error(
        f"expected a metric name (e.g. eval_accuracy), a list of metric names (several objectives) or "
        f"'module:function', got {type(value).__name__} {value!r}.",
        "objective",
    )


class _MetricVector:
    """compute_objective for ``objective: [name, ...]``: one value per metric, in order."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.__qualname__ = ",".join(names)

    def __call__(self, metrics: Mapping[str, float]) -> list[float]:
        out = []
        for name in self.names:
            for key in (name, f"eval_{name}"):
                if key in metrics:
                    out.append(float(metrics[key]))
                    break
            else:
                raise KeyError(f"objective {name!r} is not among the evaluation metrics {sorted(metrics)}.")
        return out


def _direction(value: Any, lines: _Lines) -> str | list[str]:
    allowed = ("minimize", "maximize", "min", "max")
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, str) and v.lower() in allowed for v in items):
        raise lines.error(
            f"expected 'minimize' or 'maximize' (or a list of them, one per objective), got {value!r}.", "direction"
        )
    return value


def _build_object(spec: Any, modules: Sequence[str], lines: _Lines, *keys: Any) -> Any:
    """``{name: Class, **kwargs}`` -> ``Class(**kwargs)``, the class looked up in ``modules`` (or module:Class)."""
    if not isinstance(spec, Mapping) or "name" not in spec or not isinstance(spec["name"], str):
        raise lines.error(
            f"expected a mapping with the class name and its arguments, e.g. `{{name: ..., ...}}` naming a class "
            f"of {' or '.join(modules)}, got {spec!r}.",
            *keys,
        )
    name = spec["name"]
    kwargs = {k: v for k, v in spec.items() if k != "name"}
    cls: Callable[..., Any] | None
    if ":" in name:
        cls = _import_path(name, lines, *keys, "name")
    else:
        cls = None
        available: list[str] = []
        for module_name in modules:
            try:
                module = importlib.import_module(module_name)
            except ImportError as error:
                raise lines.error(f"cannot import {module_name} ({error}); install the backend.", *keys) from None
            cls = getattr(module, name, None)
            if inspect.isclass(cls):
                break
            cls = None
            available += [n for n in getattr(module, "__all__", dir(module)) if inspect.isclass(getattr(module, n, None))]
        if cls is None:
            close = difflib.get_close_matches(name, available, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise lines.error(
                f"{name!r} is not a class of {' or '.join(modules)}; {hint}available: {', '.join(sorted(available))}.",
                *keys, "name",
            )
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as error:
        message = str(error)
        bad = re.search(r"unexpected keyword argument '(\w+)'", message)
        where = (*keys, bad.group(1)) if bad else keys
        raise lines.error(f"{name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())}) failed: {message}", *where) from None


def _apply_override(data: dict[str, Any], lines: _Lines, override: str) -> None:
    key, sep, text = override.partition("=")
    keys = tuple(k for k in key.strip().split("."))
    if not sep or not all(keys):
        raise ConfigError(
            f"--set {override!r}: expected KEY=VALUE with a dotted key, e.g. --set training_args.num_train_epochs=2."
        )
    try:
        value = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as error:
        raise ConfigError(f"--set {override!r}: the value is not valid YAML ({error}).") from None
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
    lines.overridden.add(keys)


def load_sweep(
    path: str | os.PathLike[str],
    backend: str | None = None,
    n_trials: int | None = None,
    output_dir: str | None = None,
    resume: bool = False,
    overrides: Sequence[str] = (),
) -> SweepConfig:
    """Read and check a sweep file; command-line values (when not None) override the file's.

    ``overrides`` are ``KEY.PATH=VALUE`` strings (``training_args.num_train_epochs=2``); each value is read
    as YAML (``2`` is an int, ``[1, 2]`` a list, ``"no"`` a string).

    Raises:
        ConfigError: for anything wrong, naming the key and its line.
    """
    config_path = Path(path)
    data, lines = _parse_yaml(config_path)
    for override in overrides:
        _apply_override(data, lines, override)
    for key in data:
        if key not in _KEYS:
            close = difflib.get_close_matches(str(key), list(_KEYS), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise lines.error(f"unknown key {key!r}; {hint}the keys are {', '.join(_KEYS)}.", key)
    for key, (required, what, example) in _KEYS.items():
        if required and data.get(key) is None:
            raise lines.error(f"the required key {key!r} ({what}) is missing; add e.g. `{example}`.")

    # Imports made by name resolve against the current directory, as with `python -m` (a console script
    # does not put it on sys.path by itself).
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())

    chosen_backend = backend if backend is not None else data.get("backend", "optuna")
    if chosen_backend not in BACKENDS:
        raise lines.error(f"unknown backend {chosen_backend!r}; use one of {', '.join(BACKENDS)}.", "backend")
    trials = n_trials if n_trials is not None else data.get("n_trials", 20)
    if n_trials is None:
        _check_int(trials, 1, lines, "n_trials")
    elif trials < 1:
        raise ConfigError(f"--n-trials must be >= 1, got {trials}.")
    threads = data.get("torch_threads")
    if threads is not None:
        _check_int(threads, 1, lines, "torch_threads")

    out_dir = _resolve_output_dir(data, lines, config_path.parent, output_dir)
    config = SweepConfig(
        path=config_path,
        lines=lines,
        model=_import_path(data["model"], lines, "model"),
        data=_import_path(data["data"], lines, "data"),
        metrics=_import_path(data["metrics"], lines, "metrics") if data.get("metrics") is not None else None,
        objective=_objective(data.get("objective"), lines),
        direction=_direction(data.get("direction", "minimize"), lines),
        n_trials=trials,
        output_dir=out_dir,
        training_args=_training_args(data, lines, out_dir),
        space=_space(data, lines),
        backend=chosen_backend,
        backend_options={},
        torch_threads=threads,
    )
    config.backend_options = _backend_options(data, config, resume)
    return config


def _backend_options(data: Mapping[str, Any], config: SweepConfig, resume: bool) -> dict[str, Any]:
    from .api import HPSearchBackend, _backend_class

    lines = config.lines
    raw = data.get("backend_options") or {}
    if not isinstance(raw, Mapping):
        raise lines.error(
            f"expected a mapping of keyword arguments for the {config.backend} backend, got {type(raw).__name__} "
            f"{raw!r}; write e.g. `{_KEYS['backend_options'][2]}`.",
            "backend_options",
        )
    backend_cls = _backend_class(HPSearchBackend(config.backend))
    try:
        backend_cls.ensure_available()
    except BackendNotAvailable as error:
        raise lines.error(str(error), "backend") from None
    accepted = set(backend_cls.accepted_kwargs) | {"max_failed_trials", "objective_scope"}
    for key in raw:
        if key not in accepted:
            close = difflib.get_close_matches(str(key), sorted(accepted), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise lines.error(
                f"{key!r} is not an option of the {config.backend} backend; {hint}it accepts "
                f"{', '.join(sorted(accepted))}.",
                "backend_options", key,
            )
    config.owns_storage = isinstance(raw.get("storage"), str) and _OUTPUT_DIR_TOKEN in raw["storage"]
    options = _substitute(dict(raw), config.output_dir)
    config.sampler_spec = options.get("sampler")
    for key, modules in _OBJECT_OPTIONS[config.backend].items():
        if key in options and isinstance(options[key], Mapping):
            options[key] = _build_object(options[key], modules, lines, "backend_options", key)

    if config.backend == "optuna":
        storage = options.get("storage")
        if isinstance(storage, str):
            # A named study is what --resume finds again; the sweep file's name is a stable default.
            options.setdefault("study_name", config.path.stem)
        if resume:
            if storage is None:
                raise lines.error(
                    "--resume continues a study saved in storage, but backend_options has no storage; add "
                    "`storage: sqlite:///{output_dir}/study.db`.",
                    "backend_options",
                )
            options["load_if_exists"] = True
    elif config.backend == "ray":
        if resume:
            options["resume"] = True
    elif resume:
        raise lines.error(
            f"--resume: the {config.backend} backend cannot resume a search; run it again without --resume, or use "
            "backend optuna (with storage) or ray.",
            "backend",
        )
    return options


# ---------------------------------------------------------------------------------------------- run
def _locate(message: str, config: SweepConfig) -> tuple[Any, ...]:
    """The sweep-file key a `SearchConfigError` of the search is about (best effort: the message has the fix)."""
    space_names = set(config.space) if config.space is not None else set()
    found = re.search(r"(?:hp_space parameter|hp_space returned|parameter) '([^']+)'", message)
    if found and found.group(1) in space_names:
        return ("space", found.group(1))
    unknown = re.search(r"Unknown keyword argument\(s\) \['([^']+)'", message)
    if unknown:
        return ("backend_options", unknown.group(1))
    head = re.match(r"^(\w+)\s*(?:=|must|is|needs|cannot)", message)
    if head:
        word = head.group(1)
        if word in config.backend_options:
            return ("backend_options", word)
        if word in config.training_args:
            return ("training_args", word)
        aliases = {"compute_objective": "objective", "hp_space": "space", "output_dir": "output_dir"}
        word = aliases.get(word, word)
        if word in _KEYS:
            return (word,)
    return ()


def _prepare_storage(config: SweepConfig, resume: bool) -> str | None:
    """Get an Optuna storage ready; returns a note for the user, or None.

    A fresh run replaces a study left in a storage this sweep owns (``{output_dir}`` in its URL) and refuses
    to touch one elsewhere. A resumed run reseeds a seeded sampler with ``seed + trials so far``: the same
    seed would replay the first trials' samples (TPE samples its first trials at random from that seed).
    """
    options = config.backend_options
    storage = options.get("storage")
    if config.backend != "optuna" or not isinstance(storage, str) or "://" not in storage:
        return None
    import optuna

    study_name = options["study_name"]
    Path(config.output_dir).mkdir(parents=True, exist_ok=True)
    try:
        summaries = optuna.study.get_all_study_summaries(storage=storage, include_best_trial=False)
    except Exception as error:
        raise config.error(f"cannot open the storage ({error}); check the URL.", "backend_options", "storage") from None
    summary = next((s for s in summaries if s.study_name == study_name), None)
    if summary is None:
        return None
    if resume:
        note = f"Resuming study {study_name!r} ({summary.n_trials} trials so far)"
        spec = config.sampler_spec
        if summary.n_trials and isinstance(spec, Mapping) and isinstance(spec.get("seed"), int):
            seed = spec["seed"] + summary.n_trials
            options["sampler"] = _build_object({**spec, "seed": seed}, _OBJECT_OPTIONS["optuna"]["sampler"],
                                               config.lines, "backend_options", "sampler")
            note += f"; sampler seed {seed} (seed + trials so far, so that no earlier sample is replayed)"
        return note + "."
    if not config.owns_storage:
        raise config.error(
            f"study {study_name!r} already exists in this storage; pass --resume to continue it, or set "
            "backend_options.study_name to a new name.",
            "backend_options", "storage",
        )
    optuna.delete_study(study_name=study_name, storage=storage)
    return f"Replaced the previous study {study_name!r} in {storage} (use --resume to continue a study instead)."


def _quiet_trainer_bars(trainer: Any, show_trial_bars: bool) -> None:
    """Swap the trainer's bar (which also prints every log dict) for a transient per-trial bar, or none."""
    from trainer import PrinterCallback, ProgressCallback

    from ._progress import TrialProgressCallback

    trainer.remove_callback(ProgressCallback)
    trainer.remove_callback(PrinterCallback)
    if show_trial_bars:
        trainer.add_callback(TrialProgressCallback())


def _print_summary(result: Any, started: float, report: str | None, out: Any) -> None:
    from .report._format import fmt_duration

    counts = result.counts()
    detail = ", ".join(f"{n} {state.lower()}" for state, n in counts.items() if n)
    elapsed = fmt_duration(time.monotonic() - started)
    print(f"Trials: {len(result.records)} ({detail}) in {elapsed} with {result.backend}.", file=out)
    best = result.best_trials
    if not best:
        print("No trial completed.", file=out)
    for record in best:
        values = result.objective_values(record) or []
        shown = ", ".join(f"{v:.6g}" for v in values)
        label = "Best trial" if len(best) == 1 else "Pareto-optimal trial"
        print(f"{label}: {record.name} (number {record.number}), {result.objective} = {shown}", file=out)
        for name, value in sorted(record.params.items()):
            print(f"  {name}: {value!r}", file=out)
        if record.checkpoint:
            print(f"  checkpoint: {record.checkpoint}", file=out)
    print(f"Results: {result.output_dir}", file=out)
    if report is not None:
        print(f"Report: {report}", file=out)


def run(args: argparse.Namespace) -> int:
    """``hpsearch run``: the whole sweep, then report.html; returns the exit code."""
    config = load_sweep(args.config, backend=args.backend, n_trials=args.n_trials, output_dir=args.output_dir,
                        resume=args.resume, overrides=args.set)
    started = time.monotonic()
    from trainer import Trainer, TrainingArguments

    from . import hyperparameter_search
    from ._progress import SweepProgress, is_interactive

    if config.torch_threads is not None:
        import torch

        torch.set_num_threads(config.torch_threads)
    note = _prepare_storage(config, args.resume)
    if note:
        print(note, file=sys.stderr)

    try:
        datasets = config.data()
    except Exception:  # the user's data code: its traceback is the useful part
        traceback.print_exc()
        print(f"hpsearch: the data factory {config.lines.path}: data failed (traceback above).", file=sys.stderr)
        return EXIT_FAILED
    if not isinstance(datasets, tuple | list) or len(datasets) != 2:
        raise config.error(
            f"the data factory returned {type(datasets).__name__}; it must return (train_dataset, eval_dataset).",
            "data",
        )
    train_dataset, eval_dataset = datasets
    training_args = TrainingArguments(output_dir=config.output_dir, **config.training_args)
    trainer = Trainer(
        model_init=config.model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        compute_metrics=config.metrics,
    )
    interactive = is_interactive() if args.progress is None else args.progress
    _quiet_trainer_bars(trainer, interactive and not training_args.disable_tqdm)
    if interactive:
        # The bar says what Optuna's per-trial INFO lines would; keep its warnings.
        logging.getLogger("optuna").setLevel(logging.WARNING)

    print(f"Sweep {config.path}: {config.n_trials} trials with {config.backend}, results in {config.output_dir}",
          file=sys.stderr)
    failure: BaseException | None = None
    try:
        with SweepProgress(config.n_trials, enabled=interactive):
            best = hyperparameter_search(
                trainer,
                hp_space=config.space,
                compute_objective=config.objective,
                n_trials=config.n_trials,
                direction=config.direction,
                backend=config.backend,
                **config.backend_options,
            )
        result = (best[0] if isinstance(best, list) else best).run_summary if best else None
    except SearchConfigError as error:
        if isinstance(error, ConfigError):
            raise
        raise config.error(str(error), *_locate(str(error), config)) from None
    except KeyboardInterrupt:
        print(f"\nInterrupted before any trial completed; finished trials are in {config.output_dir} "
              "(continue with --resume where the backend supports it).", file=sys.stderr)
        return EXIT_INTERRUPTED
    except HPSearchError as error:
        failure, result = error, None
    except Exception as error:  # the user's model/data code or a backend bug: keep the traceback
        failure, result = error, None
        traceback.print_exc()
    if result is None:
        result = _load_if_any(config.output_dir)
    report = _write_report(result) if result is not None else None
    if result is not None:
        _print_summary(result, started, report, sys.stdout)
    if failure is not None:
        print(f"hpsearch: the search failed: {failure}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _load_if_any(output_dir: str) -> Any:
    from .results import SearchResult

    try:
        return SearchResult.load(output_dir)
    except (FileNotFoundError, ValueError):
        return None


def _write_report(result: Any) -> str | None:
    try:
        return os.path.abspath(result.to_html())
    except ImportError as error:  # plotly is optional: the results are written anyway
        print(f"hpsearch: no HTML report: {error}", file=sys.stderr)
        return None


# ---------------------------------------------------------------------------------------------- report
def report(args: argparse.Namespace) -> int:
    """``hpsearch report DIR [DIR ...]``: one report, or a comparison of several searches."""
    from .results import SearchResult

    results = []
    for folder in args.dirs:
        try:
            results.append(SearchResult.load(folder))
        except (FileNotFoundError, ValueError) as error:
            raise ConfigError(str(error)) from None
    if args.markdown:
        for folder, result in zip(args.dirs, results):
            if len(results) > 1:
                print(f"## {folder}\n")
            print(result.to_markdown(max_rows=args.max_rows))
            if len(results) > 1:
                print()
        return EXIT_OK
    try:
        if len(results) == 1:
            path = results[0].to_html(args.output)
        else:
            from .report import write_compare_html

            path = write_compare_html(results, args.output or "compare.html", labels=_labels(args.dirs),
                                      target=args.target)
    except ImportError as error:
        raise ConfigError(str(error)) from None
    except ValueError as error:  # searches that cannot be compared (directions, several objectives)
        raise ConfigError(str(error)) from None
    print(f"Report: {os.path.abspath(path)}")
    return EXIT_OK


def _labels(dirs: Sequence[str]) -> list[str]:
    """Folder names, or the paths as given when two folders share a name."""
    names = [Path(d).resolve().name or str(d) for d in dirs]
    if len(set(names)) == len(names):
        return names
    return [str(d) for d in dirs]


# ---------------------------------------------------------------------------------------------- main
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hpsearch",
        description="Hyperparameter sweeps from a YAML file, and HTML/Markdown reports of their results.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="{run,report,dashboard}")
    run_parser = commands.add_parser(
        "run", help="run the sweep a YAML file describes", description="Run a sweep and write its results and report.html."
    )
    run_parser.add_argument("config", help="the sweep file (YAML)")
    run_parser.add_argument("--backend", choices=BACKENDS, help="override the file's backend")
    run_parser.add_argument("--n-trials", type=int, help="override the file's n_trials")
    run_parser.add_argument("--resume", action="store_true",
                            help="continue the study saved in the output folder instead of starting afresh")
    run_parser.add_argument("--output-dir", help="override the file's output_dir (relative to the current directory)")
    run_parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                            help="override any key of the file, e.g. --set training_args.num_train_epochs=2 "
                                 "(the value is YAML; repeatable)")
    bars = run_parser.add_mutually_exclusive_group()
    bars.add_argument("--progress", dest="progress", action="store_true", default=None,
                      help="show progress bars even when the output is not a terminal")
    bars.add_argument("--no-progress", dest="progress", action="store_false", help="never show progress bars")
    run_parser.set_defaults(handler=run)

    report_parser = commands.add_parser(
        "report", help="write the HTML report of a search, or compare several",
        description="One folder: its report (default OUTPUT_DIR/report.html). Several: a comparison "
                    "(default ./compare.html).",
    )
    report_parser.add_argument("dirs", nargs="+", metavar="OUTPUT_DIR", help="output folder(s) of searches")
    report_parser.add_argument("-o", "--output", help="where to write the HTML file")
    report_parser.add_argument("--markdown", action="store_true", help="print Markdown to stdout instead of HTML")
    report_parser.add_argument("--max-rows", type=int, default=50, help="trials listed by --markdown (default 50)")
    report_parser.add_argument("--target", type=float,
                               help="objective value for 'time to reach target' when comparing")
    report_parser.set_defaults(handler=report)

    from .dashboard._cli import add_parser as add_dashboard_parser

    add_dashboard_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hpsearch`` console script and of ``python -m hpsearch``; returns the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # usage errors (2) and --help (0), as an exit code rather than an exception
        return int(exit_.code or 0) if not isinstance(exit_.code, str) else EXIT_CONFIG
    try:
        return int(args.handler(args))
    except SearchConfigError as error:  # includes ConfigError and BackendNotAvailable's config cousins
        print(f"hpsearch: error: {error}", file=sys.stderr)
        return EXIT_CONFIG
    except BackendNotAvailable as error:
        print(f"hpsearch: error: {error}", file=sys.stderr)
        return EXIT_CONFIG
