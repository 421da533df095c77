"""One declaration per option (`hpsearch.options.Option`): `hyperparameter_search`, the sweep file and ``hpsearch
run`` refuse the same bad value with the same message, for every option of every backend. The bad values are
derived from the declarations, so a new option (or a new bound) is covered without a new case here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpsearch import hyperparameter_search
from hpsearch._option_flags import flag_of
from hpsearch.backends import backend_names, get_backend
from hpsearch.cli import main
from hpsearch.errors import SearchConfigError
from hpsearch.options import COMMON_OPTIONS, N_TRIALS, Option
from hpsearch.sweep import ConfigError, load_sweep

ROOT = Path(__file__).resolve().parents[2]

# A valid sweep of the example model, with nothing to train before the options are checked.
SWEEP: dict[str, Any] = {
    "model": "examples.digits.model:model_init",
    "data": "examples.digits.model:datasets",
    "objective": "eval_accuracy",
    "direction": "maximize",
    "n_trials": 1,
    "training_args": {"max_steps": 2, "report_to": "none", "disable_tqdm": True},
    "space": {"learning_rate": {"type": "float", "low": 1.0e-3, "high": 1.0e-1, "log": True}},
}

#: A value of another type for each kind of declared type (the first that the declaration does not take is used).
_OTHER_TYPES: tuple[tuple[Any, tuple[type, ...]], ...] = (
    ("x", (str,)),
    (True, (bool,)),
    (2.5, (float,)),
    ([1], (list, tuple)),
)


def bad_values(option: Option) -> list[Any]:
    """Values the declaration refuses, derived from it: another type, one past each bound, a value outside the
    choices, an empty one."""
    bad: list[Any] = []
    # An option built from modules takes {name: Class, ...} in a file, which cannot hold its objects: no type case.
    if object not in option.types and not option.build_from:
        bad += [v for v, kinds in _OTHER_TYPES if not any(t in option.types for t in kinds)][:1]
    if option.minimum is not None:
        bad.append(int(option.minimum) - 1 if float not in option.types else option.minimum - 0.5)
    if option.above is not None:
        bad.append(option.above)
    if option.maximum is not None:
        bad.append(option.maximum * 10)
    if option.choices:
        bad.append("no-such-choice")
    if option.non_empty:
        bad.append("" if str in option.types else {})
    return bad


def _cases() -> list[Any]:
    declared = [("random", option, True) for option in COMMON_OPTIONS.values()]
    for name in backend_names():
        declared += [(name, option, False) for option in get_backend(name).options]
    return [
        pytest.param(backend, option, value, common, id=f"{backend}-{option.name}={value!r}")
        for backend, option, common in declared
        for value in bad_values(option)
    ]


CASES = _cases()


def test_the_declarations_give_cases():
    """Every declaration that states a type, bound, choice or emptiness has a refused value here."""
    covered = {(case.values[0], case.values[1].name) for case in CASES}
    for option in COMMON_OPTIONS.values():
        assert object in option.types or ("random", option.name) in covered, option
    assert any(case.values[1].name == "n_jobs" and case.values[2] == 0 for case in CASES)  # below a bound


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    from tests.hpsearch._trials import digits_search_trainer

    return digits_search_trainer(str(tmp_path_factory.mktemp("options") / "out"))


def _write(tmp_path: Path, backend: str, **keys: Any) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({**SWEEP, "backend": backend, **keys}, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize(("backend", "option", "value", "common"), CASES)
def test_the_api_the_sweep_file_and_the_cli_refuse_a_value_alike(
    backend, option, value, common, trainer, tmp_path, monkeypatch, capsys
):
    from spaces import Float

    get_backend(backend).ensure_available()  # a registered backend's engine is installed here: never skipped
    monkeypatch.chdir(ROOT)  # the sweep's import paths resolve against the current directory
    with pytest.raises(SearchConfigError) as declared:
        option.check(value)
    message = str(declared.value)
    assert option.name in message and repr(value) in message and "pass" in message  # name, value, fix

    # The API.
    with pytest.raises(SearchConfigError) as api:
        hyperparameter_search(
            trainer,
            hp_space={"learning_rate": Float(1e-3, 1e-1)},
            n_trials=1,
            backend=backend,
            **{option.name: value},
        )
    assert str(api.value) == message

    # The sweep file, under backend_options (and at the top level for an option every backend takes).
    places = [{"backend_options": {option.name: value}}] + ([{option.name: value}] if common else [])
    for keys in places:
        path = _write(tmp_path, backend, **keys)
        with pytest.raises(ConfigError) as sweep:
            load_sweep(path)
        assert sweep.value.problem == message, keys
        where = "backend_options." if "backend_options" in keys else ""
        assert sweep.value.key == f"{where}{option.name}" and sweep.value.line is not None

    # The command line: --set for every option, and the option's own flag where it has one.
    path = _write(tmp_path, backend)
    text = json.dumps(value)  # JSON is YAML, as --set reads its value
    given = [(["--set", f"backend_options.{option.name}={text}"], f"--set backend_options.{option.name}=...")]
    if option.cli_flag:
        given.append(([flag_of(option), text], flag_of(option)))
    for flags, named in given:
        assert main(["run", str(path), "--no-progress", *flags]) == 2
        err = capsys.readouterr().err
        assert f"backend_options.{option.name}: {message} (set by {named})" in err, err


@pytest.mark.parametrize("value", [0, -1, True, "3", 2.0, None])
def test_n_trials_is_refused_alike_by_the_api_the_sweep_file_and_the_cli(
    value, trainer, tmp_path, monkeypatch, capsys
):
    """n_trials is declared once (`N_TRIALS`): the API, the sweep file and ``hpsearch run`` (--n-trials and --set)
    refuse a bad value with its one message."""
    from spaces import Float

    monkeypatch.chdir(ROOT)
    with pytest.raises(SearchConfigError) as declared:
        N_TRIALS.check(value)
    message = str(declared.value)
    assert (
        f"n_trials={value!r}" in message and "must be an integer >= 1" in message and "pass e.g." in message
    )

    with pytest.raises(SearchConfigError) as api:
        hyperparameter_search(
            trainer, hp_space={"learning_rate": Float(1e-3, 1e-1)}, n_trials=value, backend="random"
        )
    assert str(api.value) == message

    path = _write(tmp_path, "random", n_trials=value)
    with pytest.raises(ConfigError) as sweep:
        load_sweep(path)
    assert sweep.value.problem == message and sweep.value.key == "n_trials" and sweep.value.line is not None

    text = json.dumps(value)  # JSON is YAML, as the command line reads the value
    for flags, named in (
        (["--n-trials", text], "--n-trials"),
        (["--set", f"n_trials={text}"], "--set n_trials=..."),
    ):
        assert main(["run", str(path), "--no-progress", *flags]) == 2
        err = capsys.readouterr().err
        assert f"n_trials: {message} (set by {named})" in err, err


def test_the_option_flags_help_is_the_declaration(capsys):
    assert main(["run", "--help"]) == 0
    # argparse wraps the help: compare words.
    words = " ".join(capsys.readouterr().out.split())
    flagged = [option for option in COMMON_OPTIONS.values() if option.cli_flag]
    assert flagged
    for option in flagged:
        assert flag_of(option) in words
        assert " ".join(f"{option.help}; {option.expected()}".split()) in words


def test_an_engine_object_is_checked_against_the_engine_class_it_declares():
    """``classes`` name the engine's own classes (imported only to check such a value): an object of another kind is
    refused by the declaration, naming the class and an example, before any adapter is built."""
    import optuna

    options = {option.name: option for option in get_backend("optuna").options}
    assert isinstance(
        options["sampler"].check(optuna.samplers.RandomSampler(seed=0)), optuna.samplers.BaseSampler
    )
    with pytest.raises(SearchConfigError) as refused:
        options["pruner"].check(optuna.samplers.RandomSampler(seed=0))
    assert "(RandomSampler) must be an instance of optuna.pruners.BasePruner" in str(refused.value)
    assert "pass e.g. pruner=optuna.pruners.MedianPruner()" in str(refused.value)
    assert options["storage"].check("sqlite:///study.db") == "sqlite:///study.db"
    with pytest.raises(
        SearchConfigError, match=r"storage=5 \(int\) must be a string or an instance of optuna"
    ):
        options["storage"].check(5)
