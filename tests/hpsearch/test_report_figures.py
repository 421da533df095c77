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
        record(i, state, [0.5 + 0.1 * i] * k if k > 1 else 0.5 + 0.1 * i,
               {LINK: ["<b>bold</b>", "<i>x</i>"][i % 2], "lr": 10.0 ** -(i + 1), "n": i}, name=f"<u>run-{i}</u>")
        for i, state in enumerate([TrialState.COMPLETE] * 3 + [TrialState.PRUNED, TrialState.FAIL])
    ]
    records.append(TrialRecord(trial_id="warm-0", number=-1, name="<s>warm</s>", state=TrialState.COMPLETE,
                               params={LINK: "<b>bold</b>", "lr": 0.01, "n": 9}, objective=[0.3] * k if k > 1 else 0.3,
                               extra={"source": "warm_start"}))
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
    raw = [(p.plot_id, where, text) for p in plots for where, text in _strings(p.figure.to_plotly_json())
           if "<" in OWN_TAGS.sub("", text)]
    assert not raw, raw[:5]
    # ... and the names are there, escaped once, for plotly to show as text.
    shown = {text for p in plots for _, text in _strings(p.figure.to_plotly_json())}
    assert plot_text(LINK) in shown and plot_text("<u>run-0</u>") in shown


def test_plot_text_keeps_quotes_that_plotly_would_show_as_entities():
    assert plot_text(LINK) == '&lt;a href="x"&gt;p&lt;/a&gt;'
    assert plot_text("a & b") == "a &amp; b"
