"""What a trainer does once per trial that the next trial need not do again (issue 32), each shown by behaviour:
a finished trial's accelerator goes to the next trial built with the same accelerator settings."""

from __future__ import annotations

import pytest
import torch

from tests._linear import linear_trainer
from trainer import Trainer, _precision


@pytest.fixture(autouse=True)
def _nothing_kept():
    _precision._kept.clear()
    yield
    _precision._kept.clear()


def _trial(base: Trainer, **changes) -> Trainer:
    return base.for_trial(base.args.replace(**changes) if changes else base.args)


def test_a_finished_trials_accelerator_goes_emptied_to_the_next_trial(tmp_path):
    base = linear_trainer(tmp_path)
    first = _trial(base)
    first.train()
    first.evaluate()
    accelerator = first.accelerator
    assert accelerator._models  # what the run prepared is listed until the trainer is released
    first.release_memory()
    second = _trial(base, learning_rate=1e-3)
    assert second.accelerator is accelerator
    assert (accelerator._models, accelerator._optimizers, accelerator._dataloaders, accelerator.step) == (
        [],
        [],
        [],
        0,
    )
    second.train()
    assert [m for m in accelerator._models] == [second.model]  # this run's model only
    third = _trial(base)
    assert third.accelerator is not accelerator  # taken by `second`, which still holds it: a new one


def test_a_trial_with_other_accelerator_settings_builds_its_own(tmp_path):
    """The accumulation steps (part of what an accelerator is built for) differ: no reuse; and a kept accelerator,
    taken after another trainer changed accelerate's shared accumulation setting, has its own setting back."""
    base = linear_trainer(tmp_path)
    first = _trial(base, gradient_accumulation_steps=2)
    first.train()
    kept = first.accelerator
    first.release_memory()
    other = _trial(base, gradient_accumulation_steps=4)
    assert other.accelerator is not kept
    assert other.accelerator.gradient_accumulation_steps == 4
    again = _trial(base, gradient_accumulation_steps=2)
    assert again.accelerator is kept
    assert again.accelerator.gradient_accumulation_steps == 2


def test_a_trial_on_a_reused_accelerator_trains_as_on_a_new_one(tmp_path):
    """The same trial on a new accelerator, then twice on the kept one: the same loss, weights and evaluation."""
    base = linear_trainer(tmp_path, max_steps=6, gradient_accumulation_steps=2, learning_rate=0.05)
    runs, accelerators = [], []
    for _ in range(3):
        trial = _trial(base)
        accelerators.append(trial.accelerator)
        loss = trial.train().training_loss
        weights = [p.detach().clone() for p in trial.model.parameters()]
        runs.append((loss, weights, trial.evaluate()["eval_loss"]))
        trial.release_memory()
    assert accelerators[1] is accelerators[0] and accelerators[2] is accelerators[0]
    for loss, weights, eval_loss in runs[1:]:
        assert loss == runs[0][0] and eval_loss == runs[0][2]
        assert all(torch.equal(a, b) for a, b in zip(weights, runs[0][1]))


def test_an_accelerator_holding_something_of_its_run_is_not_kept(tmp_path):
    """A checkpointed object registered with the accelerator (or a tracker, a trigger, a state hook) would carry over
    to the next trial: such an accelerator is dropped, and the next trial gets a new one."""
    base = linear_trainer(tmp_path)
    first = _trial(base)
    first.train()
    kept = first.accelerator

    class _Counter:
        def state_dict(self):
            return {}

        def load_state_dict(self, state):
            pass

    kept.register_for_checkpointing(_Counter())
    first.release_memory()
    assert _trial(base).accelerator is not kept


def test_the_masking_rule_reads_the_environment_again_only_when_it_changed(monkeypatch):
    """The secret environment values are kept between texts (every event line of a search is masked), and read
    again as soon as the environment changes: a secret set, changed or removed counts from the next text on."""
    from trainer import redact as rule

    text = "token abcdef123 then zyxwvu987"
    monkeypatch.delenv("R8_TEST_API_KEY", raising=False)
    assert rule.redact(text) == text
    assert rule._environment_secrets() is rule._environment_secrets()  # unchanged: not read again
    monkeypatch.setenv("R8_TEST_API_KEY", "abcdef123")
    assert rule.redact(text) == "token *** then zyxwvu987"
    monkeypatch.setenv("R8_TEST_API_KEY", "zyxwvu987")
    assert rule.redact(text) == "token abcdef123 then ***"
    monkeypatch.delenv("R8_TEST_API_KEY")
    assert rule.redact(text) == text
