"""`FolderReader`: the state of one search folder, read incrementally and never written to.

Two sources make the state: the results (``search.json``, the snapshot the search replaces atomically at intervals
that grow with the search, and the journal lines newer than it, read together by `SearchResult.load`) and
``events.jsonl`` (appended to as trials start, evaluate and end; see ``hpsearch._events``). The results are parsed
again only when the snapshot's identity (inode, size, mtime) changed, not at every journal line: each trial's end is
also in ``events.jsonl``, with the record the journal stores, so following the journal too would re-read the whole
search after every trial for nothing new. The dashboard's readers parse a new snapshot in a thread of their own
(``background``), so a refresh never waits for it. ``events.jsonl`` is read
from the offset where the last read stopped, and only up to its last complete line, so a line being written is
read whole on the next refresh. A ``search.json`` that cannot be parsed (corrupt, or not a search) leaves the
last good state in place and sets `FolderReader.warning`. Trials the events show running are RUNNING records
with their evaluations so far; once ``search.json`` holds a trial's final record the live copy is dropped, so
memory holds the finished records plus the running trials only. Events older than the start of the search in
``search.json`` belong to an earlier search in the same folder (the log is appended to, never truncated) and
are ignored.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hpsearch._files import EVENTS_FILE, SEARCH_FILE
from hpsearch.results import SearchResult
from hpsearch.trial import Evaluation, TrialRecord, TrialState
from hpsearch.trial import decode_tuples as _decode_tuples

__all__ = ["SEARCH_FILE", "FolderReader", "NotASearchFolder", "check_search_folder"]

_CHUNK = 4 << 20  # events.jsonl is read at most this many bytes at a time


class NotASearchFolder(ValueError):
    """The folder given to the dashboard does not exist or holds no search."""


def check_search_folder(folder: str | os.PathLike[str]) -> str:
    """The folder as a string if it holds a search (``search.json`` or ``events.jsonl``), else raise.

    Raises:
        NotASearchFolder: naming the folder, what is missing and what to pass instead.
    """
    path = Path(folder)
    if not path.is_dir():
        raise NotASearchFolder(
            f"OUTPUT_DIR {os.fspath(folder)!r} is not a folder; pass the output_dir of a search "
            "(the folder that holds its search.json)."
        )
    if not (path / SEARCH_FILE).is_file() and not (path / EVENTS_FILE).is_file():
        raise NotASearchFolder(
            f"OUTPUT_DIR {os.fspath(folder)!r} is not a search folder: it holds neither {SEARCH_FILE} nor "
            f"{EVENTS_FILE}; pass the output_dir of a search (hpsearch run writes them there, "
            "hyperparameter_search writes them into TrainingArguments.output_dir)."
        )
    return os.fspath(folder)


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.astimezone(timezone.utc)


def _newer(live: TrialRecord, saved: TrialRecord) -> bool:
    """Whether the live copy of a trial says more than the copy in search.json (a restart, or a later end)."""
    if saved.state is TrialState.RUNNING:
        return True
    saved_end = _utc(saved.finished)
    if saved_end is None:
        return False
    if live.state is TrialState.RUNNING:
        started = _utc(live.started)
        return started is not None and started > saved_end
    finished = _utc(live.finished)
    return finished is not None and finished > saved_end


def _load(folder: Path) -> SearchResult | str:
    """The search in ``folder``, or why it could not be read."""
    try:
        return SearchResult.load(folder)
    except (OSError, ValueError) as error:
        return str(error)


class _Load:
    """`_load` in a daemon thread of its own; ``value`` once ``done`` is set."""

    def __init__(self, folder: Path) -> None:
        self.value: SearchResult | str = ""
        self.done = threading.Event()
        threading.Thread(
            target=self._run, args=(folder,), name="hpsearch-dashboard-load", daemon=True
        ).start()

    def _run(self, folder: Path) -> None:
        try:
            self.value = _load(folder)
        except (
            Exception
        ) as error:  # a bug, not a bad file: shown as the warning, and the next change is read again
            self.value = f"{type(error).__name__}: {error}"
        finally:
            self.done.set()


class FolderReader:
    """The live state of the search in ``folder``; call `refresh` to read what changed, `snapshot` to use it.

    Not thread-safe: one thread refreshes and snapshots at a time (the dashboard holds a lock around both).

    Args:
        background: parse a changed ``search.json`` in a thread of its own (all but the first), taking the result at
            a later `refresh`: at 10,000 trials the parse costs about a second, and the trials it adds are already
            here from ``events.jsonl``, so the dashboard goes on showing them meanwhile. False: parsed within
            `refresh`.
    """

    def __init__(self, folder: str | os.PathLike[str], background: bool = False) -> None:
        self.folder = Path(folder)
        self.background = background
        self._loading: _Load | None = None
        #: Bumped whenever `refresh` finds anything new.
        self.version = 0
        self._search_key: tuple[int, int, int] | None = None
        self._saved: SearchResult | None = None
        self._saved_by_id: dict[str, TrialRecord] = {}
        self._search_error: str | None = None
        self._good_at: datetime | None = None
        self._events_inode: int | None = None
        self._offset = 0
        self._live: dict[str, TrialRecord] = {}
        self._bad_lines = 0

    # ------------------------------------------------------------------ reading

    def refresh(self) -> bool:
        """Read what changed in the folder since the last call; True when anything did."""
        changed = self._read_search()
        changed = self._read_events() or changed
        if changed:
            self._drop_saved_live()
            self.version += 1
        return changed

    def _read_search(self) -> bool:
        changed = False
        if self._loading is not None and self._loading.done.is_set():
            changed, self._loading = self._take(self._loading.value), None
        key = _stat_key(self.folder / SEARCH_FILE)
        if key is None or key == self._search_key or self._loading is not None:
            return changed  # a file that changed during a parse is read once that parse is taken
        self._search_key = key
        if self.background and self._saved is not None:
            self._loading = _Load(self.folder)
            return changed
        return self._take(_load(self.folder)) or changed

    def _take(self, loaded: SearchResult | str) -> bool:
        """Keep a parsed search.json, or the message of why it could not be parsed; True when either is new."""
        if isinstance(loaded, str):
            if loaded == self._search_error:
                return False
            self._search_error = loaded
            return True
        self._saved = loaded
        self._saved_by_id = {r.trial_id: r for r in loaded.records}
        self._search_error = None
        self._good_at = datetime.now(timezone.utc)
        return True

    def _read_events(self) -> bool:
        path = self.folder / EVENTS_FILE
        try:
            st = os.stat(path)
        except OSError:
            return False
        if st.st_ino != self._events_inode or st.st_size < self._offset:
            # A new log (the folder was reused for a fresh search): start over.
            self._events_inode, self._offset = st.st_ino, 0
            self._live.clear()
        if st.st_size == self._offset:
            return False
        changed = False
        with open(path, "rb") as handle:
            while self._offset < st.st_size:
                handle.seek(self._offset)
                chunk = handle.read(min(_CHUNK, st.st_size - self._offset))
                end = chunk.rfind(b"\n")
                if end < 0:
                    if len(chunk) < _CHUNK:
                        break  # the last line is still being written: read it whole next time
                    self._bad_lines += 1  # one line longer than a chunk: not ours, skip it
                    self._offset += len(chunk)
                    continue
                for line in chunk[:end].split(b"\n"):
                    if line.strip():
                        changed = self._apply(line) or changed
                self._offset += end + 1
        return changed

    def _apply(self, line: bytes) -> bool:
        try:
            event = json.loads(line)
            kind = event["event"]
            if kind == "trial_start":
                tid = str(event["trial_id"])
                self._live[tid] = TrialRecord(
                    trial_id=tid,
                    number=int(event["number"]),
                    name=str(event["name"]),
                    state=TrialState.RUNNING,
                    params={k: _decode_tuples(v) for k, v in (event.get("params") or {}).items()},
                    started=_time(event.get("time")),
                )
            elif kind == "evaluation":
                record = self._live.get(str(event["trial_id"]))
                if record is None or record.state is not TrialState.RUNNING:
                    return False  # a trial whose start this log does not hold
                record.intermediates.append(
                    Evaluation(
                        step=int(event["step"]),
                        epoch=event.get("epoch"),
                        objective=event.get("objective"),
                        metrics=dict(event.get("metrics") or {}),
                    )
                )
                record.last_step = int(event["step"])
            elif kind == "trial_end":
                record = TrialRecord.from_dict(event["record"])
                self._live[record.trial_id] = record
            else:
                return False  # an event a newer hpsearch writes: ignored
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            self._bad_lines += 1
            return True
        return True

    def _drop_saved_live(self) -> None:
        """Forget live copies that search.json covers, and those of an earlier search in the same folder."""
        began = _utc(self._saved.started) if self._saved is not None else None
        for tid, live in list(self._live.items()):
            saved = self._saved_by_id.get(tid)
            last = _utc(live.finished or live.started)
            if (saved is not None and not _newer(live, saved)) or (began and last and last < began):
                del self._live[tid]

    # ------------------------------------------------------------------ state

    @property
    def has_search(self) -> bool:
        """Whether a good search.json was read (before that, directions and settings are unknown)."""
        return self._saved is not None

    @property
    def warning(self) -> str | None:
        """What the page should warn about: an unreadable search.json, skipped lines; None when all is well."""
        parts = []
        if self._search_error is not None:
            since = self._good_at.strftime("%H:%M:%S UTC") if self._good_at else None
            kept = f"showing the last good state (read at {since})" if since else "no good state to show yet"
            parts.append(f"{SEARCH_FILE} could not be read: {self._search_error} The dashboard is {kept}.")
        if self._bad_lines:
            parts.append(f"{self._bad_lines} line(s) of {EVENTS_FILE} could not be read and were skipped.")
        return " ".join(parts) or None

    def snapshot(self) -> SearchResult:
        """The search as it stands: the saved records, with running trials (and newer ends) from the events.

        Running records are copies, so the result stays valid while later refreshes add evaluations.
        """
        live = {
            tid: dataclasses.replace(r, intermediates=list(r.intermediates), params=dict(r.params))
            for tid, r in self._live.items()
        }
        saved = self._saved
        if saved is None:
            k = 1
            for record in live.values():
                for ev in record.intermediates:
                    if isinstance(ev.objective, list):
                        k = len(ev.objective)
                        break
            return SearchResult(
                backend="?",
                directions=["maximize"] * k,
                records=list(live.values()),
                objective="(unknown until search.json is written)",
                output_dir=os.fspath(self.folder),
            )
        records = []
        for record in saved.records:
            newer = live.pop(record.trial_id, None)
            records.append(newer if newer is not None and _newer(newer, record) else record)
        records.extend(live.values())
        return dataclasses.replace(saved, records=records, native=None)
