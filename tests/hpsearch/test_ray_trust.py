"""Ray's ``resume=True`` unpickles Tune's ``tuner.pkl`` and experiment state: only state this user's searches
signed (a keyed digest, `hpsearch._trust`) is restored; a planted or changed file is refused before Tune loads it."""

from __future__ import annotations

import os
import pathlib
import pickle
from pathlib import Path

import pytest

from hpsearch import _trust, hyperparameter_search
from hpsearch.trial import TrialState
from spaces import Float
from tests.hpsearch import _ray_cluster as rc

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (self.marker,))


def _plant(path: Path, marker: Path) -> None:
    path.write_bytes(pickle.dumps(_Payload(marker)))


# ---------------------------------------------------------------------------------------------- the digest
def test_a_signed_folder_passes_and_any_change_or_foreign_key_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("HPSEARCH_STATE_KEY_FILE", str(tmp_path / "keys" / "mine.key"))
    state = tmp_path / "state"
    state.mkdir()
    (state / "tuner.pkl").write_bytes(b"tune's own bytes")
    (state / "experiment_state-1.json").write_text("{}")
    with pytest.raises(_trust.UntrustedStateError, match=r"holds no hpsearch-state\.digest.*not loaded"):
        _trust.check_folder(state, "resume=True")
    _trust.sign_folder(state)
    assert oct((tmp_path / "keys" / "mine.key").stat().st_mode & 0o777) == "0o600"
    _trust.check_folder(state, "resume=True")  # as written: trusted
    (state / "tuner.pkl").write_bytes(b"planted bytes")
    with pytest.raises(_trust.UntrustedStateError, match=r"'tuner\.pkl'.*changed since"):
        _trust.check_folder(state, "resume=True")
    _trust.sign_folder(state)
    (state / "searcher-state.pkl").write_bytes(b"an added file")
    with pytest.raises(_trust.UntrustedStateError, match=r"'searcher-state\.pkl'"):
        _trust.check_folder(state, "resume=True")
    (state / "searcher-state.pkl").unlink()
    monkeypatch.setenv("HPSEARCH_STATE_KEY_FILE", str(tmp_path / "keys" / "someone-else.key"))
    with pytest.raises(_trust.UntrustedStateError, match="changed since"):
        _trust.check_folder(state, "resume=True")


# ---------------------------------------------------------------------------------------------- Ray for real
def _search(out: Path, address: str, **kw):
    return hyperparameter_search(
        rc.make_trainer(str(out), epochs=1),
        hp_space={"learning_rate": Float(1e-3, 1e-1, log=True)},
        compute_objective="eval_accuracy",
        n_trials=1,  # what is checked is the experiment folder Tune resumes from: one trial writes it
        direction="maximize",
        backend="ray",
        max_concurrent_trials=1,
        address=address,
        **kw,
    )


def _experiment(out: Path) -> Path:
    found = [p.parent for p in out.rglob("tuner.pkl")]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_planted_tuner_pkl_is_never_unpickled(ray_cluster, tmp_path):
    # Every search on the session's cluster: what is checked is the experiment folder, not which Ray runs it.
    address = ray_cluster.address
    out = tmp_path / "out"
    _search(out, address)
    experiment = _experiment(out)
    assert (experiment / _trust.DIGEST_FILE).is_file()
    _search(out, address, resume=True)  # its own state: restored

    marker = tmp_path / "pwned"
    _plant(experiment / "tuner.pkl", marker)
    with pytest.raises(_trust.UntrustedStateError, match=r"resume=True.*'tuner\.pkl'.*changed since"):
        _search(out, address, resume=True)
    assert not marker.exists()
    with pytest.raises(_trust.UntrustedStateError, match="changed since"):  # the folder named explicitly too
        _search(tmp_path / "other", address, resume=str(experiment))
    assert not marker.exists()

    # A folder with no digest at all (someone else's, copied in): not loaded; the search starts anew there.
    (experiment / _trust.DIGEST_FILE).unlink()
    best = _search(out, address, resume=True)
    assert not marker.exists()
    assert {r.state for r in best.run_summary.records} == {TrialState.COMPLETE}
    _trust.check_folder(experiment, "resume=True")  # and what this run wrote is signed
