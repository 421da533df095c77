"""Validation helpers of `TrainingArguments`: each returns the normalised value or raises a ValueError that names
the field, the offending value and what to pass instead."""

from __future__ import annotations

import enum
import json
import math
import numbers
import os
import re
import socket
from collections.abc import Mapping
from datetime import datetime
from typing import Any, NoReturn


class _StrEnum(str, enum.Enum):
    """A str-valued enum whose ``str()`` and ``format()`` give the bare value (Python 3.10 has no StrEnum)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, format_spec: str) -> str:
        return format(str(self.value), format_spec)


# ----------------------------------------------------------------------------------------------------------
# Validation helpers. Each one returns the normalised value or raises a ValueError that names the field,
# the offending value and what to pass instead. Those that may return None are typed `-> Any`: the precise
# type of each value is the one declared on the dataclass field it is assigned to.
# ----------------------------------------------------------------------------------------------------------


def _fail(name: str, value: Any, constraint: str, fix: str) -> NoReturn:
    raise ValueError(f"{name} must be {constraint}, got {value!r}; {fix}.")


def _is_bool(value: Any) -> bool:
    # numpy.bool_ is not a subclass of bool but is what numpy-based samplers hand out.
    # (numpy is not imported for this: the check must not make numpy a dependency of the arguments.)
    kind = type(value)
    return isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_"))


def _as_bool(name: str, value: Any, *, allow_none: bool = False) -> Any:
    if value is None and allow_none:
        return None
    if not _is_bool(value):
        extra = " or None" if allow_none else ""
        _fail(name, value, f"a bool{extra}", "pass True or False")
    return bool(value)


def _as_int(
    name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None, allow_none: bool = False
) -> Any:
    if value is None and allow_none:
        return None
    bounds = ""
    if minimum is not None and maximum is not None:
        bounds = f" between {minimum} and {maximum}"
    elif minimum is not None:
        bounds = f" >= {minimum}"
    kind = "a positive integer" if minimum == 1 and maximum is None else f"an integer{bounds}"
    constraint = kind + (" or None" if allow_none else "")
    if minimum is not None and maximum is not None:
        fix = f"pass an int in [{minimum}, {maximum}]"
    elif minimum is not None:
        fix = f"pass {minimum} or more"
    else:
        fix = "pass an int"
    # bool is an int subclass, but True as a batch size is always a mistake.
    if _is_bool(value) or not isinstance(value, numbers.Integral):
        _fail(name, value, constraint, fix)
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        _fail(name, value, constraint, fix)
    return value


def _as_float(
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    maximum_inclusive: bool = True,
) -> float:
    if _is_bool(value) or not isinstance(value, numbers.Real):
        _fail(name, value, "a number", "pass an int or a float")
    value = float(value)
    if math.isnan(value):
        _fail(name, value, "a number", "pass a finite value, not NaN")
    if minimum is not None and value < minimum:
        upper = "" if maximum is None else f" and {'<=' if maximum_inclusive else '<'} {maximum}"
        _fail(name, value, f">= {minimum}{upper}", f"pass {minimum} or more")
    if maximum is not None and (value > maximum or (not maximum_inclusive and value == maximum)):
        op = "<=" if maximum_inclusive else "<"
        lower = "" if minimum is None else f">= {minimum} and "
        _fail(name, value, f"{lower}{op} {maximum}", f"pass a value {op} {maximum}")
    return value


def _as_steps(name: str, value: Any, *, allow_zero: bool, allow_none: bool = False) -> Any:
    """A step count (int >= 1) or, when in (0, 1), a ratio of the total number of training steps."""
    if value is None and allow_none:
        return None
    constraint = (
        "a whole number of steps (>= 1) or a ratio of the total training steps in (0, 1)"
        + (", or 0" if allow_zero else "")
        + (", or None" if allow_none else "")
    )
    if _is_bool(value) or not isinstance(value, numbers.Real):
        _fail(name, value, constraint, "pass e.g. 500 (steps) or 0.1 (10% of the training steps)")
    value = float(value)
    if math.isnan(value) or value < 0 or (value == 0 and not allow_zero):
        _fail(name, value, constraint, "pass e.g. 500 (steps) or 0.1 (10% of the training steps)")
    if value >= 1:
        if not value.is_integer():
            _fail(name, value, constraint, f"pass {math.floor(value)} or {math.ceil(value)}")
        return int(value)
    return 0 if value == 0 else value


def _as_enum(name: str, value: Any, enum_cls: type[_StrEnum]) -> Any:
    if isinstance(value, enum_cls):
        return value
    accepted = ", ".join(repr(m.value) for m in enum_cls)
    if isinstance(value, str):
        try:
            return enum_cls(value.strip().lower())
        except ValueError:
            pass
    _fail(name, value, f"one of {accepted}", "pass one of those strings")


def _as_str(name: str, value: Any, *, allow_none: bool = False, path: bool = False) -> Any:
    if value is None and allow_none:
        return None
    if path and isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        kind = "a non-empty string" + (" or path" if path else "") + (" or None" if allow_none else "")
        _fail(name, value, kind, "pass a string")
    return value


def _as_dict(name: str, value: Any) -> dict[str, Any]:
    # A JSON object string is accepted too: that is how the value arrives from a command line or an env var.
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError:
            _fail(name, value, "a dict or a JSON object string", 'pass e.g. {"key": 1}')
    if not isinstance(value, Mapping):
        _fail(name, value, "a dict", 'pass e.g. {"key": 1} (or {} for none)')
    bad = [k for k in value if not isinstance(k, str)]
    if bad:
        _fail(name, value, "a dict with string keys", f"use string keys instead of {bad!r}")
    return dict(value)  # a copy: the caller's dict must not alias the arguments


_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def _parse_size(name: str, value: Any) -> int:
    """Bytes from an int or a string like ``"5GB"`` (decimal units) or ``"512MiB"`` (binary units)."""
    fix = 'pass e.g. "5GB", "500MB", "512MiB" or an int number of bytes'
    if _is_bool(value):
        _fail(name, value, "a size > 0", fix)
    if isinstance(value, numbers.Integral):
        size = int(value)
    elif (
        isinstance(value, str) and (match := _SIZE_RE.match(value)) and match.group(2).lower() in _SIZE_UNITS
    ):
        size = int(float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()])
    else:
        _fail(name, value, "a size > 0", fix)
    if size <= 0:
        _fail(name, value, "a size > 0", fix)
    return size


def _default_logging_dir(output_dir: str, run_folder: str | None = None) -> str:
    if run_folder is None:
        run_folder = f"{datetime.now().strftime('%Y-%m-%d_%H-%M-%S')}_{socket.gethostname()}"
    return os.path.join(output_dir, "runs", run_folder)


def _jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if _is_bool(value):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if value is None or isinstance(value, str):
        return value
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        return str(value).removeprefix(
            "torch."
        )  # "float32", as transformers writes a dtype (torch stays unimported)
    return str(value)
