"""Reports of large searches: tables paginated, curves sampled, importance by PED-ANOVA past fANOVA's reach."""

from __future__ import annotations

import math
import random
import re
from datetime import datetime, timedelta, timezone

import pytest

from hpsearch.report import _analysis, _scale, render_html
from hpsearch.report import _html as html
from hpsearch.results import SearchResult
from hpsearch.trial import Evaluation, TrialRecord, TrialState

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def synthetic(n: int, seed: int = 0) -> SearchResult:
    """``n`` trials whose objective depends strongly on lr, a little on batch size and not on the optimizer."""
    rng = random.Random(seed)
    records = []
    for i in range(n):
        lr, batch, optimizer = (
            10 ** rng.uniform(-5, -1),
            rng.choice([16, 32, 64]),
            rng.choice(["adamw", "sgd"]),
        )
        state = TrialState.COMPLETE if i % 10 else (TrialState.PRUNED if i % 20 else TrialState.FAIL)
        objective = (
            None if state is TrialState.FAIL else (math.log10(lr) + 3) ** 2 + batch / 100 + rng.random() / 10
        )
        evaluations = (
            []
            if objective is None
            else [
                Evaluation(
                    step=10 * (k + 1), epoch=float(k + 1), objective=objective + (2 - k) / 10, metrics={}
                )
                for k in range(3)
            ]
        )
        records.append(
            TrialRecord(
                trial_id=str(i),
                number=i,
                name=f"run-{i}",
                state=state,
                params={"learning_rate": lr, "batch_size": batch, "optimizer": optimizer},
                objective=objective,
                started=T0 + timedelta(seconds=2 * i),
                finished=T0 + timedelta(seconds=2 * i + 1),
                intermediates=evaluations,
            )
        )
    return SearchResult("optuna", ["minimize"], records, n_trials=n, objective="eval_loss", started=T0)


def test_report_of_a_large_search_is_paginated_sampled_and_uses_ped_anova(monkeypatch):
    monkeypatch.setattr(html, "TABLE_ROWS", 50)
    monkeypatch.setattr(html, "CURVES_MAX", 100)
    monkeypatch.setattr(_analysis, "FANOVA_MAX_TRIALS", 200)
    result = synthetic(400)
    page = render_html(result)
    table = page[page.index('id="trials"') :]
    assert (
        len(re.findall(r"<tr(?: class=\"best\" title=\"best\")?><td", table)) == 50
    )  # the 50 best rows, not 400
    assert "The 50 best of 400 trials" in table and "every trial is in trials.csv" in table
    best = result.best_trial
    assert best is not None and f">{best.name}<" in table  # the best trial is on the page
    assert "100 of the 380 trials with evaluations are drawn" in page
    assert "PED-ANOVA importance (sums to 1)" in page and "PED-ANOVA, how differently" in page


def test_ped_anova_ranks_what_the_objective_depends_on():
    found = _analysis.compute_importances(synthetic(2000))
    assert not isinstance(found, str) and found.method == "ped-anova"
    (scores,) = found.per_objective
    assert list(scores) == ["learning_rate", "batch_size", "optimizer"]
    assert sum(scores.values()) == pytest.approx(1.0) and scores["optimizer"] < 0.05


def test_spread_sample_keeps_the_best_and_spreads_the_rest():
    result = synthetic(1000)
    with_curves = [r for r in result.records if r.intermediates]
    sample = _scale.spread_sample(result, with_curves, 100)
    assert len(sample) == 100 and result.best_trial in sample
    numbers = sorted(r.number for r in sample)
    assert numbers[-1] - numbers[0] > 900  # spread over the whole search, not its start
    assert _scale.spread_sample(result, with_curves[:50], 100) == with_curves[:50]


@pytest.mark.parametrize("pandas_imported", [True, False])
def test_missing_values_are_told_apart_with_or_without_pandas_imported(
    pandas_imported: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The report reads dates and numbers through is_missing; pandas' NA and NaT and numpy's NaN and NaT are
    # missing, every real value is not, whether or not pandas was imported (a report does not import it for this).
    import sys

    import numpy as np
    import pandas as pd

    from hpsearch.report._format import fmt_datetime, is_missing

    missing = [None, math.nan, pd.NaT, np.float32("nan"), np.datetime64("NaT")]
    if pandas_imported:
        missing.append(pd.NA)  # it exists only once pandas is imported
    else:
        monkeypatch.delitem(sys.modules, "pandas")
    present = [0, False, "", "x", [math.nan], {}, (), T0, datetime(2024, 1, 1), np.float32(1.5), np.arange(3)]
    assert [is_missing(v) for v in missing] == [True] * len(missing)
    assert [is_missing(v) for v in present] == [False] * len(present)
    assert fmt_datetime(pd.NaT) == "—"
    assert fmt_datetime(T0) == "2024-01-01 00:00:00 UTC"
