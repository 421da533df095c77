"""The ``hpsearch`` command: the example sweep end to end, config errors with key and line, reports."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from hpsearch import SearchResult
from hpsearch.cli import main
from hpsearch.trial import Evaluation, TrialRecord, TrialState

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "digits" / "sweep.yaml"

# A small sweep of the example model: two epochs of a quarter of the steps, so each trial takes well under a second.
TINY = """\
model: examples.digits.model:model_init
data: examples.digits.model:datasets
metrics: examples.digits.model:compute_metrics
objective: eval_accuracy
direction: maximize
n_trials: 2
torch_threads: 1
training_args:
  num_train_epochs: 1
  max_steps: 6
  per_device_train_batch_size: 64
  eval_strategy: steps
  eval_steps: 3
  save_strategy: "no"
  report_to: none
space:
  learning_rate: {type: float, low: 1.0e-3, high: 1.0e-1, log: true}
  hidden: {type: categorical, choices: [8, 16]}
backend: optuna
backend_options:
  sampler: {name: TPESampler, seed: 0}
"""


@pytest.fixture(autouse=True)
def _keep_torch_threads():
    """`torch_threads: 1` in a sweep file sets a process-wide switch; give the next test what it had."""
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _run_from_root(monkeypatch):
    """Import paths in sweep files resolve against the current directory, as they would for a user."""
    monkeypatch.chdir(ROOT)


def write(tmp_path: Path, text: str, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def line_of(path: Path, needle: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


def run_error(capsys, path: Path, *extra: str) -> str:
    code = main(["run", str(path), *extra])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    return err


# ---------------------------------------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def example_run(tmp_path_factory):
    """`hpsearch run examples/digits/sweep.yaml --n-trials 3` (two epochs) into a temporary folder, once."""
    import torch

    out = tmp_path_factory.mktemp("example") / "out"
    threads = torch.get_num_threads()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        code = main(
            [
                "run",
                str(EXAMPLE),
                "--n-trials",
                "3",
                "--output-dir",
                str(out),
                "--set",
                "training_args.num_train_epochs=2",
            ]
        )
    finally:
        os.chdir(cwd)
        torch.set_num_threads(threads)
    return code, out


def test_run_example_config_end_to_end(example_run):
    code, out = example_run
    assert code == 0
    for name in ("search.json", "trials.csv", "intermediates.csv", "report.html", "study.db"):
        assert (out / name).is_file(), name
    result = SearchResult.load(out)
    frame = result.trials_dataframe()
    assert len(frame) == 3
    assert set(frame["state"]) <= {"COMPLETE", "PRUNED"}
    assert result.backend == "optuna"
    assert result.objective == "eval_accuracy"
    assert result.directions == ["maximize"]
    assert result.settings["sampler"] == "TPESampler"
    assert result.settings["pruner"] == "HyperbandPruner"
    assert {"params_learning_rate", "params_hidden", "params_layers", "params_dropout"} <= set(frame.columns)
    # Evaluated once per epoch.
    assert (result.intermediates_dataframe()["step"] % 23 == 0).all()
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Optimization history" in html and "run-2" in html


def test_run_prints_best_trial_and_report_path(capsys, tmp_path):
    path = write(tmp_path, TINY)
    out = tmp_path / "out"
    assert main(["run", str(path), "--output-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Best trial: run-" in printed
    assert "eval_accuracy = " in printed
    assert f"Report: {out / 'report.html'}" in printed
    assert "learning_rate:" in printed
    assert len(SearchResult.load(out).records) == 2


def test_output_dir_in_the_file_is_relative_to_the_file(tmp_path, monkeypatch):
    sub = tmp_path / "sweeps"
    sub.mkdir()
    path = write(sub, TINY + "output_dir: results\n")
    assert main(["run", str(path), "--n-trials", "1"]) == 0
    assert (sub / "results" / "search.json").is_file()


@pytest.mark.slow
def test_resume_continues_the_study(tmp_path, capsys):
    text = TINY + "  storage: sqlite:///{output_dir}/study.db\n"
    path = write(tmp_path, text)
    out = tmp_path / "out"
    assert main(["run", str(path), "--n-trials", "1", "--output-dir", str(out)]) == 0
    first = SearchResult.load(out).records[0]
    assert main(["run", str(path), "--n-trials", "3", "--output-dir", str(out), "--resume"]) == 0
    err = capsys.readouterr().err
    # The CLI names no engine: the note speaks of "the earlier run", whatever the backend calls it.
    assert "Resuming the earlier run of this sweep (1 trials so far); sampler seed 1" in err
    records = SearchResult.load(out).records
    assert sorted(r.number for r in records) == [0, 1, 2]
    # The reseeded sampler does not replay trial 0's values.
    assert all(r.params != first.params for r in records if r.number != 0)
    # Without --resume nothing finished is deleted: the run is refused, naming --resume and --fresh...
    assert main(["run", str(path), "--n-trials", "1", "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert "has 3 trials" in err and "nothing was deleted" in err and "--resume" in err and "--fresh" in err
    assert len(SearchResult.load(out).records) == 3
    # ...and --fresh starts over, saying so.
    assert main(["run", str(path), "--n-trials", "1", "--output-dir", str(out), "--fresh"]) == 0
    assert "Deleted the earlier run of this sweep (3 trials)" in capsys.readouterr().err
    assert len(SearchResult.load(out).records) == 1


# ---------------------------------------------------------------------------------------------- config errors
def test_set_overrides_and_its_errors(tmp_path, capsys):
    path = write(tmp_path, TINY)
    err = run_error(capsys, path, "--set", "n_trials=0")
    assert (
        "n_trials: n_trials=0 must be an integer >= 1 (how many trials to run); pass e.g. n_trials=10. (set by --set n_trials=...)"
        in err
    )
    err = run_error(capsys, path, "--set", "n_trials")
    assert "expected KEY=VALUE" in err
    out = tmp_path / "out"
    assert (
        main(
            [
                "run",
                str(path),
                "--output-dir",
                str(out),
                "--set",
                "n_trials=1",
                "--set",
                "space.hidden={type: categorical, choices: [4]}",
            ]
        )
        == 0
    )
    (record,) = SearchResult.load(out).records
    assert record.params["hidden"] == 4


def test_missing_required_key(tmp_path, capsys):
    path = write(tmp_path, TINY.replace("model: examples.digits.model:model_init\n", ""))
    err = run_error(capsys, path)
    assert f"{path}:1:" in err
    assert "required key 'model'" in err
    assert "model: examples.digits.model:model_init" in err  # the fix, as an example line


def test_bad_type_names_key_and_line(tmp_path, capsys):
    path = write(tmp_path, TINY.replace("n_trials: 2", "n_trials: three"))
    err = run_error(capsys, path)
    assert (
        f"{path}:{line_of(path, 'n_trials')}: n_trials: n_trials='three' (str) must be an integer >= 1" in err
    )


def test_bad_training_argument_value(tmp_path, capsys):
    path = write(tmp_path, TINY.replace("  max_steps: 6\n", "  max_steps: 6\n  learning_rate: fast\n"))
    err = run_error(capsys, path)
    assert f"{path}:{line_of(path, 'learning_rate: fast')}: training_args.learning_rate:" in err
    assert "must be a number" in err


def test_unknown_training_argument_suggests_the_field(tmp_path, capsys):
    path = write(tmp_path, TINY.replace("  max_steps: 6\n", "  max_step: 6\n"))
    err = run_error(capsys, path)
    assert f"{path}:{line_of(path, 'max_step:')}: training_args.max_step:" in err
    assert "did you mean 'max_steps'?" in err


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("no_such_module_xyz:build", "module 'no_such_module_xyz' is not importable"),
        ("examples.digits.model:modle_init", "did you mean examples.digits.model:model_init?"),
        ("examples.digits.model", "expected an import path 'module:function'"),
    ],
)
def test_bad_import_path(tmp_path, capsys, value, expected):
    path = write(tmp_path, TINY.replace("model: examples.digits.model:model_init", f"model: {value}"))
    err = run_error(capsys, path)
    assert f"{path}:{line_of(path, 'model:')}: model:" in err
    assert expected in err


def test_unknown_backend(tmp_path, capsys):
    path = write(tmp_path, TINY.replace("backend: optuna", "backend: hyperopt"))
    err = run_error(capsys, path)
    assert f"{path}:{line_of(path, 'backend: hyperopt')}: backend: unknown backend 'hyperopt'" in err
    assert "optuna, ray, sigopt" in err


def test_unknown_backend_option_and_class(tmp_path, capsys):
    path = write(tmp_path, TINY + "  prunr: {name: MedianPruner}\n")
    err = run_error(capsys, path)
    assert f"{path}:{line_of(path, 'prunr')}: backend_options.prunr:" in err
    assert "did you mean 'pruner'?" in err

    path = write(tmp_path, TINY.replace("name: TPESampler", "name: TPESamplr"), "sampler.yaml")
    err = run_error(capsys, path)
    assert f"{path}:{line_of(path, 'TPESamplr')}: backend_options.sampler.name:" in err
    assert "did you mean 'TPESampler'?" in err


def test_bad_space_domain(tmp_path, capsys):
    path = write(
        tmp_path, TINY.replace("hidden: {type: categorical, choices: [8, 16]}", "hidden: {type: int, low: 9}")
    )
    err = run_error(capsys, path)
    assert f"{path}:{line_of(path, 'hidden:')}: space.hidden:" in err
    assert "'high'" in err


def test_error_found_by_the_search_points_at_its_key(tmp_path, capsys):
    # A pruner without evaluations is only detected by hyperparameter_search itself.
    text = TINY.replace("  eval_strategy: steps\n  eval_steps: 3\n", "") + "  pruner: {name: MedianPruner}\n"
    path = write(tmp_path, text)
    err = run_error(capsys, path, "--output-dir", str(tmp_path / "out"))
    assert f"{path}:{line_of(path, 'pruner:')}: backend_options.pruner:" in err
    assert "eval_strategy='epoch'" in err


def test_invalid_yaml_gives_its_line(tmp_path, capsys):
    path = write(tmp_path, TINY.replace("direction: maximize", "direction: [maximize"))
    err = run_error(capsys, path)
    assert f"{path}:" in err and "invalid YAML" in err


def test_missing_sweep_file(tmp_path, capsys):
    err = run_error(capsys, tmp_path / "nope.yaml")
    assert "no such sweep file" in err


def test_resume_continues_a_random_sweep_with_the_parameters_a_whole_run_draws(tmp_path, capsys):
    path = write(
        tmp_path,
        TINY.replace(
            "backend: optuna\nbackend_options:\n  sampler: {name: TPESampler, seed: 0}\n",
            "backend: random\nbackend_options: {seed: 3}\n",
        ),
    )
    out, whole = tmp_path / "out", tmp_path / "whole"
    assert main(["run", str(path), "--n-trials", "1", "--output-dir", str(out)]) == 0
    first = SearchResult.load(out).records[0]
    assert main(["run", str(path), "--n-trials", "3", "--output-dir", str(out), "--resume"]) == 0
    assert main(["run", str(path), "--n-trials", "3", "--output-dir", str(whole)]) == 0
    resumed, expected = SearchResult.load(out).records, SearchResult.load(whole).records
    assert [r.number for r in resumed] == [0, 1, 2]
    assert resumed[0].to_dict() == first.to_dict()  # kept as it was, not trained again
    assert [r.params for r in resumed] == [r.params for r in expected]


@pytest.mark.slow
def test_resume_continues_a_sigopt_sweep(tmp_path, capsys):
    path = write(
        tmp_path,
        TINY.replace(
            "backend: optuna\nbackend_options:\n  sampler: {name: TPESampler, seed: 0}\n", "backend: sigopt\n"
        ),
    )
    out = tmp_path / "out"
    assert main(["run", str(path), "--n-trials", "1", "--output-dir", str(out)]) == 0
    first = SearchResult.load(out).records[0]
    assert main(["run", str(path), "--n-trials", "3", "--output-dir", str(out), "--resume"]) == 0
    result = SearchResult.load(out)
    assert result.settings["resume"] is True and result.settings["resumed_trials"] == 1
    assert sorted(r.number for r in result.records) == [0, 1, 2]
    # Kept as it was, but for SigOpt's best mark, which is the new experiment's view.
    kept, earlier = result.records[0].to_dict(), first.to_dict()
    for record in (kept, earlier):
        record["extra"].pop("sigopt_best", None)
    assert kept == earlier
    assert len({r.trial_id for r in result.records}) == 3


@pytest.mark.slow
def test_rerun_of_a_sweep_recorded_only_in_its_folder_is_refused_until_resume_or_fresh(tmp_path, capsys):
    """Backends without a store of their own (random, SigOpt's lite driver): the folder's search.json is the earlier
    run, and a plain rerun must not replace it."""
    for backend, can_resume in (("random", True), ("sigopt", True)):
        path = write(
            tmp_path,
            TINY.replace(
                "backend: optuna\nbackend_options:\n  sampler: {name: TPESampler, seed: 0}\n",
                f"backend: {backend}\n",
            ),
        )
        out = tmp_path / f"out-{backend}"
        assert main(["run", str(path), "--n-trials", "1", "--output-dir", str(out)]) == 0
        capsys.readouterr()
        before = (out / "search.json").read_text()
        (trial,) = SearchResult.load(out).records
        err = run_error(capsys, path, "--n-trials", "1", "--output-dir", str(out))
        assert (
            f"an earlier run of this sweep has 1 trials in {out / 'search.json'}; nothing was deleted" in err
        )
        assert ("--resume" in err) is can_resume and "--fresh" in err
        assert (out / "search.json").read_text() == before  # untouched
        assert main(["run", str(path), "--n-trials", "1", "--output-dir", str(out), "--fresh"]) == 0
        assert "Deleted the earlier run of this sweep (1 trials)" in capsys.readouterr().err
        (again,) = SearchResult.load(out).records  # a new run, not the earlier one plus one
        assert again.started != trial.started


@pytest.mark.slow
def test_fresh_deletes_only_the_folders_its_trials_made(tmp_path, capsys):
    """--fresh deleted every folder of output_dir that a record of search.json names: a search.json naming the
    user's folder (an hp_name of the Python API, or a file tampered with) took that folder with it."""
    path = write(
        tmp_path,
        TINY.replace(
            "backend: optuna\nbackend_options:\n  sampler: {name: TPESampler, seed: 0}\n", "backend: random\n"
        ),
    )
    out = tmp_path / "out"
    assert main(["run", str(path), "--n-trials", "1", "--output-dir", str(out)]) == 0
    (trial,) = SearchResult.load(out).records
    (out / "data").mkdir()
    (out / "data" / "keep.txt").write_text("precious")
    (out / trial.name / "stale.txt").write_text("the earlier trial's")
    result = SearchResult.load(out)
    result.records.append(dataclasses.replace(trial, trial_id="9", number=9, name="data"))
    result.save(out)
    assert main(["run", str(path), "--n-trials", "1", "--output-dir", str(out), "--fresh"]) == 0
    assert (out / "data" / "keep.txt").read_text() == "precious"
    assert not (out / trial.name / "stale.txt").exists()  # the earlier trial's own folder did go


def test_rerun_over_a_corrupt_search_json_names_it(tmp_path, capsys):
    path = write(
        tmp_path,
        TINY.replace(
            "backend: optuna\nbackend_options:\n  sampler: {name: TPESampler, seed: 0}\n", "backend: random\n"
        ),
    )
    out = tmp_path / "out"
    out.mkdir()
    (out / "search.json").write_text("{not json")
    err = run_error(capsys, path, "--output-dir", str(out))
    assert "search.json" in err and "nothing was deleted" in err and "--fresh" in err
    assert (out / "search.json").read_text() == "{not json"
    assert (
        main(["run", str(path), "--n-trials", "1", "--output-dir", str(out), "--fresh"]) == 0
    )  # --fresh recovers
    assert len(SearchResult.load(out).records) == 1


def test_usage_errors_exit_2(capsys):
    assert main(["run"]) == 2
    assert main(["frobnicate"]) == 2
    assert main(["--help"]) == 0


@pytest.mark.multiprocess
def test_subprocess_config_error_exit_code_and_no_traceback(tmp_path):
    path = write(tmp_path, TINY.replace("backend: optuna", "backend: hyperopt"))
    proc = subprocess.run(
        [sys.executable, "-m", "hpsearch", "run", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"{path}:{line_of(path, 'hyperopt')}: backend: unknown backend 'hyperopt'" in proc.stderr


# ---------------------------------------------------------------------------------------------- reports
def synthetic(folder: Path, backend: str = "ray", best: float = 0.9) -> Path:
    """A saved search with one complete and one pruned trial, without training anything."""
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    records = [
        TrialRecord(
            trial_id=str(i),
            number=i,
            name=f"t{i}",
            state=state,
            params={"learning_rate": 0.01 * (i + 1)},
            objective=value,
            started=start + timedelta(seconds=10 * i),
            finished=start + timedelta(seconds=10 * i + 5),
            intermediates=[Evaluation(step=3, epoch=1.0, objective=value, metrics={"eval_accuracy": value})],
            last_step=3,
        )
        for i, (state, value) in enumerate([(TrialState.COMPLETE, best), (TrialState.PRUNED, 0.5)])
    ]
    SearchResult(
        backend=backend,
        directions=["maximize"],
        records=records,
        objective="eval_accuracy",
        n_trials=2,
        started=start,
        finished=start + timedelta(seconds=30),
    ).save(folder)
    return folder


@pytest.mark.slow
def test_report_one_search(example_run, tmp_path, capsys):
    _, out = example_run
    target = tmp_path / "r.html"
    assert main(["report", str(out), "-o", str(target)]) == 0
    assert target.is_file()
    assert f"Report: {target}" in capsys.readouterr().out
    assert "Parallel coordinates" in target.read_text(encoding="utf-8")


def test_report_default_path_is_in_the_output_dir(tmp_path):
    folder = synthetic(tmp_path / "search")
    assert main(["report", str(folder)]) == 0
    assert (folder / "report.html").is_file()


def test_report_compares_several_searches(example_run, tmp_path, capsys):
    _, out = example_run
    other = synthetic(tmp_path / "ray-run")
    target = tmp_path / "compare.html"
    assert main(["report", str(out), str(other), "-o", str(target)]) == 0
    html = target.read_text(encoding="utf-8")
    assert "ray-run" in html and out.name in html
    assert f"Report: {target}" in capsys.readouterr().out


@pytest.mark.multiprocess
def test_report_into_a_pipe_closed_early_exits_quietly(tmp_path):
    """`hpsearch report A --markdown | head -1`: the reader goes away; no BrokenPipeError traceback."""
    folder = synthetic(tmp_path / "search")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpsearch", "report", str(folder), "--markdown"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    proc.stdout.close()  # the reader is gone before anything is printed (as `head` once it has its lines)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert b"Traceback" not in err and b"BrokenPipeError" not in err, err.decode()


def test_report_markdown_to_stdout(example_run, capsys):
    _, out = example_run
    assert main(["report", str(out), "--markdown"]) == 0
    printed = capsys.readouterr().out
    assert "|" in printed and "run-0" in printed
    assert not (Path(out) / "report.md").exists()


def test_report_of_a_folder_without_search(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "search.json" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--max-rows", "5"], "--max-rows 5 sets the trials --markdown lists"),
        (["--markdown", "--max-rows", "-1"], "--max-rows must be 0 or more, got -1"),
        (["--markdown", "-o", "r.md"], "--markdown prints to stdout"),
        (["--target", "0.5"], "--target 0.5 is the objective value an HTML comparison of several folders"),
        (["SECOND", "--target", "nan"], "--target must be a finite number, got nan"),
    ],
)
def test_report_refuses_an_option_that_would_do_nothing_or_is_invalid(tmp_path, capsys, extra, message):
    # --max-rows without --markdown, -o with --markdown and --target of one folder were silently ignored; a negative
    # --max-rows was a ValueError traceback.
    folder = synthetic(tmp_path / "search")
    extra = [str(folder) if arg == "SECOND" else arg for arg in extra]
    assert main(["report", str(folder), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (folder / "report.html").exists()


def test_report_into_a_folder_or_an_unwritable_path(tmp_path, capsys):
    # -o naming a folder was an IsADirectoryError traceback; an unwritable path one more.
    folder = synthetic(tmp_path / "search")
    reports = tmp_path / "reports"
    reports.mkdir()
    assert main(["report", str(folder), "-o", str(reports)]) == 0
    assert (reports / "report.html").is_file()
    assert main(["report", str(folder), str(folder), "-o", str(reports)]) == 0
    assert (reports / "compare.html").is_file()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    capsys.readouterr()
    assert main(["report", str(folder), "-o", str(blocker / "r.html")]) == 2
    err = capsys.readouterr().err
    assert "cannot write the report" in err and "Traceback" not in err


@pytest.mark.slow
def test_report_never_replaces_a_file_that_is_no_html_page(tmp_path, capsys):
    # -o OUTPUT_DIR/search.json replaced the search's own results with the HTML page (the search was then unreadable).
    folder = synthetic(tmp_path / "search")
    kept = {name: (folder / name).read_bytes() for name in ("search.json", "trials.csv")}
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(TINY)
    for target in (folder / "search.json", folder / "trials.csv", sweep):
        assert main(["report", str(folder), "-o", str(target)]) == 2
        assert "which the report would replace" in capsys.readouterr().err
    assert {name: (folder / name).read_bytes() for name in kept} == kept and sweep.read_text() == TINY
    # An earlier report is replaced, with or without the .html suffix.
    for target in (tmp_path / "r.html", tmp_path / "r"):
        assert main(["report", str(folder), "-o", str(target)]) == 0
        assert main(["report", str(folder), "-o", str(target)]) == 0


@pytest.mark.multiprocess
def test_report_subprocess_markdown(tmp_path):
    folder = synthetic(tmp_path / "search")
    proc = subprocess.run(
        [sys.executable, "-m", "hpsearch", "report", str(folder), "--markdown"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "t0" in proc.stdout and "|" in proc.stdout


def test_a_model_init_that_needs_a_trial_is_named_with_the_fix(tmp_path, capsys):
    """The Trainer builds one model with model_init(None) before the search (as transformers' does); a factory that
    cannot gets its traceback and the `model` line with what to change, not a bare TypeError."""
    module = tmp_path / "needs_trial_model.py"
    module.write_text(
        "from examples.digits.model import DigitsMLP\n\n"
        "def model_init(trial):\n    return DigitsMLP(hidden=trial['hidden'])\n"
    )
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(TINY.replace("examples.digits.model:model_init", "needs_trial_model:model_init"))
    sys.path.insert(0, str(tmp_path))
    try:
        code = main(["run", str(sweep), "--output-dir", str(tmp_path / "out"), "--no-progress"])
    finally:
        sys.path.remove(str(tmp_path))
    err = capsys.readouterr().err
    assert code == 1
    assert "TypeError" in err  # the user's own traceback
    assert f"{sweep}:1: model: building the Trainer failed" in err and "model_init(trial=None)" in err
    assert "trial['hidden'] if trial else 64" in err


def test_long_messages_are_shortened():
    from hpsearch.cli import MAX_MESSAGE, _shorten

    assert _shorten("short") == "short"
    long = "x" * (MAX_MESSAGE + 1234)
    assert _shorten(long) == "x" * MAX_MESSAGE + "... (1,234 more characters)"


def test_errors_point_at_the_key_they_are_about_not_at_the_first_line(tmp_path, capsys):
    # A misspelt metric (found by the first trial) pointed at line 1 (the model line); an unknown key made by a
    # deeper --set pointed there too instead of naming the --set.
    sweep = write(tmp_path, TINY.replace("objective: eval_accuracy", "objective: eval_acuracy"))
    code = main(["run", str(sweep), "--output-dir", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{sweep}:{line_of(sweep, 'objective:')}: objective: " in err and "eval_acuracy" in err
    err = run_error(capsys, write(tmp_path, TINY, "other.yaml"), "--set", "trainig_args.seed=1")
    assert "unknown key 'trainig_args'" in err and "(set by --set trainig_args.seed=...)" in err
    assert "other.yaml:1:" not in err


@pytest.mark.parametrize("flags", [["--output-dir", ""], ["--output-dir", " "], ["--warm-start", ""]])
def test_an_empty_folder_flag_is_refused(tmp_path, capsys, monkeypatch, flags):
    # --output-dir '' was the current directory: the search wrote search.json, run-* and report.html among its files.
    monkeypatch.chdir(tmp_path)
    err = run_error(capsys, write(tmp_path, TINY), *flags)
    assert f"{flags[0]} {flags[1]!r} is empty" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep.yaml"]


def test_a_misspelt_metric_in_an_objective_list_stops_the_sweep_as_a_config_error(tmp_path, capsys):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        TINY.replace(
            "objective: eval_accuracy\ndirection: maximize",
            "objective: [eval_accuracy, eval_los]\ndirection: [maximize, minimize]",
        ).replace("  sampler: {name: TPESampler, seed: 0}", "  sampler: {name: NSGAIISampler, seed: 0}")
    )
    code = main(["run", str(sweep), "--output-dir", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "objective 'eval_los' is not among the evaluation metrics" in err and "eval_loss" in err


def test_version_names_hpsearch_and_every_backends_library(capsys, monkeypatch):
    import hpsearch
    from hpsearch.backends import _REGISTRY, backend_names
    from hpsearch.backends.random import RandomBackend

    class Missing(RandomBackend):
        name = "missing"
        requirement = "a_library_that_is_not_installed"
        distribution = "a-library-that-is-not-installed"
        install_command = "pip install a-library-that-is-not-installed"

    monkeypatch.setitem(_REGISTRY, "missing", Missing)
    assert main(["--version"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"hpsearch {hpsearch.__version__}"
    import optuna

    assert f"  optuna: {optuna.__version__}" in lines
    assert "  missing: not installed (pip install a-library-that-is-not-installed)" in lines
    assert [line.split(":")[0].strip() for line in lines[1:]] == backend_names()


@pytest.mark.parametrize("returned, role", [("(None, ev)", "train"), ("(tr, None)", "eval")])
def test_a_data_factory_returning_no_dataset_is_refused_at_the_data_line(
    capsys, tmp_path, monkeypatch, returned, role
):
    module = tmp_path / f"nodata_{role}.py"  # a module per case: an imported one stays in sys.modules
    module.write_text(
        "from examples.digits.model import datasets as _d\n"
        f"def data():\n    tr, ev = _d()\n    return {returned}\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    path = write(
        tmp_path,
        f"""\
        model: examples.digits.model:model_init
        data: nodata_{role}:data
        metrics: examples.digits.model:compute_metrics
        objective: eval_accuracy
        direction: maximize
        backend: random
        n_trials: 1
        output_dir: {tmp_path / "out"}
        space: {{learning_rate: {{type: float, low: 1.0e-3, high: 1.0e-2}}}}
    """,
    )
    err = run_error(capsys, path)
    assert (
        f"sweep.yaml:{line_of(path, 'data:')}: data: the data factory returned None as the {role} dataset"
        in err
    )
    assert not (tmp_path / "out" / "search.json").exists()


def test_a_search_error_is_located_by_the_argument_it_names_not_by_its_wording(tmp_path):
    import pickle

    from hpsearch.cli import _locate
    from hpsearch.errors import SearchConfigError
    from hpsearch.sweep import load_sweep

    config = load_sweep(write(tmp_path, TINY))
    # The key comes from `about`, whatever the message says: a reworded message cannot lose its line.
    assert _locate(SearchConfigError("a sampler problem", about="sampler"), config) == (
        "backend_options",
        "sampler",
    )
    assert _locate(SearchConfigError("too big", about=("hp_space", "hidden")), config) == ("space", "hidden")
    assert _locate(SearchConfigError("too big", about=("hp_space", "absent")), config) == ("space",)
    assert _locate(SearchConfigError("x", about="max_steps"), config) == ("training_args", "max_steps")
    assert _locate(SearchConfigError("x", about="compute_objective"), config) == ("objective",)
    assert _locate(SearchConfigError("x", about="n_trials"), config) == ("n_trials",)
    # A message that starts with a key's name but names no argument points nowhere (no guessing from its text).
    assert _locate(SearchConfigError("sampler=TPESampler must be seeded"), config) == ()
    assert _locate(SearchConfigError("x", about="not_a_key"), config) == ()
    # It survives the pipe to a worker process and back.
    again = pickle.loads(pickle.dumps(SearchConfigError("x", about=("hp_space", "hidden"))))
    assert again.about == ("hp_space", "hidden") and str(again) == "x"


# ---------------------------------------------------------------------------------------------- Ctrl-C
def _main_under_ctrl_c(argv: list[str]) -> int:
    """main(argv), failing the test (not stopping the session) when a KeyboardInterrupt escapes it."""
    try:
        return main(argv)
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped main(): a traceback for the user")


def _ctrl_c() -> None:
    import signal

    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)  # the KeyboardInterrupt lands here, long before the sleep ends


def test_ctrl_c_before_the_search_exits_130_with_one_line_and_no_traceback(
    tmp_path, capsys, monkeypatch, sigint_raises
):
    # Ctrl-C while the data factory loads (or torch imports): a KeyboardInterrupt traceback, exit code 1.
    (tmp_path / "slow_data.py").write_text(
        "import os, signal, time\ndef data():\n    os.kill(os.getpid(), signal.SIGINT)\n    time.sleep(5)\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    path = write(tmp_path, TINY.replace("examples.digits.model:datasets", "slow_data:data"))
    out = tmp_path / "out"
    code = _main_under_ctrl_c(["run", str(path), "--output-dir", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "Interrupted before the search started: no trial ran" in err
    assert f"hpsearch run {path} --output-dir {out} --no-progress" in err
    assert not (out / "search.json").exists()


def test_ctrl_c_while_the_report_is_written_says_the_results_are_saved(
    tmp_path, capsys, monkeypatch, sigint_raises
):
    # Ctrl-C after the last trial, while report.html is drawn (seconds, for a large search): a plotly traceback.
    import hpsearch.report

    monkeypatch.setattr(hpsearch.report, "write_html", lambda *args, **kwargs: _ctrl_c())
    out = tmp_path / "out"
    # The random backend: Optuna's log handler may hold the stderr of an earlier test's capsys, long closed.
    code = _main_under_ctrl_c(
        ["run", str(write(tmp_path, TINY)), "--output-dir", str(out), "--no-progress", "--backend", "random"]
    )
    err = capsys.readouterr().err
    assert code == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert f"Interrupted after the search ended: its results are saved in {out}" in err
    assert f"hpsearch report {out}" in err
    assert len(SearchResult.load(out).records) == 2


def test_ctrl_c_in_report_exits_130_without_a_traceback(tmp_path, capsys, monkeypatch, sigint_raises):
    import hpsearch.report

    search = synthetic(tmp_path / "search")
    monkeypatch.setattr(hpsearch.report, "write_html", lambda *args, **kwargs: _ctrl_c())
    code = _main_under_ctrl_c(["report", str(search)])
    err = capsys.readouterr().err
    assert code == 130, err
    assert "Traceback" not in err and err.strip() == "hpsearch: interrupted (Ctrl-C)."


# ---------------------------------------------------------------------------------------------- output folder flags
@pytest.mark.parametrize("where", ["file", "flag"])
@pytest.mark.parametrize("backend", ["optuna", "random"])
def test_an_output_dir_that_cannot_be_made_is_a_config_error_naming_it(tmp_path, capsys, where, backend):
    # A folder under a file cannot be made: `hpsearch run` showed mkdir's FileNotFoundError traceback, exit code 1.
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    bad = tmp_path / "a-file" / "out"
    if where == "file":
        path = write(tmp_path, TINY + f"output_dir: {bad}\n")
        err = run_error(capsys, path, "--backend", backend, "--no-progress")
        assert f"sweep.yaml:{line_of(path, 'output_dir:')}: output_dir: " in err
    else:
        err = run_error(
            capsys, write(tmp_path, TINY), "--output-dir", str(bad), "--backend", backend, "--no-progress"
        )
        assert err.rstrip().endswith("(set by --output-dir)"), err
    assert f"output_dir {str(bad)!r} cannot be created" in err
    assert "output_dir in the sweep file, or --output-dir" in err


def test_an_output_dir_that_is_a_file_is_refused_naming_the_flag(tmp_path, capsys):
    target = tmp_path / "results.txt"
    target.write_text("mine", encoding="utf-8")
    err = run_error(capsys, write(tmp_path, TINY), "--output-dir", str(target), "--no-progress")
    assert f"output_dir {str(target)!r} is a file, not a folder" in err and "(set by --output-dir)" in err
    assert target.read_text(encoding="utf-8") == "mine"


def test_a_warm_start_folder_that_is_no_search_names_the_flag_that_gave_it(tmp_path, capsys):
    err = run_error(capsys, write(tmp_path, TINY), "--warm-start", str(tmp_path / "missing"), "--no-progress")
    assert "is not a search" in err and "(set by --warm-start)" in err and "--set" not in err


# ---------------------------------------------------------------------------------------------- report of no search
@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda tmp: tmp / "missing", "does not exist"),
        (lambda tmp: tmp, "holds no search.json, so it is not a search's output folder"),
        (
            lambda tmp: write(tmp, TINY),
            "is a file, not a search's output folder",
        ),  # the sweep file, not its output
    ],
)
def test_report_of_what_is_no_search_says_what_it_is_in_the_commands_terms(tmp_path, capsys, make, expected):
    # Every case said "... does not exist. Point load() at the output_dir of a search": the Python API's words.
    folder = make(tmp_path)
    assert main(["report", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hpsearch: error: {str(folder)!r} {expected}"), err
    assert "load()" not in err and "Traceback" not in err
    assert "the one `hpsearch run` printed after Results:" in err


def test_report_of_a_search_with_no_finished_trial_yet_points_at_the_dashboard(tmp_path, capsys):
    # A search started a moment ago: its folder has events.jsonl (the first trial's start), no search.json yet.
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "events.jsonl").write_text('{"event": "trial_start"}\n', encoding="utf-8")
    assert main(["report", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "has not finished a trial yet" in err and f"hpsearch dashboard {folder}" in err


# ---------------------------------------------------------------------------------------------- summary numbers
def test_a_resumed_sweeps_summary_says_how_many_trials_ran_now(tmp_path, capsys):
    # "Trials: 3 (3 complete) in 2.1s": the time of this run, which trained only 2 of the 3 (and, resumed once more,
    # none of them).
    path = write(
        tmp_path,
        TINY.replace(
            "backend: optuna\nbackend_options:\n  sampler: {name: TPESampler, seed: 0}\n",
            "backend: random\nbackend_options: {seed: 3}\n",
        ),
    )
    common = ["run", str(path), "--output-dir", str(tmp_path / "out"), "--no-progress"]
    assert main([*common, "--n-trials", "1"]) == 0
    assert re.search(
        r"^Trials: 1 \(1 complete\) in \S+ with random\.$", capsys.readouterr().out, re.MULTILINE
    )
    assert main([*common, "--n-trials", "3", "--resume"]) == 0
    out = capsys.readouterr().out
    assert re.search(
        r"^Trials: 3 \(3 complete\) with random: 2 run now in \S+, 1 in an earlier run\.$", out, re.MULTILINE
    ), out
    assert main([*common, "--n-trials", "3", "--resume"]) == 0
    out = capsys.readouterr().out
    assert re.search(
        r"^Trials: 3 \(3 complete\) with random: 0 run now in \S+, 3 in an earlier run\.$", out, re.M
    )


# ---------------------------------------------------------------------------------------------- imports
@pytest.mark.parametrize("layout", ["module", "package"])
def test_a_module_beside_the_sweep_file_but_not_importable_here_says_where_to_run_from(
    tmp_path, capsys, layout
):
    # Paths in a sweep file are relative to its folder, imports to the current directory: a user's model.py next to
    # the file, run from elsewhere, got only "not importable from the current directory".
    project = tmp_path / "project"
    project.mkdir()
    name = f"beside_{layout}_model"
    source = "from examples.digits.model import model_init, datasets, compute_metrics\n"
    if layout == "module":
        (project / f"{name}.py").write_text(source, encoding="utf-8")
    else:
        (project / name).mkdir()
        (project / name / "__init__.py").write_text(source, encoding="utf-8")
    path = write(project, TINY.replace("examples.digits.model:", f"{name}:"))
    err = run_error(capsys, path)
    assert f"sweep.yaml:1: model: cannot import '{name}:model_init'" in err
    assert (
        f"'{name}' is beside the sweep file, in {project}: run from there (cd {project} && hpsearch run sweep.yaml)."
        in err
    )
    # Elsewhere it is only "not importable": no folder is named that does not hold it.
    (project / "elsewhere").mkdir()
    err = run_error(capsys, write(project / "elsewhere", TINY.replace("examples.digits.model:", f"{name}:")))
    assert "is not importable from the current directory" in err and "beside the sweep file" not in err
