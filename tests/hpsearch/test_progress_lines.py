"""The per-trial progress lines of a search run from Python, as a user's script sees them: on stderr with no
logging configured, silenced through the ``hpsearch.progress`` logger, and left to the bar in `hpsearch run`."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import logging
from hpsearch import hyperparameter_search
from spaces import Float
from tests.hpsearch._trials import digits_search_trainer
{silence}
trainer = digits_search_trainer({out!r})
hyperparameter_search(trainer, hp_space={{"learning_rate": Float(1e-3, 1e-1, log=True)}}, backend="random",
                      n_trials=2, compute_objective="eval_loss", direction="minimize", seed=0)
"""


def _run(tmp_path: Path, silence: str = "") -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(SCRIPT.format(out=str(tmp_path / "out"), silence=silence))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_script_without_logging_shows_a_line_per_trial_and_can_silence_them(tmp_path):
    shown = _run(tmp_path / "a")
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stderr.splitlines() if line.startswith("[")]
    assert [line.split()[0] for line in lines] == ["[1/2]", "[2/2]"], shown.stderr
    assert all(" COMPLETE objective " in line and " | best " in line for line in lines), lines
    silent = _run(tmp_path / "b", 'logging.getLogger("hpsearch.progress").setLevel(logging.WARNING)')
    assert silent.returncode == 0, silent.stderr
    assert not [line for line in silent.stderr.splitlines() if line.startswith("[")], silent.stderr


def test_the_cli_bar_replaces_the_lines(tmp_path, caplog):
    from hpsearch import _progress
    from hpsearch.session import SearchSession

    caplog.set_level("INFO", logger="hpsearch.progress")

    class _Result:
        is_multi_objective = False
        best_trial = None
        planned_trials = 4

        def counts(self):
            return {"COMPLETE": 0, "PRUNED": 0, "FAIL": 1}

    from hpsearch._tally import RunningTally
    from hpsearch.trial import TrialRecord, TrialState

    record = TrialRecord(trial_id="0", number=0, name="run-0", state=TrialState.FAIL, params={}, error="boom")
    session = SearchSession.__new__(SearchSession)
    session.result, session.n_trials = _Result(), 4
    session.tally = RunningTally()
    session.tally.counts["FAIL"] = 1
    _progress.trial_line(session, record)
    assert [r.getMessage() for r in caplog.records] == ["[1/4] run-0 FAIL objective - | best - | boom"]
    caplog.clear()
    with _progress.SweepProgress(4, enabled=True, file=open(os.devnull, "w")):
        _progress.trial_line(session, record)
    assert not caplog.records
