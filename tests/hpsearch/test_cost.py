"""What every trial cost, in the results of every backend, and searches that stop on a compute budget."""

from __future__ import annotations

import math
import threading
import time

import optuna
import pytest

import hpsearch
import spaces
from hpsearch._cost import COST_COLUMNS
from hpsearch.report import render_html
from tests._digits import DigitsMLP, accuracy, digits_datasets
from trainer import Trainer, TrainingArguments

optuna.logging.set_verbosity(optuna.logging.WARNING)
SPACE = {"learning_rate": spaces.Float(1e-3, 1e-1, log=True)}


def _trainer(out) -> Trainer:
    train, evaluation = digits_datasets()
    args = TrainingArguments(
        output_dir=str(out),
        max_steps=20,
        eval_strategy="steps",
        eval_steps=10,
        save_strategy="no",
        per_device_train_batch_size=32,
        logging_strategy="no",
        disable_tqdm=True,
        report_to="none",
    )
    return Trainer(
        model_init=lambda: DigitsMLP(hidden=16),
        args=args,
        train_dataset=train,
        eval_dataset=evaluation,
        compute_metrics=accuracy,
    )


@pytest.mark.parametrize("backend", ["optuna", "sigopt", "random"])
@pytest.mark.slow
def test_cost_columns_are_measured_and_typed_alike(backend, tmp_path):
    best = hpsearch.hyperparameter_search(
        _trainer(tmp_path / "out"), hp_space=SPACE, n_trials=2, backend=backend, compute_objective="eval_loss"
    )
    frame = best.run_summary.trials_dataframe()
    for column in COST_COLUMNS:
        assert str(frame[column].dtype) == "float64", column
    assert (
        (frame["cpu_s"] > 0).all() and (frame["device_s"] > 0).all() and (frame["peak_memory_mb"] > 10).all()
    )
    # The device-seconds of a one-process CPU trial are its wall seconds.
    assert frame["device_s"].to_numpy() == pytest.approx(frame["duration_s"].to_numpy(), rel=0.2, abs=0.2)
    totals = best.run_summary.total_cost()
    assert totals["device_hours"] == pytest.approx(frame["device_s"].sum() / 3600)
    reloaded = hpsearch.SearchResult.load(tmp_path / "out").trials_dataframe()
    assert list(reloaded[list(COST_COLUMNS)].columns) == list(COST_COLUMNS)
    header = (tmp_path / "out" / "trials.csv").read_text().splitlines()[0]
    assert all(column in header for column in COST_COLUMNS)
    page = render_html(best.run_summary)
    assert "Cost" in page and "device-hours" in page


@pytest.mark.parametrize("backend", ["optuna", "sigopt", "random"])
def test_a_search_stops_when_its_device_hours_are_spent(backend, tmp_path):
    # One trial of this model takes well over 0.1 ms: the budget is spent after the first trial.
    best = hpsearch.hyperparameter_search(
        _trainer(tmp_path / "out"),
        hp_space=SPACE,
        n_trials=5,
        backend=backend,
        compute_objective="eval_loss",
        max_device_hours=1e-7,
    )
    result = best.run_summary
    assert len(result.records) == 1
    assert "max_device_hours" in result.settings["stop_reason"]
    assert math.isfinite(result.total_cost()["device_hours"])


@pytest.mark.multiprocess
def test_a_search_stops_when_its_energy_budget_is_spent(tmp_path):
    # CodeCarbon measures each trial; any trial uses more than a picowatt-hour.
    best = hpsearch.hyperparameter_search(
        _trainer(tmp_path / "out"),
        hp_space=SPACE,
        n_trials=4,
        backend="optuna",
        compute_objective="eval_loss",
        max_energy_kwh=1e-15,
    )
    result = best.run_summary
    assert len(result.records) == 1
    assert "max_energy_kwh" in result.settings["stop_reason"]
    frame = result.trials_dataframe()
    assert (frame["energy_kwh"] > 0).all() and (frame["emissions_kg"] >= 0).all()


def test_the_resident_set_size_is_the_one_psutil_reads_with_or_without_proc(monkeypatch):
    import os

    import psutil

    from hpsearch import _cost

    def close_cached() -> None:
        if _cost._STATM is not None and _cost._STATM[1] >= 0:
            os.close(_cost._STATM[1])
        _cost._STATM = None

    ballast = bytearray(64 * 2**20)  # 64 MiB touched: the two readings must both see it
    ballast[::4096] = b"x" * len(ballast[::4096])
    fast = _cost._rss_mb()
    assert _cost._STATM is not None and _cost._STATM[1] >= 0  # this is Linux: read from /proc/self/statm
    assert abs(fast - psutil.Process().memory_info().rss / 2**20) < 8

    # A forked child (another pid) opens its own descriptor and closes the one it inherited.
    def statm_descriptors() -> int:
        return sum(
            os.readlink(f"/proc/self/fd/{fd}").endswith("/statm")
            for fd in os.listdir("/proc/self/fd")
            if os.path.exists(f"/proc/self/fd/{fd}")
        )

    _cost._STATM = (-1, _cost._STATM[1])
    assert abs(_cost._rss_mb() - fast) < 8
    assert _cost._STATM[0] == os.getpid() and _cost._STATM[1] >= 0 and statm_descriptors() == 1
    close_cached()

    def no_proc(*args, **kwargs):
        raise FileNotFoundError("/proc/self/statm")

    monkeypatch.setattr(_cost.os, "open", no_proc)  # macOS, Windows: psutil reads it
    slow = _cost._rss_mb()
    assert _cost._STATM is not None and _cost._STATM[1] == -1
    assert abs(slow - fast) < 8
    monkeypatch.undo()
    close_cached()
    del ballast


@pytest.mark.slow
def test_the_meter_samples_the_resident_set_size_in_the_background_while_a_trial_runs(monkeypatch):
    import torch

    from hpsearch import _cost

    readings = iter(
        range(100, 100_000, 100)
    )  # each reading larger than the last: every sample shows in the peak
    calls: list[float] = []
    lock = threading.Lock()

    def rss() -> float:
        with lock:
            calls.append(next(readings))
            return calls[-1]

    def count() -> int:
        with lock:
            return len(calls)

    monkeypatch.setattr(_cost, "_rss_mb", rss)
    monkeypatch.setattr(_cost, "SAMPLE_INTERVAL_S", 0.01)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the CPU rule, on any machine
    meter = _cost.CostMeter()
    meter.start()
    assert count() >= 1
    # Nothing is called per step: the readings come from the sampler thread while the trial (here: a wait) runs.
    deadline = time.monotonic() + 10
    while count() < 4 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert count() >= 4
    cost = meter.stop()  # stop reads once more, after the sampler let go of the meter
    stopped = count()
    assert cost["peak_memory_mb"] == calls[stopped - 1]
    time.sleep(0.1)  # ten intervals: a stopped meter is not sampled, and no meter runs, so nothing is read
    assert count() == stopped
    # On CUDA the peak is the device's own count: the resident set size is not sampled during the trial.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda: None)
    cuda = _cost.CostMeter()
    cuda.start()
    time.sleep(0.1)
    assert count() == stopped + 1  # only start's reading
    assert cuda not in _cost._SAMPLER._meters
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: 3 * 2**20)
    assert cuda.stop()["peak_memory_mb"] == 3.0
    # With no meter left, the thread ends (the next meter starts another).
    monkeypatch.setattr(_cost, "_IDLE_EXIT_S", 0.05)

    def sampler_threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "hpsearch-memory-sampler"]

    deadline = time.monotonic() + 15  # a wait begun before the patch runs its 5 s out
    while sampler_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not sampler_threads()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    again = _cost.CostMeter()
    again.start()
    assert len(sampler_threads()) == 1
    again.stop()


@pytest.mark.parametrize("backend", ["optuna", "sigopt"])
def test_a_spent_device_budget_stays_spent_across_reruns(backend, tmp_path):
    """Rerunning (resuming) the same call after its budget was spent trains nothing more: it trained one more trial
    per rerun before."""
    out = tmp_path / "out"
    options = (
        {"storage": f"sqlite:///{tmp_path / 'study.db'}", "study_name": "budget", "load_if_exists": True}
        if backend == "optuna"
        else {"driver": "lite", "resume": True}
    )
    for _ in range(3):
        best = hpsearch.hyperparameter_search(
            _trainer(out),
            hp_space=SPACE,
            n_trials=5,
            backend=backend,
            compute_objective="eval_loss",
            max_device_hours=1e-7,
            **options,
        )
        result = best.run_summary
        assert len(result.records) == 1, [r.name for r in result.records]
        assert "max_device_hours" in result.settings["stop_reason"]
    assert len(hpsearch.SearchResult.load(out).records) == 1


@pytest.mark.multiprocess
def test_codecarbon_start_up_is_charged_to_the_search_not_to_the_first_trial(tmp_path):
    """CodeCarbon takes seconds to start, once per process: it starts before the first trial's clock (the first
    trial's device_s was 2.63 s against 0.08 s for identical ones), and the search records what it cost."""
    import contextlib

    from hpsearch import _cost

    if _cost._TRACKER is not None:  # a tracker an earlier test started: this test needs a process without one
        with contextlib.suppress(Exception):
            _cost._TRACKER.stop()
        _cost._TRACKER = None
    best = hpsearch.hyperparameter_search(
        _trainer(tmp_path / "out"),
        hp_space=SPACE,
        n_trials=2,
        backend="random",
        compute_objective="eval_loss",
        max_energy_kwh=1.0,
    )
    result = best.run_summary
    first = min(result.records, key=lambda r: r.number)
    assert _cost.TRACKER_STARTED is not None and first.started > _cost.TRACKER_STARTED
    assert result.settings["energy_startup_s"] >= 0
    assert all(math.isfinite(r.cost["energy_kwh"]) for r in result.records)  # the trials are still measured


# ------------------------------------------------------------------------------ a shared GPU is charged by share
def test_trials_packed_on_one_device_are_charged_by_their_share_of_it():
    """Two trials on device "0": alone 0-2 s, together 2-4 s, then the second alone until 10 s. Another device's
    trials do not share with them."""
    from hpsearch._cost import DeviceShares

    shares = DeviceShares()
    shares.enter("0", "a", 0.0)
    shares.enter("1", "c", 1.0)
    shares.enter("0", "b", 2.0)
    a, b = shares.leave("0", "a", 4.0), shares.leave("0", "b", 10.0)
    assert a == pytest.approx((4.0, 2.0 + 2.0 / 2))
    assert b == pytest.approx((8.0, 2.0 / 2 + 6.0))
    assert shares.leave("1", "c", 5.0) == pytest.approx((4.0, 4.0))  # alone on its device
    # The trials' shares add up to the seconds the device was busy (0 to 10 s), not to their 12 s of wall time.
    assert a[1] + b[1] == pytest.approx(10.0)


def test_three_trials_that_overlap_in_steps_share_a_device_busy_time_exactly():
    from hpsearch._cost import DeviceShares

    shares = DeviceShares()
    events = [(0.0, "enter", "a"), (1.0, "enter", "b"), (2.0, "enter", "c"), (5.0, "leave", "a")]
    events += [(6.0, "leave", "c"), (9.0, "leave", "b")]
    charged = {}
    for now, kind, trial in events:
        if kind == "enter":
            shares.enter("0", trial, now)
        else:
            charged[trial] = shares.leave("0", trial, now)
    # a: 1 s alone, 1 s of two, 3 s of three; c: 3 s of three, 1 s of two; b: the rest.
    assert charged["a"][1] == pytest.approx(1 + 1 / 2 + 3 / 3)
    assert charged["c"][1] == pytest.approx(3 / 3 + 1 / 2)
    assert charged["b"][1] == pytest.approx(1 / 2 + 3 / 3 + 1 / 2 + 3)
    assert sum(share for _, share in charged.values()) == pytest.approx(9.0)
    assert {t: held for t, (held, _) in charged.items()} == {"a": 5.0, "b": 8.0, "c": 4.0}


def test_a_device_left_idle_charges_nothing_for_the_gap():
    from hpsearch._cost import DeviceShares

    shares = DeviceShares()
    shares.enter("0", "a", 0.0)
    shares.leave("0", "a", 1.0)
    shares.enter("0", "b", 5.0)
    assert shares.leave("0", "b", 6.0) == pytest.approx((1.0, 1.0))


def test_charge_share_scales_device_seconds_only_when_shared():
    from hpsearch._cost import charge_share

    cost = {"cpu_s": 2.0, "device_s": 8.0, "peak_memory_mb": 100.0}
    assert charge_share(cost, held_s=8.0, share_s=5.0) == {**cost, "device_s": 5.0}
    assert charge_share(cost, held_s=8.0, share_s=8.0) is cost  # alone: as measured
    assert charge_share({"cpu_s": 1.0}, held_s=8.0, share_s=4.0) == {"cpu_s": 1.0}


def test_entering_twice_or_leaving_unknown_is_an_error_naming_the_trial():
    from hpsearch._cost import DeviceShares

    shares = DeviceShares()
    shares.enter("0", "a", 0.0)
    with pytest.raises(ValueError, match="'a' is already running on device '0'"):
        shares.enter("0", "a", 1.0)
    with pytest.raises(ValueError, match="'b' is not running on device '0'"):
        shares.leave("0", "b", 1.0)
