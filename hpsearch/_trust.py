"""State an engine unpickles on resume is trusted only when this user's searches wrote it: a keyed digest.

Some engines restore a search from pickles in ``output_dir`` (a tuner's pickle and its experiment state):
loading a planted file would run whatever it holds. So while a search runs, the driver records beside that state
an HMAC-SHA256 of each of its files (``hpsearch-state.digest``), keyed by a secret that lives outside
``output_dir``: ``$HPSEARCH_STATE_KEY_FILE``, else ``$XDG_CACHE_HOME/hpsearch/state.key`` (``~/.cache/...``),
created on first use with mode 0600 (its folder 0700). Before restoring, every file of the state must match its
digest: a file added, changed or unsigned (someone else's folder, another user's or machine's key) is refused
before anything is unpickled. Only the folder's top-level pickles are covered: Tune's JSON experiment state is
rewritten after every event, later than the driver can sign it, so covering it made every resume after a kill
fail; it is not covered (README, Reliability). Trial checkpoints are read without pickle anyway.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from .errors import SearchConfigError

__all__ = [
    "DIGEST_FILE",
    "FolderSigner",
    "UntrustedStateError",
    "check_folder",
    "is_signed",
    "key_path",
    "sign_folder",
]

DIGEST_FILE = "hpsearch-state.digest"
_KEY_BYTES = 32


class UntrustedStateError(SearchConfigError):
    """Saved engine state that this user's searches did not write (or that changed since): never loaded."""


def key_path() -> Path:
    """Where the signing key lives (outside any output_dir)."""
    explicit = os.environ.get("HPSEARCH_STATE_KEY_FILE")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "hpsearch" / "state.key"


def _key() -> bytes:
    path = key_path()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another search made it first
            return path.read_bytes()
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(_KEY_BYTES))
        return path.read_bytes()
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o600)  # a key others can read signs nothing
    return data


def _covered_names(folder: Path) -> set[str]:
    """The files a digest covers: the pickles (``tuner.pkl``, a searcher's ``*.pkl``). The engine's JSON state
    (Tune's ``experiment_state-*.json``, rewritten after every event, after the driver's last chance to sign it) is
    left out: a driver killed between Tune's write and the next signature would otherwise never resume. Only the
    names ending in ``.pkl`` are ``stat``ed, not each of the folder's thousands of trial folders."""
    return {
        name
        for name in os.listdir(folder)
        if name.endswith(".pkl") and name != DIGEST_FILE and (folder / name).is_file()
    }


def _file_digest(key: bytes, path: Path) -> str:
    return hmac.new(key, path.name.encode() + b"\0" + path.read_bytes(), hashlib.sha256).hexdigest()


def _digests(folder: Path, key: bytes) -> dict[str, str]:
    return {name: _file_digest(key, folder / name) for name in sorted(_covered_names(folder))}


def _write_digests(folder: Path, digests: Mapping[str, str]) -> None:
    text = json.dumps(dict(digests), indent=1, sort_keys=True)
    tmp = folder / f".{DIGEST_FILE}.{os.getpid()}.tmp"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, folder / DIGEST_FILE)


def sign_folder(folder: str | os.PathLike[str]) -> None:
    """Record the digests of ``folder``'s files as they are now (written atomically beside them)."""
    root = Path(folder)
    if root.is_dir():
        _write_digests(root, _digests(root, _key()))


class FolderSigner:
    """Keeps the digest of one folder current while an engine rewrites its state, at a cost that does not grow
    with what else the folder holds (Tune's experiment folder holds one folder per trial, 10,000 in a large search).

    `update` (after each step of the engine's loop) lists the folder's names again only when the folder's own
    mtime changed (a name added, removed or renamed: a new trial folder, an atomic rewrite), ``stat``s only the
    covered files, reads and hashes only the ones whose inode, size or mtime changed, and rewrites the digest
    file only when a digest changed. A name added within the same mtime tick as the last listing can be missed
    until the next change of the folder; it then stays unsigned, which refuses a resume (never trusts a file),
    and ``update(full=True)`` (at the end of a search) lists the folder regardless.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.root = Path(folder)
        self._listed: int | None = None  # the folder's mtime when its names were last listed
        self._names: set[str] = set()
        self._signed: dict[str, tuple[tuple[int, int, int], str]] = {}  # name -> (inode, size, mtime), digest
        self._key: bytes | None = None
        self._written = False

    def update(self, full: bool = False) -> bool:
        """Sign what changed since the last call; True when the digest file was (re)written."""
        try:
            mtime = os.stat(self.root).st_mtime_ns
        except (FileNotFoundError, NotADirectoryError):
            return False
        if full or mtime != self._listed:
            self._names = _covered_names(self.root)
            self._listed = mtime  # read before listing: a change during the listing is seen next time
        signed: dict[str, tuple[tuple[int, int, int], str]] = {}
        for name in self._names:
            try:
                st = os.stat(self.root / name)
            except FileNotFoundError:
                continue
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
            known = self._signed.get(name)
            if known is not None and known[0] == stamp:
                signed[name] = known
            else:
                if self._key is None:
                    self._key = _key()
                signed[name] = (stamp, _file_digest(self._key, self.root / name))
        if self._written and signed == self._signed and not full:
            return False
        self._signed, self._written = signed, True
        _write_digests(self.root, {name: digest for name, (_, digest) in signed.items()})
        return True


def is_signed(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` holds a digest file (valid or not: `check_folder` says)."""
    return (Path(folder) / DIGEST_FILE).is_file()


def check_folder(folder: str | os.PathLike[str], what: str) -> None:
    """Raise `UntrustedStateError` unless every file of ``folder`` matches the digest this user's key recorded."""
    root = Path(folder)
    fix = (
        f"if you trust it, move it away and start the search again; a folder written by another user or on "
        f"another machine is signed with that user's key ({key_path()})"
    )
    try:
        recorded = json.loads((root / DIGEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise UntrustedStateError(
            f"{what}: {str(root)!r} holds no {DIGEST_FILE} signed by this user's searches, so its pickled state "
            f"is not loaded (loading a planted file would run its code); {fix}."
        ) from None
    current = _digests(root, _key())
    # A file the engine deleted since is no risk; one added or changed is.
    bad = [
        name
        for name, digest in current.items()
        if not hmac.compare_digest(str(recorded.get(name, "")), digest)
    ]
    if bad:
        raise UntrustedStateError(
            f"{what}: {', '.join(map(repr, bad))} in {str(root)!r} changed since this user's search wrote it (or "
            f"was never written by it), so the state is not loaded (it would be unpickled); {fix}."
        )
