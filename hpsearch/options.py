"""One declaration per option: `Option` says an option's name, types, default, bounds, choices, help and example,
and checks a value against them; `COMMON_OPTIONS` are the options every backend takes.

Which backends take an option is where it is declared: in `COMMON_OPTIONS` (every backend), or in one adapter's
``options`` (`hpsearch.backends.base.SearchBackend.options`). Everything else reads these declarations:
`hyperparameter_search` checks its keyword arguments with `Option.check` (`check_common_options` and
`SearchBackend.check_options`), the sweep file's schema runs the same check on each value it reads and prints the
same message (`hpsearch.sweep`), `hpsearch schema` documents them (`hpsearch._sweep_schema`) and ``hpsearch run``
derives its option flags from them (`hpsearch._option_flags`). An adapter's ``validate`` keeps only the rules that
span several options or need its engine.
"""

from __future__ import annotations

import importlib
import math
import numbers
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import SearchConfigError

__all__ = ["COMMON_OPTIONS", "N_TRIALS", "OBJECTIVE_SCOPES", "Code", "Option", "check_common_options"]

#: Which evaluation of a trial is its objective: the last one, the best one, the mean of all of them, or the
#: mean of the last 5 / 10 (the checkpoint is the one of the last evaluation for the means).
OBJECTIVE_SCOPES = ("last", "best", "avg", "last-5-avg", "last-10-avg")


class Code(str):
    """An example that is code, not a value (``MedianPruner()``, an engine's constructor): an error shows it unquoted."""

    def __repr__(self) -> str:
        return str(self)


@dataclass(frozen=True)
class Option:
    """One keyword argument of `hyperparameter_search`, as the API, the sweep file and the command line see it.

        ``types`` are the Python types a value may have (after a sweep file is read; ``object``: any value, checked by
        the adapter); ``classes`` are the engine's own classes a value may be an instance of, as ``module:Class`` (imported
        only to check a value that is none of ``types``); None is accepted and means ``default``, unless ``required`` (an
    argument with no unset state, such as ``n_trials``). A number must be finite,
        at least ``minimum`` (``above``: greater than it) and at most ``maximum``, unless it is one of ``also`` (e.g.
        -1 for "one per CPU"); ``choices`` are the only values taken; ``non_empty`` refuses an empty string or mapping;
        ``rule`` is a further check of this option alone (it raises `SearchConfigError` naming the value and the fix,
        and returns the value to use). ``example`` is the value an error suggests.

        ``build_from`` names the modules whose classes a sweep file may build with ``{name: Class, **kwargs}`` (e.g. a
        sampler); ``path`` says that a string value is a file or folder path (or a ``sqlite:///`` URL), which a sweep
        file gives relative to its own folder; ``cli_flag`` that ``hpsearch run`` takes it as a flag of its own
        (``--trial-workers N``) besides ``--set``; ``concurrency`` that it sets how many trials run at once in threads
        (refused beside ``trial_workers``, which does that).
    """

    name: str
    types: tuple[Any, ...]  # classes, or ABCs such as collections.abc.Mapping and Callable
    help: str
    default: Any = field(default=None, compare=False)
    classes: tuple[str, ...] = ()
    minimum: float | None = None
    above: float | None = None
    maximum: float | None = None
    also: tuple[Any, ...] = ()
    choices: tuple[Any, ...] = ()
    non_empty: bool = False
    rule: Callable[[Any], Any] | None = field(default=None, compare=False)
    example: Any = field(default=None, compare=False)
    build_from: tuple[str, ...] = ()
    path: bool = False
    cli_flag: bool = False
    concurrency: bool = False
    required: bool = False

    # ------------------------------------------------------------------ what a value must be
    def expected(self) -> str:
        """What a value must be, in words ("true or false", "an integer >= 1", "one of 'lite', 'http'", ...)."""
        if self.choices:
            return "one of " + ", ".join(map(repr, self.choices))
        words: list[str] = []
        for t in self.types:
            if t is int and float in self.types:
                continue  # "a finite number" says it
            word = "any value" if t is object else _WORDS.get(t, f"a {t.__name__}")
            if self.non_empty and t in (str, dict, Mapping, list, tuple):
                word = word.replace("a ", "a non-empty ", 1)
            if t in (int, float):
                word += self._bounds()
            if word not in words:
                words.append(word)
        words += [f"an instance of {name.replace(':', '.')}" for name in self.classes]
        return " or ".join(words)

    def _bounds(self) -> str:
        parts = [
            f">= {self.minimum:g}" if self.minimum is not None else "",
            f"> {self.above:g}" if self.above is not None else "",
            f"<= {self.maximum:g}" if self.maximum is not None else "",
        ]
        text = " and ".join(p for p in parts if p)
        return (" " + text if text else "") + "".join(f" or {v!r}" for v in self.also)

    def suggestion(self) -> Any:
        """A valid value, as an error suggests it."""
        if self.example is not None:
            return self.example
        if self.default not in (None, {}):
            return self.default
        if self.choices:
            return self.choices[0]
        if self.minimum is not None:
            return self.minimum
        if bool in self.types:
            return True
        return None

    # ------------------------------------------------------------------ the check
    def check(self, value: Any) -> Any:
        """``value`` if the declaration takes it (an int of an option that takes floats as a float), else a
        `SearchConfigError` naming the option, the value, what it must be and an example. None (the default)
        always passes; a bool is refused where none is declared (Python's bool is an int), and so is a non-finite
        number; numpy's integers and floats count as int and float."""
        if value is None:
            if self.required:
                raise self.refusal(value)
            return None
        if object not in self.types and not self._typed(value):
            raise self.refusal(value, typed=True)
        number = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if self.choices and value not in self.choices:
            raise self.refusal(value)
        if number and value not in self.also and not self._within(float(value)):
            raise self.refusal(value)
        if (
            self.non_empty
            and isinstance(value, str | Mapping | list | tuple)
            and not (value.strip() if isinstance(value, str) else len(value))
        ):
            raise self.refusal(value)
        if self.rule is not None:
            value = self.rule(value)
        if number and float in self.types and int in self.types:
            return float(value)
        return value

    def _typed(self, value: Any) -> bool:
        accepted = tuple(_NUMBERS.get(t, t) for t in self.types)
        if isinstance(value, accepted) and not (isinstance(value, bool) and bool not in self.types):
            return True
        return any(isinstance(value, _class(name)) for name in self.classes)

    def _within(self, value: float) -> bool:
        return math.isfinite(value) and not (
            (self.minimum is not None and value < self.minimum)
            or (self.above is not None and value <= self.above)
            or (self.maximum is not None and value > self.maximum)
        )

    def refusal(self, value: Any, typed: bool = False) -> SearchConfigError:
        """The error for a value this option does not take: the option, the value, what it must be, an example."""
        shown = f"{value!r} ({type(value).__name__})" if typed else repr(value)
        example = self.suggestion()
        if self.required:
            fix, default = f"pass e.g. {self.name}={example!r}", ""
        else:
            fix = f"pass e.g. {self.name}={example!r}, or None" if example is not None else "pass None"
            default = " for the default" if self.default is None else f" for the default ({self.default!r})"
        return SearchConfigError(
            f"{self.name}={shown} must be {self.expected()} ({self.help}); {fix}{default}.", about=self.name
        )


def _class(name: str) -> type:
    """The class ``module:Class`` names (an engine's: installed, as its backend was chosen)."""
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


_NUMBERS: dict[type, type] = {int: numbers.Integral, float: numbers.Real}
_WORDS: dict[Any, str] = {
    bool: "true or false",
    int: "an integer",
    float: "a finite number",
    Callable: "a callable",
    str: "a string",
    list: "a list",
    tuple: "a list",
    dict: "a mapping",
    Mapping: "a mapping",
    type: "a class",
    os.PathLike: "a path",
}


# ---------------------------------------------------------------------------------------------- rules of one option
#: The longest trial_timeout a trial's timer can count (seconds, ~31 years).
LONGEST_TIMEOUT_S = 1e9


def _timer_can_count(value: Any) -> Any:
    if value > LONGEST_TIMEOUT_S:
        raise SearchConfigError(
            f"trial_timeout={value!r} seconds is longer than a trial's timer can count (at most "
            f"{LONGEST_TIMEOUT_S:.0e} s, ~31 years); pass None for no limit.",
            about="trial_timeout",
        )
    return value


def _earlier_searches(value: Any) -> Any:
    from .results import SearchResult  # light: pandas is imported only by its dataframe views

    for item in value if isinstance(value, list | tuple) else [value]:
        if not isinstance(item, str | os.PathLike | SearchResult):
            raise SearchConfigError(
                f"warm_start={item!r}: expected the output_dir of an earlier search, a SearchResult, or a list of them.",
                about="warm_start",
            )
    return value


def _parameter_values(value: Any) -> dict[str, Any]:
    if not all(isinstance(k, str) for k in value):
        raise SearchConfigError(
            f"warm_start_defaults must be a dict of parameter name -> value, got {value!r}; pass e.g. {{'dropout': 0.1}}.",
            about="warm_start_defaults",
        )
    return dict(value)


def _folds(value: Any) -> Any:
    from .reevaluate import check_folds  # light: no backend, no torch

    return check_folds(value)


#: How many trials the search runs: an argument of `hyperparameter_search`, a sweep file's top-level key and
#: ``hpsearch run --n-trials``, all checked by this one declaration.
N_TRIALS = Option(
    "n_trials", (int,), "how many trials to run", default=20, minimum=1, example=10, required=True
)

#: Options every backend accepts (a sweep file takes them at its top level or under backend_options).
COMMON_OPTIONS: dict[str, Option] = {
    option.name: option
    for option in (
        Option(
            "max_failed_trials",
            (int,),
            "consecutive failed trials that stop the search",
            default=3,
            minimum=1,
        ),
        Option(
            "objective_scope",
            (str,),
            "which evaluation is a trial's objective",
            default="last",
            choices=OBJECTIVE_SCOPES,
        ),
        Option(
            "trial_timeout",
            (int, float),
            "seconds after which a trial is stopped and recorded FAIL",
            above=0,
            rule=_timer_can_count,
            example=600,
        ),
        Option(
            "max_device_hours",
            (int, float),
            "stop starting trials once the trials used this many device-hours",
            above=0,
            example=2,
        ),
        Option(
            "max_energy_kwh",
            (int, float),
            "stop starting trials once the trials used this much energy (kWh, measured by CodeCarbon)",
            above=0,
            example=2,
        ),
        Option(
            "trial_workers",
            (int,),
            "trials run at once, each in a worker process of its own on this machine "
            "(isolated, killed at trial_timeout); unset: trials run in this process",
            minimum=1,
            example=2,
            cli_flag=True,
        ),
        Option(
            "trial_worker_max_trials",
            (int,),
            "trials a worker process runs before it is replaced by a fresh one "
            "(with trial_workers; unset: replaced only after a failed trial)",
            minimum=1,
            example=10,
        ),
        Option(
            "warm_start",
            (str, list, object),
            "earlier searches (output_dir, SearchResult or a list) to start from",
            rule=_earlier_searches,
            path=True,
        ),
        Option(
            "warm_start_mode",
            (str,),
            "'inform' (tell the engine the earlier trials) or 'evaluate' (train the best again first)",
            default="inform",
            choices=("inform", "evaluate"),
        ),
        Option(
            "warm_start_top_k",
            (int,),
            "how many of the best earlier trials 'evaluate' trains again",
            default=5,
            minimum=1,
        ),
        Option(
            "warm_start_defaults",
            (Mapping,),
            "values of parameters the earlier searches did not have",
            default={},
            rule=_parameter_values,
            example={"dropout": 0.1},
        ),
        Option(
            "reevaluate_top_k",
            (int,),
            "after the search, how many of the best configurations train again with "
            "reevaluate_seeds more seeds (the best run is then the best mean; see hpsearch.reevaluate)",
            minimum=1,
            example=3,
        ),
        Option(
            "reevaluate_seeds",
            (int,),
            "how many more seeds each re-evaluated configuration trains with "
            "(TrainingArguments.seed and data_seed: seed+1 .. seed+S)",
            minimum=1,
            example=2,
        ),
        Option(
            "reevaluate_when",
            (str,),
            "'end' (the top reevaluate_top_k after the search, extra runs) or 'during' (each challenger of the "
            "incumbent before it is accepted; n_trials counts every run)",
            default="end",
            choices=("end", "during"),
        ),
        Option(
            "reevaluate_folds",
            (list, tuple, Callable),
            "other splits the re-evaluations train and evaluate on (Python API: datasets): (train_dataset, "
            "eval_dataset) pairs taken in turn, or a callable seed -> such a pair; recorded in the fold column",
            non_empty=True,
            rule=_folds,
            example=Code("[(train_2, eval_2), (train_3, eval_3)]"),
        ),
    )
}


def check_common_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Pop the common options from ``kwargs``: their checked values (defaults filled in)."""
    out = {}
    for name, option in COMMON_OPTIONS.items():
        value = option.check(kwargs.pop(name, None))
        out[name] = option.default if value is None else value
    return out
