"""The results journal: ``search.journal.jsonl`` beside ``search.json``, one line appended per recorded trial.

A running search does not rewrite ``search.json`` after every trial (that work grows with the search); it appends
the trial's record to the journal in one ``write`` and takes a snapshot (``search.json`` and the CSV exports,
whole) only now and then, at intervals that grow with the search (`SnapshotSchedule`), so the total work of a
search of n trials is O(n). Layout::

    {"format": "hpsearch.journal", "format_version": 1, "journal_id": "<hex>", "created": ISO}   <- the header
    {"seq": 1, "record": {...}, "meta": {"finished": ISO, ...}}                                  <- one per trial
    {"seq": 2, ...}

The snapshot names its journal: ``"journal": {"id": "<hex>", "seq": N}`` in ``search.json`` says it holds every line
of that journal up to ``seq`` N. The rule when the two disagree: **lines of the snapshot's journal newer than the
snapshot (seq > N) win**; each, in order, replaces the record of the same ``trial_id`` (or adds it) and updates the
header fields in its ``meta``; lines with seq <= N are already in the snapshot, which wins for them. A writer always
writes the snapshot naming a new journal before it starts that journal, so a journal with another id is older than
the snapshot (a kill came between the two writes): everything in it is in the snapshot, and it is ignored with a
warning naming the file. A torn last line (a kill during its write) is skipped with a warning naming the file; a bad
line anywhere else, or a journal of a newer ``format_version``, is an error naming the file.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ._files import JOURNAL_FILE, atomic_write_text

__all__ = [
    "JOURNAL_FORMAT",
    "JOURNAL_META",
    "JOURNAL_VERSION",
    "JournalWriter",
    "SnapshotSchedule",
    "apply_journal",
    "read_journal",
]

logger = logging.getLogger(__name__)

JOURNAL_FORMAT = "hpsearch.journal"
#: Version of the journal's layout; bumped when a change would mislead an older reader.
JOURNAL_VERSION = 1
#: The search.json header fields a journal line may update (`SearchResult._journal_meta` writes them).
JOURNAL_META = ("started", "finished", "n_trials", "settings")


@dataclass
class SnapshotSchedule:
    """When a running search takes its next snapshot: after ``max(min_lines, ratio * records)`` journal lines, or
    after ``max(min_seconds, cost_factor * the last snapshot's duration)`` seconds with at least one new line.

    The first rule makes each snapshot (whose cost grows with the number of records) pay for itself over a number
    of trials that grows as fast, so snapshots cost O(1) per trial; the second keeps ``search.json`` and the CSV
    exports at most about a minute behind a search of slow trials, while spending at most 1/cost_factor of the time
    on snapshots.
    """

    min_lines: int = 100
    ratio: float = 0.5
    min_seconds: float = 60.0
    cost_factor: float = 20.0

    def due(self, lines: int, records: int, since_s: float, last_cost_s: float) -> bool:
        if lines <= 0:
            return False
        if lines >= max(self.min_lines, self.ratio * records):
            return True
        return since_s >= max(self.min_seconds, self.cost_factor * last_cost_s)


@dataclass
class JournalWriter:
    """The journal a running search appends to in ``folder``, started right after the snapshot that names it."""

    folder: Path
    journal_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    seq: int = 0
    snapshot_at: float = field(default_factory=time.monotonic)
    snapshot_cost_s: float = 0.0
    # (inode, size) of the file after our last write: anything else means another writer replaced or extended it.
    _written: tuple[int, int] | None = None
    _meta: dict[str, str] = field(default_factory=dict)  # key -> compact JSON last written (snapshot or line)

    @property
    def path(self) -> Path:
        return self.folder / JOURNAL_FILE

    def reference(self) -> dict[str, Any]:
        """What the snapshot stores to name this journal (it holds every line up to ``seq``)."""
        return {"id": self.journal_id, "seq": self.seq}

    def start(self, meta: dict[str, Any], durable: bool) -> None:
        """Write the journal's header, replacing any earlier journal (whose lines the snapshot just written holds)."""
        header = {
            "format": JOURNAL_FORMAT,
            "format_version": JOURNAL_VERSION,
            "journal_id": self.journal_id,
            "created": datetime.now(timezone.utc).isoformat(),
        }
        text = json.dumps(header, separators=(",", ":")) + "\n"
        atomic_write_text(self.path, text, durable=durable)
        self._written = _identity(self.path)
        self._meta = {key: _compact(value) for key, value in meta.items()}

    def intact(self) -> bool:
        """Whether the file is still the one this writer wrote last (no other process replaced or extended it)."""
        return self._written is not None and _identity(self.path) == self._written

    def append(self, record_json: str, meta: dict[str, Any]) -> None:
        """One line for a recorded trial: its record (as JSON text) and the header fields that changed since the last
        line or snapshot. One ``write`` on an ``O_APPEND`` file: a kill leaves the line whole, absent or, at worst,
        torn at the end of the file (which readers skip with a warning)."""
        changed = {}
        for key, value in meta.items():
            text = _compact(value)
            if self._meta.get(key) != text:
                changed[key] = text
                self._meta[key] = text
        self.seq += 1
        meta_text = ",".join(f"{json.dumps(k)}:{v}" for k, v in changed.items())
        line = f'{{"seq":{self.seq},"record":{record_json},"meta":{{{meta_text}}}}}\n'.encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            written = os.write(fd, line)
        finally:
            os.close(fd)
        if written != len(line):
            raise OSError(f"Short write to {os.fspath(self.path)!r}: {written} of {len(line)} bytes.")
        assert self._written is not None
        self._written = (self._written[0], self._written[1] + written)


def _compact(value: Any) -> str:
    from ._files import json_default

    return json.dumps(value, separators=(",", ":"), default=json_default)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_ino, stat.st_size


#: (path, size, torn bytes) of the journals whose torn last line this process has warned about.
_TOLD_TORN: set[tuple[str, int, int]] = set()


def read_journal(folder: Path, reference: Any) -> list[dict[str, Any]]:
    """The lines of ``folder``'s journal newer than the snapshot whose ``"journal"`` entry is ``reference`` (see the
    module docstring for the rule), each a dict with ``record`` and ``meta``; [] when there is none to apply.

    Raises:
        ValueError: naming the file, for a journal of a newer format version or a bad line before its last.
    """
    path = folder / JOURNAL_FILE
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        return []
    lines = raw.split(b"\n")
    torn = lines.pop() if lines else b""  # text after the last newline: a line whose write a kill cut short
    header = _header(path, lines[0] if lines else b"")
    if header is None:
        return []
    if not isinstance(reference, dict) or header.get("journal_id") != reference.get("id"):
        logger.warning(
            "%s is not the journal the snapshot search.json names (journal %r, the snapshot's %r): it is older than "
            "the snapshot, which holds its lines; ignoring it.",
            os.fspath(path),
            header.get("journal_id"),
            reference.get("id") if isinstance(reference, dict) else None,
        )
        return []
    after = reference.get("seq", 0)
    out = []
    for number, line in enumerate(lines[1:], start=2):
        entry = _entry(path, number, line)
        if entry["seq"] > after:
            out.append(entry)
    # Once per torn file in a process: a resume reads the results several times.
    told = (os.path.abspath(path), len(raw), len(torn))
    if torn and told not in _TOLD_TORN:
        _TOLD_TORN.add(told)
        logger.warning(
            "%s: its last line (line %d, %d bytes) is incomplete, cut short by a kill while it was written; "
            "skipping it (that trial is not in the results; a resumed search runs it again).",
            os.fspath(path),
            len(lines) + 1,
            len(torn),
        )
    return out


def _header(path: Path, line: bytes) -> dict[str, Any] | None:
    try:
        header = json.loads(line)
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != JOURNAL_FORMAT:
        raise ValueError(
            f"{os.fspath(path)!r} is not an hpsearch results journal (its first line has no 'format': "
            f"{JOURNAL_FORMAT!r}); the file is corrupt. Move it away to load the snapshot search.json alone."
        )
    version = header.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version > JOURNAL_VERSION:
        raise ValueError(
            f"{os.fspath(path)!r} has format_version {version!r} but this hpsearch reads journals up to version "
            f"{JOURNAL_VERSION}; upgrade hpsearch to read it."
        )
    return header


def _entry(path: Path, number: int, line: bytes) -> dict[str, Any]:
    try:
        entry = json.loads(line)
    except (ValueError, RecursionError):
        entry = None
    ok = (
        isinstance(entry, dict)
        and isinstance(entry.get("seq"), int)
        and isinstance(entry.get("record"), dict)
        and isinstance(entry.get("meta", {}), dict)
    )
    if not ok:
        raise ValueError(
            f"{os.fspath(path)!r} line {number} is not a journal entry ({line[:80]!r}...); only the last line can be "
            "cut short by a kill, so the file is corrupt. Move it away to load the snapshot search.json alone."
        )
    assert isinstance(entry, dict)
    entry.setdefault("meta", {})
    return entry


def apply_journal(data: dict[str, Any], entries: list[dict[str, Any]]) -> None:
    """Journal lines newer than the snapshot win: each replaces the record of its trial_id (or adds it) and sets the
    header fields of its ``meta``, in the order they were written."""
    records = data.get("records")
    if not isinstance(records, list):
        return  # the snapshot is incomplete: _from_data says so
    where = {r.get("trial_id"): i for i, r in enumerate(records) if isinstance(r, dict)}
    for entry in entries:
        record = entry["record"]
        i = where.get(record.get("trial_id"))
        if i is None:
            where[record.get("trial_id")] = len(records)
            records.append(record)
        else:
            records[i] = record
        for key in JOURNAL_META:
            if key in entry["meta"]:
                data[key] = entry["meta"][key]
