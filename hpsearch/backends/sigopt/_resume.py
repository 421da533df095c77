"""``resume=True``: continue a killed SigOpt search from hpsearch's own record of it.

SigOpt's lite driver keeps its experiment in the process that created it, and an open suggestion on a server dies
with the process that asked for it; what survives a kill is ``search.json``, written after every finished trial.
A resumed run reads it, refuses it when it is another search (other directions, objective or space, or another
backend), creates a new experiment, tells it every finished trial as an observation (its value, or
``failed=True``), keeps those records unchanged (ids, names, numbers, source; only ``extra["sigopt_best"]`` is
marked again, by the new experiment) and runs only what is left of
``n_trials``. A trial that was running when the process died never reached ``search.json``: it is not counted,
and its suggestion is lost with the process (a new one takes its place).

The lite driver numbers its suggestions from 1 in every experiment: the new trials' ids continue after the
highest id already recorded, so no new trial takes the id (and the record) of a finished one. Its optimizer is
seeded from ``args.seed`` and the number of trials told, so a resumed run does not replay the first run's draws.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..._files import json_default
from ...errors import SearchConfigError
from ...session import identity_differences, search_identity
from ...trial import TrialState
from ...warmstart import SOURCE as WARM_START

if TYPE_CHECKING:
    from ...results import SearchResult
    from ...session import SearchSession
    from ._adapter import SigOptBackend

__all__ = ["NATIVE_SPACE", "RESUMED", "load_previous", "tell_previous"]

logger = logging.getLogger(__name__)

#: ``settings`` keys in search.json: the trials a resumed run took over, and a native space's parameter list.
RESUMED = "resumed_trials"
NATIVE_SPACE = "sigopt_parameters"


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=json_default))


def load_previous(adapter: SigOptBackend, native_space: Any) -> SearchResult | None:
    """The earlier run in ``output_dir`` (None: there is none, start a new search); `SearchConfigError` before any
    trial when its search.json is unreadable or belongs to another search."""
    from ...results import SearchResult

    output_dir = adapter.settings.output_dir
    try:
        previous = SearchResult.load(output_dir)
    except FileNotFoundError:
        logger.info(
            "resume=True: there is no earlier search in %s (no search.json); starting a new one.", output_dir
        )
        return None
    except ValueError as error:
        raise SearchConfigError(
            f"resume=True: {error} Move it away to start a new search in this output_dir, or pass resume=False.",
            about="resume",
        ) from None
    if previous.backend != adapter.name:
        raise SearchConfigError(
            f"resume=True: the earlier search in {output_dir!r} ran on backend={previous.backend!r}, not "
            f"{adapter.name!r}; continue it on its own backend, or use warm_start={output_dir!r} with another "
            "output_dir to start from its trials.",
            about="resume",
        )
    ours = search_identity(adapter.settings)
    stored: dict[str, Any] = {
        "directions": previous.directions,
        "objective": previous.objective,
        "space": previous.space,
        "objective_scope": previous.settings.get("objective_scope"),
    }
    if adapter.settings.space is None and previous.space is None and NATIVE_SPACE in previous.settings:
        stored["space"], ours["space"] = previous.settings[NATIVE_SPACE], _plain(list(native_space))
    problems = identity_differences(stored, ours)
    if problems:
        raise SearchConfigError(
            f"resume=True: the earlier search in {output_dir!r} is another search: it has {'; '.join(problems)}. "
            "Continuing it would mix results of different searches; pass the same direction, objective and hp_space, "
            "or another output_dir (resume=False starts over in this one, replacing its search.json).",
            about="resume",
        )
    return previous


def _native_assignments(params: Mapping[str, Any], parameters: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A native space's assignments for a record's parameters (numbers read from categorical labels go back)."""
    out: dict[str, Any] = {}
    for spec in parameters:
        name = spec["name"]
        if name not in params:
            continue  # inactive (conditional)
        value = params[name]
        if spec.get("type") == "categorical" and not isinstance(value, str):
            labels = [
                v.get("name") if isinstance(v, Mapping) else v for v in spec.get("categorical_values") or []
            ]
            value = next((label for label in labels if _same_number(label, value)), str(value))
        out[name] = value
    return out


def _same_number(label: Any, value: Any) -> bool:
    try:
        return float(label) == float(value)
    except (TypeError, ValueError):
        return False


def tell_previous(
    adapter: SigOptBackend,
    session: SearchSession,
    conn: Any,
    experiment_id: str,
    previous: SearchResult,
    native_space: Any,
) -> tuple[int, int]:
    """Tell the new experiment the earlier run's trials and adopt their records; returns (trials of the budget
    used, the first number for a new trial)."""
    from sigopt.exception import SigOptException

    experiment = conn.experiments(experiment_id)
    records = previous.records
    for record in records:
        if adapter._converted is not None:
            assignments = adapter._converted.assignments(record.params)
        else:
            assignments = _native_assignments(record.params, native_space)
        try:
            adapter._observe(
                experiment, record.objective, record.state is not TrialState.COMPLETE, assignments=assignments
            )
        except SigOptException as error:
            raise SearchConfigError(
                f"resume=True: SigOpt refused trial {record.name} of the earlier search ({assignments}) as an "
                f"observation: {error}. Its search.json does not fit this experiment; start over with resume=False "
                "or another output_dir.",
                about="resume",
            ) from None
        adapter._assignments[record.trial_id] = assignments
    session.adopt(records)
    # Warm-start rows (told, never trained) and re-evaluations (after the search: `hpsearch.reevaluate`) use no
    # budget; every other earlier trial does, whatever its state.
    budget = [r for r in records if r.extra.get("source") not in (WARM_START, "reevaluation")]
    ids = [int(r.trial_id) for r in records if r.trial_id.isdigit()]
    if adapter.driver == "lite" and ids:
        adapter._id_offset = max(ids)
    adapter._optimizer_seed = [int(adapter.settings.trainer.args.seed) % 2**32, len(records)]
    session.result.started = previous.started or session.result.started  # the search began with the first run
    session.result.settings[RESUMED] = len(records)
    remaining = max(session.n_trials - len(budget), 0)
    logger.info(
        "Resuming SigOpt search in %s: %d finished trials told to a new experiment%s, %d to run.",
        adapter.settings.output_dir,
        len(records),
        " on the server (the earlier one is left as it was)" if adapter.driver == "http" else "",
        remaining,
    )
    session.save()  # search.json says it resumed, with the same records the experiment was just told
    return len(budget), max((r.number for r in budget), default=-1) + 1
