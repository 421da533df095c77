"""The sweep file for real setups: keys for a Hugging Face text setup (processing_class, data_collator, trainer),
the options every backend takes at the top level, one rule for its paths, and its published reference."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from hpsearch.cli import main
from hpsearch.sweep import ConfigError, load_sweep

ROOT = Path(__file__).resolve().parents[2]

SWEEP: dict[str, Any] = {
    "model": "examples.digits.model:model_init",
    "data": "examples.digits.model:datasets",
    "metrics": "examples.digits.model:compute_metrics",
    "objective": "eval_accuracy",
    "direction": "maximize",
    "n_trials": 2,
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
    "backend": "random",
}


@pytest.fixture(autouse=True)
def _run_from_root(monkeypatch):
    import torch

    threads = torch.get_num_threads()
    monkeypatch.chdir(ROOT)
    yield
    torch.set_num_threads(threads)


def write(folder: Path, **changes: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump({**SWEEP, **changes}, sort_keys=False), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------- HF text setup
def test_processing_class_data_collator_and_trainer_factory_are_what_the_trials_use(
    tmp_path, monkeypatch, capsys
):
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("HPSEARCH_TEST_MARKS", str(marks))
    path = write(
        tmp_path,
        processing_class="tests.hpsearch._sweep_hf:tokenizer",
        data_collator="tests.hpsearch._sweep_hf:PaddingCollator",
        trainer="tests.hpsearch._sweep_hf:make_trainer",
        output_dir="out",
    )
    assert main(["run", str(path), "--no-progress"]) == 0, capsys.readouterr().err
    assert (marks / "tokenizer").read_text().splitlines() == [""]  # made once
    # The factory got the collator and the tokenizer with Trainer's other keyword arguments.
    factory = (marks / "factory").read_text().split()
    assert factory == [
        "args,compute_metrics,data_collator,eval_dataset,model_init,processing_class,train_dataset"
    ]
    # Every trial's batches went through the collator, built with the tokenizer.
    assert set((marks / "collator").read_text().split()) == {"test-tokenizer"}
    from hpsearch import SearchResult

    assert len(SearchResult.load(tmp_path / "out").records) == 2


def test_a_collate_function_is_used_as_it_is(tmp_path, monkeypatch, capsys):
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("HPSEARCH_TEST_MARKS", str(marks))
    path = write(tmp_path, data_collator="tests.hpsearch._sweep_hf:collate", n_trials=1)
    assert main(["run", str(path), "--no-progress"]) == 0, capsys.readouterr().err
    assert (marks / "collate").exists()


def test_a_trainer_factory_that_returns_no_trainer_is_refused_at_its_line(tmp_path, capsys):
    path = write(tmp_path, trainer="tests.hpsearch._sweep_hf:not_a_trainer")
    assert main(["run", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("trainer:"))
    assert f"{path}:{line}: trainer: the trainer factory returned object, not a trainer.Trainer" in err


# ---------------------------------------------------------------------------------------------- shared options
def test_shared_options_are_taken_at_the_top_level_as_under_backend_options(tmp_path):
    top = load_sweep(write(tmp_path / "a", max_failed_trials=5, trial_timeout=30, objective_scope="best"))
    nested = load_sweep(
        write(
            tmp_path / "b",
            backend_options={"max_failed_trials": 5, "trial_timeout": 30, "objective_scope": "best"},
        )
    )
    for name in ("max_failed_trials", "trial_timeout", "objective_scope"):
        assert top.backend_options[name] == nested.backend_options[name]
    same = load_sweep(write(tmp_path / "c", max_failed_trials=5, backend_options={"max_failed_trials": 5}))
    assert same.backend_options["max_failed_trials"] == 5


def test_a_shared_option_given_twice_with_different_values_is_refused(tmp_path):
    path = write(tmp_path, max_failed_trials=5, backend_options={"max_failed_trials": 2})
    with pytest.raises(ConfigError) as caught:
        load_sweep(path)
    message = str(caught.value)
    assert (
        "max_failed_trials is given twice with different values (5 here and backend_options.max_failed_trials=2)"
        in message
    )
    assert f"{path}:" in message


def test_a_bad_shared_option_at_the_top_level_names_key_value_and_line(tmp_path):
    path = write(tmp_path, max_failed_trials=0)
    with pytest.raises(ConfigError, match=r"max_failed_trials.*0"):
        load_sweep(path)


def test_set_on_the_command_line_wins_over_the_file(tmp_path):
    path = write(tmp_path, max_failed_trials=5)
    config = load_sweep(path, overrides=["backend_options.max_failed_trials=7"])
    assert config.backend_options["max_failed_trials"] == 7


# ---------------------------------------------------------------------------------------------- paths
def test_every_path_in_the_file_is_relative_to_the_files_folder(tmp_path):
    folder = tmp_path / "sweeps" / "text"
    path = write(
        folder,
        backend="optuna",
        output_dir="out",
        warm_start=["../earlier", "/abs/search"],
        backend_options={"storage": "sqlite:///study.db"},
        training_args={**SWEEP["training_args"], "logging_dir": "logs"},
    )
    assert Path.cwd() == ROOT  # not the file's folder
    config = load_sweep(path)
    base = folder.resolve()
    assert config.output_dir == str(base / "out")
    assert config.backend_options["warm_start"] == [str(base.parent / "earlier"), "/abs/search"]
    assert config.backend_options["storage"] == f"sqlite:///{base / 'study.db'}"
    assert config.training_args["logging_dir"] == str(base / "logs")


def test_paths_of_every_form_follow_the_rule(tmp_path):
    folder = tmp_path / "s"
    journal = load_sweep(
        write(
            folder,
            backend="optuna",
            backend_options={"storage": "journal/study.log", "warm_start": "earlier"},
        )
    )
    assert journal.backend_options["storage"] == str(folder.resolve() / "journal" / "study.log")
    assert journal.backend_options["warm_start"] == str(folder.resolve() / "earlier")
    kept = load_sweep(
        write(
            folder, backend="optuna", backend_options={"storage": "postgresql+psycopg2://user@db-host/sweeps"}
        )
    )
    assert kept.backend_options["storage"] == "postgresql+psycopg2://user@db-host/sweeps"
    token = load_sweep(
        write(folder, backend="optuna", backend_options={"storage": "sqlite:///{output_dir}/s.db"})
    )
    assert token.backend_options["storage"] == f"sqlite:///{token.output_dir}/s.db"


def test_a_path_given_on_the_command_line_is_relative_to_the_current_directory(tmp_path):
    path = write(tmp_path / "s")
    config = load_sweep(path, overrides=["warm_start=earlier"])
    assert config.backend_options["warm_start"] == str(ROOT / "earlier")


# ---------------------------------------------------------------------------------------------- the reference
def _readme_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    begin, end = "<!-- sweep-schema:begin -->\n", "<!-- sweep-schema:end -->"
    return text[text.index(begin) + len(begin) : text.index(end)]


def test_the_readme_reference_is_the_generated_schema_and_hpsearch_schema_prints_it(capsys):
    from hpsearch._sweep_schema import schema_markdown

    generated = schema_markdown()
    assert _readme_section() == generated, (
        "README is stale: paste the output of `hpsearch schema` between the markers"
    )
    assert main(["schema"]) == 0
    assert capsys.readouterr().out == generated


def test_the_reference_lists_every_key_every_option_and_the_path_rule():
    from hpsearch._sweep_schema import schema_markdown
    from hpsearch.backends import backend_names, get_backend
    from hpsearch.sweep import KEYS

    text = schema_markdown()
    for key in KEYS:
        assert f"| `{key}` |" in text
    for name in backend_names():
        for option in get_backend(name).options:
            assert f"| `{option.name}` |" in text
    assert "relative to the folder that holds the file" in text
    assert "`warm_start`" in text and "`storage` (optuna)" in text
