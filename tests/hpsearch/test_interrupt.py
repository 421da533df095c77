"""Ctrl-C in `hpsearch run`: a real SIGINT to a real subprocess mid-trial ends it with exit code 130, no traceback,
and one line whose counts agree with search.json and whose command continues the sweep to its n_trials."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from hpsearch import SearchResult, TrialState

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]

ROOT = Path(__file__).resolve().parents[2]
N_TRIALS = 4

SWEEP = {
    "model": "examples.digits.model:model_init",
    "data": "examples.digits.model:datasets",
    "objective": "eval_loss",
    "direction": "minimize",
    "n_trials": N_TRIALS,
    "torch_threads": 1,
    "output_dir": "out",
    # Long enough (a few seconds) for the signal to land inside the third trial.
    "training_args": {
        "max_steps": 600,
        "per_device_train_batch_size": 64,
        "eval_strategy": "steps",
        "eval_steps": 200,
        "save_strategy": "no",
        "report_to": "none",
        "disable_tqdm": True,
    },
    "space": {"learning_rate": {"type": "float", "low": 1.0e-3, "high": 1.0e-1, "log": True}},
}
BACKENDS = {
    "optuna": {"storage": "sqlite:///{output_dir}/study.db", "sampler": {"name": "RandomSampler", "seed": 0}},
    "random": {"seed": 0},
}


def _command(args: list[str]) -> list[str]:
    assert args[0] == "hpsearch"
    return [sys.executable, "-m", "hpsearch", *args[1:]]


def _interrupt_after_two_trials(command: list[str]) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # SIGINT at its default in the child, whatever this process inherited: a shell starts a background job (and
    # pytest-xdist may run its workers) with SIGINT ignored, and Python installs no KeyboardInterrupt for an
    # ignored SIGINT, so the child would never see the Ctrl-C and finish its search.
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stderr or []), daemon=True)
    reader.start()
    deadline = time.monotonic() + 240
    while not any(line.startswith("[2/") for line in lines):
        assert process.poll() is None, "".join(lines)
        assert time.monotonic() < deadline, "".join(lines)
        time.sleep(0.1)
    # At once: the third trial has just begun (its sampling or its training: Ctrl-C in either is handled alike). A
    # pause here let a loaded machine finish the remaining trials before the signal, and the search ended unstopped.
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    reader.join(timeout=10)
    return process.returncode, "".join(lines)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_ctrl_c_exits_130_with_one_line_that_agrees_with_search_json_and_continues(backend, tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({**SWEEP, "backend": backend, "backend_options": BACKENDS[backend]}))
    code, err = _interrupt_after_two_trials(_command(["hpsearch", "run", str(path), "--no-progress"]))
    assert code == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    last = err.strip().splitlines()[-1]
    saved = SearchResult.load(tmp_path / "out")
    counts = saved.counts()
    finished = counts["COMPLETE"] + counts["PRUNED"] + counts["FAIL"]
    assert finished >= 2 and not any(r.state is TrialState.RUNNING for r in saved.records)
    assert last.startswith(
        f"Interrupted: {finished} of {N_TRIALS} trials finished ({counts['COMPLETE']} complete, {counts['PRUNED']} "
        f"pruned, {counts['FAIL']} failed), saved in {tmp_path / 'out'}"
    ), last
    command = last.split("continue with: ", 1)[1]
    assert command == shlex.join(["hpsearch", "run", str(path), "--no-progress", "--resume"])
    # The command continues the sweep: the finished trials are kept, the search ends with its n_trials.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    again = subprocess.run(
        _command(shlex.split(command)), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stderr
    final = SearchResult.load(tmp_path / "out")
    kept = {r.trial_id: r.params for r in saved.records}
    assert {r.trial_id: r.params for r in final.records if r.trial_id in kept} == kept
    counts = final.counts()
    assert counts["COMPLETE"] + counts["PRUNED"] + counts["FAIL"] == N_TRIALS, final.records


SCRIPT = """
from hpsearch import hyperparameter_search
from spaces import Float
from tests.hpsearch._trials import digits_search_trainer
trainer = digits_search_trainer({out!r}, max_steps=600, eval_steps=200)
best = hyperparameter_search(trainer, hp_space={{"learning_rate": Float(1e-3, 1e-1, log=True)}}, backend="random",
                             n_trials={n}, compute_objective="eval_loss", direction="minimize", seed=0)
print("returned", best.run_id)
"""


def test_ctrl_c_in_python_returns_the_best_and_names_the_call_that_continues(tmp_path):
    code, err = _interrupt_after_two_trials(
        [sys.executable, "-c", SCRIPT.format(out=str(tmp_path / "out"), n=3 * N_TRIALS)]
    )
    assert code == 0, err
    assert "Search interrupted: returning the best of the " in err
    assert "the same call with resume=True continues it (the running trial trains again)" in err, err


def test_ctrl_c_with_trial_workers_stops_the_running_trials_instead_of_waiting_for_them(tmp_path):
    # The workers ignore SIGINT; the driver waited for both running trials to train to their end (an hour-long trial:
    # an hour), with its log silenced, then counted them, and its line said the running trial "trains again".
    sweep = {
        **SWEEP,
        "training_args": {**SWEEP["training_args"], "max_steps": 10**7, "eval_steps": 20},  # hours per trial
        "backend": "random",
        "backend_options": {"seed": 0, "trial_workers": 2},
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    events = tmp_path / "out" / "events.jsonl"
    process = subprocess.Popen(
        _command(["hpsearch", "run", str(path), "--no-progress"]),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 240
        # Both trials are training: each has reported an evaluation from its worker.
        while len(_trials_evaluated(events)) < 2:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)  # a hang guard: waiting for the trials would take hours
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    saved = SearchResult.load(tmp_path / "out")
    assert saved.records == []  # neither interrupted trial is counted: both train again on --resume
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"Interrupted: 0 of {N_TRIALS} trials finished"), err
    assert "any trial that was running (with trial_workers, several) is not counted and trains again" in last


def _trials_evaluated(events: Path) -> set[str]:
    """The ids of the trials with an evaluation in the search's event feed (none before it exists)."""
    if not events.is_file():
        return set()
    return {
        line.split('"trial_id":', 1)[1].split(",", 1)[0]
        for line in events.read_text().splitlines()
        if '"evaluation"' in line
    }
