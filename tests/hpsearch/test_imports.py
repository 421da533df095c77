"""`import hpsearch` stays light: no search backend, no torch, no pandas until they are used."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEAVY = (
    "optuna",
    "ray",
    "sigopt",
    "sigoptlite",
    "torch",
    "accelerate",
    "pandas",
    "plotly",
    "mlflow",
    "tensorboard",
)


def _modules_after(statement: str) -> list[str]:
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.multiprocess
def test_import_hpsearch_loads_no_backend_and_no_torch():
    loaded = set(_modules_after("import hpsearch, spaces"))
    assert not {m for m in HEAVY if m in loaded}, sorted(m for m in HEAVY if m in loaded)
    assert "hpsearch" in loaded


@pytest.mark.multiprocess
def test_public_names_resolve_without_backends():
    loaded = set(
        _modules_after(
            "import hpsearch\n"
            "names = [getattr(hpsearch, n) for n in hpsearch.__all__]\n"
            "hpsearch.HPSearchBackend('optuna'); hpsearch.default_compute_objective({'eval_loss': 1.0})"
        )
    )
    assert not {m for m in ("optuna", "ray", "sigopt") if m in loaded}


@pytest.mark.multiprocess
def test_report_and_dashboard_are_reachable_after_a_plain_import():
    """The README's `import hpsearch` then `hpsearch.report.write_html(...)`: the subpackages load on first use."""
    loaded = set(
        _modules_after(
            "import hpsearch\n"
            "assert callable(hpsearch.report.write_html) and callable(hpsearch.dashboard.start_in_background)"
        )
    )
    assert {"hpsearch.report", "hpsearch.dashboard"} <= loaded
    assert "hpsearch.report" not in set(_modules_after("import hpsearch"))  # and not before
