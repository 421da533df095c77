"""`_trust.FolderSigner`: the digest of Tune's experiment folder kept current as Tune rewrites its state, reading
only what changed (the folder holds one folder per trial beside the state; a step must not read them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpsearch import _trust


@pytest.fixture
def state(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HPSEARCH_STATE_KEY_FILE", str(tmp_path / "keys" / "mine.key"))
    folder = tmp_path / "experiment"
    folder.mkdir()
    (folder / "tuner.pkl").write_bytes(b"tune's tuner")
    (folder / "searcher-state-1.pkl").write_bytes(b"the searcher")
    (folder / "experiment_state-1.json").write_text("{}")
    for i in range(50):
        (folder / f"trainable_{i:05d}").mkdir()
    return folder


class _Spy:
    """Counts the folder listings and the files hashed by `_trust` while it is installed."""

    def __init__(self, monkeypatch) -> None:
        self.listed: list[str] = []
        self.hashed: list[str] = []
        listdir, digest = os.listdir, _trust._file_digest

        def counting_listdir(path):
            self.listed.append(str(path))
            return listdir(path)

        def counting_digest(key, path):
            self.hashed.append(path.name)
            return digest(key, path)

        monkeypatch.setattr(_trust.os, "listdir", counting_listdir)
        monkeypatch.setattr(_trust, "_file_digest", counting_digest)

    def reset(self) -> None:
        self.listed.clear()
        self.hashed.clear()


def _folder_changed(folder: Path, listed_at: int) -> None:
    """Where a coarse clock left the folder's mtime where it was at the last listing (same tick), move it on, as
    the next tick does: the signer relies on the mtime, and the test must not depend on the clock's grain."""
    st = os.stat(folder)
    if st.st_mtime_ns == listed_at:
        os.utime(folder, ns=(st.st_atime_ns, listed_at + 1_000_000))


def test_the_signer_signs_what_check_folder_trusts(state):
    signer = _trust.FolderSigner(state)
    assert signer.update() is True
    _trust.check_folder(state, "resume=True")
    (state / "tuner.pkl").write_bytes(b"rewritten by tune, longer than before")
    assert signer.update() is True
    _trust.check_folder(state, "resume=True")
    (state / "searcher-state-1.pkl").unlink()
    assert signer.update() is True
    assert set(_trust.json.loads((state / _trust.DIGEST_FILE).read_text())) == {"tuner.pkl"}


def test_a_step_with_nothing_changed_lists_nothing_hashes_nothing_and_writes_nothing(state, monkeypatch):
    signer = _trust.FolderSigner(state)
    signer.update()
    signer.update()  # the digest file's own rename changed the folder: listed once more
    written = (state / _trust.DIGEST_FILE).stat()
    spy = _Spy(monkeypatch)
    (state / "experiment_state-1.json").write_text('{"rewritten": true}')  # not covered: no new signature
    for _ in range(3):
        assert signer.update() is False
    assert spy.listed == [] and spy.hashed == []
    after = (state / _trust.DIGEST_FILE).stat()
    assert (after.st_ino, after.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)


def test_only_the_changed_file_is_hashed_and_a_new_trial_folder_costs_a_listing_only(state, monkeypatch):
    signer = _trust.FolderSigner(state)
    signer.update()
    signer.update()
    spy = _Spy(monkeypatch)
    listed_at = os.stat(state).st_mtime_ns
    (state / "trainable_new").mkdir()
    _folder_changed(state, listed_at)  # a new trial: the folder's names are listed again, nothing is read
    assert signer.update() is False
    assert spy.listed == [str(state)] and spy.hashed == []
    spy.reset()
    (state / "searcher-state-1.pkl").write_bytes(b"the searcher, one step later")
    assert signer.update() is True
    assert spy.hashed == ["searcher-state-1.pkl"]
    _trust.check_folder(state, "resume=True")


def test_a_pickle_added_after_the_last_step_is_signed_by_the_next_one_and_refused_before(state):
    signer = _trust.FolderSigner(state)
    signer.update()
    listed_at = os.stat(state).st_mtime_ns
    (state / "other.pkl").write_bytes(b"added")
    _folder_changed(state, listed_at)
    with pytest.raises(_trust.UntrustedStateError, match=r"'other\.pkl'"):
        _trust.check_folder(state, "resume=True")
    assert signer.update() is True
    _trust.check_folder(state, "resume=True")


def test_full_lists_the_folder_even_when_its_mtime_did_not_move(state):
    signer = _trust.FolderSigner(state)
    signer.update()
    signer.update()  # lists the folder as the digest file's rename left it
    listed = os.stat(state)
    (state / "late.pkl").write_bytes(b"written within the same mtime tick")
    os.utime(state, ns=(listed.st_atime_ns, listed.st_mtime_ns))  # as a coarse clock would leave it
    signer.update()
    with pytest.raises(_trust.UntrustedStateError, match=r"'late\.pkl'"):
        _trust.check_folder(state, "resume=True")  # missed: unsigned, so refused (never trusted)
    assert signer.update(full=True) is True
    _trust.check_folder(state, "resume=True")


def test_a_missing_folder_is_no_error(tmp_path):
    assert _trust.FolderSigner(tmp_path / "not-yet").update() is False
