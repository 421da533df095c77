"""The Ray Tune backend against a real two-node Ray cluster on 127.0.0.1 (no mocks)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from hpsearch import hyperparameter_search
from hpsearch.errors import SearchConfigError
from hpsearch.results import SearchResult
from hpsearch.trial import TrialState
from spaces import Categorical, Float, Int, SearchSpace
from tests.hpsearch import _ray_cluster as rc

# The tests that run a search on a Ray (the shared cluster, a local Ray or a driver process) are marked slow,
# multiprocess and ray, one by one. The others check conversions, refusals before any connection and the driver's
# bookkeeping in this process, with no Ray running: they are in the fast tier, whose guard fails a test that starts
# a process (tests/conftest.py).

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def _space():
    return {"learning_rate": Float(1e-4, 3e-1, log=True)}


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.ray
def test_asha_sweep_on_two_nodes(ray_cluster, tmp_path):
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search import BasicVariantGenerator

    trainer = rc.make_trainer(str(tmp_path / "out"), epochs=3)
    best = hyperparameter_search(
        trainer,
        hp_space=_space(),
        compute_objective="eval_accuracy",
        n_trials=8,
        direction="maximize",
        backend="ray",
        address=ray_cluster.address,
        scheduler=ASHAScheduler(grace_period=1, max_t=10, reduction_factor=2),
        search_alg=BasicVariantGenerator(random_state=0),
    )
    result = best.run_summary
    assert result.backend == "ray" and len(result.records) == 8
    states = [r.state for r in result.records]
    assert TrialState.PRUNED in states, states
    assert TrialState.COMPLETE in states, states
    assert TrialState.FAIL not in states
    assert len({r.node for r in result.records}) == 2  # two node ids, both on 127.0.0.1
    assert all(r.node for r in result.records)
    for r in result.records:
        if r.state is TrialState.PRUNED:
            assert r.last_step < 3 * 23 and len(r.intermediates) < 3
        if r.state is TrialState.COMPLETE:
            assert r.last_step == 3 * 23 and [e.step for e in r.intermediates] == [23, 46, 69]
            assert r.objective == r.intermediates[-1].metrics["eval_accuracy"]
    completed = [r for r in result.records if r.state is TrialState.COMPLETE]
    top = max(completed, key=lambda r: r.objective)
    assert best.run_id == top.trial_id and best.objective == top.objective
    assert best.hyperparameters == {"learning_rate": top.params["learning_rate"]}
    assert best.checkpoint is not None and os.path.isfile(os.path.join(best.checkpoint, "model.safetensors"))
    loaded = SearchResult.load(str(tmp_path / "out"))
    assert {r.trial_id: r.state for r in loaded.records} == {r.trial_id: r.state for r in result.records}
    assert result.native is not None  # the ResultGrid


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.ray
def test_dead_worker_is_retried_from_its_checkpoint(ray_cluster, tmp_path):
    marker = str(tmp_path / "died")
    # Two epochs: the worker dies at the last evaluation, after the epoch-1 checkpoint the retry starts from.
    trainer = rc.make_trainer(str(tmp_path / "out"), epochs=2, callbacks=[rc.DieOnceAtSecondEval(marker)])
    best = hyperparameter_search(
        trainer,
        hp_space={"learning_rate": Float(1e-2, 2e-2)},
        compute_objective="eval_accuracy",
        n_trials=1,
        direction="maximize",
        backend="ray",
        address=ray_cluster.address,
        max_failures=1,
    )
    assert os.path.exists(marker)  # the worker did die once
    (record,) = best.run_summary.records
    assert record.state is TrialState.COMPLETE, record.error
    assert record.extra.get("resumed_from") == [f"{record.name}@23"]  # restarted from the epoch-1 checkpoint
    steps = [e.step for e in record.intermediates]
    assert steps == [23, 46]  # step 46 was evaluated after the restart (once), step 23 not repeated
    assert record.last_step == 46


def _grid_search(out: Path, address: str, **kw) -> dict[float, Any]:
    """Two trials one after the other (one at a time), each its record by learning rate."""
    from ray import tune

    best = hyperparameter_search(
        # One epoch: whatever of the first trial leaked into the second would change its first epoch already.
        rc.make_trainer(str(out), epochs=1),
        hp_space={"learning_rate": tune.grid_search([3e-2, 1e-2])},
        compute_objective="eval_accuracy",
        n_trials=1,
        direction="maximize",
        backend="ray",
        address=address,
        max_concurrent_trials=1,
        **kw,
    )
    return {r.params["learning_rate"]: r for r in best.run_summary.records}


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.ray
def test_reused_actors_run_trials_in_one_process_with_the_results_of_fresh_ones(
    ray_cluster, tmp_path, caplog
):
    """reuse_actors (the default): the second trial runs in the first one's process and trains exactly as it does
    in a process of its own: nothing of the first trial (seeds, torch's state, the trainer's) leaks into it. The
    grid of two runs two trials for n_trials=1 (Tune's one sample), and the progress lines and the saved results
    count towards two."""
    caplog.set_level("INFO", logger="hpsearch.progress")
    reused = _grid_search(tmp_path / "reused", ray_cluster.address)
    lines = [r.getMessage().split()[0] for r in caplog.records if r.name == "hpsearch.progress"]
    assert lines == ["[1/2]", "[2/2]"], lines
    saved = SearchResult.load(tmp_path / "reused")
    assert (saved.n_trials, saved.planned_trials) == (1, 2)
    fresh = _grid_search(tmp_path / "fresh", ray_cluster.address, reuse_actors=False)
    for records in (reused, fresh):
        assert all(r.state is TrialState.COMPLETE for r in records.values()), [
            r.error for r in records.values()
        ]
    pids = {lr: r.extra["worker_pid"] for lr, r in reused.items()}
    assert pids[3e-2] == pids[1e-2], pids  # one process ran both
    assert fresh[3e-2].extra["worker_pid"] != fresh[1e-2].extra["worker_pid"]
    for lr in (3e-2, 1e-2):
        assert reused[lr].objective == fresh[lr].objective
        assert [e.metrics["eval_loss"] for e in reused[lr].intermediates] == pytest.approx(
            [e.metrics["eval_loss"] for e in fresh[lr].intermediates], rel=1e-6
        )


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.ray
def test_tune_folders_hold_what_the_options_ask(ray_cluster, tmp_path):
    """Tune's trial folder holds result.json always (a resume reads it), progress.csv and TensorBoard's events only
    with tune_loggers=True, and a copy of each evaluation's checkpoint where the trial hands Tune one: on this
    two-node cluster by default, never with tune_checkpoints=False. The trial's own checkpoints are there either way."""

    def search(out: Path, **kw: Any) -> Any:
        return hyperparameter_search(
            rc.make_trainer(str(out), epochs=2),
            hp_space={"learning_rate": Float(1e-2, 2e-2)},
            compute_objective="eval_accuracy",
            n_trials=1,
            direction="maximize",
            backend="ray",
            address=ray_cluster.address,
            **kw,
        )

    lean = search(tmp_path / "lean", tune_checkpoints=False)
    full = search(tmp_path / "full", tune_loggers=True)
    for out, best, copies, loggers in (
        (tmp_path / "lean", lean, 0, False),
        (tmp_path / "full", full, 2, True),
    ):
        (record,) = best.run_summary.records
        assert record.state is TrialState.COMPLETE, record.error
        assert [e.step for e in record.intermediates] == [23, 46]
        assert best.checkpoint is not None and os.path.isfile(
            os.path.join(best.checkpoint, "model.safetensors")
        )
        assert sorted(os.listdir(out / record.name)).count("checkpoint-46") == 1  # the trial's own
        (trial_dir,) = [p.parent for p in (out / "ray_results" / "hpsearch").glob("*/result.json")]
        files = os.listdir(trial_dir)
        assert len([f for f in files if f.startswith("checkpoint_")]) == copies, files
        assert ("progress.csv" in files) is loggers, files
        assert any(f.startswith("events.out.tfevents") for f in files) is loggers, files


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.ray
def test_without_an_address_a_search_joins_the_ray_that_ray_address_names(ray_cluster, tmp_path):
    """A script run by `ray job submit` has RAY_ADDRESS set and passes no address: the search joins that cluster
    (it failed with Ray's "num_cpus ... must not be provided" when it tried to start a local Ray there)."""
    out = str(tmp_path / "out")
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(rc.ROOT)!r})
        from hpsearch import hyperparameter_search
        from spaces import Float
        from tests.hpsearch import _ray_cluster as rc
        best = hyperparameter_search(rc.make_trainer({out!r}, epochs=1),
                                     hp_space={{"learning_rate": Float(1e-3, 1e-1, log=True)}},
                                     compute_objective="eval_accuracy", n_trials=1, direction="maximize",
                                     backend="ray")
        print("trials", len(best.run_summary.records))
    """)
    env = {**rc.cluster_env(), "RAY_ADDRESS": ray_cluster.address}
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=str(rc.ROOT), capture_output=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    assert "trials 1" in proc.stdout.decode()


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.ray
@pytest.mark.parametrize("tune_reads_results", [True, False], ids=["results-read", "results-unreadable"])
def test_interrupted_experiment_resumes_without_rerunning_finished_trials(
    ray_cluster, tmp_path, monkeypatch, tune_reads_results
):
    out = str(tmp_path / "out")
    log = str(tmp_path / "runs.log")
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(rc.ROOT)!r})
        from hpsearch import hyperparameter_search
        from spaces import Float
        from tests.hpsearch import _ray_cluster as rc
        trainer = rc.make_trainer({out!r}, epochs=2, callbacks=[rc.KillDriverAt({log!r}, 3, os.getpid())])
        hyperparameter_search(trainer, hp_space={{"learning_rate": Float(1e-3, 1e-1, log=True)}},
                              compute_objective="eval_accuracy", n_trials=4, direction="maximize", backend="ray",
                              address={ray_cluster.address!r}, max_concurrent_trials=1)
    """)
    env = rc.cluster_env()
    env["TUNE_GLOBAL_CHECKPOINT_S"] = "0"  # the experiment state is written after every event
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=str(rc.ROOT), capture_output=True, timeout=300
    )
    assert proc.returncode == -9, proc.stderr.decode(errors="replace")[-3000:]
    first_run = Path(log).read_text().split()
    assert len(set(first_run)) == 3
    finished_before = first_run[:2]

    experiment = Path(out) / "ray_results" / "hpsearch"
    torn_run = (
        "9999-12-31_23-59-59"  # a later run, killed while Tune wrote its snapshot (sorts after the first's)
    )
    if tune_reads_results:
        # Tune rewrites a run's experiment state in place and copies its searcher's file by file: the killed run's
        # are empty or cut short. Restored from them, Tune started the experiment over; the run before must be used.
        (experiment / f"experiment_state-{torn_run}.json").write_bytes(b"")
        for searcher in list(experiment.glob("*-state-*.*")):
            data = searcher.read_bytes()
            kind = searcher.name.split("-state-")[0]
            (experiment / f"{kind}-state-{torn_run}{searcher.suffix}").write_bytes(data[: len(data) // 2])
    else:
        # What Tune does when the killed driver left the experiment's files cut short: its analysis fails, and the
        # restored tuner has no results to give (the fault is injected where Tune reads them; Ray runs for real).
        import ray.tune.impl.tuner_internal as tuner_internal

        failed: list[str] = []

        def unreadable(*args: Any, **kwargs: Any) -> Any:
            failed.append("analysis")
            raise ValueError("the experiment's files were cut short")

        monkeypatch.setattr(tuner_internal, "ExperimentAnalysis", unreadable)
        # And a finished trial search.json has but Tune's snapshot does not (saved after Tune's last snapshot): it is
        # listed while the resumed run goes, then left out, as Tune ran another trial in its place.
        import dataclasses

        saved = SearchResult.load(out)
        saved.records.append(dataclasses.replace(saved.records[0], trial_id="orphan0", name="orphan"))
        saved.save(out)
    trainer = rc.make_trainer(out, epochs=2, callbacks=[rc.KillDriverAt(log, 99, 0)])
    best = hyperparameter_search(
        trainer,
        hp_space={"learning_rate": Float(1e-3, 1e-1, log=True)},
        compute_objective="eval_accuracy",
        n_trials=4,
        direction="maximize",
        backend="ray",
        address=ray_cluster.address,
        resume=True,
        max_concurrent_trials=1,
    )
    records = best.run_summary.records
    assert len(records) == 4
    assert all(r.state is TrialState.COMPLETE for r in records), [(r.name, r.state, r.error) for r in records]
    runs = Path(log).read_text().split()
    for name in finished_before:
        assert runs.count(name) == 1  # never re-run
    assert {r.name for r in records} == set(runs)
    if tune_reads_results:
        torn = sorted(p.name for p in experiment.glob(f"*{torn_run}*"))
        assert torn and all(name.endswith(".torn") for name in torn), torn  # set aside, kept
    if not tune_reads_results:
        assert failed  # the restore went through the unreadable-results path
        assert "orphan0" not in {r.trial_id for r in SearchResult.load(out).records}


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.ray
def test_pbt_exploit_restores_weights_from_another_trial(ray_cluster, tmp_path):
    from ray import tune
    from ray.tune.schedulers import PopulationBasedTraining

    trainer = rc.make_trainer(str(tmp_path / "out"), epochs=3)
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=1,
        quantile_fraction=0.5,
        hyperparam_mutations={"learning_rate": tune.loguniform(1e-4, 1e-1)},
    )
    best = hyperparameter_search(
        trainer,
        hp_space={"learning_rate": tune.choice([1e-4, 2e-4, 5e-2, 1e-1])},
        compute_objective="eval_accuracy",
        n_trials=4,
        direction="maximize",
        backend="ray",
        address=ray_cluster.address,
        scheduler=pbt,
    )
    records = best.run_summary.records
    restored = [r for r in records if r.extra.get("restored_from")]
    assert restored, [(r.name, r.extra) for r in records]
    names = {r.name for r in records}
    for r in restored:
        for source in r.extra["restored_from"]:
            donor, step = source.rsplit("@", 1)
            assert donor in names and donor != r.name and int(step) > 0
    assert all(r.state is not TrialState.FAIL for r in records), [(r.name, r.error) for r in records]


# ---------------------------------------------------------------------------------------------- conversion
def test_space_conversion_respects_inclusive_bounds():
    import numpy
    from ray.tune.search.variant_generator import generate_variants

    from hpsearch.backends.ray import RayBackend

    space = SearchSpace(
        {
            "num_train_epochs": Int(1, 2),
            "seed": Int(2, 8, step=2),
            "warmup_steps": Int(1, 7, step=3),
            "learning_rate": Float(1e-3, 1e-1, log=True),
            "weight_decay": Float(0.05, 0.25, step=0.1),
            "optim": Categorical(["adamw_torch", "sgd"]),
            "momentum": Float(0.5, 0.9, when={"optim": "sgd"}),
            "max_grad_norm": 1.0,
        }
    )
    backend = RayBackend.__new__(RayBackend)
    native = backend.convert_space(space)
    rng = numpy.random.default_rng(0)  # Ray draws from numpy, not from `random`
    seen: dict[str, set] = {k: set() for k in space}
    for _ in range(300):
        _, config = next(generate_variants({"config": native}, random_state=rng))
        config = config["config"]
        params = {
            n: config[n]
            for n in space.order
            if n in config
            and space.is_active(
                n, {k: config[k] for k in space.order if k in config and config[k] is not None}
            )
        }
        for name, value in params.items():
            if value is not None:
                seen[name].add(
                    round(value, 6) if isinstance(value, float) and name != "learning_rate" else value
                )
        assert (config["momentum"] is None) == (config["optim"] != "sgd")
    assert seen["num_train_epochs"] == {1, 2}  # Ray's exclusive upper bound handled
    assert seen["seed"] == {2, 4, 6, 8}
    assert seen["warmup_steps"] == {1, 4, 7}
    assert seen["weight_decay"] == {0.05, 0.15, 0.25}
    assert seen["max_grad_norm"] == {1.0}
    assert all(1e-3 <= v <= 1e-1 for v in seen["learning_rate"])


# ---------------------------------------------------------------------------------------------- bad inputs
def test_unknown_kwarg_is_refused(tmp_path):
    trainer = rc.make_trainer(str(tmp_path / "out"))
    with pytest.raises(SearchConfigError, match=r"num_workers.*accepts"):
        hyperparameter_search(trainer, hp_space=_space(), backend="ray", num_workers=2)


def test_scheduler_needs_evaluations(tmp_path):
    from ray.tune.schedulers import ASHAScheduler

    trainer = rc.make_trainer(str(tmp_path / "out"), eval_strategy="no", save_strategy="no")
    with pytest.raises(SearchConfigError, match="eval_strategy='no'"):
        hyperparameter_search(trainer, hp_space=_space(), backend="ray", scheduler=ASHAScheduler())


def test_unreachable_address_fails_fast(tmp_path):
    trainer = rc.make_trainer(str(tmp_path / "out"))
    port = rc._free_port()  # nothing listens there
    with pytest.raises(SearchConfigError, match=f"127.0.0.1:{port}"):
        hyperparameter_search(trainer, hp_space=_space(), backend="ray", address=f"127.0.0.1:{port}")


def test_multi_objective_is_refused(tmp_path):
    trainer = rc.make_trainer(str(tmp_path / "out"))
    with pytest.raises(SearchConfigError, match="one metric"):
        hyperparameter_search(
            trainer,
            hp_space=_space(),
            backend="ray",
            direction=["maximize", "minimize"],
            compute_objective=lambda m: [m["eval_accuracy"], m["eval_loss"]],
        )


def test_bad_kwarg_types_are_named(tmp_path):
    trainer = rc.make_trainer(str(tmp_path / "out"))
    with pytest.raises(SearchConfigError, match="resources_per_trial"):
        hyperparameter_search(trainer, hp_space=_space(), backend="ray", resources_per_trial={"cpu": -1})
    # NaN passed `value < 0` and Tune then waited for ever for "nan CPUs"; nothing at all failed in Tune, late.
    with pytest.raises(SearchConfigError, match=r"resources_per_trial\['cpu'\]=nan: .*finite number"):
        hyperparameter_search(
            trainer, hp_space=_space(), backend="ray", resources_per_trial={"cpu": float("nan")}
        )
    with pytest.raises(SearchConfigError, match=r"resources_per_trial=\{'cpu': 0\} asks for nothing"):
        hyperparameter_search(trainer, hp_space=_space(), backend="ray", resources_per_trial={"cpu": 0})
    with pytest.raises(SearchConfigError, match="scope"):
        hyperparameter_search(trainer, hp_space=_space(), backend="ray", scope="best-ever")
    with pytest.raises(SearchConfigError, match=r"reuse_actors.*'yes'"):
        hyperparameter_search(trainer, hp_space=_space(), backend="ray", reuse_actors="yes")
    with pytest.raises(
        SearchConfigError, match=r"reuse_actors=True with workers_per_trial=2: .*drop reuse_actors"
    ):
        hyperparameter_search(
            trainer, hp_space=_space(), backend="ray", reuse_actors=True, workers_per_trial=2
        )
    for name in ("..", ".", "a/b"):  # the experiment's folder under storage_path
        with pytest.raises(SearchConfigError, match=r"name='.*' must be a non-empty string \(a folder name"):
            hyperparameter_search(trainer, hp_space=_space(), backend="ray", name=name)


def test_a_tune_space_holding_a_spaces_domain_is_refused(tmp_path):
    """A Tune space with a spaces domain in it: the domain object reached every trial, which failed."""
    from ray import tune

    out = tmp_path / "out"
    with pytest.raises(SearchConfigError, match=r"mixes Ray Tune domains with spaces domains \(hidden\)"):
        hyperparameter_search(
            rc.make_trainer(str(out)),
            hp_space={"learning_rate": tune.uniform(0.001, 0.01), "hidden": Categorical([8, 16])},
            n_trials=2,
            backend="ray",
        )
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.ray
def test_a_trial_too_big_for_every_node_of_a_local_ray_is_refused(tmp_path):
    """No node of the Ray the search started can hold {'cpu': 64}: Tune would wait for such a node for ever (nothing
    can add one), so the search stops with the reason and leaves nothing behind."""
    import ray

    assert not ray.is_initialized()  # a Ray this search starts, not a cluster an earlier test joined
    out = tmp_path / "out"
    with pytest.raises(
        SearchConfigError, match=r"resources_per_trial=\{'cpu': 64\}: no node .* has that much .*'CPU'"
    ):
        hyperparameter_search(
            rc.make_trainer(str(out)),
            hp_space=_space(),
            n_trials=1,
            backend="ray",
            resources_per_trial={"cpu": 64},
        )
    assert not ray.is_initialized() and not out.exists()


def test_unpicklable_trainer_piece_is_named(tmp_path):
    import threading

    trainer = rc.make_trainer(str(tmp_path / "out"))
    lock = threading.Lock()
    trainer.compute_metrics = lambda p: (lock, {})[1]
    with pytest.raises(SearchConfigError, match="compute_metrics"):
        hyperparameter_search(trainer, hp_space=_space(), backend="ray")


def _listening_tcp_addresses() -> set[str]:
    """Local addresses of listening TCP sockets in this process's network namespace (from /proc/net)."""
    import ipaddress

    found = set()
    for name, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        with open(name) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                local, state = fields[1], fields[3]
                if state != "0A":  # LISTEN
                    continue
                raw = bytes.fromhex(local.split(":")[0])
                # /proc/net prints each 32-bit word in host (little-endian) order.
                packed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
                found.add(
                    str(ipaddress.ip_address(packed)) if width == 8 else str(ipaddress.IPv6Address(packed))
                )
    return found


def _network_interfaces() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if line.strip()}


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.ray
def test_cluster_is_reachable_only_through_loopback(ray_cluster):
    """Nothing the tests start may listen beyond 127.0.0.1.

    Ray 2.60's gRPC servers bind every interface even with --node-ip-address 127.0.0.1, so `make test` runs the
    suite in a private network namespace (scripts/isolated.sh) whose only interface is loopback. Either every
    listener is on a loopback address, or loopback is the only interface there is.
    """
    listeners = _listening_tcp_addresses()
    assert listeners, "the cluster should be listening"
    exposed = {a for a in listeners if a not in ("127.0.0.1", "::1") and not a.startswith("127.")}
    assert not exposed or _network_interfaces() == {"lo"}, (exposed, _network_interfaces())


@pytest.mark.parametrize("trained", [True, False])
def test_a_trial_restarted_at_its_last_step_sends_only_its_final_result(trained):
    """A trial Tune restarts from a checkpoint at its last step (PBT exploiting a finished donor) trains nothing; a
    result a scheduler can act on would let PBT exploit it again, and restart it again, for ever (the PBT test hung
    that way). Only the final, ``done`` result is sent then; a trial that trained and reported nothing (no
    evaluation strategy) still reports its objective first."""
    from hpsearch.backends.ray._worker import RayReporter, conclude
    from hpsearch.trial import TrialRecord

    sent = []
    reporter = RayReporter({}, send=lambda result, folder: sent.append(result))
    record = TrialRecord(
        trial_id="t",
        name="run-t",
        number=0,
        state=TrialState.COMPLETE,
        params={},
        objective=0.9,
        last_step=69,
    )
    conclude(record, reporter, trained=trained)
    assert [bool(r.get("done")) for r in sent] == ([False, True] if trained else [True])
    assert sent[-1]["objective"] == 0.9 and sent[-1]["step"] == 69


def test_a_restarted_trial_whose_result_files_are_lost_keeps_its_earlier_evaluations(tmp_path):
    """Tune's result files of a trial gone (a driver killed before they reached storage) leave only its last result,
    whose record holds the evaluations of its last attempt; where that attempt restarted from a checkpoint, the
    earlier ones come from search.json, which the killed driver saved. The result below has the shape Tune's
    ``Result`` has when its files are gone (no metrics_dataframe, the last metrics from the experiment state)."""
    import json
    from types import SimpleNamespace

    from hpsearch.backends.ray._driver import Recorder
    from hpsearch.backends.ray._worker import RECORD_KEY
    from hpsearch.session import SearchSession
    from hpsearch.settings import TrialSettings
    from hpsearch.trial import Evaluation, TrialRecord

    out = str(tmp_path / "out")
    settings = TrialSettings(
        trainer=None,
        compute_objective=lambda m: m["eval_loss"],  # type: ignore[arg-type]
        objective_name="eval_loss",
        directions=("minimize",),
        output_dir=out,
        backend="ray",
    )

    def evaluation(step: int) -> Evaluation:
        return Evaluation(step=step, epoch=step / 10, objective=1.0 / step, metrics={"eval_loss": 1.0 / step})

    def trial_record(steps: list[int], started: str) -> TrialRecord:
        from datetime import datetime

        return TrialRecord(
            trial_id="t_00001",
            number=1,
            name="run-t_00001",
            state=TrialState.COMPLETE,
            params={"learning_rate": 0.01},
            objective=1.0 / steps[-1],
            last_step=steps[-1],
            intermediates=[evaluation(s) for s in steps],
            started=datetime.fromisoformat(started),
        )

    # The earlier run's search.json: every evaluation, the restart's merged in.
    SearchResult(
        backend="ray",
        directions=["minimize"],
        records=[trial_record([2, 4, 6], "2026-01-01T00:00:00")],
        n_trials=1,
        output_dir=out,
    ).save(out)
    session = SearchSession(
        settings,
        SearchResult(backend="ray", directions=["minimize"], records=[], n_trials=1, output_dir=out),
        n_trials=1,
    )
    last_attempt = trial_record([6], "2026-01-01T00:05:00")  # restarted from checkpoint-4
    result = SimpleNamespace(
        metrics_dataframe=None,
        path=None,
        config={"learning_rate": 0.01},
        error=None,
        metrics={"objective": 1 / 6, "step": 6, RECORD_KEY: json.dumps(last_attempt.to_dict())},
    )
    recorder = Recorder(settings, session)
    recorder._replay("t_00001", result)
    record = recorder.final_record("t_00001", result.config, None)
    assert [e.step for e in record.intermediates] == [2, 4, 6]
    assert record.objective == pytest.approx(1 / 6)


@pytest.mark.parametrize("trial_folder", [True, False])
def test_a_resumed_trial_takes_its_unseen_attempts_from_its_own_result_file_only(
    tmp_path, monkeypatch, trial_folder
):
    """A trial a rerun resumed from its checkpoint (its first attempt ran under a killed driver) takes that attempt's
    evaluations from the result file in its own folder of Tune's storage; with no folder recorded for it, from no
    other file (a ``result.json`` in the current directory is not the trial's)."""
    import json
    from datetime import datetime

    from hpsearch.backends.ray._driver import Recorder
    from hpsearch.backends.ray._worker import RECORD_KEY
    from hpsearch.session import SearchSession
    from hpsearch.settings import TrialSettings
    from hpsearch.trial import Evaluation, TrialRecord

    out = str(tmp_path / "out")
    settings = TrialSettings(
        trainer=None,
        compute_objective=lambda m: m["eval_loss"],  # type: ignore[arg-type]
        objective_name="eval_loss",
        directions=("minimize",),
        output_dir=out,
        backend="ray",
    )

    def attempt(steps: list[int], started: str, **extra: object) -> TrialRecord:
        return TrialRecord(
            trial_id="t_00001",
            number=1,
            name="run-t_00001",
            state=TrialState.COMPLETE,
            params={"learning_rate": 0.01},
            objective=1.0 / steps[-1],
            last_step=steps[-1],
            intermediates=[
                Evaluation(step=s, epoch=s / 10, objective=1.0 / s, metrics={"eval_loss": 1.0 / s})
                for s in steps
            ],
            started=datetime.fromisoformat(started),
            extra=dict(extra),
        )

    def result_file(folder, record: TrialRecord) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "result.json").write_text(json.dumps({RECORD_KEY: json.dumps(record.to_dict())}) + "\n")

    first = attempt([2, 4], "2026-01-01T00:00:00")
    stray = attempt([1], "2026-01-01T00:00:00")
    result_file(tmp_path / "cwd", stray)
    monkeypatch.chdir(tmp_path / "cwd")
    trial_path = tmp_path / "storage" / "t_00001"
    if trial_folder:
        result_file(trial_path, first)
    session = SearchSession(
        settings,
        SearchResult(backend="ray", directions=["minimize"], records=[], n_trials=1, output_dir=out),
        n_trials=1,
    )
    resumed = attempt([6], "2026-01-01T00:05:00", resumed_from="run-t_00001@4")
    recorder = Recorder(settings, session)
    recorder.result(
        "t_00001",
        {RECORD_KEY: json.dumps(resumed.to_dict()), "step": 6},
        str(trial_path) if trial_folder else None,
    )
    record = recorder.final_record("t_00001", {"learning_rate": 0.01}, None)
    assert [e.step for e in record.intermediates] == ([2, 4, 6] if trial_folder else [6])
