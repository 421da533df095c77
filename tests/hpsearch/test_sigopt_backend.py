"""hyperparameter_search with the SigOpt backend, for real: SigOpt's own optimizer through the lite driver."""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os

import pytest
from torch import nn

import hpsearch
import spaces
from hpsearch import BestRun, SearchConfigError, SearchResult, TrialState
from hpsearch.backends.sigopt import SigOptBackend
from hpsearch.backends.sigopt._space import labels_for as _labels
from hpsearch.backends.sigopt._space import portable_to_sigopt as _portable_to_sigopt
from tests._digits import DigitsMLP, digits_trainer
from trainer import Trainer

FAKE_TOKEN = "sigopt-fake-token-7f3a9c21d4e8b6"


def _model_init(trial):
    hidden = trial["hidden"] if trial is not None and "hidden" in trial else 64
    model = DigitsMLP(hidden=int(hidden), dropout=trial.get("dropout", 0.0) if trial is not None else 0.0)
    if trial is not None and trial.get("activation") == "tanh":
        model.net[1] = nn.Tanh()
    return model


def make_trainer(tmp_path, model_init=_model_init, **overrides) -> Trainer:
    settings = dict(
        eval_strategy="epoch",
        save_strategy="no",
        num_train_epochs=1,
        learning_rate=3e-3,
        per_device_train_batch_size=32,
        per_device_eval_batch_size=256,
        logging_strategy="no",
        disable_tqdm=True,
        report_to="none",
    )
    settings.update(overrides)
    return digits_trainer(str(tmp_path / "search"), model_init, **settings)


def test_install_lite_driver_runs_on_numpy_2():
    """The set-up's promise: sigopt's lite driver imports next to numpy >= 2 and pandas, nothing downgraded."""
    import numpy
    import pandas
    import sigopt

    assert int(numpy.__version__.split(".")[0]) >= 2
    assert int(pandas.__version__.split(".")[0]) >= 2
    for dist in ("sigopt", "sigoptlite", "libsigopt", "qmcpy"):
        importlib.metadata.version(dist)
    conn = sigopt.Connection(driver="lite")
    assert conn.experiments is not None
    # The numpy-2 shim is local to sigoptlite/libsigopt: numpy itself still lacks the removed alias.
    from hpsearch.backends.sigopt._compat import numpy2_compat as _numpy2_compat

    _numpy2_compat()
    assert not hasattr(numpy, "product")


@pytest.mark.slow
def test_portable_search_finds_accurate_model_with_original_values(tmp_path):
    space = {
        # Adam on the digits reaches >= 0.93 within 2-3 epochs at these rates; the search must find such a trial.
        "learning_rate": spaces.Float(8e-3, 4e-2, log=True),
        "num_train_epochs": spaces.Int(2, 3),
        "activation": spaces.Categorical(["relu", "tanh"]),
        "hidden": spaces.Categorical([32, 64]),
        "weight_decay": 0.0,
    }
    trainer = make_trainer(tmp_path)
    best = trainer.hyperparameter_search(
        hp_space=space,
        compute_objective="eval_accuracy",
        direction="maximize",
        n_trials=8,
        backend="sigopt",
    )
    assert isinstance(best, BestRun)
    result = best.run_summary
    assert isinstance(result, SearchResult)
    assert result.backend == "sigopt"
    assert result.settings["driver"] == "lite"
    assert type(result.native).__name__ == "Experiment"
    assert len(result.records) == 8
    assert all(r.state is TrialState.COMPLETE for r in result.records), [r.error for r in result.records]
    assert best.objective >= 0.93

    for record in result.records:
        params = record.params
        assert set(params) == set(space)
        assert isinstance(params["learning_rate"], float) and 8e-3 <= params["learning_rate"] <= 4e-2
        assert type(params["num_train_epochs"]) is int and 2 <= params["num_train_epochs"] <= 3
        assert params["activation"] in ("relu", "tanh")
        assert type(params["hidden"]) is int and params["hidden"] in (
            32,
            64,
        )  # mapped back from SigOpt's "32"
        assert params["weight_decay"] == 0.0
        # SigOpt cannot prune: every epoch was evaluated and recorded.
        assert len(record.intermediates) == params["num_train_epochs"]
        assert record.objective == record.intermediates[-1].objective
        assert record.extra["sigopt_observation"] == "value"

    # BestRun comes from our records: the highest accuracy, its id, name and parameters.
    top = max(result.records, key=lambda r: r.objective)
    assert best.objective == top.objective
    assert best.run_id == top.trial_id and best.name == f"run-{top.trial_id}"
    assert best.hyperparameters == top.params
    # SigOpt's best_assignments (no id or value in lite) were matched back onto one of our records.
    marked = [r for r in result.records if r.extra.get("sigopt_best")]
    assert len(marked) == 1 and marked[0].objective == pytest.approx(top.objective)
    # Saved as it ran, loadable without SigOpt.
    loaded = SearchResult.load(trainer.args.output_dir)
    assert loaded.best_trial.trial_id == best.run_id
    assert loaded.best_trial.params["hidden"] == best.hyperparameters["hidden"]


def test_failed_trial_is_a_failed_observation_and_conditionals_work(tmp_path):
    calls = []

    def model_init(trial):
        calls.append(trial)
        if trial is not None and trial.number == 1:
            raise RuntimeError("this architecture does not fit")
        return _model_init(trial)

    space = spaces.SearchSpace(
        {
            "learning_rate": spaces.Float(3e-3, 1e-2, log=True),
            "activation": spaces.Categorical(["relu", "tanh"]),
            "dropout": spaces.Float(0.0, 0.2, when={"activation": "relu"}),
            "hidden": spaces.Int(32, 64, step=16),
            "per_device_train_batch_size": spaces.Categorical([32, 64]),
            "seed": spaces.Fixed(3),
        }
    )
    trainer = make_trainer(tmp_path, model_init=model_init, max_steps=8)
    best = trainer.hyperparameter_search(
        hp_space=space,
        compute_objective="eval_accuracy",
        direction="maximize",
        n_trials=5,
        backend="sigopt",
        max_failed_trials=2,
    )
    records = sorted(best.run_summary.records, key=lambda r: r.number)
    assert [r.state for r in records] == [TrialState.COMPLETE, TrialState.FAIL] + [TrialState.COMPLETE] * 3
    failed = records[1]
    assert "does not fit" in failed.error and failed.objective is None
    assert failed.extra["sigopt_observation"] == "failed"
    for record in records:
        params = record.params
        space.validate_params(params)  # every value inside its domain, conditions respected
        assert ("dropout" in params) == (params["activation"] == "relu")
        assert params["hidden"] in (32, 48, 64)
        assert type(params["per_device_train_batch_size"]) is int
        assert params["seed"] == 3
    assert best.run_id != failed.trial_id


@pytest.mark.slow
def test_a_discrete_space_sampled_through_ends_the_search_with_the_trials_it_has(tmp_path, caplog):
    """sigoptlite proposes only points it has not sampled: once the two values of the only parameter were tried it
    has no suggestion left (an IndexError inside the lite optimizer). The search ends there as a spent budget ends
    it, with its trials kept and saved, instead of failing with SigOpt's raw error."""
    trainer = make_trainer(tmp_path, max_steps=2)
    with caplog.at_level(logging.WARNING, logger="hpsearch"):
        best = trainer.hyperparameter_search(
            hp_space={"hidden": spaces.Categorical([32, 64])},
            compute_objective="eval_accuracy",
            direction="maximize",
            n_trials=8,
            backend="sigopt",
        )
    records = best.run_summary.records
    assert 2 <= len(records) < 8
    assert all(r.state is TrialState.COMPLETE for r in records)
    assert {r.params["hidden"] for r in records} == {32, 64}
    reason = best.run_summary.settings["stop_reason"]
    assert "no new point to suggest" in reason and f"with {len(records)} of 8 trials" in reason
    saved = SearchResult.load(tmp_path / "search")
    assert len(saved.records) == len(records) and saved.settings["stop_reason"] == reason
    assert reason in caplog.text


@pytest.mark.slow
def test_two_objectives_return_the_pareto_front(tmp_path):
    def objectives(metrics):
        return metrics["eval_accuracy"], metrics["eval_loss"]

    trainer = make_trainer(tmp_path, max_steps=10)
    front = trainer.hyperparameter_search(
        hp_space={
            "learning_rate": spaces.Float(1e-3, 3e-2, log=True),
            "hidden": spaces.Categorical([16, 64]),
        },
        compute_objective=objectives,
        direction=["maximize", "minimize"],
        n_trials=5,
        backend="sigopt",
    )
    assert isinstance(front, list) and front and all(isinstance(b, BestRun) for b in front)
    records = front[0].run_summary.records
    assert len(records) == 5

    def dominates(a, b):
        return a[0] >= b[0] and a[1] <= b[1] and a != b

    for run in front:
        assert isinstance(run.objective, list) and len(run.objective) == 2
        assert not any(dominates(r.objective, run.objective) for r in records)
    on_front = {b.run_id for b in front}
    dominated = [r for r in records if r.trial_id not in on_front]
    assert all(any(dominates(b.objective, r.objective) for b in front) for r in dominated)
    # SigOpt's own Pareto front (best_assignments) points at trials of ours on the front.
    marked = {r.trial_id for r in records if r.extra.get("sigopt_best")}
    assert marked and marked <= on_front


def test_native_sigopt_space_in_the_hugging_face_form(tmp_path):
    def hp_space(trial):
        return [
            # transformers' default space misspells "transformation"; it is read correctly.
            {
                "bounds": {"min": 2e-3, "max": 2e-2},
                "name": "learning_rate",
                "type": "double",
                "transformamtion": "log",
            },
            {
                "categorical_values": ["32", "64"],
                "name": "per_device_train_batch_size",
                "type": "categorical",
            },
            {"categorical_values": ["32", "64"], "name": "hidden", "type": "categorical"},
        ]

    trainer = make_trainer(tmp_path, max_steps=8)
    best = trainer.hyperparameter_search(
        hp_space=hp_space,
        compute_objective="eval_accuracy",
        direction="maximize",
        n_trials=3,
        backend="sigopt",
    )
    result = best.run_summary
    assert result.space is None
    assert all(r.state is TrialState.COMPLETE for r in result.records)
    for record in result.records:
        # An int argument gets an int; a model parameter stays the string SigOpt gave (model_init converts).
        assert record.params["per_device_train_batch_size"] in (32, 64)
        assert type(record.params["per_device_train_batch_size"]) is int
        assert record.params["hidden"] in ("32", "64")
        assert 2e-3 <= record.params["learning_rate"] <= 2e-2

    # The library's own default SigOpt space (the Hugging Face one) runs as well.
    trainer = make_trainer(tmp_path / "default", max_steps=5)
    best = trainer.hyperparameter_search(
        hp_space=hpsearch.default_hp_space_sigopt,
        n_trials=1,
        backend="sigopt",
        compute_objective="eval_loss",
    )
    assert type(best.hyperparameters["per_device_train_batch_size"]) is int
    assert type(best.hyperparameters["num_train_epochs"]) is int


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(hp_space={"hidden": spaces.Int(16, 128, log=True)}), "Float(16, 128, log=True)"),
        (
            dict(direction=["maximize", "minimize", "minimize"], compute_objective=lambda m: (1.0, 2.0, 3.0)),
            "at most 2 metrics",
        ),
        (dict(n_jobs=2), "Unknown keyword argument"),
        (dict(parallel_bandwidth=2), "lite driver suggests one trial at a time"),
        (dict(parallel_bandwidth=0), "parallel_bandwidth=0 must be an integer >= 1"),
        (dict(proxies={"https": "http://proxy:3128"}), "proxies are for driver='http'"),
        (dict(driver="ftp"), "driver='ftp' must be one of 'lite', 'http'"),
        (dict(observation_budget="ten"), "observation_budget='ten' (str) must be an integer"),
        (dict(name=""), "name='' must be a non-empty string"),
        (
            dict(hp_space={"layers": spaces.Int(1, 3), "width": spaces.Int(8, 16, when={"layers": 2})}),
            "make 'layers' a spaces.Categorical",
        ),
        (dict(hp_space=[{"name": "learning_rate", "type": "float"}]), "must be one of"),
        (
            dict(
                hp_space=lambda trial: [
                    {
                        "name": "per_device_train_batch_size",
                        "type": "categorical",
                        "categorical_values": ["big", "small"],
                    }
                ]
            ),
            "cannot be read as int",
        ),
    ],
)
def test_bad_inputs_fail_before_any_trial(tmp_path, kwargs, message):
    trainer = make_trainer(tmp_path)
    call = dict(
        hp_space={"learning_rate": spaces.Float(1e-3, 1e-2), "hidden": spaces.Categorical([16, 32])},
        compute_objective="eval_accuracy",
        direction="maximize",
        n_trials=2,
        backend="sigopt",
    )
    call.update(kwargs)
    with pytest.raises(SearchConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        trainer.hyperparameter_search(**call)
    assert not os.path.exists(os.path.join(trainer.args.output_dir, "search.json"))


def test_http_driver_needs_a_token(tmp_path, monkeypatch):
    monkeypatch.delenv("SIGOPT_API_TOKEN", raising=False)
    assert SigOptBackend(None, {}).driver == "lite"
    monkeypatch.setenv("SIGOPT_API_TOKEN", FAKE_TOKEN)
    assert SigOptBackend(None, {}).driver == "http"
    assert SigOptBackend(None, {"driver": "lite"}).driver == "lite"
    monkeypatch.delenv("SIGOPT_API_TOKEN")
    trainer = make_trainer(tmp_path)
    with pytest.raises(SearchConfigError, match="SIGOPT_API_TOKEN"):
        trainer.hyperparameter_search(
            hp_space={"learning_rate": spaces.Float(1e-3, 1e-2)}, n_trials=1, backend="sigopt", driver="http"
        )


def test_api_token_is_never_saved_or_logged(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("SIGOPT_API_TOKEN", FAKE_TOKEN)
    caplog.set_level(logging.DEBUG)
    trainer = make_trainer(tmp_path, max_steps=3)
    best = trainer.hyperparameter_search(
        hp_space={"learning_rate": spaces.Float(1e-3, 1e-2, log=True)},
        compute_objective="eval_loss",
        n_trials=1,
        backend="sigopt",
        driver="lite",
    )
    assert best.run_summary.settings["driver"] == "lite"
    written = []
    for folder, _, files in os.walk(trainer.args.output_dir):
        for file in files:
            with open(os.path.join(folder, file), "rb") as f:
                written.append((file, f.read()))
    assert {"search.json", "trials.csv"} <= {name for name, _ in written}
    for name, content in written:
        assert FAKE_TOKEN.encode() not in content, name
    assert FAKE_TOKEN not in caplog.text
    assert FAKE_TOKEN not in json.dumps(best.run_summary.settings)


def test_space_conversion_labels_and_grids():
    # Choices that print alike get their position; others stay readable.
    assert list(_labels("x", [1, "1", "adamw"])) == ["0:1", "1:'1'", "adamw"]
    assert list(_labels("x", [None, (1, 2)])) == ["None", "(1, 2)"]
    converted = _portable_to_sigopt(
        spaces.SearchSpace(
            {
                "lr": spaces.Float(1e-4, 1e-2, log=True),
                "ratio": spaces.Float(0.0, 0.3, step=0.1),
                "opt": spaces.Categorical(["sgd", "adam"]),
                "momentum": spaces.Float(0.5, 0.9, when={"opt": "sgd"}),
                "mode": spaces.Fixed("a"),
                "extra": spaces.Int(1, 4, when={"mode": "a"}),
            }
        )
    )
    by_name = {p["name"]: p for p in converted.parameters}
    assert by_name["lr"] == {
        "name": "lr",
        "type": "double",
        "bounds": {"min": 1e-4, "max": 1e-2},
        "transformation": "log",
    }
    assert by_name["ratio"] == {"name": "ratio", "type": "int", "bounds": {"min": 0, "max": 3}}
    assert by_name["momentum"]["conditions"] == {"opt": ["sgd"]}
    assert (
        "mode" not in by_name and "conditions" not in by_name["extra"]
    )  # a Fixed parent: condition always met
    assert converted.conditionals == [{"name": "opt", "values": ["sgd", "adam"]}]
    assert converted.encodings["ratio"].decode("ratio", 3) == 0.3
    assert converted.encodings["ratio"].decode("ratio", 1) == pytest.approx(0.1)


# ---------------------------------------------------------------------------------------------- resume=True
RESUME_SPACE = {"learning_rate": spaces.Float(3e-3, 3e-2, log=True), "hidden": spaces.Categorical([16, 32])}


def _resume_search(tmp_path, n_trials, calls=None, **kwargs):
    def model_init(trial):
        if calls is not None and trial is not None:
            calls.append(trial.params)
        return _model_init(trial)

    trainer = make_trainer(tmp_path, model_init=model_init, max_steps=4)
    call = dict(
        hp_space=RESUME_SPACE, compute_objective="eval_loss", n_trials=n_trials, backend="sigopt", resume=True
    )
    call.update(kwargs)
    return trainer.hyperparameter_search(**call)


@pytest.mark.slow
def test_resume_continues_a_search_from_its_search_json(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="hpsearch.backends.sigopt"):
        first = _resume_search(tmp_path, 2).run_summary
    assert "no earlier search" in caplog.text and "starting a new one" in caplog.text
    assert "resumed_trials" not in first.settings
    before = {r.trial_id: r.to_dict() for r in first.records}

    caplog.clear()
    calls = []
    with caplog.at_level(logging.INFO, logger="hpsearch.backends.sigopt"):
        result = _resume_search(tmp_path, 5, calls).run_summary
    assert (
        f"Resuming SigOpt search in {os.path.abspath(result.output_dir)}: 2 finished trials told to a new "
        "experiment, 3 to run."
    ) in caplog.text
    assert len(calls) == 3  # only what was left of n_trials trained
    assert result.settings["resumed_trials"] == 2
    assert result.started == first.started
    # The earlier records are kept as they were (ids, names, numbers); the new ones are numbered and named after
    # them, with ids that no earlier trial has (lite numbers its suggestions from 1 in every experiment).
    records = {r.trial_id: r for r in result.records}
    for trial_id, saved in before.items():
        kept = records[trial_id].to_dict()
        assert {k: kept[k] for k in ("trial_id", "name", "number", "state", "params", "objective")} == {
            k: saved[k] for k in ("trial_id", "name", "number", "state", "params", "objective")
        }
    assert sorted(r.number for r in result.records) == [0, 1, 2, 3, 4]
    assert len({r.name for r in result.records}) == 5
    assert all(r.state is TrialState.COMPLETE for r in result.records)
    # The new experiment was told the two earlier trials and observed the three new ones.
    assert result.native.progress.observation_count == 5
    assert SearchResult.load(result.output_dir).settings["resumed_trials"] == 2
    # SigOpt's best is marked once, in this experiment's view (the earlier run's mark does not stay behind).
    assert sum(bool(r.extra.get("sigopt_best")) for r in result.records) == 1
    # The reseeded optimizer does not replay the first run's suggestions.
    assert not any(params in [r.params for r in first.records] for params in calls)


def test_resume_with_the_budget_used_runs_nothing(tmp_path):
    first = _resume_search(tmp_path, 2).run_summary
    calls = []
    best = _resume_search(tmp_path, 2, calls)
    assert calls == []
    result = best.run_summary
    assert [r.trial_id for r in result.records] == [r.trial_id for r in first.records]
    assert best.run_id == first.best_trial.trial_id
    assert result.native.progress.observation_count == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(direction="maximize"), r"direction \['minimize'\] \(this search: \['maximize'\]\)"),
        (dict(compute_objective="eval_accuracy"), r"objective 'eval_loss' \(this search: 'eval_accuracy'\)"),
        (
            dict(hp_space={**RESUME_SPACE, "hidden": spaces.Categorical([16, 64])}),
            r"a different hp_space \(parameters hidden differ\)",
        ),
    ],
)
def test_resume_refuses_another_search(tmp_path, kwargs, message):
    SearchResult(
        backend="sigopt",
        directions=["minimize"],
        records=[],
        objective="eval_loss",
        space=spaces.SearchSpace(RESUME_SPACE).to_dict(),
        output_dir=str(tmp_path / "search"),
    ).save()
    calls = []
    with pytest.raises(
        SearchConfigError,
        match=rf"resume=True: the earlier search in .* is another search: it has "
        rf"{message}.*another output_dir",
    ):
        _resume_search(tmp_path, 2, calls, **kwargs)
    assert calls == []


def test_resume_refuses_a_corrupt_or_foreign_search_json(tmp_path):
    out = tmp_path / "search"
    out.mkdir()
    (out / "search.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(
        SearchConfigError, match=r"resume=True: '.*search.json' is not valid JSON.*resume=False"
    ):
        _resume_search(tmp_path, 2)
    SearchResult(
        backend="optuna",
        directions=["minimize"],
        records=[],
        objective="eval_loss",
        space=spaces.SearchSpace(RESUME_SPACE).to_dict(),
        output_dir=str(out),
    ).save()
    with pytest.raises(SearchConfigError, match=r"ran on backend='optuna'.*warm_start="):
        _resume_search(tmp_path, 2)


def test_resume_with_a_native_space(tmp_path):
    def hp_space(trial):
        return [
            {"bounds": {"min": 2e-3, "max": 2e-2}, "name": "learning_rate", "type": "double"},
            {
                "categorical_values": ["32", "64"],
                "name": "per_device_train_batch_size",
                "type": "categorical",
            },
        ]

    trainer = make_trainer(tmp_path, max_steps=4)
    call = dict(hp_space=hp_space, compute_objective="eval_loss", backend="sigopt", resume=True)
    first = trainer.hyperparameter_search(n_trials=1, **call).run_summary
    result = trainer.hyperparameter_search(n_trials=2, **call).run_summary
    assert len(result.records) == 2 and result.settings["resumed_trials"] == 1
    assert result.native.progress.observation_count == 2
    # The batch size (an int argument read from SigOpt's "32") was told back as its label.
    assert type(result.records[0].params["per_device_train_batch_size"]) is int
    assert result.records[0].to_dict()["params"] == first.records[0].to_dict()["params"]
    with pytest.raises(SearchConfigError, match="a different hp_space"):
        trainer.hyperparameter_search(n_trials=3, **{**call, "hp_space": lambda trial: hp_space(trial)[:1]})
