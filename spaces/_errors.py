"""Errors about one parameter of a space, carrying its name so that a caller (a sweep file's loader) can point
at it without reading the message."""

from __future__ import annotations

__all__ = ["ParameterError", "ParameterTypeError", "ParameterValueError", "about_parameter"]


class ParameterError(Exception):
    """A space refused one parameter; ``parameter`` is its name. Raised as `ParameterValueError` or
    `ParameterTypeError`, so ``except ValueError`` / ``except TypeError`` catch it as before."""

    def __init__(self, message: str, parameter: str) -> None:
        super().__init__(message)
        self.parameter = parameter

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        # Pickled with its parameter (from a worker process): the default would call cls(message) alone.
        return type(self), (str(self), self.parameter)


class ParameterValueError(ParameterError, ValueError):
    """A bad value of one parameter (bounds, choices, conditions)."""


class ParameterTypeError(ParameterError, TypeError):
    """A value of the wrong type for one parameter."""


def about_parameter(error: TypeError | ValueError, parameter: str) -> ParameterError:
    """``error`` (raised while building ``parameter``'s domain) as the same kind of error naming the parameter."""
    if isinstance(error, ParameterError):
        return error
    if isinstance(error, TypeError):
        return ParameterTypeError(str(error), parameter)
    return ParameterValueError(str(error), parameter)
