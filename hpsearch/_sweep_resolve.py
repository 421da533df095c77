"""Turning a sweep file's checked values into what the search takes: imports, objects, the space, the objective.

The schema (`hpsearch.sweep`) has checked shapes and types; what can only be checked by doing it (importing a
module, building a class, building the space or the `TrainingArguments`) happens here. Every problem is a
`Problem` naming the keys it is about, which `hpsearch.sweep` turns into ``file:line: key: message``.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .errors import SearchConfigError

logger = logging.getLogger("hpsearch.sweep")  # its messages are the sweep file's

__all__ = [
    "OUTPUT_DIR_TOKEN",
    "MetricVector",
    "Problem",
    "build_object",
    "build_space",
    "check_training_args",
    "import_object",
    "import_path",
    "objective",
    "resolve_path",
    "substitute",
]

#: Replaced by the output folder in every string of backend_options (e.g. a storage URL).
OUTPUT_DIR_TOKEN = "{output_dir}"


class Problem(Exception):
    """A value of the sweep file that cannot be used: the message (with the fix) and the keys it is about."""

    def __init__(self, message: str, *keys: Any, missing_module: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.keys = keys
        #: The top-level module an import path named that is not importable (where it is the one named).
        self.missing_module = missing_module


def import_path(value: str, *keys: Any) -> Callable[..., Any]:
    """The callable a ``module:function`` string names (``module:Class.method`` works too)."""
    target = import_object(value, *keys)
    if not callable(target):
        raise Problem(f"{value!r} is a {type(target).__name__}, not a function; name a callable.", *keys)
    return target


def import_object(value: str, *keys: Any) -> Any:
    """The object a ``module:attr`` string names (``module:Class.attr`` works too)."""
    module_name, _, attr_path = value.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or module_name
        hint = (
            f"module {missing!r} is not importable from the current directory ({os.getcwd()}) nor installed; "
            "check the spelling, run from the folder that contains the package, or install it"
        )
        named = missing == module_name or module_name.startswith(f"{missing}.")
        if not named:
            hint = f"importing {module_name!r} failed because {missing!r} is missing; install it"
        raise Problem(
            f"cannot import {value!r}: {hint}.", *keys, missing_module=missing if named else None
        ) from None
    except (
        Exception,
        SystemExit,
    ) as error:  # a script's sys.exit() at import too: it would end hpsearch silently
        raise Problem(
            f"importing module {module_name!r} raised {type(error).__name__}: {error}; fix that module "
            "(a module a sweep names must not run a script when imported).",
            *keys,
        ) from None
    target: Any = module
    for part in attr_path.split("."):
        if not hasattr(target, part):
            names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
            close = difflib.get_close_matches(part, names, n=1)
            suggestion = f"did you mean {module_name}:{close[0]}? " if close else ""
            raise Problem(
                f"cannot import {value!r}: module {module_name!r} has no attribute {attr_path!r}; {suggestion}"
                f"it defines {', '.join(names[:12]) or 'no public callables'}.",
                *keys,
            )
        target = getattr(target, part)
    return target


def resolve_path(value: Any, base: str) -> Any:
    """A path of the sweep file relative to ``base`` (``~`` expanded): a plain path, each path of a list, and the
    file of a ``sqlite:///relative.db`` URL; other URLs (a server's) and absolute paths are kept as they are."""
    if isinstance(value, list):
        return [resolve_path(v, base) for v in value]
    if not isinstance(value, str) or not value:
        return value
    if "://" in value:
        head = "sqlite:///"
        rest = value[len(head) :]
        if value.startswith(head) and rest and not rest.startswith(("/", ":memory:", "file:")):
            return head + os.path.join(base, os.path.expanduser(rest))
        return value
    return os.path.normpath(os.path.join(base, os.path.expanduser(value)))


def build_object(spec: Mapping[str, Any], modules: Sequence[str], *keys: Any) -> Any:
    """``{name: Class, **kwargs}`` -> ``Class(**kwargs)``, the class looked up in ``modules`` (or module:Class)."""
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise Problem(
            f"expected a mapping with the class name and its arguments, e.g. `{{name: ..., ...}}` naming a class "
            f"of {' or '.join(modules)}, got {dict(spec)!r}.",
            *keys,
        )
    kwargs = {k: v for k, v in spec.items() if k != "name"}
    cls = _imported_class(name, modules, *keys) if ":" in name else _found_class(name, modules, *keys)
    args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    bad, accepted = _unexpected_keyword(cls, kwargs)
    if bad is not None:
        close = difflib.get_close_matches(bad, accepted, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"it takes {', '.join(accepted)}"
        raise Problem(f"{name}({args}): {name} takes no argument {bad!r}; {hint}", *keys, bad)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as error:
        raise Problem(f"{name}({args}) failed: {error}", *keys) from None


def _imported_class(name: str, modules: Sequence[str], *keys: Any) -> Callable[..., Any]:
    """The class ``module:Class`` names, if it is one of ``modules``' classes or a subclass of one."""
    # Only classes, and only classes of those modules' kinds, are built: a sweep file must not call any other
    # callable it names (e.g. os:system), so it is refused before anything is called.
    cls = import_path(name, *keys, "name")
    if not inspect.isclass(cls):
        raise Problem(
            f"{name!r} is a {type(cls).__name__}, not a class, and only a class is built here; "
            f"name a class of {' or '.join(modules)} (or a subclass of one, as module:Class).",
            *keys,
            "name",
        )
    kinds = _classes_of(modules, *keys)
    if not any(issubclass(cls, kind) for kind in kinds):
        raise Problem(
            f"{name!r} is not a class of {' or '.join(modules)} nor a subclass of one, so it is "
            f"not built; name one of them or a subclass (e.g. of {kinds[0].__name__ if kinds else 'theirs'}).",
            *keys,
            "name",
        )
    return cls


def _found_class(name: str, modules: Sequence[str], *keys: Any) -> Callable[..., Any]:
    """The class ``name`` of the first of ``modules`` that has one (a close name suggested if none has)."""
    available: list[str] = []
    for module_name in modules:
        module = _option_module(module_name, *keys)
        cls = getattr(module, name, None)
        if inspect.isclass(cls):
            return cls
        available += [
            n for n in getattr(module, "__all__", dir(module)) if inspect.isclass(getattr(module, n, None))
        ]
    close = difflib.get_close_matches(name, available, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise Problem(
        f"{name!r} is not a class of {' or '.join(modules)}; {hint}available: {', '.join(sorted(available))}.",
        *keys,
        "name",
    )


def _unexpected_keyword(cls: Callable[..., Any], kwargs: Mapping[str, Any]) -> tuple[str | None, list[str]]:
    """The first of ``kwargs`` that ``cls(...)`` does not take (None: all taken, or its signature cannot tell),
    and the names it takes."""
    try:
        parameters = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):  # a class without an introspectable signature: the call itself decides
        return None, []
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None, []
    accepted = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return next((str(k) for k in kwargs if k not in accepted), None), accepted


def _option_module(module_name: str, *keys: Any) -> Any:
    """One of the modules an option's classes come from (a backend's), or a `Problem` saying to install it."""
    try:
        return importlib.import_module(module_name)
    except ImportError as error:
        raise Problem(f"cannot import {module_name} ({error}); install the backend.", *keys) from None


def _classes_of(modules: Sequence[str], *keys: Any) -> list[type]:
    """The classes the modules export (their bases first, as ``issubclass`` of any of them is what counts)."""
    found: list[type] = []
    for module_name in modules:
        module = _option_module(module_name, *keys)
        for attr in getattr(module, "__all__", dir(module)):
            value = getattr(module, attr, None)
            if inspect.isclass(value) and value is not object and value not in found:
                found.append(value)
    return sorted(found, key=lambda c: len(c.__mro__))


def substitute(value: Any, output_dir: str) -> Any:
    """``value`` with `OUTPUT_DIR_TOKEN` replaced by ``output_dir`` in every string."""
    if isinstance(value, str):
        return value.replace(OUTPUT_DIR_TOKEN, output_dir)
    if isinstance(value, list):
        return [substitute(v, output_dir) for v in value]
    if isinstance(value, Mapping):
        return {k: substitute(v, output_dir) for k, v in value.items()}
    return value


def check_training_args(kwargs: Mapping[str, Any], output_dir: str) -> None:
    """Build the `TrainingArguments` once so that a bad value is refused before any trial, at the key to blame."""
    from trainer import TrainingArguments

    try:
        TrainingArguments(output_dir=output_dir, **kwargs)
    except (TypeError, ValueError) as error:
        culprit = _culprit(lambda given: TrainingArguments(output_dir=output_dir, **given), kwargs)
        keys = ("training_args", culprit) if culprit is not None else ("training_args",)
        raise Problem(str(error), *keys) from None


def _culprit(build: Callable[[dict[str, Any]], Any], given: Mapping[str, Any]) -> str | None:
    """The first key of ``given`` that makes ``build`` fail on its own (the others left at their defaults), found
    by building again rather than by reading the error; None when only a combination fails."""
    for key, value in given.items():
        try:
            build({key: value})
        except (TypeError, ValueError):
            return str(key)
    return None


def build_space(raw: Mapping[str, Any]) -> Any:
    """The `spaces.SearchSpace` of the ``space`` mapping."""
    from spaces import ParameterError, SearchSpace

    try:
        return SearchSpace.from_dict(raw)
    except (TypeError, ValueError) as error:
        # A problem of one parameter names it; one of the space as a whole (a cycle of conditions) names none.
        keys = ("space", error.parameter) if isinstance(error, ParameterError) else ("space",)
        raise Problem(str(error), *keys) from None


def objective(value: str | list[str] | None) -> Any:
    """compute_objective for the ``objective`` key: None, a metric name, module:function or a list of names."""
    if isinstance(value, str) and ":" in value:
        return import_path(value, "objective")
    if isinstance(value, list):
        return MetricVector(value)
    return value


class MetricVector:
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
            else:  # a configuration error: the search stops at the first trial, as for a single metric name
                raise SearchConfigError(
                    f"objective {name!r} is not among the evaluation metrics {sorted(metrics)}; use one of those names.",
                    about="compute_objective",
                )
        return out


def drop_other_backend_options(data: dict[str, Any], lines: Any, backend: str | None) -> None:
    """--backend moves a sweep to another backend: the file's backend_options that the new backend does not take
    (written for the file's own backend) are left out, named in a warning; the common ones stay, and those given
    with --set are kept and checked against the new backend."""
    options = data.get("backend_options")
    if (
        backend is None
        or backend == data.get("backend")
        or not isinstance(options, dict)
        or ("backend_options",) in lines.overridden
    ):
        return
    from .backends import backend_names, get_backend

    if backend not in backend_names():
        return  # the sweep file's check names the unknown backend, at its flag
    accepted = get_backend(backend).all_options()
    dropped = [
        key for key in options if key not in accepted and ("backend_options", key) not in lines.overridden
    ]
    if dropped:
        for key in dropped:
            del options[key]
        logger.warning(
            "--backend %s: the file's backend_options for backend %r are left out (%s); give options for %s with "
            "--set backend_options.NAME=VALUE.",
            backend,
            data.get("backend"),
            ", ".join(map(str, dropped)),
            backend,
        )
