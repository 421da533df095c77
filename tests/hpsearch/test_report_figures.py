"""What the report's, the comparison's and the dashboard's figures hand to plotly (no browser needed)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from hpsearch.report import compare_sections, report_sections
from hpsearch.report._plotly import Plot, plot_text
from hpsearch.trial import TrialRecord, TrialState
from tests.hpsearch.test_report import record, search

LINK = '<a href="x">p</a>'
# The markup our own hover templates use; any other "<" in a string handed to plotly is a tag it would render.
OWN_TAGS = re.compile(r"<br>|<extra>|</extra>")


def _hostile(directions=("maximize",)) -> Any:
    k = len(directions)
    records = [
        record(
            i,
            state,
            [0.5 + 0.1 * i] * k if k > 1 else 0.5 + 0.1 * i,
            {LINK: ["<b>bold</b>", "<i>x</i>"][i % 2], "lr": 10.0 ** -(i + 1), "n": i},
            name=f"<u>run-{i}</u>",
        )
        for i, state in enumerate([TrialState.COMPLETE] * 3 + [TrialState.PRUNED, TrialState.FAIL])
    ]
    records.append(
        TrialRecord(
            trial_id="warm-0",
            number=-1,
            name="<s>warm</s>",
            state=TrialState.COMPLETE,
            params={LINK: "<b>bold</b>", "lr": 0.01, "n": 9},
            objective=[0.3] * k if k > 1 else 0.3,
            extra={"source": "warm_start"},
        )
    )
    result = search(records, directions=directions)
    result.objective = "<em>acc</em>"
    return result


def _figures(sections) -> list[Plot]:
    out = []
    for _, _, parts in sections:
        for part in parts:
            out += [p for p in (part if isinstance(part, list) else [part]) if isinstance(p, Plot)]
    return out


def _strings(value: Any, path: str = ""):
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _strings(item, f"{path}[{i}]")


@pytest.mark.parametrize("directions", [("maximize",), ("minimize", "maximize")])
def test_no_string_handed_to_plotly_holds_markup(directions):
    result = _hostile(directions)
    sections = report_sections(result, importances=None)
    if len(directions) == 1:
        sections += compare_sections([result, _hostile()], labels=["<a href='y'>first</a>", "second"])
    plots = _figures(sections)
    assert len(plots) >= 6
    raw = [
        (p.plot_id, where, text)
        for p in plots
        for where, text in _strings(p.figure.to_plotly_json())
        if "<" in OWN_TAGS.sub("", text)
    ]
    assert not raw, raw[:5]
    # ... and the names are there, escaped once, for plotly to show as text.
    shown = {text for p in plots for _, text in _strings(p.figure.to_plotly_json())}
    assert plot_text(LINK) in shown and plot_text("<u>run-0</u>") in shown


def test_plot_text_keeps_quotes_that_plotly_would_show_as_entities():
    assert plot_text(LINK) == '&lt;a href="x"&gt;p&lt;/a&gt;'
    assert plot_text("a & b") == "a &amp; b"


def _with_warm_rows() -> Any:
    """8 trials of this search (one pruned) and 2 earlier ones told by warm start, better than any of its own."""
    records = [
        record(i, TrialState.PRUNED if i == 5 else TrialState.COMPLETE, 0.5 + 0.04 * i, {"lr": 0.1 * (i + 1)})
        for i in range(8)
    ]
    records += [
        TrialRecord(
            trial_id=f"warm-{i}",
            number=-(i + 1),
            name=f"warm-{i}",
            state=TrialState.COMPLETE,
            params={"lr": 0.05},
            objective=0.99,
            extra={"source": "warm_start"},
        )
        for i in range(2)
    ]
    return search(records, n_trials=8)


def test_warm_start_rows_are_counted_apart_and_drawn_apart():
    from hpsearch.dashboard._views import search_view
    from hpsearch.report import render_html
    from hpsearch.report._figures import WARM_COLOR, WARM_NAME, history_figure

    result = _with_warm_rows()
    page = render_html(result)
    assert "8 / 8 trials + 2 warm-start" in page and "10 / 8" not in page and "10 trials" not in page
    assert (
        ">2 earlier<" in page and "7 COMPLETE" in page
    )  # the warm-start card; the states count this search only
    from hpsearch.report import render_markdown

    assert (
        "**Trials**: 8 of 8 (7 COMPLETE, 1 PRUNED), plus 2 earlier trial(s) told by warm start"
        in render_markdown(result)
    )
    fig = history_figure(result)
    warm = [t for t in fig.data if t.name == WARM_NAME]
    assert len(warm) == 1 and list(warm[0].x) == [-2, -1] and warm[0].marker.color == WARM_COLOR
    assert all(t.name != "COMPLETE" or min(t.x) >= 0 for t in fig.data)
    best = next(t for t in fig.data if t.name == "best so far")
    own_best = max(0.5 + 0.04 * i for i in range(8) if i != 5)
    assert max(best.y) == pytest.approx(own_best)  # never the warm rows' 0.99
    meta = search_view(result, "n/a", None, True).meta
    assert (meta["trials"], meta["warm"], meta["counts"]["COMPLETE"]) == (8, 2, 7)
    assert meta["subtitle"].endswith("8 / 8 trials + 2 warm-start")


def test_a_native_optuna_space_is_drawn_from_its_distributions(tmp_path):
    """A callable hp_space(trial): categoricals of numbers drawn as categories, axes named by the metric."""
    import optuna

    import hpsearch
    from hpsearch.report._figures import history_figure, slice_figure
    from hpsearch.results import SearchResult
    from tests.hpsearch.test_warm_start import _trainer

    def hp_space(trial):
        return {
            "learning_rate": trial.suggest_float("learning_rate", 1e-3, 1e-1, log=True),
            "hidden": trial.suggest_categorical("hidden", [8, 16, 32]),
        }

    def compute_objective(metrics):
        return metrics["eval_loss"]

    hpsearch.hyperparameter_search(
        _trainer(tmp_path / "native"),
        hp_space=hp_space,
        n_trials=4,
        backend="optuna",
        compute_objective=compute_objective,
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    result = SearchResult.load(
        tmp_path / "native"
    )  # what was recorded survives the round trip through search.json
    assert result.space is None and result.objective.endswith("compute_objective")
    drawn = result.records[0].extra["space"]
    assert drawn["hidden"] == {"type": "categorical", "choices": [8, 16, 32]}
    assert drawn["learning_rate"] == {"type": "float", "low": 1e-3, "high": 1e-1, "log": True}
    names = sorted(result.param_names)
    fig, _ = slice_figure(result, "hidden")
    assert fig.layout.xaxis.type == "category" and names == ["hidden", "learning_rate"]
    fig, _ = slice_figure(result, "learning_rate")
    assert fig.layout.xaxis.type == "log"
    assert history_figure(result).layout.yaxis.title.text == "eval_loss (minimize)"


def test_the_best_trial_is_highlighted_in_curves_and_tables():
    from hpsearch.dashboard._views import compare_view
    from hpsearch.report import compare_html, render_html
    from hpsearch.report._figures import learning_curves_figure

    result = _with_warm_rows()  # best own trial: run-7 (the warm rows are better but never the best)
    fig = learning_curves_figure(result)
    best = [t for t in fig.data if t.name == "best: run-7"]
    assert len(best) == 1 and best[0].line.width > max(t.line.width for t in fig.data if t is not best[0])
    page = render_html(result)
    trials = page[page.index('<section id="trials">') :]
    assert trials.count('<tr class="best"') == 1
    starred = trials[trials.index('<tr class="best"') :]
    assert ">run-7<" in starred[: starred.index("</tr>")]
    other = _with_warm_rows()
    for r in other.records:
        if r.objective is not None and not r.trial_id.startswith("warm"):
            r.objective -= 0.1
    compared = compare_html([other, result], labels=["worse", "better"])
    row = compared[compared.index('<tr class="best"') :]
    assert compared.count('<tr class="best"') == 1 and ">better<" in row[: row.index("</tr>")]
    assert (
        '<tr class=\\"best\\"' in compare_view([other, result], ["worse", "better"], [None, None]).message()
    )
