"""Continue a search anywhere: earlier trials, of any engine, mapped into this search's space.

``hyperparameter_search(..., warm_start=<output_dir | SearchResult | list of them>, warm_start_mode=...)``:

- ``"inform"`` (default): the earlier finished trials are told to the new engine as observations before it
  proposes anything; they are not trained again. They appear in the new results as rows with ``source =
  "warm_start"`` (their trial ids start with ``warm-``), do not use the budget, and are never the search's best
  run (the best run is one this search trained).
- ``"evaluate"``: the ``warm_start_top_k`` best earlier configurations are trained again first (e.g. after the
  data changed); they are ordinary trials of the new search and use its budget.

Spaces that changed: a parameter the new space added takes the value ``warm_start_defaults`` gives it (or its
``Fixed`` value); an earlier trial without one is left out. Removed parameters are dropped; a point outside a
narrowed range, or a categorical choice that disappeared, is left out; conditional parameters follow the new
space's conditions. The log says how many trials were left out and why. Only trials of the same objective and
directions are used: anything else is refused, naming the difference. Works from a search that is still running
(its ``search.json`` as last written).
"""

from __future__ import annotations

import collections
import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import SearchConfigError
from .trial import TrialRecord, TrialState

if TYPE_CHECKING:
    from spaces import SearchSpace

    from .results import SearchResult
    from .settings import TrialSettings

__all__ = ["MODES", "Prior", "is_warm", "load_priors", "own_counts", "prior_records"]

logger = logging.getLogger(__name__)

MODES = ("inform", "evaluate")
SOURCE = "warm_start"


@dataclass(frozen=True)
class Prior:
    """One earlier finished trial, its parameters mapped into the new space."""

    params: dict[str, Any]
    objective: float | list[float]
    origin: str  # "<search folder or backend>:<trial name>"


def is_warm(record: TrialRecord) -> bool:
    """Whether ``record`` is an earlier search's trial told to this one (a warm-start row, never trained here)."""
    return record.extra.get("source") == SOURCE


def own_counts(result: SearchResult) -> tuple[dict[str, int], int]:
    """(trials per state that this search ran, every state present; warm-start rows), so that no summary adds the
    earlier searches' trials to this one's ("14 / 8 trials")."""
    counts = {state: 0 for state in result.counts()}
    warm = 0
    for record in result.records:
        if is_warm(record):
            warm += 1
        else:
            counts[TrialState(record.state).value] += 1
    return counts, warm


def _results(warm_start: Any) -> list[tuple[str, SearchResult]]:
    from .results import SearchResult

    items = list(warm_start) if isinstance(warm_start, list | tuple) else [warm_start]
    if not items:
        raise SearchConfigError(
            "warm_start=[] names no earlier search; pass an output_dir, a SearchResult or a list.",
            about="warm_start",
        )
    out = []
    seen: set[Any] = set()  # a search named twice (its folder, or the same result) is read once
    for item in items:
        if isinstance(item, SearchResult):
            if id(item) not in seen:
                seen.add(id(item))
                out.append((item.output_dir or item.backend, item))
            continue
        if not isinstance(item, str | os.PathLike):
            raise SearchConfigError(
                f"warm_start={item!r}: expected the output_dir of an earlier search, a SearchResult, or a list of them.",
                about="warm_start",
            )
        folder = os.path.expanduser(os.fspath(item))
        if os.path.realpath(folder) in seen:
            continue
        seen.add(os.path.realpath(folder))
        try:
            out.append((folder, SearchResult.load(folder)))
        except FileNotFoundError:
            raise SearchConfigError(
                f"warm_start={os.fspath(item)!r} is not a search: it has no search.json; pass the output_dir of an "
                "earlier search.",
                about="warm_start",
            ) from None
        except ValueError as error:
            raise SearchConfigError(f"warm_start={os.fspath(item)!r}: {error}", about="warm_start") from None
    return out


def load_priors(
    warm_start: Any, mode: str, top_k: int, defaults: Mapping[str, Any], settings: TrialSettings
) -> list[Prior]:
    """The earlier trials to start from; `SearchConfigError` for anything that cannot be used, before any trial."""
    space = _checked_space(mode, defaults, settings)
    priors: list[Prior] = []
    left_out: collections.Counter[str] = collections.Counter()
    told: set[tuple[str, str]] = (
        set()
    )  # (the trial's first origin, its configuration): each earlier trial once
    for origin, result in _results(warm_start):
        _check_comparable(origin, result, space, settings)
        taken, skipped = _take(origin, result, space, defaults, mode, told)
        priors += taken
        left_out.update({reason: n for reason, n in skipped.items() if reason not in _STATES_LEFT_OUT})
        verb = "told" if mode == "inform" else "can train again"
        logger.info(
            "warm_start: %s %d of %d earlier trial(s) from %s%s.",
            verb,
            len(taken),
            len(result.records),
            origin,
            _left_out_text(skipped),
        )
    if not priors:
        raise SearchConfigError(
            f"warm_start: none of the earlier trials fits this hp_space ({dict(left_out) or 'no finished trial'}); "
            "widen the space, give warm_start_defaults for new parameters, or drop warm_start.",
            about="warm_start",
        )
    if mode == "evaluate":
        sign = 1.0 if settings.directions[0] == "minimize" else -1.0
        priors.sort(key=lambda p: sign * (p.objective[0] if isinstance(p.objective, list) else p.objective))
        priors = priors[:top_k]
        logger.info("warm_start: the best %d of them train again first (warm_start_top_k).", len(priors))
    return priors


def _checked_space(mode: str, defaults: Mapping[str, Any], settings: TrialSettings) -> SearchSpace:
    """The portable space earlier trials are mapped into, once the mode and the defaults for new parameters are
    known to fit it."""
    if mode not in MODES:
        raise SearchConfigError(
            f"warm_start_mode={mode!r} must be one of {list(MODES)}.", about="warm_start_mode"
        )
    space = settings.space
    if space is None:
        raise SearchConfigError(
            "warm_start needs a portable hp_space (a spaces.SearchSpace or a dict of spaces domains) to map earlier "
            "trials into; a backend-native hp_space cannot be compared with another search's parameters.",
            about="warm_start",
        )
    unknown = sorted(set(defaults) - set(space))
    if unknown:
        raise SearchConfigError(
            f"warm_start_defaults names {unknown}, which the hp_space does not have; remove them.",
            about="warm_start_defaults",
        )
    outside = {name: value for name, value in defaults.items() if not space[name].contains(value)}
    if outside:
        name = next(iter(outside))
        raise SearchConfigError(
            f"warm_start_defaults gives {outside}, outside the hp_space ({name}: {space[name]!r}); give values the "
            "space can take.",
            about="warm_start_defaults",
        )
    return space


def _check_comparable(origin: str, result: SearchResult, space: SearchSpace, settings: TrialSettings) -> None:
    """An earlier search's trials can be ranked with this search's: same objective, direction and scope, and at
    least one parameter in common."""
    if result.objective != settings.objective_name or list(result.directions) != list(settings.directions):
        raise SearchConfigError(
            f"warm_start={origin!r} optimized {result.objective!r} ({'/'.join(result.directions)}) but this search "
            f"optimizes {settings.objective_name!r} ({'/'.join(settings.directions)}); only trials of the same "
            "objective and direction can be used. Pass a search of the same objective, or none.",
            about="warm_start",
        )
    scope = result.settings.get("objective_scope")
    if scope is not None and scope != settings.objective_scope:
        raise SearchConfigError(
            f"warm_start={origin!r} scored its trials with objective_scope={scope!r} but this search uses "
            f"objective_scope={settings.objective_scope!r}: two definitions of a trial's objective cannot be "
            f"ranked together. Pass objective_scope={scope!r}, or warm-start from a search of the same scope.",
            about="warm_start",
        )
    if not set(result.param_names) & set(space):
        raise SearchConfigError(
            f"warm_start={origin!r} has no parameter in common with this hp_space (it has "
            f"{result.param_names}, this search {list(space)}); nothing of it can be used.",
            about="warm_start",
        )


def _objectives(result: SearchResult, mode: str) -> list[tuple[TrialRecord, Any]]:
    """(record, objective) of the earlier trials: every run for "inform" (each run of a re-evaluated configuration
    is an observation of it); for "evaluate" one per configuration, a re-evaluated one (`hpsearch.reevaluate`) by
    its mean over seeds, so the best configurations, not their luckiest runs, train again."""
    if mode != "evaluate":
        return [(r, r.objective) for r in result.records]
    from .reevaluate import SOURCE, summarize

    means = {
        s.config_id: s.mean[0] if len(s.mean) == 1 else s.mean for s in summarize(result) if s.n_seeds >= 2
    }
    return [
        (r, means.get(r.trial_id, r.objective)) for r in result.records if r.extra.get("source") != SOURCE
    ]


# Trials of an earlier search that did not finish with an objective: said in the log, never a reason to refuse.
_STATES_LEFT_OUT = ("pruned", "failed", "running", "without a finite objective")


def _take(
    origin: str,
    result: SearchResult,
    space: Any,
    defaults: Mapping[str, Any],
    mode: str,
    told: set[tuple[str, str]],
) -> tuple[list[Prior], collections.Counter[str]]:
    """The priors of one earlier search, and how many of its trials were left out, by reason; ``told``: the
    (first origin, configuration) pairs already taken from the other warm_start searches, added to."""
    taken: list[Prior] = []
    skipped: collections.Counter[str] = collections.Counter()
    for record, objective in _objectives(result, mode):
        if record.state is not TrialState.COMPLETE:
            skipped[
                "failed" if record.state is TrialState.FAIL else TrialState(record.state).value.lower()
            ] += 1
            continue
        values = objective if isinstance(objective, list) else [objective]
        if objective is None or not all(isinstance(v, int | float) and math.isfinite(v) for v in values):
            skipped["without a finite objective"] += 1
            continue
        params, reason = _map(record.params, space, defaults)
        if params is None:
            skipped[reason] += 1
            continue
        first = _first_origin(record, origin)
        key = (first, json.dumps(params, sort_keys=True, default=str))
        if key in told:  # a search warm-started from another one holds that one's trials as warm rows
            skipped["already told through another of the warm_start searches"] += 1
            continue
        told.add(key)
        taken.append(Prior(params, objective, first))
    return taken, skipped


def _left_out_text(skipped: collections.Counter[str]) -> str:
    """ "; 2 pruned, 1 failed, 3 (lr outside the new space) left out" (nothing when none was)."""
    if not skipped:
        return ""
    parts = [
        f"{n} {reason}" if reason in _STATES_LEFT_OUT[:3] else f"{n} ({reason})"
        for reason, n in sorted(skipped.items())
    ]
    return "; " + ", ".join(parts) + " left out"


def _first_origin(record: TrialRecord, origin: str) -> str:
    """Where an earlier trial was first trained: ``"<search folder>:<trial name>"`` (a warm row of ``origin`` names
    the search it came from), the folder resolved so that two spellings of one folder are one origin."""
    text = str(record.extra.get("origin") or "") if record.extra.get("source") == SOURCE else ""
    folder, sep, name = (text or f"{origin}:{record.name}").rpartition(":")
    return f"{os.path.realpath(folder) if os.path.isdir(folder) else folder}{sep}{name}"


def _map(
    params: Mapping[str, Any], space: Any, defaults: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, str]:
    from spaces import Fixed

    out: dict[str, Any] = {}
    for name in space.order:
        if not space.is_active(name, out):
            continue
        domain = space[name]
        if name in params:
            value = params[name]
        elif name in defaults:
            value = defaults[name]
        elif isinstance(domain, Fixed):
            value = domain.value
        else:
            return None, f"no value for the new parameter {name!r} (give it in warm_start_defaults)"
        if not domain.contains(value):
            return None, f"{name} outside the new space"
        out[name] = value
    return out, ""


def prior_records(priors: Sequence[Prior]) -> list[TrialRecord]:
    """The rows of ``inform`` priors in the new results: COMPLETE, ``source`` warm_start, ids ``warm-<i>``."""
    return [
        TrialRecord(
            trial_id=f"warm-{i}",
            number=-(i + 1),
            name=f"warm-{i}",
            state=TrialState.COMPLETE,
            params=dict(p.params),
            objective=p.objective,
            extra={"source": SOURCE, "origin": p.origin},
        )
        for i, p in enumerate(priors)
    ]
