"""Portable spaces as SigOpt parameters and conditionals, and SigOpt's assignments read back.

Bounds are inclusive on both sides, as in `spaces` and in SigOpt. See the package docstring for the mapping.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..._params import argument_types, check_param_names, check_space_against_trainer
from ...errors import HPSearchError, SearchConfigError
from ..base import call_native_space

if TYPE_CHECKING:
    from spaces import SearchSpace
    from trainer import Trainer

logger = logging.getLogger(__name__)
_NATIVE_TYPES = ("double", "int", "categorical")

__all__ = ["Converted", "Encoding", "check_native", "labels_for", "portable_to_sigopt", "same_assignments"]

_MAX_NAME = 100  # SigOpt's limit on experiment, parameter and categorical value names


class Encoding:
    """How one portable parameter travels through SigOpt and back."""

    def __init__(
        self,
        kind: str,
        labels: dict[str, Any] | None = None,
        low: float = 0.0,
        step: float | None = None,
        high: float = 0.0,
        constant: Any = None,
    ) -> None:
        self.kind = kind  # "float", "int", "grid_float", "grid_int", "categorical", "constant"
        self.labels = labels or {}
        self.low = low
        self.step = step
        self.high = high
        self.constant = constant

    def encode(self, value: Any) -> Any:
        """The SigOpt assignment of a parameter value (None for a constant, which SigOpt does not see)."""
        if self.kind == "float":
            return float(value)
        if self.kind == "int":
            return int(value)
        if self.kind in ("grid_int", "grid_float"):
            assert self.step is not None
            return round((value - self.low) / self.step)
        if self.kind == "categorical":
            return _label_of(self.labels, value)
        return None

    def decode(self, name: str, raw: Any) -> Any:
        if self.kind == "float":
            return float(raw)
        if self.kind == "int":
            return int(raw)
        if self.kind in ("grid_int", "grid_float"):
            k = int(raw)
            assert self.step is not None
            if self.kind == "grid_int":
                return int(self.low) + k * int(self.step)
            n = round((self.high - self.low) / self.step)
            # The last grid point is `high` itself: low + n * step can overshoot it by rounding.
            return self.high if k >= n else min(self.low + k * self.step, self.high)
        if self.kind == "categorical":
            try:
                return self.labels[str(raw)]
            except KeyError:
                raise HPSearchError(
                    f"SigOpt suggested {name}={raw!r}, which is not one of its categorical values "
                    f"{sorted(self.labels)}."
                ) from None
        return self.constant


def labels_for(name: str, choices: Sequence[Any]) -> dict[str, Any]:
    """Unique, readable SigOpt strings for categorical choices -> the original Python values."""
    plain = [str(c) for c in choices]
    counts: dict[str, int] = {}
    for text in plain:
        counts[text] = counts.get(text, 0) + 1
    out: dict[str, Any] = {}
    for i, (text, choice) in enumerate(zip(plain, choices)):
        # 1 and "1" (or True and "True") print alike: give those the position as well.
        if counts[text] > 1 or not text or len(text) > _MAX_NAME:
            text = f"{i}:{choice!r}"[:_MAX_NAME]
        out[text] = choice
    if len(out) != len(choices):  # cannot happen with the position prefix, but never map two values to one
        raise SearchConfigError(
            f"hp_space parameter {name!r}: could not label its choices {list(choices)!r}.",
            about=("hp_space", name),
        )
    return out


def _label_of(labels: Mapping[str, Any], value: Any) -> str:
    from spaces import same_value

    for text, choice in labels.items():
        if same_value(choice, value):
            return text
    raise KeyError(value)


class Converted:
    """The SigOpt form of a portable space: parameters, conditionals, and how to read an assignment back."""

    def __init__(
        self,
        parameters: list[dict[str, Any]],
        conditionals: list[dict[str, Any]],
        encodings: dict[str, Encoding],
    ) -> None:
        self.parameters = parameters
        self.conditionals = conditionals
        self.encodings = encodings

    def assignments(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The SigOpt assignments a trial with these parameters was given (constants and unknown names left out)."""
        encoded = {k: self.encodings[k].encode(v) for k, v in params.items() if k in self.encodings}
        return {k: v for k, v in encoded.items() if v is not None}


def portable_to_sigopt(space: SearchSpace) -> Converted:
    from spaces import Fixed

    encodings: dict[str, Encoding] = {}
    parents = {parent for name in space for parent in (space[name].when or {})}
    # Parents first: a parent's labels are needed to write its children's conditions.
    conditionals = _conditionals(space, parents, encodings)
    parameters: list[dict[str, Any]] = []
    for name in space.order:
        domain = space[name]
        if name in parents and not isinstance(domain, Fixed):
            continue  # already a conditional
        conditions = _conditions(space, domain, encodings)
        spec, encodings[name] = _parameter(name, domain)
        if spec is None:
            continue  # a constant: SigOpt does not see it
        if conditions:
            spec["conditions"] = conditions
        if len(name) > _MAX_NAME:
            raise SearchConfigError(
                f"hp_space parameter name {name[:40]!r}... is {len(name)} characters; SigOpt accepts at most "
                f"{_MAX_NAME}; shorten it.",
                about=("hp_space", name),
            )
        parameters.append(spec)
    _check_something_to_search(parameters, conditionals)
    _check_conditionals_covered(parameters, conditionals)
    return Converted(parameters, conditionals, encodings)


def _conditionals(
    space: SearchSpace, parents: set[str], encodings: dict[str, Encoding]
) -> list[dict[str, Any]]:
    """SigOpt's conditionals: one per parent (a parameter others depend on), each a flat Categorical; their
    encodings go into ``encodings``. A fixed parent is no conditional: its condition is always met."""
    from spaces import Categorical, Fixed

    conditionals: list[dict[str, Any]] = []
    for name in space.order:
        if name not in parents:
            continue
        domain = space[name]
        if isinstance(domain, Fixed):
            continue  # resolved by _conditions, once, for every child
        if not isinstance(domain, Categorical):
            raise SearchConfigError(
                f"hp_space parameter {name!r} ({domain!r}) has conditional parameters, but SigOpt conditionals "
                f"take only string values chosen from a list; make {name!r} a spaces.Categorical of its values.",
                about=("hp_space", name),
            )
        if domain.when:
            raise SearchConfigError(
                f"hp_space parameter {name!r} is itself conditional ({dict(domain.when)!r}) and has conditional "
                "parameters; SigOpt conditionals cannot be nested. Flatten the conditions (e.g. one Categorical "
                "whose values combine both choices).",
                about=("hp_space", name),
            )
        labels = labels_for(name, domain.choices)
        encodings[name] = Encoding("categorical", labels)
        conditionals.append({"name": name, "values": list(labels)})
    return conditionals


def _conditions(space: SearchSpace, domain: Any, encodings: Mapping[str, Encoding]) -> dict[str, list[str]]:
    """A parameter's SigOpt conditions: for each parent, the labels of the values it is active for."""
    from spaces import Fixed

    conditions: dict[str, list[str]] = {}
    for parent, allowed in (domain.when or {}).items():
        if isinstance(space[parent], Fixed):
            continue  # the space only accepts the fixed value itself in `when`: always met
        labels = encodings[parent].labels
        conditions[parent] = [_label_of(labels, v) for v in allowed]
    return conditions


def _parameter(name: str, domain: Any) -> tuple[dict[str, Any] | None, Encoding]:
    """One portable domain as a SigOpt parameter (None for a constant) and its encoding."""
    from spaces import Categorical, Fixed, Float, Int

    spec: dict[str, Any] = {"name": name}
    if isinstance(domain, Fixed):
        return None, Encoding("constant", constant=domain.value)
    if isinstance(domain, Categorical) and len(domain.choices) == 1:
        return None, Encoding("constant", constant=domain.choices[0])
    if isinstance(domain, Float):
        if domain.step is not None:
            n = round((domain.high - domain.low) / domain.step)
            spec.update(type="int", bounds={"min": 0, "max": n})
            return spec, Encoding("grid_float", low=domain.low, step=domain.step, high=domain.high)
        spec.update(type="double", bounds={"min": domain.low, "max": domain.high})
        if domain.log:
            spec["transformation"] = "log"
        return spec, Encoding("float")
    if isinstance(domain, Int):
        if domain.log:
            raise SearchConfigError(
                f"hp_space parameter {name!r} is {domain!r}, but SigOpt has no log scale for integers; use "
                f"spaces.Float({domain.low}, {domain.high}, log=True) and round it in model_init "
                "(int(round(trial[name]))), or drop log=True.",
                about=("hp_space", name),
            )
        if domain.step != 1:
            n = (domain.high - domain.low) // domain.step
            spec.update(type="int", bounds={"min": 0, "max": n})
            return spec, Encoding("grid_int", low=domain.low, step=domain.step, high=domain.high)
        spec.update(type="int", bounds={"min": domain.low, "max": domain.high})
        return spec, Encoding("int")
    if isinstance(domain, Categorical):
        labels = labels_for(name, domain.choices)
        spec.update(type="categorical", categorical_values=[{"name": text} for text in labels])
        return spec, Encoding("categorical", labels)
    raise SearchConfigError(
        f"hp_space parameter {name!r}: SigOpt cannot express {domain!r}.", about=("hp_space", name)
    )


def _check_something_to_search(parameters: list[dict[str, Any]], conditionals: list[dict[str, Any]]) -> None:
    if not parameters and not conditionals:
        raise SearchConfigError(
            "hp_space has nothing for SigOpt to search (every parameter is fixed); add at least one Float, Int "
            "or Categorical with two or more choices.",
            about="hp_space",
        )
    if not parameters:
        raise SearchConfigError(
            f"hp_space has only the categorical(s) {[c['name'] for c in conditionals]} that other parameters "
            "depend on, and SigOpt needs at least one parameter besides its conditionals; add one.",
            about="hp_space",
        )


def _check_conditionals_covered(parameters: list[dict[str, Any]], conditionals: list[dict[str, Any]]) -> None:
    """SigOpt wants every combination of conditional values to leave at least one parameter active."""
    if not conditionals or any("conditions" not in p for p in parameters):
        return
    names = [c["name"] for c in conditionals]
    for combination in itertools.product(*(c["values"] for c in conditionals)):
        chosen = dict(zip(names, combination))
        if not any(all(chosen[k] in v for k, v in p["conditions"].items()) for p in parameters):
            raise SearchConfigError(
                f"hp_space: when {chosen} no parameter is active, which SigOpt refuses (every combination of "
                "conditional values needs at least one parameter); add an unconditional parameter or a "
                "parameter for that case.",
                about="hp_space",
            )


def check_native(hp_space: Any, trainer: Trainer) -> tuple[list[dict[str, Any]], dict[str, type]]:
    """A native hp_space's SigOpt parameters, checked, and the int/float fields among its categoricals."""
    fields = argument_types(type(trainer.args))
    native_fields: dict[str, type] = {}
    numeric: dict[str, Any] = {}
    out: list[dict[str, Any]] = []
    for i, raw in enumerate(_native_parameters(hp_space)):
        spec = _native_parameter(i, raw)
        name = spec["name"]
        check_param_names([name], trainer)
        if spec["type"] in ("int", "double"):
            numeric[name] = _bounds_domain(name, spec)
        if name in fields and spec["type"] == "categorical":
            target = _numeric_type(fields[name])
            if target is not None:
                native_fields[name] = target
                _check_categorical_values(name, spec, target)
        out.append(spec)
    if numeric:  # the bounds must be values the trainer's arguments accept, as for a portable space
        from spaces import SearchSpace

        check_space_against_trainer(SearchSpace(numeric), trainer)
    return out, native_fields


def _native_parameters(hp_space: Any) -> list[Any] | tuple[Any, ...]:
    """The SigOpt parameter dicts a native hp_space gives (a list, or a callable returning one for None)."""
    try:
        parameters = call_native_space(hp_space, "sigopt") if callable(hp_space) else hp_space
    except SearchConfigError:
        raise
    except Exception as error:
        raise SearchConfigError(
            f"hp_space(None) raised {type(error).__name__}: {error}. A native SigOpt hp_space is a list of SigOpt "
            "parameter dicts, or a callable returning one when called with None (an Optuna-style "
            "`trial.suggest_*` space belongs to backend='optuna'; a dict of spaces domains works on every backend)."
        ) from error
    if not isinstance(parameters, list | tuple) or not parameters:
        raise SearchConfigError(
            "a native SigOpt hp_space must be (a callable returning) a non-empty list of SigOpt parameter "
            "dicts such as {'name': 'learning_rate', 'type': 'double', 'bounds': {'min': 1e-6, 'max': 1e-4}}, "
            f"got {type(parameters).__name__}."
        )
    return parameters


def _native_parameter(i: int, raw: Any) -> dict[str, Any]:
    """Parameter ``i`` of a native space as a dict with a name and a SigOpt type (a misspelled key read right)."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str) or not raw.get("name"):
        raise SearchConfigError(f"hp_space parameter #{i} must be a dict with a 'name' string, got {raw!r}.")
    spec = dict(raw)
    name = spec["name"]
    if spec.get("type") not in _NATIVE_TYPES:
        raise SearchConfigError(
            f"hp_space parameter {name!r}: type={spec.get('type')!r} must be one of {list(_NATIVE_TYPES)}.",
            about=("hp_space", name),
        )
    if "transformamtion" in spec:  # transformers' default space misspells the key; SigOpt rejects it
        logger.warning(
            "hp_space parameter %r: reading the misspelled key 'transformamtion' as 'transformation'.",
            name,
        )
        spec.setdefault("transformation", spec.pop("transformamtion"))
    return spec


def _check_categorical_values(name: str, spec: Mapping[str, Any], target: type) -> None:
    """Each categorical value of a numeric TrainingArguments field must read as that field's type."""
    for value in spec.get("categorical_values") or []:
        text = value.get("name") if isinstance(value, Mapping) else value
        try:
            target(text)
        except (TypeError, ValueError):
            raise SearchConfigError(
                f"hp_space parameter {name!r} is a TrainingArguments field of type {target.__name__}, but "
                f"its categorical value {text!r} cannot be read as {target.__name__}; list values "
                "such as '32'.",
                about=("hp_space", name),
            ) from None


def _bounds_domain(name: str, spec: Mapping[str, Any]) -> Any:
    """The spaces domain of an int/double parameter's ``bounds`` (which SigOpt requires), to check them."""
    from spaces import Float, Int

    bounds = spec.get("bounds")
    if not isinstance(bounds, Mapping) or not {"min", "max"} <= set(bounds):
        raise SearchConfigError(
            f"hp_space parameter {name!r} (type {spec['type']!r}) needs bounds {{'min': ..., 'max': ...}}, got "
            f"{bounds!r}; e.g. {{'name': {name!r}, 'type': {spec['type']!r}, 'bounds': {{'min': 1, 'max': 8}}}}.",
            about=("hp_space", name),
        )
    try:
        return (Int if spec["type"] == "int" else Float)(bounds["min"], bounds["max"])
    except (TypeError, ValueError) as error:
        raise SearchConfigError(
            f"hp_space parameter {name!r}: bounds {dict(bounds)!r} are not valid: {error}",
            about=("hp_space", name),
        ) from None


def same_assignments(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    if set(a) != set(b):
        return False
    for key, x in a.items():
        y = b[key]
        if isinstance(x, float) or isinstance(y, float):
            try:
                if not math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=1e-12):
                    return False
            except (TypeError, ValueError):
                return False
        elif x != y:
            return False
    return True


def _numeric_type(hint: Any) -> type | None:
    """int or float when a TrainingArguments field takes exactly that number type (Optional allowed)."""
    import typing

    args = typing.get_args(hint) or (hint,)
    base = {t for t in args if t is not type(None)}
    if base == {int}:
        return int
    if base == {float} or base == {int, float}:
        return float
    return None
