"""The sweep file (`hpsearch.sweep`): what the schema accepts is what `hyperparameter_search` accepts, and every
problem, YAML ones included (aliases, recursion, duplicate keys), is a ``file:line: key: message`` config error."""

from __future__ import annotations

import ast
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

import spaces
from hpsearch import SearchResult, hyperparameter_search
from hpsearch.backends import backend_names, get_backend
from hpsearch.cli import main
from hpsearch.errors import HPSearchError, SearchConfigError
from hpsearch.settings import COMMON_OPTIONS
from hpsearch.sweep import KEYS, load_sweep, options_model
from tests._digits import DigitsMLP, digits_trainer

ROOT = Path(__file__).resolve().parents[2]

# A valid sweep of the example model (nothing here trains unless a test says so).
SWEEP: dict[str, Any] = {
    "model": "examples.digits.model:model_init",
    "data": "examples.digits.model:datasets",
    "metrics": "examples.digits.model:compute_metrics",
    "objective": "eval_accuracy",
    "direction": "maximize",
    "n_trials": 1,
    "torch_threads": 1,
    "training_args": {
        "max_steps": 2,
        "per_device_train_batch_size": 64,
        "eval_strategy": "steps",
        "eval_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "disable_tqdm": True,
    },
    "space": {"learning_rate": {"type": "float", "low": 1.0e-3, "high": 1.0e-1, "log": True}},
}


def _backends() -> list[Any]:
    """Every registered backend, each either tested or skipped with its reason (never silently left out)."""
    params = []
    for name in backend_names():
        backend_cls = get_backend(name)
        reason = f"{name} is not installed ({backend_cls.install_command})"
        params.append(
            pytest.param(name, marks=[] if backend_cls.is_available() else pytest.mark.skip(reason=reason))
        )
    return params


BACKENDS = _backends()


@pytest.fixture(autouse=True)
def _run_from_root(monkeypatch):
    """Import paths in sweep files resolve against the current directory, as they would for a user."""
    import torch

    threads = torch.get_num_threads()
    monkeypatch.chdir(ROOT)
    yield
    torch.set_num_threads(threads)


def write_sweep(
    tmp_path: Path, backend: str | None = "optuna", options: dict[str, Any] | None = None, **changes: Any
) -> Path:
    sweep = {**SWEEP, **changes}
    if backend is not None:
        sweep["backend"] = backend
    if options is not None:
        sweep["backend_options"] = options
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False), encoding="utf-8")
    return path


def write_text(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def line_of(path: Path, needle: str, start: int = 1) -> int:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if number >= start and needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


def config_error(capsys, path: Path, *flags: str) -> str:
    code = main(["run", str(path), "--no-progress", *flags])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    return err


# ---------------------------------------------------------------------------------------------- API == CLI
class _Reached(HPSearchError):
    """The search got past every check of its inputs: the backend was asked to run."""


def _stub_run(monkeypatch, backend: str) -> list[dict[str, Any]]:
    """Make the backend record what it was given and stop there, instead of training."""
    seen: list[dict[str, Any]] = []

    def run(self, session, native_space, executor):
        settings = self.settings
        seen.append(
            {
                "trial_timeout": settings.trial_timeout,
                "objective_scope": settings.objective_scope,
                "max_failed_trials": session.max_failed_trials,
            }
        )
        raise _Reached("reached the backend")

    monkeypatch.setattr(get_backend(backend), "run", run)
    return seen


def _through_api(tmp_path: Path, backend: str, options: dict[str, Any]) -> tuple[str, str]:
    trainer = digits_trainer(
        str(tmp_path / "api"), lambda trial: DigitsMLP(hidden=8), **SWEEP["training_args"]
    )
    try:
        hyperparameter_search(
            trainer,
            hp_space={"learning_rate": spaces.Float(1e-3, 1e-1, log=True)},
            compute_objective="eval_accuracy",
            n_trials=1,
            direction="maximize",
            backend=backend,
            **options,
        )
    except _Reached:
        return "accepted", ""
    except SearchConfigError as error:
        return "refused", str(error)
    raise AssertionError("the stubbed backend did not run")


def _through_cli(tmp_path: Path, capsys, backend: str, options: dict[str, Any]) -> tuple[str, str]:
    path = write_sweep(tmp_path, backend, options)
    code = main(["run", str(path), "--no-progress", "--output-dir", str(tmp_path / "cli")])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code == 1:
        assert "the search failed: reached the backend" in err, err
        return "accepted", err
    assert code == 2, err
    (name,) = options
    assert f"{path}:{line_of(path, name + ':')}: backend_options.{name}:" in err  # the key and its line
    return "refused", err


# Each common option: values both must accept, values both must refuse.
COMMON_VALUES: dict[str, tuple[list[Any], list[Any]]] = {
    "max_failed_trials": ([1, 7, None], [0, -2, True, 2.5, "3"]),
    "objective_scope": (["best", "last-5-avg", None], ["worst", "", 3]),
    "trial_timeout": ([600, 0.5, None], [0, -1, True, "soon", math.inf]),
    "max_device_hours": ([2, 0.5, None], [0, -1, True, "lots", math.inf]),
    "max_energy_kwh": ([1, 0.01, None], [0, -3, False, "lots", math.nan]),
    # A worker needs a picklable model_init (this test's is a lambda): test_trial_workers runs searches with them.
    "trial_workers": ([None], [0, -1, True, "2", 2.5]),
    "trial_worker_max_trials": ([None], [0, True, "3"]),
    "warm_start": ([None], [42, True]),
    # Without warm_start these do nothing, so a value given alone is refused too (test_warm_start has them with it).
    "warm_start_mode": ([None], ["evaluate", "inform", "replay", 3]),
    "warm_start_top_k": ([None], [1, 10, 0, -1, True, "5"]),
    "warm_start_defaults": ([None], [{"dropout": 0.1}, [1], "dropout=0.1"]),
    # Each needs the other, so a value given alone is refused too (test_reevaluate runs them together).
    "reevaluate_top_k": ([None], [1, 0, -1, True, 2.5, "3"]),
    "reevaluate_seeds": ([None], [2, 0, -1, False, 1.5, "2"]),
    # 'during' needs reevaluate_seeds; folds are datasets (Python API), so a sweep file's strings are refused.
    "reevaluate_when": ([None, "end"], ["during", "sometimes", 3]),
    "reevaluate_folds": ([None], [[], "folds", [["train.csv", "eval.csv"]], 3]),
}
COMMON_CASES = [
    (name, value, ok)
    for name, (good, bad) in COMMON_VALUES.items()
    for ok, values in ((True, good), (False, bad))
    for value in values
]


def test_every_common_option_has_cases():
    assert set(COMMON_VALUES) == set(COMMON_OPTIONS)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("option", "value", "ok"), COMMON_CASES, ids=[f"{n}={v!r}" for n, v, _ in COMMON_CASES]
)
@pytest.mark.slow
def test_common_option_is_accepted_identically_by_the_api_and_the_cli(
    backend, option, value, ok, tmp_path, monkeypatch, capsys
):
    seen = _stub_run(monkeypatch, backend)
    api = _through_api(tmp_path, backend, {option: value})
    cli = _through_cli(tmp_path, capsys, backend, {option: value})
    expected = "accepted" if ok else "refused"
    assert (api[0], cli[0]) == (expected, expected), (api, cli)
    if expected == "accepted":
        api_seen, cli_seen = seen
        assert api_seen == cli_seen  # the same settings reached the backend
    else:
        assert option in api[1] and option in cli[1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_options_schema_is_the_registry(backend):
    fields = options_model(backend).model_fields
    assert {field.alias or name for name, field in fields.items()} == set(get_backend(backend).all_options())


def test_an_option_named_like_a_model_attribute(tmp_path, capsys, monkeypatch):
    from hpsearch.backends.random import RandomBackend
    from hpsearch.settings import Option

    monkeypatch.setattr(
        RandomBackend, "options", (*RandomBackend.options, Option("copy", (bool,), "a test option"))
    )
    path = write_sweep(tmp_path, "random", {"copy": "yes"})
    err = config_error(capsys, path)
    assert (
        f"{path}:{line_of(path, 'copy:')}: backend_options.copy: copy='yes' (str) must be true or false"
        in err
    )
    assert load_sweep(write_sweep(tmp_path, "random", {"copy": True})).backend_options == {"copy": True}


@pytest.mark.multiprocess
def test_trial_timeout_in_a_sweep_file_stops_the_trial(tmp_path):
    # Refused as "did you mean 'timeout'?" before; the API always took it. A timeout far below one step's time
    # makes the trial FAIL with the watchdog's reason, so the option reached the trial.
    path = write_sweep(tmp_path, "random", {"seed": 0, "trial_timeout": 0.001, "max_failed_trials": 1})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hpsearch",
            "run",
            str(path),
            "--no-progress",
            "--output-dir",
            str(tmp_path / "out"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    (record,) = SearchResult.load(tmp_path / "out").records
    assert record.state.value == "FAIL"
    assert "trial_timeout" in (record.error or "")


def test_random_backend_end_to_end_and_backend_flag(tmp_path, capsys):
    path = write_sweep(tmp_path, "optuna")
    out = tmp_path / "out"
    assert main(["run", str(path), "--no-progress", "--backend", "random", "--output-dir", str(out)]) == 0
    assert SearchResult.load(out).backend == "random"
    # --backend's choices are the registry's.
    assert main(["run", str(path), "--backend", "nope"]) == 2
    err = capsys.readouterr().err
    assert all(name in err for name in backend_names()), err


def test_backend_flag_leaves_out_the_files_options_for_its_own_backend(tmp_path, caplog):
    """`--backend` moves a sweep to another backend: the file's options for Optuna (a sampler, a pruner) would be
    refused by the new one, so they are left out with a warning; common options stay, and an option given with
    --set is kept and checked."""
    path = write_sweep(
        tmp_path,
        "optuna",
        options={"sampler": {"name": "TPESampler", "seed": 0}, "timeout": 60, "max_failed_trials": 5},
    )
    with caplog.at_level("WARNING", logger="hpsearch.sweep"):
        config = load_sweep(path, backend="random")
    assert config.backend == "random" and "seed" not in config.backend_options
    assert config.backend_options["max_failed_trials"] == 5  # an option every backend takes stays
    assert "left out (sampler, timeout)" in caplog.text and "--set backend_options.NAME=VALUE" in caplog.text
    assert (
        load_sweep(path, backend="random", overrides=["backend_options.seed=7"]).backend_options["seed"] == 7
    )
    with pytest.raises(HPSearchError, match="sampler"):  # named with --set, it is the user's and is checked
        load_sweep(path, backend="random", overrides=["backend_options.sampler={name: TPESampler}"])
    # The file's own backend keeps its options, flag or not; an unknown one is the usual config error.
    assert "sampler" in load_sweep(path, backend="optuna").backend_options
    with pytest.raises(HPSearchError, match="--backend"):
        load_sweep(path, backend="nope")


def test_a_backend_name_in_any_case_is_taken_as_the_api_takes_it(tmp_path):
    """hyperparameter_search(backend="Optuna") works; so does `backend: Optuna` in a sweep file."""
    assert load_sweep(write_sweep(tmp_path, "Optuna")).backend == "optuna"
    assert load_sweep(write_sweep(tmp_path, "optuna"), overrides=["backend=RANDOM"]).backend == "random"
    with pytest.raises(HPSearchError, match="unknown backend 'optunaa'; did you mean 'optuna'"):
        load_sweep(write_sweep(tmp_path, "optunaa"))


def test_backend_defaults_to_the_first_installed(tmp_path):
    config = load_sweep(write_sweep(tmp_path, backend=None))
    first = next(
        n
        for n in backend_names()
        if n != "ray" and get_backend(n).auto_select and get_backend(n).is_available()
    )
    assert config.backend == first


@pytest.mark.slow
def test_an_earlier_run_in_a_store_the_sweep_does_not_own_is_left_alone(tmp_path, capsys, monkeypatch):
    import optuna

    # Optuna's log handler keeps the stderr of the test that first logged; an INFO line here would go to a closed one.
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        _earlier_run_left_alone(optuna, tmp_path, capsys, monkeypatch)
    finally:
        optuna.logging.set_verbosity(verbosity)


def _earlier_run_left_alone(optuna, tmp_path, capsys, monkeypatch):
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    optuna.create_study(study_name="sweep", storage=url).enqueue_trial({"learning_rate": 0.01})
    path = write_sweep(tmp_path, "optuna", {"storage": url})
    err = config_error(capsys, path, "--output-dir", str(tmp_path / "out"))
    assert (
        f"{path}:{line_of(path, 'backend_options')}: backend_options: an earlier run of this sweep has 1 trials"
        in err
    )
    assert "Pass --resume" in err and "nothing was deleted" in err
    # The study is named after the sweep file in a store outside the output folder: another output_dir or --fresh
    # would not help, another study name or storage does.
    assert (
        "another storage or study_name in backend_options" in err and "another output_dir would find" in err
    )
    assert "or --fresh to delete it" not in err
    assert len(optuna.load_study(study_name="sweep", storage=url).trials) == 1  # untouched
    # --fresh does not delete a store outside the output folder either.
    err = config_error(capsys, path, "--fresh", "--output-dir", str(tmp_path / "out"))
    assert "outside the output folder" in err
    assert len(optuna.load_study(study_name="sweep", storage=url).trials) == 1
    _stub_run(monkeypatch, "optuna")
    assert main(["run", str(path), "--no-progress", "--resume", "--output-dir", str(tmp_path / "out")]) == 1
    assert "Resuming the earlier run of this sweep (1 trials so far)" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- config errors
@pytest.mark.parametrize(
    ("backend", "typo", "suggestion"),
    [
        ("optuna", "trial_timout", "trial_timeout"),
        ("optuna", "prunr", "pruner"),
        ("random", "sed", "seed"),
        ("sigopt", "max_failed_trial", "max_failed_trials"),
    ],
)
def test_unknown_backend_option_suggests_the_closest(tmp_path, capsys, backend, typo, suggestion):
    assert get_backend(backend).is_available(), (
        f"{backend} is not installed: run make setup"
    )  # fails, never skips
    path = write_sweep(tmp_path, backend, {typo: 1})
    err = config_error(capsys, path)
    assert (
        f"{path}:{line_of(path, typo)}: backend_options.{typo}: '{typo}' is not an option of the {backend}"
        in err
    )
    assert f"did you mean '{suggestion}'?" in err


def test_wrong_types_name_key_value_and_line(tmp_path, capsys):
    path = write_sweep(tmp_path, "optuna", {"n_jobs": "two", "load_if_exists": "yes"}, torch_threads="many")
    err = config_error(capsys, path)
    assert (
        f"{path}:{line_of(path, 'torch_threads')}: torch_threads: expected an integer from 1 to 4096, got str 'many'."
        in err
    )
    # An option's value is refused with the message hyperparameter_search gives (its one declaration's).
    assert (
        f"{path}:{line_of(path, 'n_jobs')}: backend_options.n_jobs: n_jobs='two' (str) must be an integer"
        in err
    )
    assert (
        f"{path}:{line_of(path, 'load_if_exists')}: backend_options.load_if_exists: load_if_exists='yes' (str) "
        "must be true or false" in err
    )
    # All of them at once, in the order of the file.
    lines = [int(m) for m in re.findall(rf"{re.escape(str(path))}:(\d+):", err)]
    assert lines == sorted(lines) and len(lines) == 3


def test_object_option_needs_a_class_spec(tmp_path, capsys):
    path = write_sweep(tmp_path, "optuna", {"sampler": "TPESampler"})
    err = config_error(capsys, path)
    assert f"{path}:{line_of(path, 'sampler')}: backend_options.sampler: expected {{name: Class, ...}}" in err
    path = write_sweep(tmp_path, "optuna", {"sampler": {"name": "TPESampler", "sed": 1}})
    err = config_error(capsys, path)
    assert (
        f"{path}:{line_of(path, 'sed:')}: backend_options.sampler.sed:" in err
        and "did you mean 'seed'?" in err
    )


@pytest.mark.parametrize(
    ("domain", "needle"),
    [
        ({"type": "int", "low": 1, "high": 8, "stepp": 2}, "unknown key 'stepp'"),  # the domain's own check
        (
            {"type": "float", "low": 0.0, "high": 1.0, "when": {"learning_rate": 0.5}},
            "a Float",
        ),  # a condition
    ],
)
def test_a_bad_space_parameter_is_named_at_its_line(tmp_path, capsys, domain, needle):
    space = {**SWEEP["space"], "other": domain}
    path = write_sweep(tmp_path, "optuna", space=space)
    err = config_error(capsys, path)
    assert f"{path}:{line_of(path, 'other:')}: space.other:" in err and needle in err


@pytest.mark.parametrize(
    ("changes", "culprit", "needle"),
    [
        ({"learning_rate": "fast"}, "learning_rate", "must be a number"),
        # A rule between two fields: the one that is refused even with the other fields at their defaults.
        (
            {"load_best_model_at_end": True},
            "load_best_model_at_end",
            "needs save_strategy equal to eval_strategy",
        ),
        ({"logging_steps": 0, "eval_steps": None}, "logging_steps", "eval_strategy='steps' needs eval_steps"),
    ],
)
def test_a_refused_training_argument_is_named_at_its_line(tmp_path, capsys, changes, culprit, needle):
    path = write_sweep(tmp_path, "optuna", training_args={**SWEEP["training_args"], **changes})
    err = config_error(capsys, path)
    assert f"{path}:{line_of(path, culprit + ':')}: training_args.{culprit}:" in err and needle in err


def test_a_class_option_given_an_argument_it_does_not_take_names_it(tmp_path, capsys):
    path = write_sweep(tmp_path, "optuna", {"sampler": {"name": "RandomSampler", "seedd": 1}})
    err = config_error(capsys, path)
    assert f"{path}:{line_of(path, 'seedd:')}: backend_options.sampler.seedd:" in err
    assert "RandomSampler takes no argument 'seedd'; did you mean 'seed'?" in err


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"name": "os:system", "command": "touch {marker}"},
            "'os:system' is a builtin_function_or_method, not a class",
        ),
        (
            {"name": "subprocess:Popen", "args": ["touch", "{marker}"]},
            "'subprocess:Popen' is not a class of optuna.samplers nor a subclass of one",
        ),
    ],
    ids=["function", "other-class"],
)
def test_a_class_spec_builds_only_classes_of_the_option(tmp_path, capsys, spec, message):
    """``{name: module:X, ...}`` names a class of the option's modules (or a subclass): any other callable is
    refused before it is called, so a sweep file cannot run a command through it."""
    marker = tmp_path / "called"
    spec = {
        k: (v.format(marker=marker) if isinstance(v, str) else [x.format(marker=marker) for x in v])
        if k != "name"
        else v
        for k, v in spec.items()
    }
    path = write_sweep(tmp_path, "optuna", {"sampler": spec})
    err = config_error(capsys, path)
    assert f"{path}:{line_of(path, 'name:')}: backend_options.sampler.name: {message}" in err
    assert (
        "name a class of optuna.samplers" in err
        or "name one of them or a subclass (e.g. of BaseSampler)" in err
    )
    assert not marker.exists()
    # A class of the module named as module:Class is built.
    path = write_sweep(tmp_path, "optuna", {"sampler": {"name": "optuna.samplers:RandomSampler", "seed": 3}})
    assert type(load_sweep(path).backend_options["sampler"]).__name__ == "RandomSampler"


def test_nested_list_item_error_points_at_the_item(tmp_path, capsys):
    path = write_text(
        tmp_path,
        yaml.safe_dump(SWEEP, sort_keys=False).replace(
            "direction: maximize", "direction:\n- maximize\n- upward"
        ),
    )
    err = config_error(capsys, path)
    assert f"{path}:{line_of(path, 'upward')}: direction.1: expected 'minimize' or 'maximize'" in err


def test_unknown_top_level_key_lists_the_keys(tmp_path, capsys):
    path = write_sweep(tmp_path, "optuna", n_trails=3)
    err = config_error(capsys, path)
    assert (
        f"{path}:{line_of(path, 'n_trails')}: n_trails: unknown key 'n_trails'; did you mean 'n_trials'?"
        in err
    )
    assert ", ".join(KEYS) in err


# ---------------------------------------------------------------------------------------------- YAML itself
def billion_laughs(levels: int = 9) -> str:
    lines = ["lol0: &lol0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"lol{i}: &lol{i} [{', '.join([f'*lol{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


@pytest.mark.timeout(60)  # a safety net: unbounded expansion would run for hours (nothing asserts a duration)
def test_billion_laughs_is_refused_quickly_with_its_line(tmp_path, capsys):
    text = yaml.safe_dump(SWEEP, sort_keys=False) + billion_laughs()
    assert len(text.encode()) < 1600
    path = write_text(tmp_path, text)
    err = config_error(capsys, path)
    found = re.search(rf"{re.escape(str(path))}:(\d+): ", err)
    assert found, err
    assert "*lol" in path.read_text().splitlines()[int(found.group(1)) - 1]  # the line of an alias
    assert "aliases" in err and "10,000" in err


def test_billion_laughs_in_a_set_value(tmp_path, capsys):
    path = write_sweep(tmp_path)
    value = "{" + billion_laughs(6).replace("\n", ", ").rstrip(", ") + "}"
    err = config_error(capsys, path, "--set", f"training_args={value}")
    assert "--set" in err and "aliases" in err


def test_recursive_alias_is_a_config_error(tmp_path, capsys):
    text = yaml.safe_dump(SWEEP, sort_keys=False) + "backend_options: &opts\n  callbacks: [*opts]\n"
    path = write_text(tmp_path, text)
    err = config_error(capsys, path)
    assert f"{path}:{line_of(path, 'callbacks')}: the alias *opts is used inside the value it names" in err


@pytest.mark.parametrize("where", ["top", "nested"])
def test_duplicate_keys_name_the_key_and_both_lines(tmp_path, capsys, where):
    text = yaml.safe_dump(SWEEP, sort_keys=False)
    if where == "top":
        text += "n_trials: 5\n"
        key, first = "n_trials", line_of(write_text(tmp_path, text), "n_trials:")
    else:
        text = text.replace("  max_steps: 2\n", "  max_steps: 2\n  save_strategy: epoch\n")
        key, first = "save_strategy", None
    path = write_text(tmp_path, text)
    first = first or line_of(path, "save_strategy:")
    second = line_of(path, f"{key}:", start=first + 1)
    err = config_error(capsys, path)
    assert f"{path}:{second}: duplicate key '{key}' (lines {first} and {second})" in err


def test_merge_keys_are_not_duplicates_and_keep_their_lines(tmp_path, capsys):
    head = yaml.safe_dump({k: v for k, v in SWEEP.items() if k != "training_args"}, sort_keys=False)
    merged = "training_args:\n  <<: &defaults {max_steps: 2, report_to: none, save_strategy: 'no'%s}\n  max_steps: 3\n"
    config = load_sweep(write_text(tmp_path, head + merged % ""))
    assert config.training_args["max_steps"] == 3  # the explicit key wins over the merged one, as in YAML
    path = write_text(tmp_path, head + merged % ", learning_rate: fast")
    err = config_error(capsys, path)
    assert f"{path}:{line_of(path, '<<:')}: training_args.learning_rate:" in err


# ---------------------------------------------------------------------------------------------- the CLI names no backend
def test_cli_names_no_backend_and_imports_no_engine():
    source = (ROOT / "hpsearch" / "cli.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    engines = {"optuna", "ray", "sigopt", "sigoptlite"}
    strings = {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    assert not strings & set(backend_names()), strings & set(backend_names())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])
    }
    assert not imported & engines


def test_a_training_argument_the_space_replaces_is_warned_about(tmp_path, caplog):
    from hpsearch.sweep import load_sweep

    path = write_sweep(tmp_path, "random", {})
    text = path.read_text().replace("training_args:\n", "training_args:\n  learning_rate: 0.5\n", 1)
    path.write_text(text)
    caplog.set_level("WARNING", logger="hpsearch.sweep")
    load_sweep(path)
    (message,) = [r.getMessage() for r in caplog.records if "replaced in every trial" in r.getMessage()]
    assert f"{path}:{line_of(path, 'learning_rate: 0.5')}: training_args.learning_rate=0.5" in message
