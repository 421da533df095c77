"""Writing a search's files: atomic replacement, the CSV exports and their rows, JSON for any parameter value."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._cost import COST_COLUMNS
from .trial import TrialState

if TYPE_CHECKING:
    from .trial import TrialRecord

__all__ = [
    "EVENTS_FILE", "INTERMEDIATES_FILE", "RESULT_FILES", "SEARCH_FILE", "TRIALS_FILE", "CsvExports",
    "append_or_replace_text", "atomic_write_text", "csv_row", "indented_json", "inter_csv_lines", "json_default",
    "objective_vector", "plain", "trial_csv_line",
]

#: A search's files in its output folder: the results (what `SearchResult.load` reads), their CSV exports, and the
#: event log the live dashboard follows (`hpsearch._events`).
SEARCH_FILE = "search.json"
TRIALS_FILE = "trials.csv"
INTERMEDIATES_FILE = "intermediates.csv"
EVENTS_FILE = "events.jsonl"
RESULT_FILES = (SEARCH_FILE, TRIALS_FILE, INTERMEDIATES_FILE, EVENTS_FILE)


def csv_cell(value: Any) -> Any:
    value = plain(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, datetime):
        return str(value.astimezone(timezone.utc) if value.tzinfo else value.replace(tzinfo=timezone.utc))
    return value if isinstance(value, str | int) else str(value)


def csv_row(cells: list[Any]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow([csv_cell(c) for c in cells])
    return buffer.getvalue()


def trial_csv_line(record: TrialRecord, k: int, params: tuple[str, ...]) -> str:
    objectives = objective_vector(record.objective, k) or [math.nan] * k
    return csv_row([
        str(record.trial_id), str(record.name), int(record.number), TrialState(record.state).value,
        str(record.extra.get("source", "search")), str(record.extra.get("config_id", record.trial_id)),
        record.extra.get("seed"), *objectives,
        *(record.params.get(name) for name in params),
        record.started, record.finished, record.duration_s, *(record.cost.get(c) for c in COST_COLUMNS),
        len(record.intermediates), record.last_step, record.checkpoint, record.node, record.error,
    ])


def inter_csv_lines(record: TrialRecord, k: int, metrics: tuple[str, ...]) -> str:
    return "".join(
        csv_row([
            str(record.trial_id), int(ev.step), ev.epoch, *(objective_vector(ev.objective, k) or [math.nan] * k),
            *(ev.metrics.get(m) for m in metrics),
        ])
        for ev in record.intermediates
    )


def plain(value: Any) -> Any:
    """Numpy scalars as Python scalars, so the dtype of a column does not depend on who produced it."""
    item = getattr(value, "item", None)
    if item is not None and type(value).__module__ == "numpy":
        try:
            return item()
        except (TypeError, ValueError):
            return value
    return value


def json_default(value: Any) -> Any:
    """JSON for what `json` cannot encode: numpy scalars/arrays, sets, paths, enums, datetimes.

    Anything else becomes its ``str``: a save runs after every trial and must not fail the search over a
    parameter value that only a report will ever read back.
    """
    simple = plain(value)
    if simple is not value:
        return simple
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "value") and isinstance(getattr(value, "value", None), (str, int, float)):
        return value.value
    return str(value)


def indented_json(items: dict[str, Any], cache: dict[str, tuple[str, str]]) -> str:
    """``json.dumps(items, indent=2, default=json_default)``, byte for byte, reusing each value's indented text while
    its compact encoding is unchanged (``cache``: key -> (compact, indented)).

    json's indenting encoder is pure Python, its compact one is C; search.json's header (the space, the settings) is
    the same at every save after a trial, and was ~500 Python calls to indent each time.
    """
    if not items:
        return "{}"
    lines = []
    for key, value in items.items():
        if isinstance(value, dict | list | tuple) and value:
            compact = json.dumps(value, default=json_default, separators=(",", ":"))
            cached = cache.get(key)
            if cached is None or cached[0] != compact:
                cached = cache[key] = (compact, json.dumps(value, indent=2, default=json_default))
            text = cached[1]
        else:
            text = json.dumps(value, indent=2, default=json_default)
        # One level deeper inside the object: JSON text has no raw newline but the indentation's.
        lines.append(f"  {json.dumps(key)}: {text.replace(chr(10), chr(10) + '  ')}")
    return "{\n" + ",\n".join(lines) + "\n}"


def atomic_write_text(path: Path, text: str, durable: bool = True) -> None:
    """Replace ``path`` with ``text`` so that readers see the old file or the new one, never a partial one.

    ``durable`` also fsyncs the file and its folder, so the new version survives a power cut, not just a kill.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if not durable:
        return
    # Persist the rename itself; not possible on every platform (Windows), and not worth failing a save over.
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def append_or_replace_text(path: Path, text: str, written: tuple[str, int] | None) -> tuple[str, int]:
    """Make ``path`` hold ``text`` and return what to pass as ``written`` next time.

    ``written`` is (text, size in bytes) of this function's previous write of ``path``. When ``text`` only adds
    lines to it and the file still has that size, the new lines are appended in one ``write`` (a kill cannot
    split one), which on ext4 costs a fraction of a replace: ext4 flushes the data of a file renamed over
    another, so a rename costs about an fsync. Otherwise the file is replaced atomically (not fsynced).
    """
    if written is not None and text.startswith(written[0]):
        tail = text[len(written[0]):].encode("utf-8")
        try:
            if os.stat(path).st_size == written[1]:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND)
                try:
                    done = os.write(fd, tail) if tail else 0
                finally:
                    os.close(fd)
                if done == len(tail):
                    return text, written[1] + done
        except OSError:
            pass  # gone, or not writable in place: replace it
    atomic_write_text(path, text, durable=False)
    return text, len(text.encode("utf-8"))


class CsvExports:
    """A search's ``trials.csv`` and ``intermediates.csv``, rebuilt from its records at every save.

    They are exports: never seen half-written, and not fsynced (only a power cut could lose their latest
    version; `SearchResult.load` reads search.json). A save that only adds rows at their end (the usual one: the
    next trial finished) appends them in one write; any other change replaces the file atomically (see
    `append_or_replace_text`: on ext4 a replace costs about an fsync). Rows are rendered once per record and
    reused while the record and the columns stay the same (`forget` a record that changed), so a save after
    trial 1,000 joins cached lines instead of rebuilding two dataframes.
    """

    def __init__(self) -> None:
        # id(record) -> (record, columns key, trials.csv line, intermediates.csv lines)
        self._rows: dict[int, tuple[Any, Any, str, str]] = {}
        self._written: dict[str, tuple[str, int]] = {}  # path -> (text, size) of the last write

    def forget(self, record: TrialRecord) -> None:
        self._rows.pop(id(record), None)

    def write(self, folder: Path, records: list[TrialRecord], k: int, params: tuple[str, ...],
              objective_columns: list[str]) -> None:
        for name, text in zip((TRIALS_FILE, INTERMEDIATES_FILE), self._texts(records, k, params, objective_columns)):
            path = folder / name
            key = os.fspath(path)
            self._written[key] = append_or_replace_text(path, text, self._written.get(key))

    def _texts(self, records: list[TrialRecord], k: int, params: tuple[str, ...],
               objective_columns: list[str]) -> tuple[str, str]:
        metrics = tuple(sorted({m for r in records for ev in r.intermediates for m in ev.metrics}))
        fixed = ("trial_id", "step", "epoch", *objective_columns)
        trials_header = [
            "trial_id", "name", "number", "state", "source", "config_id", "seed", *objective_columns, *(f"params_{n}" for n in params),
            "started", "finished", "duration_s", *COST_COLUMNS, "n_evaluations", "last_step", "checkpoint", "node",
            "error",
        ]
        inter_header = [*fixed, *(f"metric_{m}" if m in fixed else m for m in metrics)]
        key = (k, params, metrics)
        trial_lines, inter_lines = [], []
        for record in sorted(records, key=lambda r: (r.number, r.trial_id)):
            cached = self._rows.get(id(record))
            if cached is None or cached[0] is not record or cached[1] != key:
                cached = (record, key, trial_csv_line(record, k, params), inter_csv_lines(record, k, metrics))
                self._rows[id(record)] = cached
            trial_lines.append(cached[2])
            inter_lines.append(cached[3])
        if len(self._rows) > len(records):
            kept = {id(r) for r in records}
            self._rows = {i: v for i, v in self._rows.items() if i in kept}
        return csv_row(trials_header) + "".join(trial_lines), csv_row(inter_header) + "".join(inter_lines)


def objective_vector(objective: Any, k: int) -> list[float] | None:
    """An objective (float, list of floats or None) as exactly ``k`` floats, or None if absent."""
    if objective is None:
        return None
    values = list(objective) if isinstance(objective, (list, tuple)) else [objective]
    out = [math.nan if v is None else float(v) for v in values]
    if len(out) != k:
        # A wrong-length objective is a backend bug; NaNs keep the row visible without making it win.
        return [math.nan] * k
    return out
