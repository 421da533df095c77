"""Text formatting shared by the Markdown and HTML reports (numbers, durations, dates, parameter values)."""

from __future__ import annotations

import json
import math
import sys
from datetime import datetime, timezone
from typing import Any

__all__ = ["fmt_datetime", "fmt_duration", "fmt_number", "fmt_params", "fmt_value", "is_missing"]

DASH = "—"


def is_missing(value: Any) -> bool:
    """None, NaN, pandas NA/NaT: a value the reports show as a dash."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, str | int | list | dict | tuple):
        return False
    if isinstance(value, datetime):
        return value != value  # pandas' NaT is a datetime that equals nothing, itself included
    if (
        "pandas" not in sys.modules
    ):  # pandas' NA and NaT exist only once it is imported (importing it: ~0.5 s)
        try:
            return bool(value != value)  # numpy's NaN and NaT
        except (TypeError, ValueError):  # an array: not one missing value
            return False
    try:
        import pandas as pd

        result = pd.isna(value)
    except (ImportError, TypeError, ValueError):
        return False
    return result is True or (isinstance(result, bool) and result)


def fmt_number(value: Any, digits: int = 6) -> str:
    if is_missing(value):
        return DASH
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    try:
        return f"{float(value):.{digits}g}"
    except (TypeError, ValueError):
        return str(value)


def fmt_value(value: Any) -> str:
    """A parameter value as a person would write it: floats short, strings bare, the rest as JSON/repr."""
    if is_missing(value):
        return DASH
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, int)):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return repr(value)


def fmt_params(params: dict[str, Any]) -> str:
    return ", ".join(f"{name}={fmt_value(params[name])}" for name in sorted(params)) or DASH


def fmt_duration(seconds: float | None) -> str:
    if seconds is None or is_missing(seconds):
        return DASH
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {sec:02d}s"
    return f"{minutes}m {sec:02d}s"


def fmt_datetime(value: datetime | None) -> str:
    if value is None or is_missing(value):
        return DASH
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc)
        return value.strftime("%Y-%m-%d %H:%M:%S UTC")
    return value.strftime("%Y-%m-%d %H:%M:%S")
