"""Writing a search's files: atomic replacement, the CSV exports and their rows, JSON for any parameter value."""

from __future__ import annotations

import csv
import io
import math
import os
import tempfile
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._cost import COST_COLUMNS
from .trial import TrialState

if TYPE_CHECKING:
    from .trial import TrialRecord

__all__ = [
    "EVENTS_FILE",
    "INTERMEDIATES_FILE",
    "JOURNAL_FILE",
    "RESULT_FILES",
    "SEARCH_FILE",
    "TRIALS_FILE",
    "CsvExports",
    "atomic_write_text",
    "csv_text",
    "inter_csv_cells",
    "json_default",
    "objective_vector",
    "plain",
    "trial_csv_cells",
]

#: A search's files in its output folder: the results (what `SearchResult.load` reads: the snapshot and its journal,
#: see `hpsearch._journal`), their CSV exports, and the event log the live dashboard follows (`hpsearch._events`).
SEARCH_FILE = "search.json"
JOURNAL_FILE = "search.journal.jsonl"
TRIALS_FILE = "trials.csv"
INTERMEDIATES_FILE = "intermediates.csv"
EVENTS_FILE = "events.jsonl"
RESULT_FILES = (SEARCH_FILE, JOURNAL_FILE, TRIALS_FILE, INTERMEDIATES_FILE, EVENTS_FILE)


def csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    kind = type(value)
    if kind is str or kind is int:  # the common cells first: a snapshot writes tens of them per trial
        return value
    if kind is float:
        return "" if math.isnan(value) else repr(value)
    value = plain(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, datetime):
        return str(value.astimezone(timezone.utc) if value.tzinfo else value.replace(tzinfo=timezone.utc))
    return value if isinstance(value, str | int) else str(value)


def csv_text(rows: Iterable[list[Any]]) -> str:
    """Rows of cells as CSV text (one writer for all of them: a snapshot writes a row per trial and evaluation)."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([csv_cell(c) for c in cells] for cells in rows)
    return buffer.getvalue()


def trial_csv_cells(record: TrialRecord, k: int, params: tuple[str, ...]) -> list[Any]:
    objectives = objective_vector(record.objective, k) or [math.nan] * k
    return [
        str(record.trial_id),
        str(record.name),
        int(record.number),
        TrialState(record.state).value,
        str(record.extra.get("source", "search")),
        str(record.extra.get("config_id", record.trial_id)),
        record.extra.get("seed"),
        record.extra.get("fold"),
        *objectives,
        *(record.params.get(name) for name in params),
        record.started,
        record.finished,
        record.duration_s,
        *(record.cost.get(c) for c in COST_COLUMNS),
        len(record.intermediates),
        record.last_step,
        record.checkpoint,
        record.node,
        record.error,
    ]


def inter_csv_cells(record: TrialRecord, k: int, metrics: tuple[str, ...]) -> Iterator[list[Any]]:
    for ev in record.intermediates:
        yield [
            str(record.trial_id),
            int(ev.step),
            ev.epoch,
            *(objective_vector(ev.objective, k) or [math.nan] * k),
            *(ev.metrics.get(m) for m in metrics),
        ]


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


class CsvExports:
    """A search's ``trials.csv`` and ``intermediates.csv``, written whole from its records at each snapshot.

    They are exports: never seen half-written (replaced atomically), not fsynced (`SearchResult.load` reads
    search.json and its journal), and written only when the search takes a snapshot, whose intervals grow with the
    search, so writing them costs O(1) per trial overall.
    """

    @staticmethod
    def write(
        folder: Path,
        records: list[TrialRecord],
        k: int,
        params: tuple[str, ...],
        objective_columns: list[str],
    ) -> None:
        texts = CsvExports.texts(records, k, params, objective_columns)
        for name, text in zip((TRIALS_FILE, INTERMEDIATES_FILE), texts):
            atomic_write_text(folder / name, text, durable=False)

    @staticmethod
    def texts(
        records: list[TrialRecord], k: int, params: tuple[str, ...], objective_columns: list[str]
    ) -> tuple[str, str]:
        metrics = tuple(sorted({m for r in records for ev in r.intermediates for m in ev.metrics}))
        fixed = ("trial_id", "step", "epoch", *objective_columns)
        trials_header = [
            "trial_id",
            "name",
            "number",
            "state",
            "source",
            "config_id",
            "seed",
            "fold",
            *objective_columns,
            *(f"params_{n}" for n in params),
            "started",
            "finished",
            "duration_s",
            *COST_COLUMNS,
            "n_evaluations",
            "last_step",
            "checkpoint",
            "node",
            "error",
        ]
        inter_header = [*fixed, *(f"metric_{m}" if m in fixed else m for m in metrics)]
        ordered = sorted(records, key=lambda r: (r.number, r.trial_id))
        trials = csv_text([trials_header, *(trial_csv_cells(r, k, params) for r in ordered)])
        inter = csv_text(
            [inter_header, *(cells for r in ordered for cells in inter_csv_cells(r, k, metrics))]
        )
        return trials, inter


def objective_vector(objective: Any, k: int) -> list[float] | None:
    """An objective (float, list of floats or None) as exactly ``k`` floats, or None if absent."""
    if objective is None:
        return None
    if type(objective) is float:  # the common case, read for every trial by every view and report figure
        return [objective] if k == 1 else [math.nan] * k
    values = list(objective) if isinstance(objective, (list, tuple)) else [objective]
    out = [math.nan if v is None else float(v) for v in values]
    if len(out) != k:
        # A wrong-length objective is a backend bug; NaNs keep the row visible without making it win.
        return [math.nan] * k
    return out
