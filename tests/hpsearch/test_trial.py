"""`Trial` (a read-only mapping that answers the native trial's attributes), `TrialRecord`'s JSON form, and the
shared rules of `TrialSettings`: which evaluation is the objective (every scope), trial names, common options."""

from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest

from hpsearch.errors import SearchConfigError
from hpsearch.settings import COMMON_OPTIONS, OBJECTIVE_SCOPES, Option, TrialSettings, check_common_options
from hpsearch.trial import Evaluation, Trial, TrialRecord, TrialState


class Native:
    """An engine's trial object: an attribute, a method and a suggest method."""

    user_attrs = {"owner": "worker-1"}

    def report(self, value, step):
        return ("reported", value, step)

    def suggest_float(self, name, low, high):
        return (low + high) / 2


# ---------------------------------------------------------------------------------------------- Trial
def test_trial_is_a_read_only_mapping_of_its_parameters():
    trial = Trial("7", 7, {"learning_rate": 0.1, "hidden": 8}, "random")
    assert trial["learning_rate"] == 0.1 and len(trial) == 2 and "hidden" in trial and "layers" not in trial
    assert dict(trial) == {"learning_rate": 0.1, "hidden": 8} == trial.params
    assert list(trial) == ["learning_rate", "hidden"]
    assert trial.get("layers", 1) == 1
    with pytest.raises(TypeError):
        trial["hidden"] = 16  # type: ignore[index]
    with pytest.raises(TypeError):
        del trial["hidden"]  # type: ignore[attr-defined]
    trial.params["hidden"] = 16  # a copy
    assert trial["hidden"] == 8
    with pytest.raises(
        KeyError, match=r"run-7 has no parameter 'layers'; it has \['hidden', 'learning_rate'\]"
    ):
        trial["layers"]


def test_trial_names_itself_and_its_backend():
    trial = Trial(3, 3, {}, "optuna")
    assert (trial.id, trial.number, trial.backend, trial.name, trial.native) == (
        "3",
        3,
        "optuna",
        "run-3",
        None,
    )
    assert Trial("a", 0, {}, "ray", name="custom").name == "custom"


def test_other_attributes_are_the_native_trials():
    native = Native()
    trial = Trial("0", 0, {"hidden": 8}, "optuna", native=native)
    assert trial.native is native
    assert trial.user_attrs == {"owner": "worker-1"}
    assert trial.report(0.5, 2) == ("reported", 0.5, 2)
    with pytest.raises(AttributeError):
        trial.missing_attribute  # noqa: B018
    with pytest.raises(AttributeError):
        trial._private  # noqa: B018  # never forwarded


def test_without_a_native_trial_an_unknown_attribute_says_so():
    with pytest.raises(AttributeError, match="no native random trial"):
        Trial("0", 0, {}, "random").user_attrs  # noqa: B018
    # A model_init written for an engine's trial API (trial.suggest_int inside it): the fix is in the message.
    with pytest.raises(
        AttributeError, match=r"no native random trial.*search the parameter in hp_space.*trial\[name\]"
    ):
        Trial("0", 0, {}, "random").suggest_int("layers", 1, 3)
    assert not hasattr(Trial("0", 0, {}, "random"), "suggest_int")  # still an AttributeError: hasattr answers


def test_a_suggested_parameter_joins_the_mapping():
    trial = Trial("0", 0, {"hidden": 8}, "optuna", native=Native())
    assert trial.suggest_float("dropout", 0.0, 0.4) == pytest.approx(0.2)
    assert dict(trial) == {"hidden": 8, "dropout": pytest.approx(0.2)}


# ---------------------------------------------------------------------------------------------- TrialRecord
def test_a_record_survives_its_json_form():
    record = TrialRecord(
        trial_id="4",
        number=4,
        name="run-4",
        state=TrialState.PRUNED,
        params={"betas": (0.9, 0.999), "hidden": 8, "nested": [(1, 2)]},
        objective=0.25,
        started=datetime(2026, 1, 1, tzinfo=timezone.utc),
        finished=datetime(2026, 1, 1, 0, 1, tzinfo=timezone.utc),
        intermediates=[Evaluation(step=2, epoch=0.5, objective=0.25, metrics={"eval_loss": 1.5})],
        last_step=2,
        checkpoint="/x/checkpoint-2",
        node="n1",
        error=None,
        extra={"workers": 2},
    )
    data = record.to_dict()
    assert data["params"]["betas"] == {"__tuple__": [0.9, 0.999]}
    assert TrialRecord.from_dict(data) == record
    assert record.duration_s == 60.0
    with pytest.raises(KeyError):
        TrialRecord.from_dict({k: v for k, v in data.items() if k != "state"})


# ---------------------------------------------------------------------------------------------- objective scopes
def settings(scope: str = "last", directions=("maximize",), **fields) -> TrialSettings:
    return TrialSettings(
        trainer=None,
        compute_objective=lambda m: m["x"],
        objective_name="x",  # type: ignore[arg-type]
        directions=tuple(directions),
        output_dir="/tmp/unused",
        backend="random",
        objective_scope=scope,
        **fields,
    )


def evaluations(*objectives) -> list[Evaluation]:
    return [Evaluation(step=10 * (i + 1), epoch=None, objective=v) for i, v in enumerate(objectives)]


# 14 evaluations (12 finite); a NaN and a missing one are never chosen nor averaged.
VALUES = [0.0, 0.25, 1.0, 9.0, 2.0, math.nan, 3.0, None, 4.0, 5.0, 6.0, 7.0, 8.0, 0.5]
EXPECTED = {  # scope -> (objective, step) when maximizing
    "last": (0.5, 140),
    "best": (9.0, 40),
    "avg": (45.75 / 12, 140),
    "last-5-avg": ((5.0 + 6.0 + 7.0 + 8.0 + 0.5) / 5, 140),
    "last-10-avg": ((1.0 + 9.0 + 2.0 + 3.0 + 4.0 + 5.0 + 6.0 + 7.0 + 8.0 + 0.5) / 10, 140),
}


@pytest.mark.parametrize("scope", OBJECTIVE_SCOPES)
def test_choose_gives_the_objective_of_every_scope(scope):
    assert set(EXPECTED) == set(OBJECTIVE_SCOPES)  # a new scope needs its case here
    objective, step = settings(scope).choose(evaluations(*VALUES))
    assert (objective, step) == (pytest.approx(EXPECTED[scope][0]), EXPECTED[scope][1])


def test_best_follows_the_direction():
    assert settings("best", ("minimize",)).choose(evaluations(3.0, 1.0, 2.0)) == (1.0, 20)
    assert settings("best", ("maximize",)).choose(evaluations(3.0, 1.0, 2.0)) == (3.0, 10)


@pytest.mark.parametrize("scope", OBJECTIVE_SCOPES)
def test_choose_without_a_finite_evaluation_gives_nothing(scope):
    assert settings(scope).choose([]) == (None, None)
    assert settings(scope).choose(evaluations(math.nan, None, math.inf)) == (None, None)


def test_several_objectives_average_per_objective_and_best_is_the_last():
    evals = evaluations([1.0, 10.0], [3.0, 30.0], [math.nan, 5.0], [2.0, 20.0])
    assert settings("avg", ("minimize", "maximize")).choose(evals) == ([2.0, 20.0], 40)
    # No single best evaluation of several objectives: 'best' is the last one.
    assert settings("best", ("minimize", "maximize")).choose(evals) == ([2.0, 20.0], 40)


# ---------------------------------------------------------------------------------------------- names, options
def test_trial_name_is_run_id_or_hp_name():
    trial = Trial("5", 5, {"hidden": 8}, "random")
    assert settings().trial_name(trial) == "run-5"
    assert settings(hp_name=lambda t: f"h{t['hidden']}").trial_name(trial) == "h8"


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "a/b",
        "..",
        None,
        3,
        "a\0b",
        "search.json",
        "trials.csv",
        "intermediates.csv",
        "events.jsonl",
        ".hidden",
    ],
)
def test_hp_name_must_give_a_folder_name(bad):
    with pytest.raises(SearchConfigError, match="hp_name"):
        settings(hp_name=lambda t: bad).trial_name(Trial("0", 0, {}, "random"))


def test_common_options_are_popped_with_their_defaults():
    kwargs = {"objective_scope": "best", "sampler": object()}
    assert check_common_options(kwargs) == {
        "max_failed_trials": 3,
        "objective_scope": "best",
        "trial_timeout": None,
        "max_device_hours": None,
        "max_energy_kwh": None,
        "trial_workers": None,
        "trial_worker_max_trials": None,
        "warm_start": None,
        "warm_start_mode": "inform",
        "warm_start_top_k": 5,
        "warm_start_defaults": {},
        "reevaluate_top_k": None,
        "reevaluate_seeds": None,
        "reevaluate_when": "end",
        "reevaluate_folds": None,
    }
    assert list(kwargs) == ["sampler"]
    assert set(COMMON_OPTIONS) == {
        "max_failed_trials",
        "objective_scope",
        "trial_timeout",
        "max_device_hours",
        "max_energy_kwh",
        "trial_workers",
        "trial_worker_max_trials",
        "warm_start",
        "warm_start_mode",
        "warm_start_top_k",
        "warm_start_defaults",
        "reevaluate_top_k",
        "reevaluate_seeds",
        "reevaluate_when",
        "reevaluate_folds",
    }


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("max_failed_trials", 0),
        ("max_failed_trials", True),
        ("max_failed_trials", 2.0),
        ("objective_scope", "median"),
        ("trial_timeout", 0),
        ("trial_timeout", math.inf),
        ("trial_timeout", "60"),
    ],
)
def test_bad_common_options_are_refused_naming_the_option(name, value):
    with pytest.raises(SearchConfigError, match=name):
        check_common_options({name: value})


# ---------------------------------------------------------------------------------------------- objective values
def test_objective_values_must_be_numbers_one_per_direction():
    from hpsearch.objective import to_objective

    assert (
        to_objective(0.5, 1) == 0.5
        and to_objective([0.5], 1) == 0.5
        and to_objective((1, 2), 2) == [1.0, 2.0]
    )
    with pytest.raises(
        ValueError, match=r"returned 2 values .* direction has 1 entry.*\['minimize', 'minimize'\]"
    ):
        to_objective((0.1, 2.3), 1)
    for loose in ("0.5", True, b"1"):  # float() takes them, but they are no measurement
        with pytest.raises(ValueError, match="which is not a number"):
            to_objective(loose, 1)
    with pytest.raises(ValueError, match="not a number"):
        to_objective([0.5, "x"], 2)


def test_objective_values_may_come_as_numpy_arrays_or_tensors():
    import numpy as np
    import torch

    from hpsearch.objective import to_objective

    assert to_objective(np.array([1, 2]), 2) == [1.0, 2.0]
    assert to_objective(torch.tensor([0.5, 0.25], requires_grad=True), 2) == [0.5, 0.25]
    assert to_objective(np.array([0.5]), 1) == 0.5 and to_objective(torch.tensor([0.5]), 1) == 0.5
    assert to_objective(np.float32(0.5), 1) == 0.5 and to_objective(torch.tensor(0.5), 1) == 0.5
    with pytest.raises(ValueError, match=r"returned 2 values .* direction has 1 entry"):
        to_objective(np.array([0.1, 2.3]), 1)
    with pytest.raises(ValueError, match="too large for a float"):
        to_objective(10**400, 1)


def test_a_multi_objective_search_without_a_finished_trial_raises():
    from hpsearch.api import best_runs
    from hpsearch.errors import HPSearchError
    from hpsearch.results import SearchResult

    failed = TrialRecord(trial_id="0", number=0, name="run-0", state=TrialState.FAIL, params={}, error="boom")
    with pytest.raises(HPSearchError, match=r"No trial completed .*run-0: boom"):
        best_runs(SearchResult("random", ["minimize", "maximize"], [failed]))


def test_backend_options_are_checked_against_their_declared_types():
    import numpy as np

    from hpsearch.settings import Option

    count = Option("n_jobs", (int,), "trials at once")
    seconds = Option("timeout", (int, float), "seconds")
    flag = Option("gc_after_trial", (bool,), "collect")
    for option, value in (
        (count, 3),
        (count, np.int64(3)),
        (seconds, 2.5),
        (seconds, np.float32(2.5)),
        (seconds, 7),
        (flag, True),
        (flag, None),
        (Option("sampler", (object,), "any"), "x"),
    ):
        option.check(value)  # accepted
    for option, value, message in (
        (count, True, r"n_jobs=True \(bool\) must be an integer"),
        (count, 2.0, r"n_jobs=2.0 \(float\) must be an integer"),
        (seconds, "10", r"timeout='10' \(str\) must be a finite number"),
        (seconds, float("nan"), r"timeout=nan must be a finite number"),
        (seconds, np.float32("inf"), r"timeout=.*inf\)? must be a finite number"),
        (flag, "no", r"gc_after_trial='no' \(str\) must be true or false"),
    ):
        with pytest.raises(SearchConfigError, match=message):
            option.check(value)


def test_an_option_declares_its_bounds_choices_and_example():
    """Bounds, choices and emptiness are part of the declaration: the refusal names the option, the value, what it
    must be, the option's help and a value to pass instead."""
    jobs = Option("n_jobs", (int,), "trials at once", minimum=1, also=(-1,), example=2)
    seconds = Option("timeout", (int, float), "seconds", above=0)
    driver = Option("driver", (str,), "the driver", choices=("lite", "http"))
    name = Option("name", (str,), "the name", non_empty=True)
    assert jobs.check(-1) == -1 and jobs.check(3) == 3 and driver.check("http") == "http"
    assert seconds.check(7) == 7.0 and type(seconds.check(7)) is float  # an option that takes floats
    for option, value, message in (
        (jobs, 0, r"^n_jobs=0 must be an integer >= 1 or -1 \(trials at once\); pass e.g. n_jobs=2, or None"),
        (jobs, -2, r"n_jobs=-2 must be an integer >= 1 or -1"),
        (seconds, 0, r"timeout=0 must be a finite number > 0 \(seconds\)"),
        (seconds, -math.inf, r"timeout=-inf must be a finite number > 0"),
        (driver, "ftp", r"driver='ftp' must be one of 'lite', 'http' .*pass e.g. driver='lite'"),
        (name, "  ", r"name='  ' must be a non-empty string"),
    ):
        with pytest.raises(SearchConfigError, match=message):
            option.check(value)


@pytest.mark.parametrize(
    "model_init, unread",
    [
        # The example's own idiom: a misspelt parameter (hiden) was never noticed, as `params` counted as reading all.
        (lambda t: t.params.get("hidden", 64), ["hiden", "dropout"]),
        (lambda t: (t.params["dropout"], t.params.pop("hidden")), ["hiden"]),
        (lambda t: t.params.setdefault("layers", 1), ["hidden", "hiden", "dropout"]),
        (lambda t: t.get("hidden", 64), ["hiden", "dropout"]),
        # Whole-dict uses read every parameter.
        (lambda t: dict(**t.params), []),
        (lambda t: {**t.params}, []),
        (lambda t: dict(t.params), []),
        (lambda t: [v for _, v in t.params.items()], []),
        (lambda t: list(t.params), []),
        (lambda t: t.params.copy(), []),
        (lambda t: __import__("copy").deepcopy(t.params), []),
        (lambda t: {}.update(t.params), []),
    ],
)
def test_unread_while_sees_which_names_model_init_reads_through_params(model_init, unread):
    trial = Trial("0", 0, {"hidden": 8, "hiden": 16, "dropout": 0.1}, "random")
    _, found = trial.unread_while(lambda: model_init(trial))
    assert found == unread
    # Outside a model_init call, params is a plain dict that notes nothing.
    assert type(trial.params) is dict and trial.params == {"hidden": 8, "hiden": 16, "dropout": 0.1}
