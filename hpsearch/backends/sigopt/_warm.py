"""Warm start on SigOpt: earlier trials as observations (``inform``), or trained first and observed (``evaluate``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ... import _lockstep
from ...trial import NullReporter, Trial, TrialState
from ...warmstart import prior_records

if TYPE_CHECKING:
    from ...session import SearchSession
    from ._adapter import SigOptBackend


def warm_start(adapter: SigOptBackend, session: SearchSession, conn: Any, experiment_id: str) -> int:
    """Earlier trials as observations (inform), or trained first and observed (evaluate); the trials used."""
    assert adapter._converted is not None  # warm_start needs a portable space (checked before the run)
    experiment = conn.experiments(experiment_id)
    assignments = adapter._converted.assignments

    if adapter.warm_start_mode == "inform":
        for prior in adapter.priors:
            adapter._observe(experiment, prior.objective, assignments=assignments(prior.params))
        session.adopt(prior_records(adapter.priors))
        return 0
    used = 0
    for number, prior in enumerate(adapter.priors[: session.n_trials]):
        trial = _lockstep.lead(Trial(f"warm-eval-{number}", number, prior.params, adapter.name))
        _lockstep.announce(trial)
        record = adapter.executor.run(adapter.settings, trial, NullReporter())
        record.extra["source"] = "warm_start_evaluate"
        adapter._observe(
            experiment,
            record.objective,
            record.state is not TrialState.COMPLETE,
            assignments=assignments(record.params),
        )
        session.record(record)
        used += 1
    return used
