"""What a trial's orchestration does per trial, and what it leaves out where nothing can read it (issue 32)."""

from __future__ import annotations

import glob
import os

import optuna
import pytest

import hpsearch
import spaces
from hpsearch.backends.optuna import _storage
from tests._linear import linear_trainer

optuna.logging.set_verbosity(optuna.logging.WARNING)


class _MarkerWatcher(optuna.samplers.RandomSampler):
    """Samples as RandomSampler and notes, at each sampling (inside the adapter's ask), the asking markers present."""

    def __init__(self, folder: str) -> None:
        super().__init__(seed=0)
        self.folder = folder
        self.seen: list[int] = []

    def sample_independent(self, study, trial, param_name, param_distribution):
        self.seen.append(len(glob.glob(os.path.join(self.folder, _storage.ASKING_PREFIX + "*"))))
        return super().sample_independent(study, trial, param_name, param_distribution)


@pytest.mark.parametrize("storage", ["memory", "journal"])
def test_the_asking_marker_is_written_only_where_a_rerun_can_read_it(tmp_path, storage):
    """A driver killed while asking is known to a rerun by its marker file; an in-memory study dies with its driver,
    so no rerun ever reads one: no marker is written and removed per trial there. A journal file keeps it."""
    out = str(tmp_path / "out")
    watcher = _MarkerWatcher(out)
    kwargs = {} if storage == "memory" else {"storage": str(tmp_path / "study.journal"), "study_name": "s"}
    hpsearch.hyperparameter_search(
        linear_trainer(out, max_steps=1), hp_space={"learning_rate": spaces.Float(1e-3, 1e-1, log=True)}, compute_objective="eval_loss",
        n_trials=3, backend="optuna", sampler=watcher, **kwargs,
    )  # fmt: skip
    assert watcher.seen == ([0, 0, 0] if storage == "memory" else [1, 1, 1])
    assert glob.glob(os.path.join(out, _storage.ASKING_PREFIX + "*")) == []  # removed after each ask
