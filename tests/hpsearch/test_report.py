"""hpsearch.report: the HTML report (one plotly bundle, N plots, escaping, degenerate inputs) and comparisons."""

from __future__ import annotations

import math
import re
import sys
from datetime import datetime, timedelta, timezone

import pytest
from plotly.offline import get_plotlyjs

from hpsearch.report import compare_html, render_html, render_markdown, write_compare_html, write_html
from hpsearch.report._analysis import compute_importances, saved_time, time_to_target
from hpsearch.report._plotly import figure_json, plot_div
from hpsearch.results import SearchResult
from hpsearch.trial import Evaluation, TrialRecord, TrialState

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
PAYLOAD = "<script>alert(1)</script>"


def record(number, state, objective, params, steps=4, seconds_per_step=2.0, start=None, **kw):
    evaluations = []
    if objective is not None:
        for i in range(1, steps + 1):
            drift = 0.05 * (steps - i)
            value = [v - drift for v in objective] if isinstance(objective, list) else objective - drift
            evaluations.append(
                Evaluation(step=10 * i, epoch=float(i), objective=value, metrics={"eval_loss": 1.0 / i})
            )
    started = start if start is not None else T0 + timedelta(seconds=200 * number)
    fields = dict(
        trial_id=f"id-{number}",
        number=number,
        name=f"run-{number}",
        state=state,
        params=params,
        objective=objective,
        started=started,
        finished=started + timedelta(seconds=10 * steps * seconds_per_step),
        intermediates=evaluations,
        last_step=10 * steps if evaluations else None,
    )
    fields.update(kw)
    return TrialRecord(**fields)


def search(records, directions=("maximize",), **kw):
    return SearchResult(
        kw.pop("backend", "optuna"), list(directions), records, objective="eval_accuracy", **kw
    )


def rich_result():
    """Four parameters (float, categorical str, categorical int, conditional), all four states, payloads."""
    records = [
        record(0, TrialState.COMPLETE, 0.80, {"lr": 1e-3, "optimizer": "adamw", "batch_size": 32}),
        record(
            1,
            TrialState.COMPLETE,
            0.90,
            {"lr": 1e-4, "optimizer": PAYLOAD, "batch_size": 64, "momentum": 0.9},
        ),
        record(
            2,
            TrialState.PRUNED,
            0.50,
            {"lr": 1e-2, "optimizer": "sgd", "batch_size": 16, "momentum": 0.5},
            steps=1,
        ),
        record(
            3,
            TrialState.FAIL,
            0.40,
            {"lr": 1e-5, "optimizer": "adamw", "batch_size": 32},
            steps=2,
            error=f"Traceback\n{PAYLOAD}",
        ),
        record(
            4,
            TrialState.COMPLETE,
            0.85,
            {"lr": 3e-3, "optimizer": "sgd", "batch_size": 16, "momentum": 0.7},
            name=PAYLOAD,
        ),
        record(5, TrialState.COMPLETE, 0.70, {"lr": 5e-5, "optimizer": "adamw", "batch_size": 64}),
        record(
            6,
            TrialState.RUNNING,
            0.60,
            {"lr": 2e-4, "optimizer": "sgd", "batch_size": 32, "momentum": 0.1},
            steps=2,
        ),
    ]
    return search(
        records,
        n_trials=20,
        started=T0,
        finished=T0 + timedelta(hours=1),
        settings={"sampler": "TPESampler", PAYLOAD: PAYLOAD},
        versions={"optuna": "5.0.0"},
        space={"lr": {"type": "float", "low": 1e-5, "high": 1e-2, "log": True}},
    )


@pytest.fixture(scope="module")
def rich_html():
    return render_html(rich_result())


def plot_ids(text):
    return re.findall(r'<div class="hp-plot" id="([^"]+)"', text)


# ---------------------------------------------------------------------- the single-search report


def test_report_embeds_plotly_once_and_draws_every_plot(rich_html):
    bundle = get_plotlyjs()
    assert rich_html.count(bundle) == 1
    assert len(rich_html) < len(bundle) + 1_000_000  # the figures do not carry another copy
    slices = [f"hp-plot-slice-{i}" for i in range(4)]  # batch_size, lr, momentum, optimizer
    assert plot_ids(rich_html) == [
        "hp-plot-history",
        "hp-plot-curves",
        "hp-plot-parallel",
        "hp-plot-importance",
        *slices,
    ]
    assert rich_html.count('class="hp-plot"') == 8
    # One script per plot, plus the bundle, the helper that fits figures to their cells and the table sorter.
    assert rich_html.count("<script") == 8 + 3
    for anchor in ("summary", "history", "curves", "parallel", "importance", "slices", "trials"):
        assert f'<section id="{anchor}">' in rich_html


def test_report_summary(rich_html):
    assert "TPESampler" in rich_html
    assert "1 FAIL" in rich_html and "4 COMPLETE" in rich_html
    assert "run-1 (trial 1): 0.9" in rich_html
    # Training time: 4 complete trials x 80 s + pruned 20 s + failed 40 s + running 40 s = 420 s.
    assert "7m 00s (sum of trial durations)" in rich_html
    assert "Estimate: for each pruned trial" in rich_html


def test_report_escapes_every_user_string(rich_html):
    assert PAYLOAD not in rich_html
    assert "<script>alert" not in rich_html
    # Shown, escaped, in the summary and the table (name, categorical value, error, settings).
    assert rich_html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 4


def test_report_trials_table_is_sortable(rich_html):
    table = rich_html[rich_html.index('<section id="trials">') :]
    assert '<table class="sortable">' in table
    for column in ("trial_id", "params_momentum", "duration_s", "n_evaluations", "error"):
        assert f"<th>{column}</th>" in table
    assert table.count("<tr>") + table.count('<tr class="best"') == 1 + 7
    assert table.count('<tr class="best"') == 1  # the best trial, starred
    assert 'addEventListener("click"' in rich_html


def test_figure_json_cannot_close_its_script():
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=[1], y=[2], name="</script><script>alert(1)</script>", text=["a&b"]))
    text = figure_json(fig)
    assert "<" not in text and ">" not in text and "&" not in text
    div = plot_div(fig, "p")
    assert div.count("</script>") == 1  # only the real closing tag
    assert '<div class="hp-plot" id="p">' in div


@pytest.mark.slow
def test_write_html_to_a_path_and_to_output_dir(tmp_path):
    result = rich_result()
    path = write_html(result, tmp_path / "sub" / "report.html")
    assert path == str(tmp_path / "sub" / "report.html")
    text = (tmp_path / "sub" / "report.html").read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    result.output_dir = str(tmp_path)
    assert write_html(result) == str(tmp_path / "report.html")


# ---------------------------------------------------------------------- degenerate inputs


def _multi(k):
    # Minimize objective 0, maximize objective 1 (and minimize a constant third): the front is 0, 1, 3
    # (2 is dominated by 1, 4 by 3).
    values = [[0.1, 0.5], [0.2, 0.7], [0.3, 0.6], [0.4, 0.9], [0.5, 0.9]]
    records = [
        record(n, TrialState.COMPLETE, [*v, 0.3][:k], {"x": n, "kind": "ab"[n % 2]})
        for n, v in enumerate(values)
    ]
    records.append(record(5, TrialState.PRUNED, [0.0, 1.0, 0.3][:k], {"x": 5, "kind": "a"}))
    records.append(record(6, TrialState.FAIL, None, {"x": 6, "kind": "b"}, error="boom"))
    return search(records, directions=["minimize", "maximize", "minimize"][:k])


DEGENERATE = {
    "empty": (lambda: search([]), []),
    "all failed": (
        lambda: search(
            [record(n, TrialState.FAIL, None, {"lr": 0.1 * (n + 1)}, error="boom") for n in range(3)]
        ),
        [],
    ),
    "no intermediates": (
        lambda: search(
            [
                record(n, TrialState.COMPLETE, 0.5 + 0.1 * n, {"lr": 0.1 * (n + 1)}, intermediates=[])
                for n in range(3)
            ]
        ),
        ["history", "parallel", "importance", "slice-0"],
    ),
    "no params": (
        lambda: search([record(n, TrialState.COMPLETE, 0.5 + 0.1 * n, {}) for n in range(3)]),
        ["history", "curves"],
    ),
    "one complete trial": (
        lambda: search(
            [record(0, TrialState.COMPLETE, 0.5, {"lr": 0.1}), record(1, TrialState.PRUNED, 0.2, {"lr": 0.2})]
        ),
        ["history", "curves", "parallel", "slice-0"],
    ),
    "constant params and objective": (
        lambda: search([record(n, TrialState.COMPLETE, 0.5, {"lr": 0.1, "opt": "sgd"}) for n in range(3)]),
        ["history", "curves", "parallel", "slice-0", "slice-1"],
    ),
    "running only": (
        lambda: search([record(0, TrialState.RUNNING, 0.3, {"lr": 0.1}, finished=None)]),
        ["history", "curves"],
    ),
    "two objectives": (
        lambda: _multi(2),
        ["history", "curves", "parallel", "importance", "slice-0", "slice-1", "pareto"],
    ),
    "three objectives": (
        lambda: _multi(3),
        ["history", "curves", "parallel", "importance", "slice-0", "slice-1"],
    ),
}


@pytest.mark.parametrize("case", list(DEGENERATE))
@pytest.mark.slow
def test_degenerate_inputs_render(case):
    build, expected = DEGENERATE[case]
    result = build()
    text = render_html(result)
    assert plot_ids(text) == [f"hp-plot-{p}" for p in expected]
    assert text.count(get_plotlyjs()) == 1
    assert render_markdown(result)


@pytest.mark.parametrize("optuna_importable", [True, False])
@pytest.mark.slow
def test_a_none_choice_among_numbers_is_a_category(monkeypatch, optuna_importable):
    # A native space (no portable spec) may offer None beside numbers, e.g. suggest_categorical("wd", [None, 0.1]):
    # the report drew it as a number and failed on float(None).
    if not optuna_importable:
        monkeypatch.setitem(sys.modules, "optuna", None)
    wds = [None, 0.01, 0.1, None, 0.01]
    records = [
        record(n, TrialState.COMPLETE, 0.5 + 0.1 * n, {"lr": 0.1 * (n + 1), "wd": wd})
        for n, wd in enumerate(wds)
    ]
    records.append(record(5, TrialState.COMPLETE, 0.2, {"lr": 0.7}))  # wd inactive here
    result = search(records)
    text = render_html(result)
    assert "hp-plot-parallel" in text and "hp-plot-importance" in text
    from hpsearch.report._analysis import INACTIVE, param_axis

    axis = param_axis(result, "wd", result.records)
    assert axis.kind == "categorical"
    assert axis.ticktext[-1] == INACTIVE and len(axis.ticktext) == 4  # None, 0.01, 0.1 and inactive
    assert axis.positions[0] == axis.positions[3] != axis.positions[5]


@pytest.mark.parametrize("with_space", [True, False])
@pytest.mark.slow
def test_an_int_beyond_64_bits_is_drawn(with_space):
    # plotly's JSON encoder and an Int64 column refuse such an int; the report draws it (as a float or a category).
    space = {"s": {"type": "categorical", "choices": [10**30, 5, 7]}} if with_space else None
    records = [record(n, TrialState.COMPLETE, 0.1 * n, {"s": [10**30, 5, 7][n % 3]}) for n in range(5)]
    text = render_html(search(records, space=space))
    assert "hp-plot-slice-0" in text
    assert render_markdown(search(records, space=space))


@pytest.mark.slow
def test_pareto_section_lists_the_front():
    result = _multi(2)
    assert [r.number for r in result.best_trials] == [0, 1, 3]
    text = render_html(result)
    assert "3 trial(s) on the Pareto front" in text
    summary = text[text.index('<section id="summary">') : text.index('<section id="history">')]
    assert all(f'<td data-v="run-{n}">run-{n}</td>' in summary for n in (0, 1, 3))
    assert "run-2" not in summary


# ---------------------------------------------------------------------- analysis


def test_importance_uses_fanova_when_optuna_is_importable():
    importances = compute_importances(rich_result())
    assert importances.method == "fanova"
    (per,) = importances.per_objective
    assert set(per) == {"lr", "optimizer", "batch_size"}  # momentum is conditional: left out, and said so
    assert "momentum" in importances.note
    assert sum(per.values()) == pytest.approx(1.0)


@pytest.mark.slow
def test_importance_falls_back_to_spearman_without_optuna(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)
    importances = compute_importances(rich_result())
    assert importances.method == "spearman"
    assert "optuna is not installed" in importances.note.lower()
    (per,) = importances.per_objective
    assert set(per) <= {"lr", "optimizer", "batch_size", "momentum"}
    assert all(0.0 <= v <= 1.0 for v in per.values())
    text = render_html(rich_result())
    assert "Spearman" in text and "hp-plot-importance" in text


def test_spearman_is_exact_on_a_monotone_parameter(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)
    records = [
        record(n, TrialState.COMPLETE, float(n), {"x": float(10 - n), "noise": [3, 1, 2, 5, 4][n]})
        for n in range(5)
    ]
    per = compute_importances(search(records)).per_objective[0]
    assert per["x"] == pytest.approx(1.0)
    assert per["noise"] == pytest.approx(0.6)  # 1 - 6 * 8 / (5 * 24)


def test_importance_needs_two_complete_trials():
    result = search(
        [record(0, TrialState.COMPLETE, 0.5, {"lr": 0.1}), record(1, TrialState.FAIL, None, {"lr": 0.2})]
    )
    reason = compute_importances(result)
    assert isinstance(reason, str) and "at least 2 complete trials" in reason
    assert "at least 2 complete trials" in render_html(result)


def test_saved_time_estimate():
    records = [
        record(0, TrialState.COMPLETE, 0.5, {}, steps=4),  # last step 40
        record(1, TrialState.COMPLETE, 0.6, {}, steps=6),  # last step 60 -> median 50
        record(2, TrialState.PRUNED, 0.1, {}, steps=1, seconds_per_step=3.0),  # (50 - 10) x 3 s = 120 s
        record(3, TrialState.PRUNED, 0.1, {}, steps=2, seconds_per_step=1.0),  # (50 - 20) x 1 s = 30 s
        record(4, TrialState.PRUNED, None, {}, intermediates=[], last_step=None),  # no step count: left out
    ]
    saved = saved_time(search(records))
    assert saved.median_steps == 50
    assert saved.seconds == pytest.approx(150.0)
    assert (saved.counted, saved.skipped) == (2, 1)


# ---------------------------------------------------------------------- compare


def _timed(objectives, seconds, backend):
    """Sequential trials: trial n runs for seconds[n]."""
    records, t = [], T0
    for n, (objective, duration) in enumerate(zip(objectives, seconds)):
        state = TrialState.COMPLETE if objective is not None else TrialState.FAIL
        records.append(
            record(
                n, state, objective, {"x": n}, start=t, finished=t + timedelta(seconds=duration), error=None
            )
        )
        t += timedelta(seconds=duration)
    return search(records, backend=backend, started=T0)


def test_time_to_target():
    fast = _timed([0.5, 0.8, 0.7], [10, 10, 10], "optuna")
    reach = time_to_target(fast, 0.8)
    assert (reach.trials, reach.seconds, reach.record.number) == (2, 20.0, 1)
    slow = _timed([0.1, None, 0.6, 0.8, 0.9], [5, 5, 5, 100, 5], "ray")
    reach = time_to_target(slow, 0.8)
    assert (reach.trials, reach.seconds) == (4, 115.0)
    assert time_to_target(slow, 0.95).trials is None


def test_compare_html():
    a = _timed([0.5, 0.8, 0.7], [10, 10, 10], "optuna")
    b = _timed([0.1, None, 0.6, 0.8, 0.9], [5, 5, 5, 100, 5], "ray")
    text = compare_html([a, b], labels=["tpe", PAYLOAD])
    assert text.count(get_plotlyjs()) == 1
    assert plot_ids(text) == ["hp-plot-compare-trials", "hp-plot-compare-time"]
    assert PAYLOAD not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    # The default target is the best of the worst search (0.8 for a, 0.9 for b, maximized).
    assert "Target: 0.8 (the best objective of the worst search" in text
    target = text[text.index('<section id="target">') :]
    assert '<td class="num" data-v="20.0">20</td>' in target  # a: 20 s
    assert '<td class="num" data-v="115.0">115</td>' in target  # b: 115 s
    best = text[text.index('<section id="best">') : text.index('<section id="target">')]
    assert "0.9" in best and "0.8" in best


def test_compare_html_default_labels_and_explicit_target(tmp_path):
    a = _timed([0.5, 0.8], [10, 10], "optuna")
    b = _timed([None, None], [10, 10], "sigopt")  # never completes: shown, never reaches
    path = write_compare_html([a, b], tmp_path / "compare.html", target=0.6)
    text = (tmp_path / "compare.html").read_text(encoding="utf-8")
    assert path == str(tmp_path / "compare.html")
    assert "1. optuna" in text and "2. sigopt" in text
    assert "Target: 0.6 (given" in text


def test_compare_html_validates_its_inputs():
    a = _timed([0.5], [10], "optuna")
    with pytest.raises(ValueError, match="at least one"):
        compare_html([])
    with pytest.raises(ValueError, match="one label per result"):
        compare_html([a, a], labels=["only one"])
    minimize = SearchResult("ray", ["minimize"], [])
    with pytest.raises(ValueError, match="same direction"):
        compare_html([a, minimize])
    with pytest.raises(ValueError, match="single-objective"):
        compare_html([_multi(2)])


# ---------------------------------------------------------------------- plotly is optional


def test_missing_plotly_says_how_to_install(monkeypatch):
    for name in list(sys.modules):
        if name == "plotly" or name.startswith("plotly."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "plotly", None)
    with pytest.raises(ImportError, match=r"pip install 'hpsearch\[report\]'"):
        render_html(rich_result())
    with pytest.raises(ImportError, match=r"pip install 'hpsearch\[report\]'"):
        compare_html([rich_result()])
    assert "run-1" in render_markdown(rich_result())  # Markdown needs no plotly


def test_nan_objective_is_drawn_without_winning():
    records = [
        record(0, TrialState.COMPLETE, math.nan, {"x": 1.0}),
        record(1, TrialState.COMPLETE, 0.2, {"x": 2.0}),
    ]
    result = search(records)
    assert result.best_trial.number == 1
    assert "hp-plot-history" in render_html(result)
