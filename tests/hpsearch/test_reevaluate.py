"""Re-evaluation of the leaders (``reevaluate_top_k``, ``reevaluate_seeds``; `hpsearch.reevaluate`), on every backend.

The contract: after the ``n_trials`` search trials, the top K configurations train again with seeds seed+1..seed+S
(the trainer really seeds with them), as extra records grouped by ``config_id``; the best run is the configuration
with the best mean over its runs, the observed-max trial reported beside it. Then bad input, failures, several
objectives, and a search killed during its re-evaluations and continued (nothing trained twice).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from hpsearch import SearchConfigError, TrialState, hyperparameter_search
from spaces import Float, Int, SearchSpace
from tests.hpsearch import _reeval_trials, _trials

ROOT = Path(__file__).resolve().parents[2]
BASE_SEED = 42  # TrainingArguments' default seed, which the search trials train with


def _search(trainer, hp_space, backend="random", **options):
    """`hyperparameter_search` maximizing eval_accuracy, the random backend seeded with 0 unless ``options`` say
    otherwise (the arguments every search here shares)."""
    shared = {"compute_objective": "eval_accuracy", "direction": "maximize", "backend": backend}
    if backend == "random":
        shared["seed"] = 0
    return hyperparameter_search(trainer, hp_space=hp_space, **{**shared, **options})


def _by_config(records):
    groups: dict[str, list] = {}
    for r in records:
        if r.state is TrialState.COMPLETE:
            groups.setdefault(r.extra.get("config_id", r.trial_id), []).append(r.objective)
    return groups


def test_leaders_train_again_with_new_seeds_and_the_best_mean_wins(
    backend, make_trainer, tiny_space, tmp_path, saved
):
    log = str(tmp_path / "seeds.jsonl")
    best = backend.search(
        make_trainer(_reeval_trials.SeedLog(log)),
        hp_space=tiny_space,
        compute_objective="eval_accuracy",
        direction="maximize",
        n_trials=4,
        reevaluate_top_k=2,
        reevaluate_seeds=2,
    )
    result = best.run_summary
    search = [r for r in result.records if r.extra.get("source", "search") == "search"]
    again = [r for r in result.records if r.extra.get("source") == "reevaluation"]
    assert len(search) == 4 and len(again) == 4  # re-evaluations do not count against n_trials
    leaders = sorted(
        (r for r in search if r.state is TrialState.COMPLETE), key=lambda r: (-r.objective, r.number)
    )[:2]
    assert sorted((r.extra["config_id"], r.extra["seed"]) for r in again) == sorted(
        (lead.trial_id, BASE_SEED + j) for lead in leaders for j in (1, 2)
    )
    for r in again:
        assert r.state is TrialState.COMPLETE, r.error
        assert r.params == next(lead.params for lead in leaders if lead.trial_id == r.extra["config_id"])
    # The trainer was seeded with each re-evaluation's seed (search trials: the base seed).
    seen = sorted(entry["torch_seed"] for entry in _reeval_trials.read(log))
    assert seen == sorted([BASE_SEED] * 4 + [BASE_SEED + 1, BASE_SEED + 2] * 2)
    # The best run: the leader with the best mean over its 3 runs; its statistics are those of its runs.
    groups = _by_config(result.records)
    means = {cid: statistics.fmean(groups[cid]) for cid in (lead.trial_id for lead in leaders)}
    number = {r.trial_id: r.number for r in search}
    chosen = min(means, key=lambda cid: (-means[cid], number[cid]))
    assert best.run_id == chosen
    assert best.n_seeds == 3
    assert best.objective_mean == pytest.approx(means[chosen])
    assert best.objective_std == pytest.approx(statistics.stdev(groups[chosen]))
    half = 4.303 * statistics.stdev(groups[chosen]) / math.sqrt(3)  # Student's t, 2 degrees of freedom
    assert best.objective_ci95 == pytest.approx((means[chosen] - half, means[chosen] + half))
    assert best.objective == next(r.objective for r in search if r.trial_id == chosen)  # the run's own value
    assert best.observed_best is not None and best.observed_best.run_id == leaders[0].trial_id
    assert result.best_trial.trial_id == leaders[0].trial_id  # the observed max is never a re-evaluation
    # The results group the runs and say their seeds, as saved.
    frame = saved().trials_dataframe()
    assert sorted(frame[frame.source == "reevaluation"].seed.tolist()) == [43, 43, 44, 44]
    assert set(frame[frame.source == "search"].seed) == {BASE_SEED}
    assert sorted(frame.groupby("config_id").size().tolist()) == sorted([1] * 2 + [3] * 2)
    summary = saved().config_summary().set_index("config_id")
    assert summary.loc[chosen, "n_seeds"] == 3
    assert summary.loc[chosen, "objective_mean"] == pytest.approx(means[chosen])
    assert summary.loc[chosen, "objective_ci95_low"] == pytest.approx(means[chosen] - half)


def test_without_reevaluation_the_best_run_is_the_observed_best(make_trainer, tiny_space):
    best = _search(
        make_trainer(),
        tiny_space,
        n_trials=2,
    )
    assert (best.n_seeds, best.objective_mean, best.objective_std, best.observed_best) == (
        1,
        None,
        None,
        None,
    )
    assert set(best.run_summary.trials_dataframe().seed) == {BASE_SEED}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"reevaluate_top_k": 2},
            r"reevaluate_top_k=2 needs reevaluate_seeds.*pass e\.g\. reevaluate_seeds=2",
        ),
        ({"reevaluate_seeds": 2}, r"reevaluate_seeds=2 needs reevaluate_top_k"),
        ({"reevaluate_top_k": 2, "reevaluate_seeds": 0}, r"reevaluate_seeds=0 must be an integer >= 1"),
        ({"reevaluate_top_k": 0, "reevaluate_seeds": 2}, r"reevaluate_top_k=0 must be an integer >= 1"),
        ({"reevaluate_top_k": 2.5, "reevaluate_seeds": 2}, r"reevaluate_top_k.*must be an integer"),
        ({"reevaluate_top_k": 5, "reevaluate_seeds": 2}, r"reevaluate_top_k=5 is more than n_trials=3.*<= 3"),
    ],
    ids=["k-without-s", "s-without-k", "zero-seeds", "zero-k", "float-k", "k-over-n-trials"],
)
def test_bad_reevaluation_options_are_refused_before_any_work(
    make_trainer, tiny_space, output_dir, options, message
):
    with pytest.raises(SearchConfigError, match=message):
        hyperparameter_search(make_trainer(), hp_space=tiny_space, n_trials=3, backend="random", **options)
    assert not output_dir.exists()


def test_a_searched_seed_is_refused_with_reevaluation(make_trainer, output_dir):
    space = SearchSpace({"learning_rate": Float(1e-3, 1e-1, log=True), "seed": Int(0, 9)})
    with pytest.raises(SearchConfigError, match=r"hp_space searches 'seed'.*remove 'seed' from hp_space"):
        hyperparameter_search(
            make_trainer(),
            hp_space=space,
            n_trials=3,
            backend="random",
            reevaluate_top_k=1,
            reevaluate_seeds=2,
        )
    assert not output_dir.exists()


def test_a_sweep_file_reevaluates_through_the_cli(tmp_path, monkeypatch):
    """The options come from the one declaration (COMMON_OPTIONS): a sweep file's backend_options take them, and
    ``--set`` overrides one."""
    from hpsearch import SearchResult
    from hpsearch.cli import main
    from tests.hpsearch.test_sweep import write_sweep

    monkeypatch.chdir(ROOT)
    path = write_sweep(
        tmp_path, "random", {"seed": 0, "reevaluate_top_k": 1, "reevaluate_seeds": 1}, n_trials=2
    )
    out = tmp_path / "out"
    assert (
        main(
            [
                "run",
                str(path),
                "--no-progress",
                "--output-dir",
                str(out),
                "--set",
                "backend_options.reevaluate_seeds=2",
            ]
        )
        == 0
    )
    again = [r for r in SearchResult.load(out).records if r.extra.get("source") == "reevaluation"]
    assert sorted(r.extra["seed"] for r in again) == [BASE_SEED + 1, BASE_SEED + 2]


def test_more_leaders_than_completed_trials_warns_and_uses_those(make_trainer, tiny_space, tmp_path, caplog):
    """Trials 1 and 2 fail (no objective): only trial 0 completes, so reevaluate_top_k=3 re-evaluates it alone."""
    model_init = _trials.ScriptedModelInit({1: "raise", 2: "raise"})
    best = _search(
        make_trainer(model_init),
        tiny_space,
        n_trials=3,
        reevaluate_top_k=3,
        reevaluate_seeds=1,
    )
    assert "reevaluate_top_k=3 but only 1 trial(s) completed" in caplog.text
    again = [r for r in best.run_summary.records if r.extra.get("source") == "reevaluation"]
    assert [(r.extra["config_id"], r.extra["seed"]) for r in again] == [("0", BASE_SEED + 1)]
    assert best.run_id == "0" and best.n_seeds == 2


def test_failed_reevaluations_are_recorded_and_the_results_stay(
    make_trainer, tiny_space, tmp_path, caplog, saved
):
    """Every re-evaluation fails: each is recorded FAIL, max_failed_trials (2 in a row) stops the re-evaluation and
    not the search, and the best run falls back to the observed best trial."""
    model_init = _reeval_trials.SeedLog(str(tmp_path / "log"), fail_seeds=(BASE_SEED + 1, BASE_SEED + 2))
    best = _search(
        make_trainer(model_init),
        tiny_space,
        n_trials=3,
        reevaluate_top_k=2,
        reevaluate_seeds=2,
        max_failed_trials=2,
    )
    again = [r for r in saved().records if r.extra.get("source") == "reevaluation"]
    assert [r.state for r in again] == [TrialState.FAIL] * 2
    assert "Re-evaluation stops" in caplog.text
    assert best.n_seeds == 1 and best.run_id == saved().best_trial.trial_id
    assert len(saved().records) == 5


def test_several_objectives_return_the_pareto_front_over_means(make_trainer, tiny_space):
    best = _search(
        make_trainer(),
        tiny_space,
        compute_objective=_trials.loss_and_accuracy,
        direction=["minimize", "maximize"],
        n_trials=4,
        reevaluate_top_k=3,
        reevaluate_seeds=1,
    )
    result = best[0].run_summary
    groups = {cid: runs for cid, runs in _by_config(result.records).items() if len(runs) == 2}
    assert len(groups) == 3
    means = {cid: [statistics.fmean(v[i] for v in runs) for i in range(2)] for cid, runs in groups.items()}

    def dominated(a):
        return any(b[0] <= a[0] and b[1] >= a[1] and b != a for b in means.values())

    assert sorted(b.run_id for b in best) == sorted(cid for cid, m in means.items() if not dominated(m))
    for b in best:
        assert b.n_seeds == 2 and b.objective_mean == pytest.approx(means[b.run_id])


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.parametrize("engine", ["optuna", "sigopt"])
def test_a_search_killed_during_reevaluation_continues_without_training_any_twice(tmp_path, engine):
    """The driver dies (os._exit, as SIGKILL) when the first leader's second re-evaluation starts; the rerun of the
    same search (Optuna: the same study; SigOpt: resume=True) trains only the re-evaluations its results do not
    hold: every (config, seed) once, and the search trials are not trained again."""
    out, log = str(tmp_path / "out"), str(tmp_path / "seeds.jsonl")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = [sys.executable, "-m", "tests.hpsearch._reeval_trials", engine, out, log]
    first = subprocess.run(
        [*run, str(BASE_SEED + 2)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert first.returncode == 9, first.stderr[-3000:]
    assert os.path.exists(log + ".killed")
    second = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    from hpsearch import SearchResult

    result = SearchResult.load(out)
    again = [r for r in result.records if r.extra.get("source") == "reevaluation"]
    pairs = sorted((r.extra["config_id"], r.extra["seed"]) for r in again)
    assert len(pairs) == 4 and len(set(pairs)) == 4 and all(r.state is TrialState.COMPLETE for r in again)
    # Trained: 3 search trials, 1 re-evaluation before the kill, the killed one again, and the other 2: once each.
    trained = [(tuple(sorted(e["params"].items())), e["torch_seed"]) for e in _reeval_trials.read(log)]
    assert len([t for t in trained if t[1] == BASE_SEED]) == 3
    reevaluated = [t for t in trained if t[1] != BASE_SEED]
    assert len(reevaluated) == 5  # 4 + the killed start (which never finished)
    killed = [t for t in reevaluated if t[1] == BASE_SEED + 2]
    assert len(set(reevaluated)) == 4 and len(killed) == 3  # only the killed one started twice
    assert len([r for r in result.records if r.extra.get("source", "search") == "search"]) == 3


@pytest.mark.slow
@pytest.mark.multiprocess
def test_with_trial_workers_reevaluations_run_in_the_workers_and_a_crash_fails_only_that_run(
    make_trainer, tiny_space, saved
):
    """trial_workers=2: the re-evaluations run in the search's worker processes, two at once; a run whose worker
    dies (os._exit at the first extra seed) is FAIL with its exit code, and the other runs and the choice go on."""
    from tests.hpsearch import _worker_trials

    best = _search(
        make_trainer(_worker_trials.exit_at_seed),
        tiny_space,
        n_trials=3,
        reevaluate_top_k=2,
        reevaluate_seeds=2,
        trial_workers=2,
        max_failed_trials=5,
    )
    assert _worker_trials.EXIT_SEED == BASE_SEED + 1
    records = saved().records
    again = [r for r in records if r.extra.get("source") == "reevaluation"]
    assert len(again) == 4
    for r in again:
        assert r.extra["worker_pid"] != os.getpid() and r.extra["worker"] in (0, 1), r.extra
        if r.extra["seed"] == BASE_SEED + 1:
            assert r.state is TrialState.FAIL and "worker process died: exited with code 9" in r.error, (
                r.error
            )
        else:
            assert r.state is TrialState.COMPLETE, r.error
    assert len({r.extra["worker_pid"] for r in again if r.state is TrialState.FAIL}) == 2  # each in its own
    assert best.n_seeds == 2  # the search trial and its seed BASE_SEED + 2


def test_a_spent_compute_budget_starts_no_reevaluation(make_trainer, tiny_space, caplog):
    """Re-evaluations count against the compute budgets: spent by the search itself (a budget far below one
    trial), none starts, and the best run is the observed best."""
    best = _search(
        make_trainer(),
        tiny_space,
        n_trials=3,
        reevaluate_top_k=1,
        reevaluate_seeds=2,
        max_device_hours=1e-9,
    )
    assert [r.extra.get("source", "search") for r in best.run_summary.records] == ["search"]
    assert "No re-evaluation: the search stopped starting trials (compute budget spent" in caplog.text
    assert best.n_seeds == 1


def _reevaluated_result():
    """A saved search of 3 configurations, two re-evaluated with 2 more seeds (no training: records by hand)."""
    from hpsearch import SearchResult, TrialRecord

    def record(trial_id, number, objective, hidden, config_id=None, seed=BASE_SEED):
        extra = {"seed": seed}
        if config_id is not None:
            extra.update(source="reevaluation", config_id=config_id)
        return TrialRecord(
            trial_id=trial_id,
            number=number,
            name=f"run-{trial_id}",
            state=TrialState.COMPLETE,
            params={"hidden": hidden},
            objective=objective,
            extra=extra,
        )

    records = [
        record("0", 0, 0.95, 8),
        record("1", 1, 0.90, 16),
        record("2", 2, 0.50, 32),
        record("0-seed43", 3, 0.70, 8, "0", 43),
        record("0-seed44", 4, 0.72, 8, "0", 44),
        record("1-seed43", 5, 0.89, 16, "1", 43),
        record("1-seed44", 6, 0.91, 16, "1", 44),
    ]
    return SearchResult(backend="random", directions=["maximize"], records=records, objective="eval_accuracy")


def test_reports_show_the_leaders_with_their_intervals():
    from hpsearch.api import best_runs
    from hpsearch.report import render_markdown
    from hpsearch.report._figures import leaders_figure
    from hpsearch.report._html import render_html

    result = _reevaluated_result()
    best = best_runs(result)
    assert best.run_id == "1" and best.observed_best.run_id == "0"  # the lucky 0.95 loses on its mean (0.79)
    fig = leaders_figure(result)
    means = fig.data[1]
    assert list(means.x) == ["run-1 (n=3)", "run-0 (n=3)"]  # best mean first; run-2 was not re-evaluated
    assert list(means.y) == pytest.approx([0.9, statistics.fmean([0.95, 0.70, 0.72])])
    half = 4.303 * statistics.stdev([0.95, 0.70, 0.72]) / math.sqrt(3)
    assert means.error_y.array[1] == pytest.approx(half)
    assert list(means.marker.color) == ["#dc2626", "#2563eb"]  # the chosen one in red
    assert len(fig.data[0].y) == 6  # every run of the leaders
    assert "Leaders over seeds" in render_html(result)
    from hpsearch.dashboard._views import search_view  # the live dashboard draws the report's sections

    view = search_view(result, "not computed", None, True)
    assert "leaders" in view.order
    text = render_markdown(result)
    assert "run-1 ★: 0.9 [" in text and "n=3" in text and "run-0: " in text


def test_a_search_without_reevaluation_has_no_leaders_section(make_trainer, tiny_space):
    from hpsearch.report._figures import leaders_figure

    result = _reevaluated_result()
    result.records[:] = result.records[:3]
    assert leaders_figure(result) is None


def test_a_configuration_suggested_inside_model_init_is_replayed(make_trainer):
    """Optuna's define-by-run: model_init asks ``trial.suggest_categorical``; a re-evaluation's trial answers with
    the configuration's value (an ``optuna.trial.FixedTrial``), so it trains the same model."""
    import optuna

    space = SearchSpace({"learning_rate": Float(1e-3, 1e-1, log=True)})
    best = _search(
        make_trainer(_reeval_trials.suggesting_model_init),
        space,
        n_trials=3,
        backend="optuna",
        sampler=optuna.samplers.RandomSampler(seed=0),
        reevaluate_top_k=2,
        reevaluate_seeds=1,
    )
    records = {r.trial_id: r for r in best.run_summary.records}
    again = [r for r in records.values() if r.extra.get("source") == "reevaluation"]
    assert len(again) == 2
    for r in again:
        assert r.state is TrialState.COMPLETE, r.error
        assert r.params == records[r.extra["config_id"]].params and "hidden" in r.params


def test_a_longer_rerun_keeps_the_earlier_reevaluations(make_trainer, tiny_space, tmp_path):
    """The same Optuna study continued with more trials: the re-evaluations of the first run stay in the results,
    also those of a configuration that is no longer a leader (the first run's 2 trials are muted, so a later one
    leads), and none of them is trained again."""
    import optuna

    log = str(tmp_path / "seeds.jsonl")

    def search(n_trials):
        return _search(
            make_trainer(_reeval_trials.SeedLog(log, mute_below=2)),
            tiny_space,
            n_trials=n_trials,
            backend="optuna",
            storage=f"sqlite:///{tmp_path}/study.db",
            study_name="longer",
            load_if_exists=True,
            sampler=optuna.samplers.RandomSampler(seed=0),
            reevaluate_top_k=1,
            reevaluate_seeds=1,
        )

    first = [r for r in search(2).run_summary.records if r.extra.get("source") == "reevaluation"]
    assert len(first) == 1
    records = search(5).run_summary.records
    again = {
        (r.extra["config_id"], r.extra["seed"]) for r in records if r.extra.get("source") == "reevaluation"
    }
    assert (first[0].extra["config_id"], BASE_SEED + 1) in again
    assert len(again) == 2  # the new leader's too
    trained = [e["torch_seed"] for e in _reeval_trials.read(log)]
    assert trained.count(BASE_SEED) == 5 and trained.count(BASE_SEED + 1) == len(again)


def test_warm_start_evaluate_ranks_reevaluated_configurations_by_their_mean(make_settings, tmp_path):
    """'evaluate' trains the best earlier configurations again: a re-evaluated one counts by its mean (run-0's
    lucky 0.95 is 0.79 on average), and its re-evaluation rows are no configurations of their own."""
    from hpsearch.warmstart import load_priors
    from spaces import Categorical

    earlier = _reevaluated_result()
    earlier.save(tmp_path / "earlier")
    settings = make_settings(space=SearchSpace({"hidden": Categorical([8, 16, 32])}))
    priors = load_priors(str(tmp_path / "earlier"), "evaluate", 2, {}, settings)
    assert [(p.params, p.objective) for p in priors] == [
        ({"hidden": 16}, pytest.approx(0.9)),
        ({"hidden": 8}, pytest.approx((0.95 + 0.70 + 0.72) / 3)),
    ]


# ---------------------------------------------------------------------------------------------- intensification
def _replay_intensification(records, n_trials, seeds, z=1.0):
    """What ``reevaluate_when="during"`` must have re-evaluated, replayed from the search trials in the order they
    ran (one at a time: a challenger's re-evaluations run before the next search trial), written from the rule and
    not from its code: ``sigma`` is the runs' standard deviation pooled over the configurations with two runs or more;
    a COMPLETE trial is a challenger while there is no incumbent or when its run is at least the incumbent's mean
    less ``z * sigma * sqrt(1 + 1/n)``, if ``seeds`` runs are left; it trains its extra seeds one at a time and
    stops (giving back the rest) when its mean falls below the incumbent's by more than ``z * sigma * sqrt(1/m +
    1/n)``. Returns ({challenger: its extra seeds' indices}, the chosen mean); a tie that lasts after the
    re-evaluations trains more runs: not modelled here, so not in these searches."""
    search = sorted(
        (r for r in records if r.extra.get("source", "search") == "search"), key=lambda r: r.number
    )
    again = {
        (r.extra["config_id"], r.extra["seed"] - BASE_SEED): r.objective
        for r in records
        if r.extra.get("source") == "reevaluation" and r.state is TrialState.COMPLETE
    }
    runs: dict[str, list[float]] = {}

    def incumbent(besides):
        means = [(statistics.fmean(v), len(v)) for c, v in runs.items() if len(v) >= 2 and c != besides]
        return max(means, default=None)

    def sigma():
        pairs = [(len(v) - 1, statistics.variance(v)) for v in runs.values() if len(v) >= 2]
        return math.sqrt(sum(d * v for d, v in pairs) / sum(d for d, _ in pairs)) if pairs else 0.0

    expected: dict[str, list[int]] = {}
    used = 0
    for r in search:
        used += 1
        if r.state is not TrialState.COMPLETE:
            continue
        best = incumbent(r.trial_id)
        bar = None if best is None else best[0] - z * sigma() * math.sqrt(1 + 1 / best[1])
        if (bar is None or r.objective >= bar) and n_trials - used >= seeds:
            runs[r.trial_id], expected[r.trial_id] = [r.objective], []
            for j in range(1, seeds + 1):
                used += 1
                expected[r.trial_id].append(j)
                runs[r.trial_id].append(again[(r.trial_id, j)])
                best, m = incumbent(r.trial_id), len(runs[r.trial_id])
                behind = best is not None and statistics.fmean(runs[r.trial_id]) < best[
                    0
                ] - z * sigma() * math.sqrt(1 / m + 1 / best[1])
                if j < seeds and behind:
                    break
    chosen = incumbent(None)
    return expected, (None if chosen is None else chosen[0])


@pytest.mark.parametrize("engine", ["random", "optuna", "sigopt"])
def test_during_the_search_a_challenger_is_reevaluated_before_it_is_accepted(
    make_trainer, tiny_space, tmp_path, saved, engine
):
    """reevaluate_when="during": n_trials counts every run; exactly the trials that beat the incumbent's mean (the
    first: no incumbent yet) train again with the same extra seeds, right after they end; the engine hears only its
    own trials; the best run is the best mean, the observed best beside it."""
    log = str(tmp_path / "seeds.jsonl")
    options = {"driver": "lite"} if engine == "sigopt" else {}
    if engine == "optuna":
        import optuna

        options["sampler"] = optuna.samplers.RandomSampler(seed=0)
    best = _search(
        make_trainer(_reeval_trials.SeedLog(log)),
        tiny_space,
        backend=engine,
        n_trials=9,
        reevaluate_when="during",
        reevaluate_seeds=2,
        **options,
    )
    records = saved().records
    assert len(records) == 9  # every run counts against n_trials
    again = [r for r in records if r.extra.get("source") == "reevaluation"]
    assert again and all(r.state is TrialState.COMPLETE for r in again)
    expected, incumbent = _replay_intensification(records, 9, 2)
    assert sorted({r.extra["config_id"] for r in again}) == sorted(expected)
    for config_id, indices in expected.items():
        seeds = sorted(r.extra["seed"] for r in again if r.extra["config_id"] == config_id)
        assert seeds == [BASE_SEED + j for j in indices]
    # The runs in the order they trained: each challenger's re-evaluations right after it.
    trained = [
        ({k: v for k, v in e["params"].items() if k not in ("seed", "data_seed")}, e["torch_seed"])
        for e in _reeval_trials.read(log)
    ]
    for i, (params, seed) in enumerate(trained):
        if seed != BASE_SEED:
            previous = trained[i - 1 if seed == BASE_SEED + 1 else i - 2]
            assert previous == (params, BASE_SEED), trained
    assert best.n_seeds == 3 and best.objective_mean == pytest.approx(incumbent)
    assert best.observed_best is not None and best.observed_best.run_id == saved().best_trial.trial_id
    if engine == "optuna":
        study = best.run_summary.native
        assert len(study.trials) == 9 - len(again)  # re-evaluations are never told to the engine


def test_during_a_challenger_that_cannot_finish_its_reevaluations_stays_a_single_run(
    make_trainer, tiny_space, saved
):
    """n_trials=4 with 2 extra seeds: the first trial and its 2 re-evaluations take 3 runs; the fourth run is a
    search trial with no room for its re-evaluations, whatever its value."""
    _search(make_trainer(), tiny_space, n_trials=4, reevaluate_when="during", reevaluate_seeds=2)
    frame = saved().trials_dataframe()
    assert frame.source.tolist().count("reevaluation") == 2 and len(frame) == 4
    assert set(frame[frame.source == "reevaluation"].config_id) == {"0"}


def test_during_is_refused_on_a_backend_that_runs_its_own_loop(make_trainer, tiny_space, output_dir):
    with pytest.raises(
        SearchConfigError, match=r"reevaluate_when='during' is not supported by backend='ray'.*'end'"
    ):
        hyperparameter_search(
            make_trainer(),
            hp_space=tiny_space,
            n_trials=3,
            backend="ray",
            reevaluate_when="during",
            reevaluate_seeds=1,
        )
    assert not output_dir.exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"reevaluate_when": "during"},
            r"reevaluate_when='during' needs reevaluate_seeds.*reevaluate_seeds=2",
        ),
        (
            {"reevaluate_when": "sometimes", "reevaluate_seeds": 1},
            r"reevaluate_when='sometimes' must be one of 'end', 'during'",
        ),
        (
            {"reevaluate_when": "during", "reevaluate_seeds": 1, "reevaluate_top_k": 2},
            r"reevaluate_top_k=2 chooses the leaders.*remove reevaluate_top_k",
        ),
        ({"reevaluate_when": "during", "reevaluate_seeds": 3}, r"needs n_trials >= 4.*n_trials=3"),
        (
            {"reevaluate_folds": [(1, 2)]},
            r"reevaluate_folds\[0\]=\(1, 2\) has train_dataset=1, which is not a dataset",
        ),
        ({"reevaluate_folds": []}, r"reevaluate_folds=\[\] must be a non-empty list or a callable"),
        (
            {"reevaluate_folds": ["train"]},
            r"reevaluate_folds\[0\]='train' is not a \(train_dataset, eval_dataset\) pair",
        ),
        ({"reevaluate_folds": lambda seed: None}, r"reevaluate_folds=<function.*needs reevaluate_seeds"),
        (
            {"reevaluate_top_k": 1, "reevaluate_seeds": 2, "reevaluate_folds": lambda seed: (seed, None)},
            r"reevaluate_folds\(43\) returned \(43, None\), which has train_dataset=43",
        ),
        (
            {"reevaluate_top_k": 1, "reevaluate_seeds": 1, "reevaluate_folds": "digits", "trial_workers": 2},
            r"reevaluate_folds='digits' \(str\) must be a non-empty list or a callable",
        ),
    ],
    ids=[
        "when-without-seeds",
        "bad-when",
        "top-k-during",
        "too-few-runs",
        "number-fold",
        "no-folds",
        "str-fold",
        "folds-without-seeds",
        "callable-bad-answer",
        "str-folds",
    ],
)
def test_bad_intensification_and_fold_options_are_refused_before_any_work(
    make_trainer, tiny_space, output_dir, options, message
):
    with pytest.raises(SearchConfigError, match=message):
        hyperparameter_search(make_trainer(), hp_space=tiny_space, n_trials=3, backend="random", **options)
    assert not output_dir.exists()


def test_folds_with_trial_workers_are_refused(make_trainer, tiny_space, output_dir):
    from tests._digits import digits_datasets

    with pytest.raises(SearchConfigError, match=r"reevaluate_folds with trial_workers=2.*drop trial_workers"):
        hyperparameter_search(
            make_trainer(),
            hp_space=tiny_space,
            n_trials=3,
            backend="random",
            reevaluate_top_k=1,
            reevaluate_seeds=1,
            reevaluate_folds=[digits_datasets(seed=1)],
            trial_workers=2,
        )
    assert not output_dir.exists()


# ---------------------------------------------------------------------------------------------- folds
class _Counted(torch.utils.data.Dataset):
    """A dataset that counts the items read from it (in this process: the re-evaluations run in it)."""

    def __init__(self, inner):
        self.inner, self.reads = inner, 0

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, i):
        self.reads += 1
        return self.inner[i]


def _one_example(dataset, i):
    from tests._digits import DigitsDataset

    return DigitsDataset(dataset.x[i : i + 1].numpy(), dataset.y[i : i + 1].numpy())


def test_reevaluations_train_and_evaluate_on_the_given_folds(make_trainer, tiny_space, saved):
    """Two folds for 2 extra seeds: the j-th re-evaluation of every leader trains on fold j-1's train split (its
    items are read) and is scored on its eval split (one example: an accuracy of exactly 0 or 1), recorded in the
    fold column; the search trials use the trainer's own datasets (fold NA)."""
    from tests._digits import digits_datasets

    folds = []
    for seed in (1, 2):
        train, evaluation = digits_datasets(seed=seed)
        folds.append((_Counted(train), _one_example(evaluation, 0)))
    best = _search(
        make_trainer(), tiny_space, n_trials=3, reevaluate_top_k=2, reevaluate_seeds=2, reevaluate_folds=folds
    )
    frame = saved().trials_dataframe()
    again = frame[frame.source == "reevaluation"]
    assert sorted(zip(again.seed, again.fold)) == [(BASE_SEED + 1, 0)] * 2 + [(BASE_SEED + 2, 1)] * 2
    assert set(again.objective) <= {0.0, 1.0}
    search = frame[frame.source == "search"]
    assert search.fold.isna().all() and not set(search.objective) <= {0.0, 1.0}
    steps, batch = _trials.TINY_ARGS["max_steps"], _trials.TINY_ARGS["per_device_train_batch_size"]
    # Each fold trained two runs of 6 batches (the loader may read ahead a little).
    assert all(f[0].reads >= 2 * steps * batch for f in folds), [f[0].reads for f in folds]
    assert best.n_seeds == 3
    assert saved().settings["reevaluate"]["folds"] == 2


def test_a_callable_gives_each_seed_its_fold_once_before_any_trial(make_trainer, tiny_space, saved):
    from tests._digits import digits_datasets

    asked = []

    def folds(seed):
        asked.append(seed)
        train, evaluation = digits_datasets(seed=seed)
        return train, _one_example(evaluation, 0)

    _search(
        make_trainer(), tiny_space, n_trials=3, reevaluate_top_k=2, reevaluate_seeds=2, reevaluate_folds=folds
    )
    assert asked == [BASE_SEED + 1, BASE_SEED + 2]
    frame = saved().trials_dataframe()
    again = frame[frame.source == "reevaluation"]
    assert (again.fold == again.seed).all() and len(again) == 4
    assert set(again.objective) <= {0.0, 1.0}


@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_search_killed_during_an_intensification_continues_it_without_training_any_twice(tmp_path):
    """reevaluate_when="during" on an Optuna study: the driver dies when the first challenger's second re-evaluation
    starts; the rerun first trains that missing seed, counts the earlier runs against n_trials (6 runs in all), and
    trains no (configuration, seed) twice."""
    out, log = str(tmp_path / "out"), str(tmp_path / "seeds.jsonl")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = [sys.executable, "-m", "tests.hpsearch._reeval_trials", "optuna-during", out, log]
    first = subprocess.run(
        [*run, str(BASE_SEED + 2)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert first.returncode == 9, first.stderr[-3000:]
    second = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    from hpsearch import SearchResult

    result = SearchResult.load(out)
    assert len(result.records) == 6 and all(r.state is TrialState.COMPLETE for r in result.records)
    pairs = [(r.extra.get("config_id", r.trial_id), r.extra["seed"]) for r in result.records]
    assert len(set(pairs)) == 6 and ("0", BASE_SEED + 2) in pairs
    trained = [(tuple(sorted(e["params"].items())), e["torch_seed"]) for e in _reeval_trials.read(log)]
    assert len(trained) == 7  # 6 runs + the killed start
    # The killed run, first again after the restart.
    assert trained[3] == trained[2] and trained[2][1] == BASE_SEED + 2
    # Every other run trained once (a restarted RandomSampler may draw a search trial's values again: counted apart).
    again = [r for r in result.records if r.extra.get("source") == "reevaluation"]
    assert len([t for t in trained if t[1] != BASE_SEED]) == len(again) + 1
    assert len([t for t in trained if t[1] == BASE_SEED]) == 6 - len(again)


@pytest.mark.multiprocess
def test_a_launched_search_reevaluates_in_lockstep_and_every_process_gets_the_same_best_run(tmp_path):
    """reevaluate_when="during" under `accelerate launch` with 2 processes: every run, the re-evaluations included,
    trains on both processes in the same order with the same parameters and seed, and both return the same records
    (re-evaluations marked as such) and the same best run, chosen by the mean."""
    from tests._launch import accelerate_launch

    result = tmp_path / "result.json"
    accelerate_launch("tests.hpsearch._ddp_reeval", str(tmp_path / "out"), str(result))
    main, other = (json.loads((tmp_path / f"result.json.{rank}").read_text()) for rank in (0, 1))
    assert main["world"] == other["world"] == 2
    assert len(main["trained"]) == 7 and other["trained"] == main["trained"]
    assert sorted({t["torch_seed"] for t in main["trained"]}) == [BASE_SEED, BASE_SEED + 1, BASE_SEED + 2]
    again = [r for r in main["records"] if r["source"] == "reevaluation"]
    assert again and len(main["records"]) == 7
    assert other["records"] == main["records"]
    expected, incumbent = _replay_intensification(_records_of(main["records"]), 7, 2)
    assert sorted({r["config_id"] for r in again}) == sorted(expected)
    assert main["best"] == other["best"]
    assert main["best"]["n_seeds"] == 3 and main["best"]["objective_mean"] == pytest.approx(incumbent)


def _records_of(rows):
    """The launched search's records as `_replay_intensification` reads them."""
    return [
        SimpleNamespace(
            trial_id=r["id"],
            number=r["number"],
            state=TrialState(r["state"]),
            objective=r["objective"],
            extra={k: r[k] for k in ("source", "config_id", "seed") if r[k] is not None},
        )
        for r in rows
    ]


# ---------------------------------------------------------------------------------------------- ties (a saturated objective)
class _One(torch.utils.data.Dataset):
    def __len__(self):
        return 1

    def __getitem__(self, i):
        return {"x": torch.zeros(1), "labels": torch.zeros(1)}


class _Answer(torch.nn.Module):
    """Predicts ``value`` whatever its input (one trainable weight, so that the trial's step trains something)."""

    def __init__(self, value):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.register_buffer("value", torch.tensor([float(value)]))

    def forward(self, x, labels=None):
        return {"loss": (self.w**2).sum(), "logits": self.value.expand(x.shape[0]) + 0 * self.w}


def _recorded_trainer(output_dir, table):
    """A trainer whose run of the configuration first drawn as trial ``n``, seeded with ``BASE_SEED + j``, scores
    ``table[n][j]`` (``eval_score``; 0.5 for a trial the table does not list)."""
    from trainer import Trainer, TrainingArguments

    def model_init(trial=None):
        if trial is None:
            return _Answer(0.0)
        return _Answer(table.get(trial.number, [0.5] * 9)[torch.initial_seed() - BASE_SEED])

    args = TrainingArguments(
        output_dir=str(output_dir), max_steps=1, per_device_train_batch_size=1, eval_strategy="no",
        save_strategy="no", logging_strategy="no", disable_tqdm=True, report_to="none", use_cpu=True,
        seed=BASE_SEED,
    )  # fmt: skip
    return Trainer(
        model_init=model_init,
        args=args,
        train_dataset=_One(),
        eval_dataset=_One(),
        compute_metrics=lambda evaluation: {"score": float(evaluation.predictions.mean())},
    )


@pytest.mark.parametrize(
    ("second", "runs", "chosen"),
    [
        # The tie (three runs of 1.0 each) is broken by one more seed each: the incumbent's 0.9 loses.
        ([1.0, 1.0, 1.0, 1.0], {0: 4, 1: 4}, (1, 4, 1.0)),
        # Tied on every seed up to 2 * S + 1 = 5 runs each: the incumbent keeps its place (the earlier trial).
        ([1.0, 1.0, 1.0, 0.9, 1.0], {0: 5, 1: 5}, (0, 5, 0.98)),
        # Worse on the shared seeds: no tie-break run.
        ([1.0, 1.0, 0.9], {0: 3, 1: 3}, (0, 3, 1.0)),
    ],
)
def test_during_a_challenger_that_ties_the_incumbent_is_told_apart_by_more_seeds(
    tmp_path, second, runs, chosen
):
    """Recorded values at a saturated objective (accuracy 1.0): a trial whose single run equals the incumbent's mean
    is a challenger; when its mean after its S re-evaluations still equals the incumbent's, both train their next
    seed until the means differ (at most 2 * S + 1 runs each); the best run is the best mean, then more runs, then
    the earlier trial."""
    table = {0: [1.0, 1.0, 1.0, 0.9, 1.0], 1: second}
    best = hyperparameter_search(
        _recorded_trainer(tmp_path / "out", table),
        hp_space={"lr": Float(1e-3, 1e-1, log=True)},
        compute_objective="eval_score",
        direction="maximize",
        backend="random",
        seed=0,
        n_trials=12,
        reevaluate_when="during",
        reevaluate_seeds=2,
    )
    records = best.run_summary.records
    assert len(records) == 12
    seeds: dict[int, list[int]] = {}
    for r in records:
        seeds.setdefault(r.number, []).append(r.extra["seed"] - BASE_SEED)
    assert {n: len(s) for n, s in seeds.items() if len(s) > 1} == runs
    assert all(sorted(s) == list(range(len(s))) for s in seeds.values())
    number, n_seeds, mean = chosen
    assert [r.number for r in records if r.trial_id == best.run_id] == [number]
    assert best.n_seeds == n_seeds and best.objective_mean == pytest.approx(mean)


# ---------------------------------------------------------------------------------------------- racing (a noisy objective)
@pytest.mark.parametrize(
    ("second", "runs", "chosen"),
    [
        # One run below the incumbent's mean 0.85, but within Z = 1 standard error of the difference (bar
        # 0.85 - 0.05 * sqrt(1 + 1/3) = 0.792): raced, and its mean over 3 runs, 0.89, takes the incumbent's place.
        # The strict rule of round 5 (a run must reach the incumbent's mean) never re-evaluated it.
        ([0.84, 0.92, 0.91], {0: 3, 1: 3}, (1, 3, 0.89)),
        # Raced, then its first re-evaluation puts its mean (0.77) below the incumbent's by more than one standard
        # error (pooled sigma 0.070 over 3 degrees of freedom: bar 0.85 - 0.070 * sqrt(1/2 + 1/3) = 0.786): dropped,
        # its second seed never trains and its run goes back to the search (3 + 2 + 3 single runs = 8).
        ([0.84, 0.70, 0.99], {0: 3, 1: 2}, (0, 3, 0.85)),
        # A run below the bar (0.75 < 0.792): not raced, however good its other seeds would have been.
        ([0.75, 0.99, 0.99], {0: 3}, (0, 3, 0.85)),
    ],
)
def test_during_a_challenger_within_the_noise_is_raced_and_dropped_once_clearly_behind(
    tmp_path, second, runs, chosen
):
    """Recorded values on a noisy objective (the other trials score 0.5 on every seed): the bar to race is the
    incumbent's mean less Z = 1 standard error of the difference, the noise pooled over the repeated
    configurations; a race stops as soon as the challenger's mean is behind by more than one standard error."""
    table = {0: [0.90, 0.80, 0.85], 1: second}
    best = hyperparameter_search(
        _recorded_trainer(tmp_path / "out", table),
        hp_space={"lr": Float(1e-3, 1e-1, log=True)},
        compute_objective="eval_score",
        direction="maximize",
        backend="random",
        seed=0,
        n_trials=8,
        reevaluate_when="during",
        reevaluate_seeds=2,
    )
    records = best.run_summary.records
    assert len(records) == 8  # n_trials counts every run; a dropped race's unused run went to the search
    seeds: dict[int, list[int]] = {}
    for r in records:
        seeds.setdefault(r.number, []).append(r.extra["seed"] - BASE_SEED)
    assert {n: len(s) for n, s in seeds.items() if len(s) > 1} == runs
    assert all(sorted(s) == list(range(len(s))) for s in seeds.values())
    number, n_seeds, mean = chosen
    assert [r.number for r in records if r.trial_id == best.run_id] == [number]
    assert best.n_seeds == n_seeds and best.objective_mean == pytest.approx(mean, abs=1e-6)


def test_the_noise_is_pooled_over_the_repeated_configurations_by_their_degrees_of_freedom():
    from hpsearch.reevaluate import ConfigSummary, pooled_std

    def summary(values):
        record = SimpleNamespace(trial_id="x", number=0)
        return ConfigSummary(
            "x", record, tuple(values), [statistics.fmean(values)],
            [statistics.stdev(values) if len(values) > 1 else math.nan], [(math.nan, math.nan)],
        )  # fmt: skip

    # Variances 0.0025 (2 degrees of freedom) and 0.0098 (1): (2 * 0.0025 + 0.0098) / 3 = 0.004933.
    pooled = pooled_std([summary([0.90, 0.80, 0.85]), summary([0.84, 0.70]), summary([0.5])])
    assert pooled == pytest.approx(math.sqrt(0.0148 / 3))
    assert pooled_std([summary([0.5])]) is None
