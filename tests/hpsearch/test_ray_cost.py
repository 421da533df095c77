"""The Ray driver's side of a trial's cost, without a cluster: the results a Tune trial reports (`RayReporter`'s
payloads, as Tune hands them to the driver's callback) turned into the recorded trial by `Recorder`. A trial a
scheduler stops keeps the cost it reported last and ends at that report; a trial restarted from a checkpoint adds
up its attempts and starts with the first. (The same paths run for real in the contract test on a Ray cluster.)"""

from __future__ import annotations

import time
from datetime import datetime, timezone

from hpsearch._cost import CostMeter
from hpsearch.backends.ray._driver import Recorder
from hpsearch.backends.ray._worker import RayReporter
from hpsearch.results import SearchResult
from hpsearch.runner import new_record
from hpsearch.session import SearchSession
from hpsearch.trial import Evaluation, Trial, TrialState

TRIAL_ID = "exp_00000"
CONFIG = {"learning_rate": 0.01}


def _recorder(make_settings) -> tuple[Recorder, SearchSession]:
    settings = make_settings(compute_objective="eval_loss", directions=("minimize",))
    result = SearchResult(
        backend="ray", directions=["minimize"], records=[], n_trials=1, output_dir=settings.output_dir
    )
    session = SearchSession(settings, result, n_trials=1)
    return Recorder(settings, session), session


def _attempt(recorder: Recorder, seconds: float, steps: tuple[int, ...]) -> tuple[RayReporter, float]:
    """One attempt of the trial in its process: evaluations at ``steps``, each reported with the cost so far."""
    trial = Trial(TRIAL_ID, 0, dict(CONFIG), "ray")
    record = new_record(recorder.settings, trial)
    reporter = RayReporter(
        {"node": "n1"}, send=lambda result, folder: recorder.result(TRIAL_ID, result, None)
    )
    reporter.start(record)
    meter = CostMeter()
    meter.start()
    for step in steps:
        time.sleep(seconds)
        record.intermediates.append(
            Evaluation(step=step, epoch=None, objective=1.0 / step, metrics={"eval_loss": 1.0 / step})
        )
        record.cost = meter.snapshot()
        reporter.report(1.0 / step, step, {"eval_loss": 1.0 / step}, None)
    return reporter, meter.stop()["device_s"]


def test_a_trial_a_scheduler_stops_keeps_its_cost_and_ends_at_its_last_report(make_settings):
    recorder, session = _recorder(make_settings)
    recorder.max_steps[TRIAL_ID] = 10
    _attempt(recorder, 0.2, (2,))
    time.sleep(0.6)  # Tune stops the trial's process; the driver hears of it later
    recorder.finish(TRIAL_ID, CONFIG, None)
    (record,) = session.records
    assert record.state is TrialState.PRUNED
    assert record.cost["device_s"] >= 0.2 and "cpu_s" in record.cost and "peak_memory_mb" in record.cost
    assert record.cost["device_s"] >= 0.9 * record.duration_s - 0.05, (record.cost, record.duration_s)


def test_a_restarted_trial_adds_up_its_attempts_and_starts_with_the_first(make_settings):
    recorder, session = _recorder(make_settings)
    recorder.max_steps[TRIAL_ID] = 4
    _attempt(recorder, 0.2, (2,))
    first_started = recorder.latest[TRIAL_ID].started
    time.sleep(0.05)
    reporter, _ = _attempt(recorder, 0.2, (4,))  # restored from step 2's checkpoint, runs to its end
    final = reporter.record
    assert final is not None and final.started != first_started
    final.state, final.objective, final.finished = TrialState.COMPLETE, 0.25, datetime.now(timezone.utc)
    reporter.send({"objective": 0.25, "step": 4, "done": True, "hpsearch_record": reporter.payload()}, None)
    recorder.finish(TRIAL_ID, CONFIG, None)
    (record,) = session.records
    assert record.started == first_started
    assert record.cost["device_s"] >= 0.4, record.cost  # both attempts' 0.2 s
    assert [e.step for e in record.intermediates] == [2, 4]
