"""Faults a sweep must survive, with real processes killed: nothing finished is lost, nothing is run twice.

- a driver killed with SIGKILL mid-trial on SQLite, journal and PostgreSQL storage, then rerun;
- four worker processes sharing one PostgreSQL study and its budget;
- a process killed while a checkpoint is being written, then resumed;
- a full disk and an unwritable output_dir, refused before any training.

Drivers run ``tests/hpsearch/_sweep_worker.py``; PostgreSQL is a throw-away cluster (``_postgres.py``).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import optuna
import pytest

import hpsearch
import spaces
from hpsearch import SearchConfigError, SearchResult, TrialState
from tests._digits import DigitsMLP, digits_datasets
from tests.hpsearch._postgres import postgres  # noqa: F401 - the session fixture
from trainer import Trainer, TrainerCallback, TrainingArguments

ROOT = Path(__file__).resolve().parents[2]
FAIL = optuna.trial.TrialState.FAIL
COMPLETE = optuna.trial.TrialState.COMPLETE
# Safety nets only (a broken driver must not hang CI); nothing asserts how long anything took.
PATIENCE_S = 300


@pytest.fixture(scope="module")
def digits_npz(tmp_path_factory) -> str:
    """The digits split as arrays for the workers (loading it there would import scikit-learn in every process)."""
    import numpy as np

    train, evaluation = digits_datasets()
    path = tmp_path_factory.mktemp("digits") / "digits.npz"
    np.savez(
        path,
        x_train=train.x.numpy(),
        y_train=train.y.numpy(),
        x_eval=evaluation.x.numpy(),
        y_eval=evaluation.y.numpy(),
    )
    return str(path)


def _spawn(mode: str, config: dict, log: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.hpsearch._sweep_worker", mode, json.dumps(config)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _finish(proc: subprocess.Popen, log: Path) -> None:
    try:
        proc.wait(timeout=PATIENCE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"worker did not finish:\n{log.read_text()[-4000:]}")
    assert proc.returncode == 0, log.read_text()[-4000:]


def _wait_for(path: Path, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"worker exited ({proc.returncode}) before {path.name}:\n{log.read_text()[-4000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {path.name} after {PATIENCE_S} s:\n{log.read_text()[-4000:]}")
        time.sleep(0.1)


def _started(markers: Path) -> dict[int, list[str]]:
    """Trial number -> pids of the processes that started training it."""
    out: dict[int, list[str]] = {}
    for marker in markers.glob("started-*"):
        _, number, pid = marker.name.split("-")
        out.setdefault(int(number), []).append(pid)
    return out


def _open_storage(kind: str, location: str):
    """Read-only view of a study's storage, as the test sees it (no heartbeat)."""
    if kind == "journal":
        from optuna.storages.journal import JournalFileBackend

        return optuna.storages.JournalStorage(JournalFileBackend(location))
    return location


# ---------------------------------------------------------------------------------------------- driver killed
KILL_CASES = {
    # storage kind, and whether only Optuna's heartbeat may reveal the dead driver (its trials claim another
    # machine) rather than the check for a dead local process. Journal files have no heartbeat.
    "sqlite-heartbeat": ("sqlite", True),
    "journal": ("journal", False),
    "postgresql": ("postgresql", False),
}


@pytest.mark.parametrize("case", list(KILL_CASES))
@pytest.mark.multiprocess
def test_driver_killed_mid_trial_then_rerun_keeps_finished_trials(case, tmp_path, request, digits_npz):
    kind, heartbeat_only = KILL_CASES[case]
    if kind == "sqlite":
        location = f"sqlite:///{tmp_path}/study.db"
    elif kind == "journal":
        location = str(tmp_path / "study.log")
    else:
        location = request.getfixturevalue("postgres").url
    study_name = f"killed-{case}-{uuid.uuid4().hex[:8]}"
    markers = tmp_path / "markers"
    markers.mkdir()
    output_dir = tmp_path / "out"
    log = tmp_path / "driver.log"
    config = dict(
        storage=location,
        study_name=study_name,
        output_dir=str(output_dir),
        n_trials=4,
        max_steps=3,
        marker_dir=str(markers),
        data=digits_npz,
    )
    if heartbeat_only:
        # The trials claim another machine's driver, so only a stale heartbeat can reveal that it died.
        config.update(foreign_owner=True, heartbeat=[1, 2])

    driver = _spawn("sweep", {**config, "hold_trial": 2}, log)
    _wait_for(markers / "holding-2", driver, log)  # trials 0 and 1 are finished, trial 2 is mid-training
    study = optuna.load_study(study_name=study_name, storage=_open_storage(kind, location))
    before = {t.number: (t.params, t.value) for t in study.get_trials(states=(COMPLETE,))}
    assert sorted(before) == [0, 1]
    assert study.trials[2].state == optuna.trial.TrialState.RUNNING
    killed_params = study.trials[2].params
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    assert driver.returncode == -signal.SIGKILL

    # What is on disk right after the kill is readable and holds the finished trials.
    saved = SearchResult.load(output_dir)
    assert {int(r.trial_id): (r.params, r.objective) for r in saved.records} == before
    assert all(r.state is TrialState.COMPLETE for r in saved.records)
    # The snapshot (search.json) was taken at the first trial; the second is in the journal, which load read.
    snapshot = SearchResult.from_json((output_dir / "search.json").read_text(encoding="utf-8"))
    assert [r.trial_id for r in snapshot.records] == ["0"]
    assert '"trial_id":"1"' in (output_dir / "search.journal.jsonl").read_text(encoding="utf-8")

    if heartbeat_only:
        time.sleep(3)  # let the dead driver's last heartbeat age past the grace period (2 s)
    _finish(_spawn("sweep", config, log), log)

    study = optuna.load_study(study_name=study_name, storage=_open_storage(kind, location))
    trials = study.get_trials()
    # Finished trials were kept as they were, and none was trained again.
    assert {t.number: (t.params, t.value) for t in trials if t.number in before} == before
    started = _started(markers)
    assert all(len(pids) == 1 for pids in started.values()), started
    # The interrupted trial is FAIL, and its parameters were retried once in a new trial.
    assert trials[2].state == FAIL
    retries = [t for t in trials if t.user_attrs.get("hpsearch_retry_of") == 2]
    assert len(retries) == 1 and retries[0].params == killed_params and retries[0].state == COMPLETE
    # The budget: exactly n_trials trials that did not fail; the killed one is an extra FAIL record.
    assert sum(t.state != FAIL for t in trials) == 4
    assert [t.number for t in trials if t.state == FAIL] == [2]
    assert len(trials) == 5

    result = SearchResult.load(output_dir)
    assert len(result.records) == 5
    by_number = {r.number: r for r in result.records}
    assert by_number[2].state is TrialState.FAIL
    assert "driver process died" in by_number[2].error and f"trial {retries[0].number}" in by_number[2].error
    assert {n: (by_number[n].params, by_number[n].objective) for n in before} == before
    assert result.counts()["COMPLETE"] == 4


# ---------------------------------------------------------------------------------------------- 4 workers
def test_four_workers_share_one_postgres_study_and_its_budget(postgres, tmp_path, digits_npz):  # noqa: F811
    study_name = f"shared-{uuid.uuid4().hex[:8]}"
    markers = tmp_path / "markers"
    markers.mkdir()
    n_trials, n_workers = 40, 4
    workers = []
    for i in range(n_workers):
        config = dict(
            storage=postgres.url,
            study_name=study_name,
            output_dir=str(tmp_path / f"worker-{i}"),
            n_trials=n_trials,
            max_steps=2,
            marker_dir=str(markers),
            seed=i,
            data=digits_npz,
        )
        log = tmp_path / f"worker-{i}.log"
        workers.append((_spawn("sweep", config, log), log))
    for proc, log in workers:
        _finish(proc, log)

    study = optuna.load_study(study_name=study_name, storage=postgres.url)
    trials = study.get_trials()
    complete = [t for t in trials if t.state == COMPLETE]
    assert len(complete) == n_trials
    # Anything else is an empty trial of a worker that lost the race for the last slot: never trained.
    others = [t for t in trials if t.state != COMPLETE]
    assert all(t.user_attrs.get("hpsearch_over_budget") and not t.params for t in others), others
    # Each trial was trained exactly once, by one worker, and no two trials share their parameters.
    started = _started(markers)
    assert sorted(started) == sorted(t.number for t in complete)
    assert all(len(pids) == 1 for pids in started.values()), started
    assert len({tuple(sorted(t.params.items())) for t in complete}) == n_trials
    assert len({pids[0] for pids in started.values()}) > 1  # the work was shared

    # Each worker's own results hold the trials it ran, in detail; none is lost.
    ran_by: dict[str, set[int]] = {}
    for number, pids in started.items():
        ran_by.setdefault(pids[0], set()).add(number)
    seen = set()
    for i in range(n_workers):
        result = SearchResult.load(tmp_path / f"worker-{i}")
        detailed = {r.number for r in result.records if r.node is not None and r.intermediates}
        seen |= detailed
        assert len({r.number for r in result.records}) == len(result.records)  # no duplicates
    assert seen == {t.number for t in complete}

    # The recipe's last step: the same call once more trains nothing and writes the whole search in one place.
    train, evaluation = digits_datasets()
    trainer = Trainer(
        model_init=lambda trial: DigitsMLP(hidden=trial["hidden"] if trial is not None else 32),
        args=TrainingArguments(
            output_dir=str(tmp_path / "all"),
            max_steps=2,
            report_to="none",
            disable_tqdm=True,
            logging_strategy="no",
        ),
        train_dataset=train,
        eval_dataset=evaluation,
    )
    best = hpsearch.hyperparameter_search(
        trainer,
        hp_space={
            "learning_rate": spaces.Float(1e-3, 1e-1, log=True),
            "hidden": spaces.Categorical([8, 16, 32, 64]),
        },
        compute_objective="eval_loss",
        n_trials=n_trials,
        backend="optuna",
        storage=postgres.url,
        study_name=study_name,
        load_if_exists=True,
    )
    assert _started(markers) == started  # nothing trained
    combined = SearchResult.load(tmp_path / "all")
    assert len(combined.records) == n_trials and combined.counts()["COMPLETE"] == n_trials
    assert best.objective == min(t.value for t in complete)


@pytest.mark.slow
def test_a_worker_that_loses_the_race_for_the_last_slot_trains_nothing(tmp_path, monkeypatch):
    """Deterministic version of the race above: another worker claims the last slot between our check and ask."""
    storage = f"sqlite:///{tmp_path}/race.db"
    real_ask = optuna.study.Study.ask
    asks = []

    def racing_ask(self, *args, **kwargs):
        asks.append(1)
        if len(asks) == 2:  # our second ask: another worker's ask lands first and takes the last slot
            rival = real_ask(self)
            rival.set_user_attr("hpsearch_owner", "another-machine:1")
        return real_ask(self, *args, **kwargs)

    monkeypatch.setattr(optuna.study.Study, "ask", racing_ask)
    built = []
    train, evaluation = digits_datasets()
    trainer = Trainer(
        model_init=lambda: built.append(1) or DigitsMLP(hidden=16),
        args=TrainingArguments(
            output_dir=str(tmp_path / "out"),
            max_steps=2,
            report_to="none",
            disable_tqdm=True,
            logging_strategy="no",
        ),
        train_dataset=train,
        eval_dataset=evaluation,
    )
    built.clear()
    best = hpsearch.hyperparameter_search(
        trainer,
        hp_space={"learning_rate": spaces.Float(1e-3, 1e-2)},
        compute_objective="eval_loss",
        n_trials=2,
        backend="optuna",
        storage=storage,
        study_name="race",
    )
    trials = optuna.load_study(study_name="race", storage=storage).get_trials()
    assert [t.state for t in trials] == [COMPLETE, optuna.trial.TrialState.RUNNING, FAIL]
    assert trials[2].user_attrs["hpsearch_over_budget"] and not trials[2].params
    assert len(built) == 1  # only trial 0 was trained by this worker
    assert sorted(r.number for r in best.run_summary.records) == [0, 1]  # the empty trial is not a result


# ---------------------------------------------------------------------------------------------- checkpoint
class _FirstStep(TrainerCallback):
    def __init__(self, expected_weights) -> None:
        self.expected = expected_weights
        self.first_step = None
        self.weights_matched = None

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        if self.weights_matched is None:
            current = {k: v.detach().cpu() for k, v in model.state_dict().items()}
            self.weights_matched = all((current[k] == v).all() for k, v in self.expected.items())

    def on_step_end(self, args, state, control, **kwargs):
        if self.first_step is None:
            self.first_step = state.global_step


@pytest.mark.multiprocess
def test_process_killed_while_writing_a_checkpoint_resumes_from_the_previous_one(tmp_path, digits_npz):
    from safetensors.torch import load_file

    from trainer._checkpoint import get_last_checkpoint

    output_dir = tmp_path / "run"
    log = tmp_path / "train.log"
    config = dict(output_dir=str(output_dir), max_steps=6, save_steps=2, kill_at_save=2, data=digits_npz)
    proc = _spawn("checkpoint", config, log)
    proc.wait(timeout=PATIENCE_S)
    assert proc.returncode == -signal.SIGKILL, log.read_text()[-4000:]
    # The second save (step 4) died with its files written but unpublished: only checkpoint-2 counts.
    assert (output_dir / ".tmp-checkpoint-4" / "model.safetensors").exists()
    assert not (output_dir / "checkpoint-4").exists()
    assert get_last_checkpoint(str(output_dir)) == str(output_dir / "checkpoint-2")

    train, evaluation = digits_datasets()
    probe = _FirstStep(load_file(str(output_dir / "checkpoint-2" / "model.safetensors")))
    trainer = Trainer(
        model_init=lambda: DigitsMLP(hidden=16),
        args=TrainingArguments(
            output_dir=str(output_dir),
            max_steps=6,
            save_strategy="steps",
            save_steps=2,
            per_device_train_batch_size=32,
            eval_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            report_to="none",
        ),
        train_dataset=train,
        eval_dataset=evaluation,
        callbacks=[probe],
    )
    trainer.train(resume_from_checkpoint=True)
    assert probe.first_step == 3 and probe.weights_matched  # continued from checkpoint-2's step and weights
    assert trainer.state.global_step == 6
    assert (output_dir / "checkpoint-4" / "trainer_state.json").exists()
    assert not (output_dir / ".tmp-checkpoint-4").exists()  # the next save of that step replaced the debris


# ---------------------------------------------------------------------------------------------- disk
def _refused_search(output_dir: str, tmp_path: Path):
    calls = []

    def model_init():
        calls.append(1)
        return DigitsMLP()

    train, evaluation = digits_datasets()
    trainer = Trainer(
        model_init=model_init,
        args=TrainingArguments(output_dir=output_dir, max_steps=2, report_to="none", disable_tqdm=True),
        train_dataset=train,
        eval_dataset=evaluation,
    )
    calls.clear()  # the Trainer builds one model up front, as transformers' does; trials would build more
    storage = tmp_path / "refused.db"
    with pytest.raises(SearchConfigError) as info:
        hpsearch.hyperparameter_search(
            trainer,
            hp_space={"learning_rate": spaces.Float(1e-3, 1e-2)},
            n_trials=2,
            backend="optuna",
            storage=f"sqlite:///{storage}",
        )
    assert calls == []  # no model was built, nothing trained
    assert not storage.exists()
    return str(info.value)


def test_unwritable_output_dir_is_refused_before_training(tmp_path):
    # Tests run as root, where chmod does not stop writes; a folder "inside" a regular file cannot be made by anyone.
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    output_dir = str(blocker / "search")
    message = _refused_search(output_dir, tmp_path)
    assert repr(output_dir) in message and "not writable" in message and "output_dir=" in message


@contextlib.contextmanager
def _full_disk(tmp_path: Path):
    """A folder on a 64 KiB tmpfs filled to the last byte; if mounting is not allowed, fsync reports ENOSPC."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    mounted = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount_point)], capture_output=True
        ).returncode
        == 0
    )
    try:
        if mounted:
            with contextlib.suppress(OSError), open(mount_point / "filler", "wb") as f:
                while True:
                    f.write(b"\0" * 4096)
                    f.flush()
            yield mount_point, None
        else:

            def no_space(fd):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

            yield mount_point, no_space
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(mount_point)], check=False)


@pytest.mark.multiprocess
def test_full_disk_is_refused_before_training(tmp_path, monkeypatch):
    with _full_disk(tmp_path) as (mount_point, fake_fsync):
        if fake_fsync is not None:
            monkeypatch.setattr(os, "fsync", fake_fsync)
        output_dir = str(mount_point / "search" / "nested")
        message = _refused_search(output_dir, tmp_path)
        assert (
            repr(output_dir) in message and "No space left on device" in message and "free space" in message
        )
        assert not (mount_point / "search").exists()  # the probe's folders were removed again
