"""What a Ray search hands Tune besides its own records, without starting Ray: which checkpoints a trial hands Tune
(`_checks.tune_checkpoints`, and `RayReporter` acting on it), ``tune_checkpoints=False`` refused where an option reads
Tune's copies, and the result loggers of the run (only Tune's JSON one unless ``tune_loggers``). The files these
leave in Tune's folders on a real cluster: ``test_ray_backend.py::test_tune_folders_hold_what_the_options_ask``."""

from __future__ import annotations

import pytest

from hpsearch import hyperparameter_search
from hpsearch.backends.ray import _checks, _driver
from hpsearch.backends.ray._worker import RayReporter
from hpsearch.errors import SearchConfigError
from hpsearch.runner import new_record
from hpsearch.trial import Trial
from spaces import Float
from tests.hpsearch import _ray_cluster as rc


def _pbt():
    from ray.tune.schedulers import PopulationBasedTraining

    return PopulationBasedTraining(hyperparam_mutations={"learning_rate": [1e-3, 1e-2]})


@pytest.mark.parametrize(
    ("kw", "nodes", "hands"),
    [
        ({}, 1, False),  # a local Ray (or a one-node cluster): nothing reads Tune's copies
        ({}, 2, True),  # a trial on another node reaches the driver's records through Tune's copy
        ({"max_failures": 1}, 1, True),
        ({"max_failures": -1}, 1, True),
        ({"max_failures": 0}, 1, False),
        ({"resume": True}, 1, True),
        ({"resume": False}, 1, False),
        ({"keep_checkpoints_num": 2}, 1, True),
        ({"checkpoint_score_attr": "objective"}, 1, True),
        ({"workers_per_trial": 2}, 1, True),
        ({"scheduler": "pbt"}, 1, True),
        ({"scheduler": "asha"}, 1, False),
        ({"tune_checkpoints": True}, 1, True),
        ({"tune_checkpoints": False}, 2, False),
        ({"tune_checkpoints": False, "max_failures": 1, "resume": True}, 1, False),
    ],
)
def test_a_trial_hands_tune_its_checkpoints_only_where_something_reads_them(kw, nodes, hands):
    from ray.tune.schedulers import ASHAScheduler

    kw = dict(kw)
    if kw.get("scheduler") == "pbt":
        kw["scheduler"] = _pbt()
    elif kw.get("scheduler") == "asha":
        kw["scheduler"] = ASHAScheduler()
    assert _checks.tune_checkpoints(kw, nodes) is hands


def test_the_reporter_hands_tune_the_checkpoint_only_when_told(make_settings, tmp_path):
    folder = tmp_path / "checkpoint-23"
    folder.mkdir()
    settings = make_settings()
    for checkpoints, handed in ((True, str(folder)), (False, None)):
        sent: list[tuple[dict, str | None]] = []
        reporter = RayReporter(
            {}, send=lambda result, f, sent=sent: sent.append((result, f)), checkpoints=checkpoints
        )
        reporter.start(new_record(settings, Trial("t_00000", 0, {"learning_rate": 0.1}, "ray")))
        reporter.report(0.5, 23, {"eval_loss": 0.5}, str(folder))
        ((result, given),) = sent
        assert given == handed
        assert result["objective"] == 0.5 and result["step"] == 23  # the result itself is the same either way


def test_tune_checkpoints_false_is_refused_where_an_option_reads_them(tmp_path):
    trainer = rc.make_trainer(str(tmp_path / "out"))
    space = {"learning_rate": Float(1e-3, 1e-1, log=True)}
    for kw, named in (
        ({"keep_checkpoints_num": 2}, "keep_checkpoints_num"),
        ({"checkpoint_score_attr": "objective"}, "checkpoint_score_attr"),
        ({"scheduler": _pbt()}, "scheduler=PopulationBasedTraining"),
        ({"workers_per_trial": 2, "reuse_actors": False}, "workers_per_trial=2"),
    ):
        with pytest.raises(
            SearchConfigError, match=rf"tune_checkpoints=False with {named}: .*drop tune_checkpoints"
        ):
            hyperparameter_search(trainer, hp_space=space, backend="ray", tune_checkpoints=False, **kw)
    with pytest.raises(SearchConfigError, match=r"tune_checkpoints.*'no'"):
        hyperparameter_search(trainer, hp_space=space, backend="ray", tune_checkpoints="no")
    with pytest.raises(SearchConfigError, match=r"tune_loggers.*1"):
        hyperparameter_search(trainer, hp_space=space, backend="ray", tune_loggers=1)


def test_the_run_keeps_tunes_json_logger_and_adds_the_others_only_when_asked():
    """Tune adds a CSV, JSON or TensorBoard logger of its own to a run that names none of that kind; the run names
    the JSON one and, unless tune_loggers, a CSV and a TensorBoard one that write nothing (pickled with the run
    config, and unpickled on restore, as Tune does)."""
    import pickle

    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback, TBXLoggerCallback

    everything = _driver.result_loggers(True)
    assert [type(c) for c in everything] == [JsonLoggerCallback, CSVLoggerCallback, TBXLoggerCallback]
    json_logger, csv_logger, tbx_logger = pickle.loads(pickle.dumps(_driver.result_loggers(False)))
    assert type(json_logger) is JsonLoggerCallback
    assert isinstance(csv_logger, CSVLoggerCallback) and type(csv_logger) is not CSVLoggerCallback
    assert isinstance(tbx_logger, TBXLoggerCallback) and type(tbx_logger) is not TBXLoggerCallback
    for silent in (csv_logger, tbx_logger):  # every hook of Tune's LoggerCallback does nothing
        for hook in (
            "on_trial_start",
            "on_trial_restore",
            "on_trial_save",
            "on_trial_complete",
            "on_trial_error",
        ):
            assert getattr(silent, hook)(iteration=1, trials=[], trial=None) is None
        assert silent.on_trial_result(iteration=1, trials=[], trial=None, result={"objective": 1.0}) is None
