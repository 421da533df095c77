"""Results that survive an interrupted search (Ctrl-C, SIGKILL); the one schema on every backend is a contract test
(`tests/hpsearch/test_contract.py`)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hpsearch import SearchResult, hyperparameter_search
from spaces import Categorical, Float, Int, SearchSpace

ROOT = Path(__file__).resolve().parents[2]


def space() -> SearchSpace:
    return SearchSpace(
        {
            "learning_rate": Float(1e-3, 1e-1, log=True),
            "hidden": Categorical([8, 16]),
            "layers": Int(1, 2),
            "dropout": Float(0.0, 0.3),
        }
    )


def make_trainer(output_dir: Path, callbacks=None, **overrides):
    # The example's model and data: importable by Ray's worker processes as well.
    from examples.digits.model import model_init
    from tests._digits import digits_trainer

    settings = dict(
        max_steps=6,
        per_device_train_batch_size=64,
        per_device_eval_batch_size=512,
        eval_strategy="steps",
        eval_steps=3,
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        report_to="none",
    )
    return digits_trainer(str(output_dir), model_init, callbacks=callbacks, **{**settings, **overrides})


# ---------------------------------------------------------------------------------------------- interrupted
K = 2


def test_keyboard_interrupt_in_trial_k_plus_1_leaves_k_rows(tmp_path):
    from trainer import TrainerCallback

    class InterruptThirdTrial(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.trial_name == f"run-{K}" and state.global_step == 2:
                raise KeyboardInterrupt

    out = tmp_path / "out"
    trainer = make_trainer(out, callbacks=[InterruptThirdTrial()])
    hyperparameter_search(
        trainer,
        hp_space=space(),
        compute_objective="eval_accuracy",
        n_trials=5,
        direction="maximize",
        backend="optuna",
    )
    loaded = SearchResult.load(out)
    frame = loaded.trials_dataframe()
    assert list(frame["name"]) == [f"run-{i}" for i in range(K)], frame[["name", "state", "error"]]
    assert set(frame["state"]) <= {"COMPLETE", "PRUNED"}


KILLED_SEARCH = """
import os, signal, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from hpsearch import hyperparameter_search
from tests.hpsearch.test_results_backends import K, make_trainer, space

def kill_after_k(search, record):
    # After the k-th trial is recorded and saved: the harshest interruption, no cleanup of any kind.
    if len(search.result.records) == K:
        os.kill(os.getpid(), signal.SIGKILL)

hyperparameter_search(
    make_trainer(Path({out!r})), hp_space=space(), compute_objective="eval_accuracy", n_trials=6,
    direction="maximize", backend="optuna", storage="sqlite:///" + {out!r} + "/study.db", study_name="killed",
    on_trial_end=kill_after_k,
)
"""


@pytest.mark.slow
@pytest.mark.multiprocess
def test_search_killed_after_k_trials_loads_k_rows(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(KILLED_SEARCH).format(root=str(ROOT), out=str(out)), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    loaded = SearchResult.load(out)
    frame = loaded.trials_dataframe()
    assert len(frame) == K
    assert list(frame["number"]) == list(range(K))
    assert set(frame["state"]) <= {"COMPLETE", "PRUNED"}
    # The CSV exports are the last snapshot's (written at bounded intervals and at the end, not after every trial:
    # issue 32); the trials since are in the journal, which SearchResult.load above read. No row is ever wrong.
    import pandas as pd

    rows = pd.read_csv(out / "trials.csv")
    assert len(rows) <= K and list(rows["number"]) == list(range(len(rows)))
    assert (out / "search.journal.jsonl").is_file()
    # `hpsearch report` rewrites them from snapshot + journal: every recorded trial, in trials.csv too.
    assert loaded.refresh_exports() == (len(rows) < K)
    assert list(pd.read_csv(out / "trials.csv")["number"]) == list(range(K))
