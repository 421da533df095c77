"""A native ``hp_space(trial)`` written for one backend (Optuna's ``trial.suggest_*``) given to another is refused
before any work, naming the backend it was written for and the portable form, not with the AttributeError the
user's own function raised."""

from __future__ import annotations

import pytest

from hpsearch import SearchConfigError, hyperparameter_search
from hpsearch.backends import backend_names, get_backend


def optuna_style(trial):
    return {
        "learning_rate": trial.suggest_float("learning_rate", 1e-4, 1e-2, log=True),
        "hidden": trial.suggest_categorical("hidden", [8, 16]),
    }


OTHERS = [name for name in backend_names() if not get_backend(name).trial_api]


@pytest.mark.parametrize("backend", OTHERS)
def test_an_optuna_style_space_on_another_backend_names_optuna_and_the_portable_form(
    backend, make_trainer, output_dir
):
    with pytest.raises(SearchConfigError) as caught:
        hyperparameter_search(make_trainer(), hp_space=optuna_style, backend=backend, n_trials=1)
    message = str(caught.value)
    assert "written for backend='optuna'" in message and "trial.suggest_float" in message, message
    assert f"runs on backend={backend!r}" in message and "spaces.Float(" in message, message
    assert not output_dir.exists()


def test_the_same_function_runs_on_the_backend_it_was_written_for(make_trainer):
    best = hyperparameter_search(make_trainer(), hp_space=optuna_style, backend="optuna", n_trials=1)
    assert set(best.hyperparameters) == {"learning_rate", "hidden"}


def test_a_native_space_that_fails_for_its_own_reasons_keeps_its_error(make_trainer):
    def broken(trial):
        raise KeyError("the user's own bug")

    with pytest.raises(Exception) as caught:
        hyperparameter_search(make_trainer(), hp_space=broken, backend="sigopt", n_trials=1, driver="lite")
    assert "the user's own bug" in str(caught.value)
    assert "written for" not in str(caught.value)
