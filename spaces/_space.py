"""``SearchSpace``: an immutable mapping of parameter names to domains, with conditions."""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from ._domains import Domain, Fixed, Float, domain_from_dict, same_value
from ._errors import ParameterTypeError, ParameterValueError, about_parameter

__all__ = ["SearchSpace"]


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that also reads ``1e-5`` as a float, and refuses a key given twice in one mapping.

    PyYAML follows YAML 1.1, where a float needs a dot (``1.0e-5``), so the ``1e-5`` that people write
    for learning rates would silently become the *string* ``"1e-5"``; and it keeps the last of two equal keys
    silently, so a parameter (or a bound) written twice would lose its first version unseen.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if (
                key_node.tag == "tag:yaml.org,2002:merge"
            ):  # `<<: *base` then a key of its own overrides, as meant
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the constructor below says so
                continue
            if first is not None:
                where = f"line {line}" if first == line else f"lines {first} and {line}"
                raise ValueError(
                    f"SearchSpace.from_yaml: the key {key!r} is given twice in one mapping ({where}); YAML would keep "
                    "only the last one, so delete or rename one of them."
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


class _Dumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` that quotes the strings `_Loader` reads as floats (``"1e-5"``), so they stay strings."""


for _cls in (_Loader, _Dumper):
    _cls.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
        list("-+0123456789."),
    )


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(
            f"SearchSpace: parameter names must be non-empty strings, got {type(name).__name__} {name!r}; "
            "use a name such as 'learning_rate'."
        )
    # "/" is the separator of nested/flattened config keys (Ray Tune, result tables) and of paths;
    # whitespace breaks CLI overrides and YAML keys people type by hand.
    if "/" in name or any(c.isspace() for c in name):
        suggestion = re.sub(r"[/\s]+", "_", name)
        raise ValueError(
            f"SearchSpace: parameter names must not contain '/' or whitespace, got {name!r}; "
            f"use e.g. {suggestion!r}."
        )
    return name


def _describe(values: tuple[Any, ...]) -> str:
    return repr(values[0]) if len(values) == 1 else "one of [" + ", ".join(map(repr, values)) + "]"


class SearchSpace(Mapping[str, Domain]):
    """An immutable mapping ``{name: Domain}`` describing what a hyperparameter search may try.

    Plain values are wrapped as ``Fixed``: ``SearchSpace({"optimizer": "adamw", "lr": Float(1e-5, 1e-3,
    log=True)})``. Conditional parameters (``when=``) must name parents that are in the space, are
    ``Categorical``, ``Int`` or ``Fixed`` (a continuous parent would almost never equal a given
    value), and list only values the parent can take; conditions must not form a cycle.

    Iteration follows insertion order; ``order`` puts parents before their children.
    """

    __slots__ = ("_domains", "_order")

    def __init__(self, mapping: Mapping[str, Any]):
        if not isinstance(mapping, Mapping):
            raise TypeError(
                f"SearchSpace: expected a mapping of parameter names to domains, got "
                f"{type(mapping).__name__} {mapping!r}; pass e.g. {{'learning_rate': Float(1e-5, 1e-3)}}."
            )
        domains: dict[str, Domain] = {}
        for name, value in mapping.items():
            try:
                _check_name(name)
            except (TypeError, ValueError) as error:
                raise about_parameter(error, name) from None
            if isinstance(value, Domain):
                domains[name] = value
            elif isinstance(value, Mapping):
                # A dict value is ambiguous (a constant dict, or a {type: ...} domain spec), so the
                # constructor refuses to guess.
                raise ParameterTypeError(
                    f"SearchSpace: parameter {name!r} is a dict {dict(value)!r}; for a domain spec such as "
                    "{'type': 'float', ...} use SearchSpace.from_dict, for a constant dict use "
                    "Fixed({...}).",
                    name,
                )
            else:
                domains[name] = Fixed(value)
        self._domains = domains
        self._order = self._check_conditions()

    # -- construction checks -------------------------------------------------------------------------

    def _check_conditions(self) -> tuple[str, ...]:
        domains = self._domains
        for name, domain in domains.items():
            for parent, values in (domain.when or {}).items():
                if parent == name:
                    raise ParameterValueError(
                        f"SearchSpace: parameter {name!r} is conditional on itself (when={domain.when!r}); "
                        "a condition must name another parameter.",
                        name,
                    )
                if parent not in domains:
                    raise ParameterValueError(
                        f"SearchSpace: parameter {name!r} is conditional on {parent!r}, which is not in the "
                        f"space (known: {', '.join(domains)}); add {parent!r} or fix the name.",
                        name,
                    )
                parent_domain = domains[parent]
                if isinstance(parent_domain, Float):
                    raise ParameterValueError(
                        f"SearchSpace: parameter {name!r} is conditional on {parent!r}, a Float "
                        f"({parent_domain!r}); a continuous value almost never equals a given one, so make "
                        f"{parent!r} a Categorical, Int or Fixed.",
                        name,
                    )
                for value in values:
                    if not parent_domain.contains(value):
                        raise ParameterValueError(
                            f"SearchSpace: parameter {name!r} is conditional on {parent}={value!r}, but "
                            f"{value!r} is not a possible value of {parent!r} ({parent_domain!r}); use a "
                            f"value that {parent!r} can take.",
                            name,
                        )
        return self._topological_order()

    def _topological_order(self) -> tuple[str, ...]:
        # Repeatedly take the earliest-inserted parameter whose parents are all placed: parents come
        # before children and otherwise the user's order is kept. Spaces are small, so O(n^2) is fine.
        remaining = list(self._domains)
        placed: list[str] = []
        done: set[str] = set()
        while remaining:
            for name in remaining:
                if all(p in done for p in self._parents(name)):
                    placed.append(name)
                    done.add(name)
                    remaining.remove(name)
                    break
            else:
                raise ValueError(
                    f"SearchSpace: conditions form a cycle {' -> '.join(self._find_cycle(remaining))}; a "
                    "parameter cannot depend on itself, even indirectly; remove one of these conditions."
                )
        return tuple(placed)

    def _find_cycle(self, remaining: list[str]) -> list[str]:
        # Every parameter left over has a parent that is also left over, so following parents from
        # any of them must come back to one already seen.
        left = set(remaining)
        path = [remaining[0]]
        while True:
            parent = next(p for p in self._parents(path[-1]) if p in left)
            if parent in path:
                cycle = path[path.index(parent) :] + [parent]
                return list(reversed(cycle))  # written parent -> child
            path.append(parent)

    def _parents(self, name: str) -> tuple[str, ...]:
        when = self._domains[name].when
        return tuple(when) if when else ()

    # -- Mapping -------------------------------------------------------------------------------------

    def __getitem__(self, name: str) -> Domain:
        try:
            return self._domains[name]
        except KeyError:
            raise KeyError(
                f"unknown parameter {name!r}; the space has: {', '.join(self._domains) or '(nothing)'}"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._domains)

    def __len__(self) -> int:
        return len(self._domains)

    def __contains__(self, name: object) -> bool:
        return name in self._domains

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SearchSpace):
            return self._domains == other._domains
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a mapping; equality is by content

    def __repr__(self) -> str:
        inner = ", ".join(f"{name!r}: {domain!r}" for name, domain in self._domains.items())
        return f"SearchSpace({{{inner}}})"

    def __reduce__(self):
        return (SearchSpace, (self._domains,))

    @property
    def names(self) -> tuple[str, ...]:
        """Parameter names in insertion order."""
        return tuple(self._domains)

    @property
    def order(self) -> tuple[str, ...]:
        """Parameter names with every parent before its children, otherwise in insertion order."""
        return self._order

    # -- conditions ----------------------------------------------------------------------------------

    def _inactive_reason(self, name: str, params: Mapping[str, Any]) -> str | None:
        """``None`` if ``name`` is active given ``params``, else why it is not."""
        when = self[name].when
        if not when:
            return None
        for parent, values in when.items():
            if parent not in params:
                return f"it needs {parent}={_describe(values)} but {parent!r} is not set"
            if self._inactive_reason(parent, params) is not None:
                return f"its parent {parent!r} is itself inactive"
            if not any(same_value(params[parent], v) for v in values):
                return f"it needs {parent}={_describe(values)}, got {parent}={params[parent]!r}"
        return None

    def is_active(self, name: str, params: Mapping[str, Any]) -> bool:
        """Whether parameter ``name`` exists given the values in ``params``.

        It does when every parent named in its ``when`` is itself active, is present in ``params`` and
        takes one of the listed values. Unconditional parameters are always active. Raises ``KeyError``
        for a name that is not in the space.
        """
        return self._inactive_reason(name, params) is None

    def active_names(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        """The names (in ``order``) that are active given ``params``."""
        return tuple(name for name in self._order if self.is_active(name, params))

    # -- sampling ------------------------------------------------------------------------------------

    def sample_with(self, fn: Callable[[str, Domain], Any]) -> dict[str, Any]:
        """Draw one configuration, asking ``fn(name, domain)`` for each value.

        This is how backend adapters sample: the space is walked in ``order`` (parents first);
        a parameter whose condition is not met by the values drawn so far is skipped (it is absent
        from the result and ``fn`` is not called for it); a ``Fixed`` value is inserted directly
        without calling ``fn``; for every other parameter ``fn(name, domain)`` is called and its
        return value is recorded (and used to decide the conditions of later parameters). For
        example an Optuna adapter passes ``lambda name, d: trial.suggest_float(name, d.low, d.high)``
        and friends.

        Returns:
            ``{name: value}`` for the active parameters, in the order they were drawn.
        """
        values: dict[str, Any] = {}
        for name in self._order:
            # Parents come first, and an inactive parent is absent from ``values``, so checking the
            # condition against the values drawn so far is the full activity check.
            if not self.is_active(name, values):
                continue
            domain = self._domains[name]
            values[name] = domain.value if isinstance(domain, Fixed) else fn(name, domain)
        return values

    def sample(self, rng: random.Random | int | None = None) -> dict[str, Any]:
        """Draw one configuration with each domain's own ``sample``.

        ``rng`` is a ``random.Random``, an int seed, or ``None`` for a fresh unseeded generator.
        """
        if rng is None:
            rng = random.Random()
        elif isinstance(rng, bool) or not isinstance(rng, (int, random.Random)):
            raise TypeError(
                f"SearchSpace.sample: rng must be None, an int seed or a random.Random, got "
                f"{type(rng).__name__} {rng!r}; pass e.g. rng=0."
            )
        elif isinstance(rng, int):
            rng = random.Random(rng)
        generator = rng
        return self.sample_with(lambda name, domain: domain.sample(generator))

    def validate_params(self, params: Mapping[str, Any]) -> None:
        """Check a configuration against the space; raise ``ValueError`` listing every problem.

        A problem is an unknown name, an active parameter that is missing (``Fixed`` ones included),
        a parameter given although its condition is not met, or a value outside its domain.
        """
        if not isinstance(params, Mapping):
            raise TypeError(
                f"SearchSpace.validate_params: params must be a mapping {{name: value}}, got "
                f"{type(params).__name__} {params!r}."
            )
        problems: list[str] = []
        for name in params:
            if name not in self._domains:
                problems.append(
                    f"unknown parameter {name!r} (the space has: {', '.join(self._domains) or 'nothing'}); "
                    "remove it or add it to the space"
                )
        for name in self._order:
            domain = self._domains[name]
            reason = self._inactive_reason(name, params)
            if reason is None and name not in params:
                problems.append(f"parameter {name!r} is missing ({domain!r}); give it a value")
            elif reason is None and not domain.contains(params[name]):
                problems.append(
                    f"parameter {name!r}={params[name]!r} is outside its domain {domain!r}; "
                    "give a value inside it"
                )
            elif reason is not None and name in params:
                problems.append(
                    f"parameter {name!r} is inactive ({reason}) but was given {name}={params[name]!r}; "
                    "remove it"
                )
        if problems:
            raise ValueError("SearchSpace.validate_params: " + "; ".join(problems) + ".")

    # -- plain dicts and YAML ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """``{name: domain.to_dict()}``: plain, JSON/YAML-safe, read back by ``from_dict``.

        Tuples (in choices or fixed values) are written as lists; ``from_dict`` turns list *choices*
        back into tuples, while a list ``Fixed`` value stays a list.
        """
        return {name: domain.to_dict() for name, domain in self._domains.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchSpace:
        """Build a space from plain data, e.g. parsed YAML.

        Each value is either a domain dict ``{"type": "float" | "int" | "categorical" | "fixed", ...}``
        with the same keys as the constructors (``low``, ``high``, ``log``, ``step``, ``choices``,
        ``value``, ``when``), a ``Domain`` instance, or any other value meaning ``Fixed(value)``.
        Unknown types or keys are errors.
        """
        if not isinstance(data, Mapping):
            raise TypeError(
                f"SearchSpace.from_dict: expected a mapping of parameter names to domain dicts, got "
                f"{type(data).__name__} {data!r}; write e.g. "
                "{'learning_rate': {'type': 'float', 'low': 1e-05, 'high': 0.001, 'log': True}}."
            )
        domains: dict[str, Domain] = {}
        for name, spec in data.items():
            try:
                domains[_check_name(name)] = domain_from_dict(spec, name)
            except (TypeError, ValueError) as error:
                raise about_parameter(error, name) from None
        return cls(domains)

    def to_yaml(self) -> str:
        """The ``to_dict`` form as YAML text, one line per parameter where possible."""
        return yaml.dump(self.to_dict(), Dumper=_Dumper, sort_keys=False, default_flow_style=None)

    @classmethod
    def from_yaml(cls, source: str | os.PathLike[str]) -> SearchSpace:
        """Read a space from YAML text or from a YAML file.

        ``source`` is a path (``os.PathLike``, or a ``str`` naming an existing file) or YAML text such
        as ``"learning_rate: {type: float, low: 1.0e-5, high: 1.0e-3, log: true}"``. Loading is safe
        (no arbitrary objects); ``1e-5`` is read as a float even though YAML 1.1 would read a string.
        """
        if isinstance(source, os.PathLike):
            text = Path(source).read_text(encoding="utf-8")
        elif isinstance(source, str):
            is_file = "\n" not in source and os.path.isfile(source)
            text = Path(source).read_text(encoding="utf-8") if is_file else source
        else:
            raise TypeError(
                f"SearchSpace.from_yaml: expected YAML text or a file path, got {type(source).__name__} "
                f"{source!r}."
            )
        data = yaml.load(text, Loader=_Loader)  # safe: _Loader is a SafeLoader subclass
        if not isinstance(data, Mapping):
            hint = ""
            if isinstance(source, str) and "\n" not in source and isinstance(data, str):
                hint = f" (if {source!r} is meant to be a file path, no such file exists)"
            raise ValueError(
                f"SearchSpace.from_yaml: expected a YAML mapping of parameter names to domains, got "
                f"{type(data).__name__} {data!r}{hint}; write e.g. "
                "'learning_rate: {type: float, low: 1.0e-5, high: 1.0e-3, log: true}'."
            )
        return cls.from_dict(data)

    @classmethod
    def coerce(cls, obj: Any) -> SearchSpace:
        """Return ``obj`` as a ``SearchSpace``.

        Accepts a ``SearchSpace`` (returned as is), a dict of domains and/or plain values, or a plain
        ``to_dict()`` form (both go through ``from_dict``). Anything else is a ``TypeError``.
        """
        if isinstance(obj, SearchSpace):
            return obj
        if isinstance(obj, Mapping):
            return cls.from_dict(obj)
        raise TypeError(
            f"expected a search space: a SearchSpace, a dict {{name: Domain or value}} or a plain dict in "
            f"SearchSpace.to_dict() form, got {type(obj).__name__} {obj!r}; for a YAML file use "
            "SearchSpace.from_yaml(path)."
        )
