"""Portable parameter domains: ``Float``, ``Int``, ``Categorical`` and ``Fixed``.

Every domain is a frozen dataclass validated when it is built, so a bad range fails where it is written
rather than deep inside a backend. Bounds are **inclusive** on both ends for ``Float`` and ``Int``;
a backend whose native distribution excludes its upper bound (e.g. Ray's ``tune.randint``) converts at
its own edge, in its adapter's ``convert_space``.

A domain may be *conditional*: ``when={"optimizer": "sgd"}`` means the parameter exists only when the
parameter ``optimizer`` is active and equals ``"sgd"``. A value in ``when`` that is a ``list`` (or
``set``/``frozenset``) means "any of these values"; any other value, a tuple included, is one value.
"""

from __future__ import annotations

import abc
import math
import numbers
import random
import sys
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Categorical", "Domain", "Fixed", "Float", "Int", "domain_from_dict"]

# Values allowed as leaves of a plain (JSON/YAML-safe) dict.
_SCALARS = (str, int, float, bool, type(None))


def same_value(a: Any, b: Any) -> bool:
    """Equality that does not let ``True`` stand for ``1`` (Python says ``True == 1``); how domains compare values."""
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    try:
        return bool(a == b)
    except Exception:  # an exotic __eq__ (e.g. array-like) is simply "not the same value"
        return False


def _is_hashable(value: Any) -> bool:
    if not isinstance(value, Hashable):
        return False
    try:
        hash(value)  # a tuple is Hashable even when it holds a list
    except TypeError:
        return False
    return True


def _to_plain(value: Any, what: str) -> Any:
    """Turn ``value`` into a JSON/YAML-safe structure (tuples become lists) or say why it cannot."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, (list, tuple)):
        return [_to_plain(v, what) for v in value]
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return {k: _to_plain(v, what) for k, v in value.items()}
    raise TypeError(
        f"{what}: {value!r} (type {type(value).__name__}) cannot be written to a plain dict/YAML; "
        "only str, int, float, bool, None, lists/tuples of them and str-keyed dicts can. "
        "Use a plain value (e.g. a name) and map it to the object in your code."
    )


def _lists_to_tuples(value: Any) -> Any:
    """Inverse of ``_to_plain`` for choices: YAML/JSON have no tuples, so a list choice is read as a tuple."""
    if isinstance(value, list):
        return tuple(_lists_to_tuples(v) for v in value)
    return value


class _Conditions(Mapping):
    """An immutable, hashable, picklable ``{parent_name: (allowed values, ...)}`` mapping.

    A plain dict would make the frozen domain mutable and unhashable; ``MappingProxyType`` cannot be
    pickled, which Ray needs to ship a space to its workers.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, tuple[Any, ...]]):
        self._items = dict(items)

    def __getitem__(self, key: str) -> tuple[Any, ...]:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return repr(self._items)

    def __reduce__(self):
        return (_Conditions, (self._items,))


def _normalize_when(when: Any, owner: str) -> _Conditions | None:
    if when is None:
        return None
    if isinstance(when, _Conditions):
        return when
    if not isinstance(when, Mapping):
        raise TypeError(
            f"{owner}: when must be a mapping {{parent_name: value or list of values}}, got "
            f"{type(when).__name__} {when!r}; write e.g. when={{'optimizer': 'sgd'}}."
        )
    if not when:
        raise ValueError(
            f"{owner}: when must name at least one parent, got an empty mapping {when!r}; "
            "drop `when` for an unconditional parameter."
        )
    items: dict[str, tuple[Any, ...]] = {}
    for parent, raw in when.items():
        if not isinstance(parent, str) or not parent:
            raise TypeError(
                f"{owner}: when keys must be non-empty parameter names (str), got {parent!r}; "
                "use the parent parameter's name as the key."
            )
        # Only an explicit list/set means "several values": a tuple can itself be a categorical choice.
        values = list(raw) if isinstance(raw, (list, set, frozenset)) else [raw]
        if not values:
            raise ValueError(
                f"{owner}: when[{parent!r}] lists no values, got {raw!r}, so the parameter could never "
                "be active; give at least one value of the parent."
            )
        kept: list[Any] = []
        for value in values:
            if not _is_hashable(value):
                raise TypeError(
                    f"{owner}: when[{parent!r}] values must be hashable, got {value!r} "
                    f"(type {type(value).__name__}); use a str, number, bool, None or tuple."
                )
            if not any(same_value(value, seen) for seen in kept):
                kept.append(value)
        items[parent] = tuple(kept)
    return _Conditions(items)


def _when_to_plain(when: Mapping[str, tuple[Any, ...]], owner: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for parent, values in when.items():
        # One scalar value is written bare; anything else as a list so the reader cannot misread a
        # tuple value as a list of values.
        if len(values) == 1 and isinstance(values[0], _SCALARS):
            out[parent] = values[0]
        else:
            out[parent] = [_to_plain(v, f"{owner} when[{parent!r}]") for v in values]
    return out


def _when_from_plain(when: Any) -> Any:
    if not isinstance(when, Mapping):
        return when  # let _normalize_when report the type error
    return {
        parent: [_lists_to_tuples(v) for v in raw] if isinstance(raw, list) else raw
        for parent, raw in when.items()
    }


def _check_real(name: str, value: Any, owner: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{owner}: {name} must be a real number, got {type(value).__name__} {value!r}; "
            f"pass a float such as {name}=0.001 (in YAML write 1.0e-3 or 0.001)."
        )
    out = float(value)
    if not math.isfinite(out):
        raise ValueError(f"{owner}: {name} must be finite, got {name}={value!r}; give a finite bound.")
    return out


def _check_integer(name: str, value: Any, owner: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{owner}: {name} must be an int, got {type(value).__name__} {value!r}; "
            f"pass an integer such as {name}={_int_hint(value)} (or use Float for a real range)."
        )
    if not -_INT64 <= int(value) < _INT64:
        raise ValueError(
            f"{owner}: {name}={value!r} is beyond what the engines and the results table store (64-bit integers, "
            f"|value| < 2**63); use a smaller bound (or Float for a real range)."
        )
    return int(value)


_INT64 = 2**63


def _int_hint(value: Any) -> str:
    try:
        return str(int(value))
    except Exception:
        return "1"


def _check_log(log: Any, owner: str) -> None:
    if not isinstance(log, bool):
        raise TypeError(
            f"{owner}: log must be True or False, got {type(log).__name__} {log!r}; pass a bool "
            "(in YAML: true/false)."
        )


def _fmt(values: Sequence[Any]) -> str:
    return "[" + ", ".join(repr(v) for v in values) + "]"


class Domain(abc.ABC):
    """The set of values one parameter can take.

    Subclasses are frozen dataclasses validated at construction. The search machinery calls:

    - ``contains(value)`` when it validates a trial's parameters (``SearchSpace.validate_params``);
    - ``sample(rng)`` when the portable random sampler draws a value (``SearchSpace.sample``);
    - ``to_dict()`` when a space is written to a config (``SearchSpace.to_dict``/``to_yaml``).

    Backends do not sample through ``sample``: their adapter reads the domain's fields and maps it to
    the library's own distribution.
    """

    #: the ``"type"`` written by ``to_dict`` and read by ``SearchSpace.from_dict``
    kind: str = ""
    when: Mapping[str, tuple[Any, ...]] | None

    @abc.abstractmethod
    def contains(self, value: Any) -> bool:
        """Whether ``value`` is a value of this domain (bounds inclusive)."""

    @abc.abstractmethod
    def sample(self, rng: random.Random) -> Any:
        """Draw one value with ``rng``."""

    @abc.abstractmethod
    def _fields_dict(self) -> dict[str, Any]:
        """The type-specific part of ``to_dict`` (no ``type``, no ``when``)."""

    def to_dict(self) -> dict[str, Any]:
        """A plain JSON/YAML-safe dict, read back by ``SearchSpace.from_dict``.

        Optional fields (``step``, ``when``) are written only when set.
        """
        out: dict[str, Any] = {"type": self.kind, **self._fields_dict()}
        if self.when is not None:
            out["when"] = _when_to_plain(self.when, type(self).__name__)
        return out

    @property
    def is_conditional(self) -> bool:
        return self.when is not None

    def _repr_args(self) -> list[str]:
        return []

    def __repr__(self) -> str:
        args = self._repr_args()
        if self.when is not None:
            args.append(f"when={self.when!r}")
        return f"{type(self).__name__}({', '.join(args)})"


class _Numeric(Domain):
    """A number in ``[low, high]`` (both bounds inclusive), drawn uniformly, log-uniformly (``log=True``) or from
    the grid ``low + k * step``: the bounds, log and step rules ``Float`` and ``Int`` share, checked once here.

    A subclass is the dataclass that declares the fields, and says what differs with the kind of number:
    ``_number`` (check a bound), ``_step_value`` (check the step; ``_NO_STEP`` is its "no step"), ``_LOG_LOW``
    (what ``log=True`` asks of ``low``), ``_check_divides``, ``_grid_size`` and ``_on_grid`` (the grid, exact for
    integers, within a relative 1e-9 for reals), ``_number_or_none`` and ``_log_draw``.
    """

    low: float
    high: float
    log: bool
    step: float | None
    #: the ``step`` value that means "no grid beyond the numbers' own" (written by neither ``to_dict`` nor repr)
    _NO_STEP: float | None = None
    #: what ``log=True`` asks of ``low``, and the fix that meets it
    _LOG_LOW: tuple[str, str] = ("low > 0", "raise low above 0")

    def __post_init__(self) -> None:
        owner = type(self).__name__
        low = self._number("low", self.low)
        high = self._number("high", self.high)
        _check_log(self.log, owner)
        if low >= high:
            fix = "swap them or widen the range" if low > high else "use Fixed(value) for a constant"
            raise ValueError(f"{owner}: low must be < high, got low={low!r}, high={high!r}; {fix}.")
        if not math.isfinite(high - low):  # only reals overflow; a log range (low > 0) never does
            raise ValueError(
                f"{owner}: high - low must be a finite number, got low={low!r}, high={high!r} (high - low "
                f"overflows to inf, so no value can be drawn uniformly); narrow the range (high - low at most "
                f"{sys.float_info.max:.4g})."
            )
        if self.log and low <= 0:
            need, fix = self._LOG_LOW
            raise ValueError(f"{owner}: log=True needs {need}, got low={low!r}; {fix} or use log=False.")
        step = self._step_value(self.step)
        if self.log and step != self._NO_STEP:
            raise ValueError(
                f"{owner}: log=True together with step={step!r} is not supported (a log scale has no even "
                "step); drop step or set log=False."
            )
        if step is not None:
            if step <= 0:
                raise ValueError(f"{owner}: step must be > 0, got step={step!r}; give a positive step.")
            self._check_divides(low, high, step)
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)
        object.__setattr__(self, "step", step)
        object.__setattr__(self, "when", _normalize_when(self.when, owner))

    @abc.abstractmethod
    def _number(self, name: str, value: Any) -> float:
        """``value`` (the argument ``name``) as a number of this kind; `TypeError`/`ValueError` saying the fix."""

    @abc.abstractmethod
    def _step_value(self, step: Any) -> float | None:
        """``step`` as this kind's step (``None`` where there is no grid); `TypeError` saying the fix."""

    @abc.abstractmethod
    def _check_divides(self, low: float, high: float, step: float) -> None:
        """Raise `ValueError`, with a fix, when ``step`` does not divide ``high - low``."""

    @abc.abstractmethod
    def _grid_size(self) -> int:
        """How many steps lie between ``low`` and ``high``."""

    @abc.abstractmethod
    def _on_grid(self, value: float) -> bool:
        """Whether ``value`` (within the bounds) is ``low + k * step`` for a whole ``k``."""

    @abc.abstractmethod
    def _number_or_none(self, value: Any) -> float | None:
        """``value`` as a number of this kind, or ``None`` when it is not one (``contains`` is then false)."""

    @abc.abstractmethod
    def _log_draw(self, rng: random.Random) -> float:
        """One log-uniform draw, before it is clamped to the bounds."""

    def contains(self, value: Any) -> bool:
        v = self._number_or_none(value)
        if v is None or not (self.low <= v <= self.high):
            return False
        return self.step is None or self._on_grid(v)

    def sample(self, rng: random.Random) -> Any:
        if self.log:
            return min(max(self._log_draw(rng), self.low), self.high)
        if self.step is None:
            return min(max(rng.uniform(self.low, self.high), self.low), self.high)
        n = self._grid_size()
        k = rng.randint(0, n)
        # The top grid point is returned as ``high`` itself rather than low + n * step, which floating-point
        # error can push just above the bound.
        return self.high if k == n else min(self.low + k * self.step, self.high)

    def _fields_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"low": self.low, "high": self.high, "log": self.log}
        if self.step != self._NO_STEP:
            out["step"] = self.step
        return out

    def _repr_args(self) -> list[str]:
        args = [f"low={self.low!r}", f"high={self.high!r}"]
        if self.log:
            args.append("log=True")
        if self.step != self._NO_STEP:
            args.append(f"step={self.step!r}")
        return args


@dataclass(frozen=True, repr=False)
class Float(_Numeric):
    """A real number in ``[low, high]`` (both bounds inclusive).

    Args:
        low, high: finite bounds, ``low < high``, ``high - low`` finite too.
        log: sample log-uniformly (needs ``low > 0``); cannot be combined with ``step``.
        step: if set, only ``low + k * step`` values (``k = 0, 1, ...``) up to ``high``; it must divide
            ``high - low`` (up to a relative tolerance of 1e-9).
        when: condition on other parameters, see the module docstring.
    """

    low: float
    high: float
    log: bool = False
    step: float | None = None
    when: Mapping[str, Any] | None = None  # stored as an immutable {parent: (values, ...)}

    kind = "float"

    def _number(self, name: str, value: Any) -> float:
        return _check_real(name, value, "Float")

    def _step_value(self, step: Any) -> float | None:
        return None if step is None else _check_real("step", step, "Float")

    def _check_divides(self, low: float, high: float, step: float) -> None:
        n = (high - low) / step
        if round(n) < 1 or abs(n - round(n)) > 1e-9 * max(1.0, n):
            raise ValueError(
                f"Float: step must divide high - low, got step={step!r} for low={low!r}, "
                f"high={high!r} (high - low = {high - low!r}); choose a step such that "
                "(high - low) / step is a whole number."
            )

    def _grid_size(self) -> int:
        assert self.step is not None  # only asked of a grid
        return round((self.high - self.low) / self.step)

    def _on_grid(self, value: float) -> bool:
        assert self.step is not None
        k = (value - self.low) / self.step
        return abs(k - round(k)) <= 1e-9 * max(1.0, abs(k))

    def _number_or_none(self, value: Any) -> float | None:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return None
        return float(value)

    def _log_draw(self, rng: random.Random) -> float:
        return math.exp(rng.uniform(math.log(self.low), math.log(self.high)))


@dataclass(frozen=True, repr=False)
class Int(_Numeric):
    """An integer in ``[low, high]`` (both bounds inclusive).

    Args:
        low, high: ints, ``low < high``.
        log: sample log-uniformly (needs ``low >= 1``); only with ``step=1``.
        step: only ``low + k * step`` values; must be a positive int dividing ``high - low`` (None: 1).
        when: condition on other parameters, see the module docstring.
    """

    low: int
    high: int
    log: bool = False
    step: int = 1  # None is taken as 1 (see _step_value)
    when: Mapping[str, Any] | None = None  # stored as an immutable {parent: (values, ...)}

    kind = "int"
    _NO_STEP = 1
    _LOG_LOW = ("low >= 1", "raise low to 1")

    def _number(self, name: str, value: Any) -> int:
        return _check_integer(name, value, "Int")

    def _step_value(self, step: Any) -> int:
        if step is None:  # as Float's step=None: no step beyond the integers' own
            return 1
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise TypeError(
                f"Int: step must be an int, got {type(step).__name__} {step!r}; "
                "pass a whole number such as step=2 (or use Float for a real step)."
            )
        return int(step)

    def _check_divides(self, low: float, high: float, step: float) -> None:
        if (high - low) % step:
            lower = low + (high - low) // step * step  # the last value of the grid below high
            fix = (
                f"move high to {lower} or {lower + step}"
                if lower > low
                else f"a step of at most {high - low} (e.g. {high - low}), or high={low + step}"
            )
            raise ValueError(
                f"Int: step must divide high - low, got step={step!r} for low={low!r}, high={high!r} "
                f"(high - low = {high - low}); pick a step that divides it, or {fix}."
            )

    def _grid_size(self) -> int:
        return (self.high - self.low) // self.step

    def _on_grid(self, value: float) -> bool:
        return (value - self.low) % self.step == 0

    def _number_or_none(self, value: Any) -> int | None:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            return None
        return int(value)

    def _log_draw(self, rng: random.Random) -> float:
        # Widen by half a unit on each side so that rounding gives both bounds a fair share (then clamped
        # against floating-point drift).
        return round(math.exp(rng.uniform(math.log(self.low - 0.5), math.log(self.high + 0.5))))


@dataclass(frozen=True, repr=False)
class Categorical(Domain):
    """One of a list of values, each returned exactly as given, in the given order.

    Choices may be any hashable values; to be written to YAML/JSON they must be str, int, float,
    bool, None or tuples of those (a tuple is written as a list and read back as a tuple). Choices
    that compare equal in Python (``1``, ``1.0`` and ``True``) count as duplicates.
    """

    choices: Sequence[Any]  # stored as a tuple
    when: Mapping[str, Any] | None = None  # stored as an immutable {parent: (values, ...)}

    kind = "categorical"

    def __post_init__(self) -> None:
        choices = self.choices
        if isinstance(choices, (str, bytes)) or not isinstance(choices, Sequence):
            hint = " (sets have no stable order)" if isinstance(choices, (set, frozenset)) else ""
            raise TypeError(
                f"Categorical: choices must be a list or tuple, got {type(choices).__name__} "
                f"{choices!r}{hint}; write e.g. Categorical(['adamw', 'sgd'])."
            )
        choices = tuple(choices)
        if not choices:
            raise ValueError(
                f"Categorical: choices must not be empty, got {self.choices!r}; give at least one value."
            )
        seen: dict[Any, int] = {}
        for i, choice in enumerate(choices):
            if not _is_hashable(choice):
                raise TypeError(
                    f"Categorical: choices must be hashable, got {choice!r} (type "
                    f"{type(choice).__name__}) at position {i}; use a tuple instead of a list, or a "
                    "name that your code maps to the object."
                )
            if isinstance(choice, float) and math.isnan(choice):
                raise ValueError(
                    f"Categorical: choices must not contain NaN (it never equals itself), got {choice!r} "
                    f"at position {i}; remove it."
                )
            if choice in seen:
                j = seen[choice]
                raise ValueError(
                    f"Categorical: choices must be unique, got duplicates {choices[j]!r} (position {j}) and "
                    f"{choice!r} (position {i}), which compare equal; remove one of them."
                )
            seen[choice] = i
        object.__setattr__(self, "choices", choices)
        object.__setattr__(self, "when", _normalize_when(self.when, "Categorical"))

    def contains(self, value: Any) -> bool:
        return any(same_value(value, choice) for choice in self.choices)

    def sample(self, rng: random.Random) -> Any:
        return self.choices[rng.randrange(len(self.choices))]

    def _fields_dict(self) -> dict[str, Any]:
        return {"choices": [_to_plain(c, "Categorical choice") for c in self.choices]}

    def _repr_args(self) -> list[str]:
        return [_fmt(self.choices)]


@dataclass(frozen=True, repr=False)
class Fixed(Domain):
    """A constant. In a ``SearchSpace`` a plain value ``3`` or ``"adamw"`` means ``Fixed(value)``.

    The value is returned as is (not copied) and need not be hashable; it cannot be a condition
    parent unless it is hashable. A tuple value is written to YAML as a list and read back as a list.
    """

    value: Any
    when: Mapping[str, Any] | None = None  # stored as an immutable {parent: (values, ...)}

    kind = "fixed"

    def __post_init__(self) -> None:
        if isinstance(self.value, Domain):
            raise TypeError(
                f"Fixed: value must be a plain value, got the domain {self.value!r}; use the domain "
                "directly instead of wrapping it in Fixed."
            )
        object.__setattr__(self, "when", _normalize_when(self.when, "Fixed"))

    def contains(self, value: Any) -> bool:
        return same_value(value, self.value)

    def sample(self, rng: random.Random) -> Any:
        return self.value

    def _fields_dict(self) -> dict[str, Any]:
        return {"value": _to_plain(self.value, "Fixed value")}

    def _repr_args(self) -> list[str]:
        return [repr(self.value)]


_DOMAIN_KEYS: dict[str, tuple[type[Domain], tuple[str, ...], tuple[str, ...]]] = {
    # kind: (class, required keys, optional keys)
    "float": (Float, ("low", "high"), ("log", "step", "when")),
    "int": (Int, ("low", "high"), ("log", "step", "when")),
    "categorical": (Categorical, ("choices",), ("when",)),
    "fixed": (Fixed, ("value",), ("when",)),
}


def domain_from_dict(spec: Any, name: str = "?") -> Domain:
    """Build a domain from its ``to_dict`` form; ``name`` (the parameter) is used in error messages.

    A ``Domain`` is returned as is; a value that is not a mapping means ``Fixed(value)``.
    """
    if isinstance(spec, Domain):
        return spec
    if not isinstance(spec, Mapping):
        return Fixed(spec)
    accepted_types = ", ".join(repr(k) for k in _DOMAIN_KEYS)
    if "type" not in spec:
        raise ValueError(
            f"parameter {name!r}: a domain dict needs a 'type' key, got {dict(spec)!r}; use one of "
            f"{accepted_types} (a constant dict is written {{type: fixed, value: {{...}}}})."
        )
    kind = spec["type"]
    if (
        not isinstance(kind, str) or kind not in _DOMAIN_KEYS
    ):  # (a list or dict type is unhashable: no `in` first)
        raise ValueError(
            f"parameter {name!r}: unknown domain type {kind!r}; accepted types are {accepted_types}."
        )
    cls, required, optional = _DOMAIN_KEYS[kind]
    allowed = ("type", *required, *optional)
    for key in spec:
        if key not in allowed:
            raise ValueError(
                f"parameter {name!r}: unknown key {key!r} for type {kind!r}; accepted keys are "
                f"{', '.join(allowed)}."
            )
    for key in required:
        if key not in spec:
            raise ValueError(
                f"parameter {name!r}: type {kind!r} needs the key {key!r}, got keys "
                f"{', '.join(map(str, spec))}; add it."
            )
    kwargs = {k: v for k, v in spec.items() if k != "type"}
    if "when" in kwargs:
        kwargs["when"] = _when_from_plain(kwargs["when"])
    if cls is Categorical:
        choices = kwargs["choices"]
        if isinstance(choices, list):
            kwargs["choices"] = [_lists_to_tuples(c) for c in choices]
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"parameter {name!r}: {exc}") from exc
