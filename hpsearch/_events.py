"""The live event log of a search: ``OUTPUT_DIR/events.jsonl``, appended to as trials start, evaluate and end.

``search.json`` is rewritten once per finished trial; this log says what happens in between (a trial started,
an evaluation's objective and metrics), so a reader such as ``hpsearch dashboard`` can follow a running search
on any backend by reading files alone. One JSON object per line::

    {"event": "trial_start", "time": ISO, "trial_id", "number", "name", "params"}
    {"event": "evaluation",  "time": ISO, "trial_id", "step", "epoch", "objective", "metrics"}
    {"event": "trial_end",   "time": ISO, "record": <the record as search.json stores it>}

Every event is one ``os.write`` of one whole line on a file opened with ``O_APPEND``, so writers in several
threads or processes (an engine's trials run in threads, or workers on one machine) never interleave their lines, and the
line is in the file (not in a buffer) when the call returns. Only the main process of a multi-process trial
writes. The log is a convenience: a failure to write it is logged once and never reaches training.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ._files import EVENTS_FILE
from ._redact import redact

if TYPE_CHECKING:
    from .trial import Evaluation, TrialRecord

__all__ = ["EVENTS_FILE", "evaluated", "trial_finished", "trial_started"]

logger = logging.getLogger(__name__)

_warned = False


def trial_started(output_dir: str | os.PathLike[str], record: TrialRecord) -> None:
    """Log that the trial of ``record`` started (its id, number, name and parameters)."""
    from .trial import encode_tuples as _encode_tuples

    _append(
        output_dir,
        lambda: {
            "event": "trial_start",
            "time": _now(),
            "trial_id": str(record.trial_id),
            "number": int(record.number),
            "name": str(record.name),
            "params": {k: _encode_tuples(v) for k, v in record.params.items()},
        },
    )


def evaluated(output_dir: str | os.PathLike[str], trial_id: str, evaluation: Evaluation) -> None:
    """Log one evaluation of trial ``trial_id``: its step, epoch, objective and metrics."""
    _append(
        output_dir,
        lambda: {
            "event": "evaluation",
            "time": _now(),
            "trial_id": str(trial_id),
            "step": int(evaluation.step),
            "epoch": evaluation.epoch,
            "objective": evaluation.objective,
            "metrics": evaluation.metrics,
        },
    )


def trial_finished(
    output_dir: str | os.PathLike[str], record: TrialRecord, record_json: str | None = None
) -> None:
    """Log that the trial of ``record`` ended; the record is stored as ``search.json`` stores it (``record_json``:
    that JSON text already made, which is then not encoded a second time)."""
    if record_json is not None:
        _append(
            output_dir, lambda: f'{{"event":"trial_end","time":{json.dumps(_now())},"record":{record_json}}}'
        )
        return
    _append(output_dir, lambda: {"event": "trial_end", "time": _now(), "record": record.to_dict()})


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _append(output_dir: str | os.PathLike[str], build: Any) -> None:
    global _warned
    try:
        from . import _dist

        if not _dist.is_main_process():
            return
        from ._files import json_default as _json_default

        # allow_nan keeps a NaN objective readable by Python's json (the dashboard); default= covers numpy values.
        event = build()
        text = (
            event
            if isinstance(event, str)
            else json.dumps(event, separators=(",", ":"), default=_json_default)
        )
        line = (redact(text) + "\n").encode("utf-8")  # a tracker's error may quote a URL with its password
        path = os.path.join(os.fspath(output_dir), EVENTS_FILE)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except FileNotFoundError:
            os.makedirs(os.fspath(output_dir), exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            # One write per line: with O_APPEND the kernel places it at the end as one piece, so lines written
            # by concurrent processes never interleave (a reader may still see a line's first part alone).
            os.write(fd, line)
        finally:
            os.close(fd)
    except Exception as error:  # the log must never stop a trial
        if not _warned:
            _warned = True
            logger.warning(
                "Could not append to %s in %r (%s); the live dashboard will only see finished trials. "
                "Further failures are not reported.",
                EVENTS_FILE,
                os.fspath(output_dir),
                error,
            )
