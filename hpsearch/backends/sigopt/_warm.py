"""Warm start on SigOpt: earlier trials as observations (``inform``), or trained first and observed (``evaluate``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...trial import Trial, TrialRecord, TrialState
from ...warmstart import prior_records

if TYPE_CHECKING:
    from ...session import SearchSession
    from ._adapter import SigOptBackend

#: ``record.extra["source"]`` of an earlier configuration trained again first (``evaluate``).
EVALUATE = "warm_start_evaluate"


def warm_start(adapter: SigOptBackend, session: SearchSession, experiment: Any) -> Iterator[Trial]:
    """Tell ``experiment`` the earlier trials (inform: no trial to run); or the trials that train the earlier
    configurations first (evaluate: the search loop asks them before any suggestion, `observe` tells them)."""
    if adapter.warm_start_mode == "inform":
        assert adapter._converted is not None  # warm_start needs a portable space (checked before the run)
        for prior in adapter.priors:
            adapter._observe(
                experiment, prior.objective, assignments=adapter._converted.assignments(prior.params)
            )
        session.adopt(prior_records(adapter.priors))
        return iter(())
    priors = adapter.priors[: session.n_trials]
    return (Trial(f"warm-eval-{n}", n, prior.params, adapter.name) for n, prior in enumerate(priors))


def observe(adapter: SigOptBackend, experiment: Any, record: TrialRecord) -> None:
    """Tell ``experiment`` a warm ``evaluate`` trial by its assignments (SigOpt did not suggest it)."""
    assert adapter._converted is not None
    record.extra["source"] = EVALUATE
    adapter._observe(
        experiment,
        record.objective,
        record.state is not TrialState.COMPLETE,
        assignments=adapter._converted.assignments(record.params),
    )
