"""`trial_workers`: trials in spawned worker processes, with real processes and real Optuna and SigOpt studies.

A crash of any kind fails its trial only (with the cause) and the worker is replaced; `trial_timeout` kills a trial
its own timer cannot stop; the driver's prune decisions and ``trial.suggest_*`` cross the pipe; bad input is refused
before any trial.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpsearch import hyperparameter_search
from hpsearch.errors import HPSearchError, SearchConfigError
from hpsearch.executor._checks import usable_cores
from hpsearch.trial import TrialReporter
from tests.hpsearch import _worker_trials as wt
from tests.hpsearch._trials import digits_search_trainer

ROOT = Path(__file__).resolve().parents[2]


def _records(output_dir) -> dict[int, dict]:
    data = json.loads((Path(output_dir) / "search.json").read_text())
    return {r["number"]: r for r in data["records"]}


@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_crashing_worker_fails_only_its_trial_and_is_replaced(make_trainer, tiny_space, output_dir):
    best = hyperparameter_search(
        make_trainer(wt.faulty_model_init),
        hp_space=tiny_space,
        n_trials=5,
        backend="random",
        compute_objective=wt.eval_loss,
        direction="minimize",
        trial_workers=2,
        max_failed_trials=10,
    )
    records = _records(output_dir)
    assert [records[n]["state"] for n in range(5)] == ["FAIL"] * 4 + ["COMPLETE"]
    assert "killed by SIGSEGV" in records[0]["error"]
    assert "exited with code 3" in records[1]["error"]
    assert "killed by SIGKILL" in records[2]["error"]
    assert "MemoryError" in records[3]["error"]
    # Every failed trial's worker was replaced by a fresh process.
    pids = [records[n]["extra"]["worker_pid"] for n in range(5)]
    assert len(set(pids)) == 5, pids
    assert all(records[n]["cost"]["device_s"] > 0 for n in range(3))  # the dead workers' trials are charged
    assert best.run_id == "4"


@pytest.mark.slow
@pytest.mark.multiprocess
def test_trial_timeout_kills_a_trial_its_timer_cannot_stop(make_trainer, tiny_space, output_dir):
    hyperparameter_search(
        make_trainer(wt.stuck_model_init),
        hp_space=tiny_space,
        n_trials=3,
        backend="random",
        compute_objective=wt.eval_loss,
        direction="minimize",
        trial_workers=2,
        trial_timeout=10,
        max_failed_trials=10,
    )
    records = _records(output_dir)
    assert records[0]["state"] == "FAIL" and "did not stop when asked" in records[0]["error"]
    assert "killed" in records[0]["error"]
    assert records[1]["state"] == "FAIL" and "TrialTimeout: trial_timeout" in records[1]["error"]
    # 10 s, not 3: a normal trial on a fresh worker of a loaded 2-core machine needs a few seconds.
    for n in (0, 1):  # far from the 60 s they would have slept (benchmarks/trial_workers.py measures 3 s)
        started, finished = (records[n][k] for k in ("started", "finished"))
        from datetime import datetime

        assert (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds() < 30
    assert records[2]["state"] == "COMPLETE"
    assert records[2]["extra"]["worker_pid"] not in {
        records[0]["extra"]["worker_pid"],
        records[1]["extra"]["worker_pid"],
    }


@pytest.mark.slow
@pytest.mark.multiprocess
def test_optuna_prunes_and_suggests_across_the_pipe(make_trainer, tiny_space, output_dir):
    import optuna

    with pytest.raises(HPSearchError, match="'PRUNED': 4"):  # any loss is above 0: every trial pruned at once
        hyperparameter_search(
            make_trainer(wt.suggesting_model_init),
            hp_space=tiny_space,
            n_trials=4,
            backend="optuna",
            compute_objective=wt.eval_loss,
            direction="minimize",
            trial_workers=2,
            pruner=optuna.pruners.ThresholdPruner(upper=0.0),
        )
    records = _records(output_dir)
    assert len(records) == 4
    for record in records.values():
        assert record["state"] == "PRUNED"
        assert (
            record["last_step"] == 2
        )  # the first evaluation (every 2 steps): the driver's answer stopped it
        assert 1 <= record["params"]["extra_width"] <= 4  # suggested by the driver's Optuna trial
        assert record["extra"]["threads"] * 2 <= usable_cores()
    assert {r["extra"]["worker"] for r in records.values()} <= {0, 1}


@pytest.mark.slow
@pytest.mark.multiprocess
def test_sigopt_trial_in_a_worker_that_exits_fails_and_the_search_goes_on(
    make_trainer, tiny_space, output_dir
):
    hyperparameter_search(
        make_trainer(wt.faulty_model_init),
        hp_space=tiny_space,
        n_trials=6,
        backend="sigopt",
        compute_objective=wt.eval_loss,
        direction="minimize",
        trial_workers=1,
        max_failed_trials=10,
    )
    records = _records(output_dir)
    assert "exited with code 3" in records[1]["error"]
    assert [records[n]["state"] for n in (4, 5)] == ["COMPLETE", "COMPLETE"]
    assert records[4]["extra"]["worker_pid"] == records[5]["extra"]["worker_pid"]  # a healthy worker is kept


@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_worker_is_replaced_after_max_trials(make_trainer, tiny_space, output_dir):
    hyperparameter_search(
        make_trainer(),
        hp_space=tiny_space,
        n_trials=4,
        backend="random",
        trial_workers=1,
        trial_worker_max_trials=2,
        compute_objective=wt.eval_loss,
        direction="minimize",
    )
    pids = [r["extra"]["worker_pid"] for _, r in sorted(_records(output_dir).items())]
    assert pids[0] == pids[1] != pids[2] == pids[3]


@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_worker_imports_what_the_first_trial_would_before_it_starts(make_trainer, tiny_space, output_dir):
    """torch's optimizers import torch._dynamo at their first construction; a fresh worker does it at start-up, so its
    first trial's time, cost and trial_timeout do not include it."""
    hyperparameter_search(
        make_trainer(wt.warm_model_init),
        hp_space=tiny_space,
        n_trials=1,
        backend="random",
        trial_workers=1,
        compute_objective=wt.eval_loss,
        direction="minimize",
    )
    record = _records(output_dir)[0]
    assert record["state"] == "COMPLETE", record["error"]


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.skipif(
    "forkserver" not in multiprocessing.get_all_start_methods(), reason="spawn starts every worker"
)
def test_workers_are_forked_from_one_server_and_take_the_drivers_environment_of_the_moment(
    make_trainer, tiny_space, tmp_path, monkeypatch
):
    """Two searches in one process: every worker of both (a replaced one too) is forked from the same server, not
    the driver (torch imported once, not per worker), and sees the environment the driver had when it started."""
    probes = tmp_path / "probes"
    probes.mkdir()
    monkeypatch.setenv("HPSEARCH_TEST_PROBE_DIR", str(probes))
    seen: list[dict] = []
    for value, out in (("first", tmp_path / "a"), ("second", tmp_path / "b")):
        monkeypatch.setenv("HPSEARCH_TEST_PROBE", value)
        trainer = digits_search_trainer(str(out), wt.probing_model_init)
        hyperparameter_search(
            trainer,
            hp_space=tiny_space,
            n_trials=3,
            backend="random",
            trial_workers=1,
            trial_worker_max_trials=2,
            compute_objective=wt.eval_loss,
            direction="minimize",
        )
        runs = [json.loads(f.read_text()) for f in sorted(probes.glob("*.json"))]
        for f in probes.glob("*.json"):
            f.unlink()
        assert [r["probe"] for r in runs] == [value] * 3
        assert len({r["pid"] for r in runs}) == 2  # the worker was replaced after 2 trials
        seen += runs
    servers = {r["ppid"] for r in seen}
    assert len(servers) == 1 and os.getpid() not in servers, seen
    assert "forkserver" in _cmdline(servers.pop())


_PRELOAD_DRIVER = """
import os, sys
sys.path.insert(0, {root!r})
import tests.hpsearch._imported_by  # imported by this script alone, not by the trial's code
from hpsearch import hyperparameter_search
from tests.hpsearch._trials import digits_search_trainer
from tests.hpsearch import _worker_trials as wt
from spaces import SearchSpace, Float, Categorical

with open(os.path.join({probes!r}, f"main-{{os.getpid()}}.txt"), "w") as f:
    f.write(__name__)

if __name__ == "__main__":
    space = SearchSpace({{"learning_rate": Float(1e-3, 1e-1, log=True), "hidden": Categorical([8, 16])}})
    trainer = digits_search_trainer({out!r}, wt.probing_model_init)
    hyperparameter_search(trainer, hp_space=space, n_trials=1, backend="random", compute_objective=wt.eval_loss,
                          direction="minimize", trial_workers=1)
"""


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.skipif(
    "forkserver" not in multiprocessing.get_all_start_methods(), reason="spawn starts every worker"
)
def test_the_forkserver_preloads_the_searchs_modules_and_never_runs_the_main_script(tmp_path):
    """In a fresh driver, the server imports what the pickled settings name (model_init's module) and what the main
    script imports, so that its workers find them loaded; the script itself runs in the driver and, as
    ``__mp_main__``, in the worker, never in the server."""
    probes = tmp_path / "probes"
    probes.mkdir()
    script = tmp_path / "driver.py"
    script.write_text(_PRELOAD_DRIVER.format(root=str(ROOT), probes=str(probes), out=str(tmp_path / "out")))
    env = {**os.environ, "HPSEARCH_TEST_PROBE_DIR": str(probes)}
    driver = subprocess.Popen(
        [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    output, _ = driver.communicate(timeout=300)
    assert driver.returncode == 0, output
    (run,) = [json.loads(f.read_text()) for f in probes.glob("*.json")]
    server = run["ppid"]
    assert server not in (driver.pid, run["pid"])
    assert run["this_module_loaded_by"] == server, run
    assert run["marker_loaded_by"] == server, run
    mains = {int(f.stem.split("-")[1]): f.read_text() for f in probes.glob("main-*.txt")}
    assert mains == {driver.pid: "__main__", run["pid"]: "__mp_main__"}


# ---------------------------------------------------------------------------------------------- no orphans
_DRIVER = """
import os, sys
sys.path.insert(0, {root!r})
from hpsearch import hyperparameter_search
from tests.hpsearch._trials import digits_search_trainer
from tests.hpsearch import _worker_trials as wt
from spaces import SearchSpace, Float, Categorical

if __name__ == "__main__":
    space = SearchSpace({{"learning_rate": Float(1e-3, 1e-1, log=True), "hidden": Categorical([8, 16])}})
    trainer = digits_search_trainer({out!r}, wt.sleepy_model_init)
    hyperparameter_search(trainer, hp_space=space, n_trials=4, backend="optuna", compute_objective=wt.eval_loss,
                          direction="minimize", trial_workers=2, storage={storage!r}, study_name="w",
                          load_if_exists=True)
"""


def _children(pid: int) -> set[int]:
    out = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.add(int(entry))
    return out


def _workers(driver: int) -> set[int]:
    """The driver's worker processes and the forkserver they are forked from (every descendant but multiprocessing's
    resource tracker, which ends once its last holder has)."""
    found, todo = set(), [driver]
    while todo:
        for child in _children(todo.pop()):
            found.add(child)
            todo.append(child)
    return {p for p in found if "resource_tracker" not in _cmdline(p)}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""


def _started_trials(out: Path) -> int:
    try:
        return (out / "events.jsonl").read_text().count('"trial_start"')
    except OSError:
        return 0


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_killed_driver_leaves_no_worker_and_a_rerun_finishes_the_study(tmp_path):
    import optuna

    out, storage = tmp_path / "out", f"sqlite:///{tmp_path / 'study.db'}"
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER.format(root=str(ROOT), out=str(out), storage=storage))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HPSEARCH_TEST_TRIAL_SLEEP": "120"}
    driver = subprocess.Popen(
        [sys.executable, str(script)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 300
        workers: set[int] = set()
        while time.monotonic() < deadline and driver.poll() is None:
            # Worker processes and their forkserver, once both workers run a trial (written by the trial itself, in
            # its worker, to the event log).
            workers = _workers(driver.pid)
            if len(workers) >= 3 and _started_trials(out) >= 2:
                break
            time.sleep(0.5)
        assert len(workers) >= 3 and driver.poll() is None, "the driver did not start 2 trials in workers"
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(map(_alive, workers)):
            time.sleep(0.2)
        assert not any(map(_alive, workers)), f"orphan workers: {[p for p in workers if _alive(p)]}"
    finally:
        if driver.poll() is None:
            driver.kill()
    rerun = subprocess.run(
        [sys.executable, str(script)],
        env={**env, "HPSEARCH_TEST_TRIAL_SLEEP": "0"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    study = optuna.load_study(study_name="w", storage=storage)
    finished = [
        t
        for t in study.trials
        if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    ]
    assert len(finished) == 4  # exactly n_trials finished
    saved = {r["trial_id"]: r["state"] for r in json.loads((out / "search.json").read_text())["records"]}
    for t in finished:  # search.json agrees with the study
        assert saved[str(t.number)] == t.state.name


# ---------------------------------------------------------------------------------------------- bad input
def test_more_workers_than_cores_is_refused(make_trainer, tiny_space):
    cores = usable_cores()
    with pytest.raises(
        SearchConfigError, match=rf"trial_workers={cores + 1} is more than the {cores} CPU core"
    ):
        hyperparameter_search(
            make_trainer(), hp_space=tiny_space, n_trials=1, backend="random", trial_workers=cores + 1
        )


def test_a_model_init_that_cannot_be_pickled_is_named_before_any_trial(make_trainer, tiny_space, output_dir):
    trainer = make_trainer(lambda trial: wt.digits_model_init(trial))
    with pytest.raises(SearchConfigError, match=r"trainer\.model_init .*cannot be pickled.*module level"):
        hyperparameter_search(trainer, hp_space=tiny_space, n_trials=1, backend="random", trial_workers=1)
    assert not (output_dir / "search.json").exists()


def test_ray_with_trial_workers_is_refused_naming_resources_per_trial(make_trainer, tiny_space):
    with pytest.raises(
        SearchConfigError, match=r"trial_workers=2 cannot be used with backend='ray'.*resources_per_trial"
    ):
        hyperparameter_search(make_trainer(), hp_space=tiny_space, n_trials=1, backend="ray", trial_workers=2)


def test_accelerate_launch_with_trial_workers_is_refused(make_trainer, tiny_space, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(
        SearchConfigError, match=r"trial_workers=1 cannot be combined with a search under accelerate"
    ):
        hyperparameter_search(
            make_trainer(), hp_space=tiny_space, n_trials=1, backend="random", trial_workers=1
        )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"trial_workers": 0},
            r"trial_workers=0 must be an integer >= 1 .*pass e\.g\. trial_workers=2, or None",
        ),
        ({"trial_workers": True}, r"trial_workers=True \(bool\) must be an integer >= 1"),
        ({"trial_worker_max_trials": 2}, r"trial_worker_max_trials=2 .* trial_workers is not set"),
        ({"trial_workers": 1, "backend": "optuna", "n_jobs": 2}, r"n_jobs=2 and trial_workers=1 both set"),
        (
            {"trial_workers": 2, "backend": "sigopt"},
            r"trial_workers=2: the lite driver suggests one trial at a time",
        ),
    ],
)
def test_bad_worker_options_are_refused(make_trainer, tiny_space, kwargs, message):
    kwargs = {"backend": "random", **kwargs}
    with pytest.raises(SearchConfigError, match=message):
        hyperparameter_search(make_trainer(), hp_space=tiny_space, n_trials=1, **kwargs)


@pytest.mark.slow
@pytest.mark.multiprocess
def test_the_cli_flag_runs_the_sweep_in_workers(tmp_path, capsys, monkeypatch):
    from hpsearch.cli import main
    from tests.hpsearch.test_cli import TINY

    monkeypatch.chdir(ROOT)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(TINY)
    assert main(["run", str(sweep), "--output-dir", str(tmp_path / "out"), "--trial-workers", "0"]) == 2
    assert "trial_workers=0 must be an integer >= 1" in capsys.readouterr().err
    assert main(["run", str(sweep), "--output-dir", str(tmp_path / "out"), "--trial-workers", "1"]) == 0
    records = _records(tmp_path / "out")
    assert len(records) == 2 and all("worker_pid" in r["extra"] for r in records.values())


def test_settings_of_a_search_pickle_for_the_workers(make_trainer):
    trainer = make_trainer()
    assert pickle.loads(pickle.dumps(trainer.recipe())).model_init is not None


def test_a_metric_name_objective_pickles_for_the_workers():
    from hpsearch.objective import resolve_compute_objective

    objective, name = resolve_compute_objective("accuracy")
    copy = pickle.loads(pickle.dumps(objective))
    assert name == "accuracy" and copy({"eval_accuracy": 0.5}) == 0.5


def _pool_settings(trainer, tmp_path):
    """The settings of a `WorkerPool` driven directly: ``trainer``'s trials, minimising eval_loss, in tmp_path."""
    from hpsearch.settings import TrialSettings

    return TrialSettings(
        trainer=trainer.recipe(),
        compute_objective=wt.eval_loss,
        objective_name="eval_loss",
        directions=("minimize",),
        output_dir=str(tmp_path),
        backend="random",
    )


@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_worker_that_died_while_idle_fails_the_next_trial_and_is_replaced(make_trainer, tmp_path):
    from hpsearch.executor import WorkerPool
    from hpsearch.trial import NullReporter, Trial

    settings = _pool_settings(make_trainer(), tmp_path)
    pool = WorkerPool(settings, 1)
    try:

        def trial(n: int) -> Trial:
            return Trial(str(n), n, {"hidden": 8}, "random")

        first = pool.run(trial(0), NullReporter())
        assert first.state.value == "COMPLETE"
        pid = first.extra["worker_pid"]
        os.kill(pid, signal.SIGKILL)  # while idle: the OOM killer does not wait for a trial
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        second = pool.run(trial(1), NullReporter())
        assert second.state.value == "FAIL"
        # Refused by its closed pipe ("died before the trial started"), or sent into the pipe just before it closed.
        assert "killed by SIGKILL" in second.error and "worker process died" in second.error
        third = pool.run(trial(2), NullReporter())
        assert third.state.value == "COMPLETE" and third.extra["worker_pid"] != pid
    finally:
        pool.close()


class _KillsTheWorkerBeforeAnswering(TrialReporter):
    """At the trial's first evaluation, SIGKILLs the pool's worker and waits until it is gone: the driver's reply
    then goes into a closed pipe."""

    def __init__(self, pool) -> None:
        self.pool = pool

    def report(self, objective, step, metrics, checkpoint) -> bool:
        (worker,) = self.pool._live
        worker.process.kill()
        worker.process.join(10)
        return False


@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_worker_that_dies_while_the_driver_answers_it_fails_its_trial_and_is_replaced(
    make_trainer, tmp_path
):
    """A worker killed between sending an evaluation and reading the driver's answer: the answer meets a closed
    pipe (BrokenPipeError), which fails that trial with the cause; it used to escape and stop the whole search
    (seen in the randomised worker-kill test)."""
    from hpsearch.executor import WorkerPool
    from hpsearch.trial import Trial

    settings = _pool_settings(make_trainer(), tmp_path)
    pool = WorkerPool(settings, 1)
    try:
        killed = pool.run(Trial("0", 0, {"hidden": 8}, "random"), _KillsTheWorkerBeforeAnswering(pool))
        assert killed.state.value == "FAIL"
        assert "worker process died" in killed.error and "killed by SIGKILL" in killed.error
        assert killed.intermediates  # the evaluation it sent before it died is kept
        after = pool.run(Trial("1", 1, {"hidden": 8}, "random"), TrialReporter())
        assert after.state.value == "COMPLETE"
    finally:
        pool.close()


@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_trial_out_of_cuda_memory_trains_again_alone_on_its_gpu(make_trainer, tmp_path):
    """Two workers given one GPU id (there is no GPU here: the pool's decisions are the same, CUDA_VISIBLE_DEVICES
    names a device the workers never use). Trial 0 raises CUDA's OutOfMemoryError: it is trained again once, alone
    on the device, in a fresh worker, and recorded once, COMPLETE, with the first error kept."""
    from concurrent.futures import ThreadPoolExecutor

    from hpsearch.executor import WorkerPool
    from hpsearch.trial import NullReporter, Trial

    settings = _pool_settings(make_trainer(wt.OomOnce(str(tmp_path / "oom"))), tmp_path)
    pool = WorkerPool(settings, 2, devices=["0", "0"])
    try:
        with ThreadPoolExecutor(2) as threads:
            records = list(
                threads.map(
                    lambda n: pool.run(Trial(str(n), n, {"hidden": 8}, "random"), NullReporter()), [0, 1]
                )
            )
    finally:
        pool.close()
    first, second = records
    assert (tmp_path / "oom").exists()
    assert first.state.value == "COMPLETE" and second.state.value == "COMPLETE", (first.error, second.error)
    retry = first.extra["oom_retry"]
    assert "OutOfMemoryError" in retry["error"] and retry["device_id"] == "0"
    assert first.extra["device_id"] == "0" and first.extra["co_tenants"] == 0  # it had the device to itself
    # No peak is measured without a GPU, so nothing was packed: each trial ran alone on the device.
    assert second.extra["co_tenants"] == 0 and retry["co_tenants"] == 0
    assert retry["worker_pid"] != first.extra["worker_pid"]  # the worker that ran out was replaced
    # It ran alone and there is no other GPU: training it alone with the same batch would run out again, so the
    # retry trains it with a smaller micro-batch (which this model did not need).
    assert first.extra["oom_smaller_batch"] is True and "oom_retry_alone" not in first.extra
    # Each had the device to itself: charged its whole time (a shared GPU is charged by share: see test_cost).
    assert "device_share" not in first.extra and "device_share" not in second.extra
    assert first.cost["device_s"] > 0 and second.cost["device_s"] > 0


@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_trial_out_of_cuda_memory_alone_on_the_only_gpu_trains_with_a_smaller_micro_batch(
    make_trainer, tmp_path
):
    """One worker on one GPU id (no GPU here, as above); the model raises CUDA's OutOfMemoryError for a training
    batch over 8. The trial (batch 64) fails, then trains again with auto_find_batch_size, which halves the batch to
    8: COMPLETE, its record says so, and its parameters are the engine's."""
    from hpsearch.executor import WorkerPool
    from hpsearch.trial import NullReporter, Trial

    trainer = make_trainer(wt.oom_above_8_model_init)
    assert trainer.args.per_device_train_batch_size == 64
    settings = _pool_settings(trainer, tmp_path)
    pool = WorkerPool(settings, 1, devices=["0"])
    try:
        record = pool.run(Trial("0", 0, {"hidden": 8}, "random"), NullReporter())
    finally:
        pool.close()
    assert record.state.value == "COMPLETE", record.error
    assert record.extra["oom_smaller_batch"] is True
    assert record.extra["per_device_train_batch_size"] == wt.OOM_ABOVE
    assert "OutOfMemoryError" in record.extra["oom_retry"]["error"] and "oom_retry_alone" not in record.extra
    assert record.params == {"hidden": 8}


_UNGUARDED = """
import sys
sys.path.insert(0, {root!r})
from hpsearch import hyperparameter_search
from tests.hpsearch._trials import digits_search_trainer
from tests.hpsearch import _worker_trials as wt
from spaces import SearchSpace, Float

# No `if __name__ == "__main__":`: each spawned worker imports this file again and starts the search in itself.
space = SearchSpace({{"learning_rate": Float(1e-3, 1e-1, log=True)}})
hyperparameter_search(digits_search_trainer({out!r}, wt.sleepy_model_init), hp_space=space, n_trials=2,
                      backend="optuna", compute_objective=wt.eval_loss, direction="minimize", trial_workers=1)
"""


@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_script_without_a_main_guard_fails_at_once_saying_why(tmp_path):
    """Its worker cannot start a worker of its own (spawn refuses while the main module is imported): that used to
    leave the worker's search waiting for ever and the driver for the 300 s start-up timeout."""
    script = tmp_path / "unguarded.py"
    script.write_text(_UNGUARDED.format(root=str(ROOT), out=str(tmp_path / "out")))
    proc = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode != 0
    assert "a trial worker process could not be started: RuntimeError" in proc.stderr, proc.stderr[-3000:]
    assert 'if __name__ == "__main__":' in proc.stderr.splitlines()[-1], proc.stderr[-3000:]


# ---------------------------------------------------------------------------------------------- the server's preload
@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_the_modules_a_pickle_loads_are_read_from_it_at_every_protocol(protocol):
    import collections
    import datetime
    import fractions

    from hpsearch.executor import _preload

    # Two classes of one module: from protocol 4 on, the second names "datetime" through the pickle's memo.
    value = [
        datetime.date(2026, 1, 1),
        datetime.timedelta(1),
        fractions.Fraction(1, 3),
        collections.Counter("ab"),
    ]
    blob = pickle.dumps(value, protocol=protocol)
    assert {"datetime", "fractions", "collections"} <= set(_preload._pickled_modules(blob))
    # A pickle cut short (or one this reader does not follow) gives what was found before the cut.
    assert "datetime" in _preload._pickled_modules(blob[: len(blob) // 2 + 8])


def test_the_preload_names_loaded_modules_the_main_script_imports_outside_its_main_guard(
    tmp_path, monkeypatch
):
    import types

    from hpsearch.executor import _preload

    script = tmp_path / "script.py"
    script.write_text(
        "import json, email.mime.text\n"
        "from urllib import parse\n"
        "try:\n    import colorsys\nexcept ImportError:\n    colorsys = None\n"
        "import hpsearch_no_such_module_xyz\n"
        "def f():\n    import wave\n"
        'if __name__ == "__main__":\n    import xml.dom.minidom\n',
        encoding="utf-8",
    )
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", main)
    import colorsys  # noqa: F401 (loaded here, as the script's own import would)
    import email.mime.text  # noqa: F401
    import urllib.parse  # noqa: F401
    import xml.dom.minidom  # noqa: F401

    names = _preload.modules_to_preload(pickle.dumps(None))
    assert {"json", "email.mime.text", "urllib", "urllib.parse", "colorsys"} <= set(names)
    # Not loaded here (never imported, or failed), only in a function, or only under the main guard:
    assert not {"hpsearch_no_such_module_xyz", "wave", "xml.dom.minidom", "__main__"} & set(names)


def test_a_module_that_fails_in_the_servers_preload_is_skipped(tmp_path, monkeypatch):
    from hpsearch.executor import _preload, _server_imports

    (tmp_path / "hpsearch_test_raises_at_import.py").write_text("raise RuntimeError('no')\n")
    (tmp_path / "hpsearch_test_exits_at_import.py").write_text("raise SystemExit(3)\n")
    (tmp_path / "hpsearch_test_imports_fine.py").write_text("OK = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    names = ["hpsearch_test_raises_at_import", "hpsearch_test_exits_at_import", "hpsearch_test_imports_fine"]
    for name in names:
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setenv(_preload.VARIABLE, ",".join(["hpsearch_no_such_module_xyz", *names]))
    _server_imports.import_listed()
    assert sys.modules["hpsearch_test_imports_fine"].OK
    assert _preload.VARIABLE not in os.environ  # read once: not passed on to the workers
    for name in names:
        sys.modules.pop(name, None)
