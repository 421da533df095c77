"""Errors of the sweep file: ``file:line: key: message``, lines from the YAML node marks, pydantic's errors mapped.

`ConfigError` is what ``hpsearch run`` prints for anything wrong with the sweep file or its flags (exit code 2, no
traceback); `Lines` knows where every key is; `validate` runs a pydantic model and turns each of its errors into
one with the key, the value and the fix, suggesting the closest key for an unknown one.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from . import _yaml
from ._sweep_resolve import Problem
from .errors import SearchConfigError

__all__ = ["ConfigError", "Lines", "combine", "located", "show", "unknown_key", "validate"]


class ConfigError(SearchConfigError):
    """A problem in the sweep file or the command line: says where (file:line and key), what, and the fix.

    ``also`` holds further problems found at the same time; they are listed after this one.
    """

    def __init__(
        self,
        message: str,
        key: str | None = None,
        line: int | None = None,
        path: str | None = None,
        also: Sequence[ConfigError] = (),
    ) -> None:
        self.problem = message
        self.key = key
        self.line = line
        self.path = path
        self.also = list(also)
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        text = f"{where}{key + ': ' if key else ''}{message}"
        super().__init__(text + "".join(f"\n{other}" for other in self.also))


class Lines:
    """Line numbers (1-based) of the keys of a sweep file, and errors that point at them."""

    def __init__(self, path: str, root: Any) -> None:
        self.path = path
        self._lines = _yaml.key_lines(root)
        #: Keys set on the command line -> the flag that set them: an error about them points there, not at a line.
        self.overridden: dict[tuple[Any, ...], str] = {}

    def line(self, *keys: Any) -> int | None:
        """The line of ``keys`` or of its nearest ancestor present in the file."""
        path = tuple(keys)
        while path:
            if path in self._lines:
                return self._lines[path]
            path = path[:-1]
        return self._lines.get(())

    def error(self, message: str, *keys: Any) -> ConfigError:
        key = ".".join(str(k) for k in keys) if keys else None
        for i in range(len(keys), 0, -1):
            flag = self.overridden.get(tuple(keys[:i]))
            if flag is not None:
                return ConfigError(f"{message} (set by {flag})", key=key, path=self.path)
        if keys and tuple(keys) not in self._lines:
            # A key the file does not have, made by a deeper --set (--set a.b=1 for an unknown key a).
            flags = [flag for path, flag in self.overridden.items() if path[: len(keys)] == tuple(keys)]
            if flags:
                return ConfigError(f"{message} (set by {flags[0]})", key=key, path=self.path)
        return ConfigError(message, key=key, line=self.line(*keys), path=self.path)


@contextlib.contextmanager
def located(lines: Lines) -> Iterator[None]:
    """Turn a `Problem` of the resolvers into the error at its keys' line."""
    try:
        yield
    except Problem as problem:
        raise lines.error(problem.message, *problem.keys) from None


def show(value: Any) -> str:
    if value is None:
        return "null"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 200 else text[:197] + '...'}"


def _data_path(data: Any, loc: Sequence[Any]) -> tuple[Any, ...]:
    """The keys of the value an error is about: ``loc`` without pydantic's union member tags."""
    path: list[Any] = []
    node = data
    for part in loc:
        in_mapping = isinstance(node, Mapping) and part in node
        if not in_mapping and not (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        ):
            continue  # a union member's tag such as 'int' or 'list[str]', or a missing key
        node = node[part]
        path.append(part)
    return tuple(path)


def validate(
    model: type[BaseModel],
    data: Mapping[str, Any],
    lines: Lines,
    prefix: tuple[Any, ...],
    expected: Callable[[str], tuple[str, str | None]],
    unknown: Callable[[str], str],
) -> BaseModel:
    """``model.model_validate(data)``; every error as ``file:line: key: message`` (one `ConfigError`, in file order).

    ``expected(name)`` says what a value of field ``name`` must be (and an example line, or None); ``unknown(key)``
    is the message for a key the model does not have.
    """
    try:
        return model.model_validate(data)
    except ValidationError as error:
        found: dict[tuple[Any, ...], tuple[int, str]] = {}  # path -> (priority, message)
        missing: list[str] = []
        for item in error.errors(include_url=False):
            loc, kind = item["loc"], item["type"]
            if kind == "missing":
                field = model.model_fields[str(loc[0])]
                extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
                missing.append(
                    f"the required key {loc[0]!r} ({field.description}) is missing; add e.g. "
                    f"`{extra.get('example', f'{loc[0]}: ...')}`."
                )
                continue
            path = _data_path(data, loc)
            if kind == "extra_forbidden":
                entry = (0, unknown(str(path[-1])))
            elif "[key]" in loc:
                entry = (
                    0,
                    f'a key must be a string, got {show(item["input"])}; quote it, e.g. "{item["input"]}".',
                )
            elif kind == "value_error":
                entry = (1, str(item["ctx"]["error"]))
            else:
                what, example = expected(str(path[0])) if path else ("a mapping", None)
                fix = f"; write e.g. `{example}`." if example else "."
                entry = (2, f"expected {what}, got {show(item['input'])}{fix}")
            if path not in found or entry[0] < found[path][0]:
                found[path] = entry
        # A union reports its value and, deeper, its members' items: keep the deepest error.
        paths = [p for p in found if not any(len(q) > len(p) and q[: len(p)] == p for q in found)]
        errors = [lines.error(message) for message in missing]
        errors += [lines.error(found[p][1], *(prefix + p)) for p in paths]
        raise combine(errors) from None


def combine(errors: Sequence[ConfigError]) -> ConfigError:
    """One error listing ``errors`` (and what each lists) in the order of the file."""
    flat = sorted(
        (e for error in errors for e in (error, *error.also)), key=lambda e: (e.line is None, e.line or 0)
    )
    first = flat[0]
    return ConfigError(
        first.problem,
        first.key,
        first.line,
        first.path,
        also=[ConfigError(e.problem, e.key, e.line, e.path) for e in flat[1:]],
    )


def unknown_key(accepted: Sequence[str], what: str, fallback: str) -> Callable[[str], str]:
    def message(key: str) -> str:
        close = difflib.get_close_matches(key, accepted, n=1)
        return f"{key!r} is not {what}; " + (f"did you mean {close[0]!r}?" if close else fallback)

    return message
