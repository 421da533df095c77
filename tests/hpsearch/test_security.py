"""Nothing a search loads is unpickled, every user string in a report is escaped, and no secret is written.

- a malicious pickle planted where a search's checkpoint or ``search.json`` is expected is refused, never run;
- the HTML report escapes a payload in trial names (``hp_name``), parameter values and trial errors;
- a PostgreSQL password (in the storage URL) and ``SIGOPT_API_TOKEN`` appear in no log line, no printed
  output and no file a run writes (every file under output_dir, the reports included, is searched).
"""

from __future__ import annotations

import logging
import os
import pathlib
import pickle
import re
from pathlib import Path

import optuna
import pytest
import torch

import hpsearch
import spaces
from hpsearch import SearchResult, TrialState
from hpsearch.cli import main as cli_main
from hpsearch.report import render_markdown, write_html
from tests._digits import DigitsMLP, digits_trainer
from tests.hpsearch._postgres import postgres  # noqa: F401 - the session fixture
from trainer import Trainer
from trainer._checkpoint import load_model_weights

optuna.logging.set_verbosity(optuna.logging.WARNING)


class _Payload:
    """Unpickling this creates ``marker``: if the marker exists, untrusted data was executed."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (self.marker,))


def _plant(path: Path, marker: Path) -> None:
    path.write_bytes(pickle.dumps(_Payload(marker), protocol=2))  # torch.load expects protocol 2
    # The payload works: loading it with plain pickle would run it (proved on a copy).
    probe = path.with_name(path.name + ".probe-marker")
    pickle.loads(pickle.dumps(_Payload(probe)))
    assert probe.exists()
    probe.unlink()


def _trainer(output_dir: Path, model_init=None, **overrides) -> Trainer:
    settings = dict(
        num_train_epochs=1,
        eval_strategy="epoch",
        save_strategy="epoch",
        per_device_train_batch_size=64,
        logging_strategy="no",
        disable_tqdm=True,
        report_to="none",
    )
    settings.update(overrides)
    return digits_trainer(str(output_dir), model_init or (lambda trial: DigitsMLP(hidden=16)), **settings)


# ---------------------------------------------------------------------------------------------- pickles
@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> tuple[Path, hpsearch.BestRun]:
    out = tmp_path_factory.mktemp("searched") / "search"
    best = hpsearch.hyperparameter_search(
        _trainer(out),
        hp_space={"learning_rate": spaces.Float(1e-3, 1e-2)},
        compute_objective="eval_loss",
        n_trials=1,
        backend="optuna",
    )
    assert best.checkpoint is not None
    return out, best


@pytest.mark.parametrize("how", ["pickle-instead-of-safetensors", "pickle-named-model.safetensors"])
def test_best_checkpoint_with_a_planted_pickle_is_refused(searched, tmp_path, how):
    import shutil

    _, best = searched
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(best.checkpoint, checkpoint)
    marker = tmp_path / "pwned"
    weights = checkpoint / "model.safetensors"
    if how == "pickle-instead-of-safetensors":
        weights.unlink()
        _plant(checkpoint / "pytorch_model.bin", marker)
        with pytest.raises(FileNotFoundError, match="only read from safetensors"):
            load_model_weights(DigitsMLP(hidden=16), str(checkpoint))
    else:
        _plant(weights, marker)
        with pytest.raises(
            Exception
        ) as info:  # safetensors refuses the header; the bytes are never unpickled
            load_model_weights(DigitsMLP(hidden=16), str(checkpoint))
        assert "safetensors" in type(info.value).__module__ or "header" in str(info.value).lower()
    assert not marker.exists()


@pytest.mark.parametrize("victim", ["optimizer.pt", "rng_state.pth"])
def test_resuming_a_trial_checkpoint_with_a_planted_pickle_is_refused(searched, tmp_path, victim):
    import shutil

    _, best = searched
    run = tmp_path / "run"
    shutil.copytree(Path(best.checkpoint).parent, run)
    checkpoint = run / Path(best.checkpoint).name
    marker = tmp_path / "pwned"
    _plant(checkpoint / victim, marker)
    trainer = _trainer(run, num_train_epochs=2)
    with pytest.raises(pickle.UnpicklingError):
        trainer.train(resume_from_checkpoint=str(checkpoint))
    assert not marker.exists()


def test_a_pickle_named_search_json_is_refused_cleanly(tmp_path):
    marker = tmp_path / "pwned"
    _plant(tmp_path / "search.json", marker)
    with pytest.raises(ValueError, match=r"search\.json.*not valid JSON"):
        SearchResult.load(tmp_path)
    assert not marker.exists()
    # `hpsearch report` on that folder refuses it the same way (exit 2), still without unpickling.
    assert cli_main(["report", str(tmp_path)]) == 2
    assert not marker.exists()


# ---------------------------------------------------------------------------------------------- reports
NAME_PAYLOAD = "<script>alert('name')<script><img src=x onerror=alert('name')>"
PARAM_PAYLOAD = "</script><script>alert('param')</script>"
ERROR_PAYLOAD = "</script><script>alert('error')</script><b onmouseover=alert('error')>"


@pytest.mark.slow
def test_html_report_escapes_names_params_and_errors(tmp_path):
    def model_init(trial):
        if trial is not None and trial.number == 1:
            raise RuntimeError(ERROR_PAYLOAD)
        return DigitsMLP(hidden=16)

    out = tmp_path / "search"
    best = hpsearch.hyperparameter_search(
        _trainer(out, model_init=model_init, save_strategy="no"),
        hp_space={"learning_rate": spaces.Float(1e-3, 1e-2), "tag": spaces.Categorical([PARAM_PAYLOAD])},
        compute_objective="eval_loss",
        n_trials=3,
        backend="optuna",
        hp_name=lambda trial: f"{NAME_PAYLOAD}-{trial.number}",
    )
    result = best.run_summary
    assert [r.state for r in result.records].count(TrialState.FAIL) == 1
    assert best.name.startswith(NAME_PAYLOAD) and best.hyperparameters["tag"] == PARAM_PAYLOAD

    pages = [Path(write_html(result, str(tmp_path / "report.html")))]
    assert cli_main(["report", str(out), "-o", str(tmp_path / "cli-report.html")]) == 0
    pages.append(tmp_path / "cli-report.html")
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for raw in ("<script>alert(", "<img src=x", "<b onmouseover", "</script><script>alert"):
            assert raw not in text, f"{raw!r} unescaped in {page.name}"
        # The strings are shown, escaped, not dropped.
        assert "&lt;script&gt;alert(&#x27;name&#x27;)" in text
        assert "&lt;/script&gt;&lt;script&gt;alert(&#x27;param&#x27;)" in text
        assert "&lt;b onmouseover=alert(&#x27;error&#x27;)&gt;" in text


# ---------------------------------------------------------------------------------------------- secrets
def _everything_written(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _assert_absent(secret: str, texts: dict[str, bytes]) -> None:
    leaks = [name for name, data in texts.items() if secret.encode() in data]
    assert not leaks, f"the secret was written to {leaks}"


@pytest.mark.parametrize("form", ["userinfo", "query"])
def test_postgres_password_appears_in_no_log_result_or_report(form, postgres, tmp_path, caplog, capsys):  # noqa: F811
    password = postgres.password
    url = (
        postgres.url
        if form == "userinfo"
        else (
            f"postgresql+psycopg2://{postgres.user}@127.0.0.1:{postgres.port}/{postgres.database}?password={password}"
        )
    )
    study_name = f"secret-free-{form}"
    out = tmp_path / "search"
    caplog.set_level(logging.DEBUG)
    optuna.logging.set_verbosity(optuna.logging.DEBUG)
    try:

        def model_init(trial):
            if trial is not None and trial.number == 1:
                raise RuntimeError("a failing trial, so that errors are logged too")
            return DigitsMLP(hidden=16)

        best = hpsearch.hyperparameter_search(
            _trainer(out, model_init=model_init),  # checkpoints too: training_args.json, trainer_state.json
            hp_space={"learning_rate": spaces.Float(1e-3, 1e-2)},
            compute_objective="eval_loss",
            n_trials=3,
            backend="optuna",
            storage=url,
            study_name=study_name,
            load_if_exists=True,
        )
    finally:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
    write_html(best.run_summary, str(out / "report.html"))
    (out / "report.md").write_text(render_markdown(best.run_summary))
    assert cli_main(["report", str(out), "--markdown"]) == 0
    printed = capsys.readouterr()

    # The search really used the password (the server refuses host connections without it).
    assert optuna.load_study(study_name=study_name, storage=postgres.url).trials
    settings = SearchResult.load(out).settings
    assert settings["storage"] == url.replace(password, "***")
    texts = _everything_written(out)
    assert any(name.endswith("search.json") for name in texts) and any("run-" in name for name in texts)
    texts["<log records>"] = "\n".join(r.getMessage() + str(r.args) for r in caplog.records).encode()
    texts["<stdout>"] = printed.out.encode()
    texts["<stderr>"] = printed.err.encode()
    assert caplog.records  # something was logged, and searched
    _assert_absent(password, texts)


@pytest.mark.slow
def test_sigopt_token_appears_in_no_log_result_or_report(tmp_path, monkeypatch, caplog, capsys):
    token = "sigopt-token-" + os.urandom(8).hex()
    monkeypatch.setenv("SIGOPT_API_TOKEN", token)
    caplog.set_level(logging.DEBUG)
    out = tmp_path / "search"
    best = hpsearch.hyperparameter_search(
        _trainer(out, save_strategy="no"),
        hp_space={"learning_rate": spaces.Float(1e-3, 1e-2)},
        compute_objective="eval_loss",
        n_trials=2,
        backend="sigopt",
        driver="lite",
    )
    write_html(best.run_summary, str(out / "report.html"))
    assert cli_main(["report", str(out), "--markdown"]) == 0
    printed = capsys.readouterr()
    texts = _everything_written(out)
    texts["<log records>"] = "\n".join(r.getMessage() + str(r.args) for r in caplog.records).encode()
    texts["<stdout>"] = printed.out.encode()
    texts["<stderr>"] = printed.err.encode()
    texts["<environment of the search>"] = repr(SearchResult.load(out).settings).encode()
    _assert_absent(token, texts)


def test_torch_loads_in_this_codebase_are_weights_only():
    """Every torch.load in the packages passes weights_only=True (the pickle-free loader)."""
    root = Path(__file__).resolve().parents[2]
    offenders = []
    for package in ("trainer", "hpsearch", "spaces"):
        for path in (root / package).rglob("*.py"):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if "torch.load(" in line and "weights_only=True" not in line:
                    offenders.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
                # Pickles cross only the pipes between the driver and the worker processes it spawned (as
                # multiprocessing's own connections do), never a file: no pickle.load of a file anywhere.
                private_pipe = path.relative_to(root).parts[:2] == ("hpsearch", "executor")
                # (pickletools, which only reads a pickle's opcodes and runs none, is not pickle.)
                if "pickle.load(" in line or (
                    ("pickle.loads" in line or re.search(r"\bimport pickle\b", line)) and not private_pipe
                ):
                    offenders.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    assert not offenders, offenders
    assert torch.load  # the check above is only meaningful while torch.load is what loads tensors


# ---------------------------------------------------------------------------------------------- every URL form
SPECIAL = "pw/Slash#9?q"


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        (
            f"postgresql+psycopg2://u:{SPECIAL}@127.0.0.1:5432/db",
            "postgresql+psycopg2://u:***@127.0.0.1:5432/db",
        ),
        ("postgresql://u:pw%2FSlash%239%3Fq@host/db", "postgresql://u:***@host/db"),
        ("mysql://u:p@ss@h:3306/d?charset=utf8", "mysql://u:***@h:3306/d?charset=utf8"),
        (
            "postgresql://u@h/db?sslmode=require&password=pw/Slash&token=abc%23d",
            "postgresql://u@h/db?sslmode=require&password=***&token=***",
        ),
        ("http://user:s3cret-pw@[::1]:5000", "http://user:***@[::1]:5000"),
        ("sqlite:////tmp/a@b/x.db", "sqlite:////tmp/a@b/x.db"),
        ("http://127.0.0.1:5000/api", "http://127.0.0.1:5000/api"),
    ],
)
def test_every_url_form_loses_its_password(url, masked):
    from hpsearch._redact import redact, redact_url

    assert redact_url(url) == masked
    assert redact(f"opening {url}: refused") == f"opening {masked}: refused"


def test_a_password_seen_in_a_url_is_masked_where_it_appears_alone():
    from hpsearch._redact import redact, redact_url

    redact_url("postgresql://u:pw%2FAlone%239@host/db")  # the storage URL, as a search sees it first
    assert redact("FATAL: password pw/Alone#9 rejected; encoded pw%2FAlone%239") == (
        "FATAL: password *** rejected; encoded ***"
    )


def test_secret_environment_values_are_read_at_each_redaction(monkeypatch):
    from hpsearch._redact import redact

    assert redact("key k3y-v4lue-one") == "key k3y-v4lue-one"  # the variable is not set yet
    monkeypatch.setenv("SCALE_TEST_API_KEY", "k3y-v4lue-one")
    assert redact("key k3y-v4lue-one") == "key ***"
    monkeypatch.setenv("SCALE_TEST_API_KEY", "k3y-v4lue-two")  # rotated: the new value is masked
    assert redact("keys k3y-v4lue-one k3y-v4lue-two") == "keys k3y-v4lue-one ***"
    monkeypatch.setenv("SCALE_TEST_NOTE", "k3y-v4lue-two")  # not a secret name: its own value stays
    monkeypatch.delenv("SCALE_TEST_API_KEY")
    assert redact("note k3y-v4lue-two") == "note k3y-v4lue-two"


@pytest.mark.slow
@pytest.mark.parametrize("form", ["raw", "percent-encoded"])
def test_a_password_holding_slash_hash_and_question_mark_is_written_nowhere(
    form,
    postgres,  # noqa: F811 - the session fixture
    tmp_path,
    caplog,
    capsys,
):
    from urllib.parse import quote

    user = "special_" + form.replace("-", "_")
    postgres.create_user(user, SPECIAL)
    password = SPECIAL if form == "raw" else quote(SPECIAL, safe="")
    url = f"postgresql+psycopg2://{user}:{password}@127.0.0.1:{postgres.port}/{user}"
    out = tmp_path / "search"
    caplog.set_level(logging.DEBUG)
    best = hpsearch.hyperparameter_search(
        _trainer(out, save_strategy="no"),
        hp_space={"learning_rate": spaces.Float(1e-3, 1e-2)},
        compute_objective="eval_loss",
        n_trials=2,
        backend="optuna",
        storage=url,
        study_name="special",
        dashboard=False,
    )
    assert len(best.run_summary.records) == 2
    write_html(best.run_summary, str(out / "report.html"))
    assert cli_main(["report", str(out), "--markdown"]) == 0
    from hpsearch.dashboard import FolderReader
    from hpsearch.dashboard._views import search_view

    reader = FolderReader(out)
    reader.refresh()
    dashboard_json = search_view(reader.snapshot(), None, reader.warning, reader.has_search).message()
    printed = capsys.readouterr()
    texts = _everything_written(out)
    texts["<dashboard json>"] = dashboard_json.encode()
    texts["<log records>"] = "\n".join(r.getMessage() + str(r.args) for r in caplog.records).encode()
    texts["<stdout>"] = printed.out.encode()
    texts["<stderr>"] = printed.err.encode()
    texts["<printed settings>"] = repr(SearchResult.load(out).settings).encode()
    for piece in (SPECIAL, quote(SPECIAL, safe=""), "Slash#9", "Slash%239"):
        _assert_absent(piece, texts)
    assert f"{user}:***@127.0.0.1" in SearchResult.load(out).settings["storage"]


@pytest.mark.slow
def test_tracker_errors_and_tracker_params_hold_no_secret(tmp_path, monkeypatch, caplog, capsys):
    """MLflow at a URI with a password (unreachable: its error quotes the URI) and TensorBoard's hparams with
    secret-named trial parameters: no secret in any file, log line or printed text."""
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri_password = "mlflow-Pw/x#1?y"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://alice:{uri_password}@127.0.0.1:{port}")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "3")
    param_secrets = {"api_key": "param-apikey-0123456789", "hf_token": "param-hftoken-0123456789"}
    caplog.set_level(logging.DEBUG)
    out = tmp_path / "search"
    best = hpsearch.hyperparameter_search(
        _trainer(out, save_strategy="no", report_to=["mlflow", "tensorboard"], logging_strategy="epoch"),
        hp_space={
            "learning_rate": spaces.Float(1e-3, 1e-2),
            **{k: spaces.Categorical([v]) for k, v in param_secrets.items()},
        },
        compute_objective="eval_loss",
        n_trials=2,
        backend="optuna",
    )
    records = best.run_summary.records
    assert [r.state for r in records] == [TrialState.COMPLETE] * 2
    assert all(
        "mlflow" in " ".join(r.extra.get("tracker_errors", [])) for r in records
    )  # MLflow really failed
    assert "alice:***@127.0.0.1" in " ".join(records[0].extra["tracker_errors"])
    assert list(out.rglob("events.out.tfevents*")), "TensorBoard wrote its event files"
    printed = capsys.readouterr()
    texts = _everything_written(out)
    texts["<log records>"] = "\n".join(r.getMessage() + str(r.args) for r in caplog.records).encode()
    texts["<stdout>"] = printed.out.encode()
    texts["<stderr>"] = printed.err.encode()
    for secret in (uri_password, *param_secrets.values()):
        tracker_files = {k: v for k, v in texts.items() if "tfevents" in k or k.startswith("<")}
        _assert_absent(secret, tracker_files if secret in param_secrets.values() else texts)


def test_hpsearch_names_the_trainers_masking_rule_and_its_mask():
    """hpsearch imports the rule on first use (so `import hpsearch` loads no torch): the same mask, the same rule."""
    from hpsearch import _redact
    from trainer import redact as rule

    assert _redact.MASK == rule.MASK
    url = f"postgresql://u:{SPECIAL}@127.0.0.1:5432/db"
    assert _redact.redact_url(url) == rule.redact_url(url) == "postgresql://u:***@127.0.0.1:5432/db"
    assert _redact.safe_params({"api_key": "k", "lr": 1}) == rule.safe_params({"api_key": "k", "lr": 1})
    assert _redact.is_secret_name("hf_token") and not _redact.is_secret_name("learning_rate")
