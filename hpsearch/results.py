"""`SearchResult`: every trial of every backend in one schema, saved to and loaded from disk.

A backend adapter translates its native records into `TrialRecord`s; from there on nothing depends on the
backend: the pandas views, the best trial / Pareto front, the files on disk and the reports are computed
from the records alone, so a search saved by any engine can be reported on a machine with only pandas installed.

On disk::

    search.json           the snapshot: the search and every record (params with their JSON types, intermediates)
    search.journal.jsonl  one line per trial recorded since that snapshot, appended while the search runs
    trials.csv            `trials_dataframe()` as of the snapshot, for people and spreadsheets
    intermediates.csv     `intermediates_dataframe()`, idem

A running search appends each finished trial to the journal (O(1) per trial) and takes a snapshot (search.json,
a new journal, the CSVs) at intervals that grow with the search, and at its end (`SearchResult.save`); see
``hpsearch._journal`` for the layout and the rule when the two disagree (journal lines newer than the snapshot win).
`SearchResult.load` reads the snapshot and the journal: the CSVs are exports, so a search killed between two writes
still loads as the consistent state of its files. After a kill the CSVs lack the trials recorded since the last
snapshot until something rewrites them from snapshot + journal: resuming the search (its first snapshot), or
``hpsearch report DIR`` (`refresh_exports`).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpsearch._cost import COST_COLUMNS
from hpsearch._files import (
    JOURNAL_FILE,
    SEARCH_FILE,
    CsvExports,
    atomic_write_text,
    json_default,
    objective_vector,
    plain,
)
from hpsearch._journal import JournalWriter, SnapshotSchedule, apply_journal, read_journal
from hpsearch.trial import Evaluation, TrialRecord, TrialState, _from_iso, _iso

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pandas as pd

__all__ = ["FORMAT_VERSION", "SearchResult"]

#: Version of the ``search.json`` layout; bumped when a change would mislead an older reader. 2: the snapshot names
#: its journal, whose newer lines complete it (a version-1 reader would miss them). Version 1 files still load.
FORMAT_VERSION = 2

_DIRECTIONS = ("minimize", "maximize")
_STATE_ORDER = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL, TrialState.RUNNING)
# One dtype per column whatever the backend. Free text is `object` (holding str or None) rather than
# pandas 3's default `str` dtype: it behaves the same on pandas 2 and 3 and keeps None distinct from "".
_TEXT = "object"
_DATETIME = "datetime64[us, UTC]"  # Python datetimes carry microseconds: no precision is invented or lost.
_INT64 = 2**63
_REEVALUATION = "reevaluation"  # a re-evaluation's source (`hpsearch.reevaluate`): never the observed best


@dataclass(repr=False)
class SearchResult:
    """The outcome of a hyperparameter search, the same for every backend.

    Args:
        backend: name of the backend that ran the search (a name from ``hpsearch.backends.backend_names()``).
        directions: one of "minimize"/"maximize" per objective.
        records: one `TrialRecord` per trial, in any order.
        space: the search space in its plain dict form, or None when it was given in the backend's native form.
        n_trials: the number of trials that was asked for (None if unbounded).
        objective: what was optimized, e.g. "eval_accuracy" or a function's qualified name.
        started, finished: when the search started and ended.
        output_dir: where `save` writes by default.
        settings: the backend's settings as JSON-safe values.
        versions: package versions (name -> version string).
        native: the engine's own object (its study, result grid or experiment); never saved.
    """

    backend: str
    directions: list[str]
    records: list[TrialRecord]
    space: dict[str, Any] | None = None
    n_trials: int | None = None
    objective: str = "default"
    started: datetime | None = None
    finished: datetime | None = None
    output_dir: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    native: Any = field(default=None, compare=False)
    _journal: JournalWriter | None = field(default=None, init=False, repr=False, compare=False)
    _schedule: SnapshotSchedule = field(
        default_factory=SnapshotSchedule, init=False, repr=False, compare=False
    )
    # Set by `load`: (search.json's (inode, size, mtime) as read, journal lines applied), for `refresh_exports`.
    _loaded: tuple[tuple[int, int, int], int] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if isinstance(self.directions, str):
            self.directions = [self.directions]
        directions = [str(d).lower() for d in self.directions]
        bad = [d for d in self.directions if str(d).lower() not in _DIRECTIONS]
        if not directions or bad:
            raise ValueError(
                f"directions must be a non-empty list of 'minimize'/'maximize' but got {self.directions!r}; "
                "pass e.g. directions=['maximize']."
            )
        self.directions = directions
        self.records = list(self.records)
        if self.output_dir is not None:
            self.output_dir = os.fspath(self.output_dir)

    # ------------------------------------------------------------------ views

    @property
    def planned_trials(self) -> int | None:
        """How many trials the search runs when nothing ends it early: ``n_trials``, or what its backend said it
        multiplies to (`SearchBackend.planned_trials`: a grid run whole for each sample); None if unbounded."""
        planned = self.settings.get("planned_trials")
        return planned if isinstance(planned, int) and not isinstance(planned, bool) else self.n_trials

    @property
    def is_multi_objective(self) -> bool:
        return len(self.directions) > 1

    @property
    def objective_columns(self) -> list[str]:
        """Names of the objective columns of the dataframes: ``objective`` or ``objective_0..k-1``."""
        if self.is_multi_objective:
            return [f"objective_{i}" for i in range(len(self.directions))]
        return ["objective"]

    @property
    def param_names(self) -> list[str]:
        """Every parameter seen in any record, sorted (conditional parameters are absent from some)."""
        return sorted({name for record in self.records for name in record.params})

    def objective_values(self, item: TrialRecord | Evaluation) -> list[float] | None:
        """The objective of a record or evaluation as one float per direction (NaN where unknown), or None."""
        return objective_vector(item.objective, len(self.directions))

    def trials_dataframe(self) -> pd.DataFrame:
        """One row per trial (sorted by number), with the same columns and dtypes for every backend.

        Columns: ``trial_id, name, number, state, source`` (``search``, ``warm_start`` for an earlier search's
        trial told to this one, ``reevaluation`` for a leader trained again), ``config_id`` (the trial id of the
        search trial whose configuration the row ran: its own, or the one a re-evaluation repeats), ``seed`` (the
        ``TrainingArguments.seed`` it trained with; NA where unknown), ``fold`` (the re-evaluation's fold,
        ``reevaluate_folds``: its position in the list, or the seed a callable was asked with; NA for a run on the
        trainer's own datasets), the objective column(s), one ``params_<name>`` column
        per parameter (sorted), ``started, finished, duration_s``, the cost columns ``cpu_s, device_s,
        peak_memory_mb, energy_kwh, emissions_kg`` (NaN where not measured), ``n_evaluations, last_step,
        checkpoint, node, error``. A parameter column is ``Int64`` when every value is an int, ``boolean`` when every
        value is a bool, ``float64`` when every value is a float and ``object`` otherwise (strings or a
        mix), so a conditional parameter that is inactive in some trials keeps the dtype of its values.
        """
        import pandas as pd

        records = sorted(self.records, key=lambda r: (r.number, r.trial_id))
        columns = {
            name: _datetime_series(values) if dtype == _DATETIME else pd.Series(values, dtype=dtype)
            for name, (values, dtype) in self._trial_columns(records).items()
        }
        return pd.DataFrame(columns)

    def trials_rows(self, records: Sequence[TrialRecord]) -> tuple[list[str], list[list[Any]]]:
        """The columns of `trials_dataframe` and the rows of ``records`` (in their order) as plain Python values, a
        missing value None, dates in UTC: what a reader that shows a few rows needs, without pandas."""
        columns = self._trial_columns(list(records))
        cells = [
            [None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in values]
            if dtype != _DATETIME
            else [None if v is None else v.astimezone(timezone.utc) for v in values]
            for values, dtype in columns.values()
        ]
        return list(columns), [list(row) for row in zip(*cells)]

    def _trial_columns(self, records: list[TrialRecord]) -> dict[str, tuple[list[Any], str]]:
        """The trials table of ``records``: column name -> (values, pandas dtype), the one declaration of its
        columns."""
        k = len(self.directions)
        objectives = [objective_vector(r.objective, k) or [math.nan] * k for r in records]
        columns: dict[str, tuple[list[Any], str]] = {
            "trial_id": ([str(r.trial_id) for r in records], _TEXT),
            "name": ([str(r.name) for r in records], _TEXT),
            "number": ([int(r.number) for r in records], "int64"),
            "state": ([TrialState(r.state).value for r in records], _TEXT),
            "source": ([str(r.extra.get("source", "search")) for r in records], _TEXT),
            "config_id": ([str(r.extra.get("config_id", r.trial_id)) for r in records], _TEXT),
            "seed": (
                [r.extra["seed"] if type(r.extra.get("seed")) is int else None for r in records],
                "Int64",
            ),
            "fold": (
                [r.extra["fold"] if type(r.extra.get("fold")) is int else None for r in records],
                "Int64",
            ),
        }
        for i, col in enumerate(self.objective_columns):
            columns[col] = ([o[i] for o in objectives], "float64")
        for name in self.param_names:
            values = [plain(r.params.get(name)) for r in records]
            columns[f"params_{name}"] = (values, _param_dtype(values))
        columns["started"] = ([r.started for r in records], _DATETIME)
        columns["finished"] = ([r.finished for r in records], _DATETIME)
        columns["duration_s"] = (
            [math.nan if r.duration_s is None else r.duration_s for r in records],
            "float64",
        )
        for col in COST_COLUMNS:
            columns[col] = ([_number(r.cost.get(col)) for r in records], "float64")
        columns["n_evaluations"] = ([len(r.intermediates) for r in records], "int64")
        columns["last_step"] = ([r.last_step for r in records], "Int64")
        for col in ("checkpoint", "node", "error"):
            columns[col] = (
                [None if getattr(r, col) is None else str(getattr(r, col)) for r in records],
                _TEXT,
            )
        return columns

    def config_summary(self) -> pd.DataFrame:
        """Per configuration (runs grouped by ``config_id``): mean, std, count, 95% interval (`hpsearch.reevaluate`)."""
        from hpsearch.reevaluate import summary_dataframe

        return summary_dataframe(self)

    def intermediates_dataframe(self) -> pd.DataFrame:
        """One row per evaluation: ``trial_id, step, epoch``, the objective column(s), then every metric.

        Metric columns are the union of the metric names (sorted); a metric whose name collides with one
        of the leading columns (e.g. ``epoch``) is renamed ``metric_<name>``.
        """
        import pandas as pd

        k = len(self.directions)
        fixed = ["trial_id", "step", "epoch", *self.objective_columns]
        rows = [
            (r.trial_id, ev)
            for r in sorted(self.records, key=lambda r: (r.number, r.trial_id))
            for ev in r.intermediates
        ]
        metric_names = sorted({m for _, ev in rows for m in ev.metrics})
        columns: dict[str, Any] = {
            "trial_id": pd.Series([str(tid) for tid, _ in rows], dtype=_TEXT),
            "step": pd.Series([int(ev.step) for _, ev in rows], dtype="int64"),
            "epoch": pd.Series(
                [math.nan if ev.epoch is None else ev.epoch for _, ev in rows], dtype="float64"
            ),
        }
        objectives = [objective_vector(ev.objective, k) or [math.nan] * k for _, ev in rows]
        for i, col in enumerate(self.objective_columns):
            columns[col] = pd.Series([o[i] for o in objectives], dtype="float64")
        for metric in metric_names:
            values = [plain(ev.metrics.get(metric)) for _, ev in rows]
            numeric = all(
                v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values
            )
            col = f"metric_{metric}" if metric in fixed else metric
            columns[col] = pd.Series(
                [math.nan if v is None else v for v in values] if numeric else values,
                dtype="float64" if numeric else _TEXT,
            )
        return pd.DataFrame(columns)

    # ------------------------------------------------------------------ best / counts

    @property
    def best_trial(self) -> TrialRecord | None:
        """The best COMPLETE trial (earliest on ties); None if no complete trial has an objective.

        Raises:
            ValueError: for a multi-objective search, which has a front rather than a best trial.
        """
        if self.is_multi_objective:
            raise ValueError(
                f"best_trial is defined for a single objective but this search has {len(self.directions)} "
                f"directions {self.directions}; use best_trials (the Pareto front) instead."
            )
        scored = [rv for rv in self.scored_trials() if rv[0].extra.get("source") != _REEVALUATION]
        if not scored:
            return None
        sign = 1.0 if self.directions[0] == "minimize" else -1.0
        return min(scored, key=lambda rv: (sign * rv[1][0], rv[0].number))[0]

    @property
    def best_trials(self) -> list[TrialRecord]:
        """The Pareto front of the COMPLETE trials, sorted by number ([best_trial] for one objective).

        A trial is on the front when no other complete trial is at least as good on every objective and
        strictly better on one. Trials with a NaN objective are never on it.
        """
        if not self.is_multi_objective:
            best = self.best_trial
            return [] if best is None else [best]
        signs = [1.0 if d == "minimize" else -1.0 for d in self.directions]
        scored = [
            (r, [s * v for s, v in zip(signs, values)])
            for r, values in self.scored_trials()
            if r.extra.get("source") != _REEVALUATION
        ]
        front = [
            r
            for r, a in scored
            if not any(
                all(x <= y for x, y in zip(b, a)) and any(x < y for x, y in zip(b, a)) for _, b in scored
            )
        ]
        return sorted(front, key=lambda r: (r.number, r.trial_id))

    def scored_trials(self) -> list[tuple[TrialRecord, list[float]]]:
        """The COMPLETE trials whose objective is known (no NaN), each with its objective vector."""
        out = []
        for record in self.records:
            if record.state != TrialState.COMPLETE or record.extra.get("source") == "warm_start":
                continue  # earlier searches' trials told to this one are never its best run
            values = self.objective_values(record)
            if values is not None and not any(math.isnan(v) for v in values):
                out.append((record, values))
        return out

    def total_cost(self) -> dict[str, float]:
        """The search's cost: ``wall_s`` (sum of trial durations), ``device_hours`` and the sum of every cost column
        over the trials that measured it (NaN when none did)."""
        totals: dict[str, float] = {"wall_s": sum(r.duration_s or 0.0 for r in self.records)}
        for col in COST_COLUMNS:
            values = [_number(r.cost.get(col)) for r in self.records]
            measured = [v for v in values if not math.isnan(v)]
            if col == "peak_memory_mb":
                totals[col] = max(measured) if measured else math.nan
            else:
                totals[col] = sum(measured) if measured else math.nan
        totals["device_hours"] = totals["device_s"] / 3600 if not math.isnan(totals["device_s"]) else math.nan
        return totals

    def counts(self) -> dict[str, int]:
        """Number of trials per state, every state present (``{"COMPLETE": 3, "PRUNED": 1, ...}``)."""
        counts = {state.value: 0 for state in _STATE_ORDER}
        for record in self.records:
            counts[TrialState(record.state).value] += 1
        return counts

    # ------------------------------------------------------------------ persistence

    def save(self, output_dir: str | os.PathLike[str] | None = None) -> str:
        """Write a snapshot into ``output_dir``: ``search.json``, then a new (empty) journal, then the CSV exports.

        ``search.json`` is written to a temporary file in the same folder, flushed, fsynced and renamed over the
        old one, so a search killed at any moment leaves a complete file (the previous or the new version); it
        goes first because it is what `load` reads, and it names the journal started after it (see
        ``hpsearch._journal``: a journal that search.json does not name is older and ignored). The CSVs are exports,
        replaced the same way, not fsynced. A running search appends each trial to the journal instead
        (`record_trial`) and calls this only now and then.

        Returns:
            The folder written to.
        """
        target = output_dir if output_dir is not None else self.output_dir
        if target is None:
            raise ValueError(
                "SearchResult.save needs a folder but output_dir is None; pass save(output_dir=...) or set "
                "result.output_dir."
            )
        return self._write(Path(target), durable=True)

    def record_trial(self, output_dir: str | os.PathLike[str], record: TrialRecord) -> str:
        """Persist ``record`` (already in `records`) as a running search does after each trial (the session calls
        this; `save` is for a whole result), in O(1): one journal line, not fsynced (only a power cut could lose it; the engine's durable store, from which a resume rebuilds
        the results, covers that; the search's last save is durable). A snapshot when `SnapshotSchedule` says so, or
        when this folder has no journal of ours (none yet, or another writer replaced or extended it). Returns the
        record's JSON text (the event feed reuses it)."""
        folder = Path(output_dir)
        line = self._record_json(record)
        writer = self._journal
        if writer is None or writer.folder != folder or not writer.intact():
            self._write(folder, durable=False)
            return line
        writer.append(line, self._journal_meta())
        since = time.monotonic() - writer.snapshot_at
        if self._schedule.due(writer.seq, len(self.records), since, writer.snapshot_cost_s):
            self._write(folder, durable=False)
        return line

    def _write(self, folder: Path, durable: bool) -> str:
        start = time.monotonic()
        folder.mkdir(parents=True, exist_ok=True)
        writer = JournalWriter(folder)
        atomic_write_text(folder / SEARCH_FILE, self._to_json_text(writer.reference()), durable=durable)
        writer.start(self._journal_meta(), durable=durable)
        CsvExports.write(
            folder, self.records, len(self.directions), tuple(self.param_names), self.objective_columns
        )
        writer.snapshot_at = time.monotonic()
        writer.snapshot_cost_s = writer.snapshot_at - start
        self._journal = writer
        return str(folder)

    def _record_json(
        self, record: TrialRecord
    ) -> str:  # one compact line, as search.json and the journal store it
        return json.dumps(record.to_dict(), separators=(",", ":"), default=json_default)

    def _journal_meta(
        self,
    ) -> dict[str, Any]:  # the header fields a journal line updates (`_journal.JOURNAL_META`)
        return {
            "started": _iso(self.started),
            "finished": _iso(self.finished),
            "n_trials": self.n_trials,
            "settings": self.settings,
        }

    def _to_json_text(self, journal: dict[str, Any] | None = None) -> str:
        meta = {
            "format": "hpsearch.search",
            "format_version": FORMAT_VERSION,
            "backend": self.backend,
            "directions": self.directions,
            "objective": self.objective,
            "n_trials": self.n_trials,
            "space": self.space,
            "started": _iso(self.started),
            "finished": _iso(self.finished),
            "saved": datetime.now(timezone.utc).isoformat(),
            "counts": self.counts(),
            "settings": self.settings,
            "versions": self.versions,
            "journal": journal,
        }
        # The header is indented for people; records go one per line (diffs of two saves show which trials changed).
        head = json.dumps(meta, indent=2, default=json_default)
        records = ",\n".join("    " + self._record_json(r) for r in self.records)
        body = f'"records": [\n{records}\n  ]' if records else '"records": []'
        return f"{head[:-2]},\n  {body}\n}}\n"

    @classmethod
    def load(cls, output_dir: str | os.PathLike[str]) -> SearchResult:
        """Rebuild a saved search from ``output_dir``: its snapshot ``search.json`` and the journal lines newer than
        it (``search.journal.jsonl``, see ``hpsearch._journal`` for the rule), with no backend installed.

        Raises:
            FileNotFoundError: when ``search.json`` is missing.
            ValueError: when it is not a readable search file, or its journal is not a readable journal of a version
                this hpsearch reads (names the file and what is wrong). A journal's torn last line is only a warning.
        """
        path = Path(output_dir) / SEARCH_FILE
        if not path.is_file():
            raise FileNotFoundError(
                f"Cannot load a search from {os.fspath(output_dir)!r}: {os.fspath(path)!r} does not exist. "
                "Point load() at the output_dir of a search (it holds search.json, trials.csv, intermediates.csv)."
            )
        try:
            with open(path, "rb") as handle:
                snapshot = _stamp(os.fstat(handle.fileno()))
                text = handle.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{os.fspath(path)!r} is not valid JSON ({exc}); the file is corrupt.") from exc
        data = _parse(text, os.fspath(path))
        entries = read_journal(Path(output_dir), data.get("journal"))
        source = os.fspath(path)
        if entries:
            apply_journal(data, entries)
            source = f"{source} (with {JOURNAL_FILE})"
        result = cls._from_data(data, output_dir, source)
        result._loaded = (snapshot, len(entries))
        return result

    def refresh_exports(self) -> bool:
        """Rewrite ``trials.csv`` and ``intermediates.csv`` in `output_dir` from this loaded result when its journal
        held trials that those exports (the last snapshot's) lack: a search killed between two snapshots then has
        every recorded trial in its CSVs too. Only the exports are written (never ``search.json`` or the journal),
        and only while ``search.json`` is still the file `load` read (a running search's newer snapshot wins).

        Returns:
            True when the CSVs were rewritten; False when there was nothing to add, the result was not loaded from
            a folder, search.json changed since, or the folder is not writable (the CSVs stay as they were).
        """
        if self._loaded is None or self._loaded[1] == 0 or self.output_dir is None:
            return False
        folder = Path(self.output_dir)
        try:
            if _stamp(os.stat(folder / SEARCH_FILE)) != self._loaded[0]:
                return False
            CsvExports.write(
                folder, self.records, len(self.directions), tuple(self.param_names), self.objective_columns
            )
        except OSError:
            return False
        self._loaded = (self._loaded[0], 0)
        return True

    @classmethod
    def from_json(
        cls, text: str, output_dir: str | os.PathLike[str] | None = None, source: str = "search.json"
    ) -> SearchResult:
        """A search from the text of a ``search.json`` alone (`ValueError` naming ``source`` when it is not one)."""
        return cls._from_data(_parse(text, source), output_dir, source)

    @classmethod
    def _from_data(
        cls, data: dict[str, Any], output_dir: str | os.PathLike[str] | None, path: str
    ) -> SearchResult:
        try:
            records = [TrialRecord.from_dict(r) for r in data["records"]]
            return cls(
                backend=data["backend"],
                directions=list(data["directions"]),
                records=records,
                space=data.get("space"),
                n_trials=_count(data.get("n_trials")),
                objective=data.get("objective", "default"),
                started=_from_iso(data.get("started")),
                finished=_from_iso(data.get("finished")),
                output_dir=os.fspath(output_dir) if output_dir is not None else None,
                settings=_mapping(data.get("settings"), "settings"),
                versions=_mapping(data.get("versions"), "versions"),
            )
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
            detail = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ValueError(f"{path!r} is corrupt or incomplete: {detail}.") from exc

    def __repr__(self) -> str:
        counts = ", ".join(f"{n} {s}" for s, n in self.counts().items() if n)
        best = ""
        if not self.is_multi_objective:
            trial = self.best_trial
            values = self.objective_values(trial) if trial is not None else None
            if trial is not None and values is not None:  # best_trial only picks trials with an objective
                best = f", best={values[0]:.6g} ({trial.name})"
        else:
            best = f", pareto={len(self.best_trials)}"
        return (
            f"SearchResult(backend={self.backend!r}, directions={self.directions}, "
            f"trials={len(self.records)}{' (' + counts + ')' if counts else ''}{best})"
        )


# ---------------------------------------------------------------------- helpers


def _parse(text: str, path: str) -> dict[str, Any]:
    """The JSON object of a search.json, checked to be one this hpsearch reads (ValueError naming ``path``)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path!r} is not valid JSON ({exc}); the file is corrupt.") from exc
    except RecursionError:  # values nested thousands deep: no search wrote them
        raise ValueError(f"{path!r} nests its values too deeply to be read; the file is corrupt.") from None
    if not isinstance(data, dict) or data.get("format") != "hpsearch.search":
        raise ValueError(f"{path!r} is not an hpsearch search file (no 'format': 'hpsearch.search').")
    version = data.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ValueError(
            f"{path!r} has format_version {version!r} but this hpsearch reads versions up to "
            f"{FORMAT_VERSION}; upgrade hpsearch to read it."
        )
    return data


def _stamp(stat: os.stat_result) -> tuple[int, int, int]:
    """What identifies one version of a file: a save replaces search.json (a new inode), and a rewrite in place
    changes its size or modification time."""
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def _param_dtype(values: list[Any]) -> str:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return "boolean"
    if present and all(
        isinstance(v, int) and not isinstance(v, bool) and -_INT64 <= v < _INT64 for v in present
    ):
        return (
            "Int64"  # an int beyond 64 bits (a Categorical or Fixed value may be one) keeps the object dtype
        )
    if present and all(isinstance(v, float) for v in present):
        return "float64"
    return "object"


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a mapping, got {value!r}")
    return value


def _count(value: Any) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(f"n_trials must be a whole number or null, got {value!r}")
    return value


def _datetime_series(values: list[datetime | None]) -> pd.Series:
    import pandas as pd

    # Naive datetimes are read as local time (what datetime.now() means), then everything is UTC.
    utc = [None if v is None else v.astimezone(timezone.utc) for v in values]
    return pd.Series(pd.to_datetime(pd.Series(utc, dtype="object"), utc=True), dtype=_DATETIME)


def _number(value: Any) -> float:
    try:
        return math.nan if value is None else float(value)
    except (TypeError, ValueError):
        return math.nan
